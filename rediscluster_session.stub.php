<?php
/**
 * IDE stub for the rediscluster_session extension. Not to be included.
 *
 * The functions are defined in Rust (src/php/stats.rs, src/php/lock_info.rs,
 * src/php/lock_wait.rs, src/php/metrics.rs, src/php/read_only.rs).
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
 * - fallback_reads: sessions served read-only with failover=error because their
 *   primary could not serve them, by where they were read (primary: it answered
 *   CLUSTERDOWN but still served the read, or the slot had a new primary without
 *   replicas yet; replica).
 * - connects: sets of cluster connections opened (with the slot map);
 *   reconnects: those after the first.
 * - errors: every failed command or connection attempt by kind, retried ones included.
 * - lease_renewals, lease_renewal_failures: lock leases the watchdog renewed, and
 *   renewals that failed (retried while the lease lasted); locks_lost_to_expiry:
 *   renewals that found another holder or none (rediscluster_session.lock_lease_ms);
 *   locks_broken: locks this process's waiters broke, their holder's heartbeat
 *   having stood still for a lease while the server served.
 * - shared_slot_map_refused: 1 when this process shared no slot map because the
 *   shared map's directory in /dev/shm was not its user's own and private.
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
 *     fallback_reads: array{primary: int, replica: int},
 *     connects: int,
 *     reconnects: int,
 *     errors: array{io: int, timeout: int, cluster: int, auth: int, tls: int, oom: int, server: int},
 *     lease_renewals: int,
 *     lease_renewal_failures: int,
 *     locks_lost_to_expiry: int,
 *     locks_broken: int,
 *     shared_slot_map_refused: int
 * }
 */
function rediscluster_session_stats(): array {}

/**
 * The lock of session $id under the current session.save_path (its prefix and
 * cluster): whether it is held, its remaining TTL in milliseconds (0 when free)
 * and how many requests wait for it; the data's TTL in milliseconds (-2: no
 * session) and its own lifetime (rediscluster_session_set_lifetime(): its
 * seconds, or those left before a fixed end, and whether it slides), or null.
 * With rediscluster_session.lock_lease_ms, lease_ms is the lease (0: off) and,
 * for a lock this process holds, lease_expires_ms is when its lease as last
 * renewed runs out and lease_renewed_for_ms how much longer it is renewed
 * (lock_expire from taking it); null for any other lock.
 * Never the lock's secret or the data. Null, with a warning, when the cluster
 * cannot be asked.
 *
 * @return array{locked: bool, ttl_ms: int, waiters: int, data_ttl_ms: int, lifetime: array{seconds: int, sliding: bool}|null, lease_ms: int, lease_expires_ms: int|null, lease_renewed_for_ms: int|null}|null
 */
function rediscluster_session_lock_info(string $id): ?array {}

/**
 * How long a locked session_start() of this request waits for a busy lock at
 * most, and why: max_wait_us (null: no limit), wait_us (one attempt) and
 * retries (null: for ever), then, for redis.session.lock_wait_time and
 * redis.session.lock_retries, the directive's value for the handler (as
 * set, or this extension's default; wait_us and retries above are what the
 * handler makes of it: 0 means the default, a wait below 1000 µs is 1000)
 * and its source:
 * "php.ini" (php.ini, conf.d or -d), "runtime" (ini_set(), .user.ini, a
 * [PATH=]/[HOST=] section, Apache's php_value or php_admin_value), "php-fpm"
 * (the pool's php_value or php_admin_value, or a FastCGI PHP_VALUE) or
 * "default" (nobody set it: this extension's default, whatever phpredis
 * registered). registered is the value the directive's module registered
 * (null where php.ini replaced it at startup); overridden is true where
 * phpredis registered another value that this extension's default replaced.
 *
 * @return array{
 *     max_wait_us: int|null,
 *     wait_us: int,
 *     retries: int|null,
 *     "redis.session.lock_wait_time": array{value: int, source: string, registered: int|null, registered_by: string, overridden: bool},
 *     "redis.session.lock_retries": array{value: int, source: string, registered: int|null, registered_by: string, overridden: bool}
 * }
 */
function rediscluster_session_lock_wait(): array {}

/**
 * Whether the session this request opened last is served read-only: with
 * failover=error in session.save_path, its slot's primary could not serve it
 * (refused, no answer in time, or CLUSTERDOWN), so it was read from a replica
 * (or from the primary, which still served reads) and no lock was taken.
 * Its write, session_regenerate_id() and session_destroy() are refused with a
 * warning; session_write_close() still returns true. False before any
 * session_start() in this request.
 */
function rediscluster_session_read_only(): bool {}

/**
 * Gives the active session a lifetime of its own, from this request's write
 * (or touch, with session.lazy_write) on, which every later request keeps
 * whatever its session.gc_maxlifetime: $sliding renews all of it at each
 * write or touch; otherwise the session ends $seconds from now, whatever
 * comes in between. 0 goes back to session.gc_maxlifetime. At most 400 days
 * (34560000 seconds). session_regenerate_id() carries it to the new id;
 * session_destroy() ends it. It does not change the session cookie: see
 * docs/configuration.md for setcookie(). False, with a warning and nothing changed, without
 * an active session of this handler or for a negative or too long lifetime.
 */
function rediscluster_session_set_lifetime(int $seconds, bool $sliding = true): bool {}
