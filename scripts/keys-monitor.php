<?php
// Watches what the lock scripts touch: every key a command inside a script
// uses must be among the KEYS that script call declared (Redis Cluster's rule;
// a migrating slot and key-routing proxies refuse anything else).
//   php scripts/keys-monitor.php watch DIR SECONDS host:port...   MONITOR each node into DIR until
//                                                                  SIGTERM or SECONDS have passed
//   php scripts/keys-monitor.php check DIR                         exit 1 on an undeclared key, or
//                                                                  when no script was seen at all
[, $mode, $dir] = $argv + [null, null, null];

/** Commands whose every argument is a key; for the others it is the first, for TIME none. */
const ALL_KEYS = ['DEL', 'EXISTS', 'UNLINK', 'TOUCH'];
const NO_KEYS = ['TIME', 'PING'];

/** The quoted arguments of one MONITOR line, still escaped as MONITOR shows them. */
function monitor_args(string $line): array {
    $at = strpos($line, '] ');
    if ($at === false) return [];
    preg_match_all('/"((?:[^"\\\\]|\\\\.)*)"/s', substr($line, $at + 2), $m);
    return $m[1];
}

/** The keys a command inside a script touches. */
function touched_keys(array $args): array {
    $name = strtoupper($args[0] ?? '');
    if (in_array($name, NO_KEYS, true) || count($args) < 2) return [];
    return in_array($name, ALL_KEYS, true) ? array_slice($args, 1) : [$args[1]];
}

function watch(string $dir, float $seconds, array $nodes): void {
    @mkdir($dir, 0777, true);
    $streams = [];
    foreach ($nodes as $node) {
        $socket = stream_socket_client("tcp://$node", $errno, $error, 2);
        if (!$socket) {
            fwrite(STDERR, "keys-monitor: $node: $error\n");
            exit(1);
        }
        fwrite($socket, "MONITOR\r\n");
        $streams[(int)$socket] = [$socket, fopen("$dir/" . str_replace(':', '-', $node) . '.log', 'w')];
    }
    $end = microtime(true) + $seconds;
    while (microtime(true) < $end && $streams) {
        $read = array_column($streams, 0);
        $write = $except = null;
        if (!stream_select($read, $write, $except, 1)) continue;
        foreach ($read as $socket) {
            $chunk = fread($socket, 1 << 16);
            if ($chunk === '' || $chunk === false) {
                if (feof($socket)) unset($streams[(int)$socket]);
                continue;
            }
            fwrite($streams[(int)$socket][1], $chunk);
            fflush($streams[(int)$socket][1]);
        }
    }
}

function check(string $dir): int {
    $calls = $touched = 0;
    $undeclared = [];
    foreach (glob("$dir/*.log") as $file) {
        $declared = null;
        foreach (file($file, FILE_IGNORE_NEW_LINES) as $line) {
            $args = monitor_args($line);
            if (!$args) continue;
            if (str_contains($line, ' lua] ')) {
                foreach (touched_keys($args) as $key) {
                    $touched++;
                    if ($declared === null || !in_array($key, $declared, true)) {
                        $undeclared[] = strtoupper($args[0]) . " $key";
                    }
                }
                continue;
            }
            $name = strtoupper($args[0]);
            if ($name === 'EVAL' || $name === 'EVALSHA') {
                $calls++;
                $declared = array_slice($args, 3, (int)$args[2]);
            } else {
                $declared = null;
            }
        }
    }
    echo "keys-monitor: $calls script calls, $touched keys touched inside them, ", count($undeclared), " undeclared\n";
    foreach (array_slice(array_count_values($undeclared), 0, 10) as $what => $count) {
        echo "  undeclared: {$count}x $what\n";
    }
    return $calls > 0 && !$undeclared ? 0 : 1;
}

match ($mode) {
    'watch' => watch($dir, (float)$argv[3], array_slice($argv, 4)),
    'check' => exit(check($dir)),
    default => exit("usage: keys-monitor.php watch DIR SECONDS host:port... | check DIR\n"),
};
