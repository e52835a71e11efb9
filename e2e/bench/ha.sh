#!/usr/bin/env bash
# The HA stores side by side in one run, on 127.0.0.1, through the API with
# ../shared/bench/apibench (client-go, one TLS connection per client):
#   1. one skiff server on SQLite (the single-server baseline)
#   2. three skiff servers on the embedded Raft store, load through the
#      leader and through a follower (writes forwarded to the leader)
#   3. one skiff server on a three-member etcd cluster (--datastore-endpoint)
#
#   e2e/bench/ha.sh            default: CLIENTS="1 64", N1=500, N64=4000
#
# Environment (and lib.sh's SKIFF_BIN, READY_TIMEOUT, KEEP_TMP):
#   CLIENTS="1 64"   client counts; N1 creates for 1 client, N64 for more
#   RUN_TIMEOUT=900  bound on each apibench run, in seconds
# Prints apibench's create throughput and p50/p99 per setup and clients.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

CLIENTS=${CLIENTS:-"1 64"}
N1=${N1:-500}
N64=${N64:-4000}
RUN_TIMEOUT=${RUN_TIMEOUT:-900}
pids=()

bench_init skiff-habench
trap 'stop_all; bench_cleanup' EXIT
bench_need curl
bench_binary
log "build apibench and etcd"
(cd "$repo/../shared/bench/apibench" && timeout 900 go build -o "$tmp/apibench" .) ||
	(cd "$repo" && echo "no ../shared/bench/apibench" >&2 && exit 1)
etcd=$(cd "$repo" && timeout 1800 go run ./e2e/bench/etcdbin)
echo "machine: $(nproc) cores, $(machine_load)"
echo "skiff: $("$bin" version 2>/dev/null | head -n 1); etcd: $("$etcd" --version | head -n 1)"

stop_all() {
	local p
	for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do
		for _ in $(seq 1 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL -- "-$p" 2>/dev/null || true
	done
	pids=()
}

# start NAME PORT ARGS...: a server in its own process group, waited for.
start() {
	local name=$1 p=$2
	shift 2
	mkdir -p "$tmp/$name"
	# The host's own address is advertised (the kubernetes Endpoints
	# refuse loopback); Raft members reach each other there, delivered
	# locally, so the Raft servers bind every address (BIND="").
	setsid "$bin" server --data-dir "$tmp/$name" --https-listen-port "$p" ${BIND:+--bind-address $BIND} \
		--disable-agent --node-name "$name" \
		--write-kubeconfig "$tmp/$name.kc" "$@" >"$tmp/$name.log" 2>&1 &
	pids+=($!)
	local deadline=$(($(date +%s) + READY_TIMEOUT))
	until [ "$(curl -sk --max-time 2 "https://127.0.0.1:$p/readyz" 2>/dev/null)" = ok ] && [ -s "$tmp/$name.kc" ]; do
		if [ "$(date +%s)" -ge "$deadline" ] || ! kill -0 "${pids[-1]}" 2>/dev/null; then
			echo "$name not ready; last log lines:" >&2
			tail -n 30 "$tmp/$name.log" >&2
			exit 1
		fi
		sleep 0.1
	done
}

# load LABEL KUBECONFIG: apibench at each client count.
load() {
	local c n
	for c in $CLIENTS; do
		n=$N64
		[ "$c" -eq 1 ] && n=$N1
		timeout "$RUN_TIMEOUT" "$tmp/apibench" -kubeconfig "$2" -n "$n" -c "$c" -w 100 -lists 1 \
			>"$tmp/$1-$c.out" 2>&1 || { echo "apibench $1 -c $c failed:" >&2; tail "$tmp/$1-$c.out" >&2; }
		printf '%-26s %s\n' "$1" "$(summary "$tmp/$1-$c.out")"
	done
}

# summary FILE: apibench's CREATE line and watch latency.
summary() {
	grep -h '^CREATE' "$1" | sed 's/^CREATE *//' | tr '\n' ' '
	grep -h '^WATCH' "$1" | sed 's/^WATCH *//' | tr '\n' ' '
}

# 1. SQLite
BIND=127.0.0.1
start sqlite 16443
load "skiff sqlite (1 server)" "$tmp/sqlite.kc"
stop_all

# 2. Raft, three servers
BIND=""
start r1 16444 --cluster-init --raft-port 12380
tok=$(cat "$tmp/r1/server/token")
start r2 16445 --server "https://$(hostname -I | cut -d" " -f1):16444" --token "$tok" --raft-port 12381
start r3 16446 --server "https://$(hostname -I | cut -d" " -f1):16444" --token "$tok" --raft-port 12382
load "skiff raft via leader" "$tmp/r1.kc"
load "skiff raft via follower" "$tmp/r2.kc"
stop_all

# 3. etcd, three members, one skiff server
ecluster=""
for i in 0 1 2; do ecluster+="e$i=http://127.0.0.1:$((12480 + i)),"; done
for i in 0 1 2; do
	setsid "$etcd" --name "e$i" --data-dir "$tmp/e$i" \
		--listen-client-urls "http://127.0.0.1:$((12479 - i))" --advertise-client-urls "http://127.0.0.1:$((12479 - i))" \
		--listen-peer-urls "http://127.0.0.1:$((12480 + i))" --initial-advertise-peer-urls "http://127.0.0.1:$((12480 + i))" \
		--initial-cluster "${ecluster%,}" --initial-cluster-state new --initial-cluster-token habench \
		>"$tmp/e$i.log" 2>&1 &
	pids+=($!)
done
BIND=127.0.0.1
start etcd 16447 --datastore-endpoint "http://127.0.0.1:12479,http://127.0.0.1:12478,http://127.0.0.1:12477"
load "skiff on 3-member etcd" "$tmp/etcd.kc"
stop_all
echo "machine after: $(machine_load)"
