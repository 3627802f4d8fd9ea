--TEST--
A cluster that announces no endpoints (cluster-preferred-endpoint-type unknown-endpoint, as behind NAT or some managed services): CLUSTER SLOTS and MOVED name no host, each meaning the node asked; locked sessions on every primary work, a fresh process connecting to the seed and the slot's owner only
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$nodes = array_map(fn($seed) => "$seed[0]:$seed[1]", rcs_seeds());
$announce = function (string $type) use ($nodes) {
    foreach ($nodes as $addr) {
        $reply = Resp::send($addr, ['CONFIG', 'SET', 'cluster-preferred-endpoint-type', $type]);
        if ($reply !== 'OK') throw new RuntimeException("CONFIG SET on $addr: " . print_r($reply, true));
    }
};
$announce('unknown-endpoint');
try {
    $hosts = array_unique(array_map(fn($range) => $range[2][0], Resp::send($nodes[0], ['CLUSTER', 'SLOTS'])));
    // The documentation says "?"; Redis 7.0 and Valkey 8.1 send a null host.
    $none = in_array(array_values($hosts), [['?'], [''], [null]], true);
    echo "CLUSTER SLOTS hosts: ", $none ? 'none announced' : var_export($hosts, true), "\n";
    for ($i = 0; ; $i++) {
        $reply = Resp::send($nodes[0], ['GET', "moved-probe-$i"]);
        if ($reply instanceof RespError) break;
    }
    echo "redirect: ", preg_replace('/\d+/', 'N', $reply->message), "\n";

    // One session on each primary, each in a fresh process.
    $sids = [];
    for ($i = 0; count($sids) < count(rcs_primaries()); $i++) {
        $sids[rcs_primary_of(rcs_prefix() . "unknown$i")] ??= "unknown$i";
    }
    foreach ($sids as $sid) {
        $before = resp_connections_received($nodes);
        echo rcs_php("session_id('$sid'); var_dump(session_start());"
            . " \$_SESSION['n'] = 41; session_write_close();"
            . " session_id('$sid'); session_start(); echo \$_SESSION['n'], \"\\n\";", rcs_locking());
        $connections = resp_connections_received($nodes) - $before;
        echo "connections: ", $connections >= 1 && $connections <= 2 ? "1 or 2" : $connections, "\n";
    }
} finally {
    $announce('ip');
}
?>
--EXPECT--
CLUSTER SLOTS hosts: none announced
redirect: MOVED N :N
bool(true)
41
connections: 1 or 2
bool(true)
41
connections: 1 or 2
bool(true)
41
connections: 1 or 2
