#!/usr/bin/env bash
# Runs every fuzz target of the module (`func FuzzX` in a _test.go file) for a bounded time
# each: FUZZTIME (default 20s). A target that fails makes the script fail; its test binary has
# then written the failing input under the package's testdata/fuzz/FuzzX/, where it stays as a
# regression seed: commit it with the fix. FUZZ selects targets by an extended regular
# expression on "package FuzzName" (e.g. FUZZ='relay|Attestation').
#
# Each package's test binary is built once, with the fuzzing's coverage instrumentation (`go
# test -c -fuzz`), into FUZZBIN (default: a temporary folder), and every target of the package
# runs from it (`go test -fuzz` per target relinked the package each time). FUZZJOBS targets run
# at a time (default 1), each with FUZZWORKERS fuzzing workers (default: one per CPU, divided
# among the jobs). `fuzz.sh build` only builds the binaries (into FUZZBIN, which must be set):
# .ci/run builds them beside its installs and fuzzes after `make test`, when the CPUs are free.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-20s}
FUZZ=${FUZZ:-.}
FUZZJOBS=${FUZZJOBS:-1}
mode=${1:-all} # all, build or run (run: the binaries in FUZZBIN are there already)
case $mode in
all | build | run) ;;
*)
  echo "fuzz.sh: unknown mode '$mode': use all (the default), build or run" >&2
  exit 2
  ;;
esac

# package dir and target name of every fuzz target, in a stable order.
targets=$(grep -rlE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' internal cmd 2>/dev/null | sort |
  while read -r f; do
    d=$(dirname "$f")
    grep -oE '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //' | while read -r n; do echo "./$d $n"; done
  done | grep -E -- "$FUZZ" || true)
if [ -z "$targets" ]; then
  echo "fuzz.sh: no fuzz target matches FUZZ=$FUZZ" >&2
  exit 2
fi

if [ -z "${FUZZBIN:-}" ]; then
  [ "$mode" = all ] || { echo "fuzz.sh $mode: set FUZZBIN to the binaries' folder" >&2; exit 2; }
  FUZZBIN=$(mktemp -d /tmp/agentbox-fuzz.XXXXXX)
  trap 'rm -rf "$FUZZBIN"' EXIT
fi
mkdir -p "$FUZZBIN"
bin() { echo "$FUZZBIN/$(echo "${1#./}" | tr / _).fuzz.test"; }
export GO FUZZBIN FUZZTIME
export -f bin

if [ "$mode" != run ]; then
  # -fuzz instruments the package under test (one target of it named: the instrumentation is the
  # package's, and the binary runs any of its targets).
  while read -r pkg name; do
    [ -e "$(bin "$pkg")" ] && continue
    echo "== building $pkg"
    $GO test -c -o "$(bin "$pkg")" -fuzz "^${name}\$" "$pkg" || { echo "FAIL: building $pkg for fuzzing"; exit 1; }
  done < <(awk '!seen[$1]++' <<<"$targets")
  [ "$mode" = all ] || exit 0
fi

if [ "$mode" = run ]; then
  # A binary missing (its build failed, or FUZZBIN is another run's) fails here, named, not as
  # a shell error in the middle of the targets' output.
  missing=$(awk '!seen[$1]++ {print $1}' <<<"$targets" | while read -r pkg; do [ -x "$(bin "$pkg")" ] || echo "  $pkg: $(bin "$pkg")"; done)
  if [ -n "$missing" ]; then
    printf 'fuzz.sh run: no fuzzing binary for these packages in FUZZBIN=%s (run `fuzz.sh build` first):\n%s\n' "$FUZZBIN" "$missing" >&2
    exit 2
  fi
fi
cpus=$(nproc 2>/dev/null || echo 1)
FUZZWORKERS=${FUZZWORKERS:-$(((cpus + FUZZJOBS - 1) / FUZZJOBS))}
export FUZZWORKERS
# fuzzone PKG NAME fuzzes one target from its package's binary, in the package's folder (where
# the seeds are read and a failing input is written); its output is printed whole when it ends.
# It prints "FAILED PKG NAME" when the target failed.
fuzzone() {
  local pkg=$1 name=$2 out before after new execs ftime=$FUZZTIME par=$FUZZWORKERS attempt
  out=$(mktemp)
  before=$(ls "$pkg/testdata/fuzz/$name" 2>/dev/null | sort)
  for attempt in 1 2 3; do
    echo "== $pkg $name ($ftime, $par workers)" >>"$out"
    if (cd "$pkg" && "$(bin "$pkg")" -test.run '^$' -test.fuzz "^${name}\$" -test.fuzztime "$ftime" \
      -test.parallel "$par" -test.fuzzcachedir "$FUZZBIN/cache/$pkg/$name") >>"$out" 2>&1; then
      cat "$out"; rm -f "$out"
      return 0
    fi
    after=$(ls "$pkg/testdata/fuzz/$name" 2>/dev/null | sort)
    new=$(comm -13 <(echo "$before") <(echo "$after"))
    # Go's fuzzing engine sometimes ends a run with "context deadline exceeded" when -fuzztime
    # runs out while a worker is busy (a starved CPU): no input failed and none was written.
    # That run is repeated, with one worker and as many executions as the timed run reached
    # (a count has no deadline to expire), at most twice; a real failure always leaves its
    # input, and a target that hangs fails all three.
    if [ "$attempt" -lt 3 ] && [ -z "$new" ] && grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input written' "$out"; then
      execs=$(grep -oE 'execs: [0-9]+' "$out" | tail -1 | grep -oE '[0-9]+')
      ftime=${execs:-1000}x
      par=1
      echo "   $name: the fuzzing engine's deadline expired mid-run without a failing input; running it again with one worker, $ftime" >>"$out"
      continue
    fi
    for s in $new; do echo "   regression seed kept: $pkg/testdata/fuzz/$name/$s" >>"$out"; done
    cat "$out"; rm -f "$out"
    # On a line of its own: a binary killed mid-line leaves its output unterminated.
    printf '\nFAILED %s %s\n' "$pkg" "$name"
    return 1
  done
}
export -f fuzzone

results=$(mktemp)
# shellcheck disable=SC2016
xargs -r -P "$FUZZJOBS" -L 1 bash -c 'fuzzone "$1" "$2"' _ <<<"$targets" | tee "$results"
xrc=${PIPESTATUS[0]}
mapfile -t failed < <(sed -n 's/^FAILED //p' "$results")
rm -f "$results"
# xargs's own status says a job failed even where its line was lost (two jobs' output
# interleaved): a failure is never read as a pass.
[ "$xrc" = 0 ] || [ ${#failed[@]} -gt 0 ] || failed=("(a target whose name was lost in the output: xargs exited $xrc)")

n=$(wc -l <<< "$targets")
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAIL: ${#failed[@]} of $n fuzz targets failed:"
  printf '  %s\n' "${failed[@]}"
  echo "Commit the seeds under testdata/fuzz/ with the fix (go test replays them on every run)."
  exit 1
fi
echo "ok: $n fuzz targets, $FUZZTIME each, $FUZZJOBS at a time with $FUZZWORKERS workers each"
