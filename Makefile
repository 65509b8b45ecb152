# The README's commands. `make test` is what CI runs (.ci/run): it prepares what the tests need,
# then runs the whole suite with the race detector.
GO ?= go

.PHONY: test test-setup build up bench soak

test: test-setup
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m ./...

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
