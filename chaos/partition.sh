#!/usr/bin/env bash
# The partition chaos test in one command (issue 30): a bridge and one network
# namespace per cluster node, per side's workers and for the driver, a cluster
# with each node in its namespace on an address of its own (cluster-node-timeout
# 1 s), then chaos/partition.php's scenarios. Everything made is removed when it
# ends; what a run killed with SIGKILL left, the next run with its number removes.
#   chaos/partition.sh [--replicas=1|2] [--only=SCENARIO,...] [redis|valkey9]
# (default: 1 replica per primary, every scenario, redis). One scenario alone:
#   chaos/partition.sh --only=minority
# Scenarios: minority one-way failover=error replica flapping migration (see chaos/partition.php).
# Needs root (ip netns). PARTITION_RUN=N (0-9, default 0) lets runs go at once:
# run N's namespaces are rcsN-n0.. (nodes), rcsN-wa, rcsN-wb (workers of the
# majority's and the minority's side), rcsN-ctl (the driver), its bridge
# rcsN-br, its addresses 10.(77+N).0.0/16 (driver .0.1, node i .1.(i+1),
# workers .2.1 and .2.2), its ports 9200+100N.. (cluster bus +10000).
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$ROOT"

replicas=1 flavor=redis args=()
for arg in "$@"; do
    case "$arg" in
        --replicas=*) replicas=${arg#*=} ;;
        --only=*) args+=("$arg") ;;
        redis|valkey9) flavor=$arg ;;
        *) die "unknown argument $arg: chaos/partition.sh [--replicas=1|2] [--only=SCENARIO,...] [redis|valkey9]" ;;
    esac
done
case "$replicas" in 1|2) ;; *) die "--replicas is 1 or 2" ;; esac
run=${PARTITION_RUN:-0}
[[ "$run" =~ ^[0-9]$ ]] || die "PARTITION_RUN is a digit"
[ "$(id -u)" -eq 0 ] || die "chaos/partition.sh needs root (network namespaces)"
export PARTITION_NETNS=rcs$run- PARTITION_NET=10.$((77 + run))
base=$((9200 + 100 * run))
nodes=$((3 * (replicas + 1)))
bridge=${PARTITION_NETNS}br
control=${PARTITION_NETNS}ctl
namespaces=($(for i in $(seq 0 $((nodes - 1))); do echo "${PARTITION_NETNS}n$i"; done) "${PARTITION_NETNS}wa" "${PARTITION_NETNS}wb" "$control")
cluster=(env CLUSTER_NETNS="${PARTITION_NETNS}n" CLUSTER_NET="$PARTITION_NET.1" CLUSTER_NODES=$nodes
    CLUSTER_REPLICAS=$replicas CLUSTER_NODE_TIMEOUT=1000 "$ROOT/scripts/cluster.sh")
[ -f "$EXT_SO" ] || "$ROOT/scripts/build.sh"

# One run per number at a time; the lock is not passed on to what the run
# starts, so that a run killed with SIGKILL leaves it free for the next.
state=/tmp/rediscluster_session-partition-$run
exec {lock}>"$state.lock"
flock -n "$lock" || die "partition run $run is going already (PARTITION_RUN=N picks another)"
export PARTITION_SHM=$state

# Removes everything run $run made: this run's, or a killed one's.
cleanup() {
    local ns pid
    # The driver has a session of its own: its children (redis-cli, cluster.sh) go with it.
    if pid=$(cat "$state/driver" 2>/dev/null) && grep -qs partition.php "/proc/$pid/cmdline"; then
        kill -TERM -- "-$pid" 2>/dev/null || true
        stop_process "$pid"
        kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    # PARTITION_LOGS=DIR keeps the nodes' logs and nodes.conf there, for a failure's post-mortem.
    [ -z "${PARTITION_LOGS:-}" ] || [ ! -d "$ROOT/.cluster/$flavor-$base" ] \
        || { mkdir -p "$PARTITION_LOGS"; cp -r "$ROOT/.cluster/$flavor-$base/." "$PARTITION_LOGS/" || true; }
    local stopped
    for stopped in redis valkey9; do "$ROOT/scripts/cluster.sh" stop "$stopped" "$base" || true; done
    # Whatever still runs in the namespaces is the run's (workers of a killed driver).
    for ns in $(ip netns list | awk -v prefix="$PARTITION_NETNS" 'index($1, prefix) == 1 { print $1 }'); do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do stop_process "$pid"; done
        ip link del "${ns}h" 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
    ip link del "$bridge" 2>/dev/null || true
    rm -rf "$state"
}
end_run() {
    # A second interrupt must not cut the cleanup short.
    trap '' INT TERM
    cleanup
    rm -f "$state.lock"
}
cleanup
trap end_run EXIT
trap 'exit 130' INT TERM
mkdir -p "$state/wa" "$state/wb"

ip link add "$bridge" type bridge
ip link set "$bridge" up
# addr_of NAMESPACE
addr_of() {
    case "$1" in
        "$control") echo "$PARTITION_NET.0.1" ;;
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

# The cluster is made, and the driver run, from the driver's namespace: no
# address outside the run's namespaces is used.
ip netns exec "$control" "${cluster[@]}" start "$flavor" "$base" {lock}>&-
# In a session of its own, in the background: an interrupt reaches only this
# script, whose trap then stops the driver with everything it started.
ip netns exec "$control" env RCS_EXT="$EXT_SO" "${cluster[@]:0:6}" \
    setsid "$PHP" -n "$ROOT/chaos/partition.php" "$flavor" "$base" "$replicas" "${args[@]}" {lock}>&- &
echo $! >"$state/driver"
status=0
wait "$(cat "$state/driver")" || status=$?
# 1 is a broken rule, which the driver has printed; anything else, a usage error it printed, a crash or a kill.
[ "$status" -le 1 ] || log "chaos/partition.php ended with status $status"
exit $status
