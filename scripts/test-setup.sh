#!/usr/bin/env bash
# Prepares what the test suite needs on a fresh machine (Go, gcc, Node 20/npm and git are given):
# Go modules, the pinned staticcheck `make lint` runs, Debian's Chromium for the console's browser
# tests, and the pinned npm ACP adapters for the interop suite. Idempotent: each step is skipped when its result is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

for try in 1 2 3; do
  go mod download && break
  [ "$try" = 3 ] && exit 1
  sleep $((try * 5))
done

./scripts/install-staticcheck.sh

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test-setup: installing chromium"
    for try in 1 2 3; do # a mirror hiccup should not fail the run
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null && break
      [ "$try" = 3 ] && exit 1
      sleep $((try * 5))
    done
  else
    echo "test-setup: chromium not installed and cannot install it here; browser tests will skip"
  fi
fi

./scripts/install-adapters.sh
