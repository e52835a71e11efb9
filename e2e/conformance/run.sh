#!/bin/bash
# Runs upstream [Conformance] e2e tests against a skiff cluster of two schedulable nodes — a
# server with its own node and one agent — each in a network namespace of its own, joined by a
# bridge (the suite expects at least two untainted nodes).
#
#   run.sh up                    bridge netns conf-lan-<inst>; server netns conf-<inst> (172.31.<250+N>.10),
#                                agent netns conf-<inst>-a (.11); skiff server + skiff agent; wait for two
#                                Ready nodes; import $CONF_DIR/images/*.tar into both; registry.py serves
#                                the same tarballs on the bridge (.1:5000) as the nodes' registry.k8s.io
#                                mirror, for the tests that pull with imagePullPolicy Always
#   run.sh e2e NAME FOCUS [SKIP] [PROCS] [TIMEOUT_MIN]
#                                e2e.test (through ginkgo when PROCS>1) inside the server's namespace,
#                                results in $CONF_DIR/results/NAME (junit_01.xml, e2e.log)
#   run.sh down                  kill what `up` started (by process group and cgroup root), delete the
#                                namespaces, unmount what is left under the data dirs, remove cgroups
#   run.sh status
#
#   SKIFF      skiff binary (default: $CONF_DIR/bin/skiff)
#   INST       cluster instance: s1 (default), s2, ... (several clusters can run side by side)
#   CONF_DIR   default ${TMPDIR:-/tmp}/conformance
#
# Everything a node uses that is host-wide by default is moved under $CONF_DIR or given a
# distinct name, so nothing else on the machine is touched: --netns-dir, --pod-log-dir,
# --cgroup-root (/skiff-conformance-<inst>[-a]), --node-name, --proxy-metrics-address.
# Processes enter namespaces with `nsenter --net=`: `ip netns exec` remounts /sys, which hides
# the cgroup mounts runc needs.
set -uo pipefail
CONF_DIR=${CONF_DIR:-${TMPDIR:-/tmp}/conformance}
SKIFF=${SKIFF:-$CONF_DIR/bin/skiff}
BIN=$CONF_DIR/bin
INST=${INST:-s1}
N=${INST//[^0-9]/}; N=${N:-1}
ST=$CONF_DIR/state/$INST
LAN=conf-lan-$INST
SUBNET=172.31.$((249 + N))
NS_S=conf-$INST
NS_A=conf-$INST-a
IP_S=$SUBNET.10
IP_A=$SUBNET.11
DATA_S=$CONF_DIR/data/$INST
DATA_A=$CONF_DIR/data/$INST-a
CG_S=/skiff-conformance-$INST
CG_A=/skiff-conformance-$INST-a
NODE_S=conf-node-$INST
NODE_A=conf-node-$INST-a
KCFG=$ST/kubeconfig
IP_R=$SUBNET.1
HERE=$(cd "$(dirname "$0")" && pwd)
LOG=$CONF_DIR/logs
KUBECTL=${KUBECTL:-$( [ -x "$BIN/kubectl" ] && echo "$BIN/kubectl" || readlink -f "$(command -v kubectl)")}
mkdir -p "$ST" "$LOG" "$CONF_DIR/results"

wait_for() { local t=$1; shift; local end=$((SECONDS + t)); while [ $SECONDS -lt $end ]; do "$@" >/dev/null 2>&1 && return 0; sleep 1; done; return 1; }
kc() { nsenter --net="/run/netns/$NS_S" "$KUBECTL" --kubeconfig "$KCFG" --request-timeout=20s "$@"; }
ready_nodes() { kc get nodes --no-headers 2>/dev/null | awk '$2=="Ready"' | wc -l; }
two_ready() { [ "$(ready_nodes)" -ge 2 ]; }
server_ready() { kc get --raw /readyz; }
registry_ready() { nsenter --net="/run/netns/$NS_S" curl -sf "http://$IP_R:5000/v2/"; }

# host NS IP: a namespace on the bridge with its address and a default route through eth0.
host() {
  local ns=$1 ip=$2 peer=vcf$RANDOM
  ip netns add "$ns"
  ip link add "$peer" type veth peer name eth0 netns "$ns"
  ip link set "$peer" netns "$LAN"
  ip -n "$LAN" link set "$peer" master br0 up
  ip -n "$ns" addr add "$ip/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" route add default dev eth0
  nsenter --net="/run/netns/$ns" sysctl -qw net.ipv4.ip_forward=1
}

fresh() { # a fresh data dir (KEEP_DATA=1 keeps the store and the imported images)
  local d=$1
  if [ "${KEEP_DATA:-0}" != 1 ] && [ -d "$d" ]; then
    grep -q " $d" /proc/mounts && { echo "mounts left under $d: run.sh down"; exit 1; }
    rm -rf "$d"
  fi
  mkdir -p "$d/agent/images" "$d/run/netns" "$d/pod-logs"
}

import_images() { # NS DATA
  local f
  for f in "$CONF_DIR"/images/*.tar; do
    [ -f "$f" ] || continue
    nsenter --net="/run/netns/$1" "$SKIFF" images import --data-dir "$2" "$f" >/dev/null || echo "import $f into $1 failed"
  done
}

up() {
  [ -x "$SKIFF" ] || { echo "no skiff binary at $SKIFF (set SKIFF=)"; exit 1; }
  if ip netns list | grep -qw "$NS_S"; then echo "$NS_S exists: run.sh down first"; exit 1; fi
  ip netns add "$LAN"
  ip -n "$LAN" link add br0 type bridge
  ip -n "$LAN" link set br0 up
  ip -n "$LAN" link set lo up
  # The cluster has no way out: a read-only registry of the imported images stands in for
  # registry.k8s.io, so that a pull the kubelet must really make (imagePullPolicy Always) can.
  ip -n "$LAN" addr add "$IP_R/24" dev br0
  setsid nsenter --net="/run/netns/$LAN" python3 "$HERE/registry.py" "$IP_R:5000" "$CONF_DIR/images" \
    >> "$LOG/registry-$INST.log" 2>&1 < /dev/null &
  echo $! > "$ST/registry.pgid"
  printf 'mirrors:\n  registry.k8s.io:\n    endpoint: ["http://%s:5000"]\n' "$IP_R" > "$ST/registries.yaml"
  host "$NS_S" "$IP_S"
  host "$NS_A" "$IP_A"
  fresh "$DATA_S"; fresh "$DATA_A"
  echo "server start $(date -u +%FT%TZ)" >> "$LOG/skiff-$INST.log"
  setsid nsenter --net="/run/netns/$NS_S" "$SKIFF" server --data-dir "$DATA_S" --node-ip "$IP_S" --node-name "$NODE_S" \
    --advertise-address "$IP_S" --tls-san "$IP_S" \
    --write-kubeconfig "$KCFG" --netns-dir "$DATA_S/run/netns" --pod-log-dir "$DATA_S/pod-logs" \
    --cgroup-root "$CG_S" --private-registry "$ST/registries.yaml" \
    >> "$LOG/skiff-$INST.log" 2>&1 < /dev/null &
  echo $! > "$ST/server.pgid"
  wait_for 180 server_ready || { tail -20 "$LOG/skiff-$INST.log"; echo "server not ready in 180 s"; exit 1; }
  wait_for 30 test -s "$DATA_S/server/token" || { echo "no join token at $DATA_S/server/token"; exit 1; }
  echo "agent start $(date -u +%FT%TZ)" >> "$LOG/skiff-$INST-a.log"
  setsid nsenter --net="/run/netns/$NS_A" "$SKIFF" agent --server "https://$IP_S:6443" --token "$(cat "$DATA_S/server/token")" \
    --data-dir "$DATA_A" --node-ip "$IP_A" --node-name "$NODE_A" \
    --netns-dir "$DATA_A/run/netns" --pod-log-dir "$DATA_A/pod-logs" \
    --cgroup-root "$CG_A" --private-registry "$ST/registries.yaml" \
    >> "$LOG/skiff-$INST-a.log" 2>&1 < /dev/null &
  echo $! > "$ST/agent.pgid"
  wait_for 240 two_ready || { tail -20 "$LOG/skiff-$INST.log" "$LOG/skiff-$INST-a.log"; echo "two Ready nodes not seen in 240 s"; exit 1; }
  echo "two nodes Ready; importing images"
  import_images "$NS_S" "$DATA_S" & local i1=$!
  import_images "$NS_A" "$DATA_A" & local i2=$!
  wait "$i1" "$i2" # not a bare wait: the server and the agent are children too
  wait_for 120 registry_ready || echo "registry mirror not serving at $IP_R:5000 (see $LOG/registry-$INST.log)"
  kc get nodes -o wide
}

e2e() {
  local name=$1 focus=$2 skip=${3:-} procs=${4:-1} tmin=${5:-100}
  local out=$CONF_DIR/results/$name
  rm -rf "$out"; mkdir -p "$out"
  local flags=(--kubeconfig="$KCFG" --provider=skeleton --kubectl-path="$KUBECTL"
    --report-dir="$out" --e2e-output-dir="$out" --disable-log-dump
    --allowed-not-ready-nodes=0 --dump-logs-on-failure=false)
  echo "e2e $name focus=$focus skip=$skip procs=$procs timeout=${tmin}m -> $out"
  if [ "$procs" -gt 1 ]; then
    setsid timeout --kill-after=60 "$((tmin * 60 + 120))" nsenter --net="/run/netns/$NS_S" "$BIN/ginkgo" \
      --procs="$procs" --focus="$focus" ${skip:+--skip="$skip"} --timeout="${tmin}m" \
      --output-dir="$out" --no-color --silence-skips \
      "$BIN/e2e.test" -- "${flags[@]}" > "$out/e2e.log" 2>&1 < /dev/null &
  else
    setsid timeout --kill-after=60 "$((tmin * 60 + 120))" nsenter --net="/run/netns/$NS_S" "$BIN/e2e.test" \
      "${flags[@]}" --ginkgo.focus="$focus" ${skip:+--ginkgo.skip="$skip"} --ginkgo.timeout="${tmin}m" \
      --ginkgo.no-color --ginkgo.silence-skips --ginkgo.v > "$out/e2e.log" 2>&1 < /dev/null &
  fi
  local pg=$!
  echo "$pg" > "$ST/e2e-$name.pgid"
  wait "$pg"; local rc=$?
  rm -f "$ST/e2e-$name.pgid"
  echo "e2e $name rc=$rc"
  return $rc
}

down() {
  local f pg sig
  for sig in TERM KILL; do
    for f in "$ST"/e2e-*.pgid "$ST/agent.pgid" "$ST/server.pgid" "$ST/registry.pgid"; do
      [ -f "$f" ] || continue
      pg=$(cat "$f")
      kill -"$sig" -- "-$pg" 2>/dev/null
      [ "$sig" = KILL ] && rm -f "$f"
    done
    [ "$sig" = TERM ] && sleep 5
  done
  sleep 1
  local ns p c pid d
  # containers' shims run in process groups of their own inside the namespaces
  for ns in "$NS_S" "$NS_A"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  done
  sleep 1
  for d in "$DATA_S" "$DATA_A"; do
    grep " $d" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
  done
  ip netns del "$NS_S" 2>/dev/null
  ip netns del "$NS_A" 2>/dev/null
  ip netns del "$LAN" 2>/dev/null
  # containers' processes live in the pods' own network namespaces: find them by the cgroup roots
  for c in $(find /sys/fs/cgroup$CG_S /sys/fs/cgroup/*$CG_S /sys/fs/cgroup$CG_A /sys/fs/cgroup/*$CG_A -name cgroup.procs 2>/dev/null); do
    for pid in $(cat "$c" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  done
  sleep 1
  for c in /sys/fs/cgroup$CG_S /sys/fs/cgroup/*$CG_S /sys/fs/cgroup$CG_A /sys/fs/cgroup/*$CG_A; do
    [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  echo "down $INST; conformance namespaces left: $(ip netns list | grep -c '^conf-')"
}

status() {
  ip netns list | grep "^conf-.*$INST" || true
  for f in "$ST"/*.pgid; do [ -f "$f" ] && echo "$f: $(cat "$f")"; done
  [ -f "$KCFG" ] && kc get nodes -o wide 2>&1 | head
}

cmd=${1:-}; shift || true
case "$cmd" in
  up) up ;;
  e2e) e2e "$@" ;;
  down) down ;;
  status) status ;;
  *) sed -n 2,22p "$0"; exit 2 ;;
esac
