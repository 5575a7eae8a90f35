#!/usr/bin/env bash
# Times a boxed `copilot --version` (Copilot CLI's loader resolves its package and extracts the
# 235 MB it carries when ~/.cache/copilot has no extraction of its version), as a fresh
# agentbox user with a home of its own: in a new workspace while the host has no extraction
# (the first box of a workspace), again in that workspace (its later boxes), and in a new
# workspace once the host's own `copilot --version` has extracted it. REPS (default 3) rounds.
# BASE=DIR (another build's bin/, the code before a change) runs the same with its binaries
# first, in the same run. Results in docs/benchmarks.md ("Copilot's extracted package").
#
#	bench/copilotcache/run.sh /opt/agentbox-ci-agents/bin/copilot
set -euo pipefail
copilot=${1:?usage: bench/copilotcache/run.sh PATH/TO/copilot}
cd "$(dirname "$0")/../.."
export CGO_ENABLED=${CGO_ENABLED:-0}
[ -x bin/agentbox ] && [ -x bin/agentbox-daemon ] && [ -x bin/agentbox-box ] || ${GO:-go} build -o bin/ ./cmd/agentbox ./cmd/agentbox-daemon ./cmd/agentbox-box
export PATH=$(dirname "$copilot"):$PATH
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u '+%F %H:%M UTC')"
bench() { # bench BINDIR LABEL
  local bin=$1 root
  root=$(mktemp -d /tmp/abcop.XXXXXX)
  (
    export HOME=$root/home XDG_RUNTIME_DIR=$root/run XDG_STATE_HOME=$root/state XDG_CONFIG_HOME=$root/config
    mkdir -m 700 "$HOME" "$XDG_RUNTIME_DIR" "$XDG_STATE_HOME" "$XDG_CONFIG_HOME" "$XDG_CONFIG_HOME/agentbox"
    echo sk-bench >"$HOME/a.key"; chmod 600 "$HOME/a.key"
    printf 'gateway:\n  anthropic:\n    url: http://127.0.0.1:9\n    credential:\n      file: %s\nmodels:\n  copilot: claude-sonnet-4.5\n' "$HOME/a.key" >"$XDG_CONFIG_HOME/agentbox/config.yaml"
    trap '"$bin/agentbox" daemon stop >/dev/null 2>&1 || true; rm -rf "$root"' EXIT
    t() { # t WORKSPACE: the boxed copilot --version's wall time in ms
      local s; s=$(date +%s%N)
      (cd "$1" && "$bin/agentbox" run copilot -- --version >/dev/null 2>&1)
      echo $((($(date +%s%N) - s) / 1000000))
    }
    mkdir "$root/w0"; t "$root/w0" >/dev/null # the daemon starts
    local first=() again=() hosted=()
    for i in $(seq "${REPS:-3}"); do
      mkdir "$root/a$i"; first+=("$(t "$root/a$i")"); again+=("$(t "$root/a$i")")
    done
    copilot --version >/dev/null
    for i in $(seq "${REPS:-3}"); do mkdir "$root/b$i"; hosted+=("$(t "$root/b$i")"); done
    echo "| $2 | ${first[*]} | ${again[*]} | ${hosted[*]} |"
  )
}
echo "| boxed \`copilot --version\`, ms per run | new workspace, no host extraction | same workspace again | new workspace, host extracted |"
echo "|---|---|---|---|"
[ -n "${BASE:-}" ] && bench "$BASE" "before (BASE)"
bench "$PWD/bin" "this build"
