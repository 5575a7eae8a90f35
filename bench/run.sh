#!/usr/bin/env bash
# Runs the benchmarks whose results are recorded in docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
export CGO_ENABLED=${CGO_ENABLED:-0} # no cgo: static binaries, as `make build` makes them
[ -x bin/agentbox ] && [ -x bin/agentbox-daemon ] && [ -x bin/agentbox-box ] || $GO build -o bin/ ./cmd/agentbox ./cmd/agentbox-daemon ./cmd/agentbox-box
echo "## Box start-up ($(date -u '+%F %H:%M UTC'), $(nproc) cores, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg))"
$GO run ./bench/startup -n "${N:-100}"
echo
$GO run ./bench/startup -n "${N:-100}" -gap 250ms
echo
# bwrap and agentbox alternating within each round (and BASE, another build's bin/agentbox,
# the code before a change, with its own daemon; and bwrap with the argv agentbox's own bwrap
# engine renders for the same plan), with the floors in the same rounds (a Go no-op, agentbox
# --version, a Go client and server, a prestarted box of the native engine alone) and the
# stages of each agentbox's median launch, its end included: on a loaded machine only these
# ratios mean anything.
# CACHES=1: the bench's home holds a developer's package caches (-caches), so that each box
# mounts the box cache's overlays, as a developer's does.
$GO run ./bench/startup -pairs -like -n "${N:-100}" -gap 100ms ${BASE:+-base "$BASE"} ${CACHES:+-caches}
echo
echo "## Box start to program exec inside the shim (native engine)"
$GO test -run XXX -bench "StartToExec|PrestartedToExec" -benchtime "${N:-100}x" ./internal/engine/native | grep Benchmark
if [ "$(id -u)" = 0 ]; then
  echo
  echo "## Root-run box as an unused host uid with idmapped binds (prototype)"
  $GO run ./bench/idmap
fi
