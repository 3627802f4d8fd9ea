--TEST--
session_regenerate_id(true|false) with and without locking: old lock released, new one held, no lock key leaked
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
foreach (['0', '1'] as $locking) {
    foreach ([false, true] as $destroy) {
        $code = "session_start(); \$_SESSION['v'] = 'data'; \$old = session_id(); session_write_close();"
            . " session_id(\$old); session_start(); session_regenerate_id(" . var_export($destroy, true) . ");"
            . " \$new = session_id();"
            . " echo \$new !== \$old ? 'new id' : 'same id', ', old lock ', Resp::send(rcs_seeds()[0][0] . ':' . rcs_seeds()[0][1], ['PING']) === 'PONG' ? rcs_cmd('EXISTS', rcs_lock_key(\$old)) : '?',"
            . " ', new lock ', rcs_cmd('EXISTS', rcs_lock_key(\$new)), PHP_EOL;"
            . " session_write_close();"
            . " echo 'old data ', var_export(rcs_cmd('GET', rcs_prefix() . \$old), true), ', new data ', rcs_cmd('GET', rcs_prefix() . \$new), PHP_EOL;";
        echo "locking=$locking destroy=", var_export($destroy, true), "\n", rcs_php($code, ['redis.session.locking_enabled' => $locking]);
    }
}
var_dump(rcs_keys(rcs_prefix() . '*_LOCK'));
?>
--EXPECT--
locking=0 destroy=false
new id, old lock 0, new lock 0
old data 'v|s:4:"data";', new data v|s:4:"data";
locking=0 destroy=true
new id, old lock 0, new lock 0
old data NULL, new data v|s:4:"data";
locking=1 destroy=false
new id, old lock 0, new lock 1
old data 'v|s:4:"data";', new data v|s:4:"data";
locking=1 destroy=true
new id, old lock 0, new lock 1
old data NULL, new data v|s:4:"data";
array(0) {
}
