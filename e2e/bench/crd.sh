#!/usr/bin/env bash
# Start a fresh skiff server and benchmark custom resources against
# ConfigMaps on it with crdload (CRD -> served time, creates, lists, RSS).
#
#   e2e/bench/crd.sh [crdload flags]      default: -clients 8 -n 2000 -total 10000
#
# Environment (and those of lib.sh: SKIFF_BIN, READY_TIMEOUT, KEEP_TMP):
#   IDLE_WAIT=0      seconds to idle after ready before starting (lets start-up settle)
#   RUN_TIMEOUT=840  bound on crdload, in seconds
#
# It prints: binary size, start->/readyz time, crdload's lines and summary
# table (crdload reads the server's RSS itself, at the points it compares),
# the server's RSS at the end, and any error lines from the server log.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

IDLE_WAIT=${IDLE_WAIT:-0}
RUN_TIMEOUT=${RUN_TIMEOUT:-840}
if [ $# -eq 0 ]; then
	set -- -clients 8 -n 2000 -total 10000
fi

bench_init skiff-crdbench
bench_build crdload
bench_start_server
echo "RSS at ready: $(rss)"
bench_idle "$IDLE_WAIT"

log "crdload $*"
rc=0
timeout "$RUN_TIMEOUT" "$tmp/crdload" -kubeconfig "$kc" -pid "$pid" -json "$tmp/crdload.json" "$@" || rc=$?
[ "$rc" -eq 0 ] || echo "crdload exited with status $rc"
alive
echo "RSS at the end: $(rss)"
echo "store: $(du -sh "$tmp/data" | cut -f1) in the data dir"
echo "machine after: $(machine_load)"
bench_log_errors 'error|panic|fatal|level=WARN' 30
exit "$rc"
