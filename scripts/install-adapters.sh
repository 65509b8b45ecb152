#!/usr/bin/env bash
# Installs the pinned npm ACP adapters the interop suite (internal/interop) runs, each into its own
# directory under a cache root, so CI can keep the cache between runs. Idempotent: an adapter
# already installed at its pinned version is skipped.
#
#   BUZZ_ADAPTER_CACHE  cache root (default $HOME/.cache/buzz-adapters)
#
# Layout: $BUZZ_ADAPTER_CACHE/<dir>/node_modules/<package>/package.json, where <dir> is
#   claude-acp-0.101.0, zed-claude-acp-0.23.1, zed-codex-acp-0.16.0, acp-codex-acp-2.6.0,
#   qwen-code-0.24.4, copilot-1.0.102, opencode-1.18.33, opencode-plugin-1.18.33, gemini-cli-0.61.0
# (internal/interop finds the adapters by the same names).
set -euo pipefail

root="${BUZZ_ADAPTER_CACHE:-$HOME/.cache/buzz-adapters}"
mkdir -p "$root"

# dir|package|version — keep in step with internal/interop/stack_test.go.
adapters=(
  "claude-acp-0.101.0|@agentclientprotocol/claude-agent-acp|0.101.0"
  "zed-claude-acp-0.23.1|@zed-industries/claude-agent-acp|0.23.1"
  "zed-codex-acp-0.16.0|@zed-industries/codex-acp|0.16.0"
  "acp-codex-acp-2.6.0|@agentclientprotocol/codex-acp|2.6.0"
  "qwen-code-0.24.4|@qwen-code/qwen-code|0.24.4"
  "copilot-1.0.102|@github/copilot|1.0.102"
  "opencode-1.18.33|opencode-ai|1.18.33"
  # What opencode otherwise installs from npm into its config dir at every start (see
  # internal/interop/opencode_test.go).
  "opencode-plugin-1.18.33|@opencode-ai/plugin|1.18.33"
  "gemini-cli-0.61.0|@google/gemini-cli|0.61.0"
)

installed_version() { # prints the installed version of package $2 in dir $1, or nothing
  local pj="$1/node_modules/$2/package.json"
  [[ -f "$pj" ]] || return 0
  node -e 'process.stdout.write(require(process.argv[1]).version || "")' "$pj"
}

for entry in "${adapters[@]}"; do
  IFS='|' read -r dir pkg ver <<<"$entry"
  dest="$root/$dir"
  if [[ "$(installed_version "$dest" "$pkg")" == "$ver" && -f "$dest/.installed" ]]; then
    echo "install-adapters: $pkg@$ver already in $dest"
    continue
  fi
  echo "install-adapters: installing $pkg@$ver into $dest"
  # Install into a scratch dir and rename, so an interrupted install never looks complete.
  rm -rf "$root/.tmp-$dir".*
  tmp="$(mktemp -d "$root/.tmp-$dir.XXXXXX")"
  (
    cd "$tmp"
    printf '{"name":"buzz-adapter-%s","private":true}\n' "$dir" >package.json
    # A registry hiccup should not fail a whole CI run: three tries.
    for try in 1 2 3; do
      npm install --no-audit --no-fund --loglevel=error "$pkg@$ver" && break
      [[ $try == 3 ]] && exit 1
      echo "install-adapters: npm install failed (try $try); retrying" >&2
      sleep $((try * 5))
    done
  )
  [[ "$(installed_version "$tmp" "$pkg")" == "$ver" ]] || { echo "install-adapters: $pkg@$ver missing after npm install" >&2; exit 1; }
  touch "$tmp/.installed"
  rm -rf "$dest"
  mv "$tmp" "$dest"
done

# opencode-ai's bin/opencode.exe is a placeholder until its postinstall links in the native binary
# of the platform package npm picked (opencode-linux-x64, …): an install without scripts or
# optional dependencies looks complete but cannot run, so check it and drop it if not.
oc="$root/opencode-1.18.33/node_modules/opencode-ai/bin/opencode.exe"
if [[ "$("$oc" --version 2>/dev/null)" != 1.18.33 ]]; then
  echo "install-adapters: $oc does not run as opencode 1.18.33 (postinstall or platform package missing); removed" >&2
  rm -rf "$root/opencode-1.18.33"
  exit 1
fi
