#!/usr/bin/env bash
# install-agents.sh — fetch real agent CLIs from the npm registry for the end-to-end agent tests.
#
#   scripts/install-agents.sh [DIR]      (default: $AGENTBOX_AGENTS_DIR, else ./.agents)
#
# Each package is fetched with `npm pack` (no install scripts run) and unpacked into
# DIR/<name>/; the executables are linked into DIR/bin. Then run the tests with
#   AGENTBOX_AGENTS_DIR=DIR go test ./test/e2e -run TestRealAgents
# Nothing is installed system-wide and no vendor binary is committed.
set -euo pipefail

dir="${1:-${AGENTBOX_AGENTS_DIR:-$PWD/.agents}}"
mkdir -p "$dir/bin" "$dir/pack"
dir="$(cd "$dir" && pwd)"

arch="$(uname -m)"
case "$arch" in
  x86_64) npmarch=x64 triple=x86_64-unknown-linux-musl ;;
  aarch64|arm64) npmarch=arm64 triple=aarch64-unknown-linux-musl ;;
  *) echo "install-agents: unsupported architecture $arch" >&2; exit 1 ;;
esac

# Codex CLI's native build is a version of @openai/codex itself ("0.171.0-linux-x64", what
# @openai/codex's optional dependency @openai/codex-linux-x64 aliases), so the version is
# looked up first; when the registry is unreachable the pack below fails and codex is skipped.
codexver="$(npm view @openai/codex version 2>/dev/null || true)"

# name  package  executable-inside-the-package
# Each is a self-contained build: Claude Code, OpenCode, Codex CLI and Copilot CLI ship native
# executables; Gemini CLI is one bundled script run by node (>= 20) from PATH.
agents=(
  "claude   @anthropic-ai/claude-code-linux-$npmarch  claude"
  "opencode opencode-linux-$npmarch                   bin/opencode"
  "codex    @openai/codex@${codexver:-unknown}-linux-$npmarch  vendor/$triple/bin/codex"
  "copilot  @github/copilot-linux-$npmarch            copilot"
  "gemini   @google/gemini-cli                        bundle/gemini.js"
)

status=0
for line in "${agents[@]}"; do
  read -r name pkg exe <<<"$line"
  if [[ -x "$dir/$name/package/$exe" ]]; then
    echo "install-agents: $name already in $dir/$name"
  else
    echo "install-agents: npm pack $pkg"
    if ! tgz="$(cd "$dir/pack" && npm pack --loglevel=error "$pkg" 2>"$dir/pack/$name.err" | tail -n1)" || [[ -z "$tgz" ]]; then
      why="$(grep -m2 -E '^npm error (code |[A-Za-z]+Error: |404 )' "$dir/pack/$name.err" | sed 's/^npm error //' | paste -sd';' || true)"
      code="$(sed -n 's/^npm error code \([A-Za-z0-9_]*\).*/\1/p' "$dir/pack/$name.err" | head -n1)"
      case "$code" in
      # The registry or the way to it failed: the tests of $name skip naming this
      # (internal/testenv: AgentCLI). Any other failure (no npm, a local error) leaves no note,
      # and a missing CLI fails them where AGENTBOX_AGENTS_REQUIRED=1 (.ci/run).
      E404 | ETARGET | ECONNREFUSED | ECONNRESET | ETIMEDOUT | ENOTFOUND | EAI_AGAIN | EHOSTUNREACH | ENETUNREACH | E5[0-9][0-9] | ERR_SOCKET_TIMEOUT)
        echo "npm pack $pkg failed: $why" >"$dir/$name.unavailable"
        echo "install-agents: $pkg is not available from the registry ($why); skipping $name" >&2 ;;
      *)
        echo "install-agents: npm pack $pkg failed (${why:-$(tail -n1 "$dir/pack/$name.err")}); the tests of $name fail without it" >&2
        status=1 ;;
      esac
      continue
    fi
    rm -f "$dir/$name.unavailable" "$dir/pack/$name.err"
    rm -rf "$dir/$name"
    mkdir -p "$dir/$name"
    tar -xzf "$dir/pack/$tgz" -C "$dir/$name"
    rm -f "$dir/pack/$tgz"
  fi
  if [[ -x "$dir/$name/package/$exe" ]]; then
    ln -sfn "$dir/$name/package/$exe" "$dir/bin/$name"
    rm -f "$dir/$name.unavailable"
    echo "install-agents: $dir/bin/$name -> $("$dir/bin/$name" --version 2>/dev/null | head -n1 || echo '?')"
  else
    # The package's layout changed: not the registry's failure, so no note; its tests fail.
    echo "install-agents: $pkg has no $exe; the tests of $name fail without it" >&2
    status=1
  fi
done
exit $status
