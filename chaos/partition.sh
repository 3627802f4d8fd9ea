#!/usr/bin/env bash
# The partition chaos test in one command (issue 30): a bridge and one network
# namespace per cluster node and per side's workers, a cluster with each node
# in its namespace on an address of its own (cluster-node-timeout 1 s), then
# chaos/partition.php's scenarios; everything made is removed on every exit.
#   chaos/partition.sh [--replicas=1|2] [--only=SCENARIO,...] [redis|valkey9]
# (default: 1 replica per primary, every scenario, redis). One scenario alone:
#   chaos/partition.sh --only=minority
# Scenarios: minority one-way flapping replica migration failover=error (see chaos/partition.php).
# Needs root (ip netns). Names: namespaces PREFIXn0.., PREFIXwa, PREFIXwb and
# the bridge PREFIXbr (PARTITION_NETNS, default rcsp-); addresses in
# PARTITION_NET.0.0/16 (default 10.77): the bridge .0.1, node i .1.(i+1),
# workers .2.1 (majority's side) and .2.2 (minority's); ports from
# PARTITION_BASE (default 9200), cluster bus +10000.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$ROOT"

replicas=1 flavor=redis args=()
for arg in "$@"; do
    case "$arg" in
        --replicas=*) replicas=${arg#*=} ;;
        --*) args+=("$arg") ;;
        *) flavor=$arg ;;
    esac
done
case "$replicas" in 1|2) ;; *) die "--replicas is 1 or 2" ;; esac
[ "$(id -u)" -eq 0 ] || die "chaos/partition.sh needs root (network namespaces)"
export PARTITION_NETNS=${PARTITION_NETNS:-rcsp-} PARTITION_NET=${PARTITION_NET:-10.77}
base=${PARTITION_BASE:-9200}
nodes=$((3 * (replicas + 1)))
bridge=${PARTITION_NETNS}br
namespaces=($(for i in $(seq 0 $((nodes - 1))); do echo "${PARTITION_NETNS}n$i"; done) "${PARTITION_NETNS}wa" "${PARTITION_NETNS}wb")
cluster=(env CLUSTER_NETNS="${PARTITION_NETNS}n" CLUSTER_NET="$PARTITION_NET.1" CLUSTER_NODES=$nodes
    CLUSTER_REPLICAS=$replicas CLUSTER_NODE_TIMEOUT=1000 "$ROOT/scripts/cluster.sh")
[ -f "$EXT_SO" ] || "$ROOT/scripts/build.sh"

for ns in "${namespaces[@]}"; do
    ! ip netns list | grep -qw "$ns" || die "namespace $ns exists: another run, or one that was killed (ip netns del $ns)"
done

tmp=$(mktemp -d /tmp/rcsp-partition.XXXXXX)
mkdir "$tmp/wa" "$tmp/wb"
export PARTITION_SHM=$tmp

driver=
cleanup() {
    local ns pid
    [ -z "$driver" ] || stop_process "$driver"
    # PARTITION_LOGS=DIR keeps the nodes' logs and nodes.conf there, for a failure's post-mortem.
    [ -z "${PARTITION_LOGS:-}" ] || { mkdir -p "$PARTITION_LOGS"; cp -r "$ROOT/.cluster/$flavor-$base/." "$PARTITION_LOGS/" || true; }
    "${cluster[@]}" stop "$flavor" "$base" || true
    # Whatever still runs in the namespaces is this run's (workers of a killed driver).
    for ns in "${namespaces[@]}"; do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do stop_process "$pid"; done
        ip link del "${ns}h" 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
    ip link del "$bridge" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip link add "$bridge" type bridge
ip addr add "$PARTITION_NET.0.1/16" dev "$bridge"
ip link set "$bridge" up
# addr_of NAMESPACE
addr_of() {
    case "$1" in
        "${PARTITION_NETNS}wa") echo "$PARTITION_NET.2.1" ;;
        "${PARTITION_NETNS}wb") echo "$PARTITION_NET.2.2" ;;
        *) echo "$PARTITION_NET.1.$((${1#"${PARTITION_NETNS}n"} + 1))" ;;
    esac
}
for ns in "${namespaces[@]}"; do
    ip netns add "$ns"
    ip link add "${ns}h" type veth peer name eth0 netns "$ns"
    ip link set "${ns}h" master "$bridge" up
    ip -n "$ns" addr add "$(addr_of "$ns")/16" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    # The local table's rule goes behind priority 100, where a cut's blackhole
    # rules go: they must see a packet before it is delivered.
    ip -n "$ns" rule add pref 200 lookup local
    ip -n "$ns" rule del pref 0
done

"${cluster[@]}" start "$flavor" "$base"
# In the background, so that an interrupt is handled at once (bash runs a trap
# only once its foreground command has ended), and the driver stopped first.
RCS_EXT=$EXT_SO "${cluster[@]:0:6}" "$PHP" -n "$ROOT/chaos/partition.php" "$flavor" "$base" "$replicas" "${args[@]}" &
driver=$!
status=0
wait "$driver" || status=$?
driver=
# 1 is a broken rule, which the driver has printed; anything else, a crash or a kill.
[ "$status" -le 1 ] || log "chaos/partition.php ended with status $status (a crash, or killed)"
exit $status
