#!/usr/bin/env bash
# Installs staticcheck at the pinned version into GOBIN (or GOPATH/bin), where `make lint` looks
# for it. Idempotent: a binary already at the pinned version is kept.
#
# The pin: staticcheck 2026.2.2 (module version v0.8.2), a release built for Go 1.26; older
# releases cannot load packages written for a newer Go than they know.
set -euo pipefail

version=v0.8.2
bin="$(go env GOBIN)"
bin="${bin:-$(go env GOPATH)/bin}"

if "$bin/staticcheck" -version 2>/dev/null | grep -qF "(${version#v})"; then
  exit 0
fi
echo "install-staticcheck: installing staticcheck $version into $bin"
for try in 1 2 3; do # a proxy hiccup should not fail the run
  GOBIN="$bin" go install "honnef.co/go/tools/cmd/staticcheck@$version" && exit 0
  [ "$try" = 3 ] && exit 1
  sleep $((try * 5))
done
