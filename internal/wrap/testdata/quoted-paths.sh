#!/bin/sh
# agentbox-launcher v1: codex runs boxed (agentbox wrap mode). Do not edit: agentbox wrap uninstall removes it.
# It never runs codex unboxed: when the box cannot start, agentbox prints why and exits 125.
agentbox='/opt/agent box/agentbox'
if [ ! -x "$agentbox" ]; then
	echo "codex: $agentbox is missing; codex runs only boxed on this machine (see docs/deploy.md)" >&2
	exit 125
fi
exec "$agentbox" run --wait --program-path '/opt/it'\''s/codex' codex -- "$@"
