#!/usr/bin/env bash
# Prepares what the test suite needs on a fresh machine (Go, gcc, Node 20/npm and git are given):
# Go modules, Debian's Chromium for the console's browser tests, and the pinned npm ACP adapters
# for the interop suite. Idempotent: each step is skipped when its result is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

go mod download

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test-setup: installing chromium"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "test-setup: chromium not installed and cannot install it here; browser tests will skip"
  fi
fi

./scripts/install-adapters.sh
