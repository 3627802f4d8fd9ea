<?php
// The generator of 057-model-based.phpt: seeded random sequences of session
// calls. A sequence has one save_path (locking, failover, strict mode) and
// rounds run one after the other. A round is either one request (a PHP CLI
// process running generated steps) or a group of 2–4 concurrent requests on
// shared ids, each running a few sections that read, usually increment a
// counter, and close; with locking, sections also set lifetimes, regenerate
// and destroy.
//
// Steps: ['start', ID, read_and_close], ['set', KEY, VALUE], ['unset', KEY],
// ['close'], ['abort'], ['reset'], ['destroy'], ['regen', delete_old],
// ['lifetime', seconds, sliding], ['fork', WHAT] (pcntl_fork(): the child
// does WHAT, 'none', 'change' or 'destroy', and exits; the parent goes on).
// ID is a label: 'a', 'b', 'c' (fixed ids),
// 'cookie' (the id the previous request ended with), '' (session_id(''): a
// new one; shown as start('')) or '-' (no session_id() call; shown as
// start()). Generated ids get the labels g1, g2… in the order PHP makes them.
//
// What few sequences would reach by chance is forced in one sequence of every
// MODEL_PERIOD consecutive seeds (by the seed alone, so that a seed run again
// is the same sequence), and so reached by every run of that many:
// - an outage: a request with its session's primary frozen (failover=error
//   serves it read-only, from a replica);
// - contention: a group where a request waits for a lock with
//   lock_failure_readonly and is served read-only, one outlives its lock
//   (lock_expire and a lease: the lock's backstop) and its write is refused,
//   and one is frozen past its lease and keeps its lock (nobody waits to
//   break it);
// - a fork, in a request;
// - concurrent lifetimes, regenerations and destroys, in a group.

/** The fixed ids every sequence shares between its requests. */
const MODEL_IDS = ['a', 'b', 'c'];

/** Every so many consecutive seeds force each of MODEL_FORCED once. */
const MODEL_PERIOD = 50;
const MODEL_FORCED = [0 => 'outage', 1 => 'contention', 2 => 'fork', 3 => 'concurrent'];

/** A group section's ways that set a lifetime, regenerate or destroy (locked sequences without strict mode). */
const MODEL_CONCURRENT = ['life', 'life_drop', 'regen', 'regen_del', 'destroy'];

/** The lifetime a group's 'life' section sets: sliding, far from gc_maxlifetime. */
const MODEL_GROUP_LIFETIME = 2 * 86400;

/** A key of $weights (key => weight), picked at random by weight. */
function model_pick(array $weights) {
    $r = mt_rand(1, array_sum($weights));
    foreach ($weights as $key => $weight) {
        if (($r -= $weight) <= 0) return $key;
    }
}

function model_sequence(int $seed): array {
    mt_srand($seed);
    $forced = MODEL_FORCED[$seed % MODEL_PERIOD] ?? null;
    // A plain sequence makes only calls whose outcome does not depend on the
    // store (no lifetime; no strict mode, as the files handler creates a
    // session's file when it reads it; one process at a time; no fork, whose
    // child a lock refuses): it also runs on PHP's files handler, and the two
    // must agree.
    $plain = $forced === null && mt_rand(0, 2) === 0;
    $sequence = [
        'seed' => $seed,
        'plain' => $plain,
        'locking' => mt_rand(0, 1) === 1 || in_array($forced, ['contention', 'concurrent'], true),
        'failover' => mt_rand(0, 1) === 1 || $forced === 'outage' ? 'error' : 'none',
        // A group's ids must be there for the group to share them.
        'strict' => !$plain && mt_rand(0, 1) === 1 && !in_array($forced, ['contention', 'concurrent'], true),
        'rounds' => [],
    ];
    for ($n = mt_rand(2, 5); $n > 0; $n--) {
        $sequence['rounds'][] = !$plain && mt_rand(0, 3) === 0 ? model_group($sequence) : model_request($sequence);
    }
    $round = match ($forced) {
        null => null,
        'outage' => model_outage(),
        'contention' => model_contention(),
        'fork' => model_request($sequence, true),
        'concurrent' => model_group($sequence, true),
    };
    if ($round !== null) array_splice($sequence['rounds'], mt_rand(0, count($sequence['rounds'])), 0, [$round]);
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

/** One request; with $fork, it forks at least once. */
function model_request(array $sequence, bool $fork = false): array {
    $plain = $sequence['plain'];
    $steps = [];
    $active = false;
    for ($n = mt_rand(1, 10); $n > 0 || ($fork && !in_array('fork', array_column($steps, 0), true)); $n--) {
        if (!$active) {
            if (!$plain && mt_rand(0, 15) === 0) {
                $steps[] = ['lifetime', 86400, true];   // no active session: false and a warning
                continue;
            }
            // A request's first session is mostly the cookie's or a fixed id; a later one mostly the same again.
            $id = model_pick($steps === [] ? ['a' => 3, 'b' => 2, 'c' => 1, 'cookie' => 3, '' => 1, '-' => 1]
                : ['a' => 2, 'b' => 1, 'cookie' => 1, '' => 2, '-' => 6]);
            $read_and_close = !$fork && mt_rand(0, 6) === 0;
            $steps[] = ['start', $id, $read_and_close];
            $active = !$read_and_close;
            continue;
        }
        // Right after set_lifetime(), mostly what ends or moves a session: the lifetime's rules are there.
        $kind = $fork ? 'fork' : model_pick(end($steps)[0] === 'lifetime'
            ? ['set' => 2, 'close' => 2, 'abort' => 2, 'reset' => 1, 'destroy' => 2, 'regen' => 3, 'fork' => $plain ? 0 : 1]
            : ['set' => 9, 'unset' => 2, 'close' => 3, 'abort' => 2, 'reset' => 1, 'destroy' => 2, 'regen' => 3,
                'lifetime' => $plain ? 0 : 5, 'fork' => $plain ? 0 : 1]);
        $fork = false;
        $step = match ($kind) {
            // Few keys and values, so that a write often stores what was read (lazy_write's touch).
            'set' => ['set', 'k' . mt_rand(1, 3), mt_rand(0, 1) ? mt_rand(1, 3) : 'v' . mt_rand(1, 2)],
            'unset' => ['unset', 'k' . mt_rand(1, 3)],
            'regen' => ['regen', mt_rand(0, 1) === 1],
            // Hours and days: nothing expires during a run, and each is far from gc_maxlifetime.
            'lifetime' => ['lifetime', model_pick([0 => 2, 86400 => 3, 2 * 86400 => 2, 30 * 86400 => 2, -1 => 1]), mt_rand(0, 2) > 0],
            // Unlocked, a child's destroy would race its parent's write: not said what wins.
            'fork' => ['fork', model_pick(['none' => 2, 'change' => 2, 'destroy' => $sequence['locking'] ? 1 : 0])],
            default => [$kind],
        };
        $steps[] = $step;
        $active = !in_array($step[0], ['close', 'abort', 'destroy'], true);
    }
    return ['ini' => model_ini(), 'steps' => $steps, 'end' => model_pick(['end' => 8, 'exit' => 2, 'throw' => 2, 'fatal' => 1])];
}

/**
 * A request while the primary of id a is frozen: one or two starts of a, each
 * served read-only, and what a read-only session allows or refuses (no new
 * id: it would land on any primary).
 */
function model_outage(): array {
    $steps = [];
    $active = false;
    $starts = 0;
    for ($n = mt_rand(2, 7); $n > 0; $n--) {
        if (!$active) {
            if ($starts++ === 2) break;
            $read_and_close = mt_rand(0, 5) === 0;
            $steps[] = ['start', 'a', $read_and_close];
            $active = !$read_and_close;
            continue;
        }
        $kind = model_pick(['set' => 4, 'unset' => 1, 'lifetime' => 2, 'close' => 2, 'abort' => 1, 'destroy' => 1]);
        $steps[] = match ($kind) {
            'set' => ['set', 'k' . mt_rand(1, 3), mt_rand(1, 3)],
            'unset' => ['unset', 'k' . mt_rand(1, 3)],
            'lifetime' => ['lifetime', 86400, true],
            default => [$kind],
        };
        $active = !in_array($kind, ['close', 'abort', 'destroy'], true);
    }
    return ['ini' => model_ini(), 'steps' => $steps, 'end' => model_pick(['end' => 3, 'exit' => 1, 'throw' => 1]), 'outage' => true];
}

/**
 * Concurrent requests: each runs 1–3 sections [ID, HOW] on the shared ids,
 * HOW one of incr (read, increment the counter n and write), incr_end (the
 * same, left to the request's end: last section only), touch (read, close
 * unchanged), abort, rac (read_and_close); with locking and without strict
 * mode also life (increment, set a lifetime, write), life_drop (the same,
 * back to gc_maxlifetime), regen and regen_del (increment, regenerate the
 * id, keeping the old one or not, write), destroy. With $concurrent, each of
 * life, regen and destroy runs at least once.
 */
function model_group(array $sequence, bool $concurrent = false): array {
    $weights = ['incr' => 6, 'touch' => 1, 'abort' => 1, 'rac' => 1];
    if ($sequence['locking'] && !$sequence['strict']) $weights += array_fill_keys(MODEL_CONCURRENT, 1);
    $processes = [];
    for ($p = mt_rand($concurrent ? 3 : 2, 4); $p > 0; $p--) {
        $sections = [];
        for ($s = mt_rand(1, 3); $s > 0; $s--) {
            $sections[] = [model_pick(['a' => 3, 'b' => 1]), model_pick($weights)];
        }
        if ($sections[count($sections) - 1][1] === 'incr' && mt_rand(0, 2) === 0) {
            $sections[count($sections) - 1][1] = 'incr_end';
        }
        $processes[] = $sections;
    }
    if ($concurrent) {
        foreach (['life', 'regen' . (mt_rand(0, 1) ? '' : '_del'), 'destroy'] as $p => $how) {
            $processes[$p][mt_rand(0, count($processes[$p]) - 1)][1] = $how;
        }
    }
    return ['ini' => model_ini(), 'group' => $processes];
}

/**
 * Locked requests that contend on purpose: one holds a until another, with
 * lock_failure_readonly and a short wait, has given up and been served a
 * read-only; one holds b past its lock_expire of 1 s and a lease; one
 * writes c, then holds it again and is frozen past its lease; maybe others
 * on a and b.
 */
function model_contention(): array {
    $processes = [[['a', 'hold']], [['a', 'ro']], [['b', 'expire']], [['c', 'incr'], ['c', 'fence']]];
    for ($p = mt_rand(0, 1); $p > 0; $p--) {
        $processes[] = [[model_pick(['a' => 1, 'b' => 1]), model_pick(['incr' => 3, 'touch' => 1, 'abort' => 1])]];
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
