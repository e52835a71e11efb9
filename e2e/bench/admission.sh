#!/usr/bin/env bash
# Start a fresh skiff server and time ConfigMap creates on it under
# admission configurations with admload: no webhook, one validating
# webhook, a mutating and a validating webhook, a ValidatingAdmissionPolicy,
# and a ResourceQuota in the namespace (the quota admission's cost per
# create). The webhooks are served by admload on 127.0.0.1; the server
# runs on the host (lib.sh), so it reaches them there.
#
#   e2e/bench/admission.sh [admload flags]   default: -clients 8 -n 2000 -rounds 3
#
# Environment (and those of lib.sh: SKIFF_BIN, READY_TIMEOUT, KEEP_TMP):
#   IDLE_WAIT=10     seconds to idle after ready before starting (lets start-up settle)
#   RUN_TIMEOUT=1800 bound on admload, in seconds
#
# It prints: binary size, start->/readyz time, a line per setup and round,
# admload's summary table, the machine's load, the server's RSS at the end
# and any error lines from the server log.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

IDLE_WAIT=${IDLE_WAIT:-10}
RUN_TIMEOUT=${RUN_TIMEOUT:-1800}
if [ $# -eq 0 ]; then
	set -- -clients 8 -n 2000 -rounds 3
fi

bench_init skiff-admbench
bench_build admload
bench_start_server
echo "RSS at ready: $(rss)"
bench_idle "$IDLE_WAIT"

log "admload $*"
rc=0
timeout "$RUN_TIMEOUT" "$tmp/admload" -kubeconfig "$kc" -json "$tmp/admload.json" "$@" || rc=$?
[ "$rc" -eq 0 ] || echo "admload exited with status $rc"
alive
echo "RSS at the end: $(rss)"
echo "machine after: $(nproc) cores, $(machine_load)"
bench_log_errors 'error|panic|fatal|level=WARN' 30
exit "$rc"
