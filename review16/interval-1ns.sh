#!/bin/sh
# Review 16, F8: integrity.interval accepts any positive duration, 1ns included; the daemon
# then verifies a running box's protected configuration without pause. Prints the daemon's CPU
# time (in 1/100 s) over a 5 s box, with 1ns and with the default 60s. Usage: review16/interval-1ns.sh
# (from a built tree: bin/agentbox). Runs an isolated daemon under a temporary HOME, stopped at
# the end.
set -e
A=$(cd "$(dirname "$0")/.." && pwd)/bin/agentbox
T=$(mktemp -d /tmp/review16-interval.XXXXXX)
mkdir -p "$T/h/run" "$T/h/.config/agentbox" "$T/proj"
chmod 700 "$T/h" "$T/h/run"
cd "$T/proj" && git init -q
export HOME="$T/h" XDG_RUNTIME_DIR="$T/h/run"
unset XDG_CONFIG_HOME XDG_STATE_HOME AGENTBOX_CONFIG
for iv in 1ns 60s; do
	printf 'integrity:\n  interval: %s\n' "$iv" > "$T/h/.config/agentbox/config.yaml"
	"$A" config validate
	"$A" run true
	pid=$("$A" version | sed -n 's/.*pid \([0-9]*\).*/\1/p')
	t0=$(awk '{print $14+$15}' /proc/"$pid"/stat)
	"$A" run sleep -- 5
	t1=$(awk '{print $14+$15}' /proc/"$pid"/stat)
	echo "integrity.interval $iv: the daemon used $((t1 - t0))/100 s of CPU during a 5 s box (load: $(cut -d' ' -f1-3 /proc/loadavg))"
	kill "$pid"
	while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
done
rm -rf "$T"
