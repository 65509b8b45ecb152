#!/usr/bin/env bash
# Prepares what the test suite needs on a fresh machine (Go, gcc, Node 20/npm and git are given).
# Idempotent: each step is skipped when its result is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
go mod download
