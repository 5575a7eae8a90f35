#!/usr/bin/env bash
# bench/devloop/pyenv.sh BASE NEW: a toolchain Python's first run in a fresh workspace, in
# alternating pairs of two agentbox binaries (BASE, the code before a change, then NEW), each
# with a daemon and state of its own: `python3 -m pip --version` through the user's PATH (a
# pyenv shim, when ~/.pyenv/shims is on it), in a new workspace (a new box cache), then again
# in a new box of that workspace. Prints, per pair and binary, the wall and CPU (user+sys) time
# inside the box in ms, the whole launch's wall, and the load. N pairs (default 3). Results in
# docs/benchmarks.md ("A pyenv Python's first run in a workspace").
set -euo pipefail
BASE=$1 NEW=$2 N=${N:-3}
t=$(mktemp -d /tmp/pyb.XXXXXX); chmod 700 $t
for s in base new; do mkdir -m 700 -p $t/$s/rt $t/$s/st $t/$s/cfg; done
ab() { local s=$1; shift; XDG_RUNTIME_DIR=$t/$s/rt XDG_STATE_HOME=$t/$s/st XDG_CONFIG_HOME=$t/$s/cfg "$@"; }
trap 'ab base $BASE daemon stop >/dev/null 2>&1; ab new $NEW daemon stop >/dev/null 2>&1; rm -rf $t' EXIT
ab base $BASE run true >/dev/null # starts the daemons: not measured
ab new $NEW run true >/dev/null
tck=$(getconf CLK_TCK)
cmd='s=$(date +%s%N); python3 -c "import sys; print(sys.version.split()[0])" >&2; python3 -m pip --version >/dev/null; e=$(date +%s%N); t=$(awk "{print \$16+\$17}" /proc/$$/stat); echo "$(( (e-s)/1000000 )) $((t*1000/'$tck'))"'
for i in $(seq 1 $N); do
  for s in base new; do
    ws=$t/ws-$s-$i; mkdir -p $ws
    b=$BASE; [ $s = new ] && b=$NEW
    w0=$(date +%s%N)
    out=$(cd $ws && ab $s $b run --workspace $ws bash -- -c "$cmd" 2>$t/err | tail -1)
    w1=$(date +%s%N)
    out2=$(cd $ws && ab $s $b run --workspace $ws bash -- -c "$cmd" 2>/dev/null | tail -1)
    echo "$s pair$i first: inside/CPU $out (launch whole $(( (w1-w0)/1000000 ))) second: $out2 load $(cut -d' ' -f1 /proc/loadavg) py $(head -1 $t/err)"
  done
done
