#!/usr/bin/env bash
# Runs every test: the whole module as the calling user, then — when run as root — the suites
# that build real boxes again as an ordinary user (agentbox's intended deployment), because
# root and an ordinary user take different kernel paths (uid maps, capabilities, /proc/sys).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
export CGO_ENABLED=${CGO_ENABLED:-0} # no cgo: static binaries, as `make build` makes them
export AGENTBOX_BIN=$PWD/bin/agentbox
bindir=${AGENTBOX_BIN%/*}
[ -x "$AGENTBOX_BIN" ] && [ -x "$bindir/agentbox-daemon" ] && [ -x "$bindir/agentbox-box" ] ||
  $GO build -o "$bindir/" ./cmd/agentbox ./cmd/agentbox-daemon ./cmd/agentbox-box

echo "== go test ./... as $(id -un)"
# -parallel 3: the long e2e tests that call t.Parallel() mostly wait (test/e2e parallelTests).
# As root, the box suites run again as an ordinary user below; the real agent CLIs' e2e tests
# run in that pass only (test/e2e agentBin).
user_suites=0
[ "$(id -u)" != 0 ] || user_suites=1
AGENTBOX_TEST_USER_SUITES=$user_suites $GO test -count=1 -timeout 15m -parallel 3 ./...

# The race detector over the packages whose code runs goroutines and whose tests build no box
# (the relay and its sessions and LLM relay, the connection limits, the hand-off; below, parts
# of the ssh broker, the git relay and the egress proxy). Measured on a shared 2-core machine: 33 s wall with a warm build cache (10 CPU
# s: the tests' own waits dominate); with an empty one the race build of the standard library
# and the dependencies costs 154 CPU s, about 80 s more on two idle cores. It needs cgo for this
# step only (the binaries stay static).
echo "== go test -race (concurrent packages)"
if ! command -v "${CC:-gcc}" >/dev/null; then
  echo "FAIL: go test -race needs a C compiler (cgo): install gcc, or set CC" >&2
  exit 1
fi
CGO_ENABLED=1 $GO test -race -count=1 -timeout 5m ./internal/relay ./internal/relay/session ./internal/relay/llm \
  ./internal/connlimit ./internal/handoff ./internal/recordlimit
# Selected tests only where a package's whole suite is slow: the ssh agent's server, the git
# relay's streamed body counted while the transport still sends it, the egress proxy's counts
# and tunnels ending on revocation. Together 27 s wall against 12 s for the ssh tests alone
# (5+3 CPU s against 2+1, with a warm cache; measured at load average 20 on two cores); a cold
# cache adds about 16 CPU s for the race build of the git relay and the egress proxy. Not here:
# internal/store and internal/daemon (both clean under -race: the store's suite, and the daemon's
# TestLaunchStopSettles and TestDetachedLaunchesEndingAtOnce, whose daemon runs in the test
# process), because the race build of the pure-Go SQLite costs 95 CPU s with a cold cache and the
# daemon's other dependencies 72 more (measured as below), about 90 s wall of CI's last 165 s.
CGO_ENABLED=1 $GO test -race -count=1 -timeout 5m \
  -run 'TestAgent|TestRevocationInFlightAgentRequest|TestStreamedBodyCountedWhileSent|TestHTTPForward|TestTunnelEndsOnRevocationAndClose' \
  ./internal/sshbroker ./internal/relay/git ./internal/egress
# The box-building packages' concurrent code, where a test runs it in a process the race
# detector instruments: the guard of absent protected paths (its watch goroutine against Add and
# Close, in the test process), and the shim (the test binary re-executed as the shim: its output
# pumps, connection readers, stop and watchers against each other, the races its hooks force
# included). halt_on_error ends a shim that races, which fails its test (a deliberate race in the
# pump fails TestDetachAndReattach with DATA RACE in shim.log); without it the report would
# only be in the shim's log. Measured with a build cache of its own, warmed by the steps above
# (as in CI, which starts cold), on this shared 2-core machine at load average 28-41: 14 CPU s
# with the race build of what they add (the guard's 4, the shim's 11), 8 CPU s with a warm
# cache; the shim's tests took 17-21 s (mostly waiting on their processes), the guard's 3 s, and
# the two go test runs with their builds 81 s wall cold and 47 s warm at that load.
CGO_ENABLED=1 GORACE=halt_on_error=1 $GO test -race -count=1 -timeout 5m \
  -run 'TestGuard|TestApply|TestStopWhile|TestDetachWhileOutputFails|TestDetachAndReattach|TestHangupOnClientLoss|TestWatchStopAndSignal' \
  ./internal/changes ./internal/shim

if [ "$(id -u)" = 0 ]; then
  user=${AGENTBOX_TEST_USER:-abuser}
  id "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
  dir=$(mktemp -d /tmp/agentbox-usertests.XXXXXX)
  chmod 755 "$dir"
  cp "$AGENTBOX_BIN" "$bindir/agentbox-daemon" "$bindir/agentbox-box" "$dir/"
  # Packages whose tests build real boxes; each is compiled here and run as $user.
  pkgs=$($GO list -f "{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}" ./internal/engine/... ./internal/shim/... \
    ./internal/safesocket/... ./internal/daemon/... ./internal/integrity/... ./internal/egress/... ./internal/readiness/... \
    ./internal/sshbroker/... ./internal/wrap/... ./internal/console/... ./test/... 2>/dev/null)
  export GO dir
  compile() {
    name=$(echo "$1" | tr / _)
    $GO test -c -o "$dir/$name.test" "$1"
    rel=$($GO list -f '{{.Dir}}' "$1"); rel=${rel#"$PWD"/}
    echo "$dir/src/$rel" > "$dir/$name.dir"
  }
  export -f compile
  # Two at a time: linking dominates (the packages are already built by the run above).
  echo "$pkgs" | xargs -r -n 1 -P 2 bash -c 'compile "$1"' _
  # The checkout may sit where the user cannot read (/root): give the suites a readable copy of
  # the sources for their testdata.
  mkdir -p "$dir/src"
  git ls-files -z | xargs -0 cp --parents -t "$dir/src" 2>/dev/null || cp -r . "$dir/src"
  chmod -R a+rX "$dir"
  home=$(getent passwd "$user" | cut -d: -f6)
  echo "== integration suites as $user"
  # Two suites at a time (as `go test` runs packages, one per CPU of the 2-CPU CI machine); each
  # one's output is printed whole when it ends.
  jobs=${AGENTBOX_TEST_USER_JOBS:-2}
  export dir user home
  runsuite() {
    t=$1
    pkgdir=$(cat "${t%.test}.dir")
    if su "$user" -s /bin/bash -c "cd '$pkgdir' && env -u XDG_RUNTIME_DIR HOME='$home' AGENTBOX_BIN='$dir/agentbox' '$t' -test.count=1 -test.timeout=15m -test.parallel=3" >"${t%.test}.out" 2>&1; then
      echo "--- ok   $(basename "$t") (in $pkgdir)"
    else
      echo "--- FAIL $(basename "$t") (in $pkgdir)"
      cat "${t%.test}.out"
      touch "$dir/failed"
    fi
  }
  export -f runsuite
  # The longest suite (test/e2e) first, so that the others run beside it.
  { ls "$dir"/*test_e2e.test 2>/dev/null || true; ls "$dir"/*.test | grep -v 'test_e2e\.test$'; } |
    xargs -r -n 1 -P "$jobs" bash -c 'runsuite "$1"' _
  status=0
  if [ -e "$dir/failed" ]; then
    status=1
    # The failures again, short, at the end: a CI log cut in the middle keeps them.
    echo "== failures as $user"
    for out in "$dir"/*.out; do
      grep -E -e '^\s*--- FAIL|^\s+[A-Za-z0-9_]+_test\.go:[0-9]+: ' "$out" | head -40 | sed "s|^|$(basename "${out%.out}"): |" || true
    done
  fi
  rm -rf "$dir"
  [ $status = 0 ] || { echo "FAIL: integration suites as $user"; exit 1; }
  echo "ok: integration suites as $user"
fi
