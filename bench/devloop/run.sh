#!/usr/bin/env bash
# Builds this repository as a user would, in one run: `go build ./...` warm on the host, then in
# a box with an empty box cache (the first launch after installing agentbox) and again in a new
# box (every later launch); then how long curl, npm, pip, go and git in a box take to fail
# against a host no egressAllow names, against the same tool's start-up (`--version`) in a box.
# Results in docs/benchmarks.md ("Building in a box").
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
export CGO_ENABLED=${CGO_ENABLED:-0}
[ -x bin/agentbox ] && [ -x bin/agentbox-daemon ] && [ -x bin/agentbox-box ] || $GO build -o bin/ ./cmd/agentbox ./cmd/agentbox-daemon ./cmd/agentbox-box
ab=$PWD/bin/agentbox
tmp=$(mktemp -d /tmp/abdev.XXXXXX)
chmod 700 "$tmp"
mkdir -m 700 "$tmp/rt" "$tmp/st" "$tmp/cfg"
# A fresh agentbox user: its own daemon and an empty box cache; the host's caches are the user's.
export XDG_RUNTIME_DIR=$tmp/rt XDG_STATE_HOME=$tmp/st XDG_CONFIG_HOME=$tmp/cfg
trap '"$ab" daemon stop >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

ms() { # ms CMD…: runs CMD, prints its wall time in ms; fails when CMD fails
  local s e
  s=$(date +%s%N)
  "$@" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; return 1; }
  e=$(date +%s%N)
  echo $(((e - s) / 1000000))
}
"$ab" run true >/dev/null # starts the daemon: not part of any measurement
echo "## Building in a box ($(date -u +%F), $(nproc) cores, $(uname -r), $($GO version | cut -d' ' -f3))"
$GO build -o /dev/null ./... # warms the host's build cache
host=$(ms $GO build -o /dev/null ./...)
first=$(ms "$ab" run --workspace "$PWD" sh -- -c 'go build -o /dev/null ./...')
second=$(ms "$ab" run --workspace "$PWD" sh -- -c 'go build -o /dev/null ./...')
echo "| go build ./... (this repository) | host warm | first boxed | second boxed | second / host |"
echo "|---|---|---|---|---|"
echo "| ms | $host | $first | $second | $(awk "BEGIN{printf \"%.2f\", $second/$host}") |"
echo
echo "## Time to fail against a denied host (egress deny, no egressAllow), in the box"
echo "| tool | fails after (ms) | its start-up, --version (ms) |"
echo "|---|---|---|"
intime() { # intime SCRIPT: the script's own time in the box, in ms (the launch not counted)
  "$ab" run sh -- -c 's=$(date +%s%N); ( '"$1"' ) >/dev/null 2>&1; echo $(( ($(date +%s%N) - s) / 1000000 ))' 2>/dev/null | tail -1
}
for t in \
  "curl|curl -sS https://denied.example.org/|curl --version" \
  "npm|npm_config_registry=https://registry.example.org/ npm view left-pad version|npm --version" \
  "pip|/usr/bin/python3 -m pip download --no-deps -d /tmp/dl --index-url https://pypi.example.org/simple tiny-pkg|/usr/bin/python3 -m pip --version" \
  "go|cd /tmp && GOPROXY=https://goproxy.example.org GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local go mod download example.org/mod@v1.0.0|go version" \
  "git|git ls-remote https://git.example.org/owner/repo|git --version"; do
  IFS='|' read -r name fail version <<<"$t"
  echo "| $name | $(intime "$fail") | $(intime "$version") |"
done
