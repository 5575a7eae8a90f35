#!/usr/bin/env bash
# Runs every test: the whole module as the calling user and — when run as root — beside it the
# suites that build real boxes again as an ordinary user (agentbox's intended deployment),
# because root and an ordinary user take different kernel paths (uid maps, capabilities,
# /proc/sys).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
export CGO_ENABLED=${CGO_ENABLED:-0} # no cgo: static binaries, as `make build` makes them
export AGENTBOX_BIN=$PWD/bin/agentbox
bindir=${AGENTBOX_BIN%/*}
[ -x "$AGENTBOX_BIN" ] && [ -x "$bindir/agentbox-daemon" ] && [ -x "$bindir/agentbox-box" ] ||
  $GO build -o "$bindir/" ./cmd/agentbox ./cmd/agentbox-daemon ./cmd/agentbox-box

# Wall and CPU time of a step, printed after it (bash's `time`: the step's children included).
TIMEFORMAT="   (%R s wall, %U s user + %S s system CPU)"
# The whole machine's CPU time over a step, busy and idle (iowait counted idle; /proc/stat):
# bash's `time` leaves out the daemons and boxes that leave the step's process tree, so only
# this says whether a pass was bound by the CPUs.
clk_tck=$(getconf CLK_TCK 2>/dev/null || echo 100)
machine_cpu() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $5+$6}' /proc/stat; }
machine_report() { # START: machine_cpu's output before the step
  local b0 i0 b1 i1
  read -r b0 i0 <<<"$1"
  read -r b1 i1 <<<"$(machine_cpu)"
  echo "   (the machine, $(nproc) CPUs: $(((b1 - b0) / clk_tck)) CPU s busy, $(((i1 - i0) / clk_tck)) CPU s idle)"
}

# The longest suites first, in both passes: `go test` runs packages in the order named (two at a
# time on two CPUs), and alphabetically test/e2e, the longest, would start last, after every
# internal package, and run alone at the end (docs/benchmarks.md, "CI time").
slow_first="./test/e2e ./internal/integrity ./internal/relay/git ./internal/profile ./internal/sshbroker ./internal/readiness ./internal/daemon ./internal/shim"

# As root, the suites that build real boxes run again as an ordinary user (below): after the
# race steps, or beside the root pass with AGENTBOX_TEST_USER_PASS=beside (each test has its
# own daemon, directories and sockets, so one pass does not see the other's). Its report is
# printed whole when it ends; a failure there fails the script, and so does one in the root
# pass, which still waits for the user's pass (the EXIT trap) and prints it.
user_suites=0
race_sid=
[ "$(id -u)" != 0 ] || user_suites=1
userpass_pid=
if [ $user_suites = 1 ]; then
  user=${AGENTBOX_TEST_USER:-abuser}
  id "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
  dir=$(mktemp -d /tmp/agentbox-usertests.XXXXXX)
  chmod 755 "$dir"
  cp "$AGENTBOX_BIN" "$bindir/agentbox-daemon" "$bindir/agentbox-box" "$dir/"
  # Packages whose tests build real boxes; each is compiled here and run as $user.
  pkgs=$($GO list -f "{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}" ./internal/engine/... ./internal/shim/... \
    ./internal/safesocket/... ./internal/daemon/... ./internal/integrity/... ./internal/egress/... ./internal/readiness/... \
    ./internal/sshbroker/... ./internal/wrap/... ./internal/console/... ./test/... 2>/dev/null)
  home=$(getent passwd "$user" | cut -d: -f6)
  # A Rust toolchain for TestCargoBuildFromHostCache as $user (made by userpass, removed by
  # userpass_report): root's rustup default toolchain (its bin/ and lib/) hard-linked, not
  # copied (~600 MB), under /opt, which every box sees read-only; $user can neither enter /root
  # nor hard-link root's files into its own home (fs.protected_hardlinks), so the test puts this
  # folder on PATH instead of laying out rustup.
  rust=/opt/agentbox-usertests-rust.${dir##*.}
  rustup=${RUSTUP_HOME:-$HOME/.rustup}
  # The real agent CLIs' e2e tests (which run in this pass only): test/e2e runs as two shards,
  # these and the rest, side by side. In one process the longest of them (OpenCode's, 100-220 s
  # as this user) waited for a -parallel slot behind the tests declared before it and ended
  # the pass alone (docs/benchmarks.md, "CI time").
  agents_tests='^(TestInteractive|TestRealAgents)'
  # The user's pass keeps its tests' folders (workspaces, homes, state: e2e's and integrity's
  # environments, t.TempDir) on a tmpfs, as many distributions' /tmp is, where the root pass
  # keeps them on the disk's file system (this machine's /tmp, ext4): the two list a folder's
  # entries in different orders, and a box's `git worktree prune` broke the host's linked
  # worktree on the one and not on the other (docs/integrity.md). The tmpfs also spares the
  # disk: integrity's suite took 307 s there against 338 s in /tmp (docs/benchmarks.md, "CI
  # time").
  usertmp=/tmp
  if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && [ "$(stat -c %a /dev/shm)" = 1777 ] &&
    ! awk '$2 == "/dev/shm" && $4 ~ /(^|,)noexec(,|$)/ { found = 1 } END { exit !found }' /proc/mounts; then
    usertmp=/dev/shm
  fi
  export GO dir user home rust rustup agents_tests usertmp
  compile() {
    name=$(echo "$1" | tr / _)
    $GO test -c -o "$dir/$name.test" "$1" || return
    rel=$($GO list -f '{{.Dir}}' "$1"); rel=${rel#"$PWD"/}
    echo "$dir/src/$rel" > "$dir/$name.dir"
  }
  # runsuite runs one suite, or one shard of it: FILE.test, or FILE.test:agents (the tests named
  # by $agents_tests) or FILE.test:rest (all the others).
  runsuite() {
    t=${1%:*}
    sel= name=${t%.test}
    case $1 in
    *:agents) sel="-test.run '$agents_tests'" name=$name.agents ;;
    *:rest) sel="-test.skip '$agents_tests'" name=$name.rest ;;
    esac
    pkgdir=$(cat "${t%.test}.dir")
    start=$SECONDS
    if su "$user" -s /bin/bash -c "cd '$pkgdir' && env -u XDG_RUNTIME_DIR HOME='$home' TMPDIR='$usertmp' AGENTBOX_BIN='$dir/agentbox' AGENTBOX_AGENTS_REQUIRED='${AGENTBOX_AGENTS_REQUIRED:-}' AGENTBOX_TEST_RUST_TOOLCHAIN='$(cat "$dir/rust" 2>/dev/null)' '$t' -test.count=1 -test.timeout=15m -test.parallel=3 $sel" >"$name.out" 2>&1; then
      echo "--- ok   $(basename "$name") (in $pkgdir, $((SECONDS - start)) s)"
    else
      echo "--- FAIL $(basename "$name") (in $pkgdir, $((SECONDS - start)) s)"
      cat "$name.out"
      touch "$dir/failed"
    fi
  }
  export -f compile runsuite
  # userpass_prepare compiles the suites and lays out what they read; it fails when a suite does
  # not compile.
  userpass_prepare() {
    # Two at a time: linking dominates (the packages' builds are cached, shared with the root
    # pass).
    if ! echo "$pkgs" | xargs -r -n 1 -P 2 bash -c 'compile "$1"' _; then
      echo "--- FAIL compiling the suites to run as $user"
      return 1
    fi
    # The checkout may sit where the user cannot read (/root): give the suites a readable copy
    # of the sources for their testdata.
    mkdir -p "$dir/src"
    git ls-files -z | xargs -0 cp --parents -t "$dir/src" 2>/dev/null || cp -r . "$dir/src"
    tc=$(sed -n 's/^default_toolchain = "\(.*\)"$/\1/p' "$rustup/settings.toml" 2>/dev/null || true)
    if [ -n "$tc" ] && [ -x "$rustup/toolchains/$tc/bin/cargo" ] && mkdir -m 755 "$rust" &&
      cp -al "$rustup/toolchains/$tc/bin" "$rustup/toolchains/$tc/lib" "$rust/"; then
      echo "$rust" >"$dir/rust"
    fi
    chmod -R a+rX "$dir"
    touch "$dir/prepared"
  }
  export -f userpass_prepare
  export pkgs
  userpass() {
    # Prepared beside the root pass (prepare.log), or here (AGENTBOX_TEST_USER_PASS=beside).
    cat "$dir/prepare.log" 2>/dev/null || true
    [ -e "$dir/prepared" ] || userpass_prepare || { touch "$dir/failed"; return; }
    # Two suites at a time (as `go test` runs packages, one per CPU of the 2-CPU CI machine);
    # each one's output is printed whole when it ends. The longest suites first ($slow_first),
    # so that the short ones fill in beside them at the end: e2e's agents and integrity side by
    # side, then e2e's rest where the agents end (about 230 + 350 s against integrity's 410 s
    # and the short ones after it; e2e's two shards one after the other beside integrity made
    # integrity start late and end last: docs/benchmarks.md, "CI time").
    e2e=$dir/github.com_agentbox_agentbox_test_e2e.test
    {
      [ ! -e "$e2e" ] || echo "$e2e:agents"
      for p in ./internal/integrity $slow_first; do
        f="$dir/github.com_agentbox_agentbox_$(echo "${p#./}" | tr / _).test"
        [ ! -e "$f" ] || echo "$f"
      done
      ls "$dir"/*.test
    } | sed "s|^$e2e\$|$e2e:rest|" | awk '!seen[$0]++' | xargs -r -n 1 -P "${AGENTBOX_TEST_USER_JOBS:-2}" bash -c 'runsuite "$1"' _
  }
  # userpass_report waits for the user's pass, prints its report and removes its directory; it
  # fails when a suite failed (or did not compile).
  userpass_report() {
    [ -n "$userpass_pid" ] || return 0
    local rc=0
    wait "$userpass_pid" || rc=$?
    userpass_pid=
    if [ $rc != 0 ]; then
      echo "--- FAIL the pass as $user ended with status $rc" >>"$dir/userpass.log"
      touch "$dir/failed"
    fi
    [ "${AGENTBOX_TEST_USER_PASS:-after}" != beside ] || echo "== integration suites as $user (run beside the steps above)"
    cat "$dir/userpass.log"
    cat "$dir/userpass.time" 2>/dev/null || true
    [ -z "${userpass_cpu:-}" ] || machine_report "$userpass_cpu"
    local status=0
    if [ -e "$dir/failed" ]; then
      status=1
      # The failures again, short, at the end: a CI log cut in the middle keeps them.
      echo "== failures as $user"
      for out in "$dir"/*.out; do
        [ -e "$out" ] || continue
        grep -E -e '^\s*--- FAIL|^\s+[A-Za-z0-9_]+_test\.go:[0-9]+: ' "$out" | head -40 | sed "s|^|$(basename "${out%.out}"): |" || true
      done
    fi
    rm -rf "$dir" "$rust"
    [ $status = 0 ] || { echo "FAIL: integration suites as $user"; return 1; }
    echo "ok: integration suites as $user"
  }
  start_userpass() {
    userpass_cpu=$(machine_cpu)
    { time userpass >"$dir/userpass.log" 2>&1; } 2>"$dir/userpass.time" &
    userpass_pid=$!
    # A step that fails ends the script: the user's pass is still waited for and reported.
    trap 'rc=$?; userpass_report || rc=1; exit $rc' EXIT
  }
  # AGENTBOX_TEST_USER_PASS=beside starts the user's pass now, beside the root pass: faster on
  # an idle machine, but each pass's tests then wait on a machine twice as busy, and some wait
  # with fixed deadlines (a box's pip install, a real agent's answer); at load 45-63 three of
  # them ran out (docs/benchmarks.md, "CI time"). By default (after) it runs after the race
  # steps, alone, as CI runs it.
  if [ "${AGENTBOX_TEST_USER_PASS:-after}" = beside ]; then
    echo "== integration suites as $user: started in the background; reported after the race steps"
    start_userpass
  else
    # By default only its compilation runs beside the root pass, at the lowest CPU priority
    # (scripts/lowest): it takes the CPU the root pass leaves idle while its tests wait.
    { time LOWEST_SID_FILE=$dir/prepare.sid scripts/lowest bash -c userpass_prepare; } >"$dir/prepare.log" 2>&1 &
    prepare_pid=$!
    trap 'rc=$?; scripts/lowest --kill "$dir/prepare.sid"; scripts/lowest --kill "$race_sid"; wait; rm -rf "$dir" "$rust" "$race_sid"; exit $rc' EXIT
  fi
fi

# The race steps' builds (below), made beside the root pass at the lowest CPU priority: a cold
# race build of the standard library and the dependencies costs about 150 CPU s. Its failures
# are the race steps' to report.
race1="./internal/broker ./internal/plan ./internal/relay ./internal/relay/session ./internal/relay/llm ./internal/connlimit ./internal/handoff ./internal/recordlimit"
race2="./internal/sshbroker ./internal/relay/git ./internal/egress"
race3="./internal/changes ./internal/shim"
race_pid=
if command -v "${CC:-gcc}" >/dev/null; then
  # shellcheck disable=SC2086
  race_sid=$(mktemp /tmp/agentbox-race-sid.XXXXXX)
  CGO_ENABLED=1 LOWEST_SID_FILE=$race_sid scripts/lowest $GO test -race -count=1 -run '^$' $race1 $race2 $race3 >/dev/null 2>&1 &
  race_pid=$!
fi

echo "== go test ./... as $(id -un)"
# -parallel 3: the long e2e tests that call t.Parallel() mostly wait (test/e2e parallelTests).
# As root, the real agent CLIs' e2e tests run in the user's pass only (test/e2e agentBin).
pass_cpu=$(machine_cpu)
time AGENTBOX_TEST_USER_SUITES=$user_suites $GO test -count=1 -timeout 15m -parallel 3 $slow_first ./...
machine_report "$pass_cpu"

# The race detector over the packages whose code runs goroutines and whose tests build no box
# (the brokers' list and per-launch table, the relay and its sessions and LLM relay, the
# connection limits, the hand-off, the configuration links' cache; below, parts
# of the ssh broker, the git relay and the egress proxy). Measured on a shared 2-core machine: 33 s wall with a warm build cache (10 CPU
# s: the tests' own waits dominate); with an empty one the race build of the standard library
# and the dependencies costs 154 CPU s, about 80 s more on two idle cores. It needs cgo for this
# step only (the binaries stay static).
echo "== go test -race (concurrent packages)"
# The builds made beside the root pass, now waited for: back at normal priority (as are the user
# pass's below), or other work on the machine would starve them while everything waits.
if [ -n "$race_pid" ]; then
  scripts/lowest --raise "$race_sid"
  wait "$race_pid" || true
  rm -f "$race_sid"
fi
if ! command -v "${CC:-gcc}" >/dev/null; then
  echo "FAIL: go test -race needs a C compiler (cgo): install gcc, or set CC" >&2
  exit 1
fi
# shellcheck disable=SC2086
time CGO_ENABLED=1 $GO test -race -count=1 -timeout 5m $race1
# Selected tests only where a package's whole suite is slow: the ssh agent's server, the git
# relay's streamed body counted while the transport still sends it, the egress proxy's counts
# and tunnels ending on revocation. Together 27 s wall against 12 s for the ssh tests alone
# (5+3 CPU s against 2+1, with a warm cache; measured at load average 20 on two cores); a cold
# cache adds about 16 CPU s for the race build of the git relay and the egress proxy. Not here:
# internal/store and internal/daemon (both clean under -race: the store's suite, and the daemon's
# TestLaunchStopSettles and TestDetachedLaunchesEndingAtOnce, whose daemon runs in the test
# process), because the race build of the pure-Go SQLite costs 95 CPU s with a cold cache and the
# daemon's other dependencies 72 more (measured as below), about 90 s wall of CI's last 165 s.
time CGO_ENABLED=1 $GO test -race -count=1 -timeout 5m \
  -run 'TestAgent|TestRevocationInFlightAgentRequest|TestStreamedBodyCountedWhileSent|TestHTTPForward|TestTunnelEndsOnRevocationAndClose' \
  $race2
# The box-building packages' concurrent code, where a test runs it in a process the race
# detector instruments: the guard of absent protected paths (its watch goroutine against Add and
# Close, in the test process), and the shim (the test binary re-executed as the shim: its output
# pumps, connection readers, stop and watchers against each other, the races its hooks force
# included; in the test process, a redraw against the PTY's pump). halt_on_error ends a shim that races, which fails its test (a deliberate race in the
# pump fails TestDetachAndReattach with DATA RACE in shim.log); without it the report would
# only be in the shim's log. Measured with a build cache of its own, warmed by the steps above
# (as in CI, which starts cold), on this shared 2-core machine at load average 28-41: 14 CPU s
# with the race build of what they add (the guard's 4, the shim's 11), 8 CPU s with a warm
# cache; the shim's tests took 17-21 s (mostly waiting on their processes), the guard's 3 s, and
# the two go test runs with their builds 81 s wall cold and 47 s warm at that load.
time CGO_ENABLED=1 GORACE=halt_on_error=1 $GO test -race -count=1 -timeout 5m \
  -run 'TestGuard|TestApply|TestStopWhile|TestDetachWhileOutputFails|TestDetachAndReattach|TestHangupOnClientLoss|TestWatchStopAndSignal|TestRedraw' \
  $race3


if [ $user_suites = 1 ]; then
  if [ -z "$userpass_pid" ]; then
    echo "== integration suites as $user"
    scripts/lowest --raise "$dir/prepare.sid"
    wait "$prepare_pid" || true # its failure is in prepare.log, and "prepared" is missing
    start_userpass
  fi
  trap - EXIT
  userpass_report
fi
