<?php
// A minimal RESP client, so tests and benchmarks do not depend on phpredis.

final class Resp {
    /** @var array<string,resource> */
    private static array $sockets = [];

    private static function socket(string $addr) {
        if (!isset(self::$sockets[$addr])) {
            $s = @stream_socket_client("tcp://$addr", $errno, $errstr, 2);
            if (!$s) throw new RuntimeException("connect $addr: $errstr");
            stream_set_timeout($s, 5);
            self::$sockets[$addr] = $s;
        }
        return self::$sockets[$addr];
    }

    /** Drops the connection to $addr (after its server died), so the next send reconnects. */
    public static function forget(string $addr): void {
        unset(self::$sockets[$addr]);
    }

    /** Sends one command to $addr and returns the reply (errors as RespError). */
    public static function send(string $addr, array $args) {
        $s = self::socket($addr);
        $out = '*' . count($args) . "\r\n";
        foreach ($args as $a) {
            $a = (string)$a;
            $out .= '$' . strlen($a) . "\r\n$a\r\n";
        }
        for ($off = 0; $off < strlen($out); $off += $n) {
            $n = fwrite($s, substr($out, $off));
            if (!$n) throw new RuntimeException("write to $addr failed");
        }
        return self::read($s);
    }

    private static function read($s) {
        $line = fgets($s);
        if ($line === false) throw new RuntimeException('connection closed');
        $type = $line[0];
        $body = substr($line, 1, -2);
        switch ($type) {
            case '+': return $body;
            case '-': return new RespError($body);
            case ':': return (int)$body;
            case '$':
                if ((int)$body < 0) return null;
                $data = '';
                $want = (int)$body + 2;
                while (strlen($data) < $want) {
                    $chunk = fread($s, $want - strlen($data));
                    if ($chunk === false || $chunk === '') throw new RuntimeException('short read');
                    $data .= $chunk;
                }
                return substr($data, 0, -2);
            case '*':
                if ((int)$body < 0) return null;
                $items = [];
                for ($i = 0; $i < (int)$body; $i++) $items[] = self::read($s);
                return $items;
        }
        throw new RuntimeException("bad reply: $line");
    }
}

final class RespError {
    public function __construct(public string $message) {}
}

/** A counter of INFO stats summed over the servers at $addrs. */
function resp_stats_sum(array $addrs, string $field): int {
    $total = 0;
    foreach ($addrs as $addr) {
        preg_match("/^$field:(\\d+)/m", Resp::send($addr, ['INFO', 'stats']), $m);
        $total += (int)$m[1];
    }
    return $total;
}

/** Socket reads the servers at $addrs have processed: one per round trip of a client. */
function resp_reads_processed(array $addrs): int {
    return resp_stats_sum($addrs, 'total_reads_processed');
}

/** Connections the servers at $addrs have accepted since they started. */
function resp_connections_received(array $addrs): int {
    return resp_stats_sum($addrs, 'total_connections_received');
}
