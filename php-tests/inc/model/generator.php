<?php
// The generator of 057-model-based.phpt: seeded random sequences of session
// calls. A sequence has one save_path (locking, failover, strict mode) and
// rounds run one after the other. A round is either one request (a PHP CLI
// process running generated steps) or a group of 2–4 concurrent requests on
// shared ids, each running a few sections that read, usually increment a
// counter, and close.
//
// Steps: ['start', ID, read_and_close], ['set', KEY, VALUE], ['unset', KEY],
// ['close'], ['abort'], ['reset'], ['destroy'], ['regen', delete_old],
// ['lifetime', seconds, sliding]. ID is a label: 'a', 'b', 'c' (fixed ids),
// 'cookie' (the id the previous request ended with), '' (session_id(''): a
// new one; shown as start('')) or '-' (no session_id() call; shown as
// start()). Generated ids get the labels g1, g2… in the order PHP makes them.

/** The fixed ids every sequence shares between its requests. */
const MODEL_IDS = ['a', 'b', 'c'];

/** A key of $weights (key => weight), picked at random by weight. */
function model_pick(array $weights) {
    $r = mt_rand(1, array_sum($weights));
    foreach ($weights as $key => $weight) {
        if (($r -= $weight) <= 0) return $key;
    }
}

function model_sequence(int $seed): array {
    mt_srand($seed);
    // A plain sequence makes only calls whose outcome does not depend on the
    // store (no lifetime; no strict mode, as the files handler creates a
    // session's file when it reads it; one process at a time): it also runs on
    // PHP's files handler, and the two must agree.
    $plain = mt_rand(0, 2) === 0;
    $sequence = [
        'seed' => $seed,
        'plain' => $plain,
        'locking' => mt_rand(0, 1) === 1,
        'failover' => mt_rand(0, 1) === 1 ? 'error' : 'none',
        'strict' => !$plain && mt_rand(0, 1) === 1,
        'rounds' => [],
    ];
    for ($n = mt_rand(2, 5); $n > 0; $n--) {
        $sequence['rounds'][] = !$plain && mt_rand(0, 3) === 0 ? model_group() : model_request($plain);
    }
    return $sequence;
}

/** The INI a request varies: lazy_write, early_refresh, lock_failure_readonly, gc_maxlifetime. */
function model_ini(): array {
    return [
        'session.lazy_write' => mt_rand(0, 1),
        'redis.session.early_refresh' => mt_rand(0, 1),
        'redis.session.lock_failure_readonly' => mt_rand(0, 1),
        // Far from every lifetime below, so that a TTL tells which one applied.
        'session.gc_maxlifetime' => 1000 * mt_rand(1, 3),
    ];
}

function model_request(bool $plain): array {
    $steps = [];
    $active = false;
    for ($n = mt_rand(1, 10); $n > 0; $n--) {
        if (!$active) {
            if (!$plain && mt_rand(0, 15) === 0) {
                $steps[] = ['lifetime', 86400, true];   // no active session: false and a warning
                continue;
            }
            // A request's first session is mostly the cookie's or a fixed id; a later one mostly the same again.
            $id = model_pick($steps === [] ? ['a' => 3, 'b' => 2, 'c' => 1, 'cookie' => 3, '' => 1, '-' => 1]
                : ['a' => 2, 'b' => 1, 'cookie' => 1, '' => 2, '-' => 6]);
            $read_and_close = mt_rand(0, 6) === 0;
            $steps[] = ['start', $id, $read_and_close];
            $active = !$read_and_close;
            continue;
        }
        // Right after set_lifetime(), mostly what ends or moves a session: the lifetime's rules are there.
        $kind = model_pick(end($steps)[0] === 'lifetime'
            ? ['set' => 2, 'close' => 2, 'abort' => 2, 'reset' => 1, 'destroy' => 2, 'regen' => 3]
            : ['set' => 9, 'unset' => 2, 'close' => 3, 'abort' => 2, 'reset' => 1, 'destroy' => 2, 'regen' => 3, 'lifetime' => $plain ? 0 : 5]);
        $step = match ($kind) {
            // Few keys and values, so that a write often stores what was read (lazy_write's touch).
            'set' => ['set', 'k' . mt_rand(1, 3), mt_rand(0, 1) ? mt_rand(1, 3) : 'v' . mt_rand(1, 2)],
            'unset' => ['unset', 'k' . mt_rand(1, 3)],
            'regen' => ['regen', mt_rand(0, 1) === 1],
            // Hours and days: nothing expires during a run, and each is far from gc_maxlifetime.
            'lifetime' => ['lifetime', model_pick([0 => 2, 86400 => 3, 2 * 86400 => 2, 30 * 86400 => 2, -1 => 1]), mt_rand(0, 2) > 0],
            default => [$kind],
        };
        $steps[] = $step;
        $active = !in_array($step[0], ['close', 'abort', 'destroy'], true);
    }
    return ['ini' => model_ini(), 'steps' => $steps, 'end' => model_pick(['end' => 8, 'exit' => 2, 'throw' => 2, 'fatal' => 1])];
}

/**
 * Concurrent requests: each runs 1–3 sections [ID, HOW] on the shared ids,
 * HOW one of incr (read, increment the counter n and write), incr_end (the
 * same, left to the request's end: last section only), touch (read, close
 * unchanged), abort, rac (read_and_close).
 */
function model_group(): array {
    $processes = [];
    for ($p = mt_rand(2, 4); $p > 0; $p--) {
        $sections = [];
        for ($s = mt_rand(1, 3); $s > 0; $s--) {
            $sections[] = [model_pick(['a' => 3, 'b' => 1]), model_pick(['incr' => 6, 'touch' => 1, 'abort' => 1, 'rac' => 1])];
        }
        if ($sections[count($sections) - 1][1] === 'incr' && mt_rand(0, 2) === 0) {
            $sections[count($sections) - 1][1] = 'incr_end';
        }
        $processes[] = $sections;
    }
    return ['ini' => model_ini(), 'group' => $processes];
}

/** Whether a request's steps are a valid walk: start only without an active session, the rest only with one. */
function model_valid(array $steps): bool {
    $active = false;
    foreach ($steps as $step) {
        if ($step[0] === 'lifetime') continue;
        if (($step[0] === 'start') === $active) return false;
        $active = $step[0] === 'start' ? !$step[2] : !in_array($step[0], ['close', 'abort', 'destroy'], true);
    }
    return true;
}
