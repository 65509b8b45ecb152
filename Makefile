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
	$(GO) run ./cmd/buzz up

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
