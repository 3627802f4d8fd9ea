--TEST--
The slot map shared by this user's workers: a fresh worker takes the one a sibling fetched (no CLUSTER SLOTS, one connection), a map fetched after a MOVED reaches a running worker before it sends (no MOVED), and a file readable by others, changed, or turned off with shared_slot_map=0 is not used
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
// A seed no one else names, last (never asked while the others answer): this
// test's workers share a map of their own, not one an earlier test left.
$own_seed = 'rcs-' . bin2hex(random_bytes(6)) . '.invalid:1';
$save_path = rcs_save_path("seed[]=$own_seed&prefix=" . urlencode(rcs_prefix()));
$ini = ['session.save_path' => $save_path, 'session.lazy_write' => '1'];
// A session whose slot holds no key (earlier tests' sessions live on): it can move at once.
do {
    $sid = 'shared' . bin2hex(random_bytes(6));
    $slot = rcs_cmd('CLUSTER', 'KEYSLOT', rcs_prefix() . $sid);
} while (Resp::send(rcs_primary_of(rcs_prefix() . $sid), ['CLUSTER', 'COUNTKEYSINSLOT', $slot]) !== 0);
// A session read and closed (nothing written: its slot stays empty and can move).
$read = "session_id('$sid'); session_start(['read_and_close' => true]);";
// Not echoed: the helpers buffer output, and a running worker must answer at once.
$report = 'fwrite(STDOUT, json_encode(["maps" => rediscluster_session_stats()["slot_maps"], "opened" => rediscluster_session_stats()["node_connections"]["opened"]]) . "\n");';
$fresh = function (string $label, array $extra = []) use ($read, $report, $ini) {
    $fetches = rcs_slot_map_fetches();
    $out = trim(rcs_php($read . $report, $extra + $ini));
    echo "$label: $out, CLUSTER SLOTS calls: ", rcs_slot_map_fetches() - $fetches > 0 ? 'some' : 'none', "\n";
};
$errorstat = function (string $error) {
    $count = 0;
    foreach (rcs_primaries() as $addr) {
        if (preg_match("/^errorstat_$error:count=(\\d+)/m", Resp::send($addr, ['INFO', 'errorstats']), $m)) $count += (int)$m[1];
    }
    return $count;
};
// This process's user (posix may not be loaded): the owner of a file it makes.
$temporary = tempnam(sys_get_temp_dir(), 'rcs');
$uid = fileowner($temporary);
unlink($temporary);
// This test's map file: the one in this user's directory that names its own seed.
$map_file = function () use ($uid, $own_seed) {
    foreach (glob("/dev/shm/rediscluster_session-$uid/*.slots") as $file) {
        if (str_contains((string)@file_get_contents($file), $own_seed)) return $file;
    }
    return null;
};
register_shutdown_function(fn() => ($file = $map_file()) !== null && unlink($file));

$fresh('first worker');
$file = $map_file();
printf("shared file: mode %o, ours: %s, in a directory of mode %o\n", fileperms($file) & 0777, json_encode(fileowner($file) === $uid), fileperms(dirname($file)) & 0777);
$fresh('second worker');
$fresh('shared_slot_map=0', ['session.save_path' => "$save_path&shared_slot_map=0"]);

// A running worker, and the session's slot moved to another primary.
$worker = rcs_spawn('while (fgets(STDIN) !== false) { ' . $read . $report . ' }', $ini);
$ask = fn() => fwrite($worker[3], "go\n") ? trim(fgets($worker[1])) : '';
echo 'running worker: ', $ask(), "\n";
$from = rcs_primary_of(rcs_prefix() . $sid);
$to = current(array_filter(rcs_primaries(), fn($addr) => $addr !== $from));
$move = function (string $from, string $to) use ($slot) {
    $to_id = Resp::send($to, ['CLUSTER', 'MYID']);
    Resp::send($to, ['CLUSTER', 'SETSLOT', $slot, 'IMPORTING', Resp::send($from, ['CLUSTER', 'MYID'])]);
    Resp::send($from, ['CLUSTER', 'SETSLOT', $slot, 'MIGRATING', $to_id]);
    Resp::send($to, ['CLUSTER', 'SETSLOT', $slot, 'NODE', $to_id]);
    foreach (rcs_primaries() as $addr) {
        if ($addr !== $to) Resp::send($addr, ['CLUSTER', 'SETSLOT', $slot, 'NODE', $to_id]);
    }
};
$move($from, $to);
register_shutdown_function(fn() => rcs_primary_of(rcs_prefix() . $sid) === $to && $move($to, $from));
// A MOVED within 100 ms of a map's fetch is taken as the cluster settling
// (the slot fixed, no new map): let the shared map be older than that.
usleep(200000);
$moved = $errorstat('MOVED');
$fresh('fresh worker after the move (the shared map is stale: MOVED)');
echo 'MOVED replies: ', $errorstat('MOVED') > $moved ? 'some' : 'none', "\n";
// The running worker looks for a newer map once a second, before it sends.
usleep(1100000);
$moved = $errorstat('MOVED');
echo 'running worker: ', $ask(), "\n";
echo 'MOVED replies: ', $errorstat('MOVED') > $moved ? 'some' : 'none', "\n";
rcs_wait($worker);
$move($to, $from);

// A file others may read, or whose text changed, is not used, and is replaced.
chmod($map_file(), 0644);
$fresh('file readable by others');
printf("shared file: mode %o\n", fileperms($map_file()) & 0777);
$file = $map_file();
file_put_contents($file, preg_replace('/^(\d+) (\d+) (\S+) (\d+)/m', '$1 $2 $3 1$4', file_get_contents($file), 1));
$fresh('file changed');
?>
--EXPECTF--
first worker: {"maps":{"fetched":1,"shared":0},"opened":%d}, CLUSTER SLOTS calls: some
shared file: mode 600, ours: true, in a directory of mode 700
second worker: {"maps":{"fetched":0,"shared":1},"opened":1}, CLUSTER SLOTS calls: none
shared_slot_map=0: {"maps":{"fetched":1,"shared":0},"opened":%d}, CLUSTER SLOTS calls: some
running worker: {"maps":{"fetched":0,"shared":1},"opened":1}
fresh worker after the move (the shared map is stale: MOVED): {"maps":{"fetched":1,"shared":1},"opened":%d}, CLUSTER SLOTS calls: some
MOVED replies: some
running worker: {"maps":{"fetched":0,"shared":2},"opened":2}
MOVED replies: none
file readable by others: {"maps":{"fetched":1,"shared":0},"opened":%d}, CLUSTER SLOTS calls: some
shared file: mode 600
file changed: {"maps":{"fetched":1,"shared":0},"opened":%d}, CLUSTER SLOTS calls: some
