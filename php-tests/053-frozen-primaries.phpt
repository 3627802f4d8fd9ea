--TEST--
Every primary frozen (SIGSTOP) under a warm worker connected to all of them: session_start() returns false with a warning within timeout + read_timeout + 0.3 s, unlocked, locked and in strict mode; the worker works again once they are thawed (scripts/test.sh runs it on a 16-node cluster too)
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
// Each primary, with its pid (the cluster runs on this machine).
$primaries = [];
foreach (rcs_cmd('CLUSTER', 'SLOTS') as $range) {
    $addr = "{$range[2][0]}:{$range[2][1]}";
    preg_match('/process_id:(\d+)/', Resp::send($addr, ['INFO', 'server']), $m);
    $primaries[$addr] = (int)$m[1];
}
// A session on each primary.
$sids = [];
for ($i = 0; count($sids) < count($primaries); $i++) {
    $sid = "frozen$i" . bin2hex(random_bytes(4));
    $sids[rcs_primary_of(rcs_prefix() . $sid)] ??= $sid;
}
echo count($primaries) >= 3 ? "primaries: " . count($primaries) . " (at least 3)\n" : "primaries: " . count($primaries) . "\n";
$signal = fn(string $sig) => exec('kill -' . $sig . ' ' . implode(' ', $primaries));
$cases = [
    'unlocked' => [],
    'locked' => rcs_locking(),
    'locked, strict mode' => rcs_locking(['session.use_strict_mode' => '1']),
];
foreach ($cases as $label => $ini) {
    $go = tempnam(sys_get_temp_dir(), 'rcsgo');
    unlink($go);
    $ini += ['session.save_path' => rcs_save_path('timeout=1&read_timeout=1&prefix=' . urlencode(rcs_prefix()))];
    $child = rcs_spawn('
        // The parent reads each line as it comes.
        while (ob_get_level()) ob_end_flush();
        $warnings = [];
        set_error_handler(function ($type, $message) use (&$warnings) {
            $warnings[] = preg_replace("/: .*/", "", $message); return true; });
        $sids = ' . var_export(array_values($sids), true) . ';
        foreach ($sids as $sid) { session_id($sid); session_start(); $_SESSION["n"] = 1; session_write_close(); }
        // Remote ports of this process\'s established TCP connections.
        $inodes = [];
        foreach (glob("/proc/self/fd/*") as $fd) {
            if (preg_match("/socket:\\[(\\d+)\\]/", (string)@readlink($fd), $m)) $inodes[$m[1]] = true;
        }
        $ports = [];
        foreach (file("/proc/self/net/tcp") as $line) {
            $f = preg_split("/\\s+/", trim($line));
            if (isset($inodes[$f[9] ?? ""]) && ($f[3] ?? "") === "01") $ports[] = hexdec(explode(":", $f[2])[1]);
        }
        $primaries = ' . var_export(array_map(fn($a) => (int)substr(strrchr($a, ':'), 1), array_keys($primaries)), true) . ';
        echo "warm: connected to every primary: ", var_export(array_diff($primaries, $ports) === [], true), "\n";
        while (!file_exists(' . var_export($go, true) . ')) usleep(5000);
        $t = microtime(true);
        session_id($sids[0]);
        $started = session_start();
        $elapsed = microtime(true) - $t;
        echo "started: ", var_export($started, true), "\n";
        echo "warned: ", var_export($warnings !== [], true), "\n";
        // The bound of the promise, plus 0.3 s for a loaded machine.
        echo "within timeout + read_timeout + 0.3 s: ", var_export($elapsed < 2.3, true), $elapsed < 2.3 ? "" : " ($elapsed s)", "\n";
        while (file_exists(' . var_export($go, true) . ')) usleep(5000);
        session_id($sids[0]);
        echo "after the thaw: ", var_export(@session_start(), true), "\n";', $ini);
    $warm = fgets($child[1]);
    $signal('STOP');
    touch($go);
    $result = '';
    for ($line = 0; $line < 3; $line++) $result .= fgets($child[1]);
    $signal('CONT');
    unlink($go);
    echo "$label:\n", $warm, $result, rcs_wait($child);
}
?>
--EXPECTF--
primaries: %d%A
unlocked:
warm: connected to every primary: true
started: false
warned: true
within timeout + read_timeout + 0.3 s: true
after the thaw: true
locked:
warm: connected to every primary: true
started: false
warned: true
within timeout + read_timeout + 0.3 s: true
after the thaw: true
locked, strict mode:
warm: connected to every primary: true
started: false
warned: true
within timeout + read_timeout + 0.3 s: true
after the thaw: true
