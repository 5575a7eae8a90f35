#!/bin/sh
# agentbox-launcher v1: claude runs boxed (agentbox wrap mode). Do not edit: agentbox wrap uninstall removes it.
# It never runs claude unboxed: when the box cannot start, agentbox prints why and exits 125.
agentbox=/usr/bin/agentbox
if [ ! -x "$agentbox" ]; then
	echo "claude: $agentbox is missing; claude runs only boxed on this machine (see docs/deploy.md)" >&2
	exit 125
fi
exec "$agentbox" run --wait --program-path /opt/claude-code/bin/claude claude -- "$@"
