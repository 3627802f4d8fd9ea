--TEST--
Hostile input: a 16 MB session with NUL bytes round-trips (locked and unlocked); ids PHP and phpredis take work up to 256 bytes, longer ones and (with locking) braced ones are refused with a warning saying why (dangerous ones are replaced by PHP) and leave no key or lock; malformed brace prefixes are refused with locking on
--FILE--
<?php
require __DIR__ . '/inc/setup.php';
set_error_handler(function ($type, $message) {
    echo "  ", preg_replace('/ \(path: .*\)$/', '', $message), "\n";
    return true;
});
$blob = str_repeat("\0\x01\xff{}\r\n", 2 * 1024 * 1024);   // 16 MB
foreach (['0' => 'unlocked', '1' => 'locked'] as $on => $label) {
    $sid = "big$on" . bin2hex(random_bytes(6));
    $out = rcs_php("session_id('$sid'); session_start(); \$_SESSION['blob'] = str_repeat(\"\\0\\x01\\xff{}\\r\\n\", 2 * 1024 * 1024); session_write_close();"
        . " session_id('$sid'); session_start(); echo md5(\$_SESSION['blob']), ' ', strlen(\$_SESSION['blob']);",
        ['redis.session.locking_enabled' => $on, 'memory_limit' => '256M']);
    echo "$label: ", $out === md5($blob) . ' ' . strlen($blob) ? 'same 16 MB back' : $out, "\n";
}

rcs_use_session(rcs_locking());
$longest = str_repeat('a', 256);
session_id($longest);
var_dump(session_start());
$_SESSION['v'] = 1;
session_write_close();
var_dump(rcs_cmd('EXISTS', rcs_prefix() . $longest));

// Ids over PHP's limit, and with locking on ids with braces, are refused; ids
// with characters PHP itself finds dangerous are replaced by PHP with a new id;
// the rest are taken as phpredis takes them.
foreach (['257 chars' => str_repeat('b', 257), 'brace' => 'brace{tag}', 'utf-8' => 'é', 'comma-dash' => 'a,b-c',
          'uniqid' => uniqid('', true),
          'space' => 'has space', 'crlf' => "crlf\r\n"] as $label => $bad) {
    session_id($bad);
    $started = session_start();
    echo "$label: ", $started ? (session_id() === $bad ? 'accepted' : 'new id') : 'refused', "\n";
    if ($started) session_abort();
}
var_dump(count(rcs_keys(rcs_prefix() . '*')));   // the 256-character session and the two 16 MB ones: nothing else

foreach (['{', '}', '}{', '{}', 'a{b', 'x}{y}', '{{}}'] as $prefix) {
    $sid = 'braces' . bin2hex(random_bytes(4));
    rcs_use_session(rcs_locking(['session.save_path' => rcs_save_path('prefix=' . urlencode(rcs_prefix() . $prefix))]));
    session_id($sid);
    echo "prefix '$prefix': ";
    var_dump(session_start());
    if (session_status() === PHP_SESSION_ACTIVE) session_abort();
}
// No key or lock from the prefixes (the locked writes above leave their _DONE logs).
var_dump(count(array_filter(rcs_keys('*' . rcs_prefix() . '*'), fn($key) => !str_ends_with($key, '_DONE'))));
?>
--EXPECTF--
unlocked: same 16 MB back
locked: same 16 MB back
bool(true)
int(1)
  session_start(): Session ID is empty or longer than 256 bytes
  session_start(): Failed to read session data: rediscluster
257 chars: refused
  session_start(): Session ID contains { or }, which with locking on would move its lock to another cluster slot than its data
  session_start(): Failed to read session data: rediscluster
brace: refused
utf-8: accepted
comma-dash: accepted
uniqid: accepted
space: new id
crlf: new id
int(3)
prefix '{':   session_start(): Cluster session prefix must contain no braces or a non-empty {hash-tag}
  session_start(): Failed to read session data: rediscluster
bool(false)
prefix '}':   session_start(): Cluster session prefix must contain no braces or a non-empty {hash-tag}
  session_start(): Failed to read session data: rediscluster
bool(false)
prefix '}{':   session_start(): Cluster session prefix must contain no braces or a non-empty {hash-tag}
  session_start(): Failed to read session data: rediscluster
bool(false)
prefix '{}':   session_start(): Cluster session prefix must contain no braces or a non-empty {hash-tag}
  session_start(): Failed to read session data: rediscluster
bool(false)
prefix 'a{b':   session_start(): Cluster session prefix must contain no braces or a non-empty {hash-tag}
  session_start(): Failed to read session data: rediscluster
bool(false)
prefix 'x}{y}': bool(true)
prefix '{{}}': bool(true)
int(3)
