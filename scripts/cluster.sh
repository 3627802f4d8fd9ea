#!/usr/bin/env bash
# Starts or stops a local 6-node cluster (3 primaries, 3 replicas) on 127.0.0.1;
# CLUSTER_NODES=16 makes it 8 primaries and 8 replicas.
#   scripts/cluster.sh start|stop|status [redis|valkey] [BASE_PORT]
#   scripts/cluster.sh kill-node|start-node|pause-node|resume-node FLAVOR BASE_PORT PORT
# start-node also starts a new, empty node on another port, to add to the cluster.
# Nodes use ports BASE_PORT..BASE_PORT+5 (default 7100 for redis, 7200 for valkey).
# Data, logs and pid files live in .cluster/<flavor>-<port>; stop kills only the pids recorded there.
# CLUSTER_TLS_DIR=dir makes a TLS-only cluster (see scripts/tls-certs.sh).
# CLUSTER_NODE_TIMEOUT (ms, default 15000): long, so that a loaded machine, or
# MONITOR formatting a multi-MB argument, never fails a node over by
# accident; the chaos run asks for 1 s where it wants failovers.
# CLUSTER_REPLICAS=2: two replicas per primary (with CLUSTER_NODES=9).
# CLUSTER_NETNS=PREFIX and CLUSTER_NET=A.B.C (chaos/partition.sh): node
# BASE_PORT+i runs in the network namespace PREFIXi, made beforehand, bound
# to A.B.C.(i+1), so that the network between nodes can be cut.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

action=${1:-}
flavor=${2:-redis}
base=${3:-$(default_base_port "$flavor")}
[ -n "$base" ] || die "unknown server flavor '$flavor'"
dir="$ROOT/.cluster/$flavor-$base"
nodes=${CLUSTER_NODES:-6}
ports=($(seq "$base" $((base + nodes - 1))))
replicas=${CLUSTER_REPLICAS:-1}
netns=${CLUSTER_NETNS:-}

# The address node $1 (a port) binds, and the command prefix that runs in its namespace.
node_host() { if [ -n "$netns" ]; then echo "${CLUSTER_NET:?}.$(($1 - base + 1))"; else echo 127.0.0.1; fi; }
in_node_netns() { if [ -n "$netns" ]; then ip netns exec "$netns$(($1 - base))" "${@:2}"; else "${@:2}"; fi; }

node_pid() { cat "$dir/$1/pid" 2>/dev/null || true; }

# Every node started in the cluster's directory, the added ones included.
started_ports() {
    local pidfile
    for pidfile in "$dir"/*/pid; do
        [ -f "$pidfile" ] && basename "$(dirname "$pidfile")"
    done
}

stop() {
    local port pid
    for port in $(started_ports); do
        pid=$(node_pid "$port")
        [ -n "$pid" ] && stop_process "$pid" &
    done
    wait
    rm -rf "$dir"
}

wait_until() { # seconds, description, command...
    local deadline=$((SECONDS + $1)) what=$2
    shift 2
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $deadline ] || die "timed out waiting for $what"
        sleep 0.2
    done
}

cluster_ready() {
    local port
    for port in "${ports[@]}"; do
        # Captured first: `cli | grep -q` fails under pipefail when grep leaves early.
        local info
        info=$(cli -h "$(node_host "$port")" -p "$port" cluster info) || return 1
        grep -q 'cluster_state:ok' <<<"$info" || return 1
        # A replica is ready when its link is up and its primary counts it
        # online (WAIT only counts those; the two can differ for a moment).
        local replication
        replication=$(cli -h "$(node_host "$port")" -p "$port" info replication)
        case "$replication" in
            *role:master*) grep -q 'state=online' <<<"$replication" || return 1 ;;
            *) grep -q 'master_link_status:up' <<<"$replication" || return 1 ;;
        esac
    done
    [ "$(cli -h "$(node_host "${ports[0]}")" -p "${ports[0]}" cluster nodes | grep -c slave)" -eq $((nodes - nodes / (replicas + 1))) ]
}

# With CLUSTER_TLS_DIR (certificates from scripts/tls-certs.sh) every node
# speaks TLS only, to clients, to replicas and on the cluster bus.
tls_dir=${CLUSTER_TLS_DIR:-}
server_tls=() cli_tls=()
if [ -n "$tls_dir" ]; then
    server_tls=(--port 0 --tls-cluster yes --tls-replication yes --tls-auth-clients optional
        --tls-cert-file "$tls_dir/server.crt" --tls-key-file "$tls_dir/server.key"
        --tls-ca-cert-file "$tls_dir/ca.crt")
    cli_tls=(--tls --cacert "$tls_dir/ca.crt")
fi
cli() { "$CLI_BIN" "${cli_tls[@]}" "$@"; }

# Starts one node; a node restarted this way keeps its nodes.conf and rejoins.
start_node() {
    local port_args=(--port "$1")
    [ -z "$tls_dir" ] || port_args=(--tls-port "$1" "${server_tls[@]}")
    # In its namespace a node is reached from other addresses, which protected mode refuses.
    [ -z "$netns" ] || port_args+=(--protected-mode no)
    mkdir -p "$dir/$1"
    in_node_netns "$1" "$SERVER_BIN" "${port_args[@]}" --bind "$(node_host "$1")" --dir "$dir/$1" \
        --cluster-enabled yes --cluster-config-file nodes.conf \
        --cluster-node-timeout "${CLUSTER_NODE_TIMEOUT:-15000}" \
        --save '' --appendonly no --daemonize yes \
        --pidfile "$dir/$1/pid" --logfile "$dir/$1/log" >/dev/null
}

start() {
    server_binaries "$flavor"
    [ -d "$dir" ] && stop
    local port
    for port in "${ports[@]}"; do start_node "$port"; done
    for port in "${ports[@]}"; do
        wait_until 10 "node $port" cli -h "$(node_host "$port")" -p "$port" ping
    done
    cli --cluster create $(for port in "${ports[@]}"; do printf '%s:%s ' "$(node_host "$port")" "$port"; done) \
        --cluster-replicas "$replicas" --cluster-yes >"$dir/create.log" 2>&1 \
        || { cat "$dir/create.log" >&2; die "cluster create failed"; }
    wait_until 60 "the $flavor cluster to be ready" cluster_ready
    log "$flavor cluster up on ports ${ports[0]}-${ports[-1]}${netns:+ in namespaces ${netns}0-$((nodes - 1))} ($("$SERVER_BIN" --version | cut -d' ' -f1-3))"
}

case "$action" in
    start) start ;;
    stop) stop ;;
    status) server_binaries "$flavor"; cluster_ready && echo up || { echo down; exit 1; } ;;
    # Until every node is up and every replica in sync (after a test restarted one).
    wait-ready) server_binaries "$flavor"; wait_until 60 "the $flavor cluster to be ready" cluster_ready ;;
    # For fault tests: SIGKILL one node, or start it again with its old identity;
    # freeze one (SIGSTOP) and thaw it (SIGCONT).
    kill-node) kill -9 "$(node_pid "${4:?PORT}")" ;;
    pause-node) kill -STOP "$(node_pid "${4:?PORT}")" ;;
    resume-node) kill -CONT "$(node_pid "${4:?PORT}")" ;;
    start-node) server_binaries "$flavor"; start_node "${4:?PORT}" ;;
    # The flavor's CLI, e.g. for --cluster add-node, rebalance and del-node.
    cli) server_binaries "$flavor"; shift 3; cli "$@" ;;
    *) die "usage: scripts/cluster.sh start|stop|status|wait-ready|kill-node|start-node|pause-node|resume-node|cli [redis|valkey] [BASE_PORT] [PORT|CLI ARGS...]" ;;
esac
