<?php
// A name server for the tests, on UDP port 53 of ADDRESS:
//   php dns-server.php ADDRESS NAME=IPV4@SECONDS...
// A query for NAME is answered after SECONDS: A with IPV4, AAAA with no
// address; any other name gets NXDOMAIN at once. Prints "ready" once it
// listens, and exits when its standard input closes (the test ended).
[, $address] = $argv;
$names = [];
foreach (array_slice($argv, 2) as $spec) {
    preg_match('/^([^=]+)=([\d.]+)@([\d.]+)$/', $spec, $m) or exit("not NAME=IPV4@SECONDS: $spec\n");
    $names[strtolower($m[1])] = [inet_pton($m[2]), (float)$m[3]];
}
$server = stream_socket_server("udp://$address:53", $errno, $error, STREAM_SERVER_BIND) or exit("$error\n");
echo "ready\n";
$due = [];   // replies not sent yet: [when, reply, peer]
while (true) {
    usort($due, fn($a, $b) => $a[0] <=> $b[0]);
    while ($due && $due[0][0] <= microtime(true)) {
        [, $reply, $peer] = array_shift($due);
        stream_socket_sendto($server, $reply, 0, $peer);
    }
    $wait = $due ? max(0, $due[0][0] - microtime(true)) : 1;
    $read = [$server, STDIN];
    $write = $except = null;
    if (!stream_select($read, $write, $except, (int)$wait, (int)(fmod($wait, 1) * 1e6))) continue;
    if (in_array(STDIN, $read, true) && fgets(STDIN) === false) exit;
    if (!in_array($server, $read, true)) continue;
    $query = (string)stream_socket_recvfrom($server, 512, 0, $peer);
    // The question: labels up to the root's, then its type and class.
    $at = 12;
    $labels = [];
    while ($at < strlen($query) && ($length = ord($query[$at])) > 0) {
        $labels[] = substr($query, $at + 1, $length);
        $at += 1 + $length;
    }
    if ($at + 5 > strlen($query)) continue;
    $question = substr($query, 12, $at + 5 - 12);
    $type = unpack('n', $query, $at + 1)[1];
    $name = strtolower(implode('.', $labels));
    // The query's id; QR, RD and RA set; one question.
    $header = fn(int $rcode, int $answers) => substr($query, 0, 2) . pack('nnnnn', 0x8180 | $rcode, 1, $answers, 0, 0);
    if (!isset($names[$name])) {
        $due[] = [microtime(true), $header(3, 0) . $question, $peer];
        continue;
    }
    [$ip, $delay] = $names[$name];
    // A pointer to the question's name, type A, class IN, TTL 60.
    $answer = $type === 1 ? "\xc0\x0c" . pack('nnNn', 1, 1, 60, 4) . $ip : '';
    $due[] = [microtime(true) + $delay, $header(0, $type === 1 ? 1 : 0) . $question . $answer, $peer];
}
