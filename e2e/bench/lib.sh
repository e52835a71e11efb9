# shellcheck shell=bash
# What the e2e/bench scripts share: a temp dir removed on exit together
# with the server's process group, the skiff binary, a load client built
# from e2e/bench, a fresh `skiff server` on 127.0.0.1 waited for until
# /readyz, its RSS, the machine's load, and the error lines of its log.
#
# A script sets -euo pipefail, sources this file and calls bench_init;
# bench_init sets: here (e2e/bench), repo, tmp; bench_start_server sets
# pid, port, kc (the kubeconfig) and bin.
#
# Environment read here:
#   SKIFF_BIN=path   use this binary instead of running `make build`
#   READY_TIMEOUT=120  seconds for the server to answer /readyz ok
#   KEEP_TMP=1       keep the temp dir (data dir, kubeconfig, server log, JSON)

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
export PATH=/usr/local/go/bin:$PATH
READY_TIMEOUT=${READY_TIMEOUT:-120}
tmp=""
pid=""

# bench_init PREFIX: make the temp dir /tmp/PREFIX.XXXXXX and arrange for
# the server to be stopped and the dir removed however the script ends.
bench_init() {
	tmp=$(mktemp -d "/tmp/$1.XXXXXX")
	trap bench_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

bench_cleanup() {
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
	elif [ -n "$tmp" ]; then
		rm -rf "$tmp"
	fi
	exit "$rc"
}

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*"; }

# bench_need CMD...: fail early when a command the script uses is missing.
bench_need() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null || { echo "$(basename "$0") needs $c" >&2; exit 1; }
	done
}

# rss: resident set of the server and of every other process in its
# group, its peak, and its CPU time.
rss() {
	local self group hwm
	self=$(ps -o rss= -p "$pid" | tr -d ' ')
	group=$(ps -o rss= -g "$pid" | awk '{s+=$1} END {print s+0}')
	hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
	awk -v s="${self:-0}" -v g="$group" -v h="${hwm:-0}" -v c="$(ps -o cputime= -p "$pid" | tr -d ' ')" \
		'BEGIN {printf "rss=%.1f MiB (process group %.1f MiB, peak %.1f MiB) cpu=%s", s/1024, g/1024, h/1024, c}'
}

# alive: fail, with the end of the server's log, if the server has exited.
alive() {
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "server exited; last log lines:" >&2
		tail -n 40 "$tmp/server.log" >&2
		exit 1
	fi
}

machine_load() { uptime | sed 's/.*load average/load average/'; }

# bench_binary: set bin to SKIFF_BIN or to a fresh `make build`.
bench_binary() {
	if [ -n "${SKIFF_BIN:-}" ]; then
		bin=$SKIFF_BIN
	else
		log "make build"
		timeout 900 make -C "$repo" build >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log" >&2; exit 1; }
		bin=$repo/bin/skiff
	fi
	[ -x "$bin" ] || { echo "no skiff binary at $bin" >&2; exit 1; }
}

# bench_build TOOL: go build ./e2e/bench/TOOL to $tmp/TOOL.
bench_build() {
	log "go build $1"
	(cd "$repo" && timeout 900 go build -o "$tmp/$1" "./e2e/bench/$1")
}

# bench_free_port: set port to one that nothing accepts connections on.
bench_free_port() {
	local p
	port=""
	for _ in $(seq 1 50); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			port=$p
			return 0
		fi
	done
	echo "no free port found" >&2
	exit 1
}

# bench_start_server: start a fresh server on 127.0.0.1 (on the host, not
# in a network namespace: a client or webhook on 127.0.0.1 reaches it and
# it reaches them), wait for /readyz ok and its kubeconfig, print the
# machine, the binary and the start-up time.
bench_start_server() {
	bench_need curl
	bench_binary
	bench_free_port
	kc=$tmp/kubeconfig.yaml
	echo "machine: $(nproc) cores, $(machine_load)"
	echo "binary: $bin $(stat -c %s "$bin" | awk '{printf "%.1f MB", $1/1e6}') ($("$bin" version 2>/dev/null | head -n 1))"
	local t0 t1 deadline
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
}

# bench_idle SECONDS: let start-up settle (0 skips).
bench_idle() {
	if [ "$1" -gt 0 ]; then
		log "idling ${1}s"
		sleep "$1"
		alive
	fi
}

# bench_log_errors REGEX [MAX]: count the server log's lines matching
# REGEX (case-insensitive) and print the first MAX (20) of them.
bench_log_errors() {
	local errs
	errs=$(grep -ciE "$1" "$tmp/server.log" || true)
	echo "server log: $(wc -l <"$tmp/server.log") lines, $errs matching /$1/"
	if [ "$errs" -gt 0 ]; then
		grep -iE "$1" "$tmp/server.log" | head -n "${2:-20}"
	fi
}
