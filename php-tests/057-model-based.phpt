--TEST--
Model-based: seeded random sequences of session calls (start, read_and_close, $_SESSION changes, write_close, abort, reset, destroy, regenerate_id, set_lifetime, a new id in the same request, the request's end by exit, exception or fatal error) and pcntl_fork() over several ids and 2–4 concurrent processes (setting lifetimes, regenerating and destroying side by side), locked and unlocked, failover and strict mode varied, with outages (failover=error read-only), lock_failure_readonly, expired locks and the fence reached in every 50 sequences and counted; each step and the store (data, TTL, lifetime) checked against an oracle of PHP's session semantics and the rules of docs/, concurrent increments against one chain; plain sequences agree with PHP's files handler. A failure prints its seed and a shrunk sequence as a runnable PHP script
--FILE--
<?php
// RCS_MODEL_SEQUENCES (default 300) sequences, or as many as start within
// RCS_MODEL_SECONDS (default 150; 0: no limit); sequence i runs seed
// RCS_MODEL_SEED (default random) + i. The generator, the oracle and the runner
// are in inc/model/.
require __DIR__ . '/inc/setup.php';
require __DIR__ . '/inc/model/runner.php';
rcs_use_session();
// A dot per sequence: run-tests.php ends a test that prints nothing for 60 s.
while (ob_get_level()) ob_end_flush();
$seed = (int)(getenv('RCS_MODEL_SEED') ?: random_int(1, 1 << 30));
$count = (int)(getenv('RCS_MODEL_SEQUENCES') ?: 300);
$seconds = (float)(getenv('RCS_MODEL_SECONDS') === false ? 150 : getenv('RCS_MODEL_SECONDS'));
$started = microtime(true);
$deadline = $seconds > 0 ? $started + $seconds : INF;
echo "seed $seed: ";
$failures = [];
$failed = [];
$reached = array_fill_keys(MODEL_FEATURES, 0);
for ($ran = 0; $ran < $count && microtime(true) < $deadline; $ran++) {
    $sequence = model_sequence($seed + $ran);
    $failure = model_check($sequence, $reached);
    echo $failure === null ? '.' : 'F';
    if ($failure === null) continue;
    $failed[$failure['kind']] = ($failed[$failure['kind']] ?? 0) + 1;
    $failures[$failure['kind']] ??= [$sequence, $failure];
}
echo "\n";
// How often each feature few sequences reach was reached: the generator
// forces each once in every MODEL_PERIOD sequences, so a run of that many
// that never reached one has stopped reaching it.
printf("reached in %d sequences (%d s): %s\n", $ran, microtime(true) - $started,
    implode(', ', array_map(fn($feature, $times) => "$feature $times", array_keys($reached), $reached)));
if ($ran >= MODEL_PERIOD && !$failures) {
    foreach (array_keys($reached, 0, true) as $feature) echo "FAILED: never reached $feature\n";
}
// The first failure of each kind, shrunk.
foreach ($failures as $kind => [$sequence, $failure]) {
    echo "FAILED: $kind, in {$failed[$kind]} of $ran sequences; the first: RCS_MODEL_SEED=$sequence[seed] RCS_MODEL_SEQUENCES=1\nshrinking: ";
    [$small, $small_failure] = model_shrink($sequence, $failure);
    echo "\n", model_repro($small, $small_failure), "\n";
}
echo $failures || ($ran >= MODEL_PERIOD && in_array(0, $reached, true)) ? '' : "ok\n";
?>
--EXPECTF--
seed %d: %s
reached in %d sequences (%d s): %s
ok
