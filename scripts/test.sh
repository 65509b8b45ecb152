#!/usr/bin/env bash
# The test step of `make test`: the whole suite with the race detector, under scripts/with-pg.sh
# (a throwaway PostgreSQL cluster for the PostgreSQL tests). Arguments go to `go test`.
#
# - The binaries the end-to-end tests run (buzz, buzz-acp, the test agent, ...) are race-built
#   once, here, for every test process (internal/testbin's BUZZ_TESTBIN_DIR), instead of being
#   linked again by each package that runs them.
# - internal/harness is named first: its test binary runs longest, so it starts first.
# - TEST_PARALLEL (default 8) tests of a package at once: most end-to-end tests spend their time
#   waiting on processes, so more of them run than there are cores.
# - Two kinds of outside code are compiled without the race detector's instrumentation, as it
#   checks no code of ours there and multiplies their cost: SQLite (modernc.org/sqlite/lib, C
#   translated to Go, under every relay; it doubled) and the curve and cipher arithmetic every
#   event's signature and every NIP-44 payload goes through (secp256k1, btcec, x/crypto: a
#   signature check 1.5 ms instead of 0.08 ms, in the test process's relay and in every race-built
#   buzz-acp). Our code, the SQLite driver and its libc stay instrumented.
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}

bin=$(mktemp -d /tmp/buzz-testbin-shared.XXXXXX)
trap 'rm -rf "$bin"' EXIT
uninstrumented=(modernc.org/sqlite/lib github.com/decred/dcrd/... github.com/btcsuite/btcd/... golang.org/x/crypto/...)
for p in "${uninstrumented[@]}"; do
  GOFLAGS="${GOFLAGS:+$GOFLAGS }-gcflags=$p=-race=false"
done
export GOFLAGS

echo "test: go build -race ./cmd/... ./internal/testagent ./internal/acpceiling" >&2
"$go" build -race -o "$bin/" ./cmd/... ./internal/testagent ./internal/acpceiling
BUZZ_TESTBIN_DIR=$bin ./scripts/with-pg.sh "$go" test -race -count=1 -parallel "${TEST_PARALLEL:-8}" \
  -timeout 30m "$@" ./internal/harness/ ./...
