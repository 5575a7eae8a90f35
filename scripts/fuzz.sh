#!/usr/bin/env bash
# Runs every fuzz target of the module (`func FuzzX` in a _test.go file) for a bounded time
# each: FUZZTIME (default 20s), one target at a time. A target that fails makes the script
# fail; `go test` has then written the failing input under the package's testdata/fuzz/FuzzX/,
# where it stays as a regression seed: commit it with the fix. FUZZ selects targets by an
# extended regular expression on "package FuzzName" (e.g. FUZZ='relay|Attestation').
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-20s}
FUZZ=${FUZZ:-.}

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

failed=()
out=$(mktemp)
trap 'rm -f "$out"' EXIT
while read -r pkg name; do
  before=$(ls "$pkg/testdata/fuzz/$name" 2>/dev/null | sort)
  par=()
  ftime=$FUZZTIME
  for attempt in 1 2 3; do
    echo "== $pkg $name ($ftime${par:+, ${par[*]}})"
    if $GO test -run '^$' -fuzz "^${name}\$" -fuzztime "$ftime" "${par[@]}" "$pkg" 2>&1 | tee "$out"; [ "${PIPESTATUS[0]}" = 0 ]; then
      break
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
      echo "   $name: the fuzzing engine's deadline expired mid-run without a failing input; running it again with one worker, $ftime"
      par=(-parallel 1)
      continue
    fi
    failed+=("$pkg $name")
    for s in $new; do echo "   regression seed kept: $pkg/testdata/fuzz/$name/$s"; done
    break
  done
done <<< "$targets"

n=$(wc -l <<< "$targets")
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAIL: ${#failed[@]} of $n fuzz targets failed:"
  printf '  %s\n' "${failed[@]}"
  echo "Commit the seeds under testdata/fuzz/ with the fix (go test replays them on every run)."
  exit 1
fi
echo "ok: $n fuzz targets, $FUZZTIME each"
