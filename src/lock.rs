//! The session lock protocol on a cluster.
//!
//! Every key of a session's lock shares the data key's slot (see
//! [`LockKeys`]), and every script receives in `KEYS` each key it touches: no
//! script builds a key name, so the scripts run during a slot migration and
//! behind proxies that route by declared keys.
//!
//! - read = acquire + read in one Lua call: the data returned is always the
//!   one read under the lock. A busy lock puts the caller in the session's
//!   queue (first come, first served) and it blocks on its own wake list.
//! - write = check-and-write + release in one Lua call: nothing is stored
//!   unless the lock still holds our secret.
//! - Release hands the lock to the longest waiter still waiting: the lock
//!   gets that waiter's secret and TTL at once, and a second call
//!   ([`HAND_OVER`]) pushes the session data onto its wake list, whose name
//!   only the releasing client can declare. The waiter's BLPOP returns the
//!   data, so taking over costs it no further round trip.
//!
//! A locked session that changed costs 2 round trips (acquire+read,
//! write+release); with someone waiting, the releaser makes one more (the
//! push) and the waiter one more (its BLPOP).
//!
//! Every call is safe to repeat after a lost reply or a cluster redirect:
//! each acquisition has a fresh random secret that the scripts recognise.
//! A script stops halfway only on a server fault (OOM, a node dying); what
//! it wrote by then is repeated or recognised by the next call, as each
//! script's comment says.

use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};

use crate::keys::LockKeys;
use crate::script::LuaScript;
use crate::settings::{LockSettings, ReleaseCommand, ReplicaAck};
use crate::stats;
use crate::store::{LockStore, Reply, whole_seconds};

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

/// Lua shared by every script that releases a lock. KEYS: data, lock, queue,
/// waiters (as [`LockKeys`]). Gives the lock to the longest waiter whose
/// deadline has not passed, with that waiter's own lock TTL, and marks the
/// waiter "handed" so that one [`HAND_OVER`] pushes it the data; drops
/// waiters that are gone. With nobody waiting it deletes the lock. Returns
/// {new owner, its data TTL s, its lock TTL ms}, or an empty table.
/// Stopping halfway leaves either the lock with its old owner (a repeat
/// hands over) or with the new one (the new owner's own acquire finds it).
macro_rules! hand_over_lua {
    () => {
        concat!(
            now_ms_lua!(),
            r"local function hand_over(lock, queue, waiters)
  local now
  while true do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not head then break end
    redis.call('ZREM', queue, head)
    now = now or now_ms()
    local lock_ms, refresh, deadline =
      string.match(redis.call('HGET', waiters, head) or '', '^(%d+) (%d+) (%d+)$')
    if lock_ms and tonumber(deadline) >= now then
      redis.call('HSET', waiters, head, 'handed ' .. string.format('%d', now))
      redis.call('SET', lock, head, 'PX', lock_ms)
      return {head, refresh, lock_ms}
    end
    redis.call('HDEL', waiters, head)
  end
  redis.call('DEL', lock)
  return {}
end
local function released(ours, handed)
  return {ours, handed[1], handed[2], handed[3]}
end
"
        )
    };
}

thread_local! {
    /// Whether this thread's next acquire tries plain `SET NX` + `GET` first,
    /// a fraction of a script's server time: yes unless its last acquire had
    /// to wait. A busy lock costs that try one round trip, so a thread that
    /// meets contention queues by script straight away.
    static PLAIN_FIRST: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// How long a waiter has to take a lock handed to it before the next one may
/// take it over: a live waiter is blocked already or between two calls, so
/// this passing means it died. Also the longest single BLPOP, so that
/// waiters look for such a dead hand-over at least this often.
const HAND_OVER_TIMEOUT: Duration = Duration::from_millis(1000);
/// The shortest BLPOP: servers check blocking timeouts 10 times a second (at
/// the default hz), so shorter ones would only return late.
const SHORTEST_PIECE: Duration = Duration::from_millis(100);

/// KEYS: data, lock, queue, waiters, the caller's wake list, the wake list of
/// the owner it suspects of a dead hand-over (or its own again).
/// Returns {1, data} when the lock is ours, {0, data-or-false, owner} when
/// busy. Repeats are safe: a lock that already holds our secret is ours (a
/// lost reply, or a hand-over that came after our wait ended), and queueing
/// again keeps our place.
static ACQUIRE_AND_READ: LuaScript = LuaScript::new(concat!(
    now_ms_lua!(),
    r"local data_key, lock, queue, waiters = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local own_wake, suspect_wake = KEYS[5], KEYS[6]
local secret, lock_ms, refresh = ARGV[1], ARGV[2], ARGV[3]
local read_if_busy, wait_ms, hand_over_ms = ARGV[4] == '1', tonumber(ARGV[5]), tonumber(ARGV[6])
local suspect, queued = ARGV[7], ARGV[8] == '1'
local owner = redis.call('GET', lock)
-- A lock this thread took earlier (the first half of the secret names the
-- thread) and has let go of: its release was lost or undone by a failover.
if owner and owner ~= secret and string.sub(owner, 1, 16) == string.sub(secret, 1, 16) then
  owner = false
end
-- A hand-over still 'handed' (its data never pushed: the releaser died, or a
-- failover lost the push) or whose data still lies in the new owner's list
-- after hand_over_ms was never taken: that waiter is gone, the lock is free.
if owner and owner ~= secret and owner == suspect then
  local at = tonumber(string.match(redis.call('HGET', waiters, suspect) or '', '^handed (%d+)$'))
  if not at then
    local pushed = redis.call('LINDEX', suspect_wake, 0)
    at = pushed and tonumber(string.match(pushed, '^H(%d+):'))
  end
  if at and now_ms() - at > hand_over_ms then
    redis.call('DEL', suspect_wake)
    redis.call('HDEL', waiters, suspect)
    owner = false
  end
end
local function leave_queue()
  redis.call('ZREM', queue, secret)
  redis.call('HDEL', waiters, secret)
end
if not owner or owner == secret then
  -- Ours. Leaving the queue also clears 'handed', so no push follows; a
  -- push that came already is dropped with the list.
  redis.call('SET', lock, secret, 'PX', lock_ms)
  if queued then
    leave_queue()
    redis.call('DEL', own_wake)
  end
  if refresh ~= '0' then return {1, redis.call('GETEX', data_key, 'EX', refresh)} end
  return {1, redis.call('GET', data_key)}
end
if wait_ms > 0 then
  -- Queue by arrival (NX keeps our place across attempts) with our terms
  -- and how long we are sure to be waiting. Both keys expire on their own
  -- once every waiter is gone, and no waiter shortens another's expiry.
  local time = redis.call('TIME')
  local now = time[1] * 1000 + math.floor(time[2] / 1000)
  redis.call('ZADD', queue, 'NX', time[1] .. string.format('%06d', time[2]), secret)
  redis.call('HSET', waiters, secret,
    lock_ms .. ' ' .. refresh .. ' ' .. string.format('%d', now + wait_ms + hand_over_ms))
  local expiry = wait_ms + 2 * hand_over_ms
  for _, key in ipairs({queue, waiters}) do
    redis.call('PEXPIRE', key, expiry, 'NX')
    redis.call('PEXPIRE', key, expiry, 'GT')
  end
elseif queued then
  leave_queue()
end
local data = false
if read_if_busy then data = redis.call('GET', data_key) end
return {0, data, owner}"
));

/// KEYS: data, lock, waiters, the new owner's wake list. ARGV: the new
/// owner's secret, data TTL s, lock TTL ms. Pushes the data to a waiter the
/// lock was handed to, only while it is "handed": a waiter that took the lock
/// by itself cleared that, and a repeat finds it cleared too.
static HAND_OVER: LuaScript = LuaScript::new(concat!(
    now_ms_lua!(),
    r"local data_key, lock, waiters, wake = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner, refresh, lock_ms = ARGV[1], ARGV[2], ARGV[3]
if redis.call('GET', lock) ~= owner
    or not string.match(redis.call('HGET', waiters, owner) or '', '^handed ') then
  return 0
end
redis.call('HDEL', waiters, owner)
local data
if refresh ~= '0' then
  data = redis.call('GETEX', data_key, 'EX', refresh)
else
  data = redis.call('GET', data_key)
end
-- 'H' + the time, so that a hand-over nobody takes can be recognised.
redis.call('RPUSH', wake, 'H' .. string.format('%d', now_ms()) .. ':' .. (data and ('1' .. data) or '0'))
redis.call('PEXPIRE', wake, lock_ms)
return 1"
));

/// KEYS: data, lock, queue, waiters. ARGV: secret, data, data TTL s. Stores
/// and releases only while the lock holds the secret: {1, hand-over...} if it
/// did, {0} if the lock was lost. A repeat after a lost reply finds the lock
/// gone or handed on and its own data stored, and counts that as done.
static WRITE_AND_RELEASE: LuaScript = LuaScript::new(concat!(
    hand_over_lua!(),
    r"local data_key, lock, queue, waiters = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local secret, data, ttl = ARGV[1], ARGV[2], ARGV[3]
if redis.call('GET', lock) ~= secret then
  if redis.call('GET', data_key) == data then return {1} end
  return {0}
end
redis.call('SET', data_key, data, 'EX', ttl)
return released(1, hand_over(lock, queue, waiters))"
));

/// KEYS: data, lock, queue, waiters. ARGV: secret, data, data TTL s.
/// Refreshes the TTL (allowed without the lock, as in phpredis); rewrites a
/// vanished key and releases the lock only while it holds the secret.
static TOUCH_AND_RELEASE: LuaScript = LuaScript::new(concat!(
    hand_over_lua!(),
    r"local data_key, lock, queue, waiters = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local secret, data, ttl = ARGV[1], ARGV[2], ARGV[3]
local held = redis.call('GET', lock) == secret
if redis.call('EXPIRE', data_key, ttl) == 0 and held then
  redis.call('SET', data_key, data, 'EX', ttl)
end
if held then return released(1, hand_over(lock, queue, waiters)) end
return {0}"
));

/// KEYS: data, lock, queue, waiters. ARGV: secret. Deletes the data while the
/// lock is ours or absent, and releases it if ours. A repeat after the lock
/// went on to another holder leaves that holder's data alone.
static DESTROY_AND_RELEASE: LuaScript = LuaScript::new(concat!(
    hand_over_lua!(),
    r"local data_key, lock, queue, waiters = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local secret = ARGV[1]
local owner = redis.call('GET', lock)
if owner and owner ~= secret then return {0} end
redis.call('DEL', data_key)
if owner then return released(1, hand_over(lock, queue, waiters)) end
return {1}"
));

/// KEYS: data, lock, queue, waiters. ARGV: secret. Releases the lock if ours
/// ({1, ...}); else leaves the queue, where a failed wait may have left us,
/// and hands on a lock that was released without a hand-over (DELEX,
/// DELIFEQ, an older release of this extension) while others wait ({0, ...}).
static RELEASE: LuaScript = LuaScript::new(concat!(
    hand_over_lua!(),
    r"local lock, queue, waiters = KEYS[2], KEYS[3], KEYS[4]
local secret = ARGV[1]
local owner = redis.call('GET', lock)
if owner == secret then return released(1, hand_over(lock, queue, waiters)) end
redis.call('ZREM', queue, secret)
redis.call('HDEL', waiters, secret)
if not owner then return released(0, hand_over(lock, queue, waiters)) end
return {0}"
));

/// A lock this process holds: its keys, the secret that proves it, and how
/// to release it. No `Debug`: the secret must never be printed.
pub struct HeldLock {
    pub keys: LockKeys,
    secret: String,
    release: ReleaseCommand,
}

pub enum Acquired {
    /// The lock is ours; the data was read under it (`None`: no session yet).
    Locked(HeldLock, Option<Vec<u8>>),
    /// Gave up waiting. The data is there only when `failure_readonly` asked for it.
    Busy(Option<Vec<u8>>),
}

/// Random bytes from the OS CSPRNG as hex digits.
fn random_hex<const N: usize>() -> Result<String> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes)
        .map_err(|err| anyhow!("no OS randomness for the lock secret: {err}"))?;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(2 * N);
    for byte in bytes {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    Ok(hex)
}

/// How many random bytes of a secret name the thread that took the lock (the
/// acquire script compares that many hex digits, twice as many).
const HOLDER_BYTES: usize = 8;

thread_local! {
    /// This thread's half of every secret it makes, and the process it was
    /// made in: a forked child makes its own.
    static HOLDER: std::cell::RefCell<Option<(u32, String)>> = const { std::cell::RefCell::new(None) };
}

/// A secret, new for each acquisition: 8 random bytes naming this thread of
/// this process, then 8 random bytes of its own, as 32 hex digits. A thread
/// runs one request at a time, so a lock that carries this thread's half but
/// not the current secret is one it let go of: released with the reply lost,
/// or its release undone by a failover to a replica that never saw it. The
/// acquire script takes such a lock over at once instead of waiting out its TTL.
fn new_secret() -> Result<String> {
    let pid = std::process::id();
    let holder = HOLDER.with(|cell| -> Result<String> {
        let mut holder = cell.borrow_mut();
        match holder.as_ref() {
            Some((made_in, digits)) if *made_in == pid => Ok(digits.clone()),
            _ => {
                let digits = random_hex::<HOLDER_BYTES>()?;
                *holder = Some((pid, digits.clone()));
                Ok(digits)
            }
        }
    })?;
    Ok(holder + &random_hex::<{ 16 - HOLDER_BYTES }>()?)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// One acquisition in progress: the secret it will hold the lock with, and
/// what it learnt while waiting.
pub(crate) struct Acquisition {
    held: HeldLock,
    lock_ms: String,
    refresh_s: String,
    own_wake: Vec<u8>,
    /// In the queue since an earlier attempt.
    queued: bool,
    /// The owner seen last time, whose hand-over may never have been taken.
    suspect: Option<String>,
}

/// What one attempt found.
pub(crate) enum Attempt {
    Locked(Option<Vec<u8>>),
    Busy(Option<Vec<u8>>),
}

impl Acquisition {
    pub(crate) fn new(
        keys: LockKeys,
        lock: &LockSettings,
        refresh: Option<Duration>,
    ) -> Result<Self> {
        let secret = new_secret()?;
        Ok(Acquisition {
            own_wake: keys.wake(&secret),
            held: HeldLock {
                keys,
                secret,
                release: lock.release,
            },
            lock_ms: millis(lock.ttl).to_string(),
            refresh_s: refresh.map_or(0, whole_seconds).to_string(),
            queued: false,
            suspect: None,
        })
    }

    /// Takes the lock if it is free (or ours already). If busy, queues to
    /// wait `wait` more (zero: leave the queue) and reads the data only when
    /// `read_if_busy`.
    pub(crate) fn attempt(
        &mut self,
        store: &mut impl LockStore,
        wait: Duration,
        read_if_busy: bool,
    ) -> Result<Attempt> {
        let suspect_wake = match &self.suspect {
            Some(owner) => self.held.keys.wake(owner),
            None => self.own_wake.clone(),
        };
        let wait_ms = if wait.is_zero() { 0 } else { millis(wait) }.to_string();
        let hand_over_ms = millis(HAND_OVER_TIMEOUT).to_string();
        let keys = &self.held.keys;
        let reply = store.eval(
            &ACQUIRE_AND_READ,
            &[
                &keys.data,
                &keys.lock,
                &keys.queue,
                &keys.waiters,
                &self.own_wake,
                &suspect_wake,
            ],
            &[
                self.held.secret.as_bytes(),
                self.lock_ms.as_bytes(),
                self.refresh_s.as_bytes(),
                if read_if_busy { b"1" } else { b"0" },
                wait_ms.as_bytes(),
                hand_over_ms.as_bytes(),
                self.suspect.as_deref().unwrap_or("").as_bytes(),
                if self.queued { b"1" } else { b"0" },
            ],
        )?;
        let mut items = match reply {
            Reply::Array(items) => items.into_iter(),
            other => bail!("unexpected {} reply to the lock script", other.kind()),
        };
        let locked = items.next() == Some(Reply::Int(1));
        let data = optional_bytes(items.next())?;
        if locked {
            self.queued = false;
            return Ok(Attempt::Locked(data));
        }
        self.queued = !wait.is_zero();
        self.suspect =
            optional_bytes(items.next())?.map(|owner| String::from_utf8_lossy(&owner).into_owned());
        Ok(Attempt::Busy(data))
    }

    /// The lock taken with plain commands (no script) if it is free: the
    /// data, or `None` when it is busy or the slot is moving.
    fn lock_and_read(
        &self,
        store: &mut impl LockStore,
        ttl: Duration,
        refresh: Option<Duration>,
    ) -> Result<Option<Option<Vec<u8>>>> {
        let keys = &self.held.keys;
        store.lock_and_read(
            &keys.lock,
            self.held.secret.as_bytes(),
            ttl,
            &keys.data,
            refresh,
        )
    }

    /// Blocks up to `timeout` for the lock to be handed to us: the data if it
    /// was.
    pub(crate) fn wait_for_hand_over(
        &mut self,
        store: &mut impl LockStore,
        timeout: Duration,
    ) -> Result<Option<Option<Vec<u8>>>> {
        match store.pop_wait(&self.own_wake, timeout)? {
            Some(pushed) => {
                self.queued = false;
                Ok(Some(handed_over_data(pushed)?))
            }
            None => Ok(None),
        }
    }

    pub(crate) fn into_held(self) -> HeldLock {
        self.held
    }
}

/// Takes the lock and reads the data, waiting while it is busy for at most
/// `lock_retries` × `lock_wait_time` in all (or forever), by the wall clock.
/// A waiter blocks on its own list in pieces of `lock_wait_time`, within
/// [`SHORTEST_PIECE`] and [`HAND_OVER_TIMEOUT`], keeping its place in the
/// queue. Between pieces it looks for a lock that came free without a
/// hand-over (a holder that died, DELEX, an older release of this extension)
/// and for a hand-over that died on the way. Also returns how long it waited
/// (zero when the lock was free).
pub fn acquire_and_read(
    store: &mut impl LockStore,
    keys: LockKeys,
    lock: &LockSettings,
    refresh: Option<Duration>,
) -> Result<(Acquired, Duration)> {
    let started = Instant::now();
    let mut acquisition = Acquisition::new(keys, lock, refresh)?;
    if PLAIN_FIRST.get() {
        match acquisition.lock_and_read(store, lock.ttl, refresh) {
            Ok(Some(data)) => {
                stats::lock_attempt(true, Duration::ZERO);
                return Ok((
                    Acquired::Locked(acquisition.into_held(), data),
                    Duration::ZERO,
                ));
            }
            // Busy, or the slot is moving: the scripts take it from here.
            Ok(None) => {}
            Err(err) => {
                let _ = release(store, &acquisition.held);
                return Err(err);
            }
        }
    }
    let deadline = lock
        .total_wait()
        .and_then(|total| started.checked_add(total));
    let longest_piece = lock.wait.clamp(SHORTEST_PIECE, HAND_OVER_TIMEOUT);
    let mut waited = false;
    let outcome = loop {
        let remaining = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
        let last = remaining.is_some_and(|remaining| remaining.is_zero());
        let piece = remaining.map_or(longest_piece, |r| r.min(longest_piece));
        let read_if_busy = last && lock.failure_readonly;
        let queue_for = if last { Duration::ZERO } else { piece };
        match acquisition.attempt(store, queue_for, read_if_busy) {
            Ok(Attempt::Locked(data)) => break Acquired::Locked(acquisition.into_held(), data),
            Ok(Attempt::Busy(data)) if last => break Acquired::Busy(data),
            Ok(Attempt::Busy(_)) => waited = true,
            Err(err) => {
                // We may be queued, or hold a lock handed over with the reply
                // lost: give it on rather than leave it to its TTL.
                let _ = release(store, &acquisition.held);
                return Err(err);
            }
        }
        // No hand-over, or a reply lost on the way: the next attempt finds
        // the lock ours if it was handed over.
        if let Ok(Some(data)) = acquisition.wait_for_hand_over(store, piece) {
            break Acquired::Locked(acquisition.into_held(), data);
        }
    };
    PLAIN_FIRST.set(!waited);
    let waited = if waited {
        started.elapsed()
    } else {
        Duration::ZERO
    };
    stats::lock_attempt(matches!(outcome, Acquired::Locked(..)), waited);
    Ok((outcome, waited))
}

/// The session data a hand-over pushed: "H<ms>:" then "1" + data, or "0"
/// for no session.
fn handed_over_data(pushed: Vec<u8>) -> Result<Option<Vec<u8>>> {
    let body = pushed.strip_prefix(b"H").and_then(|rest| {
        rest.iter()
            .position(|&b| b == b':')
            .map(|colon| &rest[colon + 1..])
    });
    match body {
        Some([b'1', data @ ..]) => Ok(Some(data.to_vec())),
        Some([b'0']) => Ok(None),
        _ => bail!("unexpected hand-over in the lock queue"),
    }
}

fn optional_bytes(item: Option<Reply>) -> Result<Option<Vec<u8>>> {
    match item {
        Some(Reply::Data(bytes)) => Ok(Some(bytes)),
        Some(Reply::Nil) | None => Ok(None),
        Some(other) => bail!("unexpected {} in the lock script reply", other.kind()),
    }
}

/// A release script's reply: {ours, [new owner, its data TTL s, its lock TTL
/// ms]}. Pushes the data to the new owner if the lock went to one.
fn after_release(store: &mut impl LockStore, keys: &LockKeys, reply: Reply) -> Result<bool> {
    let mut items = match reply {
        Reply::Array(items) => items.into_iter(),
        other => bail!("unexpected {} reply to the lock script", other.kind()),
    };
    let ours = items.next() == Some(Reply::Int(1));
    let mut field = || optional_bytes(items.next());
    if let (Some(owner), Some(refresh), Some(lock_ms)) = (field()?, field()?, field()?) {
        let owner = String::from_utf8_lossy(&owner).into_owned();
        let wake = keys.wake(&owner);
        store.eval(
            &HAND_OVER,
            &[&keys.data, &keys.lock, &keys.waiters, &wake],
            &[owner.as_bytes(), &refresh[..], &lock_ms[..]],
        )?;
    }
    Ok(ours)
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
    store: &mut impl LockStore,
    save: Save,
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
    let keys = &held.keys;
    let key_list: [&[u8]; 4] = [&keys.data, &keys.lock, &keys.queue, &keys.waiters];
    let args: [&[u8]; 3] = [held.secret.as_bytes(), data, ttl.as_bytes()];
    let (reply, acked) = match (save, ack) {
        (Save::Write, Some(ack)) => {
            let (reply, acked) = store.eval_acked(script, &key_list, &args, ack)?;
            (reply, Some((ack, acked)))
        }
        _ => (store.eval(script, &key_list, &args)?, None),
    };
    let ours = after_release(store, keys, reply)?;
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

pub fn destroy_and_release(store: &mut impl LockStore, held: &HeldLock) -> Result<()> {
    let keys = &held.keys;
    let reply = store.eval(
        &DESTROY_AND_RELEASE,
        &[&keys.data, &keys.lock, &keys.queue, &keys.waiters],
        &[held.secret.as_bytes()],
    )?;
    after_release(store, keys, reply)?;
    stats::released(ReleaseCommand::Eval);
    Ok(())
}

/// Releases the lock, handing it on to the longest waiter. DELEX or DELIFEQ,
/// when configured, delete it in one command and say in the same round trip
/// whether anyone waits; only then does Lua hand it on. Servers without
/// them fall back to Lua (remembered per cluster).
pub fn release(store: &mut impl LockStore, held: &HeldLock) -> Result<()> {
    let keys = &held.keys;
    let native = store.delete_if_equal(
        &keys.lock,
        held.secret.as_bytes(),
        held.release,
        &keys.queue,
    )?;
    match native {
        Some((true, 0)) => {
            stats::released(held.release);
            return Ok(());
        }
        Some((true, _)) => stats::released(held.release),
        Some((false, _)) => {}
        None if held.release != ReleaseCommand::Eval => stats::release_fell_back(),
        None => {}
    }
    let reply = store.eval(
        &RELEASE,
        &[&keys.data, &keys.lock, &keys.queue, &keys.waiters],
        &[held.secret.as_bytes()],
    )?;
    if after_release(store, keys, reply)? {
        stats::released(ReleaseCommand::Eval);
    }
    Ok(())
}

/// Every script of the protocol, for tests that check them all.
#[cfg(test)]
pub(crate) const SCRIPTS: [&LuaScript; 6] = [
    &ACQUIRE_AND_READ,
    &HAND_OVER,
    &WRITE_AND_RELEASE,
    &TOUCH_AND_RELEASE,
    &DESTROY_AND_RELEASE,
    &RELEASE,
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread::sleep;

    #[test]
    fn no_script_builds_a_key_name() {
        for script in SCRIPTS {
            let source = script.source();
            for derived in ["_LOCK", "_FIFO", "_WAITERS", "_WAKE", "_QUEUE", ".. '_"] {
                assert!(!source.contains(derived), "{derived} in {source}");
            }
            assert!(source.contains("KEYS[2]"), "the lock key is declared");
        }
    }

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
                    .contains("local function hand_over(lock, queue, waiters)")
            );
        }
    }

    #[test]
    fn secrets_are_fresh_hex_with_the_threads_half_first() {
        const HOLDER_DIGITS: usize = 2 * HOLDER_BYTES;
        let (a, b) = (new_secret().unwrap(), new_secret().unwrap());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert_eq!(a[..HOLDER_DIGITS], b[..HOLDER_DIGITS]);
        assert_ne!(a[HOLDER_DIGITS..], b[HOLDER_DIGITS..]);
        let other = std::thread::spawn(|| new_secret().unwrap()).join().unwrap();
        assert_ne!(a[..HOLDER_DIGITS], other[..HOLDER_DIGITS]);
        assert!(
            ACQUIRE_AND_READ
                .source()
                .contains(&format!("string.sub(owner, 1, {HOLDER_DIGITS})"))
        );
    }

    #[test]
    fn hand_over_elements() {
        assert_eq!(
            handed_over_data(b"H17:1data".to_vec()).unwrap(),
            Some(b"data".to_vec())
        );
        assert_eq!(
            handed_over_data(b"H17:1".to_vec()).unwrap(),
            Some(Vec::new())
        );
        assert_eq!(handed_over_data(b"H17:0".to_vec()).unwrap(), None);
        for bad in [&b"1data"[..], b"H17", b"", b"H1:2"] {
            assert!(handed_over_data(bad.to_vec()).is_err());
        }
    }

    /// A lock that stays busy: counts the attempts and the waits, and
    /// remembers what each attempt was asked.
    struct AlwaysBusy {
        plain_tries: usize,
        attempts: Vec<Vec<Vec<u8>>>,
        waits: Vec<Duration>,
        /// How long each wait takes, whatever timeout it was given.
        wait_takes: Duration,
        /// What the first wait for a hand-over returns.
        hand_over: Option<Vec<u8>>,
    }

    impl LockStore for AlwaysBusy {
        fn eval(&mut self, script: &LuaScript, _: &[&[u8]], args: &[&[u8]]) -> Result<Reply> {
            if script.source() != ACQUIRE_AND_READ.source() {
                // The release after an error, or a release: nothing to do.
                return Ok(Reply::Array(vec![Reply::Int(0)]));
            }
            self.attempts
                .push(args.iter().map(|arg| arg.to_vec()).collect());
            let data = match args[3] {
                b"1" => Reply::Data(b"stale".to_vec()),
                _ => Reply::Nil,
            };
            Ok(Reply::Array(vec![
                Reply::Int(0),
                data,
                Reply::Data(b"owner".to_vec()),
            ]))
        }
        fn eval_acked(
            &mut self,
            _: &LuaScript,
            _: &[&[u8]],
            _: &[&[u8]],
            _: ReplicaAck,
        ) -> Result<(Reply, u32)> {
            unreachable!()
        }
        fn lock_and_read(
            &mut self,
            _: &[u8],
            _: &[u8],
            _: Duration,
            _: &[u8],
            _: Option<Duration>,
        ) -> Result<Option<Option<Vec<u8>>>> {
            self.plain_tries += 1;
            Ok(None)
        }
        fn pop_wait(&mut self, _: &[u8], timeout: Duration) -> Result<Option<Vec<u8>>> {
            self.waits.push(timeout);
            sleep(self.wait_takes.min(timeout));
            Ok(self.hand_over.take())
        }
        fn delete_if_equal(
            &mut self,
            _: &[u8],
            _: &[u8],
            _: ReleaseCommand,
            _: &[u8],
        ) -> Result<Option<(bool, u64)>> {
            Ok(None)
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

    fn busy(wait_takes: Duration) -> AlwaysBusy {
        AlwaysBusy {
            plain_tries: 0,
            attempts: Vec::new(),
            waits: Vec::new(),
            wait_takes,
            hand_over: None,
        }
    }

    fn acquire(store: &mut AlwaysBusy, lock: &LockSettings) -> Acquired {
        let keys = LockKeys::new(b"k").unwrap();
        acquire_and_read(store, keys, lock, None).unwrap().0
    }

    #[test]
    fn a_hand_over_brings_the_lock_and_the_data() {
        let lock = settings(Some(3), false, Duration::from_millis(50));
        for (pushed, expected) in [(&b"H5:1data"[..], Some(b"data".to_vec())), (b"H5:0", None)] {
            let mut store = busy(Duration::ZERO);
            store.hand_over = Some(pushed.to_vec());
            let outcome = acquire(&mut store, &lock);
            assert!(matches!(outcome, Acquired::Locked(_, data) if data == expected));
            assert_eq!((store.attempts.len(), store.waits.len()), (1, 1));
        }
    }

    #[test]
    fn a_waiter_blocks_in_pieces_of_at_least_100_ms() {
        // 20 x 15 ms: BLPOPs of 100, 100 and 100 ms, then a last attempt
        // that leaves the queue, instead of twenty polls.
        let lock = settings(Some(20), false, Duration::from_millis(15));
        let mut store = busy(Duration::from_secs(1));
        let started = Instant::now();
        assert!(matches!(acquire(&mut store, &lock), Acquired::Busy(None)));
        assert!(started.elapsed() < Duration::from_millis(600));
        assert_eq!(store.waits.len(), 3);
        assert!(store.waits.iter().all(|wait| *wait <= SHORTEST_PIECE));
        let wait_ms: Vec<&[u8]> = store.attempts.iter().map(|args| &args[4][..]).collect();
        assert_eq!(
            wait_ms.last(),
            Some(&&b"0"[..]),
            "the last attempt leaves the queue"
        );
        assert_eq!(store.attempts.len(), 4);
    }

    #[test]
    fn long_waits_block_in_pieces_and_name_the_owner_they_suspect() {
        let lock = settings(Some(1), false, Duration::from_millis(2500));
        // lock_wait_time 2.5 s: pieces of at most 1 s.
        let mut store = busy(Duration::from_secs(10));
        assert!(matches!(acquire(&mut store, &lock), Acquired::Busy(None)));
        assert_eq!(store.waits.len(), 3);
        assert!(store.waits.iter().all(|wait| *wait <= HAND_OVER_TIMEOUT));
        // The first attempt suspects nobody; later ones the owner seen before.
        let suspects: Vec<&[u8]> = store.attempts.iter().map(|args| &args[6][..]).collect();
        assert_eq!(suspects[0], b"");
        assert!(suspects[1..].iter().all(|s| *s == b"owner"));
        let queued: Vec<&[u8]> = store.attempts.iter().map(|args| &args[7][..]).collect();
        assert_eq!(queued[0], b"0");
        assert!(queued[1..].iter().all(|q| *q == b"1"));
    }

    #[test]
    fn a_thread_that_met_contention_queues_by_script_first() {
        let lock = settings(Some(1), false, Duration::from_millis(1));
        let mut store = busy(Duration::ZERO);
        assert!(matches!(acquire(&mut store, &lock), Acquired::Busy(None)));
        assert_eq!(store.plain_tries, 1);
        assert!(matches!(acquire(&mut store, &lock), Acquired::Busy(None)));
        assert_eq!(store.plain_tries, 1, "no plain try after a wait");
    }

    #[test]
    fn readonly_failure_reads_the_data_on_the_last_attempt_only() {
        let lock = settings(Some(2), true, Duration::from_millis(10));
        let mut store = busy(Duration::from_secs(1));
        assert!(
            matches!(acquire(&mut store, &lock), Acquired::Busy(Some(data)) if data == b"stale")
        );
        let reads: Vec<&[u8]> = store.attempts.iter().map(|args| &args[3][..]).collect();
        assert_eq!(reads, [&b"0"[..], b"1"]);
    }
}

/// The protocol on a real cluster; `scripts/test.sh` runs these with
/// `cargo test -- --ignored` after starting one.
#[cfg(test)]
mod cluster_tests {
    use super::*;
    use crate::store::cluster_tests::{int, store};
    use crate::store::{ClusterStore, SessionStore};
    use redis::cmd;

    fn lock_settings(ttl: Duration) -> LockSettings {
        LockSettings {
            ttl,
            wait: Duration::from_millis(20),
            retries: Some(5),
            failure_readonly: false,
            release: ReleaseCommand::Eval,
            wait_notice: None,
        }
    }

    /// The keys of a session of this test process.
    fn keys(name: &str) -> LockKeys {
        LockKeys::new(format!("RCS_UNIT:{}:{name}", std::process::id()).as_bytes()).unwrap()
    }

    /// Takes the lock, which must be free.
    /// Takes the lock, which must be free, as a process of its own would.
    fn lock(store: &mut ClusterStore, keys: &LockKeys, ttl: Duration) -> HeldLock {
        let mut holder = another_process(keys, ttl);
        let attempt = holder.attempt(store, Duration::ZERO, false).unwrap();
        assert!(
            matches!(attempt, Attempt::Locked(_)),
            "the lock should be free"
        );
        holder.into_held()
    }

    /// An acquisition with a secret of another process: the tests play
    /// several processes in one thread.
    fn another_process(keys: &LockKeys, ttl: Duration) -> Acquisition {
        let mut acquisition = Acquisition::new(keys.clone(), &lock_settings(ttl), None).unwrap();
        acquisition.held.secret = random_hex::<16>().unwrap();
        acquisition.own_wake = keys.wake(&acquisition.held.secret);
        acquisition
    }

    /// A waiter that queued behind a busy lock, to wait `wait` more.
    fn queue(store: &mut ClusterStore, keys: &LockKeys, ttl: Duration) -> Acquisition {
        let mut waiter = another_process(keys, ttl);
        let attempt = waiter
            .attempt(store, Duration::from_secs(5), false)
            .unwrap();
        assert!(matches!(attempt, Attempt::Busy(None)));
        waiter
    }

    fn write(store: &mut ClusterStore, held: &HeldLock, data: &[u8]) -> bool {
        save_and_release(
            store,
            Save::Write,
            held,
            data,
            Duration::from_secs(60),
            None,
        )
        .unwrap()
    }

    fn owner(store: &ClusterStore, keys: &LockKeys) -> Option<Vec<u8>> {
        match store
            .command(&keys.lock, cmd("GET").arg(&keys.lock))
            .unwrap()
        {
            Reply::Data(owner) => Some(owner),
            _ => None,
        }
    }

    fn clean(store: &mut ClusterStore, keys: &LockKeys) {
        for key in [&keys.data, &keys.lock, &keys.queue, &keys.waiters] {
            store.delete(key).unwrap();
        }
    }

    fn is_locked(attempt: Attempt, expected: &[u8]) -> bool {
        matches!(attempt, Attempt::Locked(Some(data)) if data == expected)
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn waiters_get_the_lock_in_arrival_order_with_their_own_ttl() {
        let mut store = store();
        let keys = keys("fifo");
        let holder = lock(&mut store, &keys, Duration::from_secs(30));
        let first = queue(&mut store, &keys, Duration::from_secs(5));
        let second = queue(&mut store, &keys, Duration::from_secs(9));
        assert_eq!(int(&store, &keys.queue, cmd("ZCARD").arg(&keys.queue)), 2);

        // Each release hands the lock to the next in line, with that waiter's TTL.
        let mut hand_over = |from: &HeldLock, to: Acquisition, ttl_ms, data: &[u8]| {
            assert!(write(&mut store, from, data));
            assert_eq!(
                owner(&store, &keys).as_deref(),
                Some(to.held.secret.as_bytes())
            );
            let ttl = int(&store, &keys.lock, cmd("PTTL").arg(&keys.lock));
            assert!((ttl_ms - 1000..=ttl_ms).contains(&ttl), "{ttl}");
            let mut to = to;
            let handed = to.wait_for_hand_over(&mut store, Duration::from_secs(1));
            assert_eq!(handed.unwrap(), Some(Some(data.to_vec())));
            to.into_held()
        };
        let first = hand_over(&holder, first, 5000, b"v1");
        let second = hand_over(&first, second, 9000, b"v2");
        assert!(write(&mut store, &second, b"v3"));

        assert_eq!(owner(&store, &keys), None);
        for key in [&keys.queue, &keys.waiters] {
            assert_eq!(int(&store, key, cmd("EXISTS").arg(key)), 0);
        }
        clean(&mut store, &keys);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_hand_over_after_the_wait_ended_is_found_by_the_next_attempt() {
        let mut store = store();
        let keys = keys("late");
        let holder = lock(&mut store, &keys, Duration::from_secs(30));
        let mut waiter = queue(&mut store, &keys, Duration::from_secs(5));
        // The waiter is between two calls when the lock comes to it.
        assert!(write(&mut store, &holder, b"v1"));
        let wake = keys.wake(&waiter.held.secret);
        assert_eq!(int(&store, &wake, cmd("LLEN").arg(&wake)), 1);
        assert!(is_locked(
            waiter
                .attempt(&mut store, Duration::from_secs(5), false)
                .unwrap(),
            b"v1"
        ));
        assert_eq!(
            int(&store, &wake, cmd("EXISTS").arg(&wake)),
            0,
            "the push is dropped"
        );
        assert!(write(&mut store, &waiter.into_held(), b"v2"));
        clean(&mut store, &keys);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_lost_pop_reply_leaves_the_lock_to_the_waiter() {
        let mut store = store();
        let keys = keys("lostpop");
        let holder = lock(&mut store, &keys, Duration::from_secs(30));
        let mut waiter = queue(&mut store, &keys, Duration::from_secs(5));
        assert!(write(&mut store, &holder, b"v1"));
        // Somebody else's BLPOP took the element: its reply never came back.
        let wake = keys.wake(&waiter.held.secret);
        assert!(
            store
                .pop_wait(&wake, Duration::from_millis(100))
                .unwrap()
                .is_some()
        );
        assert_eq!(
            waiter
                .wait_for_hand_over(&mut store, Duration::from_millis(100))
                .unwrap(),
            None
        );
        assert!(is_locked(
            waiter
                .attempt(&mut store, Duration::from_secs(5), false)
                .unwrap(),
            b"v1"
        ));
        assert!(write(&mut store, &waiter.into_held(), b"v2"));
        clean(&mut store, &keys);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_hand_over_nobody_takes_goes_to_the_next_waiter() {
        let mut store = store();
        let keys = keys("dead");
        let holder = lock(&mut store, &keys, Duration::from_secs(30));
        let dead = queue(&mut store, &keys, Duration::from_secs(30));
        let mut next = queue(&mut store, &keys, Duration::from_secs(5));
        assert!(write(&mut store, &holder, b"v1"));
        assert_eq!(
            owner(&store, &keys).as_deref(),
            Some(dead.held.secret.as_bytes())
        );
        // Not yet: the dead waiter might still take it.
        assert!(matches!(
            next.attempt(&mut store, Duration::from_secs(5), false)
                .unwrap(),
            Attempt::Busy(_)
        ));
        std::thread::sleep(HAND_OVER_TIMEOUT + Duration::from_millis(100));
        assert!(is_locked(
            next.attempt(&mut store, Duration::from_secs(5), false)
                .unwrap(),
            b"v1"
        ));
        let wake = keys.wake(&dead.held.secret);
        assert_eq!(int(&store, &wake, cmd("EXISTS").arg(&wake)), 0);
        assert!(write(&mut store, &next.into_held(), b"v2"));
        // The dead waiter's write is refused.
        assert!(!write(&mut store, &dead.into_held(), b"stale"));
        clean(&mut store, &keys);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_waiter_that_blocks_again_keeps_its_place() {
        let mut store = store();
        let keys = keys("again");
        let holder = lock(&mut store, &keys, Duration::from_secs(30));
        let mut first = queue(&mut store, &keys, Duration::from_secs(5));
        // Its piece of waiting ends with nothing handed over; another queues meanwhile.
        let none = first.wait_for_hand_over(&mut store, Duration::from_millis(100));
        assert_eq!(none.unwrap(), None);
        let second = queue(&mut store, &keys, Duration::from_secs(5));
        assert!(matches!(
            first
                .attempt(&mut store, Duration::from_secs(5), false)
                .unwrap(),
            Attempt::Busy(_)
        ));
        assert!(write(&mut store, &holder, b"v1"));
        assert_eq!(
            owner(&store, &keys).as_deref(),
            Some(first.held.secret.as_bytes())
        );
        let handed = first.wait_for_hand_over(&mut store, Duration::from_secs(1));
        assert_eq!(handed.unwrap(), Some(Some(b"v1".to_vec())));
        assert!(write(&mut store, &first.into_held(), b"v2"));
        assert_eq!(
            owner(&store, &keys).as_deref(),
            Some(second.held.secret.as_bytes())
        );
        release(&mut store, &second.into_held()).unwrap();
        clean(&mut store, &keys);
    }

    /// Direct connections to the nodes, replicas included.
    fn node(addr: &str) -> redis::Connection {
        redis::Client::open(format!("redis://{addr}"))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// The primary and the first replica (if listed) of `key`'s slot.
    fn owners(key: &[u8]) -> (String, String) {
        let seed = std::env::var("RCS_SEEDS").unwrap();
        let mut any = node(seed.split(',').next().unwrap());
        let slot = crate::keys::hash_slot(key);
        let ranges: Vec<redis::Value> = cmd("CLUSTER").arg("SLOTS").query(&mut any).unwrap();
        for range in ranges {
            let redis::Value::Array(items) = range else {
                continue;
            };
            let int = |v: &redis::Value| match v {
                redis::Value::Int(n) => *n,
                _ => -1,
            };
            if (int(&items[0])..=int(&items[1])).contains(&i64::from(slot)) {
                let addr = |v: &redis::Value| match v {
                    redis::Value::Array(node) => match (&node[0], &node[1]) {
                        (redis::Value::BulkString(host), redis::Value::Int(port)) => {
                            format!("{}:{port}", String::from_utf8_lossy(host))
                        }
                        _ => panic!("node {node:?}"),
                    },
                    _ => panic!("node {v:?}"),
                };
                // Just after a failover the old primary may not be listed as a replica yet.
                let replica = items.get(3).map(addr).unwrap_or_default();
                return (addr(&items[2]), replica);
            }
        }
        panic!("slot {slot} has no owner");
    }

    fn info(addr: &str) -> String {
        cmd("INFO")
            .arg("replication")
            .query(&mut node(addr))
            .unwrap()
    }

    /// Promotes the replica of `key`'s slot and waits until it owns the slot
    /// and the old primary replicates from it.
    fn fail_over(key: &[u8]) {
        let started = Instant::now();
        let in_time = || assert!(started.elapsed() < Duration::from_secs(30), "no failover");
        let (primary, replica) = loop {
            match owners(key) {
                (primary, replica)
                    if !replica.is_empty() && info(&replica).contains("master_link_status:up") =>
                {
                    break (primary, replica);
                }
                _ => in_time(),
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut asked = None;
        while owners(key).0 == primary || !info(&replica).contains("state=online") {
            in_time();
            // A manual failover that did not start in time is asked for again.
            if asked.is_none_or(|at: Instant| at.elapsed() > Duration::from_secs(5)) {
                let _: redis::RedisResult<()> =
                    cmd("CLUSTER").arg("FAILOVER").query(&mut node(&replica));
                asked = Some(Instant::now());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_failover_between_hand_over_and_pop_loses_neither_lock_nor_data() {
        let mut store = store();
        let keys = keys("failover");
        let holder = lock(&mut store, &keys, Duration::from_secs(30));
        let mut waiter = queue(&mut store, &keys, Duration::from_secs(30));
        assert!(write(&mut store, &holder, b"v1"));
        // WAIT: the replica has the hand-over before it is promoted.
        let _ = store.command(&keys.lock, cmd("WAIT").arg(1).arg(1000));
        fail_over(&keys.data);
        let handed = waiter
            .wait_for_hand_over(&mut store, Duration::from_secs(1))
            .unwrap();
        assert_eq!(handed, Some(Some(b"v1".to_vec())));
        assert!(write(&mut store, &waiter.into_held(), b"v2"));
        assert_eq!(store.get(&keys.data, None).unwrap(), Some(b"v2".to_vec()));
        clean(&mut store, &keys);
        // Back to the original primaries, for the tests after this one.
        fail_over(&keys.data);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_hand_over_whose_push_never_came_goes_to_the_next_waiter() {
        let mut store = store();
        let keys = keys("nopush");
        let holder = lock(&mut store, &keys, Duration::from_secs(30));
        let lost = queue(&mut store, &keys, Duration::from_secs(30));
        let mut next = queue(&mut store, &keys, Duration::from_secs(5));
        // The releaser dies (or a failover loses its push) between the two calls.
        let reply = store
            .eval(
                &RELEASE,
                &[&keys.data, &keys.lock, &keys.queue, &keys.waiters],
                &[holder.secret.as_bytes()],
            )
            .unwrap();
        assert!(matches!(reply, Reply::Array(items) if items.len() == 4));
        assert_eq!(
            owner(&store, &keys).as_deref(),
            Some(lost.held.secret.as_bytes())
        );
        let busy = next
            .attempt(&mut store, Duration::from_secs(5), false)
            .unwrap();
        assert!(matches!(busy, Attempt::Busy(_)));
        std::thread::sleep(HAND_OVER_TIMEOUT + Duration::from_millis(100));
        let taken = next
            .attempt(&mut store, Duration::from_secs(5), false)
            .unwrap();
        assert!(matches!(taken, Attempt::Locked(None)));
        release(&mut store, &next.into_held()).unwrap();
        clean(&mut store, &keys);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_lock_this_thread_let_go_of_is_taken_over_at_once() {
        let keys = keys("letgo");
        let settings = LockSettings {
            retries: Some(1),
            ..lock_settings(Duration::from_secs(30))
        };
        let acquire = |store: &mut ClusterStore| {
            acquire_and_read(store, keys.clone(), &settings, None)
                .unwrap()
                .0
        };
        // Held by another thread: busy.
        let other = std::thread::scope(|scope| scope.spawn(|| acquire(&mut store())).join());
        let mut store = store();
        let Ok(Acquired::Locked(other, _)) = other else {
            panic!("the lock should be free")
        };
        assert!(matches!(acquire(&mut store), Acquired::Busy(_)));
        release(&mut store, &other).unwrap();
        // Taken by this thread and never released (its release lost in a
        // failover, say): this thread's next acquire takes it at once.
        let Acquired::Locked(forgotten, _) = acquire(&mut store) else {
            panic!("the lock should be free")
        };
        let started = Instant::now();
        let Acquired::Locked(again, _) = acquire(&mut store) else {
            panic!("the lock should be taken over")
        };
        assert!(started.elapsed() < Duration::from_millis(500));
        assert!(!write(&mut store, &forgotten, b"stale"));
        assert!(write(&mut store, &again, b"fresh"));
        clean(&mut store, &keys);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_free_lock_is_taken_without_a_script() {
        let mut store = store();
        let keys = keys("plain");
        store
            .set(&keys.data, b"v0", Duration::from_secs(60))
            .unwrap();
        let settings = lock_settings(Duration::from_secs(7));
        let (acquired, waited) = acquire_and_read(
            &mut store,
            keys.clone(),
            &settings,
            Some(Duration::from_secs(90)),
        )
        .unwrap();
        let Acquired::Locked(held, data) = acquired else {
            panic!("the lock should be free")
        };
        assert_eq!(
            (data.as_deref(), waited),
            (Some(&b"v0"[..]), Duration::ZERO)
        );
        assert_eq!(
            owner(&store, &keys).as_deref(),
            Some(held.secret.as_bytes())
        );
        let ttl = int(&store, &keys.lock, cmd("PTTL").arg(&keys.lock));
        assert!((6000..=7000).contains(&ttl), "{ttl}");
        let ttl = int(&store, &keys.data, cmd("TTL").arg(&keys.data));
        assert!((85..=90).contains(&ttl), "refreshed: {ttl}");
        assert!(write(&mut store, &held, b"v1"));
        clean(&mut store, &keys);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_short_waiter_never_shortens_the_queue_of_a_long_one() {
        let mut store = store();
        let keys = keys("expiry");
        let holder = lock(&mut store, &keys, Duration::from_secs(30));
        let mut long = another_process(&keys, Duration::from_secs(5));
        long.attempt(&mut store, Duration::from_secs(5), false)
            .unwrap();
        let mut short = another_process(&keys, Duration::from_secs(5));
        short
            .attempt(&mut store, Duration::from_millis(10), false)
            .unwrap();
        for key in [&keys.queue, &keys.waiters] {
            let ttl = int(&store, key, cmd("PTTL").arg(key));
            assert!(ttl > 6000, "{ttl}");
        }
        // A failed wait leaves the queue.
        short.attempt(&mut store, Duration::ZERO, false).unwrap();
        long.attempt(&mut store, Duration::ZERO, false).unwrap();
        for key in [&keys.queue, &keys.waiters] {
            assert_eq!(int(&store, key, cmd("EXISTS").arg(key)), 0);
        }
        release(&mut store, &holder).unwrap();
        clean(&mut store, &keys);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_waiter_that_gives_up_leaves_nothing_behind() {
        let mut store = store();
        let keys = keys("giveup");
        let holder = lock(&mut store, &keys, Duration::from_secs(30));
        let settings = LockSettings {
            retries: Some(3),
            ..lock_settings(Duration::from_secs(5))
        };
        let (outcome, waited) =
            acquire_and_read(&mut store, keys.clone(), &settings, None).unwrap();
        assert!(matches!(outcome, Acquired::Busy(None)));
        assert!(waited >= Duration::from_millis(50), "{waited:?}");
        for key in [&keys.queue, &keys.waiters] {
            assert_eq!(int(&store, key, cmd("EXISTS").arg(key)), 0);
        }
        release(&mut store, &holder).unwrap();
        assert_eq!(owner(&store, &keys), None);
        clean(&mut store, &keys);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_repeated_destroy_leaves_the_next_holders_data() {
        let mut store = store();
        let keys = keys("destroy");
        let first = lock(&mut store, &keys, Duration::from_secs(30));
        destroy_and_release(&mut store, &first).unwrap();
        let second = lock(&mut store, &keys, Duration::from_secs(30));
        store
            .set(&keys.data, b"fresh", Duration::from_secs(60))
            .unwrap();
        // The first destroy's reply was lost; its repeat comes now.
        destroy_and_release(&mut store, &first).unwrap();
        assert_eq!(
            store.get(&keys.data, None).unwrap(),
            Some(b"fresh".to_vec())
        );
        destroy_and_release(&mut store, &second).unwrap();
        assert_eq!(store.get(&keys.data, None).unwrap(), None);
        clean(&mut store, &keys);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_lock_deleted_without_a_hand_over_is_handed_on_by_the_release() {
        let mut store = store();
        let keys = keys("native");
        let holder = lock(&mut store, &keys, Duration::from_secs(30));
        let mut waiter = queue(&mut store, &keys, Duration::from_secs(5));
        // As DELEX or an older release of this extension would: no hand-over.
        store.delete(&keys.lock).unwrap();
        release(&mut store, &holder).unwrap();
        assert_eq!(
            owner(&store, &keys).as_deref(),
            Some(waiter.held.secret.as_bytes())
        );
        let handed = waiter
            .wait_for_hand_over(&mut store, Duration::from_secs(1))
            .unwrap();
        assert_eq!(handed, Some(None));
        release(&mut store, &waiter.into_held()).unwrap();
        clean(&mut store, &keys);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_repeated_write_after_a_lost_reply_counts_as_done() {
        let mut store = store();
        let keys = keys("idempotent");
        let held = lock(&mut store, &keys, Duration::from_secs(10));
        for _ in 0..2 {
            assert!(write(&mut store, &held, b"v1"));
        }
        // Other data after the lock is gone is refused and stores nothing.
        assert!(!write(&mut store, &held, b"v2"));
        assert_eq!(store.get(&keys.data, None).unwrap(), Some(b"v1".to_vec()));
        assert_eq!(owner(&store, &keys), None);
        clean(&mut store, &keys);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_write_can_wait_for_its_replica() {
        let mut cluster = store();
        let keys = keys("acked");
        let ttl = Duration::from_secs(60);
        let mut write = |data: &[u8], replicas| {
            let held = lock(&mut cluster, &keys, Duration::from_secs(10));
            let ack = ReplicaAck {
                replicas,
                timeout: Duration::from_millis(300),
            };
            save_and_release(&mut cluster, Save::Write, &held, data, ttl, Some(ack))
        };
        // Every primary of the test cluster has one replica.
        assert!(write(b"v1", 1).unwrap());
        let err = write(b"v2", 2).unwrap_err().to_string();
        assert!(err.contains("only 1 of 2 replicas"), "{err}");
        let mut check = store();
        assert_eq!(check.get(&keys.data, None).unwrap(), Some(b"v2".to_vec()));
        clean(&mut check, &keys);
    }
}
