//! The session lock protocol on a cluster.
//!
//! The lock key lives on the data key's slot (see [`crate::keys::lock_key`]),
//! so every step is atomic on the slot's primary:
//! - read = acquire + read in one Lua call: the data returned is always the
//!   one read under the lock; a busy lock queues for a hand-over instead;
//! - write = check-and-write (+ release) in Lua: nothing is stored unless the
//!   lock still holds our secret, closing phpredis's GET-then-SETEX race;
//! - update_timestamp = refresh TTL (+ rewrite if gone) + release;
//! - destroy = delete + release.
//!
//! Every release hands the lock straight to the longest waiter, which blocks
//! on its own wake list instead of polling.
//!
//! A locked session that changed costs 2 round trips: acquire+read and
//! write+release. Each acquisition has a fresh 16-byte random secret; an
//! acquire that is retried after its reply was lost recognises its own secret.

use std::sync::OnceLock;
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use redis::Value;

use crate::settings::{LockSettings, ReleaseCommand, ReplicaAck};
use crate::stats;
use crate::store::{SessionStore, whole_seconds};

/// A Lua script with its SHA1, for EVALSHA with an EVAL fallback.
pub struct LuaScript {
    source: &'static str,
    sha1: OnceLock<String>,
}

impl LuaScript {
    const fn new(source: &'static str) -> Self {
        LuaScript {
            source,
            sha1: OnceLock::new(),
        }
    }

    pub fn source(&self) -> &'static str {
        self.source
    }

    pub fn sha1(&self) -> &str {
        self.sha1
            .get_or_init(|| redis::Script::new(self.source).get_hash().to_owned())
    }
}

/// Lua shared by every script that releases a lock (KEYS: data, lock;
/// ARGV[1]: secret). Waiters queue in `<lock>_QUEUE` (a sorted set by arrival);
/// each keeps `<lock>_WAIT_<secret>` ("<lock ms> <refresh s>") alive while it
/// blocks on its list `<lock>_WAKE_<secret>`. Release hands the lock to the
/// longest-waiting live waiter (first come, first served): the lock gets the
/// waiter's secret and TTL, and its list gets the session data ("1" + data, or
/// "0" for none) and the time in ms. The waiter's BLPOP returns the data, so
/// taking over costs it no further round trip; the time stays behind so a
/// hand-over nobody took can be recognised (see ACQUIRE_AND_READ). With
/// nobody waiting, release deletes the lock.
macro_rules! release_lua {
    () => {
        concat!(
            now_ms_lua!(),
            r"local function release(data_key, lock, secret)
  local queue = lock .. '_QUEUE'
  redis.call('DEL', lock .. '_WAKE_' .. secret)
  while true do
    local waiter = redis.call('ZRANGE', queue, 0, 0)[1]
    if not waiter then break end
    redis.call('ZREM', queue, waiter)
    local waiting = lock .. '_WAIT_' .. waiter
    local lock_ms, refresh = string.match(redis.call('GET', waiting) or '', '^(%d+) (%d+)$')
    if lock_ms then
      redis.call('DEL', waiting)
      redis.call('SET', lock, waiter, 'PX', lock_ms)
      local data
      if refresh ~= '0' then
        data = redis.call('GETEX', data_key, 'EX', refresh)
      else
        data = redis.call('GET', data_key)
      end
      local wake = lock .. '_WAKE_' .. waiter
      redis.call('RPUSH', wake, data and ('1' .. data) or '0', string.format('%d', now_ms()))
      redis.call('PEXPIRE', wake, lock_ms)
      return
    end
  end
  redis.call('DEL', lock)
end
"
        )
    };
}

/// The server's clock in ms, the one clock every client's steps are timed by.
macro_rules! now_ms_lua {
    () => {
        r"local function now_ms()
  local now = redis.call('TIME')
  return now[1] * 1000 + math.floor(now[2] / 1000)
end
"
    };
}

/// How long a waiter has to take a lock handed to it before the next one may
/// take it over: it only has to be scheduled, so this passing means it died.
const HAND_OVER_TIMEOUT_MS: &str = "1000";

/// KEYS: data, lock. ARGV: secret, lock TTL ms, data TTL s (0: plain GET),
/// "1" to read the data even when the lock is busy (read-only fallback),
/// how long the caller will wait in ms (0: it will not wait, leave the queue),
/// the hand-over timeout in ms.
/// Returns {1, data} when the lock is ours (taken, taken over from a waiter
/// that died, or ours already: a retried call, or a hand-over that came after
/// our wait ended); {0, data-or-nil, wake-list-or-nil} when busy.
static ACQUIRE_AND_READ: LuaScript = LuaScript::new(concat!(
    now_ms_lua!(),
    r"local lock, secret = KEYS[2], ARGV[1]
local queue, waiting = lock .. '_QUEUE', lock .. '_WAIT_' .. secret
local owner = redis.call('GET', lock)
if owner and owner ~= secret then
  local handed = lock .. '_WAKE_' .. owner
  if redis.call('LLEN', handed) == 2
      and now_ms() - tonumber(redis.call('LINDEX', handed, 1)) > tonumber(ARGV[6]) then
    redis.call('DEL', handed)
    owner = false
  end
end
if owner == secret then
  redis.call('PEXPIRE', lock, ARGV[2])
  redis.call('DEL', lock .. '_WAKE_' .. secret)
elseif owner then
  local wake = false
  if ARGV[5] == '0' then
    redis.call('ZREM', queue, secret)
    redis.call('DEL', waiting)
  else
    local now = redis.call('TIME')
    redis.call('ZADD', queue, 'NX', now[1] .. string.format('%06d', now[2]), secret)
    redis.call('PEXPIRE', queue, ARGV[5] + 2000)
    redis.call('SET', waiting, ARGV[2] .. ' ' .. ARGV[3], 'PX', ARGV[5] + 1000)
    wake = lock .. '_WAKE_' .. secret
  end
  local data = false
  if ARGV[4] == '1' then data = redis.call('GET', KEYS[1]) end
  return {0, data, wake}
else
  redis.call('SET', lock, secret, 'PX', ARGV[2])
  if redis.call('ZREM', queue, secret) == 1 then redis.call('DEL', waiting) end
end
if tonumber(ARGV[3]) > 0 then
  return {1, redis.call('GETEX', KEYS[1], 'EX', ARGV[3])}
end
return {1, redis.call('GET', KEYS[1])}"
));

/// KEYS: data, lock. ARGV: secret, data, data TTL s. Stores and releases only
/// while the lock holds the secret; returns 1 if it did, 0 if the lock was
/// lost. A repeat after a lost reply finds the lock gone and its own data
/// stored, and counts that as done.
static WRITE_AND_RELEASE: LuaScript = LuaScript::new(concat!(
    release_lua!(),
    r"if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  if redis.call('GET', KEYS[1]) == ARGV[2] then return 1 end
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
release(KEYS[1], KEYS[2], ARGV[1])
return 1"
));

/// KEYS: data, lock. ARGV: secret, data, data TTL s. Refreshes the TTL (allowed
/// without the lock, as in phpredis); rewrites a vanished key and releases the
/// lock only while it holds the secret. Returns 1 if the lock was ours.
static TOUCH_AND_RELEASE: LuaScript = LuaScript::new(concat!(
    release_lua!(),
    r"local held = redis.call('GET', KEYS[2]) == ARGV[1]
if redis.call('EXPIRE', KEYS[1], ARGV[3]) == 0 and held then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
end
if held then release(KEYS[1], KEYS[2], ARGV[1]) return 1 end
return 0"
));

/// KEYS: data, lock. ARGV: secret. Deletes the data; releases the lock if ours.
static DESTROY_AND_RELEASE: LuaScript = LuaScript::new(concat!(
    release_lua!(),
    r"redis.call('DEL', KEYS[1])
if redis.call('GET', KEYS[2]) == ARGV[1] then release(KEYS[1], KEYS[2], ARGV[1]) end
return 1"
));

/// KEYS: data, lock. ARGV: secret. Releases the lock if ours (1), else only
/// leaves the queue (0): after a failed wait it may be either.
static RELEASE: LuaScript = LuaScript::new(concat!(
    release_lua!(),
    r"if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  redis.call('ZREM', KEYS[2] .. '_QUEUE', ARGV[1])
  redis.call('DEL', KEYS[2] .. '_WAIT_' .. ARGV[1])
  return 0
end
release(KEYS[1], KEYS[2], ARGV[1])
return 1"
));

/// A lock this process holds: the key, the secret that proves it, and how to
/// release it. No `Debug`: the secret must never be printed.
pub struct HeldLock {
    data_key: Vec<u8>,
    pub lock_key: Vec<u8>,
    secret: String,
    release: ReleaseCommand,
}

pub enum Acquired {
    /// The lock is ours; the data was read under it (`None`: no session yet).
    Locked(HeldLock, Option<Vec<u8>>),
    /// Gave up waiting. The data is there only when `failure_readonly` asked for it.
    Busy(Option<Vec<u8>>),
}

/// 16 bytes from the OS CSPRNG as 32 hex digits, new for each acquisition.
fn new_secret() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|err| anyhow::anyhow!("no OS randomness for the lock secret: {err}"))?;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut secret = String::with_capacity(32);
    for byte in bytes {
        secret.push(char::from(HEX[usize::from(byte >> 4)]));
        secret.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    Ok(secret)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// Takes the lock and reads the data, retrying while it is busy: at most
/// `retries` more attempts (or forever) and `retries` x `wait` in all. Between
/// attempts it waits up to `wait` for the holder to hand the lock over; waits
/// shorter than 1 ms sleep instead of queueing. Also returns how long it
/// waited (zero when the lock was free).
pub fn acquire_and_read(
    store: &mut impl SessionStore,
    data_key: &[u8],
    lock_key: &[u8],
    lock: &LockSettings,
    refresh: Option<Duration>,
) -> Result<(Acquired, Duration)> {
    let started = Instant::now();
    let mut busy_once = false;
    let acquired = acquire_waiting(store, data_key, lock_key, lock, refresh, &mut busy_once)?;
    let waited = if busy_once {
        started.elapsed()
    } else {
        Duration::ZERO
    };
    stats::lock_attempt(matches!(acquired, Acquired::Locked(..)), waited);
    Ok((acquired, waited))
}

fn acquire_waiting(
    store: &mut impl SessionStore,
    data_key: &[u8],
    lock_key: &[u8],
    lock: &LockSettings,
    refresh: Option<Duration>,
    busy_once: &mut bool,
) -> Result<Acquired> {
    let held = HeldLock {
        data_key: data_key.to_vec(),
        lock_key: lock_key.to_vec(),
        secret: new_secret()?,
        release: lock.release,
    };
    let lock_ms = millis(lock.ttl).to_string();
    let refresh_s = refresh.map_or(0, whole_seconds).to_string();
    let queue_ms = if lock.wait >= Duration::from_millis(1) {
        millis(lock.wait)
    } else {
        0
    };
    // Server-side BLPOP timeouts run late by up to 1/hz, so the total is
    // bounded by the clock, not by counting waits.
    let deadline = lock.retries.map(|retries| {
        let retries = u32::try_from(retries).unwrap_or(u32::MAX);
        Instant::now() + lock.wait.saturating_mul(retries)
    });
    let mut attempt: u64 = 0;
    loop {
        let remaining = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
        let last = lock.retries.is_some_and(|retries| attempt >= retries)
            || remaining.is_some_and(|remaining| remaining.is_zero());
        let read_if_busy = if last && lock.failure_readonly {
            "1"
        } else {
            "0"
        };
        let wait_ms = if last { 0 } else { queue_ms }.to_string();
        let reply = store.eval(
            &ACQUIRE_AND_READ,
            &[&held.data_key, &held.lock_key],
            &[
                held.secret.as_bytes(),
                lock_ms.as_bytes(),
                refresh_s.as_bytes(),
                read_if_busy.as_bytes(),
                wait_ms.as_bytes(),
                HAND_OVER_TIMEOUT_MS.as_bytes(),
            ],
        )?;
        let (locked, data, wake_key) = parse_acquire_reply(reply)?;
        if locked {
            return Ok(Acquired::Locked(held, data));
        }
        *busy_once = true;
        if last {
            return Ok(Acquired::Busy(data));
        }
        attempt += 1;
        let wait = remaining.map_or(lock.wait, |remaining| remaining.min(lock.wait));
        match wake_key {
            Some(wake_key) => match store.wait_for_wake(&wake_key, wait) {
                Ok(Some(handed_over)) => {
                    return Ok(Acquired::Locked(held, handed_over_data(handed_over)?));
                }
                Ok(None) => {}
                Err(err) => {
                    // The lock may have been handed to us with the reply lost:
                    // give it on rather than leave it to its TTL.
                    let _ = release(store, &held);
                    return Err(err);
                }
            },
            None => sleep(wait),
        }
    }
}

/// The session data a hand-over pushed: "1" + data, or "0" for no session.
fn handed_over_data(mut element: Vec<u8>) -> Result<Option<Vec<u8>>> {
    match element.first() {
        Some(b'1') => {
            element.remove(0);
            Ok(Some(element))
        }
        Some(b'0') => Ok(None),
        _ => bail!("unexpected hand-over from the lock queue"),
    }
}

type AcquireReply = (bool, Option<Vec<u8>>, Option<Vec<u8>>);

fn parse_acquire_reply(reply: Value) -> Result<AcquireReply> {
    let Value::Array(items) = reply else {
        bail!("unexpected reply to the lock script: {reply:?}");
    };
    let mut items = items.into_iter();
    let locked = matches!(items.next(), Some(Value::Int(1)));
    let mut bytes = || match items.next() {
        Some(Value::BulkString(bytes)) => Ok(Some(bytes)),
        Some(Value::Nil) | None => Ok(None),
        Some(other) => bail!("unexpected item in the lock script reply: {other:?}"),
    };
    let data = bytes()?;
    let wake_key = bytes()?;
    Ok((locked, data, wake_key))
}

fn is_one(reply: &Value) -> bool {
    matches!(reply, Value::Int(1))
}

/// How PHP saves a locked session at the end of a request.
#[derive(Clone, Copy)]
pub enum Save {
    /// write: store the data only while the lock is ours.
    Write,
    /// update_timestamp: refresh the TTL, rewrite a vanished key while the lock is ours.
    Touch,
}

/// Saves and releases the lock in one call; false if the lock was no longer ours
/// (then a write stored nothing). With `ack`, a write also waits, in the same
/// round trip, for that many replicas, and fails if fewer have it in time.
pub fn save_and_release(
    store: &mut impl SessionStore,
    save: Save,
    data_key: &[u8],
    held: &HeldLock,
    data: &[u8],
    ttl: Duration,
    ack: Option<ReplicaAck>,
) -> Result<bool> {
    let script = match save {
        Save::Write => &WRITE_AND_RELEASE,
        Save::Touch => &TOUCH_AND_RELEASE,
    };
    let ttl = whole_seconds(ttl).to_string();
    let keys: [&[u8]; 2] = [data_key, &held.lock_key];
    let args: [&[u8]; 3] = [held.secret.as_bytes(), data, ttl.as_bytes()];
    let (reply, acked) = match (save, ack) {
        (Save::Write, Some(ack)) => {
            let (reply, acked) = store.eval_acked(script, &keys, &args, ack)?;
            (reply, Some((ack, acked)))
        }
        _ => (store.eval(script, &keys, &args)?, None),
    };
    let ours = is_one(&reply);
    if ours {
        stats::released(ReleaseCommand::Eval);
        if let Some((ack, acked)) = acked {
            check_replicas(ack, acked)?;
        }
    }
    Ok(ours)
}

/// An error unless at least `ack.replicas` replicas acknowledged the write.
pub fn check_replicas(ack: ReplicaAck, acked: u32) -> Result<()> {
    if acked < ack.replicas {
        bail!(
            "Session data stored on the primary, but only {acked} of {} replicas had it within {} ms (rediscluster_session.write_replicas)",
            ack.replicas,
            ack.timeout.as_millis()
        );
    }
    Ok(())
}

pub fn destroy_and_release(
    store: &mut impl SessionStore,
    data_key: &[u8],
    held: &HeldLock,
) -> Result<()> {
    store.eval(
        &DESTROY_AND_RELEASE,
        &[data_key, &held.lock_key],
        &[held.secret.as_bytes()],
    )?;
    stats::released(ReleaseCommand::Eval);
    Ok(())
}

/// Compare-and-delete with the configured command; servers without DELEX or
/// DELIFEQ fall back to Lua (the store remembers that per connection).
pub fn release(store: &mut impl SessionStore, held: &HeldLock) -> Result<()> {
    let native = store.delete_if_equal(&held.lock_key, held.secret.as_bytes(), held.release)?;
    if native.is_some() {
        stats::released(held.release);
        return Ok(());
    }
    if held.release != ReleaseCommand::Eval {
        stats::release_fell_back();
    }
    store.eval(
        &RELEASE,
        &[&held.data_key, &held.lock_key],
        &[held.secret.as_bytes()],
    )?;
    stats::released(ReleaseCommand::Eval);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn release_scripts_share_the_hand_over() {
        for script in [
            &WRITE_AND_RELEASE,
            &TOUCH_AND_RELEASE,
            &DESTROY_AND_RELEASE,
            &RELEASE,
        ] {
            assert!(
                script
                    .source()
                    .contains("local function release(data_key, lock, secret)")
            );
            assert_eq!(
                script
                    .source()
                    .matches("release(KEYS[1], KEYS[2], ARGV[1])")
                    .count(),
                1
            );
        }
    }

    #[test]
    fn secrets_are_fresh_hex() {
        let (a, b) = (new_secret().unwrap(), new_secret().unwrap());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    /// A store whose lock is busy for `busy` attempts, counting them and the
    /// waits for a hand-over.
    struct BusyThenFree {
        busy: usize,
        attempts: usize,
        wake_waits: usize,
        /// How long each wait takes, whatever timeout it was given.
        wait_takes: Duration,
        /// What the first wait for a hand-over returns.
        hand_over: Option<Vec<u8>>,
    }

    impl SessionStore for BusyThenFree {
        fn get(&mut self, _: &[u8], _: Option<Duration>) -> Result<Option<Vec<u8>>> {
            unreachable!()
        }
        fn set(&mut self, _: &[u8], _: &[u8], _: Duration) -> Result<()> {
            unreachable!()
        }
        fn expire(&mut self, _: &[u8], _: Duration) -> Result<bool> {
            unreachable!()
        }
        fn exists(&mut self, _: &[u8]) -> Result<bool> {
            unreachable!()
        }
        fn delete(&mut self, _: &[u8]) -> Result<()> {
            unreachable!()
        }
        fn delete_if_equal(
            &mut self,
            _: &[u8],
            _: &[u8],
            _: ReleaseCommand,
        ) -> Result<Option<bool>> {
            unreachable!()
        }
        fn eval_acked(
            &mut self,
            _: &LuaScript,
            _: &[&[u8]],
            _: &[&[u8]],
            _: ReplicaAck,
        ) -> Result<(Value, u32)> {
            unreachable!()
        }
        fn set_acked(&mut self, _: &[u8], _: &[u8], _: Duration, _: ReplicaAck) -> Result<u32> {
            unreachable!()
        }
        fn wait_for_wake(&mut self, key: &[u8], _: Duration) -> Result<Option<Vec<u8>>> {
            assert_eq!(key, b"{k}_LOCK_WAKE_x");
            self.wake_waits += 1;
            sleep(self.wait_takes);
            Ok(self.hand_over.take())
        }
        fn eval(&mut self, script: &LuaScript, _: &[&[u8]], args: &[&[u8]]) -> Result<Value> {
            assert_eq!(script.source(), ACQUIRE_AND_READ.source());
            self.attempts += 1;
            if self.attempts > self.busy {
                return Ok(Value::Array(vec![
                    Value::Int(1),
                    Value::BulkString(b"data".to_vec()),
                ]));
            }
            let data = match args[3] {
                b"1" => Value::BulkString(b"stale".to_vec()),
                _ => Value::Nil,
            };
            let wake_key = match args[4] {
                b"0" => Value::Nil,
                _ => Value::BulkString(b"{k}_LOCK_WAKE_x".to_vec()),
            };
            Ok(Value::Array(vec![Value::Int(0), data, wake_key]))
        }
    }

    fn settings(retries: Option<u64>, failure_readonly: bool, wait: Duration) -> LockSettings {
        LockSettings {
            ttl: Duration::from_secs(5),
            wait,
            retries,
            failure_readonly,
            release: ReleaseCommand::Eval,
            wait_notice: None,
        }
    }

    fn busy_store(busy: usize) -> BusyThenFree {
        BusyThenFree {
            busy,
            attempts: 0,
            wake_waits: 0,
            wait_takes: Duration::ZERO,
            hand_over: None,
        }
    }

    /// Acquires against a store busy for `busy` attempts whose waits return at
    /// once; returns the outcome and the attempts made.
    fn acquire_with(
        busy: usize,
        retries: Option<u64>,
        failure_readonly: bool,
    ) -> (Acquired, usize) {
        let lock = settings(retries, failure_readonly, Duration::from_millis(50));
        let mut store = busy_store(busy);
        let outcome = acquire_and_read(&mut store, b"k", b"{k}_LOCK", &lock, None)
            .unwrap()
            .0;
        assert_eq!(store.wake_waits, store.attempts - 1);
        (outcome, store.attempts)
    }

    #[test]
    fn waits_under_a_millisecond_sleep_instead_of_queueing() {
        let lock = settings(None, false, Duration::from_micros(10));
        let mut store = busy_store(3);
        let outcome = acquire_and_read(&mut store, b"k", b"{k}_LOCK", &lock, None)
            .unwrap()
            .0;
        assert!(matches!(outcome, Acquired::Locked(..)));
        assert_eq!((store.attempts, store.wake_waits), (4, 0));
    }

    #[test]
    fn a_hand_over_brings_the_lock_and_the_data() {
        let lock = settings(Some(3), false, Duration::from_millis(50));
        for (pushed, expected) in [(&b"1data"[..], Some(b"data".to_vec())), (b"0", None)] {
            let mut store = busy_store(usize::MAX);
            store.hand_over = Some(pushed.to_vec());
            let outcome = acquire_and_read(&mut store, b"k", b"{k}_LOCK", &lock, None)
                .unwrap()
                .0;
            assert!(matches!(outcome, Acquired::Locked(_, data) if data == expected));
            assert_eq!((store.attempts, store.wake_waits), (1, 1));
        }
    }

    #[test]
    fn late_waits_do_not_stretch_the_total_wait() {
        // 10 x 20 ms allowed; each wait takes 100 ms, like BLPOP at hz 10.
        let lock = settings(Some(10), false, Duration::from_millis(20));
        let mut store = busy_store(usize::MAX);
        store.wait_takes = Duration::from_millis(100);
        let started = Instant::now();
        let outcome = acquire_and_read(&mut store, b"k", b"{k}_LOCK", &lock, None)
            .unwrap()
            .0;
        assert!(matches!(outcome, Acquired::Busy(None)));
        assert!(started.elapsed() < Duration::from_millis(500));
        assert!(store.attempts <= 4, "{}", store.attempts);
    }

    #[test]
    fn retries_count_attempts_after_the_first() {
        let (outcome, attempts) = acquire_with(usize::MAX, Some(3), false);
        assert!(matches!(outcome, Acquired::Busy(None)));
        assert_eq!(attempts, 4);
    }

    #[test]
    fn readonly_failure_reads_the_data_on_the_last_attempt_only() {
        let (outcome, attempts) = acquire_with(usize::MAX, Some(2), true);
        assert!(matches!(outcome, Acquired::Busy(Some(data)) if data == b"stale"));
        assert_eq!(attempts, 3);
    }

    #[test]
    fn data_comes_from_the_winning_attempt() {
        let (outcome, attempts) = acquire_with(5, None, true);
        assert!(
            matches!(outcome, Acquired::Locked(held, Some(data)) if data == b"data" && held.lock_key == b"{k}_LOCK")
        );
        assert_eq!(attempts, 6);
    }
}

/// The scripts on a real cluster; `scripts/test.sh` runs them with
/// `cargo test -- --ignored` after starting one.
#[cfg(test)]
mod cluster_tests {
    use super::*;
    use crate::store::ClusterStore;
    use crate::store::cluster_tests::store;

    fn lock_settings() -> LockSettings {
        LockSettings {
            ttl: Duration::from_secs(10),
            wait: Duration::from_millis(20),
            retries: Some(5),
            failure_readonly: false,
            release: ReleaseCommand::Eval,
            wait_notice: None,
        }
    }

    /// A data key of this test process and its lock key.
    fn keys(name: &str) -> (Vec<u8>, Vec<u8>) {
        let data_key = format!("RCS_UNIT:{}:{name}", std::process::id()).into_bytes();
        let lock_key = crate::keys::lock_key(&data_key).unwrap();
        (data_key, lock_key)
    }

    /// Takes the lock, which must be free.
    fn lock(store: &mut ClusterStore, data_key: &[u8], lock_key: &[u8]) -> HeldLock {
        match acquire_and_read(store, data_key, lock_key, &lock_settings(), None)
            .unwrap()
            .0
        {
            Acquired::Locked(held, _) => held,
            Acquired::Busy(_) => panic!("the lock should be free"),
        }
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_repeated_write_after_a_lost_reply_counts_as_done() {
        let mut store = store();
        let (data_key, lock_key) = keys("idempotent");
        let ttl = Duration::from_secs(60);
        let held = lock(&mut store, &data_key, &lock_key);
        for _ in 0..2 {
            assert!(
                save_and_release(&mut store, Save::Write, &data_key, &held, b"v1", ttl, None)
                    .unwrap()
            );
        }
        // Other data after the lock is gone is refused and stores nothing.
        assert!(
            !save_and_release(&mut store, Save::Write, &data_key, &held, b"v2", ttl, None).unwrap()
        );
        assert_eq!(store.get(&data_key, None).unwrap(), Some(b"v1".to_vec()));
        assert!(!store.exists(&lock_key).unwrap());
        store.delete(&data_key).unwrap();
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_write_can_wait_for_its_replica() {
        let mut cluster = store();
        let (data_key, lock_key) = keys("acked");
        let ttl = Duration::from_secs(60);
        let mut write = |data: &[u8], replicas| {
            let held = lock(&mut cluster, &data_key, &lock_key);
            let ack = ReplicaAck {
                replicas,
                timeout: Duration::from_millis(300),
            };
            save_and_release(
                &mut cluster,
                Save::Write,
                &data_key,
                &held,
                data,
                ttl,
                Some(ack),
            )
        };
        // Every primary of the test cluster has one replica.
        assert!(write(b"v1", 1).unwrap());
        let err = write(b"v2", 2).unwrap_err().to_string();
        assert!(err.contains("only 1 of 2 replicas"), "{err}");
        let mut check = store();
        assert_eq!(check.get(&data_key, None).unwrap(), Some(b"v2".to_vec()));
        check.delete(&data_key).unwrap();
    }
}
