//! The session lock protocol on a cluster.
//!
//! Every key of a session's lock shares the data key's slot (see
//! [`LockKeys`]), and every script receives in `KEYS` each key it touches: no
//! script builds a key name, so the scripts run during a slot migration and
//! behind proxies that route by declared keys.
//!
//! - read = take the lock and read the data in one round trip: plain `SET NX`
//!   and `GET` when the lock is free and has no lease, else a Lua call that
//!   takes it or puts the caller in the session's queue (first come, first
//!   served).
//! - write = check-and-write + release in one Lua call: nothing is stored
//!   unless the lock still holds our secret.
//! - Release hands the lock to the longest waiter still waiting: the lock
//!   gets that waiter's secret and TTL, and the session data goes onto the
//!   list `<lock>_NEXT_<releaser's secret>`, in the same call. Each waiter
//!   blocks on the list named after the one ahead of it (the owner, or the
//!   waiter before it in the queue), a name it learns when it queues and the
//!   releaser knows already: its own secret. The waiter's BLPOP returns the
//!   lock and the data.
//!
//! - With a lease, the lock key lives `lock_expire` + the lease (the
//!   backstop), and the holder's watchdog moves its heartbeat
//!   `<lock>_BEAT_<secret>`; the next in line polls it instead of blocking
//!   and breaks the lock once the heartbeat stood still through a lease of
//!   the server's serving (`heartbeat.rs`): a compare-and-set on the holder
//!   and its heartbeat that hands the lock on as a release would.
//!
//! A locked session that changed costs 2 round trips (read, write+release);
//! one that waited, 3 (read+queue, BLPOP, write+release).
//!
//! Every call is safe to repeat after a lost reply or a cluster redirect:
//! each acquisition has a fresh random secret that the scripts recognise, and
//! a write, touch or destroy logs it in `<lock>_DONE` (the last 8 of them)
//! as proof that it landed; the log is also the next holder's fence.
//! The scripts are in `scripts.rs`; `model.rs` checks them and these client
//! steps exhaustively (see there for the invariants).
//! A script stops halfway only on a server fault (OOM, a node dying); what
//! it wrote by then is repeated or recognised by the next call, as each
//! script's comment says.

use std::cell::Cell;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};

use crate::config::NodeAddr;
use crate::keys::{LockKeys, beat_key, done_key};
use crate::lifetime::{Change, Lifetime};
use crate::resp::Decimal;
use crate::script::LuaScript;
use crate::settings::{LockSettings, ReleaseCommand, ReplicaAck};
use crate::stats;
use crate::store::{
    LOG_KEPT_BYTES, LockPoll, LockStore, PlainRead, PlainTake, Reply, whole_millis, whole_seconds,
};
use crate::watchdog::{self, KeysAndArgs, RenewalScript};

pub(crate) mod heartbeat;
#[cfg(test)]
pub(crate) mod model;
mod scripts;

use heartbeat::{Chain, LeaseTimes, Verdict};
#[cfg(test)]
pub(crate) use scripts::SCRIPTS;
use scripts::{
    ACQUIRE_AND_READ, BREAK_LOCK, DESTROY_AND_RELEASE, READ_AND_RENEW, RELEASE, RENEW_LEASE,
    TOUCH_AND_RELEASE, WRITE_AND_RELEASE,
};

/// How long a waiter has to take a lock handed to it before the next one may
/// take it over: a live waiter is blocked already or between two calls, so
/// this passing means it died. Also the longest single BLPOP, so that
/// waiters look for such a dead hand-over at least this often.
const HAND_OVER_TIMEOUT: Duration = Duration::from_millis(1000);
/// The shortest BLPOP: servers check blocking timeouts 10 times a second (at
/// the default hz), so shorter ones would only return late.
const SHORTEST_PIECE: Duration = Duration::from_millis(100);

/// A lock this process holds: its keys, the secret that proves it, and how
/// to release it. No `Debug` outside tests: the secret must never be printed.
#[cfg_attr(test, derive(Clone, Debug, PartialEq, Eq, Hash))]
pub struct HeldLock {
    /// The session's keys, with this holder's (see [`LockKeys::hold`]): the
    /// list its hand-over goes to, which every release declares, its
    /// heartbeat with a lease, and in them its secret.
    pub keys: LockKeys,
    release: ReleaseCommand,
    /// `lock_expire` in ms, as the scripts take it: the lock's TTL without a
    /// lease, and how long a save keeps the log of savers.
    expire_ms: Decimal,
    /// The log of savers (`<lock>_DONE`, empty: none) when the data was
    /// read, `None` if unknown: the write stores only if no save came since.
    fence: Option<Vec<u8>>,
    /// What a save puts in the log of savers: this holder's secret, then the
    /// log as read, cut to [`LOG_KEPT_BYTES`] as the scripts' `log_save_lua`
    /// cuts it (`None`: not read, an older release's hand-over; the script
    /// then reads it). Nobody saves between the read and a save that finds
    /// the lock still ours (without a queue entry, nothing hands it back after
    /// a failover undid the take; with one, a write's fence checks, and a
    /// touch or destroy sends none: see `log_args`), nor before a re-take
    /// (its fence, the log's newest entry, would have changed): the log is
    /// as read, or where it expired, made again by the renewals.
    next_log: Option<Vec<u8>>,
    /// `None` without a lease: the lock key lives for `lock_expire`.
    leased: Option<Leased>,
    /// The session's own lifetime as the acquire script read it; `None` also
    /// when the lock came by a hand-over, which does not carry it.
    pub lifetime: Option<Lifetime>,
    /// The session was missing when read under this lock.
    read_nothing: bool,
    /// The process that took it: a process forked from it must neither save
    /// with it nor release it.
    pid: u32,
    /// The read renewed the data's TTL (early_refresh, by the acquire script
    /// or a hand-over): an unchanged session needs no touch.
    pub renewed: bool,
    /// The lease whose window the holder before showed no heartbeat in,
    /// when this acquisition broke its lock: the request warns.
    pub broke: Option<Duration>,
}

/// What a lock held with a lease keeps.
#[cfg_attr(test, derive(Clone, Debug, PartialEq, Eq, Hash))]
struct Leased {
    lease: Duration,
    /// The lease is renewed, or the lock re-taken, only this long after
    /// `taken_at`.
    lock_expire: Duration,
    /// Before the call that took the lock was sent (for a hand-over, the
    /// attempt before the BLPOP that brought it): never later than the take.
    taken_at: Instant,
    /// The log of savers at the read, which a re-take must find unchanged;
    /// `None` (not known: an older release's hand-over) asks no re-take. A
    /// take made the log last until its `lock_expire`, and the acquire
    /// script made one naming the taker where there was none. Where the read
    /// found none, the log the renewals make, `~<secret>` (see
    /// [`RENEW_LEASE`]; after a plain take, they also make the log last): a
    /// holder whose lease lapsed before its first renewal may have none.
    retake_fence: Option<Vec<u8>>,
}

impl HeldLock {
    /// Calls `call` with the keys every release script declares: the
    /// session's keys, and the list named after this holder's secret, where
    /// its hand-over goes.
    /// With a lease, also its heartbeat, which goes with it.
    fn with_release_keys<R>(&self, call: impl FnOnce(&[&[u8]]) -> R) -> R {
        let beat = self.keys.own_beat();
        let keys: [&[u8]; 8] = [
            &self.keys.data,
            &self.keys.lock,
            self.keys.queue(),
            self.keys.waiters(),
            self.keys.own_list(),
            self.keys.done(),
            self.keys.lifetime(),
            beat.unwrap_or_default(),
        ];
        call(&keys[..if beat.is_some() { 8 } else { 7 }])
    }

    /// Calls `call` with the script and arguments of a save at `now` (see
    /// [`save_and_release`]). A session the lock found missing keeps no
    /// lifetime a leftover key may still hold (phpredis's destroy leaves it):
    /// an id made again starts afresh.
    pub(crate) fn save_call<R>(
        &self,
        save: Save,
        data: &[u8],
        ttl: Duration,
        lifetime: Change,
        now: Instant,
        call: impl FnOnce(&LuaScript, &[&[u8]]) -> R,
    ) -> R {
        let ttl = Decimal::from(whole_seconds(ttl));
        let lifetime = match lifetime {
            Change::Keep if self.read_nothing => Change::Drop,
            lifetime => lifetime,
        }
        .script_arg();
        let secret = self.keys.own_secret();
        let expire_ms = self.expire_ms.as_bytes();
        let retake_ms = self.retake_ms(now);
        match save {
            Save::Write => {
                let fence = self.fence.as_deref().unwrap_or(UNKNOWN_WRITER);
                let args: [&[u8]; 6] = [secret, data, ttl.as_bytes(), expire_ms, fence, &lifetime];
                let (log, len) = self.log_args(true, &retake_ms);
                with_args(&args, &log[..len], |args| call(&WRITE_AND_RELEASE, args))
            }
            Save::Touch => {
                let args: [&[u8]; 5] = [secret, data, ttl.as_bytes(), &lifetime, expire_ms];
                let (log, len) = self.log_args(false, &retake_ms);
                with_args(&args, &log[..len], |args| call(&TOUCH_AND_RELEASE, args))
            }
        }
    }

    /// A save's last arguments (see the scripts' `log_save_lua`): the new log
    /// of savers, `next_log` ('' when not known: the script reads the log);
    /// with a lease, for a re-take, `retake_ms` (see [`Self::retake_ms`]),
    /// whose fence the script takes from the new log. A touch or destroy
    /// (not `fenced`: it compares no fence) of a lock taken after queueing
    /// sends '' and the fence itself: a failover that undid a hand-over can
    /// leave the queue entry, and a later release hand the lock back with
    /// another log than the one read. (A write compares the whole log with
    /// its fence first; a plain take never queued.) Returns them and how many.
    fn log_args<'a>(
        &'a self,
        fenced: bool,
        retake_ms: &'a Option<Decimal>,
    ) -> ([&'a [u8]; 3], usize) {
        let vouched = fenced || self.fence.is_none();
        let next_log = self.next_log.as_deref().filter(|_| vouched);
        let mut args: [&[u8]; 3] = [next_log.unwrap_or_default(), &[], &[]];
        let Some(retake_ms) = retake_ms else {
            return (args, 1);
        };
        args[1] = retake_ms.as_bytes();
        let fence = self.leased.as_ref().and_then(|l| l.retake_fence.as_deref());
        match fence {
            Some(fence) if !vouched => {
                args[2] = fence;
                (args, 3)
            }
            _ => (args, 2),
        }
    }

    /// Calls `call` with the arguments of [`DESTROY_AND_RELEASE`] at `now`.
    pub(crate) fn destroy_call<R>(&self, now: Instant, call: impl FnOnce(&[&[u8]]) -> R) -> R {
        let args: [&[u8]; 2] = [self.keys.own_secret(), self.expire_ms.as_bytes()];
        let retake_ms = self.retake_ms(now);
        let (log, len) = self.log_args(false, &retake_ms);
        with_args(&args, &log[..len], call)
    }

    /// The re-take argument of a save at `now`, with a lease only: what is
    /// left of `lock_expire` in ms, or "0" when no re-take may be asked
    /// (past `lock_expire`, or no fence). Sent with every save, however
    /// soon after the take: a primary that stalls longer than the lease
    /// runs the save after its lock expired (a review found a save sent
    /// within half a lease, without it, refused that way).
    fn retake_ms(&self, now: Instant) -> Option<Decimal> {
        let leased = self.leased.as_ref()?;
        let left = match leased.retake_fence {
            Some(_) => watchdog::ms_left(leased.taken_at, leased.lock_expire, now),
            None => 0,
        };
        Some(Decimal::from(left))
    }

    /// What the watchdog renews this lock's lease with; `None` without one.
    pub fn lease(&self) -> Option<watchdog::Watched<'_>> {
        let leased = self.leased.as_ref()?;
        Some(watchdog::Watched {
            lock_key: &self.keys.lock,
            fence: leased.retake_fence.as_deref(),
            secret: self.keys.own_secret(),
            lease: leased.lease,
            taken_at: leased.taken_at,
            lock_expire: leased.lock_expire,
            script: &RENEWAL,
            lent: None,
        })
    }

    /// What ends the lock when its release never reached the primary, in
    /// the words of a warning: its lease, which is no longer renewed, or
    /// else `lock_expire` from its take.
    pub fn lapse(&self) -> String {
        match &self.leased {
            Some(leased) => format!(
                "its heartbeat no longer moves, so the next waiter takes it over {} ms after it came (rediscluster_session.lock_lease_ms)",
                leased.lease.as_millis()
            ),
            None => format!(
                "it expires within redis.session.lock_expire ({} ms)",
                String::from_utf8_lossy(self.expire_ms.as_bytes())
            ),
        }
    }

    /// Out of the watchdog, before a call that releases the lock: a renewal
    /// answered after it would count a lock lost.
    fn unwatch(&self) {
        if self.leased.is_some() {
            watchdog::unwatch(&self.keys.lock, self.keys.own_secret());
        }
    }

    /// With a lease, this holder's heartbeat key.
    pub fn heartbeat(&self) -> Option<&[u8]> {
        self.keys.own_beat()
    }

    /// Held by the process this one was forked from.
    pub fn inherited(&self) -> bool {
        self.pid != std::process::id()
    }

    /// This lock as a child forked from its holder has it: taken by another
    /// process (the model checker's clients all run in this one).
    #[cfg(test)]
    pub(crate) fn as_forked_child_has_it(&self) -> HeldLock {
        HeldLock {
            pid: std::process::id().wrapping_add(1),
            ..self.clone()
        }
    }

    /// Remembers who wrote last when the data was read under this lock.
    fn read_after(&mut self, writer: Option<Vec<u8>>) {
        let writer = writer.unwrap_or_default();
        self.log_read(Some(&writer));
        if self.leased.is_some() {
            self.retake_after(Some(writer.clone()));
        }
        self.fence = Some(writer);
    }

    /// Learns the log of savers as read under this lock (`None`: not known).
    fn log_read(&mut self, log: Option<&[u8]>) {
        self.next_log = log.map(|log| {
            let kept = &log[..log.len().min(LOG_KEPT_BYTES)];
            let secret = self.keys.own_secret();
            let mut next = Vec::with_capacity(secret.len() + 1 + kept.len());
            next.extend_from_slice(secret);
            if !kept.is_empty() {
                next.push(b' ');
                next.extend_from_slice(kept);
            }
            next
        });
    }

    /// With a lease, what a re-take compares the log of savers with: the
    /// newest entry of `log` as read (`None`: not known), or where there was
    /// none, `~<secret>`, the log renewals make.
    fn retake_after(&mut self, log: Option<Vec<u8>>) {
        if let Some(leased) = &mut self.leased {
            // Made in the log's own buffer, of no other use: no allocation
            // when there was a log.
            leased.retake_fence = log.map(|mut log| {
                match log_head(&log).len() {
                    0 => {
                        log.clear();
                        log.push(b'~');
                        log.extend_from_slice(self.keys.own_secret());
                    }
                    head => log.truncate(head),
                }
                log
            });
        }
    }

    #[cfg(test)]
    pub(crate) fn secret(&self) -> &str {
        std::str::from_utf8(self.keys.own_secret()).expect("secrets are hex digits")
    }
}

/// The newest entry of a log of savers: the fence a re-take compares, as
/// the scripts' `retake_lua` takes it. It names the last save (or the
/// holder that made the log) alone: each save puts a fresh secret there.
/// At most 50 bytes (`~<secret>.<server time>`), within
/// [`LOG_KEPT_BYTES`].
fn log_head(log: &[u8]) -> &[u8] {
    &log[..memchr::memchr(b' ', log).unwrap_or(log.len())]
}

/// What the watchdog renews leases with: [`RENEW_LEASE`], its keys and
/// arguments from [`renewal_keys_and_args`].
pub(crate) static RENEWAL: RenewalScript = RenewalScript {
    lua: &RENEW_LEASE,
    keys_and_args: renewal_keys_and_args,
};

/// Calls `send` with the keys and arguments of a [`RENEW_LEASE`] call: a
/// renewal of `lock`, held with `secret`, whose lease runs `ttl` more (see
/// [`watchdog::renewal_ttl`]) with what is `left` of `lock_expire`; with a `fence`
/// for a re-take, one that keeps the log of savers that fence that long.
/// The heartbeat moves to what is left in ms, which falls from one renewal
/// to the next (the take made it '0'), and lasts as long as the lock's
/// backstop, about. Its reply is 1 while the lock is still this holder's.
fn renewal_keys_and_args(
    lock: &[u8],
    secret: &[u8],
    ttl: Duration,
    fence: Option<&[u8]>,
    left: Duration,
    send: &mut KeysAndArgs,
) {
    let beat = beat_key(lock, secret);
    let left_ms = Decimal::from(whole_millis(left));
    let beat_ms = Decimal::from(whole_millis(left + ttl));
    let beat_args = [secret, left_ms.as_bytes(), beat_ms.as_bytes()];
    let Some(fence) = fence else {
        return send(&[lock, &beat], &beat_args);
    };
    let args = [
        beat_args[0],
        beat_args[1],
        beat_args[2],
        left_ms.as_bytes(),
        fence,
    ];
    send(&[lock, &beat, &done_key(lock)], &args)
}

/// Calls `call` with `args` followed by `more` (the scripts read the
/// absence of the lease's arguments as no lease).
fn with_args<R>(args: &[&[u8]], more: &[&[u8]], call: impl FnOnce(&[&[u8]]) -> R) -> R {
    // On the stack: every script call of the protocol passes here.
    let mut all: [&[u8]; MOST_SCRIPT_ARGS] = [&[]; MOST_SCRIPT_ARGS];
    let len = args.len() + more.len();
    all[..args.len()].copy_from_slice(args);
    all[args.len()..len].copy_from_slice(more);
    call(&all[..len])
}

/// The most arguments a script of the protocol takes (the acquire script: 12).
const MOST_SCRIPT_ARGS: usize = 12;

pub enum Acquired {
    /// The lock is ours; the data was read under it (`None`: no session yet).
    Locked(Box<HeldLock>, Option<Vec<u8>>),
    /// Gave up waiting. The data is there only when `failure_readonly` asked for it.
    Busy(Option<Vec<u8>>),
    /// Did not queue: this many already waited (`max_waiters`). The data as for `Busy`.
    Rejected(Option<Vec<u8>>, u64),
}

/// How many random bytes a secret has.
const SECRET_BYTES: usize = 16;

/// A secret's hex digits.
type Secret = [u8; 2 * SECRET_BYTES];

/// Fills `hex` with random bytes from the OS CSPRNG as hex digits.
fn fill_random_hex(hex: &mut [u8]) -> Result<()> {
    let mut bytes = [0u8; SECRET_BYTES];
    let bytes = &mut bytes[..hex.len() / 2];
    getrandom::fill(bytes).map_err(|err| anyhow!("no OS randomness for the lock secret: {err}"))?;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (pair, &byte) in hex.chunks_exact_mut(2).zip(&*bytes) {
        pair[0] = HEX[usize::from(byte >> 4)];
        pair[1] = HEX[usize::from(byte & 0xf)];
    }
    Ok(())
}

/// How many random bytes of a secret name the thread that took the lock (the
/// acquire script compares that many hex digits, twice as many).
const HOLDER_BYTES: usize = 8;

thread_local! {
    /// This thread's half of every secret it makes, and the process it was
    /// made in: a forked child makes its own.
    static HOLDER: Cell<Option<(u32, [u8; 2 * HOLDER_BYTES])>> = const { Cell::new(None) };
}

/// A secret, new for each acquisition: 8 random bytes naming this thread of
/// this process, then 8 random bytes of its own, as 32 hex digits. A thread
/// runs one request at a time, so a lock that carries this thread's half but
/// not the current secret is one it let go of: released with the reply lost,
/// or its release undone by a failover to a replica that never saw it. The
/// acquire script takes such a lock over at once instead of waiting out its TTL.
fn new_secret() -> Result<Secret> {
    let pid = std::process::id();
    let mut secret = [0; 2 * SECRET_BYTES];
    let (holder, own) = secret.split_at_mut(2 * HOLDER_BYTES);
    match HOLDER.get() {
        Some((made_in, digits)) if made_in == pid => holder.copy_from_slice(&digits),
        _ => {
            let mut digits = [0; 2 * HOLDER_BYTES];
            fill_random_hex(&mut digits)?;
            holder.copy_from_slice(&digits);
            HOLDER.set(Some((pid, digits)));
        }
    }
    fill_random_hex(own)?;
    Ok(secret)
}

/// Calls `call` with [`BREAK_LOCK`], its keys and arguments: a break of the
/// lock `keys` name, held by `owner` whose heartbeat showed `seen`.
pub(crate) fn break_call<R>(
    keys: &LockKeys,
    owner: &str,
    seen: &[u8],
    call: impl FnOnce(&LuaScript, &[&[u8]], &[&[u8]]) -> R,
) -> R {
    let (list, beat) = (keys.next(owner.as_bytes()), keys.beat(owner.as_bytes()));
    call(
        &BREAK_LOCK,
        &[
            &keys.data,
            &keys.lock,
            keys.queue(),
            keys.waiters(),
            &list,
            keys.done(),
            keys.lifetime(),
            &beat,
        ],
        &[owner.as_bytes(), seen],
    )
}

/// What a waiter with a lease keeps across its attempts.
struct Watch {
    /// Its observations of the holder ahead.
    chain: Chain<(String, Vec<u8>)>,
    /// The primary that answered its last poll.
    primary: Option<NodeAddr>,
    /// It broke a lock: the request warns.
    broke: bool,
}

impl Watch {
    fn new(lease: Duration) -> Watch {
        Watch {
            chain: Chain::new(LeaseTimes::of(lease)),
            primary: None,
            broke: false,
        }
    }
}

/// How a piece of watching ended.
enum Watched {
    /// The lock was handed to us: the data.
    Handed(Option<Vec<u8>>),
    /// The holder let go or changed, or a call failed: attempt again now.
    Changed,
    /// Not next in line, or the holder has no heartbeat, or the piece is over.
    Block,
}

/// How long a lock lives from its take or hand-over: `lock_expire`, and with
/// a lease a lease more, the backstop: the lease itself is judged by the
/// waiters, over the time the server served (see [`heartbeat`]); the margin
/// covers a primary whose clock steps forward at a failover.
fn backstop(lock: &LockSettings) -> Duration {
    lock.lease
        .map_or(lock.ttl, |lease| lock.ttl.saturating_add(lease))
}

/// The longest BLPOP of one wait: `lock_wait_time` within
/// [`SHORTEST_PIECE`] and [`HAND_OVER_TIMEOUT`].
fn longest_piece(lock: &LockSettings) -> Duration {
    lock.wait.clamp(SHORTEST_PIECE, HAND_OVER_TIMEOUT)
}

/// One acquisition in progress: the secret it will hold the lock with, and
/// what it learnt while waiting.
#[cfg_attr(test, derive(Clone, Debug, PartialEq, Eq, Hash))]
pub(crate) struct Acquisition {
    held: HeldLock,
    /// The TTL a take, or with a lease a hand-over to this waiter, gives
    /// the lock in ms: its [`backstop`].
    take_ms: Decimal,
    /// The data's TTL in s a read renews it to, 0: none.
    refresh_s: Decimal,
    /// `max_waiters`, 0 for no cap, and whether a rejection reads the data.
    max_waiters: u32,
    read_if_rejected: bool,
    /// In the queue since an earlier attempt.
    queued: bool,
    /// The list it blocks on, named after the one ahead of it in line, once
    /// it learnt of one; until then its own (see [`Self::wait_list`]).
    wait_list: Option<Vec<u8>>,
    /// The owner seen last time, and the list its hand-over went to: a
    /// hand-over still lying there after [`HAND_OVER_TIMEOUT`] was never taken.
    suspect: Option<(String, Vec<u8>)>,
    /// The holder this waiter is next in line behind, as the last attempt
    /// saw: with a lease, it watches that holder's heartbeat.
    next_behind: Option<String>,
}

/// What one attempt found.
pub(crate) enum Attempt {
    Locked(Option<Vec<u8>>),
    Busy(Option<Vec<u8>>),
    /// Busy, and `max_waiters` already wait: not queued. The data when asked for.
    Rejected(Option<Vec<u8>>, u64),
}

impl Acquisition {
    /// An acquisition whose first call is sent after `started`.
    pub(crate) fn new(
        keys: LockKeys,
        lock: &LockSettings,
        refresh: Option<Duration>,
        started: Instant,
    ) -> Result<Self> {
        Ok(Self::with_secret(
            keys,
            lock,
            refresh,
            new_secret()?,
            started,
        ))
    }

    /// An acquisition that will hold the lock with `secret`.
    pub(crate) fn with_secret(
        mut keys: LockKeys,
        lock: &LockSettings,
        refresh: Option<Duration>,
        secret: impl AsRef<[u8]>,
        started: Instant,
    ) -> Self {
        keys.hold(secret.as_ref(), lock.lease.is_some());
        let leased = lock.lease.map(|lease| Leased {
            lease,
            lock_expire: lock.ttl,
            taken_at: started,
            retake_fence: None,
        });
        Acquisition {
            wait_list: None,
            take_ms: Decimal::from(whole_millis(backstop(lock))),
            held: HeldLock {
                keys,
                release: lock.release,
                expire_ms: Decimal::from(whole_millis(lock.ttl)),
                fence: None,
                next_log: None,
                leased,
                lifetime: None,
                read_nothing: false,
                pid: std::process::id(),
                renewed: false,
                broke: None,
            },
            refresh_s: Decimal::from(refresh.map_or(0, whole_seconds)),
            max_waiters: lock.max_waiters.unwrap_or(0),
            read_if_rejected: lock.failure_readonly,
            queued: false,
            suspect: None,
            next_behind: None,
        }
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
        self.taking_at(Instant::now);
        let reply = self.attempt_call(wait, read_if_busy, |keys, args| {
            store.eval(&ACQUIRE_AND_READ, keys, args)
        })?;
        self.attempt_replied(reply, wait)
    }

    /// Calls `call` with the keys and arguments of [`ACQUIRE_AND_READ`] for
    /// an attempt (see [`Self::attempt`]).
    pub(crate) fn attempt_call<R>(
        &self,
        wait: Duration,
        read_if_busy: bool,
        call: impl FnOnce(&[&[u8]], &[&[u8]]) -> R,
    ) -> R {
        let (suspect, suspect_list) = match &self.suspect {
            Some((owner, list)) => (owner.as_str(), list.as_slice()),
            None => ("", self.wait_list()),
        };
        let wait_ms = if wait.is_zero() {
            0
        } else {
            whole_millis(wait)
        }
        .to_string();
        let hand_over_ms = whole_millis(HAND_OVER_TIMEOUT).to_string();
        let max_waiters = self.max_waiters.to_string();
        let keys = &self.held.keys;
        // The log of savers is stretched to the backstop, the TTL a
        // hand-over gives this waiter: a hand-over as late as that carries
        // it as the next holder's fence.
        let lease_args = self
            .held
            .leased
            .as_ref()
            .map(|_| [self.take_ms.as_bytes(); 2]);
        let args: [&[u8]; 10] = [
            keys.own_secret(),
            self.take_ms.as_bytes(),
            self.refresh_s.as_bytes(),
            if read_if_busy { b"1" } else { b"0" },
            wait_ms.as_bytes(),
            hand_over_ms.as_bytes(),
            suspect.as_bytes(),
            if self.queued { b"1" } else { b"0" },
            max_waiters.as_bytes(),
            if self.read_if_rejected { b"1" } else { b"0" },
        ];
        let beat = keys.own_beat();
        let keys: [&[u8]; 9] = [
            &keys.data,
            &keys.lock,
            keys.queue(),
            keys.waiters(),
            self.wait_list(),
            suspect_list,
            keys.done(),
            keys.lifetime(),
            beat.unwrap_or_default(),
        ];
        let keys = &keys[..if beat.is_some() { 9 } else { 8 }];
        let lease_args = lease_args.as_ref().map_or(&[][..], |more| &more[..]);
        with_args(&args, lease_args, |args| call(keys, args))
    }

    /// Marks the call about to take the lock as sent at `at`: a lease is
    /// renewed, or the lock re-taken, within `lock_expire` of the last one.
    pub(crate) fn taking_at(&mut self, at: impl FnOnce() -> Instant) {
        if let Some(leased) = &mut self.held.leased {
            leased.taken_at = at();
        }
    }

    /// What an attempt's reply says; learns whom to wait behind and whom to suspect.
    pub(crate) fn attempt_replied(&mut self, reply: Reply, wait: Duration) -> Result<Attempt> {
        let keys = &self.held.keys;
        let mut items = match reply {
            Reply::Array(items) => items.into_iter(),
            other => bail!("unexpected {} reply to the lock script", other.kind()),
        };
        let status = items.next();
        let data = optional_bytes(items.next())?;
        match status {
            Some(Reply::Int(1)) => {
                self.queued = false;
                self.held.read_after(optional_bytes(items.next())?);
                self.held.lifetime = optional_bytes(items.next())?
                    .as_deref()
                    .and_then(Lifetime::decode);
                self.read(&data, self.refresh_s.as_bytes() != b"0");
                return Ok(Attempt::Locked(data));
            }
            Some(Reply::Int(2)) => {
                let waiting = match items.next() {
                    Some(Reply::Int(n)) => n.unsigned_abs(),
                    _ => 0,
                };
                return Ok(Attempt::Rejected(data, waiting));
            }
            _ => {}
        }
        self.queued = !wait.is_zero();
        let mut secret = || -> Result<Option<String>> {
            Ok(optional_bytes(items.next())?
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
        };
        let (owner, ahead, handed_by) = (secret()?, secret()?, secret()?);
        self.next_behind = owner.clone().filter(|owner| ahead.as_ref() == Some(owner));
        if let Some(ahead) = ahead {
            self.wait_list = Some(keys.next(ahead.as_bytes()));
        }
        self.suspect = owner
            .zip(handed_by)
            .map(|(owner, by)| (owner, keys.next(by.as_bytes())));
        Ok(Attempt::Busy(data))
    }

    /// The lock taken with plain commands (no script) if it is free: the
    /// data, or `None` when it is busy or the slot is moving. Its save needs
    /// no fence: only a hand-over to a queue entry could give a lock this
    /// secret again after a failover undid the take, and this acquisition
    /// has not queued. (A re-take does: with a lease the take reads the log.)
    fn lock_and_read(&mut self, store: &mut impl LockStore) -> Result<Option<Option<Vec<u8>>>> {
        let read = store.lock_and_read(&self.plain_take())?;
        Ok(read.map(|read| self.plain_read(read)))
    }

    /// The plain take's pipeline for this acquisition.
    pub(crate) fn plain_take(&self) -> PlainTake<'_> {
        let held = &self.held;
        PlainTake {
            lock: &held.keys.lock,
            secret: held.keys.own_secret(),
            lock_ms: self.take_ms.as_bytes(),
            data: &held.keys.data,
            log: held.keys.done(),
            beat: held.keys.own_beat(),
        }
    }

    /// What the plain take read: the session.
    pub(crate) fn plain_read(&mut self, read: PlainRead) -> Option<Vec<u8>> {
        self.held.log_read(Some(&read.log));
        self.held.retake_after(Some(read.log));
        self.read(&read.data, false);
        read.data
    }

    /// As the next in line behind a holder (see [`Self::attempt_replied`]),
    /// watches its heartbeat until `until` (see [`heartbeat`]): polls the
    /// lock, the heartbeat and the list its hand-over comes to every half
    /// gap, and breaks the lock once the chain says so. `Block` when it
    /// is not next in line or the holder has no heartbeat (the caller blocks
    /// for the rest of the piece, or the piece is over); `Changed` when the
    /// holder let go or changed, or a call failed or was redirected (the
    /// next attempt follows).
    fn watch_holder(
        &mut self,
        store: &mut impl LockStore,
        watch: &mut Watch,
        until: Instant,
    ) -> Watched {
        let Some(owner) = self.next_behind.clone() else {
            return Watched::Block;
        };
        let beat = self.held.keys.beat(owner.as_bytes());
        let half_gap = watch.chain.times().gap / 2;
        let mut pause = half_gap;
        while Instant::now() < until {
            let poll = LockPoll {
                list: self.wait_list(),
                lock: &self.held.keys.lock,
                beat: &beat,
            };
            let Ok(Some(polled)) = store.poll_lock(&poll, pause) else {
                watch.chain.interrupted();
                return Watched::Changed;
            };
            pause = half_gap;
            if polled.pushed.is_some()
                && let Ok(Some(data)) = self.popped(polled.pushed)
            {
                return Watched::Handed(data);
            }
            // A new primary for the slot: its first replies start the grace.
            if watch.primary.is_some() && watch.primary != polled.primary {
                watch.chain.interrupted();
            }
            watch.primary = polled.primary;
            if polled.owner.as_deref() != Some(owner.as_bytes()) {
                return Watched::Changed;
            }
            let Some(seen) = polled.beat else {
                watch.chain.observe(polled.sent, polled.replied, None);
                return Watched::Block;
            };
            let seen = (owner.clone(), seen);
            if let Verdict::Break(seen) =
                watch.chain.observe(polled.sent, polled.replied, Some(seen))
                && let Ok(true) = self.break_lock(store, &seen.0, &seen.1)
            {
                watch.broke = true;
                stats::lock_broken();
                // The hand-over is on our list now: fetch it at once.
                pause = Duration::ZERO;
            }
        }
        Watched::Block
    }

    /// Breaks the lock of `owner` if its heartbeat still shows `seen` (see
    /// [`BREAK_LOCK`]): whether it did.
    fn break_lock(&self, store: &mut impl LockStore, owner: &str, seen: &[u8]) -> Result<bool> {
        let reply = break_call(&self.held.keys, owner, seen, |script, keys, args| {
            store.eval(script, keys, args)
        })?;
        Ok(reply == Reply::Int(1))
    }

    /// The holder this waiter is next in line behind, as its last attempt saw.
    #[cfg(test)]
    pub(crate) fn next_behind(&self) -> Option<&str> {
        self.next_behind.as_deref()
    }

    /// Blocks up to `timeout` for the lock to be handed to us: the data if it
    /// was. A push meant for another waiter (one that blocked on a list whose
    /// name it had not yet learnt was stale) is dropped: that waiter finds
    /// the lock its own at its next attempt.
    pub(crate) fn wait_for_hand_over(
        &mut self,
        store: &mut impl LockStore,
        timeout: Duration,
    ) -> Result<Option<Option<Vec<u8>>>> {
        let pushed = store.pop_wait(self.wait_list(), timeout)?;
        self.popped(pushed)
    }

    /// The list a waiter blocks on.
    pub(crate) fn wait_list(&self) -> &[u8] {
        self.wait_list
            .as_deref()
            .unwrap_or(self.held.keys.own_list())
    }

    /// What a wait for a hand-over popped (`None`: nothing in time): the
    /// data if the lock is now ours.
    pub(crate) fn popped(&mut self, pushed: Option<Vec<u8>>) -> Result<Option<Option<Vec<u8>>>> {
        let Some(pushed) = pushed else {
            return Ok(None);
        };
        let (target, writer, data) = handed_over(&pushed)?;
        if target != self.held.keys.own_secret() {
            return Ok(None);
        }
        self.queued = false;
        self.held.fence = writer.map(<[u8]>::to_vec);
        self.held.log_read(writer);
        if self.held.leased.is_some() {
            self.held.retake_after(writer.map(<[u8]>::to_vec));
        }
        self.read(&data, self.refresh_s.as_bytes() != b"0");
        Ok(Some(data))
    }

    /// What the lock's holder read (`None`: the session was missing), and
    /// whether the read renewed the TTL.
    pub(crate) fn read(&mut self, data: &Option<Vec<u8>>, renewed: bool) {
        self.held.read_nothing = data.is_none();
        self.held.renewed = renewed && data.is_some();
    }

    pub(crate) fn into_held(self) -> HeldLock {
        self.held
    }
}

/// Takes the lock and reads the data, waiting while it is busy for at most
/// `lock_retries` × `lock_wait_time` in all (or forever), by the wall clock.
/// A waiter blocks on its own list in pieces of `lock_wait_time`, within
/// [`SHORTEST_PIECE`] and [`HAND_OVER_TIMEOUT`] (with a lease, pieces of
/// the latter, and the next in line polls through them instead to watch
/// the holder's heartbeat: [`Acquisition::watch_holder`]), keeping its
/// place in the queue. Between pieces it looks for a lock that came free without a
/// hand-over (a holder that died, DELEX, an older release of this extension)
/// and for a hand-over that died on the way. Also returns how long it waited
/// (zero when the lock was free). With `plain_first` it tries plain `SET NX`
/// and `GET` first, a fraction of a script's server time; a busy lock costs
/// that try one round trip, so a worker that met contention last time
/// queues by script straight away.
pub fn acquire_and_read(
    store: &mut impl LockStore,
    keys: LockKeys,
    lock: &LockSettings,
    refresh: Option<Duration>,
    plain_first: bool,
) -> Result<(Acquired, Duration)> {
    let started = Instant::now();
    let mut acquisition = Acquisition::new(keys, lock, refresh, started)?;
    if plain_first {
        match acquisition.lock_and_read(store) {
            Ok(Some(data)) => {
                stats::lock_attempt(true, Duration::ZERO);
                return Ok((
                    Acquired::Locked(Box::new(acquisition.into_held()), data),
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
    let mut watch = lock.lease.map(Watch::new);
    // With a lease, pieces of a second: the next in line spends them
    // polling, and a script between them would only add to its calls.
    let longest_piece = match watch {
        Some(_) => HAND_OVER_TIMEOUT,
        None => longest_piece(lock),
    };
    let mut waited = false;
    let mut outcome = loop {
        let now = Instant::now();
        let remaining = deadline.map(|deadline| deadline.saturating_duration_since(now));
        let last = remaining.is_some_and(|remaining| remaining.is_zero());
        let piece = remaining.map_or(longest_piece, |r| r.min(longest_piece));
        let read_if_busy = last && lock.failure_readonly;
        let queue_for = if last { Duration::ZERO } else { piece };
        // A lock this attempt finds ours was taken by it, or handed over
        // since the one before (whose send time the lease counts from).
        match acquisition.attempt(store, queue_for, read_if_busy) {
            Ok(Attempt::Locked(data)) => {
                break Acquired::Locked(Box::new(acquisition.into_held()), data);
            }
            Ok(Attempt::Busy(data)) if last => break Acquired::Busy(data),
            Ok(Attempt::Busy(_)) => waited = true,
            Ok(Attempt::Rejected(data, waiting)) => break Acquired::Rejected(data, waiting),
            Err(err) => {
                // We may be queued, or hold a lock handed over with the reply
                // lost: give it on rather than leave it to its TTL.
                let _ = release(store, &acquisition.held);
                return Err(err);
            }
        }
        // No hand-over, or a reply lost on the way: the next attempt finds
        // the lock ours if it was handed over.
        let piece_ends = Instant::now() + piece;
        if let Some(watch) = &mut watch {
            match acquisition.watch_holder(store, watch, piece_ends) {
                Watched::Handed(data) => {
                    break Acquired::Locked(Box::new(acquisition.into_held()), data);
                }
                Watched::Changed => continue,
                Watched::Block => {}
            }
        }
        let rest = piece_ends.saturating_duration_since(Instant::now());
        if !rest.is_zero()
            && let Ok(Some(data)) = acquisition.wait_for_hand_over(store, rest)
        {
            break Acquired::Locked(Box::new(acquisition.into_held()), data);
        }
    };
    if let (Acquired::Locked(held, _), Some(Watch { broke: true, .. })) = (&mut outcome, &watch) {
        held.broke = lock.lease;
    }
    let waited = if waited {
        started.elapsed()
    } else {
        Duration::ZERO
    };
    match outcome {
        Acquired::Rejected(..) => stats::waiter_rejected(),
        _ => stats::lock_attempt(matches!(outcome, Acquired::Locked(..)), waited),
    }
    Ok((outcome, waited))
}

/// Has the watchdog renew the lease of `held`, just taken on `store` (see
/// [`watchdog::watch`]): nothing without a lease, or on a store of tests. An
/// error when the watchdog's thread cannot start: the lock then lives one lease.
pub fn watch(store: &impl LockStore, held: &HeldLock) -> std::io::Result<()> {
    let Some(mut lease) = held.lease() else {
        return Ok(());
    };
    lease.lent = store.lend_connection(&held.keys.lock);
    match store.renewal_config() {
        Some(config) => watchdog::watch(config, lease),
        None => Ok(()),
    }
}

/// Starts the lease watchdog's thread ahead of the first lock (see
/// [`watchdog::start`]).
pub fn start_watchdog() -> std::io::Result<()> {
    watchdog::start(&RENEWAL)
}

/// The secret a hand-over is for, the log of savers it names (`None` from
/// the previous release) and the data.
type HandOver<'a> = (&'a [u8], Option<&'a [u8]>, Option<Vec<u8>>);

/// A hand-over as pushed: "F<ms>:<secret>:<log of savers>:" then "1" + data,
/// or "0" for no session; the previous release pushed "H<ms>:<secret>:" and
/// the rest. Returns the secret it is for, the log of savers (`None` from
/// the previous release) and the data.
fn handed_over(pushed: &[u8]) -> Result<HandOver<'_>> {
    let fields = if pushed.first() == Some(&b'F') { 4 } else { 3 };
    let mut parts = pushed.splitn(fields, |&byte| byte == b':');
    let (Some([b'H' | b'F', ..]), Some(target)) = (parts.next(), parts.next()) else {
        bail!("unexpected hand-over in the lock queue");
    };
    let writer = if fields == 4 { parts.next() } else { None };
    match parts.next() {
        Some([b'1', data @ ..]) => Ok((target, writer, Some(data.to_vec()))),
        Some([b'0']) => Ok((target, writer, None)),
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

/// What a release script said: whether the lock was ours, and the session's
/// lifetime that a save applied or a destroy deleted.
#[derive(Debug, PartialEq, Eq)]
pub struct Released {
    pub ours: bool,
    pub lifetime: Option<Lifetime>,
}

/// Runs a release script: what it said (see [`Released`]), and how many
/// replicas acknowledged it when `ack` asked.
fn run_release(
    store: &mut impl LockStore,
    script: &LuaScript,
    held: &HeldLock,
    args: &[&[u8]],
    ack: Option<ReplicaAck>,
) -> Result<(Released, Option<u32>)> {
    let (reply, acked) = held.with_release_keys(|keys| match ack {
        Some(ack) => {
            let (reply, acked) = store.eval_acked(script, keys, args, ack)?;
            Ok::<_, anyhow::Error>((reply, Some(acked)))
        }
        None => Ok((store.eval(script, keys, args)?, None)),
    })?;
    Ok((released(reply)?, acked))
}

/// A release script's reply: 1 or 0, or {1, lifetime} from a save or destroy
/// of a session that has one.
fn released(reply: Reply) -> Result<Released> {
    let (ours, lifetime) = match reply {
        Reply::Int(ours) => (ours, None),
        Reply::Array(items) => {
            let mut items = items.into_iter();
            match items.next() {
                Some(Reply::Int(ours)) => (ours, optional_bytes(items.next())?),
                _ => bail!("unexpected reply to the lock script"),
            }
        }
        other => bail!("unexpected {} reply to the lock script", other.kind()),
    };
    Ok(Released {
        ours: ours == 1,
        lifetime: lifetime.as_deref().and_then(Lifetime::decode),
    })
}

/// How PHP saves a locked session at the end of a request.
#[derive(Clone, Copy)]
pub enum Save {
    /// write: store the data only while the lock is ours.
    Write,
    /// update_timestamp: refresh the TTL, rewrite a vanished key while the lock is ours.
    Touch,
}

/// The write script's fence when the last writer is unknown (a hand-over from
/// the previous release): no secret looks like it.
const UNKNOWN_WRITER: &[u8] = b"?";

/// Saves (for `ttl`, or the session's own lifetime after `lifetime`) and
/// releases the lock in one call; not `ours` if the lock was no longer ours
/// (then a write stored nothing). With `ack`, a write also waits, in the same
/// round trip, for that many replicas, and fails if fewer have it in time.
pub fn save_and_release(
    store: &mut impl LockStore,
    save: Save,
    held: &HeldLock,
    data: &[u8],
    ttl: Duration,
    lifetime: Change,
    ack: Option<ReplicaAck>,
) -> Result<Released> {
    held.unwatch();
    let ack = ack.filter(|_| matches!(save, Save::Write));
    let (released, acked) =
        held.save_call(save, data, ttl, lifetime, Instant::now(), |script, args| {
            run_release(store, script, held, args, ack)
        })?;
    if released.ours {
        stats::released(ReleaseCommand::Eval);
        if let (Some(ack), Some(acked)) = (ack, acked) {
            check_replicas(STORED, ack, acked)?;
        }
    }
    Ok(released)
}

/// What a write left on the primary, for [`check_replicas`].
pub const STORED: &str = "Session data stored";
/// What a destroy did, for [`check_replicas`].
pub const DESTROYED: &str = "Session destroyed";

/// An error unless at least `ack.replicas` replicas acknowledged what was
/// `done` (see [`STORED`], [`DESTROYED`]).
pub fn check_replicas(done: &str, ack: ReplicaAck, acked: u32) -> Result<()> {
    if acked < ack.replicas {
        bail!(
            "{done} on the primary, but only {acked} of {} replicas had it within {} ms (rediscluster_session.write_replicas)",
            ack.replicas,
            ack.timeout.as_millis()
        );
    }
    Ok(())
}

/// Deletes the data and its lifetime and releases the lock in one call; not
/// `ours` if the lock was no longer ours (then nothing was deleted). With
/// `ack`, also how many replicas had the deletion, as for a write.
pub fn destroy_and_release(
    store: &mut impl LockStore,
    held: &HeldLock,
    ack: Option<ReplicaAck>,
) -> Result<(Released, Option<u32>)> {
    held.unwatch();
    let (released, acked) = held.destroy_call(Instant::now(), |args| {
        run_release(store, &DESTROY_AND_RELEASE, held, args, ack)
    })?;
    if released.ours {
        stats::released(ReleaseCommand::Eval);
    }
    Ok((released, acked))
}

/// Without a lock, with early_refresh: the data and its lifetime key's value,
/// both renewed by the session's own lifetime (`ttl` without one), in one
/// call: GETEX alone would cut a longer lifetime down to `ttl`.
pub fn read_and_renew(
    store: &mut impl LockStore,
    key: &[u8],
    lifetime_key: &[u8],
    ttl: Duration,
) -> Result<crate::store::DataAndLifetime> {
    let seconds = whole_seconds(ttl).to_string();
    let reply = store.eval(&READ_AND_RENEW, &[key, lifetime_key], &[seconds.as_bytes()])?;
    let Reply::Array(items) = reply else {
        bail!("unexpected {} reply to the read script", reply.kind());
    };
    let mut items = items.into_iter();
    Ok((optional_bytes(items.next())?, optional_bytes(items.next())?))
}

/// Releases the lock, handing it on to the longest waiter. DELEX or DELIFEQ,
/// when configured, delete it in one command and say in the same round trip
/// whether anyone waits; only then does Lua hand it on. Servers without
/// them fall back to Lua (remembered per cluster). Returns whether the lock
/// was still ours.
pub fn release(store: &mut impl LockStore, held: &HeldLock) -> Result<bool> {
    held.unwatch();
    let keys = &held.keys;
    let native = store.delete_if_equal(
        &keys.lock,
        held.keys.own_secret(),
        held.release,
        keys.queue(),
        held.heartbeat(),
    )?;
    match native {
        Some((true, 0)) => {
            stats::released(held.release);
            return Ok(true);
        }
        Some((true, _)) => stats::released(held.release),
        Some((false, _)) => {}
        None if held.release != ReleaseCommand::Eval => stats::release_fell_back(),
        None => {}
    }
    let deleted = matches!(native, Some((true, _)));
    let (Released { ours, .. }, _) =
        run_release(store, &RELEASE, held, &[held.keys.own_secret()], None)?;
    if ours {
        stats::released(ReleaseCommand::Eval);
    }
    Ok(deleted || ours)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Polled;
    use std::thread::sleep;

    #[test]
    fn secrets_are_fresh_hex_with_the_threads_half_first() {
        const HOLDER_DIGITS: usize = 2 * HOLDER_BYTES;
        let (a, b) = (new_secret().unwrap(), new_secret().unwrap());
        assert_eq!(a.len(), 32);
        assert!(a.iter().all(u8::is_ascii_hexdigit));
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
    fn a_re_take_compares_the_newest_entry_of_the_log_which_a_plain_take_reads_whole() {
        use crate::store::LOG_KEPT_LAST;
        assert_eq!(LOG_KEPT_LAST, (LOG_KEPT_BYTES - 1).to_string().as_bytes());
        let secret = String::from_utf8(new_secret().unwrap().to_vec()).unwrap();
        // The longest entry: a scripted take's mark, with TIME's largest reading.
        let longest = format!("~{secret}.{}{}", u32::MAX, 999_999);
        assert!(longest.len() < LOG_KEPT_BYTES, "{}", longest.len());
        let log = format!("{longest}{}", format!(" {secret}").repeat(7));
        assert!(log.len() > LOG_KEPT_BYTES);
        assert_eq!(
            log_head(&log.as_bytes()[..LOG_KEPT_BYTES]),
            longest.as_bytes()
        );
        assert_eq!(log_head(b""), b"");
    }

    #[test]
    fn hand_over_elements() {
        let parse = |pushed: &[u8]| {
            handed_over(pushed)
                .map(|(target, writer, data)| (target.to_vec(), writer.map(<[u8]>::to_vec), data))
        };
        let (ab, data) = (b"ab".to_vec(), Some(b"data".to_vec()));
        assert_eq!(
            parse(b"F17:ab:cd:1data").unwrap(),
            (ab.clone(), Some(b"cd".to_vec()), data.clone())
        );
        assert_eq!(
            parse(b"F17:ab::0").unwrap(),
            (ab.clone(), Some(Vec::new()), None)
        );
        assert_eq!(
            parse(b"F17:ab:cd:1a:b").unwrap(),
            (ab.clone(), Some(b"cd".to_vec()), Some(b"a:b".to_vec()))
        );
        // The previous release's pushes: no last writer.
        assert_eq!(parse(b"H17:ab:1data").unwrap(), (ab.clone(), None, data));
        assert_eq!(
            parse(b"H17:ab:1a:b").unwrap(),
            (ab.clone(), None, Some(b"a:b".to_vec()))
        );
        assert_eq!(
            parse(b"H17:ab:1").unwrap(),
            (ab.clone(), None, Some(Vec::new()))
        );
        assert_eq!(parse(b"H17:ab:0").unwrap(), (ab, None, None));
        for bad in [
            &b"1data"[..],
            b"H17",
            b"",
            b"H1:ab:2",
            b"X1:ab:1",
            b"F1:ab:1data",
            b"F1:ab:cd:2",
        ] {
            assert!(parse(bad).is_err());
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
        /// The secret of the last attempt.
        secret: Vec<u8>,
    }

    impl LockStore for AlwaysBusy {
        fn eval(&mut self, script: &LuaScript, _: &[&[u8]], args: &[&[u8]]) -> Result<Reply> {
            if script.source() != ACQUIRE_AND_READ.source() {
                // The release after an error, or a release: nothing to do.
                return Ok(Reply::Int(0));
            }
            self.attempts
                .push(args.iter().map(|arg| arg.to_vec()).collect());
            self.secret = args[0].to_vec();
            let data = match args[3] {
                b"1" => Reply::Data(b"stale".to_vec()),
                _ => Reply::Nil,
            };
            // Busy: the owner, the waiter ahead, and who handed the owner the lock.
            let name = |name: &[u8]| Reply::Data(name.to_vec());
            Ok(Reply::Array(vec![
                Reply::Int(0),
                data,
                name(b"owner"),
                name(b"ahead"),
                name(b"releaser"),
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
        fn lock_and_read(&mut self, _: &PlainTake) -> Result<Option<PlainRead>> {
            self.plain_tries += 1;
            Ok(None)
        }
        fn poll_lock(&mut self, _: &LockPoll, _: Duration) -> Result<Option<Polled>> {
            unreachable!("no lease")
        }
        fn pop_wait(&mut self, _: &[u8], timeout: Duration) -> Result<Option<Vec<u8>>> {
            self.waits.push(timeout);
            sleep(self.wait_takes.min(timeout));
            let secret = String::from_utf8_lossy(&self.secret).into_owned();
            Ok(self
                .hand_over
                .take()
                .map(|body| [format!("F5:{secret}::").as_bytes(), &body].concat()))
        }
        fn delete_if_equal(
            &mut self,
            _: &[u8],
            _: &[u8],
            _: ReleaseCommand,
            _: &[u8],
            _: Option<&[u8]>,
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
            max_waiters: None,
            lease: None,
        }
    }

    fn busy(wait_takes: Duration) -> AlwaysBusy {
        AlwaysBusy {
            plain_tries: 0,
            attempts: Vec::new(),
            waits: Vec::new(),
            wait_takes,
            hand_over: None,
            secret: Vec::new(),
        }
    }

    fn acquire(store: &mut AlwaysBusy, lock: &LockSettings) -> Acquired {
        let keys = LockKeys::new(b"k").unwrap();
        acquire_and_read(store, keys, lock, None, true).unwrap().0
    }

    #[test]
    fn a_hand_over_brings_the_lock_and_the_data() {
        let lock = settings(Some(3), false, Duration::from_millis(50));
        for (pushed, expected) in [(&b"1data"[..], Some(b"data".to_vec())), (b"0", None)] {
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
    fn a_caller_that_met_contention_queues_by_script_first() {
        let lock = settings(Some(1), false, Duration::from_millis(1));
        let mut store = busy(Duration::ZERO);
        let keys = LockKeys::new(b"k").unwrap();
        let (outcome, waited) =
            acquire_and_read(&mut store, keys.clone(), &lock, None, true).unwrap();
        assert!(matches!(outcome, Acquired::Busy(None)));
        assert_eq!(store.plain_tries, 1);
        assert!(!waited.is_zero(), "it says it waited");
        acquire_and_read(&mut store, keys, &lock, None, false).unwrap();
        assert_eq!(store.plain_tries, 1, "no plain try when told so");
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
    use crate::store::cluster_tests::{int, node, owners, store};
    use crate::store::{ClusterStore, SessionStore};
    use redis::cmd;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::thread::sleep;

    fn lock_settings(ttl: Duration) -> LockSettings {
        LockSettings {
            ttl,
            wait: Duration::from_millis(20),
            retries: Some(5),
            failure_readonly: false,
            release: ReleaseCommand::Eval,
            wait_notice: None,
            max_waiters: None,
            lease: None,
        }
    }

    /// The keys of a session of this test process.
    fn leased_settings(lock_expire: Duration, lease: Duration) -> LockSettings {
        LockSettings {
            lease: Some(lease),
            ..lock_settings(lock_expire)
        }
    }

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

    /// A secret of another process (not this thread's half).
    fn other_secret() -> Secret {
        let mut secret = [0; 2 * SECRET_BYTES];
        fill_random_hex(&mut secret).unwrap();
        secret
    }

    /// An acquisition with a secret of another process: the tests play
    /// several processes in one thread.
    fn another_process(keys: &LockKeys, ttl: Duration) -> Acquisition {
        let secret = other_secret();
        Acquisition::with_secret(
            keys.clone(),
            &lock_settings(ttl),
            None,
            secret,
            Instant::now(),
        )
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
            Change::Keep,
            None,
        )
        .unwrap()
        .ours
    }

    fn owner(store: &ClusterStore, keys: &LockKeys) -> Option<Vec<u8>> {
        match store.run(&keys.lock, cmd("GET").arg(&keys.lock)).unwrap() {
            Reply::Data(owner) => Some(owner),
            _ => None,
        }
    }

    fn clean(store: &mut ClusterStore, keys: &LockKeys) {
        for key in [
            &keys.data[..],
            &keys.lock,
            keys.queue(),
            keys.waiters(),
            keys.done(),
            keys.lifetime(),
        ] {
            store.delete(&[key]).unwrap();
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
        assert_eq!(int(&store, keys.queue(), cmd("ZCARD").arg(keys.queue())), 2);

        // Each release hands the lock to the next in line, with that waiter's TTL.
        let mut hand_over = |from: &HeldLock, to: Acquisition, ttl_ms, data: &[u8]| {
            assert!(write(&mut store, from, data));
            assert_eq!(
                owner(&store, &keys).as_deref(),
                Some(to.held.secret().as_bytes())
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
        for key in [&keys.queue(), &keys.waiters()] {
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
        let wake = keys.next(holder.secret().as_bytes());
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
        let wake = keys.next(holder.secret().as_bytes());
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
            Some(dead.held.secret().as_bytes())
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
        let wake = keys.next(holder.secret().as_bytes());
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
            Some(first.held.secret().as_bytes())
        );
        let handed = first.wait_for_hand_over(&mut store, Duration::from_secs(1));
        assert_eq!(handed.unwrap(), Some(Some(b"v1".to_vec())));
        assert!(write(&mut store, &first.into_held(), b"v2"));
        assert_eq!(
            owner(&store, &keys).as_deref(),
            Some(second.held.secret().as_bytes())
        );
        release(&mut store, &second.into_held()).unwrap();
        clean(&mut store, &keys);
    }

    fn info(addr: &str) -> String {
        cmd("INFO")
            .arg("replication")
            .query(&mut node(addr))
            .unwrap()
    }

    /// Promotes the replica of `key`'s slot and waits until it owns the slot
    /// and the old primary replicates from it. A manual failover whose
    /// handshake a loaded machine stalls is asked again with FORCE, then
    /// TAKEOVER: the callers made the replica catch up (WAIT) first.
    fn fail_over(key: &[u8]) {
        let started = Instant::now();
        let in_time = || assert!(started.elapsed() < Duration::from_secs(60), "no failover");
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
        let mut failover = cmd("CLUSTER");
        failover.arg("FAILOVER");
        while owners(key).0 == primary || !info(&replica).contains("state=online") {
            in_time();
            // A failover that did not start in time is asked for again, harder.
            if asked.is_none_or(|at: Instant| at.elapsed() > Duration::from_secs(5)) {
                let waited = started.elapsed();
                let mut ask = failover.clone();
                if waited > Duration::from_secs(25) {
                    ask.arg("TAKEOVER");
                } else if waited > Duration::from_secs(10) {
                    ask.arg("FORCE");
                }
                let _: redis::RedisResult<()> = ask.query(&mut node(&replica));
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
        let _ = store.run(&keys.lock, cmd("WAIT").arg(1).arg(1000));
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
    fn a_lock_this_thread_let_go_of_is_taken_over_at_once() {
        let keys = keys("letgo");
        let settings = LockSettings {
            retries: Some(1),
            ..lock_settings(Duration::from_secs(30))
        };
        let acquire = |store: &mut ClusterStore| {
            acquire_and_read(store, keys.clone(), &settings, None, true)
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
    fn a_session_keeps_its_own_lifetime_across_saves() {
        let mut store = store();
        let keys = keys("lifetime");
        let gc = Duration::from_secs(60);
        let pttl = |store: &ClusterStore, key: &[u8]| int(store, key, cmd("PTTL").arg(key));
        // A locked request that saves this way: what its read found, what its save said.
        let request = |store: &mut ClusterStore, save: Save, change: Change| {
            let held = lock(store, &keys, Duration::from_secs(30));
            let released = save_and_release(store, save, &held, b"v", gc, change, None).unwrap();
            assert!(released.ours);
            (held.lifetime, released.lifetime)
        };
        let both_expire_together = |store: &ClusterStore| {
            let (data, life) = (pttl(store, &keys.data), pttl(store, keys.lifetime()));
            assert!(
                (data - life).abs() < 100,
                "data {data} ms, lifetime {life} ms"
            );
            data
        };
        let week = Lifetime::Sliding(Duration::from_secs(7 * 86400));
        assert_eq!(
            request(&mut store, Save::Write, Change::Set(week)),
            (None, Some(week))
        );
        assert!(both_expire_together(&store) > 6 * 86400 * 1000);
        // Later requests keep it, a touch renews by it.
        store
            .run(&keys.data, cmd("PEXPIRE").arg(&keys.data).arg(1000))
            .unwrap();
        assert_eq!(
            request(&mut store, Save::Touch, Change::Keep),
            (Some(week), Some(week))
        );
        assert!(both_expire_together(&store) > 6 * 86400 * 1000);
        // A fixed end, whatever comes after.
        let end = Lifetime::Until(crate::lifetime::unix_now_ms() + 5000);
        assert_eq!(
            request(&mut store, Save::Write, Change::Set(end)),
            (Some(week), Some(end))
        );
        assert_eq!(
            request(&mut store, Save::Write, Change::Keep),
            (Some(end), Some(end))
        );
        assert!((3000..=5000).contains(&both_expire_together(&store)));
        // Dropped: gc_maxlifetime again, no lifetime key.
        assert_eq!(
            request(&mut store, Save::Touch, Change::Drop),
            (Some(end), None)
        );
        assert!((55_000..=60_000).contains(&pttl(&store, &keys.data)));
        assert_eq!(
            int(&store, keys.lifetime(), cmd("EXISTS").arg(keys.lifetime())),
            0
        );
        // A lifetime key phpredis's destroy left behind is not inherited.
        store.set(keys.lifetime(), &week.encode(), gc).unwrap();
        store.delete(&[&keys.data]).unwrap();
        assert_eq!(request(&mut store, Save::Write, Change::Keep), (None, None));
        assert_eq!(
            int(&store, keys.lifetime(), cmd("EXISTS").arg(keys.lifetime())),
            0
        );
        // A destroy takes it with the data, and says what it was.
        request(&mut store, Save::Write, Change::Set(week));
        let held = lock(&mut store, &keys, Duration::from_secs(30));
        let (destroyed, _) = destroy_and_release(&mut store, &held, None).unwrap();
        assert_eq!(
            destroyed,
            Released {
                ours: true,
                lifetime: Some(week)
            }
        );
        for key in [&keys.data[..], keys.lifetime()] {
            assert_eq!(int(&store, key, cmd("EXISTS").arg(key)), 0);
        }
        clean(&mut store, &keys);
    }

    /// A waiter's settings: a lease of 1 s (the default), waiting up to `wait`.
    fn waiting_with_a_lease(wait: Duration) -> LockSettings {
        LockSettings {
            wait: Duration::from_millis(1000),
            retries: Some(wait.as_secs().max(1)),
            ..leased_settings(Duration::from_secs(30), Duration::from_secs(1))
        }
    }

    /// Takes the lock as another process would, with `lease` (none: lease 0).
    fn foreign_holder(
        store: &mut ClusterStore,
        keys: &LockKeys,
        lease: Option<Duration>,
    ) -> HeldLock {
        let mut holder = match lease {
            Some(lease) => leased_process(keys, Duration::from_secs(30), lease),
            None => another_process(keys, Duration::from_secs(30)),
        };
        assert!(take_plainly(store, &mut holder).is_some(), "a free lock");
        holder.into_held()
    }

    /// This process's count of locks its waiters broke.
    fn locks_broken() -> u64 {
        match stats::snapshot()
            .into_iter()
            .find(|(name, _)| *name == "locks_broken")
        {
            Some((_, stats::Stat::Count(count))) => count,
            _ => panic!("no locks_broken counter"),
        }
    }

    /// This thread waits for the lock with a lease: what it got, and when.
    fn wait_with_a_lease(
        store: &mut ClusterStore,
        keys: &LockKeys,
        wait: Duration,
    ) -> (Acquired, Duration) {
        let started = Instant::now();
        let settings = waiting_with_a_lease(wait);
        let (acquired, _) = acquire_and_read(store, keys.clone(), &settings, None, false).unwrap();
        (acquired, started.elapsed())
    }

    /// This thread waits with a lease of 1 s behind a dead holder (lease
    /// 1 s, lock_expire 30 s) and breaks its lock: after a lease of watching
    /// at least, and well within lock_expire even on a busy machine. The
    /// lock and the data it read.
    fn break_a_dead_holders_lock(
        store: &mut ClusterStore,
        keys: &LockKeys,
    ) -> (Box<HeldLock>, Option<Vec<u8>>) {
        let broken_before = locks_broken();
        let (acquired, took) = wait_with_a_lease(store, keys, Duration::from_secs(20));
        let Acquired::Locked(held, data) = acquired else {
            panic!("not taken in {took:?}")
        };
        assert_eq!(held.broke, Some(Duration::from_secs(1)));
        assert_eq!(locks_broken(), broken_before + 1);
        assert!(took >= Duration::from_secs(1), "{took:?}");
        assert!(took < Duration::from_secs(15), "{took:?}");
        (held, data)
    }

    /// Renews `held`'s lease every third of it, from a thread of its own,
    /// until the returned flag is set.
    fn renew_in_the_background(held: &HeldLock) -> (Arc<AtomicBool>, std::thread::JoinHandle<u32>) {
        let stop = Arc::new(AtomicBool::new(false));
        let (held, stopping) = (held.clone(), stop.clone());
        let renewer = std::thread::spawn(move || {
            let mut store = store();
            let lease = held.lease().unwrap();
            let mut renewed = 0;
            while !stopping.load(Relaxed) {
                let reply = lease.renewal_call(Instant::now(), |script, keys, args| {
                    store.eval(script, keys, args)
                });
                if let Some(Ok(Reply::Int(1))) = reply {
                    renewed += 1;
                }
                sleep(lease.lease / 3);
            }
            renewed
        });
        (stop, renewer)
    }

    /// A holder that died (it never renews): the next in line sees its
    /// heartbeat stand still for a lease while the server serves, breaks
    /// the lock and takes it, long before lock_expire; the dead holder's
    /// save, were it to come, stores nothing.
    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_dead_holders_lock_is_broken_by_the_next_in_line_after_a_lease() {
        let mut store = store();
        let keys = keys("dead-holder");
        clean(&mut store, &keys);
        store
            .set(&keys.data, b"v0", Duration::from_secs(60))
            .unwrap();
        let dead = foreign_holder(&mut store, &keys, Some(Duration::from_secs(1)));
        let (held, data) = break_a_dead_holders_lock(&mut store, &keys);
        assert_eq!(data.as_deref(), Some(&b"v0"[..]));
        assert_eq!(
            store
                .get(&keys.beat(dead.secret().as_bytes()), None)
                .unwrap(),
            None
        );
        assert!(!write(&mut store, &dead, b"dead"));
        assert!(write(&mut store, &held, b"v1"));
        assert_eq!(store.get(&keys.data, None).unwrap(), Some(b"v1".to_vec()));
        clean(&mut store, &keys);
    }

    /// A holder and the waiter next in line both died: the next waiter to
    /// queue finds the dead one's wait over (it renewed its deadline no
    /// more), takes its place next in line and breaks the lock, seconds
    /// before lock_expire.
    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_dead_waiter_ahead_does_not_keep_the_next_from_breaking_a_dead_holders_lock() {
        let mut store = store();
        let keys = keys("dead-waiter");
        clean(&mut store, &keys);
        let _dead = foreign_holder(&mut store, &keys, Some(Duration::from_secs(1)));
        let mut dead_waiter =
            leased_process(&keys, Duration::from_secs(30), Duration::from_secs(1));
        let attempt = dead_waiter
            .attempt(&mut store, HAND_OVER_TIMEOUT, false)
            .unwrap();
        assert!(matches!(attempt, Attempt::Busy(None)));
        // (Behind the dead waiter's wait: a piece and the hand-over timeout.)
        let (held, _) = break_a_dead_holders_lock(&mut store, &keys);
        assert!(write(&mut store, &held, b"v1"));
        clean(&mut store, &keys);
    }

    /// A live holder whose heartbeat moves keeps its lock from the next in
    /// line for as long as it likes, here through a stall of its primary
    /// longer than the lease (CLIENT PAUSE ALL: nothing served, the clocks
    /// run), and saves; the waiter, which watched it by polling at most 25
    /// times a second, gets the lock by its hand-over with that save.
    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_live_holder_keeps_its_lock_from_the_next_in_line_through_a_stall() {
        let mut store = store();
        let keys = keys("live-holder");
        clean(&mut store, &keys);
        let holder = foreign_holder(&mut store, &keys, Some(Duration::from_secs(1)));
        let (stop, renewer) = renew_in_the_background(&holder);
        let stall = std::thread::spawn({
            let data = keys.data.clone();
            move || {
                sleep(Duration::from_millis(1500));
                let pause = cmd("CLIENT").arg("PAUSE").arg(2500).arg("ALL").clone();
                let paused = crate::store::cluster_tests::store().run(&data, &pause);
                assert_eq!(paused.unwrap(), Reply::Status);
                sleep(Duration::from_millis(4000));
            }
        });
        let released = std::thread::spawn({
            let holder = holder.clone();
            move || {
                stall.join().unwrap();
                stop.store(true, Relaxed);
                let renewed = renewer.join().unwrap();
                let mut store = crate::store::cluster_tests::store();
                (write(&mut store, &holder, b"held"), renewed)
            }
        });
        let list = keys.next(holder.secret().as_bytes());
        let (calls, (acquired, took)) = calls_with(&list, || {
            wait_with_a_lease(&mut store, &keys, Duration::from_secs(30))
        });
        let (saved, renewed) = released.join().unwrap();
        assert!(saved, "the live holder's save was refused");
        assert!(renewed >= 10, "{renewed} renewals");
        let Acquired::Locked(held, data) = acquired else {
            panic!("not handed over in {took:?}")
        };
        assert_eq!((data.as_deref(), held.broke), (Some(&b"held"[..]), None));
        let polls = calls
            .iter()
            .filter(|call| call.contains("\"LPOP\""))
            .count();
        let most = 25 * took.as_secs().max(1) as usize;
        assert!((1..=most).contains(&polls), "{polls} polls in {took:?}");
        assert!(write(&mut store, &held, b"next"));
        clean(&mut store, &keys);
    }

    /// A lock whose holder has no heartbeat (lease 0, or an older release)
    /// is never broken: the waiter gives up, the holder's save lands.
    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_lock_without_a_heartbeat_is_never_broken() {
        let mut store = store();
        let keys = keys("no-heartbeat");
        clean(&mut store, &keys);
        let holder = foreign_holder(&mut store, &keys, None);
        let (acquired, took) = wait_with_a_lease(&mut store, &keys, Duration::from_secs(3));
        assert!(matches!(acquired, Acquired::Busy(None)), "{took:?}");
        assert!(took >= Duration::from_secs(3), "{took:?}");
        assert!(write(&mut store, &holder, b"kept"));
        assert_eq!(store.get(&keys.data, None).unwrap(), Some(b"kept".to_vec()));
        clean(&mut store, &keys);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_lapsed_lease_is_taken_again_by_its_save_if_nobody_saved() {
        let mut store = store();
        let keys = keys("lease");
        let settings = leased_settings(Duration::from_secs(10), Duration::from_millis(300));
        let take = |store: &mut ClusterStore| match acquire_and_read(
            store,
            keys.clone(),
            &settings,
            None,
            true,
        )
        .unwrap()
        {
            (Acquired::Locked(held, _), _) => held,
            _ => panic!("the lock should be free"),
        };
        let renew = |store: &mut ClusterStore, held: &HeldLock| {
            held.lease()
                .unwrap()
                .renewal_call(Instant::now(), |script, keys, args| {
                    store.eval(script, keys, args).unwrap()
                })
                .unwrap()
        };
        // The lock gone without a save before lock_expire: a failover lost
        // the take, or a waiter broke it and found nobody to hand it to.
        let lapse = |store: &mut ClusterStore| store.delete(&[&keys.lock]).unwrap();
        // A holder that read no log of savers: nothing proves that nobody
        // saved since its read until its first renewal makes that log. Its
        // take must be the plain one: where a redirect turns it back (a slot
        // map an earlier test's failover left stale), the acquire script
        // takes the lock and makes a log naming the taker, which may re-take.
        store.get(&keys.data, None).unwrap();
        let unrenewed = take(&mut store);
        assert_eq!(store.get(keys.done(), None).unwrap(), None, "a plain take");
        let ttl = int(&store, &keys.lock, cmd("PTTL").arg(&keys.lock));
        assert!(
            (9_000..=10_300).contains(&ttl),
            "the backstop, lock_expire and the lease: {ttl}"
        );
        let beat = keys.beat(unrenewed.secret().as_bytes());
        assert_eq!(store.get(&beat, None).unwrap(), Some(b"0".to_vec()));
        lapse(&mut store);
        assert!(!write(&mut store, &unrenewed, b"v0"));
        // (Its heartbeat, which names no lock now, expires.)
        assert!(store.get(&beat, None).unwrap().is_some());
        let first = take(&mut store);
        assert_eq!(renew(&mut store, &first), Reply::Int(1));
        let log = store.get(keys.done(), None).unwrap();
        assert_eq!(log, Some(format!("~{}", first.secret()).into_bytes()));
        let beat = store.get(&keys.beat(first.secret().as_bytes()), None);
        assert!(beat.unwrap().is_some_and(|beat| beat != b"0"), "it moved");
        lapse(&mut store);
        assert!(write(&mut store, &first, b"v1"));
        // Renewed while it lives, then lapsed: its save takes it again,
        // even where the log it read expired before its first renewal (a
        // log an older release's save left for its own lock_expire): that
        // renewal makes it again.
        let expiring = cmd("PEXPIRE").arg(keys.done()).arg(100).clone();
        let held = take(&mut store);
        assert_eq!(int(&store, keys.done(), &expiring), 1);
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(renew(&mut store, &held), Reply::Int(1));
        lapse(&mut store);
        assert_eq!(owner(&store, &keys), None);
        assert!(write(&mut store, &held, b"v2"));
        assert_eq!(store.get(&keys.data, None).unwrap(), Some(b"v2".to_vec()));
        // A save that a primary stalling past the lease runs late: the lock
        // is still its own, its backstop being lock_expire and a lease. (The
        // stall: the primary pauses writes for 800 ms; its lease is 300.)
        let stalled = take(&mut store);
        assert_eq!(renew(&mut store, &stalled), Reply::Int(1));
        let pause = cmd("CLIENT").arg("PAUSE").arg(800).arg("WRITE").clone();
        assert_eq!(store.run(&keys.data, &pause).unwrap(), Reply::Status);
        assert!(write(&mut store, &stalled, b"v2.5"));
        assert_eq!(store.get(&keys.data, None).unwrap(), Some(b"v2.5".to_vec()));
        // A save since its read: refused, and its renewal touches nothing.
        let stale = take(&mut store);
        lapse(&mut store);
        let other = take(&mut store);
        assert_eq!(renew(&mut store, &stale), Reply::Int(0));
        assert!(write(&mut store, &other, b"v3"));
        assert!(!write(&mut store, &stale, b"stale"));
        assert_eq!(store.get(&keys.data, None).unwrap(), Some(b"v3".to_vec()));
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
            true,
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
            Some(held.secret().as_bytes())
        );
        let ttl = int(&store, &keys.lock, cmd("PTTL").arg(&keys.lock));
        assert!((6000..=7000).contains(&ttl), "{ttl}");
        // Not renewed here (GET, not GETEX): the session's lifetime is not
        // known yet, so the save renews it.
        let ttl = int(&store, &keys.data, cmd("TTL").arg(&keys.data));
        assert!((55..=60).contains(&ttl), "renewed: {ttl}");
        assert!(!held.renewed);
        assert!(write(&mut store, &held, b"v1"));
        clean(&mut store, &keys);
    }

    /// What the primary of `key` runs while `during` runs, scripts' calls
    /// included, as MONITOR prints it: the lines that name `key`.
    /// The plain take, which gives up on a redirect, once a GET made the
    /// slot map current: an earlier test's failover may have left it stale.
    fn take_plainly(
        store: &mut ClusterStore,
        acquisition: &mut Acquisition,
    ) -> Option<Option<Vec<u8>>> {
        store.get(&acquisition.held.keys.data, None).unwrap();
        acquisition.lock_and_read(store).unwrap()
    }

    fn calls_on(key: &[u8], during: impl FnOnce()) -> Vec<String> {
        calls_with(key, during).0
    }

    /// The calls on `key`'s primary that name it while `during` runs, and
    /// what `during` returned.
    fn calls_with<T>(key: &[u8], during: impl FnOnce() -> T) -> (Vec<String>, T) {
        let mut monitor = node(&owners(key).0);
        let _: () = cmd("MONITOR").query(&mut monitor).unwrap();
        let returned = during();
        monitor
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let name = String::from_utf8_lossy(key).into_owned();
        let calls = std::iter::from_fn(|| match monitor.recv_response() {
            Ok(redis::Value::SimpleString(line)) => Some(line),
            _ => None,
        })
        .filter(|line| line.contains(&name))
        .collect();
        (calls, returned)
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_save_logs_itself_before_the_log_its_take_read_or_else_reads_it() {
        let mut store = store();
        let keys = keys("log-read");
        // A plain take reads the log; after an older release's hand-over,
        // which carries none, the script reads it (the model never gets one).
        for read_by_the_take in [true, false] {
            let mut savers: Vec<String> = Vec::new();
            for n in 0..10 {
                let mut acquisition = another_process(&keys, Duration::from_secs(10));
                assert!(take_plainly(&mut store, &mut acquisition).is_some());
                let mut held = acquisition.into_held();
                if !read_by_the_take {
                    held.next_log = None;
                }
                let calls = calls_on(keys.done(), || {
                    assert!(write(&mut store, &held, format!("v{n}").as_bytes()));
                });
                // No fence to compare (a plain take's), so no GET of the log.
                let read = |command: &str| calls.iter().any(|call| call.contains(command));
                assert!(!read("\"GET\""), "{calls:?}");
                assert_eq!(read("\"GETRANGE\""), !read_by_the_take, "{calls:?}");
                savers.insert(0, held.secret().to_owned());
                savers.truncate(8);
                let log = store.run(keys.done(), cmd("GET").arg(keys.done()));
                assert_eq!(log.unwrap(), Reply::Data(savers.join(" ").into_bytes()));
            }
            clean(&mut store, &keys);
        }
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_leased_save_keeps_the_longer_ttl_of_the_log_and_never_leaves_it_without_one() {
        let mut store = store();
        let keys = keys("log-ttl");
        let settings = leased_settings(Duration::from_secs(10), Duration::from_secs(2));
        // The log as the save finds it: none yet, as the last save's TTL
        // left it, stretched (as a waiter whose lock_expire is longer does
        // when it queues), or gone since the take read it.
        for (log, at_most) in [
            ("none", 10_000),
            ("kept", 10_000),
            ("stretched", 100_000),
            ("gone", 10_000),
        ] {
            let mut acquisition =
                Acquisition::new(keys.clone(), &settings, None, Instant::now()).unwrap();
            assert!(take_plainly(&mut store, &mut acquisition).is_some());
            let held = acquisition.into_held();
            let done = keys.done();
            match log {
                "stretched" => {
                    assert_eq!(int(&store, done, cmd("PEXPIRE").arg(done).arg(100_000)), 1)
                }
                "gone" => assert_eq!(int(&store, done, cmd("DEL").arg(done)), 1),
                _ => {}
            }
            let calls = calls_on(done, || assert!(write(&mut store, &held, b"v")));
            // The TTL is read only where PEXPIRE GT did nothing.
            assert_eq!(
                calls.iter().any(|call| call.contains("\"PTTL\"")),
                matches!(log, "stretched" | "gone"),
                "{log}: {calls:?}"
            );
            let ttl = int(&store, done, cmd("PTTL").arg(done));
            assert!((at_most - 1000..=at_most).contains(&ttl), "{log}: {ttl}");
        }
        clean(&mut store, &keys);
    }

    /// A leased acquisition with a secret of another process.
    fn leased_process(keys: &LockKeys, lock_expire: Duration, lease: Duration) -> Acquisition {
        let settings = leased_settings(lock_expire, lease);
        let secret = other_secret();
        Acquisition::with_secret(keys.clone(), &settings, None, secret, Instant::now())
    }

    /// A leased holder that read no log, whose renewal made `~<secret>`,
    /// which a waiter with a longer lock_expire then stretched: its save
    /// (whose new log is its secret alone) keeps that longer TTL. Were the
    /// log SET PX the holder's own, shorter lock_expire (as a review found
    /// the sent log doing at first), the waiter handed the lock, which loses
    /// it without a save, could no longer re-take it in its save although
    /// nobody saved since its read.
    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_save_after_reading_no_log_keeps_the_ttl_a_waiter_stretched() {
        let mut store = store();
        let keys = keys("log-ttl-empty-read");
        clean(&mut store, &keys);
        let lease = Duration::from_millis(300);
        let mut holder = leased_process(&keys, Duration::from_millis(1500), lease);
        assert!(take_plainly(&mut store, &mut holder).is_some());
        let holder = holder.into_held();
        // Its renewal makes the log `~<secret>` (it read none).
        let renewed = holder
            .lease()
            .unwrap()
            .renewal_call(Instant::now(), |script, keys, args| {
                store.eval(script, keys, args).unwrap()
            })
            .unwrap();
        assert_eq!(renewed, Reply::Int(1));
        // A waiter with a longer lock_expire queues: the log lasts 20 s.
        let mut waiter = leased_process(&keys, Duration::from_secs(20), lease);
        let attempt = waiter
            .attempt(&mut store, Duration::from_secs(5), false)
            .unwrap();
        assert!(matches!(attempt, Attempt::Busy(None)));
        let done = keys.done();
        assert!(int(&store, done, cmd("PTTL").arg(done)) > 15_000);
        assert!(write(&mut store, &holder, b"v1"));
        let ttl = int(&store, done, cmd("PTTL").arg(done));
        assert!(ttl > 15_000, "the waiter's stretch was undone: {ttl} ms");
        // What it costs: the waiter, handed the lock, loses it without a
        // save (a failover lost the hand-over's write, or a waiter broke it
        // and found nobody) and saves within its lock_expire; nobody saved
        // since its read.
        let handed = waiter
            .wait_for_hand_over(&mut store, Duration::from_secs(1))
            .unwrap();
        assert_eq!(handed, Some(Some(b"v1".to_vec())));
        let waiter = waiter.into_held();
        store.delete(&[&keys.lock]).unwrap();
        assert!(write(&mut store, &waiter, b"v2"), "re-take refused");
        clean(&mut store, &keys);
    }

    /// Every key of a session and its TTL: (key, DUMP or None, PTTL).
    type Snapshot = Vec<(Vec<u8>, Option<Vec<u8>>, i64)>;

    /// A session's keys as a replica that lacks what came after would hold them.
    fn snapshot(store: &ClusterStore, keys: &LockKeys) -> Snapshot {
        [
            &keys.data[..],
            &keys.lock,
            keys.queue(),
            keys.waiters(),
            keys.done(),
            keys.lifetime(),
        ]
        .into_iter()
        .map(|key| {
            let dump = match store.run(key, cmd("DUMP").arg(key)).unwrap() {
                Reply::Data(dump) => Some(dump),
                _ => None,
            };
            let ttl = int(store, key, cmd("PTTL").arg(key));
            (key.to_vec(), dump, ttl)
        })
        .collect()
    }

    /// Puts a snapshot back: a failover to a replica that had it.
    fn restore(store: &mut ClusterStore, snapshot: &Snapshot) {
        for (key, dump, ttl) in snapshot {
            store.delete(&[key]).unwrap();
            if let Some(dump) = dump {
                let ttl = (*ttl).max(0);
                let restored = store.run(key, cmd("RESTORE").arg(key).arg(ttl).arg(dump));
                assert_eq!(restored.unwrap(), Reply::Status);
            }
        }
    }

    /// A failover undoes a hand-over (and the save that made it), the
    /// waiter's queue entry comes back and a later release hands it the
    /// lock again; meanwhile another holder saved. The waiter's write is
    /// fenced off, but its touch (lazy_write) or destroy has no fence: it
    /// must log itself before the log it finds, not the one of the undone
    /// hand-over it read, which names a save the new primary never had and
    /// drops the one it had (as a review found the sent log doing at
    /// first). Else the dropped saver's repeat after a lost reply is
    /// refused (a false "Session lock expired"), and the undone saver's repeat is
    /// acknowledged although its write is gone.
    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_touch_after_a_failover_handed_the_lock_back_logs_the_log_it_finds() {
        let mut store = store();
        let keys = keys("log-hand-back");
        clean(&mut store, &keys);
        let first = lock(&mut store, &keys, Duration::from_secs(30));
        assert!(write(&mut store, &first, b"v0"));
        let undone = lock(&mut store, &keys, Duration::from_secs(30));
        let mut waiter = queue(&mut store, &keys, Duration::from_secs(30));
        // What the replica has when the primary dies.
        let replica = snapshot(&store, &keys);
        assert!(write(&mut store, &undone, b"lost"));
        let handed = waiter
            .wait_for_hand_over(&mut store, Duration::from_secs(1))
            .unwrap();
        assert_eq!(handed, Some(Some(b"lost".to_vec())));
        let waiter = waiter.into_held();
        // The failover: the write and its hand-over are gone, the waiter is
        // queued again. The undone holder's lock runs out; another takes
        // the session, saves, and hands the lock to the waiter's entry.
        restore(&mut store, &replica);
        store.delete(&[&keys.lock]).unwrap();
        let mut other = another_process(&keys, Duration::from_secs(30));
        assert_eq!(
            other.lock_and_read(&mut store).unwrap(),
            Some(Some(b"v0".to_vec()))
        );
        let other = other.into_held();
        assert!(write(&mut store, &other, b"v1"));
        assert_eq!(
            owner(&store, &keys).as_deref(),
            Some(waiter.secret().as_bytes())
        );
        // The waiter's request ends with a touch (its data unchanged).
        let touched = save_and_release(
            &mut store,
            Save::Touch,
            &waiter,
            b"lost",
            Duration::from_secs(60),
            Change::Keep,
            None,
        )
        .unwrap();
        assert!(touched.ours);
        assert_eq!(store.get(&keys.data, None).unwrap(), Some(b"v1".to_vec()));
        let log = match store.run(keys.done(), cmd("GET").arg(keys.done())).unwrap() {
            Reply::Data(log) => String::from_utf8(log).unwrap(),
            other => panic!("{other:?}"),
        };
        let names = |holder: &HeldLock| log.split(' ').any(|entry| entry == holder.secret());
        // The undone holder's write is not here, yet its repeat would be
        // acknowledged; the other's is, yet its repeat would be refused.
        assert!(
            !names(&undone),
            "the log names a save the primary never had"
        );
        assert!(names(&other), "the log dropped a save the primary had");
        assert!(write(&mut store, &other, b"v1"), "the repeat is refused");
        assert!(
            !write(&mut store, &undone, b"lost"),
            "a lost write acknowledged"
        );
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
        for key in [&keys.queue(), &keys.waiters()] {
            let ttl = int(&store, key, cmd("PTTL").arg(key));
            assert!(ttl > 6000, "{ttl}");
        }
        // A failed wait leaves the queue.
        short.attempt(&mut store, Duration::ZERO, false).unwrap();
        long.attempt(&mut store, Duration::ZERO, false).unwrap();
        for key in [&keys.queue(), &keys.waiters()] {
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
            acquire_and_read(&mut store, keys.clone(), &settings, None, true).unwrap();
        assert!(matches!(outcome, Acquired::Busy(None)));
        assert!(waited >= Duration::from_millis(50), "{waited:?}");
        for key in [&keys.queue(), &keys.waiters()] {
            assert_eq!(int(&store, key, cmd("EXISTS").arg(key)), 0);
        }
        release(&mut store, &holder).unwrap();
        assert_eq!(owner(&store, &keys), None);
        clean(&mut store, &keys);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_release_with_nobody_waiting_clears_the_marks_of_dead_holders() {
        let mut store = store();
        let keys = keys("dead-mark");
        let holder = lock(&mut store, &keys, Duration::from_secs(30));
        let waiter = queue(&mut store, &keys, Duration::from_secs(30));
        assert!(write(&mut store, &holder, b"handed"));
        assert_eq!(
            owner(&store, &keys).as_deref(),
            Some(waiter.held.secret().as_bytes())
        );
        // The waiter dies before it pops its hand-over: its lock expires and
        // its handed mark stays, which now tells nobody anything.
        store.delete(&[&keys.lock[..]]).unwrap();
        let next = lock(&mut store, &keys, Duration::from_secs(30));
        assert!(write(&mut store, &next, b"after"));
        assert_eq!(owner(&store, &keys), None);
        let waiters = keys.waiters();
        assert_eq!(int(&store, waiters, cmd("EXISTS").arg(waiters)), 0);
        clean(&mut store, &keys);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_repeated_destroy_leaves_the_next_holders_data() {
        let mut store = store();
        let keys = keys("destroy");
        let first = lock(&mut store, &keys, Duration::from_secs(30));
        destroy_and_release(&mut store, &first, None).unwrap();
        let second = lock(&mut store, &keys, Duration::from_secs(30));
        store
            .set(&keys.data, b"fresh", Duration::from_secs(60))
            .unwrap();
        // The first destroy's reply was lost; its repeat comes now.
        destroy_and_release(&mut store, &first, None).unwrap();
        assert_eq!(
            store.get(&keys.data, None).unwrap(),
            Some(b"fresh".to_vec())
        );
        destroy_and_release(&mut store, &second, None).unwrap();
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
        store.delete(&[&keys.lock]).unwrap();
        release(&mut store, &holder).unwrap();
        assert_eq!(
            owner(&store, &keys).as_deref(),
            Some(waiter.held.secret().as_bytes())
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
        assert_eq!(owner(&store, &keys), None);
        clean(&mut store, &keys);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_repeat_finds_its_write_in_the_log_behind_up_to_7_later_saves() {
        let mut store = store();
        let keys = keys("log");
        let first = lock(&mut store, &keys, Duration::from_secs(10));
        assert!(write(&mut store, &first, b"first"));
        for n in 1..=8 {
            let later = lock(&mut store, &keys, Duration::from_secs(10));
            assert!(write(&mut store, &later, format!("later {n}").as_bytes()));
            // Past 7 later saves the log has forgotten the first one: a
            // false alarm about a save that landed, and nothing stored.
            assert_eq!(write(&mut store, &first, b"first"), n <= 7, "after {n}");
            assert_eq!(
                store.get(&keys.data, None).unwrap(),
                Some(format!("later {n}").into_bytes())
            );
        }
        let Reply::Data(log) = store.run(&keys.lock, cmd("GET").arg(keys.done())).unwrap() else {
            panic!("no log of saves");
        };
        assert_eq!(log.split(|&byte| byte == b' ').count(), 8);
        clean(&mut store, &keys);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_write_since_the_read_fences_off_a_stale_holder() {
        let mut store = store();
        let keys = keys("fence");
        let stale = lock(&mut store, &keys, Duration::from_secs(30));
        // A failover undoes the take; another holder writes meanwhile.
        store.delete(&[&keys.lock]).unwrap();
        let other = lock(&mut store, &keys, Duration::from_secs(30));
        assert!(write(&mut store, &other, b"n=1"));
        // The lock comes back to the first holder, as a hand-over to its
        // queue entry that the failover brought back would give it.
        store
            .set(
                &keys.lock,
                stale.secret().as_bytes(),
                Duration::from_secs(30),
            )
            .unwrap();
        assert!(!write(&mut store, &stale, b"n=1 (stale)"));
        assert_eq!(store.get(&keys.data, None).unwrap(), Some(b"n=1".to_vec()));
        assert_eq!(owner(&store, &keys), None, "released all the same");
        clean(&mut store, &keys);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn equal_bytes_from_another_holder_prove_nothing() {
        let mut store = store();
        let keys = keys("samebytes");
        let expired = lock(&mut store, &keys, Duration::from_millis(100));
        std::thread::sleep(Duration::from_millis(200));
        // The lock expired and went to another holder, who stored the very
        // bytes the first one is about to write.
        let other = lock(&mut store, &keys, Duration::from_secs(10));
        assert!(write(&mut store, &other, b"n=1"));
        assert!(!write(&mut store, &expired, b"n=1"));
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
            save_and_release(
                &mut cluster,
                Save::Write,
                &held,
                data,
                ttl,
                Change::Keep,
                Some(ack),
            )
            .map(|released| released.ours)
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
