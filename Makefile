# The README's commands. `make test` is what CI runs (.ci/run): it prepares what the tests need,
# runs the static checks, then the whole suite with the race detector.
GO ?= go
# scripts/install-staticcheck.sh puts the pinned staticcheck here.
STATICCHECK ?= $(or $(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin)/staticcheck

.PHONY: test test-setup lint build up bench soak bench-peers

# test-setup, then lint, then the tests: one at a time, even under -j, so a setup failure stops
# the run before anything else starts and outputs do not interleave. scripts/test.sh runs the
# suite under scripts/with-pg.sh, which starts a throwaway PostgreSQL cluster for the PostgreSQL
# store tests, and says how it keeps the run short.
.NOTPARALLEL: test

test: test-setup lint
	GO=$(GO) ./scripts/test.sh

# Static checks; each fails the run when it reports anything.
lint:
	@$(GO) mod tidy -diff || { echo "lint: go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	@files="$$(gofmt -l .)"; if [ -n "$$files" ]; then echo "$$files"; echo "lint: files above need gofmt -w"; exit 1; fi
	$(GO) vet ./...
	@./scripts/install-staticcheck.sh
	$(STATICCHECK) ./...

test-setup:
	./scripts/test-setup.sh

build:
	$(GO) build -o bin/ ./cmd/...

up:
	@echo "compiling buzz (the first build takes a few minutes and prints nothing) ..."
	$(GO) run ./cmd/buzz up

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./internal/harness/ ./internal/prompt/
	$(GO) test -run '^$$' -bench . -benchmem ./internal/relay/ ./internal/sessionstore/ ./internal/journal/ ./internal/observer/

# The issue-size crash soak: 200 mentions over 10 channels from 3 senders while buzz-acp is
# SIGKILLed 10 times and its agent 10 times, with a relay restart. Prints the counts.
soak:
	BUZZ_SOAK=full BUZZ_SOAK_REPORT=soak-report.txt $(GO) test -count=1 -run TestSoakNothingLost -v -timeout 20m ./internal/harness/
	@cat internal/harness/soak-report.txt

# Our relay next to khatru (SQLite) and a verify-only WebSocket server, 3 fresh runs each, in one
# run; prints medians and ratios (docs/benchmarks.md, section Peers). bench/peers is its own module
# so the main go.mod does not carry khatru. About 2–4 minutes on two cores.
bench-peers:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(GO) build -o "$$tmp/buzz-relay" ./cmd/buzz-relay && \
	(cd bench/peers && $(GO) build -o "$$tmp/" ./cmd/...) && \
	"$$tmp/bench-peers" -ours "$$tmp/buzz-relay" -khatru "$$tmp/khatru-sqlite" -bare "$$tmp/bare-relay" \
		$${BUZZ_TEST_DATABASE_URL:+-pg "$$BUZZ_TEST_DATABASE_URL"} $(BENCH_PEERS_FLAGS)
