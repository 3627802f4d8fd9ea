<?php
/**
 * IDE stub for the rediscluster_session extension. Not to be included.
 *
 * The functions are defined in Rust (src/php/stats.rs, src/php/lock_info.rs).
 */

/**
 * Counters of this PHP process (this FPM worker) since it started.
 *
 * - locks_acquired: session locks taken.
 * - lock_waits: lock attempts that found the lock busy and waited (taken or not);
 *   lock_wait_us_total and lock_wait_us_max: how long they waited, in microseconds.
 * - acquire_failures: locks still busy after every retry (session_start() failed,
 *   or the session was opened read-only with redis.session.lock_failure_readonly).
 * - waiters_rejected: requests that did not queue because rediscluster_session.max_waiters
 *   requests already waited for the same session.
 * - writes_refused_lock_lost: writes refused because the lock had expired or been taken.
 * - releases: locks released, by command (lua covers every release done by a script,
 *   including the write that releases); release_fallbacks: DELEX or DELIFEQ was
 *   configured but the server lacks it, so Lua released instead.
 * - connects: sets of cluster connections opened (with the slot map);
 *   reconnects: those after the first.
 * - errors: every failed command or connection attempt by kind, retried ones included.
 *
 * @return array{
 *     locks_acquired: int,
 *     lock_waits: int,
 *     lock_wait_us_total: int,
 *     lock_wait_us_max: int,
 *     acquire_failures: int,
 *     waiters_rejected: int,
 *     writes_refused_lock_lost: int,
 *     releases: array{lua: int, delex: int, delifeq: int},
 *     release_fallbacks: int,
 *     connects: int,
 *     reconnects: int,
 *     errors: array{io: int, timeout: int, cluster: int, auth: int, tls: int, oom: int, server: int}
 * }
 */
function rediscluster_session_stats(): array {}

/**
 * The lock of session $id under the current session.save_path (its prefix and
 * cluster): whether it is held, its remaining TTL in milliseconds (0 when free)
 * and how many requests wait for it. Never the lock's secret or the data.
 * Null, with a warning, when the cluster cannot be asked.
 *
 * @return array{locked: bool, ttl_ms: int, waiters: int}|null
 */
function rediscluster_session_lock_info(string $id): ?array {}
