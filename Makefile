# The README's commands. `make test` is what CI runs (.ci/run): it prepares what the tests need,
# then runs the whole suite with the race detector.
GO ?= go

.PHONY: test test-setup build up bench soak bench-peers

test: test-setup
	$(GO) vet ./...
	./scripts/with-pg.sh $(GO) test -race -count=1 -timeout 30m ./...

test-setup:
	./scripts/test-setup.sh

build:
	$(GO) build -o bin/ ./cmd/...

up:
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
	"$$tmp/bench-peers" -ours "$$tmp/buzz-relay" -khatru "$$tmp/khatru-sqlite" -bare "$$tmp/bare-relay" $(BENCH_PEERS_FLAGS)
