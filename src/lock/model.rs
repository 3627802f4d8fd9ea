//! The lock protocol, checked exhaustively with stateright.
//!
//! Each server step runs the real Lua text of [`super::scripts`] in Lua 5.1
//! (`server`), on one primary's keys, atomically. Each client step is one
//! call of [`acquire_and_read`](super::acquire_and_read),
//! [`save_and_release`](super::save_and_release),
//! [`destroy_and_release`](super::destroy_and_release) or
//! [`release`](super::release), with the arguments and reply handling of the
//! real [`Acquisition`]. Time is a tick clock (one tick is `tick_ms`); a live
//! client acts at once between calls and only its holds and BLPOPs last.
//!
//! With `lifetimes`, a holder's write or touch may also set a session
//! lifetime (sliding or fixed), drop it, or keep what is stored; with
//! `refresh` (early_refresh) reads renew the data's TTL; `foreign_destroys`
//! lets phpredis delete the data without a lock, which leaves the lifetime
//! key behind.
//!
//! With `fallback` (`failover=error`), an acquire call that fails for good
//! (its reply lost twice: the primary unreachable) lets go of what it may
//! have taken, as every failed call does, then serves the session read-only
//! from the replica and never writes.
//!
//! With `forks`, a holder forks (`pcntl_fork()`): the child lets go of the
//! session through the real [`SessionHandler`] holding the lock it
//! inherited, a write, touch, destroy or none and then close, and the
//! handler's rule must make none of it a call.
//!
//! The adversary: a client crashes at any point; a reply is lost after the
//! server applied the call (the client repeats it once, as the cluster client
//! does on a broken connection, and gives up after a second loss); a BLPOP
//! piece ends at any tick before its timeout (a timeout, `-MOVED` and
//! `-UNBLOCKED` look alike to the client); keys expire at their TTL; a
//! failover promotes a replica that has any prefix of the primary's history,
//! its clock a tick ahead or behind.
//!
//! Invariants (each an `always` property, with history kept in the state):
//! - safety: a write, touch or destroy acknowledged without a warning was
//!   applied while the lock held the acquisition's secret;
//! - no lost update: every data write was computed from the data written
//!   last before it (the session holds a counter);
//! - acknowledged writes survive a failover when `write_replicas` is on;
//! - bounded delay: a live waiter is not kept waiting by a lock nobody live
//!   holds longer than the hand-over timeout + a piece (a dead handed-to
//!   waiter), the rest of the lock's TTL + a piece (a dead holder), or a piece
//!   (a free lock), each + 1 tick;
//! - FIFO (before any failover, which may lose queue entries that had not
//!   replicated): a hand-over goes to the live waiter that queued first;
//! - declared keys: no call touches a key its client did not name;
//! - no leftovers: every key has a TTL, and no helper key outlives its last
//!   user by more than max(lock TTL, piece + 2 × hand-over timeout);
//! - lifetime: the lifetime key and the data expire together; a save that
//!   applied gives the data the TTL of the lifetime it asked for (or kept,
//!   or `gc_maxlifetime` without one); a session read missing starts without
//!   the lifetime a leftover key held;
//! - liveness (before any failover, which may hand a lock back to a holder
//!   whose read it undid): a write or destroy that runs while the lock holds
//!   the caller's secret is applied, and the repeat of one that applied, its
//!   reply lost, is acknowledged.

/// A property that holds while no step has recorded `$invariant` broken:
/// each model's `State` keeps the first violation in `violation`.
macro_rules! holds {
    ($name:literal, $invariant:expr) => {
        stateright::Property::always($name, |_, state: &State| {
            state
                .violation
                .as_ref()
                .is_none_or(|(broken, _)| *broken != $invariant)
        })
    };
}

pub(crate) mod node;
pub(crate) mod server;
pub(crate) mod serving;

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use stateright::{Checker, Model, Property};

use self::node::{Ini, Node};
use self::server::Server;
use super::scripts::{ACQUIRE_AND_READ, DESTROY_AND_RELEASE, RELEASE};
use super::{
    Acquisition, Attempt, HAND_OVER_TIMEOUT, Save, backstop, break_call, longest_piece, released,
};
use crate::handler::SessionHandler;
use crate::keys::LockKeys;
use crate::lifetime::{Change, Lifetime};
use crate::save_path::Failover;
use crate::settings::{LockSettings, ReleaseCommand, Settings};
use crate::store::Reply;

/// The session's id; with an empty prefix, also its data key.
const SID: &[u8] = b"S";

/// The data key's TTL (`gc_maxlifetime`): longer than any run.
const DATA_TTL: Duration = Duration::from_secs(3600);
/// A sliding lifetime a holder may set: past the end of a run too.
const SLIDING: Duration = Duration::from_secs(7200);
/// How far ahead a fixed end a holder may set lies: within a run.
const FIXED_END_MS: u64 = 2000;

/// The servers' clock at the start, in ms: 1000 s, so that a failover may set it back.
const SERVER_START_MS: i64 = 1_000_000;

/// What a holder's write or touch does with the session's lifetime
/// (`rediscluster_session_set_lifetime()` earlier in the request).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pick {
    Keep,
    Sliding,
    /// Ends [`FIXED_END_MS`] after the save.
    Fixed,
    /// Back to `gc_maxlifetime` (0).
    Drop,
}

/// What a holder does with the session before it lets go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Write,
    Touch,
    Destroy,
    /// `release()` alone: read_and_close, session_abort(), an unchanged
    /// session with early_refresh.
    Release,
}

impl Op {
    const ALL: [Op; 4] = [Op::Write, Op::Touch, Op::Destroy, Op::Release];
}

#[derive(Clone, Debug)]
pub struct LockModel {
    /// How many acquisitions each client makes, one after the other.
    pub acquisitions: Vec<u8>,
    pub lock: LockSettings,
    pub ops: Vec<Op>,
    pub crashes: u8,
    /// With a lease, how many locks waiters may break in one run.
    pub breaks: u8,
    pub lost_replies: u8,
    pub failovers: u8,
    pub write_replicas: bool,
    /// `failover=error`: see the module's documentation.
    pub fallback: bool,
    /// Writes and touches may set lifetimes; reads renew the TTL
    /// (early_refresh); phpredis may destroy without the lock this often.
    pub lifetimes: bool,
    pub refresh: bool,
    pub foreign_destroys: u8,
    /// `pcntl_fork()` while holding the lock: the child shares the
    /// acquisition, and lets go of it through the real handler (see
    /// [`LockModel::forked_child_lets_go`]).
    pub forks: u8,
    pub tick_ms: i64,
    /// The clock stops here: every run is finite.
    pub max_ticks: u32,
    /// The features the check reached, as bits of [`Feature`]: a test
    /// asserts that each one the configuration turns on was exercised.
    pub reached: Arc<AtomicU16>,
}

/// A feature of the model that only some paths exercise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    Crash,
    LostReply,
    Failover,
    Fork,
    /// A save applied a lifetime of its own.
    Lifetime,
    /// An acquire turned away by `max_waiters`.
    Rejected,
    /// A release's native delete (DELIFEQ) deleted the lock.
    Delifeq,
    /// A renewal extended a holder's lease.
    Renewal,
    /// A waiter broke a holder's lock, its heartbeat as it saw it (at any
    /// moment: when is the serving model's to check, see `serving`).
    Break,
    /// A holder whose lease lapsed took its lock again in its save.
    Retake,
    /// A holder that read no log of savers did so on the one its renewal made.
    RetakeOnRenewalsLog,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    /// `SET NX PX` + `GET`, pipelined.
    Plain,
    /// The acquire script, queueing for `queue_ms` (0: the last attempt).
    Attempt {
        queue_ms: i64,
        read_if_busy: bool,
    },
    /// BLPOP on the acquisition's wait list from tick `since` until `until`
    /// (client ms).
    Blocked {
        since: u32,
        until: i64,
    },
    Holding,
    /// Serving the session read from the replica after a failed acquire
    /// call and its cleanup (`fallback`); its close calls nothing.
    ReadOnly,
    Saving(Op, Pick),
    /// `release()` with DELIFEQ: the native delete, then the script if anyone waits.
    ReleaseNative(Op),
    ReleaseScript(Op),
    /// A call failed twice: release what may be ours, then end with a warning.
    Cleanup,
    Dead,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Client {
    phase: Phase,
    /// Shared by the states a step leaves it alone in: most steps do.
    acquisition: Option<Arc<Acquisition>>,
    /// Acquisitions started.
    started: u8,
    plain_first: bool,
    /// Client ms: the acquisition's wait deadline.
    deadline: Option<i64>,
    waited: bool,
    /// The counter read under the lock.
    read: Option<u64>,
    /// The session was missing when read under the lock.
    read_missing: bool,
    /// A reply of the current call was lost once: another loss fails it.
    retried: bool,
    /// Its acquire call failed for good with `fallback`: after the cleanup
    /// it reads the replica.
    falls_back: bool,
    /// History of the current acquisition.
    applied_under_lock: bool,
    /// Until when (server ms) the lock it took was its own, by its TTL then.
    lock_until: Option<i64>,
    /// The order it queued in (the model's count), while queued.
    queued_as: Option<u32>,
    /// The number of the write or destroy it applied last (see
    /// [`State::applied`]).
    applied_as: u32,
    /// A child forked while its parent held the lock.
    forked: bool,
    /// With a lease, how many saves had applied when it read (see
    /// [`State::saves`]): a re-take is right only if none came since.
    saves_at_read: u32,
    /// A renewal of the current acquisition's lease succeeded: it made the
    /// log of savers a re-take compares last, or made one.
    renewed: bool,
    /// Until when (server ms) the log of savers lived when the lock was
    /// taken (`None`: there was none), by its TTL then.
    log_until: Option<i64>,
    /// A waiter broke the lock of the current acquisition: it may think it
    /// holds a lock that went to another before its TTL.
    broken: bool,
    /// How many saves had applied when a hand-over gave the lock to the
    /// current acquisition: what a pop of it reads, however late.
    handed_saves: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    primary: Server,
    /// What the replica has: a prefix of the primary's history.
    replica: Server,
    ticks: u32,
    /// The replica clock's offset after a failover, in ms.
    skew: i64,
    clients: Vec<Client>,
    crashes: u8,
    breaks: u8,
    lost: u8,
    failovers: u8,
    foreign_destroys: u8,
    /// The data expired (a fixed end) since it was last written: a write over
    /// nothing then loses no update.
    data_expired: bool,
    queued_count: u32,
    /// Acknowledged writes: (client, counter value).
    acked: Vec<(u8, u64)>,
    /// Acknowledged writes a failover rolled back (allowed without `write_replicas`).
    acked_rolled_back: u8,
    /// Writes and destroys applied on the primary, how many of them the
    /// replica has, and how many the last acknowledged one was.
    applied: u32,
    replicated: u32,
    acknowledged: u32,
    forks: u8,
    /// With a lease, the saves (writes, touches, destroys) applied.
    saves: u32,
    /// Since when a live waiter waits for a lock nobody live holds, and by
    /// when that must end: (lock owner then, deadline in client ms).
    stall: Option<(Option<Vec<u8>>, i64)>,
    violation: Option<(Invariant, String)>,
}

/// The invariants, each a property of its own so that each gets its own
/// counterexample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Invariant {
    Safety,
    MutualExclusion,
    NoLostUpdate,
    Failover,
    BoundedDelay,
    Fifo,
    DeclaredKeys,
    NoLeftovers,
    Lifetime,
    Liveness,
    /// A lock lives past its holder's `lock_expire` (+ a hand-over's piece).
    LeaseCap,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Tick,
    /// A holder lets go of the session this way.
    Save(u8, Op, Pick),
    /// phpredis deletes the data without a lock (its lifetime key stays).
    ForeignDestroy,
    Step(u8),
    /// The client's call is applied but its reply lost.
    StepLost(u8),
    /// The BLPOP piece ends with nothing (timeout, -MOVED, -UNBLOCKED).
    PieceEnds(u8),
    Crash(u8),
    /// The replica catches up with the primary.
    Replicate,
    /// The replica is promoted, its clock this many ms off.
    Failover(i64),
    /// The holder forks: a child process shares its acquisition.
    Fork(u8),
    /// The holder's watchdog renews its lease (late, or never, as the
    /// adversary likes: renewals lost or delayed, a frozen process).
    Renew(u8),
    /// A waiter next in line breaks the lock, the holder's heartbeat as it
    /// is now (whenever the adversary likes, a live holder's too: safety
    /// must not rest on when).
    Break(u8),
}

/// The session's keys, made once: every step reads them.
fn keys() -> &'static LockKeys {
    static KEYS: LazyLock<LockKeys> = LazyLock::new(|| LockKeys::new(SID).unwrap());
    &KEYS
}

/// The client's monotonic clock: `Instant`s `ms` after a fixed one, so that
/// equal times make equal states.
fn instant(ms: i64) -> Instant {
    static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);
    *EPOCH + Duration::from_millis(ms as u64)
}

/// Client ms of an [`instant`].
fn client_ms_of(at: Instant) -> i64 {
    at.duration_since(instant(0)).as_millis() as i64
}

/// Client `c`'s `n`th secret: its thread half names the client.
fn secret(c: usize, n: u8) -> String {
    format!("{:016x}{:016x}", c + 1, n)
}

/// Whose secret it is, as [`secret`] made it. (By hand: the checker asks
/// this of every state, and `from_str_radix` cost it 3.5%.)
fn client_of(secret: &[u8]) -> Option<(usize, u8)> {
    let hex = |digits: &[u8]| {
        digits.iter().try_fold(0u64, |n, &digit| {
            Some(n << 4 | u64::from(char::from(digit).to_digit(16)?))
        })
    };
    let (c, n) = secret.split_at_checked(16)?;
    let (c, n) = (hex(c)?, hex(n)?);
    Some((
        usize::try_from(c).ok()?.checked_sub(1)?,
        u8::try_from(n).ok()?,
    ))
}

/// The secret the lock holds.
fn lock_owner(server: &Server) -> Option<&[u8]> {
    server.get_str(&keys().lock)
}

/// The secret at the head of the log of savers in `done`.
fn last_saver(server: &Server) -> Option<Vec<u8>> {
    let log = server.get_str(keys().done())?;
    log.split(|&byte| byte == b' ').next().map(<[u8]>::to_vec)
}

fn counter(data: Option<&[u8]>) -> u64 {
    data.and_then(|d| std::str::from_utf8(d).ok()?.parse().ok())
        .unwrap_or(0)
}

impl Client {
    /// The acquisition to change: a copy of its own if another state shares it.
    fn acquisition_mut(&mut self) -> &mut Acquisition {
        Arc::make_mut(self.acquisition.as_mut().unwrap())
    }
}

impl State {
    fn client_ms(&self, tick_ms: i64) -> i64 {
        i64::from(self.ticks) * tick_ms
    }

    fn fail(&mut self, invariant: Invariant, why: String) {
        self.violation.get_or_insert((invariant, why));
    }
}

impl LockModel {
    fn reach(&self, feature: Feature) {
        self.reached.fetch_or(1 << feature as u8, Ordering::Relaxed);
    }

    pub fn reached(&self, feature: Feature) -> bool {
        self.reached.load(Ordering::Relaxed) & 1 << feature as u8 != 0
    }

    /// The features this configuration turns on.
    pub fn features(&self) -> Vec<Feature> {
        let lease = self.lock.lease.is_some();
        // A lock gone before lock_expire without a save: a failover lost the
        // take, or breaks back and forth handed it to nobody.
        let retakes = lease && (self.failovers > 0 || self.breaks > 2);
        let on = [
            (Feature::Crash, self.crashes > 0),
            (Feature::LostReply, self.lost_replies > 0),
            (Feature::Failover, self.failovers > 0),
            (Feature::Fork, self.forks > 0),
            (Feature::Lifetime, self.lifetimes),
            (Feature::Rejected, self.lock.max_waiters.is_some()),
            (
                Feature::Delifeq,
                self.lock.release != ReleaseCommand::Eval && self.ops.contains(&Op::Release),
            ),
            (Feature::Renewal, self.lock.lease.is_some()),
            (Feature::Break, self.lock.lease.is_some() && self.breaks > 0),
            (Feature::Retake, retakes),
            // Its fence made by its renewal: once a waiter broke its lock.
            (Feature::RetakeOnRenewalsLog, lease && self.breaks > 2),
        ];
        on.into_iter()
            .filter_map(|(feature, on)| on.then_some(feature))
            .collect()
    }

    fn piece_ms(&self) -> i64 {
        longest_piece(&self.lock).as_millis() as i64
    }

    fn hand_over_ms(&self) -> i64 {
        HAND_OVER_TIMEOUT.as_millis() as i64
    }

    /// The next attempt of the acquire loop, as `acquire_and_read` computes it.
    fn next_attempt(&self, client: &mut Client, now: i64) {
        let remaining = client.deadline.map(|d| (d - now).max(0));
        let last = remaining == Some(0);
        let piece = remaining.map_or(self.piece_ms(), |r| r.min(self.piece_ms()));
        client.phase = Phase::Attempt {
            queue_ms: if last { 0 } else { piece },
            read_if_busy: last && self.lock.failure_readonly,
        };
    }

    fn locked(
        &self,
        state: &State,
        client: &mut Client,
        data: Option<Vec<u8>>,
        lock_until: Option<i64>,
    ) {
        // A hand-over popped after a waiter broke the lock it gave read the
        // data as of its push.
        let mine = client
            .acquisition
            .as_ref()
            .map(|acquisition| acquisition.held.secret().as_bytes());
        client.saves_at_read = match client.handed_saves {
            Some(saves) if lock_owner(&state.primary) != mine => saves,
            _ => state.saves,
        };
        client.log_until = state
            .primary
            .ttl_of(keys().done())
            .map(|at| at.unwrap_or(i64::MAX));
        client.read_missing = data.is_none();
        client.lock_until = lock_until;
        client.read = Some(counter(data.as_deref()));
        client.plain_first = !client.waited;
        client.queued_as = None;
        client.phase = Phase::Holding;
    }

    fn finish(&self, client: &mut Client) {
        client.acquisition = None;
        client.queued_as = None;
        client.retried = false;
        client.phase = Phase::Idle;
    }

    /// Runs a script on the primary for client `c`.
    fn eval(
        &self,
        state: &mut State,
        script: &crate::script::LuaScript,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Option<Reply> {
        match state.primary.eval(script, keys, args) {
            Ok(reply) => Some(reply),
            Err(fault) => {
                state.fail(Invariant::DeclaredKeys, fault.0);
                None
            }
        }
    }

    /// One call of client `c`, applied on the server; `lost`: its reply never arrives.
    fn step(&self, state: &mut State, c: usize, lost: bool) {
        let now = state.client_ms(self.tick_ms);
        let mut client = state.clients[c].clone();
        let owner_before = lock_owner(&state.primary).map(<[u8]>::to_vec);
        let k = keys();
        let data_before = state.primary.get_str(&k.data).map(<[u8]>::to_vec);
        let saver_before = last_saver(&state.primary);
        match client.phase.clone() {
            Phase::Idle => {
                let n = client.started;
                client.started += 1;
                client.acquisition = Some(Arc::new(Acquisition::with_secret(
                    k.clone(),
                    &self.lock,
                    self.refresh.then_some(DATA_TTL),
                    secret(c, n),
                    instant(0),
                )));
                client.deadline = self
                    .lock
                    .total_wait()
                    .map(|total| now + total.as_millis() as i64);
                client.waited = false;
                client.broken = false;
                client.handed_saves = None;
                client.renewed = false;
                client.applied_under_lock = false;
                client.retried = false;
                if client.plain_first {
                    client.phase = Phase::Plain;
                } else {
                    self.next_attempt(&mut client, now);
                }
                state.clients[c] = client;
                return;
            }
            Phase::Plain => {
                // A call sent again after a lost reply took the lock no later
                // than the first send.
                if self.lock.lease.is_some() && !client.retried {
                    client.acquisition_mut().taking_at(|| instant(now));
                }
                let mut replies = Vec::new();
                client
                    .acquisition
                    .as_ref()
                    .unwrap()
                    .plain_take()
                    .each_command(|command| {
                        let keys: Vec<&[u8]> = command.get(1).into_iter().copied().collect();
                        let command: Vec<Vec<u8>> =
                            command.iter().map(|arg| arg.to_vec()).collect();
                        replies.push(state.primary.call(&command, &keys).unwrap_or_else(|fault| {
                            state.fail(Invariant::DeclaredKeys, fault.0);
                            Reply::Nil
                        }));
                    });
                let lock_until = state.primary.ttl_of(&k.lock).flatten();
                if lost {
                    // The pipeline is sent again.
                    client.retried = true;
                } else if let Ok(Some(read)) = client
                    .acquisition
                    .as_ref()
                    .unwrap()
                    .plain_take()
                    .read(replies)
                {
                    let data = client.acquisition_mut().plain_read(read);
                    self.locked(state, &mut client, data, lock_until)
                } else {
                    self.next_attempt(&mut client, now)
                }
            }
            Phase::Attempt {
                queue_ms,
                read_if_busy,
            } => {
                let wait = Duration::from_millis(queue_ms as u64);
                if self.lock.lease.is_some() && !client.retried {
                    client.acquisition_mut().taking_at(|| instant(now));
                }
                let acquisition = client.acquisition.as_ref().unwrap();
                let reply = acquisition.attempt_call(wait, read_if_busy, |keys, args| {
                    state.primary.eval(&ACQUIRE_AND_READ, keys, args)
                });
                let reply = match reply {
                    Ok(reply) => reply,
                    Err(fault) => {
                        state.fail(Invariant::DeclaredKeys, fault.0);
                        return;
                    }
                };
                let lock_until = state.primary.ttl_of(&k.lock).flatten();
                if queue_ms > 0 && client.queued_as.is_none() {
                    client.queued_as = Some(state.queued_count);
                    state.queued_count += 1;
                }
                if !delivered(&mut client, lost) {
                    client.falls_back = self.fallback && client.phase == Phase::Cleanup;
                } else {
                    match client.acquisition_mut().attempt_replied(reply, wait) {
                        Ok(Attempt::Locked(data)) => {
                            self.locked(state, &mut client, data, lock_until)
                        }
                        Ok(Attempt::Busy(_)) if queue_ms == 0 => self.finish(&mut client),
                        Ok(Attempt::Busy(_)) => {
                            client.waited = true;
                            let piece = queue_ms;
                            client.phase = Phase::Blocked {
                                since: state.ticks,
                                until: now + piece,
                            };
                        }
                        Ok(Attempt::Rejected(..)) => {
                            self.reach(Feature::Rejected);
                            self.finish(&mut client)
                        }
                        Err(err) => state.fail(Invariant::Safety, format!("acquire reply: {err}")),
                    }
                }
            }
            Phase::Blocked { .. } => {
                // The list has an element (checked in `actions`): BLPOP pops it.
                let list = client.acquisition.as_ref().unwrap().wait_list().to_vec();
                let popped = match state
                    .primary
                    .call(&[b"LPOP".to_vec(), list.clone()], &[&list])
                {
                    Ok(Reply::Data(element)) => Some(element),
                    _ => None,
                };
                // A lost BLPOP reply is not repeated: the element is gone.
                let popped = if lost { None } else { popped };
                let lock_until = state.primary.ttl_of(&k.lock).flatten();
                match client.acquisition_mut().popped(popped) {
                    Ok(Some(data)) => self.locked(state, &mut client, data, lock_until),
                    _ => self.next_attempt(&mut client, now),
                }
            }
            Phase::Saving(op, pick) => {
                let held = &client.acquisition.as_ref().unwrap().held;
                let data = (client.read.unwrap() + 1).to_string();
                let read = client.read.unwrap().to_string();
                let server_now = state.primary.now_ms;
                let change = match pick {
                    Pick::Keep => Change::Keep,
                    Pick::Sliding => Change::Set(Lifetime::Sliding(SLIDING)),
                    Pick::Fixed => Change::Set(Lifetime::Until(server_now as u64 + FIXED_END_MS)),
                    Pick::Drop => Change::Drop,
                };
                let lifetime_before = state.primary.get_str(k.lifetime()).map(<[u8]>::to_vec);
                let at = instant(now);
                let mut save = |save, data: &str| {
                    held.save_call(
                        save,
                        data.as_bytes(),
                        DATA_TTL,
                        change,
                        at,
                        |script, args| {
                            held.with_release_keys(|keys| self.eval(state, script, keys, args))
                        },
                    )
                };
                let reply = match op {
                    Op::Write => save(Save::Write, &data),
                    Op::Touch => save(Save::Touch, &read),
                    Op::Destroy => held.destroy_call(at, |args| {
                        held.with_release_keys(|keys| {
                            self.eval(state, &DESTROY_AND_RELEASE, keys, args)
                        })
                    }),
                    Op::Release => unreachable!(),
                };
                let Some(reply) = reply else { return };
                // A save applied logs its secret at the head of `done` (a
                // fenced-off write does not).
                let mine = Some(held.secret().as_bytes());
                let applied = saver_before.as_deref() != mine
                    && last_saver(&state.primary).as_deref() == mine;
                // With a lease, an absent lock may be taken again by a save
                // within lock_expire of the take, if nobody saved since the
                // read (a failover may have undone saves the count has).
                let lease_lapsed = self.lock.lease.is_some() && owner_before.is_none();
                let leased = held.leased.as_ref();
                let within_cap = leased.is_some_and(|leased| {
                    now - client_ms_of(leased.taken_at) < self.lock.ttl.as_millis() as i64
                });
                let nobody_saved = client.saves_at_read == state.saves;
                let retake_allowed =
                    lease_lapsed && within_cap && (nobody_saved || state.failovers > 0);
                if applied && owner_before.as_deref() != mine && !retake_allowed {
                    state.fail(
                        Invariant::Safety,
                        format!("client {c}'s {op:?} applied without its lock"),
                    );
                }
                if !applied && owner_before.as_deref() == mine && state.failovers == 0 {
                    state.fail(
                        Invariant::Liveness,
                        format!("client {c}'s {op:?} refused while the lock held its secret"),
                    );
                }
                // The fence proves nobody saved: a renewal made the log last
                // (one naming the holder where there was none), or the
                // acquire script's take, or the log as read still lives.
                let provable = leased.is_some_and(|leased| leased.retake_fence.is_some())
                    && (client.renewed || client.log_until.is_some_and(|at| at > server_now));
                // (A holder whose lock a waiter broke is owed nothing.)
                if !applied
                    && lease_lapsed
                    && within_cap
                    && nobody_saved
                    && provable
                    && !client.broken
                    && state.failovers == 0
                {
                    state.fail(
                        Invariant::Liveness,
                        format!("client {c}'s {op:?} refused, its lease lapsed but nobody saved"),
                    );
                }
                if applied && lease_lapsed {
                    self.reach(Feature::Retake);
                    if leased.and_then(|leased| leased.retake_fence.as_deref())
                        == Some(format!("~{}", held.secret()).as_bytes())
                    {
                        self.reach(Feature::RetakeOnRenewalsLog);
                    }
                }
                if applied && self.lock.lease.is_some() {
                    state.saves += 1;
                }
                if applied && op != Op::Destroy {
                    // The lifetime this save asked for, as the application sees it.
                    let expected = match change {
                        Change::Set(lifetime) => Some(lifetime),
                        Change::Drop => None,
                        Change::Keep if client.read_missing => None,
                        Change::Keep => lifetime_before.as_deref().and_then(Lifetime::decode),
                    };
                    self.check_lifetime_applied(state, c, op, expected, server_now);
                    if let Change::Set(_) = change {
                        self.reach(Feature::Lifetime);
                    }
                }
                if applied {
                    client.applied_under_lock = true;
                    let expired = data_before.is_none() && state.data_expired;
                    if op == Op::Write
                        && !expired
                        && counter(data_before.as_deref()) != client.read.unwrap()
                    {
                        state.fail(
                            Invariant::NoLostUpdate,
                            format!(
                                "lost update: client {c} wrote {} over {:?}, having read {}",
                                data,
                                data_before.as_deref().map(String::from_utf8_lossy),
                                client.read.unwrap()
                            ),
                        );
                    }
                    if op == Op::Write {
                        state.data_expired = false;
                    }
                    if op == Op::Destroy {
                        // The writes before it are gone by right: a failover
                        // that brings them back or not rolls back the
                        // destroy, which the counts below check.
                        state.acked.clear();
                    }
                    // With write_replicas the WAIT behind the script holds the
                    // reply until a replica has it (counted only then: the
                    // counts would split states nothing else tells apart).
                    if op != Op::Touch && self.write_replicas {
                        state.applied += 1;
                        client.applied_as = state.applied;
                        state.replica = state.primary.clone();
                        state.replicated = state.applied;
                    }
                }
                if delivered(&mut client, lost) {
                    let acknowledged = match released(reply) {
                        Ok(released) => released.ours,
                        Err(err) => {
                            state.fail(Invariant::Safety, format!("save reply: {err}"));
                            return;
                        }
                    };
                    if !acknowledged && client.applied_under_lock && state.failovers == 0 {
                        state.fail(
                            Invariant::Liveness,
                            format!(
                                "client {c}'s {op:?} applied, but its repeat was not acknowledged"
                            ),
                        );
                    }
                    if acknowledged && !client.applied_under_lock {
                        state.fail(Invariant::Safety, format!(
                            "safety: client {c}'s {op:?} acknowledged but never applied under its lock"
                        ));
                    }
                    if acknowledged && op == Op::Write {
                        state.acked.push((c as u8, client.read.unwrap() + 1));
                    }
                    if acknowledged && op != Op::Touch {
                        state.acknowledged = state.acknowledged.max(client.applied_as);
                    }
                    self.finish(&mut client);
                }
            }
            Phase::ReleaseNative(op) => {
                let held = &client.acquisition.as_ref().unwrap().held;
                let deleted = state.primary.call(
                    &[
                        b"DELIFEQ".to_vec(),
                        k.lock.clone(),
                        held.secret().as_bytes().to_vec(),
                    ],
                    &[&k.lock],
                );
                let waiting = state
                    .primary
                    .call(&[b"ZCARD".to_vec(), k.queue().to_vec()], &[k.queue()]);
                // With a lease, its heartbeat goes in the same round trip.
                if let Some(beat) = held.heartbeat() {
                    let _ = state
                        .primary
                        .call(&[b"DEL".to_vec(), beat.to_vec()], &[beat]);
                }
                if let Ok(Reply::Int(1)) = deleted {
                    self.reach(Feature::Delifeq);
                }
                if !lost {
                    client.phase = match (deleted, waiting) {
                        (Ok(Reply::Int(1)), Ok(Reply::Int(0))) => {
                            self.finish(&mut client);
                            Phase::Idle
                        }
                        _ => Phase::ReleaseScript(op),
                    };
                }
            }
            Phase::ReleaseScript(_) | Phase::Cleanup => {
                let held = &client.acquisition.as_ref().unwrap().held;
                let reply = held.with_release_keys(|keys| {
                    self.eval(state, &RELEASE, keys, &[held.secret().as_bytes()])
                });
                if reply.is_none() {
                    return;
                }
                if lost && !client.retried {
                    client.retried = true;
                } else if std::mem::take(&mut client.falls_back) {
                    client.retried = false;
                    client.read = Some(counter(state.replica.get_str(&k.data)));
                    client.phase = Phase::ReadOnly;
                } else {
                    self.finish(&mut client);
                }
            }
            // Its close: nothing to let go of, no call.
            Phase::ReadOnly => self.finish(&mut client),
            Phase::Holding | Phase::Dead => unreachable!(),
        }
        state.clients[c] = client;
        self.after_call(state, c, owner_before);
    }

    /// After client `c`'s write or touch applied at server time `now`: the
    /// data and the lifetime key expire as `expected` says.
    fn check_lifetime_applied(
        &self,
        state: &mut State,
        c: usize,
        op: Op,
        expected: Option<Lifetime>,
        now: i64,
    ) {
        let k = keys();
        let want_at = match expected {
            Some(Lifetime::Sliding(ttl)) => now + ttl.as_millis() as i64,
            Some(Lifetime::Until(at)) => at as i64,
            None => now + DATA_TTL.as_millis() as i64,
        };
        let data_at = state.primary.ttl_of(&k.data).flatten();
        let life = state
            .primary
            .keys
            .get(k.lifetime())
            .map(|(value, at)| (value.clone(), *at));
        let life_wanted = expected.map(|l| (server::Value::Str(l.encode()), Some(want_at)));
        if data_at != Some(want_at) || life != life_wanted {
            let why = format!(
                "client {c}'s {op:?} for {expected:?} left the data expiring at {data_at:?} \
                 and the lifetime key {life:?}, not at {want_at}"
            );
            state.fail(Invariant::Lifetime, why);
        }
    }

    /// History checks after client `c`'s call changed the lock.
    fn after_call(&self, state: &mut State, c: usize, owner_before: Option<Vec<u8>>) {
        let owner = lock_owner(&state.primary);
        if owner == owner_before.as_deref() {
            return;
        }
        // Handed to another client by this call: the first live waiter in line gets it.
        if let Some((to, _)) = owner.and_then(client_of)
            && to != c
        {
            let queued_as = state.clients[to].queued_as;
            let overtaken = state.clients.iter().enumerate().any(|(w, waiter)| {
                w != to
                    && waiter.phase != Phase::Dead
                    && matches!(waiter.phase, Phase::Blocked { .. } | Phase::Attempt { .. })
                    && waiter.queued_as.is_some()
                    && queued_as.is_none_or(|q| waiter.queued_as < Some(q))
                    // A waiter whose wait ended has left the queue by deadline.
                    && waiter.deadline.is_none_or(|d| d > state.client_ms(self.tick_ms))
            });
            // A failover may lose queue entries that had not replicated yet.
            if overtaken && state.clients[to].phase != Phase::Dead && state.failovers == 0 {
                state.fail(
                    Invariant::Fifo,
                    format!("FIFO: the lock went to client {to} past an earlier live waiter"),
                );
            }
        }
    }

    /// Recomputes the stall clock and checks every invariant that looks at
    /// one state.
    fn check(&self, state: &mut State) {
        let now = state.client_ms(self.tick_ms);
        let k = keys();
        // No leftovers.
        // A waiter's heartbeat lasts through its wait and a backstop.
        let helper_bound = match self.lock.lease {
            Some(_) => backstop(&self.lock).as_millis() as i64,
            None => 0,
        } + (self.lock.ttl.as_millis() as i64)
            .max(self.piece_ms() + 2 * self.hand_over_ms());
        for (key, (_, at)) in state.primary.keys.iter() {
            match at {
                None => state.violation.get_or_insert((
                    Invariant::NoLeftovers,
                    format!("{} has no TTL", String::from_utf8_lossy(key)),
                )),
                // A failover's clock step back stretches every TTL by the step.
                Some(at)
                    if *key != k.data
                        && *key != k.lifetime()
                        && at - state.primary.now_ms > helper_bound + state.skew.abs() =>
                {
                    state.violation.get_or_insert((
                        Invariant::NoLeftovers,
                        format!(
                            "{} lives {} ms more",
                            String::from_utf8_lossy(key),
                            at - state.primary.now_ms
                        ),
                    ))
                }
                _ => continue,
            };
        }
        // Lifetime: its key expires with the data, and only phpredis's
        // destroy leaves it alone.
        match (
            state.primary.keys.get(k.lifetime()),
            state.primary.keys.get(&k.data),
        ) {
            (Some((_, life_at)), Some((_, data_at))) if life_at != data_at => {
                let why =
                    format!("the lifetime key expires at {life_at:?}, the data at {data_at:?}");
                state.fail(Invariant::Lifetime, why);
            }
            (Some(_), None) if state.foreign_destroys == 0 => {
                state.fail(Invariant::Lifetime, "a lifetime key without data".into());
            }
            _ => {}
        }
        // Mutual exclusion: nobody takes a lock from a live holder before its
        // TTL ran out (a failover may: it is checked only before one).
        if state.failovers == 0 {
            let owner = lock_owner(&state.primary);
            for (c, client) in state.clients.iter().enumerate() {
                // (A client saving may have released already, its reply lost.)
                let holding = client.phase == Phase::Holding && !client.forked;
                let mine = client
                    .acquisition
                    .as_ref()
                    .map(|a| a.held.secret().as_bytes());
                if holding
                    && !client.broken
                    && client
                        .lock_until
                        .is_some_and(|until| until > state.primary.now_ms)
                    && owner != mine
                {
                    let why =
                        format!("client {c} holds the lock, which went to another before its TTL");
                    state
                        .violation
                        .get_or_insert((Invariant::MutualExclusion, why));
                    break;
                }
            }
        }
        // The lease cap: a lock lives at most its backstop (lock_expire and
        // a lease) from the call that took it, or for a hand-over from the
        // attempt before it (+ a piece and the hand-over timeout, within
        // which a release hands it on while the waiter's deadline lasts).
        if self.lock.lease.is_some() && state.failovers == 0 {
            let owner = lock_owner(&state.primary).and_then(client_of);
            let expiry = state.primary.ttl_of(&k.lock).flatten();
            if let (Some((o, n)), Some(expiry)) = (owner, expiry)
                && let Some(acquisition) = &state.clients[o].acquisition
                && let Some(leased) = &acquisition.held.leased
                && state.clients[o].started == n + 1
            {
                let taken = client_ms_of(leased.taken_at) + SERVER_START_MS;
                let cap = taken
                    + backstop(&self.lock).as_millis() as i64
                    + self.piece_ms()
                    + self.hand_over_ms();
                if expiry > cap {
                    let why = format!("client {o}'s lock expires at {expiry}, past its cap {cap}");
                    state.fail(Invariant::LeaseCap, why);
                }
            }
        }
        // Bounded delay: a live waiter and a lock that no live client holds or waits for.
        let live_waiter = state
            .clients
            .iter()
            .any(|w| matches!(w.phase, Phase::Blocked { .. } | Phase::Attempt { .. }));
        let owner = lock_owner(&state.primary);
        let owner_client = owner.and_then(client_of);
        let orphan = match owner_client {
            None => owner.is_none().then_some(self.piece_ms()),
            Some((o, n)) => {
                let holder = &state.clients[o];
                let current = holder.started == n + 1 && holder.acquisition.is_some();
                if holder.phase != Phase::Dead && current {
                    None
                } else {
                    let ttl = match state.primary.ttl_of(&k.lock) {
                        Some(Some(at)) => at - state.primary.now_ms,
                        _ => 0,
                    };
                    // With a lease too: when a waiter breaks a dead
                    // holder's lock is the serving model's to bound.
                    let by_ttl = ttl + self.piece_ms();
                    if holder.phase == Phase::Dead && current && holder.read.is_none() {
                        // Handed to a waiter that died before taking it; with a
                        // lease, maybe taken by it with the reply lost, which
                        // its backstop ends.
                        let handed = self.hand_over_ms() + self.piece_ms();
                        Some(if self.lock.lease.is_some() {
                            handed.max(by_ttl)
                        } else {
                            handed
                        })
                    } else {
                        Some(by_ttl)
                    }
                }
            }
        };
        state.stall = match (live_waiter, orphan) {
            (true, Some(bound)) => match state.stall.take() {
                Some((was, deadline)) if was.as_deref() == owner => Some((was, deadline)),
                _ => Some((owner.map(<[u8]>::to_vec), now + bound + self.tick_ms)),
            },
            _ => None,
        };
        if let Some((_, deadline)) = &state.stall
            && now > *deadline
        {
            let why = format!("bounded delay: a live waiter stalled past {deadline} ms");
            state.fail(Invariant::BoundedDelay, why);
        }
    }

    fn live(client: &Client) -> bool {
        client.phase != Phase::Dead
    }

    /// The client's watchdog has a renewal to send at `now`: it holds a
    /// lease, within `lock_expire` of its take (a forked child has none).
    fn renews(&self, client: &Client, now: i64) -> bool {
        self.lock.lease.is_some()
            && !client.forked
            && client.acquisition.as_ref().is_some_and(|acquisition| {
                let lease = acquisition.held.lease();
                lease.is_some_and(|lease| lease.renewal_call(instant(now), |_, _, _| ()).is_some())
            })
    }

    /// Client `c`'s watchdog renews its lease with [`RENEW_LEASE`](super::scripts::RENEW_LEASE).
    fn renew(&self, state: &mut State, c: usize) {
        let now = state.client_ms(self.tick_ms);
        let k = keys();
        let touched = |server: &Server| {
            [k.lock.as_slice(), k.done()].map(|key| server.keys.get(key).cloned())
        };
        let before = touched(&state.primary);
        let acquisition = state.clients[c].acquisition.clone().unwrap();
        let lease = acquisition.held.lease().unwrap();
        let reply = lease.renewal_call(instant(now), |script, keys, args| {
            self.eval(state, script, keys, args)
        });
        let after = touched(&state.primary);
        let mine = acquisition.held.secret().as_bytes();
        if after != before && lock_owner(&state.primary) != Some(mine) {
            state.fail(
                Invariant::Safety,
                format!("client {c}'s renewal changed a lock it does not hold, or its log"),
            );
        }
        if let Some(Some(Reply::Int(1))) = reply {
            self.reach(Feature::Renewal);
            state.clients[c].lock_until = state.primary.ttl_of(&k.lock).flatten();
            state.clients[c].renewed = true;
        }
    }

    /// The heartbeat of the holder `client` waits next behind, if it has one.
    fn heartbeat_ahead(&self, state: &State, client: &Client) -> Option<(String, Vec<u8>)> {
        let owner = client.acquisition.as_ref()?.next_behind()?;
        let beat = state.primary.get_str(&keys().beat(owner.as_bytes()))?;
        Some((owner.to_owned(), beat.to_vec()))
    }

    fn breakable(&self, state: &State, client: &Client) -> bool {
        state.breaks < self.breaks && self.heartbeat_ahead(state, client).is_some()
    }

    /// Client `c`, a waiter, breaks the lock of the holder it waits behind
    /// with [`BREAK_LOCK`](super::scripts::BREAK_LOCK), as `watch_holder`
    /// does once its chain says so.
    fn break_lock(&self, state: &mut State, c: usize) {
        let client = state.clients[c].clone();
        let Some((owner, seen)) = self.heartbeat_ahead(state, &client) else {
            return;
        };
        let reply = break_call(keys(), &owner, &seen, |script, keys, args| {
            self.eval(state, script, keys, args)
        });
        if reply == Some(Reply::Int(1)) {
            state.breaks += 1;
            self.reach(Feature::Break);
            if let Some((o, n)) = client_of(owner.as_bytes())
                && state.clients[o].started == n + 1
            {
                state.clients[o].broken = true;
            }
        }
    }

    /// Notes the saves applied when a hand-over gave the lock to a waiter
    /// (counted with a lease only).
    fn note_hand_over(&self, state: &mut State) {
        if self.lock.lease.is_none() {
            return;
        }
        let Some((o, n)) = lock_owner(&state.primary).and_then(client_of) else {
            return;
        };
        let saves = state.saves;
        let client = &mut state.clients[o];
        if client.started == n + 1
            && client.handed_saves.is_none()
            && matches!(client.phase, Phase::Blocked { .. } | Phase::Attempt { .. })
        {
            client.handed_saves = Some(saves);
        }
    }

    /// Client `c`, a child forked while its parent held the lock, lets go of
    /// the session through the real [`SessionHandler`], holding the lock it
    /// inherited: `op`'s hook (a write, a touch, a destroy, or none), then
    /// close, as PHP's session module calls them, and exits. The handler's
    /// rule: the lock is the parent's, so none of it makes a call, and the
    /// child's write or destroy is refused, never acknowledged.
    fn forked_child_lets_go(&self, state: &mut State, c: usize, op: Op) {
        static INI: LazyLock<Ini> = LazyLock::new(Ini::defaults);
        let client = &state.clients[c];
        let held = client
            .acquisition
            .as_ref()
            .unwrap()
            .held
            .as_forked_child_has_it();
        let read = client.read.unwrap();
        let mut settings = Settings::load(&*INI, Failover::None);
        settings.lock = Some(self.lock.clone());
        settings.session_ttl = DATA_TTL;
        settings.early_refresh = self.refresh;
        let node = Node::holding(state.primary.clone());
        let mut handler = SessionHandler::with_store(node.clone(), b"".as_slice(), settings, &*INI)
            .with_lock(held);
        let answered_right = match op {
            Op::Write => handler
                .write(SID, (read + 1).to_string().as_bytes())
                .is_err(),
            Op::Destroy => handler.destroy(SID).is_err(),
            // An unchanged session is let go of silently.
            Op::Touch => handler
                .update_timestamp(SID, read.to_string().as_bytes())
                .is_ok(),
            Op::Release => true,
        } && handler.close().is_ok();
        let after = node.server().clone();
        if after != state.primary {
            let why = format!("client {c}, a forked child, made a call with its parent's lock");
            state.fail(Invariant::Safety, why);
        }
        if !answered_right {
            let why = format!(
                "client {c}, a forked child: its {op:?} not answered as the rule says (a write or destroy refused, a touch let go of)"
            );
            state.fail(Invariant::Safety, why);
        }
        state.primary = after;
        state.clients[c].phase = Phase::Dead;
    }
}

impl Model for LockModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let server = Server {
            now_ms: SERVER_START_MS,
            ..Server::default()
        };
        let client = Client {
            phase: Phase::Idle,
            acquisition: None,
            started: 0,
            plain_first: true,
            deadline: None,
            waited: false,
            read: None,
            read_missing: false,
            falls_back: false,
            retried: false,
            applied_under_lock: false,
            lock_until: None,
            queued_as: None,
            applied_as: 0,
            forked: false,
            saves_at_read: 0,
            renewed: false,
            log_until: None,
            broken: false,
            handed_saves: None,
        };
        let mut clients = vec![client.clone(); self.acquisitions.len()];
        // Room for the children forks make: none yet.
        let unborn = Client {
            phase: Phase::Dead,
            ..client
        };
        clients.extend(std::iter::repeat_n(unborn, usize::from(self.forks)));
        vec![State {
            primary: server.clone(),
            replica: server,
            ticks: 0,
            skew: 0,
            clients,
            crashes: 0,
            breaks: 0,
            lost: 0,
            failovers: 0,
            foreign_destroys: 0,
            data_expired: false,
            queued_count: 0,
            acked: Vec::new(),
            acked_rolled_back: 0,
            applied: 0,
            replicated: 0,
            acknowledged: 0,
            forks: 0,
            saves: 0,
            stall: None,
            violation: None,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.violation.is_some() {
            return;
        }
        let now = state.client_ms(self.tick_ms);
        let mut instant = false;
        for (c, client) in state.clients.iter().enumerate() {
            let c8 = c as u8;
            match &client.phase {
                Phase::Dead => continue,
                Phase::Idle
                    if self
                        .acquisitions
                        .get(c)
                        .is_none_or(|&n| client.started == n) =>
                {
                    continue;
                }
                Phase::Idle => actions.push(Action::Step(c8)),
                // A forked child lets go of its parent's session each way
                // PHP may, whatever the parent does.
                Phase::Holding if client.forked => {
                    actions.extend(Op::ALL.map(|op| Action::Save(c8, op, Pick::Keep)));
                }
                // What to do, and when, is the holder's choice.
                Phase::Holding => {
                    for &op in &self.ops {
                        let picks: &[Pick] = match op {
                            Op::Write | Op::Touch if self.lifetimes => {
                                &[Pick::Keep, Pick::Sliding, Pick::Fixed, Pick::Drop]
                            }
                            _ => &[Pick::Keep],
                        };
                        actions.extend(picks.iter().map(|&pick| Action::Save(c8, op, pick)));
                    }
                    if state.forks < self.forks {
                        actions.push(Action::Fork(c8));
                    }
                    if self.renews(client, now) {
                        actions.push(Action::Renew(c8));
                    }
                }
                // A read-only request closes when it likes; it never saves.
                Phase::ReadOnly => actions.push(Action::Step(c8)),
                Phase::Blocked { since, until } => {
                    if self.breakable(state, client) {
                        actions.push(Action::Break(c8));
                    }
                    let list = client.acquisition.as_ref().unwrap().wait_list();
                    if state.primary.keys.contains_key(list) {
                        actions.push(Action::Step(c8));
                        if state.lost < self.lost_replies {
                            actions.push(Action::StepLost(c8));
                        }
                        instant = true;
                    }
                    // It ends in a later tick than it began (a timeout, or
                    // -MOVED or -UNBLOCKED from a cluster change), by its timeout.
                    if *since < state.ticks {
                        actions.push(Action::PieceEnds(c8));
                    }
                    if now + self.tick_ms > *until {
                        instant = true;
                    }
                }
                _ => {
                    instant = true;
                    actions.push(Action::Step(c8));
                    if state.lost < self.lost_replies {
                        actions.push(Action::StepLost(c8));
                    }
                    // A save in flight, or repeated after a lost reply: the
                    // watchdog still renews until the save returns.
                    if matches!(client.phase, Phase::Saving(..)) && self.renews(client, now) {
                        actions.push(Action::Renew(c8));
                    }
                }
            }
            if state.crashes < self.crashes && client.phase != Phase::Idle && Self::live(client) {
                actions.push(Action::Crash(c8));
            }
        }
        // phpredis destroys the session while nobody holds its lock.
        if state.foreign_destroys < self.foreign_destroys
            && state.primary.keys.contains_key(&keys().data)
            && lock_owner(&state.primary).is_none()
        {
            actions.push(Action::ForeignDestroy);
        }
        if state.failovers < self.failovers {
            if state.replica != state.primary {
                actions.push(Action::Replicate);
            }
            actions.push(Action::Failover(self.tick_ms));
            actions.push(Action::Failover(-self.tick_ms));
        }
        if !instant && state.ticks < self.max_ticks {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Tick => {
                state.ticks += 1;
                state.primary.now_ms += self.tick_ms;
                state.replica.now_ms += self.tick_ms;
                let had_data = state.primary.keys.contains_key(&keys().data);
                state.primary.expire_keys();
                if had_data && !state.primary.keys.contains_key(&keys().data) {
                    state.data_expired = true;
                }
                state.replica.expire_keys();
            }
            Action::Save(c, op, _) if state.clients[usize::from(c)].forked => {
                self.forked_child_lets_go(&mut state, usize::from(c), op);
            }
            Action::Save(c, op, pick) => {
                state.clients[usize::from(c)].phase = match (op, self.lock.release) {
                    (Op::Release, ReleaseCommand::Eval) => Phase::ReleaseScript(op),
                    (Op::Release, _) => Phase::ReleaseNative(op),
                    _ => Phase::Saving(op, pick),
                };
            }
            Action::ForeignDestroy => {
                state.foreign_destroys += 1;
                state.primary.keys_mut().remove(&keys().data);
            }
            Action::Step(c) | Action::StepLost(c) => {
                let lost = matches!(action, Action::StepLost(_));
                let c = usize::from(c);
                if lost {
                    state.lost += 1;
                    self.reach(Feature::LostReply);
                }
                self.step(&mut state, c, lost);
            }
            Action::PieceEnds(c) => {
                let c = usize::from(c);
                let now = state.client_ms(self.tick_ms);
                let mut client = state.clients[c].clone();
                self.next_attempt(&mut client, now);
                state.clients[c] = client;
            }
            Action::Crash(c) => {
                self.reach(Feature::Crash);
                state.crashes += 1;
                let client = &mut state.clients[usize::from(c)];
                client.phase = Phase::Dead;
            }
            Action::Replicate => {
                state.replica = state.primary.clone();
                state.replicated = state.applied;
            }
            Action::Renew(c) => self.renew(&mut state, usize::from(c)),
            Action::Break(c) => self.break_lock(&mut state, usize::from(c)),
            Action::Fork(c) => {
                self.reach(Feature::Fork);
                let child = self.acquisitions.len() + usize::from(state.forks);
                state.clients[child] = Client {
                    forked: true,
                    ..state.clients[usize::from(c)].clone()
                };
                state.forks += 1;
            }
            Action::Failover(skew) => {
                self.reach(Feature::Failover);
                state.failovers += 1;
                let mut promoted = state.replica.clone();
                promoted.now_ms = state.primary.now_ms + skew;
                promoted.time_offset = state.primary.time_offset + 500;
                promoted.expire_keys();
                state.skew = skew;
                state.primary = promoted;
                state.replica = state.primary.clone();
                let kept = counter(state.primary.get_str(&keys().data));
                let lost = state
                    .acked
                    .iter()
                    .filter(|(_, value)| *value > kept)
                    .count();
                if lost > 0 && self.write_replicas {
                    state.fail(
                        Invariant::Failover,
                        format!("failover: {lost} acknowledged writes rolled back"),
                    );
                }
                state.acked_rolled_back += lost as u8;
                if self.write_replicas && state.acknowledged > state.replicated {
                    state.fail(
                        Invariant::Failover,
                        "failover: an acknowledged destroy rolled back".into(),
                    );
                }
                state.applied = state.replicated;
            }
        }
        self.note_hand_over(&mut state);
        self.check(&mut state);
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            holds!("safety", Invariant::Safety),
            holds!("mutual exclusion", Invariant::MutualExclusion),
            holds!("no lost update", Invariant::NoLostUpdate),
            holds!("failover", Invariant::Failover),
            holds!("bounded delay", Invariant::BoundedDelay),
            holds!("fifo", Invariant::Fifo),
            holds!("declared keys", Invariant::DeclaredKeys),
            holds!("no leftovers", Invariant::NoLeftovers),
            holds!("lifetime", Invariant::Lifetime),
            holds!("liveness", Invariant::Liveness),
            holds!("lease cap", Invariant::LeaseCap),
            // The model does reach the end of a busy session.
            Property::sometimes(
                "every acquisition wrote",
                |model: &LockModel, state: &State| {
                    state.acked.len()
                        == model
                            .acquisitions
                            .iter()
                            .map(|&n| usize::from(n))
                            .sum::<usize>()
                },
            ),
            // With fallback, a failed acquire does reach the replica's data.
            Property::sometimes("a session served read-only", |_, state: &State| {
                state
                    .clients
                    .iter()
                    .any(|client| client.phase == Phase::ReadOnly)
            }),
        ]
    }
}

/// Whether a call's reply arrived. A lost one is repeated once, as the
/// cluster client does on a broken connection; a second loss fails the call.
fn delivered(client: &mut Client, lost: bool) -> bool {
    if !lost {
        client.retried = false;
        return true;
    }
    if client.retried {
        client.phase = Phase::Cleanup;
    }
    client.retried = !client.retried;
    false
}

/// Longer than any configuration takes, also on a loaded machine (the longest
/// takes about 65 s alone; before the script memo, 300 s alone took 665 s with
/// the test command's suites and other work beside it): a check cut short fails.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(1500);

/// Checks a model to the end and returns the checker, for tests to read.
/// One thread: `scripts/test.sh` runs the checker beside the cluster tests,
/// whose timed waits must not lose both cores to it.
pub fn check(model: LockModel) -> impl Checker<LockModel> {
    model
        .checker()
        .threads(1)
        .timeout(CHECK_TIMEOUT)
        .spawn_bfs()
        .join()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    pub(super) fn settings(ttl_ms: u64, retries: u64) -> LockSettings {
        LockSettings {
            ttl: Duration::from_millis(ttl_ms),
            wait: Duration::from_millis(1000),
            retries: Some(retries),
            failure_readonly: false,
            release: ReleaseCommand::Eval,
            wait_notice: None,
            max_waiters: None,
            lease: None,
        }
    }

    fn run(name: &str, model: LockModel) -> Option<String> {
        let fallback = model.fallback;
        let started = Instant::now();
        let checker = check(model);
        let model = checker.model();
        let features = model.features();
        let report = format!(
            "{name}: {} states ({} unique), depth {}, {:.1} s, reached {features:?}",
            checker.state_count(),
            checker.unique_state_count(),
            checker.max_depth(),
            started.elapsed().as_secs_f64()
        );
        println!("{report}");
        assert!(
            started.elapsed() < CHECK_TIMEOUT,
            "the check did not finish"
        );
        let mut found = checker.discoveries();
        let every_acquisition_wrote = found.remove("every acquisition wrote").is_some();
        let served_read_only = found.remove("a session served read-only").is_some();
        if found.is_empty() {
            for feature in features {
                assert!(model.reached(feature), "no run reached {feature:?}");
            }
            assert!(
                every_acquisition_wrote,
                "no run where every acquisition wrote"
            );
            assert_eq!(
                served_read_only, fallback,
                "a session served read-only: reached only with fallback"
            );
        }
        let mut found: Vec<_> = found.into_iter().collect();
        found.sort_by_key(|(name, _)| *name);
        let traces: Vec<String> = found
            .into_iter()
            .map(|(name, path)| {
                let states = path.into_vec();
                let mut trace = String::new();
                // Each action, then what it left: the lock's owner, the data,
                // and each client's phase (c<client>.<acquisition>).
                for window in states.windows(2) {
                    let ((before, action), (after, _)) = (&window[0], &window[1]);
                    let owner = lock_owner(&after.primary).and_then(client_of);
                    let data = after
                        .primary
                        .get_str(&keys().data)
                        .map(String::from_utf8_lossy);
                    let phases: Vec<String> = after
                        .clients
                        .iter()
                        .map(|client| format!("{:?}", client.phase))
                        .collect();
                    trace += &format!(
                        "t={} {:?} -> lock {:?} data {:?} [{}]\n",
                        before.ticks,
                        action.as_ref().unwrap(),
                        owner,
                        data,
                        phases.join(", ")
                    );
                }
                trace += &format!("{name}: {:?}\n", states.last().unwrap().0.violation);
                trace
            })
            .collect();
        (!traces.is_empty()).then(|| traces.join("\n"))
    }

    pub(super) fn model(acquisitions: Vec<u8>, ttl_ms: u64, max_ticks: u32) -> LockModel {
        LockModel {
            acquisitions,
            lock: settings(ttl_ms, 10),
            ops: vec![Op::Write],
            crashes: 1,
            breaks: 0,
            lost_replies: 0,
            failovers: 0,
            write_replicas: false,
            fallback: false,
            lifetimes: false,
            refresh: false,
            foreign_destroys: 0,
            forks: 0,
            tick_ms: 1000,
            max_ticks,
            reached: Arc::default(),
        }
    }

    /// [`model`] with a lease of `lease_ms` under `lock_expire` of `ttl_ms`.
    pub(super) fn lease_model(
        acquisitions: Vec<u8>,
        lease_ms: u64,
        ttl_ms: u64,
        max_ticks: u32,
    ) -> LockModel {
        let mut model = model(acquisitions, ttl_ms, max_ticks);
        model.lock.lease = Some(Duration::from_millis(lease_ms));
        model
    }

    /// `base` letting go every way: write, touch, destroy, and release
    /// alone (DELIFEQ first, as with lock_release_cmd=delifeq); no crash.
    pub(super) fn letting_go_every_way(base: LockModel) -> LockModel {
        let mut model = LockModel {
            ops: vec![Op::Write, Op::Touch, Op::Destroy, Op::Release],
            crashes: 0,
            ..base
        };
        model.lock.release = ReleaseCommand::Delifeq;
        model
    }

    pub(super) fn holds(name: &str, model: LockModel) {
        if let Some(traces) = run(name, model) {
            panic!("{traces}");
        }
    }

    /// Three clients, one of them taking the lock twice, a crash anywhere.
    #[test]
    #[ignore = "exhaustive, minutes: scripts/test.sh --all runs it, optimised"]
    fn three_clients_and_a_crash() {
        holds(
            "3 clients, 2+1+1 acquisitions, 1 crash, 6 s",
            model(vec![2, 1, 1], 5000, 6),
        );
    }

    /// Long enough for the waiters' own entries to expire after a hand-over
    /// to a waiter that died (a lock TTL past the clock's end).
    #[test]
    #[ignore = "exhaustive, minutes: scripts/test.sh --all runs it, optimised"]
    fn a_dead_waiter_handed_the_lock() {
        holds(
            "3 clients, 1 crash, 9 s, 20 s lock",
            model(vec![1, 1, 1], 20000, 9),
        );
    }

    /// Replies lost after the server applied the call, twice in a row too,
    /// and locks that expire under their holders.
    #[test]
    #[ignore = "exhaustive, minutes: scripts/test.sh --all runs it, optimised"]
    fn lost_replies_and_expiring_locks() {
        let twice = LockModel {
            lost_replies: 2,
            crashes: 0,
            ..model(vec![1, 1, 1], 2000, 5)
        };
        holds("3 clients, 2 lost replies, 2 s lock", twice);
        let with_a_crash = LockModel {
            lost_replies: 1,
            ..model(vec![2, 1, 1], 2000, 4)
        };
        holds(
            "3 clients, 2+1+1 acquisitions, 1 crash, 1 lost reply, 2 s lock",
            with_a_crash,
        );
    }

    /// Every way a holder lets go: write, touch, destroy, and release alone
    /// (DELIFEQ first, as with lock_release_cmd=delifeq).
    #[test]
    #[ignore = "exhaustive, minutes: scripts/test.sh --all runs it, optimised"]
    fn every_way_to_let_go() {
        let model = letting_go_every_way(model(vec![1, 1, 1], 2000, 4));
        holds("3 clients, 4 ways to let go, DELIFEQ, 4 s", model);
    }

    /// failover=error: acquire calls that fail for good read the replica
    /// and serve the session read-only (beside a failover in the quick tier).
    #[test]
    #[ignore = "exhaustive, minutes: scripts/test.sh --all runs it, optimised"]
    fn failed_acquires_read_only_from_the_replica() {
        let three = LockModel {
            lost_replies: 2,
            crashes: 0,
            fallback: true,
            ..model(vec![1, 1, 1], 2000, 5)
        };
        holds("3 clients, 2 lost replies, 2 s lock, failover=error", three);
    }

    /// Session lifetimes: each write or touch sets a sliding one, a fixed end
    /// within the run, drops it or keeps what is stored; reads renew the TTL
    /// (early_refresh) or not; phpredis destroys the session while its lock
    /// is free, leaving the lifetime key behind.
    #[test]
    #[ignore = "exhaustive, minutes: scripts/test.sh --all runs it, optimised"]
    fn session_lifetimes() {
        for refresh in [false, true] {
            let model = LockModel {
                ops: vec![Op::Write, Op::Touch, Op::Destroy],
                lifetimes: true,
                refresh,
                foreign_destroys: 1,
                ..model(vec![2, 1], 3000, 5)
            };
            holds(
                &format!("2 clients, 2+1 acquisitions, lifetimes, early_refresh={refresh}"),
                model,
            );
        }
        let lost = LockModel {
            ops: vec![Op::Write, Op::Touch],
            lifetimes: true,
            refresh: true,
            lost_replies: 1,
            crashes: 0,
            ..model(vec![2, 1], 2000, 4)
        };
        holds(
            "2 clients, 2+1 acquisitions, lifetimes, early_refresh, 1 lost reply",
            lost,
        );
    }

    /// A failover to a replica with any prefix of the primary's history,
    /// its clock a second ahead or behind; acknowledged writes rolled back
    /// are counted without write_replicas and forbidden with it.
    #[test]
    #[ignore = "exhaustive, minutes: scripts/test.sh --all runs it, optimised"]
    fn a_failover() {
        for write_replicas in [false, true] {
            let writes = LockModel {
                failovers: 1,
                crashes: 0,
                write_replicas,
                ..model(vec![1, 1, 1], 3000, 5)
            };
            holds(
                &format!("3 clients, 1 failover, write_replicas={write_replicas}"),
                writes,
            );
            let destroys = LockModel {
                ops: vec![Op::Write, Op::Destroy],
                failovers: 1,
                crashes: 0,
                write_replicas,
                ..model(vec![2, 1], 3000, 5)
            };
            holds(
                &format!(
                    "2 clients, 2+1 acquisitions, writes and destroys, 1 failover, write_replicas={write_replicas}"
                ),
                destroys,
            );
        }
    }
}

/// A lease (issue 38): renewals at any tick or never, leases running out
/// under dead holders, re-takes in saves, the cap at lock_expire.
#[cfg(test)]
mod leases {
    use super::tests::{holds, lease_model, letting_go_every_way};
    use super::*;

    /// Three clients, a crash and a lost reply: a dead holder gives way
    /// within a lease, a repeat after a lost reply finds its re-take's save.
    #[test]
    #[ignore = "exhaustive, minutes: scripts/test.sh --all runs it, optimised"]
    fn three_clients_a_crash_and_a_lost_reply() {
        let model = LockModel {
            lost_replies: 1,
            ..lease_model(vec![1, 1, 1], 2000, 4000, 4)
        };
        holds(
            "3 clients, 2 s lease, 4 s lock_expire, 1 crash, 1 lost reply, 4 s",
            model,
        );
    }

    /// Ticks of 500 ms: a 1 s lease renewed twice a second or not, a
    /// hand-over's lease covering its piece.
    #[test]
    #[ignore = "exhaustive, minutes: scripts/test.sh --all runs it, optimised"]
    fn half_second_ticks() {
        let model = LockModel {
            tick_ms: 500,
            ..lease_model(vec![2, 1], 1000, 3000, 8)
        };
        holds(
            "2 clients, 2+1 acquisitions, 1 s lease, 3 s lock_expire, ticks of 500 ms, 1 crash, 4 s",
            model,
        );
    }

    /// Re-takes by a write, a touch and a destroy, and a release with DELIFEQ.
    #[test]
    #[ignore = "exhaustive, minutes: scripts/test.sh --all runs it, optimised"]
    fn every_way_to_let_go() {
        let model = letting_go_every_way(lease_model(vec![1, 1, 1], 2000, 4000, 3));
        holds(
            "3 clients, 4 ways to let go, DELIFEQ, 2 s lease, 4 s lock_expire, 3 s",
            model,
        );
    }

    /// A failover to a replica that lacks the lock or a save: the re-take
    /// after it, and no lost update.
    #[test]
    #[ignore = "exhaustive, minutes: scripts/test.sh --all runs it, optimised"]
    fn a_failover() {
        let model = LockModel {
            failovers: 1,
            crashes: 0,
            ..lease_model(vec![2, 1], 1000, 3000, 5)
        };
        holds(
            "2 clients, 2+1 acquisitions, 1 s lease, 3 s lock_expire, 1 failover, 5 s",
            model,
        );
    }
}

/// The quick tier: configurations of seconds each, 35 s of one core
/// together in the checked profile, for a contributor's test run
/// (`lock::model::quick --ignored`). Each checks every property, and
/// between them they reach every feature of the model (`run` asserts that
/// each one a configuration turns on is reached); a failover that hands a
/// lock back catches a write without its fence. `lock::model --ignored`
/// runs them with the rest (`lock::model::tests`), each configuration once.
#[cfg(test)]
mod quick {
    use super::tests::{holds, lease_model, letting_go_every_way, model};
    use super::*;

    /// A crash and a lost reply anywhere, and locks that expire under their holders.
    #[test]
    #[ignore = "exhaustive, seconds: the quick tier"]
    fn a_crash_and_a_lost_reply() {
        let model = LockModel {
            lost_replies: 1,
            ..model(vec![1, 1, 1], 2000, 4)
        };
        holds("3 clients, 1 crash, 1 lost reply, 2 s lock, 4 s", model);
    }

    /// Every way to let go, with DELIFEQ (see `every_way_to_let_go`).
    #[test]
    #[ignore = "exhaustive, seconds: the quick tier"]
    fn every_way_to_let_go_briefly() {
        let model = letting_go_every_way(model(vec![1, 1, 1], 2000, 3));
        holds("3 clients, 4 ways to let go, DELIFEQ, 3 s", model);
    }

    /// max_waiters = 1 with lock_failure_readonly, and a client that gives up.
    #[test]
    #[ignore = "exhaustive, seconds: the quick tier"]
    fn a_capped_queue_and_giving_up() {
        let mut model = model(vec![1, 1, 1], 5000, 6);
        model.lock.max_waiters = Some(1);
        model.lock.failure_readonly = true;
        model.lock.retries = Some(2);
        holds(
            "3 clients, max_waiters 1, read-only on failure, 2 s of waiting",
            model,
        );
    }

    /// Session lifetimes, with early_refresh or not, and phpredis's destroy
    /// (see `session_lifetimes`).
    #[test]
    #[ignore = "exhaustive, seconds: the quick tier"]
    fn session_lifetimes_briefly() {
        for refresh in [false, true] {
            let model = LockModel {
                ops: vec![Op::Write, Op::Touch, Op::Destroy],
                lifetimes: true,
                refresh,
                foreign_destroys: 1,
                ..model(vec![2, 1], 3000, 4)
            };
            holds(
                &format!("2 clients, 2+1 acquisitions, lifetimes, early_refresh={refresh}, 4 s"),
                model,
            );
        }
    }

    /// A holder forks (`pcntl_fork()`): its child lets go of the session
    /// every way through the real handler, whose rule makes none of it a
    /// call, so the parent's write or destroy still goes through and nothing
    /// the child does is acknowledged.
    #[test]
    #[ignore = "exhaustive, seconds: the quick tier"]
    fn a_holder_forks() {
        let model = LockModel {
            ops: vec![Op::Write, Op::Destroy, Op::Release],
            forks: 1,
            lost_replies: 1,
            ..model(vec![1, 1], 2000, 4)
        };
        holds("2 clients, 1 fork, 1 crash, 1 lost reply", model);
    }

    /// A failover can hand a lock back to a waiter queued before it, whose
    /// data is stale by then: the write's fence must refuse it.
    #[test]
    #[ignore = "exhaustive, seconds: the quick tier"]
    fn a_failover_hands_a_lock_back() {
        for write_replicas in [false, true] {
            let model = LockModel {
                failovers: 1,
                crashes: 0,
                write_replicas,
                ..model(vec![2, 1], 2000, 5)
            };
            holds(
                &format!(
                    "2 clients, 2+1 acquisitions, 1 failover, 2 s lock, write_replicas={write_replicas}"
                ),
                model,
            );
        }
    }

    /// A lease (issues 38, 48): renewals at any tick or never (lost, late,
    /// a frozen process), waiters breaking locks (a dead holder's, a live
    /// one's: when is the serving model's to bound), and a holder whose
    /// lock went without a save (broken back and forth, to nobody) saving
    /// with a re-take.
    #[test]
    #[ignore = "exhaustive, seconds: the quick tier"]
    fn a_lease_briefly() {
        holds(
            "2 clients, 2+1 acquisitions, 2 s lease, 4 s lock_expire, 1 crash, any breaks, 6 s",
            LockModel {
                breaks: u8::MAX,
                ..lease_model(vec![2, 1], 2000, 4000, 6)
            },
        );
    }

    /// failover=error: acquire calls that fail for good read the replica
    /// and serve the session read-only, beside a failover.
    #[test]
    #[ignore = "exhaustive, seconds: the quick tier"]
    fn failed_acquires_beside_a_failover() {
        let model = LockModel {
            lost_replies: 2,
            failovers: 1,
            crashes: 0,
            fallback: true,
            ..model(vec![1, 1], 2000, 4)
        };
        holds(
            "2 clients, 2 lost replies, 1 failover, failover=error",
            model,
        );
    }
}

/// The log of savers `<lock>_DONE`, a holder's fence, outlives the holder's
/// right to write (issue 39), whatever the TTLs: for each way a lock is
/// taken after a save (by the acquire script, handed over by each way of
/// letting go, with a lease a plain take and its first renewal), each lease
/// and `lock_expire`, the previous saver's as long or shorter, and a take
/// early or late in the log's life. The right's end is the client's own:
/// its lock's TTL as taken, or with a lease what is left of `lock_expire`
/// for a re-take. A save at its last millisecond must land. In `cargo test`:
/// the model's configurations that find a fence expiring early take minutes.
#[cfg(test)]
mod fence {
    use super::*;
    use crate::lock::HeldLock;

    /// How the holder comes to hold the lock after the last save.
    #[derive(Clone, Copy, Debug)]
    enum Taken {
        ByScript,
        /// Queued, and handed the lock by its holder letting go this way.
        HandedOver(Op),
        /// With a lease: `SET NX`, then its watchdog's first renewal this
        /// many ms in.
        PlainThenRenewed(i64),
    }

    /// One primary on the clients' clock (ms since the start).
    struct Primary(Server);

    impl Primary {
        fn at(&mut self, ms: i64) {
            self.0.now_ms = SERVER_START_MS + ms;
            self.0.expire_keys();
        }

        fn eval(
            &mut self,
            script: &crate::script::LuaScript,
            keys: &[&[u8]],
            args: &[&[u8]],
        ) -> Reply {
            self.0.eval(script, keys, args).expect("declared keys")
        }

        /// When `key` expires, in client ms (`None`: it is gone).
        fn expiry(&self, key: &[u8]) -> Option<i64> {
            self.0
                .ttl_of(key)
                .map(|at| at.expect("every key has a TTL") - SERVER_START_MS)
        }

        /// Takes the lock by script at `now` for `acquisition`, or queues it
        /// for long; whether it took it.
        fn attempt(&mut self, acquisition: &mut Acquisition, now: i64) -> bool {
            acquisition.taking_at(|| instant(now));
            let wait = Duration::from_secs(60);
            let reply = acquisition.attempt_call(wait, false, |keys, args| {
                Ok::<_, ()>(self.eval(&ACQUIRE_AND_READ, keys, args))
            });
            match acquisition.attempt_replied(reply.unwrap(), wait).unwrap() {
                Attempt::Locked(_) => true,
                Attempt::Busy(_) => false,
                Attempt::Rejected(..) => unreachable!("no cap on waiters"),
            }
        }

        /// `SET NX` and `GET`.
        fn plain_take(&mut self, acquisition: &mut Acquisition) {
            let mut replies = Vec::new();
            acquisition.plain_take().each_command(|command| {
                let keys: Vec<&[u8]> = command.get(1).into_iter().copied().collect();
                let command: Vec<Vec<u8>> = command.iter().map(|arg| arg.to_vec()).collect();
                replies.push(self.0.call(&command, &keys).expect("declared keys"));
            });
            let read = acquisition.plain_take().read(replies).unwrap();
            acquisition.plain_read(read.expect("a free lock"));
        }

        /// The holder lets go at `now` this way; whether its save landed.
        fn let_go(&mut self, held: &HeldLock, op: Op, now: i64) -> bool {
            let at = instant(now);
            let reply = match op {
                Op::Write | Op::Touch => {
                    let save = if op == Op::Write {
                        Save::Write
                    } else {
                        Save::Touch
                    };
                    held.save_call(save, b"1", DATA_TTL, Change::Keep, at, |script, args| {
                        held.with_release_keys(|keys| self.eval(script, keys, args))
                    })
                }
                Op::Destroy => held.destroy_call(at, |args| {
                    held.with_release_keys(|keys| self.eval(&DESTROY_AND_RELEASE, keys, args))
                }),
                Op::Release => held.with_release_keys(|keys| {
                    self.eval(&RELEASE, keys, &[held.secret().as_bytes()])
                }),
            };
            released(reply).unwrap().ours
        }
    }

    fn settings(expire_ms: u64, lease_ms: Option<u64>) -> LockSettings {
        LockSettings {
            ttl: Duration::from_millis(expire_ms),
            lease: lease_ms.map(|ms| Duration::from_millis(ms.min(expire_ms))),
            ..tests::settings(expire_ms, 10)
        }
    }

    /// Client `c`'s acquisition, started at `now`.
    fn acquisition(c: usize, lock: &LockSettings, now: i64) -> Acquisition {
        Acquisition::with_secret(keys().clone(), lock, None, secret(c, 0), instant(now))
    }

    /// The last save lands at 0 (client 0, with `saver`'s settings); then
    /// client 1, with `lock`, comes to hold the lock as `taken` says, `late`
    /// or early in that save's log's life. Checks the holder's fence
    /// against its right to write; a description of what broke.
    fn holds_the_right(
        saver: &LockSettings,
        lock: &LockSettings,
        taken: Taken,
        late: bool,
    ) -> Result<(), String> {
        let mut primary = Primary(Server::default());
        primary.at(0);
        let mut last = acquisition(0, saver, 0);
        assert!(primary.attempt(&mut last, 0));
        assert!(primary.let_go(&last.held, Op::Write, 0));
        let log_until = |primary: &Primary| primary.expiry(keys().done());
        let (holder, taken_at) = match taken {
            Taken::ByScript | Taken::PlainThenRenewed(_) => {
                let end = log_until(&primary).unwrap();
                let now = if late { end - 1 } else { 1 };
                primary.at(now);
                let mut holder = acquisition(1, lock, now);
                if let Taken::PlainThenRenewed(renewed_at) = taken {
                    primary.plain_take(&mut holder);
                    primary.at(now + renewed_at);
                    let lease = holder.held.lease().expect("a lease");
                    lease.renewal_call(instant(now + renewed_at), |script, keys, args| {
                        primary.eval(script, keys, args)
                    });
                } else {
                    assert!(primary.attempt(&mut holder, now));
                }
                (holder, now)
            }
            Taken::HandedOver(op) => {
                // After the last save, another holder's take; the holder
                // queues behind it.
                let mut handing = acquisition(2, saver, 1);
                primary.at(1);
                assert!(primary.attempt(&mut handing, 1));
                primary.at(2);
                let mut holder = acquisition(1, lock, 2);
                assert!(!primary.attempt(&mut holder, 2));
                let handing_until = primary.expiry(&keys().lock).unwrap();
                let now = if late { handing_until - 1 } else { 3 };
                primary.at(now);
                primary.let_go(&handing.held, op, now);
                let list = holder.wait_list().to_vec();
                let pushed = match primary.0.call(&[b"LPOP".to_vec(), list.clone()], &[&list]) {
                    Ok(Reply::Data(pushed)) => pushed,
                    other => return Err(format!("no hand-over: {other:?}")),
                };
                holder
                    .popped(Some(pushed))
                    .unwrap()
                    .expect("handed to the holder");
                (holder, 2)
            }
        };
        let now = primary.0.now_ms - SERVER_START_MS;
        let held = &holder.held;
        let right_until = match held.retake_ms(instant(now)) {
            Some(left) => {
                now + std::str::from_utf8(left.as_bytes())
                    .unwrap()
                    .parse::<i64>()
                    .unwrap()
            }
            None => primary
                .expiry(&keys().lock)
                .expect("the lock is the holder's"),
        };
        if right_until <= taken_at {
            return Err(format!("no right to write at all: until {right_until}"));
        }
        let fence_read = held.fence.as_ref().is_some_and(|fence| !fence.is_empty())
            || held
                .leased
                .as_ref()
                .is_some_and(|leased| leased.retake_fence.is_some());
        if fence_read && log_until(&primary).is_none_or(|until| until < right_until) {
            return Err(format!(
                "the fence lives until {:?}, the right to write until {right_until}",
                log_until(&primary)
            ));
        }
        primary.at(right_until - 1);
        if !primary.let_go(held, Op::Write, right_until - 1) {
            return Err(format!("a write at {} ms refused", right_until - 1));
        }
        Ok(())
    }

    #[test]
    fn the_fence_outlives_the_right_to_write() {
        let mut broken = Vec::new();
        let mut checked = 0;
        for expire_ms in [2000, 3000, 10_000] {
            for lease_ms in [None, Some(1000), Some(2000)] {
                let lock = settings(expire_ms, lease_ms);
                for saver_ms in [1000, expire_ms] {
                    let saver = settings(saver_ms, lease_ms);
                    let mut ways = vec![Taken::ByScript];
                    ways.extend(Op::ALL.map(Taken::HandedOver));
                    if let Some(lease) = lock.lease {
                        let lease = lease.as_millis() as i64;
                        ways.extend([1, lease - 1].map(Taken::PlainThenRenewed));
                    }
                    for taken in ways {
                        for late in [false, true] {
                            checked += 1;
                            if let Err(why) = holds_the_right(&saver, &lock, taken, late) {
                                broken.push(format!(
                                    "lock_expire {expire_ms} ms, lease {lease_ms:?}, the last saver's lock_expire {saver_ms} ms, {taken:?}, late {late}: {why}"
                                ));
                            }
                        }
                    }
                }
            }
        }
        assert!(
            broken.is_empty(),
            "{} of {checked}:\n{}",
            broken.len(),
            broken.join("\n")
        );
    }
}
