--TEST--
The lease watchdog's thread starts at a process's first request startup when its INI leases session locks (the rediscluster handler, locking, a lease), before any session, so no locked request waits for it; with lease 0, locking off or another handler, no thread
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
$threads = 'echo count(scandir("/proc/self/task")) - 2, " ";'
    . ' session_start(); $_SESSION["n"] = 1; session_write_close(); echo count(scandir("/proc/self/task")) - 2, "\n";';
echo 'leased: ', rcs_php($threads, rcs_locking());
echo 'lease 0: ', rcs_php($threads, rcs_locking_unleased());
echo 'locking off: ', rcs_php($threads);
echo 'files handler: ', rcs_php($threads, rcs_locking(['session.save_handler' => 'files', 'session.save_path' => sys_get_temp_dir()]));
?>
--EXPECT--
leased: 2 2
lease 0: 1 1
locking off: 1 1
files handler: 1 1
