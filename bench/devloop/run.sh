#!/usr/bin/env bash
# Builds this repository as a user would, in one run: `go build ./...` warm on the host, then in
# a box with an empty box cache (the first launch after installing agentbox) and again in a new
# box (every later launch); the same for a Node project (`npm ci --offline`, its packages in the
# host's npm cache) and a Python project (`pip install --no-index`, its wheels in the host's pip
# cache), made here with a home of their own; then how long curl, npm, pip, go and git in a box
# take to fail against a host no egressAllow names (the first time in a fresh state, then
# again), against the same tool's start-up (`--version`) in a box, each with its CPU time.
# For go, GOREPS (default 3) pairs, host then a new box, each with its CPU time.
# For the Node and Python installs, REPS (default 5) more pairs, host
# then box, give medians of the whole command's time, the tool's own time inside, and its CPU
# time (user+sys), which the machine's load does not stretch.
# Results in docs/benchmarks.md ("Building in a box"). PARTS (default "go pkg denied") chooses
# the parts: go, pkg (Node and Python), denied. BASE=…/bin/agentbox adds, for go, the first
# boxed build of another agentbox (the code before a change) in the same run, and for denied,
# its first refusals.
set -euo pipefail
PARTS=" ${PARTS:-go pkg denied} "
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
# inner SCRIPT [ok]: SCRIPT, then a line "WALL CPU": its own wall time and its processes'
# user+sys CPU time (children, from /proc), in ms — in a box, without the launch around it.
# Run it as bash -c 's=$(date +%s%N); '"$(inner SCRIPT)". With ok, a SCRIPT that fails fails
# the whole (a build or install that failed is not timed as one that worked).
inner() {
  local f=''
  [ "${2:-}" != ok ] || f=' || exit 1'
  echo "{ $1; }"' >/dev/null 2>&1'"$f"'; e=$(date +%s%N); t=$(awk "{print \$16+\$17}" /proc/$$/stat); echo "$(( (e-s)/1000000 )) $((t*1000/'"$(getconf CLK_TCK)"'))"'
}
if [[ $PARTS == *" go "* ]]; then
# The host's build as a user's shell runs it, without this script's CGO_ENABLED=0 (the box's
# go has cgo's default too): it warms the host's build cache (~/.cache/go-build), which the
# first box of a workspace reads below its box cache's layer (docs/toolchains.md).
gob='go build -o /dev/null ./...'
env -u CGO_ENABLED $GO build -o /dev/null ./...
host=$(ms env -u CGO_ENABLED $GO build -o /dev/null ./...)
s='s=$(date +%s%N); '
boxed() { # boxed AGENTBOX: the box's build, whole, then inside the box and its CPU, in ms
  # The box gets the caller's CGO_ENABLED (docs/toolchains.md): without this script's, as the
  # host's build runs. Before, the box built with cgo off and the host with cgo on: another
  # build, whose first box compiled everything above net and os/user (72 s of CPU for the
  # ordinary user, whose host cache held only cgo's), and whose warm builds did less work.
  local w
  w=$(unset CGO_ENABLED; ms "$@" run --workspace "$PWD" bash -- -c "$s$(inner "$gob" ok)")
  echo "$w $(tail -1 "$tmp/out")"
}
if [ -n "${BASE:-}" ]; then
  # BASE=…/bin/agentbox: the code before a change, with a daemon and an empty box cache of its
  # own, its first build in the same run.
  mkdir -m 700 "$tmp/rtb" "$tmp/stb"
  base() { env XDG_RUNTIME_DIR="$tmp/rtb" XDG_STATE_HOME="$tmp/stb" "$BASE" "$@"; }
  trap 'base daemon stop >/dev/null 2>&1 || true; "$ab" daemon stop >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
  base run true >/dev/null
  read -r bw bi bc <<<"$(boxed base)"
fi
read -r fw fi fc <<<"$(boxed "$ab")"
read -r sw si sc <<<"$(boxed "$ab")"
echo "| go build ./... (this repository), ms | host warm | first boxed | second boxed | second / host |"
echo "|---|---|---|---|---|"
echo "| whole | $host | $fw | $sw | $(awk "BEGIN{printf \"%.2f\", $sw/$host}") |"
echo "| inside the box | | $fi | $si | |"
echo "| CPU (user+sys) inside | | $fc | $sc | |"
[ -z "${BASE:-}" ] || echo "| BASE's first boxed: whole, inside, CPU | | $bw, $bi, $bc | | |"
echo
# GOREPS (default 3) more pairs, each a warm build on the host then one in a new box, back to
# back: the load moves within minutes, so a pair's ratio says more than the single runs above.
# The host's build is timed as the box's is (bash, its own wall and its processes' CPU).
: >"$tmp/gopairs"
for i in $(seq 1 "${GOREPS:-3}"); do
  hw=$(ms env -u CGO_ENABLED bash -c "$s$(inner "$gob" ok)")
  read -r hi hc <<<"$(tail -1 "$tmp/out")"
  read -r bw2 bi2 bc2 <<<"$(boxed "$ab")"
  echo "$hw $hi $hc $bw2 $bi2 $bc2 $(cut -d' ' -f1 /proc/loadavg)" >>"$tmp/gopairs"
done
echo "Pairs, host warm then a new box (ms; load average at the pair's end):"
echo
echo "| pair | host wall | host CPU | boxed wall | boxed inside | boxed CPU | boxed / host, wall | boxed / host, CPU | load |"
echo "|---|---|---|---|---|---|---|---|---|"
n=0
while read -r hw hi hc bw2 bi2 bc2 la; do
  n=$((n + 1))
  echo "| $n | $hw | $hc | $bw2 | $bi2 | $bc2 | $(awk "BEGIN{printf \"%.2f\", $bw2/$hw}") | $(awk "BEGIN{printf \"%.2f\", $bc2/($hc>0?$hc:1)}") | $la |"
done <"$tmp/gopairs"
echo
fi

if [[ $PARTS == *" pkg "* ]]; then
# Node and Python: projects made here, their dependencies put into the caches of a home of
# their own (the user's own caches are left alone), and a daemon of that home.
NPKG=${NPKG:-30} PYPKG=${PYPKG:-10}
h=$tmp/home
mkdir -m 700 "$h" "$tmp/rt2" "$tmp/st2"
inhome() { HOME=$h XDG_RUNTIME_DIR=$tmp/rt2 XDG_STATE_HOME=$tmp/st2 npm_config_update_notifier=false "$@"; }
trap 'inhome "$ab" daemon stop >/dev/null 2>&1 || true; "$ab" daemon stop >/dev/null 2>&1 || true; ! declare -F base >/dev/null || base daemon stop >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
node=$tmp/node
mkdir -p "$node/pkgs"
deps="" locks=""
for i in $(seq 1 "$NPKG"); do
  d=$node/pkgs/p$i/package
  mkdir -p "$d"
  printf '{"name":"abbench-%s","version":"1.0.0","main":"index.js"}\n' "$i" >"$d/package.json"
  printf 'module.exports = %s;\n' "$i" >"$d/index.js"
  tgz=$(cd "$node/pkgs" && inhome npm pack --silent "./p$i/package")
  inhome npm cache add "$node/pkgs/$tgz" >/dev/null
  integrity=$(node -e 'const c=require("crypto");console.log("sha512-"+c.createHash("sha512").update(require("fs").readFileSync(process.argv[1])).digest("base64"))' "$node/pkgs/$tgz")
  deps="$deps${deps:+,}\"abbench-$i\":\"1.0.0\""
  locks="$locks,\"node_modules/abbench-$i\":{\"version\":\"1.0.0\",\"resolved\":\"https://registry.example.org/abbench-$i/-/$tgz\",\"integrity\":\"$integrity\"}"
done
mkdir -p "$node/app"
printf '{"name":"app","version":"1.0.0","dependencies":{%s}}\n' "$deps" >"$node/app/package.json"
printf '{"name":"app","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{"":{"name":"app","version":"1.0.0","dependencies":{%s}}%s}}\n' "$deps" "$locks" >"$node/app/package-lock.json"
# npm ci empties node_modules itself; in a box node_modules is the box's own, a mount point,
# which rm -rf cannot remove (EBUSY, docs/toolchains.md).
npmci='npm ci --offline --no-audit --no-fund'

py=/usr/bin/python3
pyapp=$tmp/py/app
mkdir -p "$pyapp/vendor"
pips=""
for i in $(seq 1 "$PYPKG"); do
  src=$tmp/py/src$i
  mkdir -p "$src/abbench$i"
  printf 'from setuptools import setup\nsetup(name="abbench%s", version="1.0", packages=["abbench%s"])\n' "$i" "$i" >"$src/setup.py"
  printf '[build-system]\nrequires = ["setuptools>=40.8"]\nbuild-backend = "setuptools.build_meta"\n' >"$src/pyproject.toml"
  echo "N = $i" >"$src/abbench$i/__init__.py"
  echo bench >"$src/README"
  (cd "$src" && $py setup.py -q sdist -d "$pyapp/vendor" >/dev/null 2>&1)
  pips="$pips abbench$i"
done
# The target is the user's own: a fixed /tmp/site made by one user stopped the script of another
# (rm -rf refused, and set -e ended the run without a word).
pipi="rm -rf /tmp/abbench-site-\$(id -u) && $py -m pip install -q --disable-pip-version-check --no-index --find-links vendor --target /tmp/abbench-site-\$(id -u)$pips"
(cd "$pyapp" && inhome sh -c "$py -m pip install -q --disable-pip-version-check --no-index --find-links vendor --no-build-isolation --target $tmp/py/site0$pips" >/dev/null 2>&1)
inhome "$ab" run true >/dev/null # starts the home's daemon: not part of any measurement

median() { sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
bench() { # bench NAME DIR SCRIPT: host (warm caches), first and second boxed, in ms; then REPS
  # pairs (host, boxed) alternating, whose medians separate the launch from the tool's own
  # time (inside) and the load (wall) from the work (CPU)
  local host first second i hw hi hc bw bi bc s='s=$(date +%s%N); '
  (cd "$2" && inhome sh -c "$3") >/dev/null 2>&1 # warms the host's own file cache
  host=$(cd "$2" && ms inhome sh -c "$3")
  first=$(cd "$2" && ms inhome "$ab" run sh -- -c "$3")
  second=$(cd "$2" && ms inhome "$ab" run sh -- -c "$3")
  echo "| $1 | $host | $first | $second | $(awk "BEGIN{printf \"%.2f\", $second/$host}") |"
  : >"$tmp/pairs"
  for i in $(seq 1 "${REPS:-5}"); do
    hw=$(cd "$2" && ms inhome bash -c "$s$(inner "$3" ok)")
    read -r hi hc <<<"$(tail -1 "$tmp/out")"
    bw=$(cd "$2" && ms inhome "$ab" run bash -- -c "$s$(inner "$3" ok)")
    read -r bi bc <<<"$(tail -1 "$tmp/out")"
    echo "$hw $hi $hc $bw $bi $bc" >>"$tmp/pairs"
  done
  pairs+="| $1 |$(for c in 1 2 3 4 5 6; do printf ' %s |' "$(cut -d' ' -f$c "$tmp/pairs" | median)"; done)
"
}
pairs=""
echo "| install, dependencies in the host's cache only (no network) | host | first boxed | second boxed | second / host |"
echo "|---|---|---|---|---|"
bench "npm ci --offline, $NPKG packages (ms)" "$node/app" "$npmci"
bench "pip install --no-index, $PYPKG cached wheels of vendored sdists (ms)" "$pyapp" "$pipi"
echo
echo "Medians of ${REPS:-5} pairs, host then box, each timed whole, inside (the tool alone) and in CPU (user+sys):"
echo
echo "| install | host wall | host inside | host CPU | boxed wall | boxed inside | boxed CPU |"
echo "|---|---|---|---|---|---|---|"
printf '%s' "$pairs"
echo
fi
[[ $PARTS == *" denied "* ]] || exit 0
echo "## Time to fail against a denied host (egress deny, no egressAllow), in the box"
# Each tool's first refusal in a fresh state directory (a user's first in a workspace: for pip,
# before anything was compiled into the box cache), its second, and its start-up (--version),
# each its own wall time inside the box and, in parentheses, its CPU time (user+sys), in ms.
# With BASE, the first refusal of that agentbox too, in a fresh state of its own.
intime() { # intime AGENTBOX SCRIPT: "WALL (CPU)" of SCRIPT in a box (the launch not counted)
  "$1" run sh -- -c 's=$(date +%s%N); '"$(inner "( $2 )")" 2>/dev/null | tail -1 | awk '{print $1" ("$2")"}'
}
if [ -n "${BASE:-}" ]; then
  mkdir -p -m 700 "$tmp/rtd" "$tmp/std"
  based() { env XDG_RUNTIME_DIR="$tmp/rtd" XDG_STATE_HOME="$tmp/std" "$BASE" "$@"; }
  trap 'based daemon stop >/dev/null 2>&1 || true; base daemon stop >/dev/null 2>&1 || true; "$ab" daemon stop >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
  echo "| tool | first refusal | second | start-up | first refusal, BASE |"
  echo "|---|---|---|---|---|"
else
  echo "| tool | first refusal | second | start-up |"
  echo "|---|---|---|---|"
fi
for t in \
  "curl|curl -sS https://denied.example.org/|curl --version" \
  "npm|npm_config_registry=https://registry.example.org/ npm view left-pad version|npm --version" \
  "pip|/usr/bin/python3 -m pip download --no-deps -d /tmp/dl --index-url https://pypi.example.org/simple tiny-pkg|/usr/bin/python3 -m pip --version" \
  "go|cd /tmp && GOPROXY=https://goproxy.example.org GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local go mod download example.org/mod@v1.0.0|go version" \
  "git|git ls-remote https://git.example.org/owner/repo|git --version"; do
  IFS='|' read -r name fail version <<<"$t"
  row="| $name | $(intime "$ab" "$fail") | $(intime "$ab" "$fail") | $(intime "$ab" "$version") |"
  [ -z "${BASE:-}" ] || row="$row $(intime based "$fail") |"
  echo "$row"
done
