#!/usr/bin/env bash
# Start a fresh skiff server and benchmark custom resources against
# ConfigMaps on it with crdload (CRD -> served time, creates, lists, RSS).
#
#   e2e/bench/crd.sh [crdload flags]      default: -clients 8 -n 2000 -total 10000
#
# Environment:
#   SKIFF_BIN=path   use this binary instead of running `make build`
#   IDLE_WAIT=0      seconds to idle after ready before starting (lets start-up settle)
#   READY_TIMEOUT=120, RUN_TIMEOUT=840   bounds, in seconds
#   KEEP_TMP=1       keep the temp dir (data dir, kubeconfig, server log, JSON)
#
# It prints: binary size, start->/readyz time, crdload's lines and summary
# table (crdload reads the server's RSS itself, at the points it compares),
# the server's RSS at the end, and any error lines from the server log.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
export PATH=/usr/local/go/bin:$PATH

IDLE_WAIT=${IDLE_WAIT:-0}
READY_TIMEOUT=${READY_TIMEOUT:-120}
RUN_TIMEOUT=${RUN_TIMEOUT:-840}
if [ $# -eq 0 ]; then
	set -- -clients 8 -n 2000 -total 10000
fi

tmp=$(mktemp -d /tmp/skiff-crdbench.XXXXXX)
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

rss() {
	printf 'rss=%.1f MiB (peak %.1f MiB) cpu=%s' \
		"$(ps -o rss= -p "$pid" | awk '{print $1/1024}')" \
		"$(awk '/^VmHWM/ {print $2/1024}' "/proc/$pid/status" 2>/dev/null || echo 0)" \
		"$(ps -o cputime= -p "$pid" | tr -d ' ')"
}

alive() {
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "server exited; last log lines:" >&2
		tail -n 40 "$tmp/server.log" >&2
		exit 1
	fi
}

command -v curl >/dev/null || { echo "crd.sh needs curl" >&2; exit 1; }

if [ -n "${SKIFF_BIN:-}" ]; then
	bin=$SKIFF_BIN
else
	log "make build"
	timeout 900 make -C "$repo" build >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log" >&2; exit 1; }
	bin=$repo/bin/skiff
fi
[ -x "$bin" ] || { echo "no skiff binary at $bin" >&2; exit 1; }

log "go build crdload"
(cd "$repo" && timeout 900 go build -o "$tmp/crdload" ./e2e/bench/crdload)

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

t0=$(date +%s%N)
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
t1=$(date +%s%N)
echo "start -> /readyz ok: $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f s", (b-a)/1e9}')"
echo "RSS at ready: $(rss)"

if [ "$IDLE_WAIT" -gt 0 ]; then
	log "idling ${IDLE_WAIT}s"
	sleep "$IDLE_WAIT"
	alive
fi

log "crdload $*"
rc=0
timeout "$RUN_TIMEOUT" "$tmp/crdload" -kubeconfig "$kc" -pid "$pid" -json "$tmp/crdload.json" "$@" || rc=$?
[ "$rc" -eq 0 ] || echo "crdload exited with status $rc"
alive
echo "RSS at the end: $(rss)"
echo "store: $(du -sh "$tmp/data" | cut -f1) in the data dir"
echo "machine after: $(uptime | sed 's/.*load average/load average/')"

errs=$(grep -ciE 'error|panic|fatal|level=WARN' "$tmp/server.log" || true)
echo "server log: $(wc -l <"$tmp/server.log") lines, $errs mentioning error/panic/fatal or at WARN"
if [ "$errs" -gt 0 ]; then
	grep -iE 'error|panic|fatal|level=WARN' "$tmp/server.log" | head -n 30
fi
exit "$rc"
