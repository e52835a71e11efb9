#!/usr/bin/env bash
# Start a fresh skiff server, load it with apiload, and record its memory.
#
#   e2e/bench/run.sh [apiload flags]      default: -clients 8,64 -n 2000 -watch 200
#
# Environment (and those of lib.sh: SKIFF_BIN, READY_TIMEOUT, KEEP_TMP):
#   IDLE_WAIT=60     seconds to idle after ready before the idle RSS (0 skips the wait)
#   TOTAL_CM=10000   ConfigMaps created in the last phase, after which RSS is read
#   RUN_TIMEOUT=1800 bound on each apiload run, in seconds
#
# It prints: binary size, start->/readyz time, RSS (ps -o rss=) at ready, after
# the idle wait, after apiload, and after TOTAL_CM ConfigMaps; apiload's table;
# and any error lines from the server log.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

IDLE_WAIT=${IDLE_WAIT:-60}
TOTAL_CM=${TOTAL_CM:-10000}
RUN_TIMEOUT=${RUN_TIMEOUT:-1800}
if [ $# -eq 0 ]; then
	set -- -clients 8,64 -n 2000 -watch 200
fi

bench_init skiff-bench
bench_build apiload
bench_start_server
echo "RSS at ready:            $(rss)"

if [ "$IDLE_WAIT" -gt 0 ]; then
	bench_idle "$IDLE_WAIT"
	echo "RSS ${IDLE_WAIT}s after ready:   $(rss)"
fi

log "apiload $*"
timeout "$RUN_TIMEOUT" "$tmp/apiload" -kubeconfig "$kc" -json "$tmp/apiload.json" "$@" || echo "apiload exited with status $?"
alive
echo "RSS after apiload:       $(rss)"

# The last phase always creates ConfigMaps (in the encoding the caller chose)
# and keeps them, so the RSS below is with TOTAL_CM objects stored.
extra=()
for a in "$@"; do
	case $a in -proto | -proto=true | --proto | --proto=true) extra+=(-proto) ;; esac
done
log "create $TOTAL_CM ConfigMaps and keep them"
timeout "$RUN_TIMEOUT" "$tmp/apiload" -kubeconfig "$kc" -json "$tmp/total.json" "${extra[@]}" \
	-objects configmap -clients 8 -n "$TOTAL_CM" -phases create,list -keep -ns apiload-total ||
	echo "apiload exited with status $?"
alive
echo "RSS after $TOTAL_CM ConfigMaps: $(rss)"
echo "store: $(du -sh "$tmp/data" | cut -f1) in the data dir"
echo "machine after: $(machine_load)"
bench_log_errors 'error|panic|fatal'
