<?php
// The app the benchmark serves through nginx + php-fpm: one session cycle.
if (!session_start()) {
    http_response_code(503);
    exit;
}
$_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
session_write_close();
echo getmypid();
