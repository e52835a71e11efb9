#!/usr/bin/env bash
# Start a fresh skiff server, load it with apiload, and record its memory.
#
#   e2e/bench/run.sh [apiload flags]      default: -clients 8,64 -n 2000 -watch 200
#
# Environment:
#   SKIFF_BIN=path   use this binary instead of running `make build`
#   IDLE_WAIT=60     seconds to idle after ready before the idle RSS (0 skips the wait)
#   TOTAL_CM=10000   ConfigMaps created in the last phase, after which RSS is read
#   READY_TIMEOUT=120, RUN_TIMEOUT=1800   bounds, in seconds
#   KEEP_TMP=1       keep the temp dir (data dir, kubeconfig, server log, JSON)
#
# It prints: binary size, start->/readyz time, RSS (ps -o rss=) at ready, after
# the idle wait, after apiload, and after TOTAL_CM ConfigMaps; apiload's table;
# and any error lines from the server log.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
export PATH=/usr/local/go/bin:$PATH

IDLE_WAIT=${IDLE_WAIT:-60}
TOTAL_CM=${TOTAL_CM:-10000}
READY_TIMEOUT=${READY_TIMEOUT:-120}
RUN_TIMEOUT=${RUN_TIMEOUT:-1800}
if [ $# -eq 0 ]; then
	set -- -clients 8,64 -n 2000 -watch 200
fi

tmp=$(mktemp -d /tmp/skiff-bench.XXXXXX)
pid=""

cleanup() {
	local rc=$?
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 1 150); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "server did not stop within 15s of SIGTERM; killing its process group" >&2
			kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	if [ "${KEEP_TMP:-0}" = 1 ]; then
		echo "kept $tmp"
	else
		rm -rf "$tmp"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*"; }

# rss PID: resident set of the server and of every other process in its group, MiB.
rss() {
	local self group hwm
	self=$(ps -o rss= -p "$pid" | tr -d ' ')
	group=$(ps -o rss= -g "$pid" | awk '{s+=$1} END {print s+0}')
	hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
	printf 'rss=%.1f MiB (process group %.1f MiB, peak %.1f MiB) cpu=%s' \
		"$(echo "$self / 1024" | bc -l)" "$(echo "$group / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)" \
		"$(ps -o cputime= -p "$pid" | tr -d ' ')"
}

alive() {
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "server exited; last log lines:" >&2
		tail -n 40 "$tmp/server.log" >&2
		exit 1
	fi
}

command -v bc >/dev/null || { echo "run.sh needs bc" >&2; exit 1; }
command -v curl >/dev/null || { echo "run.sh needs curl" >&2; exit 1; }

if [ -n "${SKIFF_BIN:-}" ]; then
	bin=$SKIFF_BIN
else
	log "make build"
	timeout 900 make -C "$repo" build >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log" >&2; exit 1; }
	bin=$repo/bin/skiff
fi
[ -x "$bin" ] || { echo "no skiff binary at $bin" >&2; exit 1; }

log "go build apiload"
(cd "$repo" && timeout 900 go build -o "$tmp/apiload" ./e2e/bench/apiload)

# A free port: one that nothing accepts connections on.
port=""
for _ in $(seq 1 50); do
	p=$((20000 + RANDOM % 40000))
	if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
		port=$p
		break
	fi
done
[ -n "$port" ] || { echo "no free port found" >&2; exit 1; }

kc=$tmp/kubeconfig.yaml
echo "machine: $(nproc) cores, $(uptime | sed 's/.*load average/load average/')"
echo "binary: $bin $(stat -c %s "$bin" | awk '{printf "%.1f MB", $1/1e6}') ($("$bin" version 2>/dev/null | head -n 1))"

t0=$(date +%s.%N)
# setsid: the server leads its own process group, so cleanup can kill the group.
setsid "$bin" server --data-dir "$tmp/data" --https-listen-port "$port" --bind-address 127.0.0.1 \
	--write-kubeconfig "$kc" >"$tmp/server.log" 2>&1 &
pid=$!
log "server pid $pid on 127.0.0.1:$port, data dir $tmp/data"

deadline=$(($(date +%s) + READY_TIMEOUT))
until [ "$(curl -sk --max-time 2 "https://127.0.0.1:$port/readyz" 2>/dev/null)" = ok ] && [ -s "$kc" ]; do
	alive
	if [ "$(date +%s)" -ge "$deadline" ]; then
		echo "not ready within ${READY_TIMEOUT}s; /readyz?verbose says:" >&2
		curl -sk --max-time 2 "https://127.0.0.1:$port/readyz?verbose" >&2 || true
		tail -n 40 "$tmp/server.log" >&2
		exit 1
	fi
	sleep 0.05
done
t1=$(date +%s.%N)
printf 'start -> /readyz ok: %.2f s\n' "$(echo "$t1 - $t0" | bc -l)"
echo "RSS at ready:            $(rss)"

if [ "$IDLE_WAIT" -gt 0 ]; then
	log "idling ${IDLE_WAIT}s"
	sleep "$IDLE_WAIT"
	alive
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
echo "machine after: $(uptime | sed 's/.*load average/load average/')"

errs=$(grep -ciE 'error|panic|fatal' "$tmp/server.log" || true)
echo "server log: $(wc -l <"$tmp/server.log") lines, $errs mentioning error/panic/fatal"
if [ "$errs" -gt 0 ]; then
	grep -iE 'error|panic|fatal' "$tmp/server.log" | head -n 20
fi
