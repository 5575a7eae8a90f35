#!/usr/bin/env bash
# A file- and process-heavy shell workload in a box against the same on the host, in one run
# (issue #23): 50 mkdirs, 5,000 small files written, find, grep -r, and git add -A && git commit
# of the result, each time in a fresh git repository. PAIRS (default 10) pairs alternate bare
# and boxed (the order rotated each pair); each is timed whole (the box's launch included) and
# inside the shell that runs the work (in the box: without the launch). Then GOPAIRS (default
# 3) pairs of this repository's `go build ./...` with a warm build cache, bare against boxed
# (the box keeps its own warm cache between boxes of the same workspace: one boxed build
# before the pairs warms it). Prints medians, the median of the pairs' ratios and the load
# average at the start and the end, for docs/benchmarks.md ("Work inside a box"). BASE, another
# build's bin/agentbox (the code before a change), adds its boxed run to each round of the
# file workload, with a daemon of its own. For the boxed runs it also prints the CPU the
# daemon used meanwhile (its integrity watch of the workspace, the check at exit: host CPU
# beside the box, /proc/PID/stat), and the check at exit's duration (the daemon's log).
#
# A box's program runs in a session of its own (the daemon starts each shim with setsid), and
# with the kernel's autogroup scheduling (/proc/sys/kernel/sched_autogroup_enabled = 1, the
# default) every session is a scheduling group of its own that gets an equal share of a busy
# CPU, whatever else runs in the session that ran `agentbox run`. A bare command run from this
# script shares the caller's session, and its share, with everything else that session runs.
# So each round also runs the work bare in a session of its own (setsid: "bare, own session"),
# the like-for-like comparison for the box on a loaded machine; "bare" is the work as a user's
# shell runs it.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
GO=${GO:-go}
export CGO_ENABLED=${CGO_ENABLED:-0}
[ -x bin/agentbox ] && [ -x bin/agentbox-daemon ] && [ -x bin/agentbox-box ] || $GO build -o bin/ ./cmd/agentbox ./cmd/agentbox-daemon ./cmd/agentbox-box
ab=${AGENTBOX:-$PWD/bin/agentbox}
PAIRS=${PAIRS:-10}
GOPAIRS=${GOPAIRS:-3}
# WORKDIR (default /tmp) is where the work's repositories are made: on /dev/shm (a tmpfs) the
# file system's own cost is small and what the box adds shows; on a disk's file system it is
# measured against that file system's cost too.
tmp=$(mktemp -d "${WORKDIR:-/tmp}/abfile.XXXXXX")
chmod 755 "$tmp"
mkdir -m 700 "$tmp/rt" "$tmp/st" "$tmp/cfg" "$tmp/rt0" "$tmp/st0"
# The bare go builds keep the user's Go settings ($XDG_CONFIG_HOME/go/env: GOFLAGS, …), which
# the agentbox folders below would otherwise hide from them.
GOENV=$($GO env GOENV)
export GOENV
export XDG_RUNTIME_DIR=$tmp/rt XDG_STATE_HOME=$tmp/st XDG_CONFIG_HOME=$tmp/cfg
BASE=${BASE:-}
base() { XDG_RUNTIME_DIR=$tmp/rt0 XDG_STATE_HOME=$tmp/st0 "$BASE" "$@"; }
trap '"$ab" daemon stop >/dev/null 2>&1 || true; [ -z "$BASE" ] || base daemon stop >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

# The work; it prints its own duration in ns, measured inside the shell that runs it.
work='s=$(date +%s%N)
i=0; while [ $i -lt 50 ]; do mkdir d$i; i=$((i+1)); done
i=0; while [ $i -lt 5000 ]; do echo "line $i needle" > d$((i % 50))/f$i.txt; i=$((i+1)); done
[ "$(find . -path ./.git -prune -o -type f -print | wc -l)" = 5000 ] || exit 3
[ "$(grep -r needle d* | wc -l)" = 5000 ] || exit 4
git add -A && git -c user.name=bench -c user.email=bench@example.org commit -qm work || exit 5
e=$(date +%s%N); echo "inner $(( (e - s) / 1000 ))"'

fresh() { # fresh DIR: an empty git repository
  rm -rf "$1"
  mkdir -p "$1"
  git -C "$1" init -q
}
now() { date +%s%N; }
declare -a bare_w bare_i own_w own_i box_w box_i base_w base_i ratio oratio bratio box_d base_d box_x base_x
# dcpu RUNTIME_DIR: the CPU time (ms) the daemon of that runtime folder has used so far.
dcpu() { awk -v hz="$(getconf CLK_TCK)" '{print int(($14 + $15) * 1000 / hz)}' "/proc/$(cat "$1/agentbox/daemon.pid")/stat"; }
# lastcheck STATE_DIR: the duration of the last check at exit in that daemon's log, in ms.
lastcheck() { (grep 'integrity check (exit)' "$1/agentbox/daemon.log" || true) | tail -1 | sed -n 's/.*took=\([0-9.]*\)\(m\?s\).*/\1 \2/p' | awk '{printf "%.1f", $2 == "s" ? $1 * 1000 : $1}'; }
one() { # one bare|own|box|base N: runs the work once, appends whole and inner µs
  local d=$tmp/w-$1-$2 s e out
  fresh "$d"
  sync
  local d0=0
  case $1 in
  box) d0=$(dcpu "$tmp/rt") ;;
  base) d0=$(dcpu "$tmp/rt0") ;;
  esac
  s=$(now)
  case $1 in
  bare) out=$(cd "$d" && sh -c "$work") ;;
  own) out=$(cd "$d" && setsid -w sh -c "$work") ;;
  box) out=$(cd "$d" && "$ab" run sh -- -c "$work") ;;
  base) out=$(cd "$d" && base run sh -- -c "$work") ;;
  esac
  e=$(now)
  rm -rf "$d"
  local whole=$(((e - s) / 1000)) inner=${out#inner }
  case $1 in
  bare) bare_w+=("$whole"); bare_i+=("$inner") ;;
  own) own_w+=("$whole"); own_i+=("$inner") ;;
  box) box_w+=("$whole"); box_i+=("$inner"); box_d+=($(($(dcpu "$tmp/rt") - d0))); box_x+=("$(lastcheck "$tmp/st")") ;;
  base) base_w+=("$whole"); base_i+=("$inner"); base_d+=($(($(dcpu "$tmp/rt0") - d0))); base_x+=("$(lastcheck "$tmp/st0")") ;;
  esac
}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ms() { awk -v u="$1" 'BEGIN {printf "%.1f", u/1000}'; }

"$ab" run true >/dev/null # starts the daemon: not measured
[ -z "$BASE" ] || base run true >/dev/null
echo "## Work inside a box ($(date -u '+%F %H:%M UTC'), $(nproc) cores, $(uname -r), $(id -un), in $(df --output=fstype "$tmp" | tail -1) at ${WORKDIR:-/tmp}, load average $(cut -d' ' -f1-3 /proc/loadavg))"
if [ "$PAIRS" -gt 0 ]; then
sides="bare own box${BASE:+ base}"
for s in $sides; do one "$s" 0; done # warm-up, not counted
bare_w=(); bare_i=(); own_w=(); own_i=(); box_w=(); box_i=(); base_w=(); base_i=()
for n in $(seq 1 "$PAIRS"); do
  set -- $sides
  for _ in $(seq 1 $((n % $#))); do set -- "${@:2}" "$1"; done # the order rotated each round
  for s in "$@"; do one "$s" "$n"; done
  ratio+=("$(awk -v a="${box_w[-1]}" -v b="${bare_w[-1]}" 'BEGIN {printf "%.4f", a/b}')")
  oratio+=("$(awk -v a="${box_w[-1]}" -v b="${own_w[-1]}" 'BEGIN {printf "%.4f", a/b}')")
  [ -z "$BASE" ] || bratio+=("$(awk -v a="${box_w[-1]}" -v b="${base_w[-1]}" 'BEGIN {printf "%.4f", a/b}')")
done
echo
echo "50 mkdirs, 5,000 files, find, grep -r, git add -A && git commit ($PAIRS pairs, alternating; ms)"
echo
echo "| | whole (median) | inside the shell (median) |"
echo "|---|---|---|"
echo "| bare | $(ms "$(median "${bare_w[@]}")") | $(ms "$(median "${bare_i[@]}")") |"
echo "| bare, own session | $(ms "$(median "${own_w[@]}")") | $(ms "$(median "${own_i[@]}")") |"
echo "| agentbox run | $(ms "$(median "${box_w[@]}")") | $(ms "$(median "${box_i[@]}")") |"
[ -z "$BASE" ] || echo "| agentbox run, BASE | $(ms "$(median "${base_w[@]}")") | $(ms "$(median "${base_i[@]}")") |"
echo
echo "boxed / bare, whole: median of the pairs' ratios $(median "${ratio[@]}"); of the medians $(awk -v a="$(median "${box_w[@]}")" -v b="$(median "${bare_w[@]}")" 'BEGIN {printf "%.4f", a/b}'); inside: $(awk -v a="$(median "${box_i[@]}")" -v b="$(median "${bare_i[@]}")" 'BEGIN {printf "%.4f", a/b}')"
echo "boxed / bare in its own session, whole: median of the rounds' ratios $(median "${oratio[@]}"); inside: $(awk -v a="$(median "${box_i[@]}")" -v b="$(median "${own_i[@]}")" 'BEGIN {printf "%.4f", a/b}')"
[ -z "$BASE" ] || echo "agentbox run / BASE, whole: median of the rounds' ratios $(median "${bratio[@]}")"
bd="" bx=""
[ -z "$BASE" ] || { bd=", BASE's $(median "${base_d[@]}") ms"; bx=", BASE's $(median "${base_x[@]}") ms"; }
echo "the daemon's CPU during a boxed run (median): $(median "${box_d[@]}") ms$bd; its check at exit: $(median "${box_x[@]}") ms$bx"
fi

if [ "$GOPAIRS" -gt 0 ]; then
  declare -a gb gx gr
  $GO build -o /dev/null ./... # warms the host's cache
  "$ab" run --workspace "$repo" sh -- -c 'go build -o /dev/null ./...' >/dev/null # warms the box's
  for n in $(seq 1 "$GOPAIRS"); do
    for side in $( ((n % 2)) && echo bare box || echo box bare); do
      s=$(now)
      if [ $side = bare ]; then setsid -w $GO build -o /dev/null ./...; else "$ab" run --workspace "$repo" sh -- -c 'go build -o /dev/null ./...' >/dev/null; fi
      e=$(now)
      if [ $side = bare ]; then gb+=($(((e - s) / 1000))); else gx+=($(((e - s) / 1000))); fi
    done
    gr+=("$(awk -v a="${gx[-1]}" -v b="${gb[-1]}" 'BEGIN {printf "%.4f", a/b}')")
  done
  echo
  echo "go build ./... of this repository, warm cache ($GOPAIRS pairs, alternating; bare in a session of its own): bare $(ms "$(median "${gb[@]}")") ms, agentbox run $(ms "$(median "${gx[@]}")") ms (launch included); median of the pairs' ratios $(median "${gr[@]}")"
fi
# The system calls the work makes most, each timed in a loop inside the box and bare (python3:
# its interpreter's cost is the same on both sides): openat+close of an existing file, openat
# O_CREAT of a new file (+close), stat, in ns per call.
# The system's python3, not a version manager's shim on PATH (pyenv's runs a script beneath
# the user's home, which a box does not see: the boxed run failed as root here).
SYSPAIRS=${SYSPAIRS:-5}
py3=$(PATH=/usr/local/bin:/usr/bin:/bin command -v python3 || true)
if [ "$SYSPAIRS" -gt 0 ] && [ -n "$py3" ]; then
  py='import os, time
n = 20000
def t(f):
    s = time.perf_counter_ns(); f(); return (time.perf_counter_ns() - s) // n
os.mkdir("sc"); open("sc/x", "w").close()
def rd():
    for _ in range(n): os.close(os.open("sc/x", os.O_RDONLY))
def cr():
    for i in range(n): os.close(os.open("sc/%d" % i, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
def st():
    for _ in range(n): os.stat("sc/x")
print(t(rd), t(cr), t(st))'
  declare -a so sb
  for n in $(seq 1 "$SYSPAIRS"); do
    for side in $( ((n % 2)) && echo bare box || echo box bare); do
      d=$tmp/s-$side-$n
      fresh "$d"
      if [ $side = bare ]; then so+=("$(cd "$d" && "$py3" -c "$py")"); else sb+=("$(cd "$d" && "$ab" run --program-path "$py3" python3 -- -c "$py")"); fi
      rm -rf "$d"
    done
  done
  col() { local k=$1; shift; median $(printf '%s\n' "$@" | awk -v k="$k" '{print $k}'); }
  echo
  echo "System calls inside, ns per call (python3 loop of 20,000; $SYSPAIRS pairs, alternating, medians):"
  echo
  echo "| | openat+close (existing file) | openat O_CREAT+close (new file) | stat |"
  echo "|---|---|---|---|"
  echo "| bare | $(col 1 "${so[@]}") | $(col 2 "${so[@]}") | $(col 3 "${so[@]}") |"
  echo "| agentbox run | $(col 1 "${sb[@]}") | $(col 2 "${sb[@]}") | $(col 3 "${sb[@]}") |"
fi
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
