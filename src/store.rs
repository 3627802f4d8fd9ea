//! The storage interfaces the session logic runs on, and their implementation
//! on a Redis/Valkey cluster through our router ([`crate::cluster`]).
//!
//! Each thread keeps its clusters (slot map and connections) across requests:
//! a PHP-FPM worker connects once, a threaded SAPI never shares a socket
//! between threads. They are made on first use, never at module startup,
//! because FPM forks after startup.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use redis::{RedisError, Value};

use crate::budget;
use crate::cluster::{Cluster, ReadFrom, Request, Unreachable, error_kind, is_redirect};
use crate::config::{ConnectionConfig, NodeAddr};
use crate::keys::{LockKeys, hash_slot};
use crate::lifetime::Expiry;
use crate::link::{self, Lent};
use crate::resp::{Decimal, pack, packed, packed_size};
use crate::script::{LuaScript, no_script, script_command};
use crate::settings::{ReleaseCommand, ReplicaAck};
use crate::stats;

/// A reply, in the few shapes the session logic reads.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Nil,
    Int(i64),
    Data(Vec<u8>),
    Array(Vec<Reply>),
    Status,
}

impl Reply {
    /// The reply's type, for error texts that must not show its content
    /// (session data, key names with lock secrets).
    pub fn kind(&self) -> &'static str {
        match self {
            Reply::Nil => "nil",
            Reply::Int(_) => "integer",
            Reply::Data(_) => "string",
            Reply::Array(_) => "array",
            Reply::Status => "status",
        }
    }
}

/// Plain session data commands. Every command goes to the primary that owns
/// the key's slot.
pub trait SessionStore {
    /// Whether the requests from here on may fall back (`failover=error`, in
    /// `session_start()`'s hooks): requests to a primary leave part of the
    /// PHP call's time budget ([`crate::budget`]; [`fallback_reserve`]) to
    /// [`Self::read_fallback`], give up at once on `CLUSTERDOWN` or a refused
    /// primary, and fail with [`PrimaryUnreachable`].
    fn set_may_fall_back(&mut self, may_fall_back: bool);
    /// The session closed: with `persistent=0` its connections close too
    /// (the slot map stays), as phpredis frees its connection at the
    /// session's close, so that a long request after it holds none.
    fn session_closed(&mut self) {}
    /// GET of `key` where a request its primary could not serve can still be
    /// answered: the primary when it answered (`primary_answered`, a
    /// `CLUSTERDOWN`), else a replica of the slot whose link to the primary
    /// has not been down longer than `max_lag`. Within the budget.
    fn read_fallback(
        &mut self,
        key: &[u8],
        primary_answered: bool,
        max_lag: Duration,
    ) -> Result<(Option<Vec<u8>>, ReadFrom)>;
    /// GET, or GETEX with a new TTL when `refresh` is set.
    fn get(&mut self, key: &[u8], refresh: Option<Duration>) -> Result<Option<Vec<u8>>>;
    /// SET with EX.
    fn set(&mut self, key: &[u8], value: &[u8], ttl: Duration) -> Result<()>;
    /// [`Self::set`] with `WAIT` pipelined behind it: how many replicas acknowledged.
    fn set_acked(
        &mut self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
        ack: ReplicaAck,
    ) -> Result<u32>;
    /// EXPIRE; false when the key does not exist.
    fn expire(&mut self, key: &[u8], ttl: Duration) -> Result<bool>;
    /// GET of `key` and of `lifetime`, the session's lifetime key on its
    /// slot, in one round trip.
    fn get_with_lifetime(&mut self, key: &[u8], lifetime: &[u8]) -> Result<DataAndLifetime>;
    /// SET of `key` until `expiry`, and of its `lifetime` key to `value`
    /// until the same time (deleted for `None`), in one round trip, with
    /// `WAIT` behind them when `ack` asks: how many replicas acknowledged.
    fn set_with_lifetime(
        &mut self,
        key: &[u8],
        data: &[u8],
        expiry: Expiry,
        lifetime: (&[u8], Option<&[u8]>),
        ack: Option<ReplicaAck>,
    ) -> Result<Option<u32>>;
    /// EXPIRE (PEXPIREAT) of `key` and of its `lifetime` key until `expiry`,
    /// in one round trip: false when `key` does not exist.
    fn expire_with_lifetime(&mut self, key: &[u8], lifetime: &[u8], expiry: Expiry)
    -> Result<bool>;
    fn exists(&mut self, key: &[u8]) -> Result<bool>;
    /// DEL of keys that share a slot (a session's and its lifetime's).
    fn delete(&mut self, keys: &[&[u8]]) -> Result<()>;
    /// [`Self::delete`] with `WAIT` pipelined behind it: how many replicas acknowledged.
    fn delete_acked(&mut self, keys: &[&[u8]], ack: ReplicaAck) -> Result<u32>;
}

/// The plain take of a free lock, one pipeline with no script: `SET lock
/// secret NX PX`, GET of `data` (never GETEX: a session's own lifetime,
/// unknown here, sets its TTL, so the save renews it) and the kept part of
/// the log of savers (`GETRANGE` of its first [`LOG_KEPT_BYTES`]): the save
/// logs itself before it without reading it again, and with a lease its
/// newest entry is the fence of a re-take. The lease's renewals make the
/// log last, or make one (only while the lock is ours: to a holder that
/// read no log, a log made by a take that failed would read as a save). One
/// list of commands for the store and the models.
pub struct PlainTake<'a> {
    pub lock: &'a [u8],
    pub secret: &'a [u8],
    /// The lock's TTL in ms.
    pub lock_ms: &'a [u8],
    pub data: &'a [u8],
    /// The log of savers' key.
    pub log: &'a [u8],
    /// With a lease, the taker's heartbeat, made at '0' for the lock's TTL
    /// (sent even when the lock is busy: the acquire script's queueing then
    /// makes it anyway).
    pub beat: Option<&'a [u8]>,
}

/// What a plain take that took the lock read.
pub struct PlainRead {
    /// The session; `None`: missing.
    pub data: Option<Vec<u8>>,
    /// The kept part of the log of savers (empty: none).
    pub log: Vec<u8>,
}

/// How much of the log of savers a save keeps behind its own secret (the
/// scripts' `log_save_lua`): 7 secrets of 32 hex digits and their spaces.
pub const LOG_KEPT_BYTES: usize = 230;
/// GETRANGE's last offset for [`LOG_KEPT_BYTES`].
pub(crate) const LOG_KEPT_LAST: &[u8] = b"229";

/// How many commands, and replies, a plain take's pipeline has that [`PlainTake::read`] reads.
const PLAIN_TAKE_COMMANDS: usize = 3;

impl PlainTake<'_> {
    /// How many commands the pipeline has.
    pub fn commands(&self) -> usize {
        PLAIN_TAKE_COMMANDS + usize::from(self.beat.is_some())
    }

    /// Calls `command` with each command of the pipeline, in order.
    pub fn each_command(&self, mut command: impl FnMut(&[&[u8]])) {
        command(&[b"SET", self.lock, self.secret, b"NX", b"PX", self.lock_ms]);
        command(&[b"GET", self.data]);
        command(&[b"GETRANGE", self.log, b"0", LOG_KEPT_LAST]);
        if let Some(beat) = self.beat {
            command(&[b"SET", beat, b"0", b"PX", self.lock_ms]);
        }
    }

    /// What the pipeline's replies say: what it read when the lock was free
    /// and is now ours, `None` when it was busy.
    pub fn read(&self, replies: impl IntoIterator<Item = Reply>) -> Result<Option<PlainRead>> {
        let mut replies = replies.into_iter();
        let taken = replies.next() == Some(Reply::Status);
        let data = session_data(replies.next().context("missing reply to GET")?)?;
        let log = replies
            .next()
            .context("missing reply to GETRANGE of the log")?;
        let log = session_data(log)?.unwrap_or_default();
        Ok(taken.then_some(PlainRead { data, log }))
    }
}

/// A waiter's look at the lock it waits behind (see `lock::heartbeat`):
/// `LPOP` of the list its hand-over comes to, `GET` of the lock and of the
/// holder's heartbeat, pipelined.
pub struct LockPoll<'a> {
    pub list: &'a [u8],
    pub lock: &'a [u8],
    pub beat: &'a [u8],
}

/// What a [`LockPoll`] saw, and when on this process's clock.
pub struct Polled {
    pub pushed: Option<Vec<u8>>,
    pub owner: Option<Vec<u8>>,
    pub beat: Option<Vec<u8>>,
    pub sent: Instant,
    pub replied: Instant,
    /// The primary that answered, as the slot map names it.
    pub primary: Option<NodeAddr>,
}

/// What the lock protocol needs. All keys of one call share one slot.
pub trait LockStore {
    /// Runs a script on the primary of its keys' slot (EVALSHA, then EVAL on NOSCRIPT).
    fn eval(&mut self, script: &LuaScript, keys: &[&[u8]], args: &[&[u8]]) -> Result<Reply>;
    /// [`Self::eval`] with `WAIT` pipelined behind it on the same primary, in
    /// the same round trip: the reply, and how many replicas acknowledged.
    fn eval_acked(
        &mut self,
        script: &LuaScript,
        keys: &[&[u8]],
        args: &[&[u8]],
        ack: ReplicaAck,
    ) -> Result<(Reply, u32)>;
    /// The plain take in one round trip: what was read when the lock was
    /// free and is now ours, `None` when it was busy or the slot is moving
    /// (a migration may split the pipeline; the caller's next acquire
    /// recognises the secret if the SET ran).
    fn lock_and_read(&mut self, take: &PlainTake) -> Result<Option<PlainRead>>;
    /// BLPOP: blocks up to `timeout` for an element on the list and returns it.
    fn pop_wait(&mut self, key: &[u8], timeout: Duration) -> Result<Option<Vec<u8>>>;
    /// DELEX/DELIFEQ compare-and-delete, with ZCARD of `queue` (and a DEL of
    /// the holder's heartbeat `beat`, with a lease) in the same round trip:
    /// whether it deleted and how many wait. `None` for `Eval` and when the
    /// server lacks the command (not tried again on this cluster).
    fn delete_if_equal(
        &mut self,
        key: &[u8],
        value: &[u8],
        command: ReleaseCommand,
        queue: &[u8],
        beat: Option<&[u8]>,
    ) -> Result<Option<(bool, u64)>>;
    /// Waits `pause` (counted into the PHP call's budget, as a BLPOP's
    /// block is), then sends `poll`: what it saw, `None` on a redirect.
    fn poll_lock(&mut self, poll: &LockPoll, pause: Duration) -> Result<Option<Polled>>;
    /// The cluster on which the leases of the locks taken here are renewed;
    /// `None` for the stores of tests, whose leases nobody renews.
    fn renewal_config(&self) -> Option<&Rc<ConnectionConfig>> {
        None
    }
    /// The request's connection to the primary of `key`, lent to the
    /// watchdog until the request's next call there (see [`Lent`]).
    fn lend_connection(&self, _key: &[u8]) -> Option<Lent> {
        None
    }
    /// A release is next: it has at least [`release_grace`] of the PHP call's
    /// budget, however little a failed write before it left.
    fn leave_grace_for_release(&mut self) {}
    /// Has the next requests wait for a node at `maxclients` until the
    /// budget runs out again, even after one of this session's did.
    fn wait_for_full_nodes(&mut self) {}
}

/// Clusters one thread keeps; a worker alternating between a few save_paths
/// keeps each one's connections.
const MAX_CLUSTERS: usize = 4;

/// How late a blocking command's timeout may fire: servers check them on
/// their next tick, up to 100 ms later at the default `hz` 10. A lock wait
/// made of many pieces would otherwise spend the call's budget on that
/// lateness and fail before `lock_retries × lock_wait_time`.
const BLOCK_LATENESS: Duration = Duration::from_millis(100);

thread_local! {
    static CLUSTERS: RefCell<Vec<Cluster>> = const { RefCell::new(Vec::new()) };
    /// The buffer the lock's commands are packed into, kept across requests.
    static PACKED: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// The most of its size [`PACKED`] keeps for the next command: a session's
/// keys and small data; a large session's buffer is let go of.
const KEPT_PACKED: usize = 64 * 1024;

/// `send` of the command(s) `pack` packs, in this thread's buffer: a warm
/// locked request packs two, and allocates for neither.
fn with_packed<T>(pack: impl FnOnce(&mut Vec<u8>), send: impl FnOnce(&[u8]) -> T) -> T {
    // Taken, not borrowed: a command packed meanwhile gets a buffer of its own.
    let mut packed = PACKED.take();
    packed.clear();
    pack(&mut packed);
    let result = send(&packed);
    if packed.capacity() <= KEPT_PACKED {
        PACKED.set(packed);
    }
    result
}

pub struct ClusterStore {
    config: Rc<ConnectionConfig>,
    /// What requests to a primary leave of the budget for a fallback read
    /// (`failover=error`); `None` when the session may not fall back.
    fallback_reserve: Option<Duration>,
    /// Whether a request waits for a node at `maxclients` until the budget
    /// runs out: once one of this session's has, and warned, the later ones
    /// (the close's release after a failed write) try it once.
    wait_if_full: Cell<bool>,
    /// A node at `maxclients` was named in a warning: later ones say it in a
    /// few words.
    full_node_told: Cell<bool>,
}

/// A session's data and the value of its lifetime key, each if there.
pub type DataAndLifetime = (Option<Vec<u8>>, Option<Vec<u8>>);

/// What [`ClusterStore::lock_state`] found: PTTL replies (-2: no key, -1: no TTL).
pub struct LockState {
    pub lock_ttl_ms: i64,
    pub waiters: u64,
    pub data_ttl_ms: i64,
    pub lifetime: Option<Vec<u8>>,
}

/// A request its slot's primary could not serve, when the session may be
/// read elsewhere (`failover=error`).
#[derive(Debug)]
pub struct PrimaryUnreachable {
    pub why: Unreachable,
    text: String,
}

impl std::fmt::Display for PrimaryUnreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for PrimaryUnreachable {}

/// A request a node at `maxclients` refused, for the hook to say what that
/// leaves undone.
#[derive(Debug)]
pub struct NodeFull(String);

impl std::fmt::Display for NodeFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NodeFull {}

/// What a budget keeps for a fallback read when its primary hangs: on a
/// refused connection or `CLUSTERDOWN` the request gives up sooner anyway.
pub fn fallback_reserve(read_timeout: Duration) -> Duration {
    (read_timeout / 2).min(Duration::from_millis(300))
}

/// What a release of the lock has at least, after a write that failed and
/// spent the call's budget: time to land on a primary that is back, or on
/// its promoted replica. A lock left behind lasts its lease
/// (`lock_lease_ms`), or `lock_expire` without one.
pub fn release_grace(read_timeout: Duration) -> Duration {
    read_timeout.min(Duration::from_millis(500))
}

/// A request's end: this thread's clusters with `persistent=0` close their
/// connections (their slot maps stay).
pub fn request_ended() {
    CLUSTERS.with(|cell| {
        for cluster in cell.borrow_mut().iter_mut() {
            if !cluster.config().persistent {
                cluster.close_connections();
            }
        }
    });
}

impl ClusterStore {
    pub fn new(config: Rc<ConnectionConfig>) -> Self {
        ClusterStore {
            config,
            fallback_reserve: None,
            wait_if_full: Cell::new(true),
            full_node_told: Cell::new(false),
        }
    }

    fn budget_length(&self) -> Duration {
        self.config.connect_timeout + self.config.read_timeout
    }

    /// Where this thread's cluster for the config is in `clusters`.
    fn position(&self, clusters: &[Cluster]) -> Option<usize> {
        clusters
            .iter()
            .position(|c| Rc::ptr_eq(c.config(), &self.config) || *c.config() == self.config)
    }

    /// Runs `f` on this thread's cluster for the config, made on first use.
    fn with_cluster<T>(&self, f: impl FnOnce(&mut Cluster) -> T) -> T {
        CLUSTERS.with(|cell| {
            let mut clusters = cell.borrow_mut();
            let index = match self.position(&clusters) {
                Some(index) => index,
                None => {
                    if clusters.len() >= MAX_CLUSTERS {
                        clusters.remove(0);
                    }
                    stats::connected();
                    clusters.push(Cluster::new(self.config.clone()));
                    clusters.len() - 1
                }
            };
            f(&mut clusters[index])
        })
    }

    /// One request (`count` packed commands) on the primary of `key`'s slot,
    /// within the PHP call's time budget (or one of its own), plus `block` for a
    /// command that blocks on the server. Error replies other than redirects
    /// come back as `Value::ServerError`.
    fn request(
        &self,
        key: &[u8],
        packed: &[u8],
        count: usize,
        block: Duration,
    ) -> Result<Vec<Value>> {
        self.send(key, packed, count, block, true)
    }

    fn send(
        &self,
        key: &[u8],
        packed: &[u8],
        count: usize,
        block: Duration,
        follow_redirects: bool,
    ) -> Result<Vec<Value>> {
        let budget_end = budget::end(self.budget_length());
        // A warm request reads the clock once, in the exchange.
        let started = (budget_end.is_none() || !block.is_zero()).then(Instant::now);
        let deadline = budget_end
            .unwrap_or_else(|| started.unwrap_or_else(Instant::now) + self.budget_length())
            + block;
        let request = Request {
            slot: hash_slot(key),
            packed,
            count,
            reply_timeout: self.config.read_timeout + block,
            deadline: self
                .fallback_reserve
                .and_then(|reserve| deadline.checked_sub(reserve))
                .unwrap_or(deadline),
            retry_broken: block.is_zero(),
            follow_redirects,
            may_fall_back: self.fallback_reserve.is_some(),
            wait_if_full: self.wait_if_full.get(),
        };
        let result = self.with_cluster(|cluster| cluster.request(&request));
        if let (Some(_), Some(started)) = (budget_end, started)
            && result.is_ok()
            && !block.is_zero()
        {
            budget::extend(started.elapsed().min(block + BLOCK_LATENESS));
        }
        result.map_err(|failure| {
            let full_node = link::refused_at_maxclients(&failure.error);
            if full_node.is_some() {
                self.wait_if_full.set(false);
            }
            let told_before = full_node.is_some() && self.full_node_told.replace(true);
            let context = if failure.no_map {
                "Couldn't map cluster keyspace using any provided seed"
            } else {
                "Error communicating with the Redis Cluster"
            };
            let error = failed(&failure.error, context);
            match (failure.unreachable, full_node) {
                (Some(why), _) if self.fallback_reserve.is_some() => {
                    anyhow::Error::new(PrimaryUnreachable {
                        why,
                        text: error.to_string(),
                    })
                }
                (_, Some(node)) if told_before => anyhow::Error::new(NodeFull(format!(
                    "{node} still refuses connections at maxclients"
                ))),
                (_, Some(_)) => anyhow::Error::new(NodeFull(error.to_string())),
                _ => error,
            }
        })
    }

    /// One command on the primary of `key`'s slot; an error reply is an error.
    fn command(&self, key: &[u8], args: &[&[u8]]) -> Result<Reply> {
        self.packed_command(key, &packed(args), Duration::ZERO)
    }

    fn packed_command(&self, key: &[u8], command: &[u8], block: Duration) -> Result<Reply> {
        let mut replies = self.request(key, command, 1, block)?;
        reply(replies.pop())
    }

    /// A packed command then `WAIT`, in one round trip to the primary that runs it.
    fn with_wait(&self, key: &[u8], mut packed: Vec<u8>, ack: ReplicaAck) -> Result<(Reply, u32)> {
        self.append_wait(&mut packed, ack);
        let mut replies = self.request(key, &packed, 2, Duration::ZERO)?.into_iter();
        let first = reply(replies.next())?;
        Ok((first, acked(replies.next())?))
    }

    fn append_wait(&self, packed: &mut Vec<u8>, ack: ReplicaAck) {
        // A WAIT that outlasted the read timeout would drop the connection.
        let timeout = ack.timeout.min(self.config.read_timeout / 2);
        let replicas = Decimal::from(u64::from(ack.replicas));
        let millis = Decimal::from(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
        pack(packed, &[b"WAIT", replicas.as_bytes(), millis.as_bytes()]);
    }

    /// A script on the primary of its keys' slot, with `WAIT` behind it when
    /// `ack` asks for replicas: EVALSHA, then EVAL if the node lacks the
    /// script (after a failover or a restart).
    fn script(
        &self,
        script: &LuaScript,
        keys: &[&[u8]],
        args: &[&[u8]],
        ack: Option<ReplicaAck>,
    ) -> Result<(Reply, Option<u32>)> {
        let routing = keys.first().copied().unwrap_or_default();
        let send = |verb: &str, body: &str| {
            with_packed(
                |packed| {
                    script_command(packed, verb, body, keys, args);
                    if let Some(ack) = ack {
                        self.append_wait(packed, ack);
                    }
                },
                |packed| {
                    let count = 1 + usize::from(ack.is_some());
                    self.request(routing, packed, count, Duration::ZERO)
                },
            )
        };
        let mut replies = send("EVALSHA", script.sha1())?;
        if replies.first().is_some_and(no_script) {
            replies = send("EVAL", script.source())?;
        }
        let mut replies = replies.into_iter();
        let first = reply(replies.next())?;
        let acked = match ack {
            Some(_) => Some(acked(replies.next())?),
            None => None,
        };
        Ok((first, acked))
    }

    /// The lock's `PTTL` (-2: no lock) and how many wait for it (`ZCARD` of
    /// the queue), in one round trip.
    /// A session's lock and lifetime as `rediscluster_session_lock_info()`
    /// shows them, in one round trip: PTTL of the lock, ZCARD of the queue,
    /// PTTL of the data, GET of the lifetime.
    pub fn lock_state(&self, keys: &LockKeys) -> Result<LockState> {
        let mut command = packed(&[b"PTTL", &keys.lock]);
        pack(&mut command, &[b"ZCARD", keys.queue()]);
        pack(&mut command, &[b"PTTL", &keys.data]);
        pack(&mut command, &[b"GET", keys.lifetime()]);
        let mut replies = self
            .request(&keys.lock, &command, 4, Duration::ZERO)?
            .into_iter();
        let mut int = |what: &str| match reply(replies.next())? {
            Reply::Int(n) => Ok(n),
            other => Err(unexpected(what, &other)),
        };
        let (lock_ttl_ms, waiters, data_ttl_ms) = (int("PTTL")?, int("ZCARD")?, int("PTTL")?);
        let lifetime = session_data(reply(replies.next())?)?;
        Ok(LockState {
            lock_ttl_ms,
            waiters: waiters.unsigned_abs(),
            data_ttl_ms,
            lifetime,
        })
    }

    pub fn same_cluster(&self, other: &ClusterStore) -> bool {
        Rc::ptr_eq(&self.config, &other.config) || self.config == other.config
    }
}

/// The replica count a `WAIT` answered.
fn acked(value: Option<Value>) -> Result<u32> {
    match reply(value)? {
        Reply::Int(n) => Ok(u32::try_from(n).unwrap_or(0)),
        other => Err(unexpected("WAIT", &other)),
    }
}

/// A reply as ours, or the error it carries.
fn reply(value: Option<Value>) -> Result<Reply> {
    server_reply(value.unwrap_or(Value::Nil))
        .map_err(|err| failed(&err, "Error communicating with the Redis Cluster"))
}

fn server_reply(value: Value) -> Result<Reply, RedisError> {
    Ok(match value {
        Value::Nil => Reply::Nil,
        Value::Int(n) => Reply::Int(n),
        Value::BulkString(bytes) => Reply::Data(bytes),
        Value::SimpleString(_) | Value::Okay => Reply::Status,
        Value::Array(items) => Reply::Array(
            items
                .into_iter()
                .map(server_reply)
                .collect::<Result<_, _>>()?,
        ),
        Value::ServerError(err) => return Err(err.into()),
        _ => Reply::Nil,
    })
}

/// Counts the error by kind and words it for the PHP warning.
fn failed(err: &RedisError, context: &str) -> anyhow::Error {
    stats::error(error_kind(err));
    anyhow!("{context}: {err}")
}

fn unexpected(what: &str, reply: &Reply) -> anyhow::Error {
    anyhow!("unexpected {} reply to {what}", reply.kind())
}

/// A TTL as Redis takes it in EX/EXPIRE: whole seconds, at least 1 (0 is an error).
pub fn whole_seconds(ttl: Duration) -> u64 {
    ttl.as_secs().max(1)
}

/// A TTL as Redis takes it in PX/PEXPIRE: whole milliseconds, at least 1.
pub fn whole_millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// A GET's reply: the value (session data, or a lifetime key's), or none.
fn session_data(reply: Reply) -> Result<Option<Vec<u8>>> {
    match reply {
        Reply::Data(data) => Ok(Some(data)),
        Reply::Nil => Ok(None),
        other => Err(unexpected("GET", &other)),
    }
}

/// GET, or GETEX with a new TTL, appended to `out`.
fn pack_get(out: &mut Vec<u8>, key: &[u8], refresh: Option<Duration>) {
    match refresh {
        Some(ttl) => {
            let seconds = Decimal::from(whole_seconds(ttl));
            pack(out, &[b"GETEX", key, b"EX", seconds.as_bytes()]);
        }
        None => pack(out, &[b"GET", key]),
    }
}

/// The SET option and number for an expiry: EX seconds or PXAT ms.
fn expiry_args(expiry: Expiry) -> (&'static [u8], Decimal) {
    match expiry {
        Expiry::After(ttl) => (b"EX", Decimal::from(whole_seconds(ttl))),
        Expiry::At(at_ms) => (b"PXAT", Decimal::from(at_ms)),
    }
}

fn del_args<'a>(keys: &[&'a [u8]]) -> Vec<&'a [u8]> {
    let mut args: Vec<&[u8]> = vec![b"DEL"];
    args.extend_from_slice(keys);
    args
}

fn set_command(key: &[u8], value: &[u8], ttl: Duration) -> Vec<u8> {
    let seconds = Decimal::from(whole_seconds(ttl));
    packed(&[b"SET", key, value, b"EX", seconds.as_bytes()])
}

impl SessionStore for ClusterStore {
    fn session_closed(&mut self) {
        if !self.config.persistent {
            CLUSTERS.with(|cell| {
                let mut clusters = cell.borrow_mut();
                if let Some(index) = self.position(&clusters) {
                    clusters[index].close_connections();
                }
            });
        }
    }

    fn set_may_fall_back(&mut self, may_fall_back: bool) {
        self.fallback_reserve = may_fall_back.then(|| fallback_reserve(self.config.read_timeout));
    }

    fn read_fallback(
        &mut self,
        key: &[u8],
        primary_answered: bool,
        max_lag: Duration,
    ) -> Result<(Option<Vec<u8>>, ReadFrom)> {
        let mut command = Vec::new();
        pack_get(&mut command, key, None);
        let deadline = budget::end(self.budget_length())
            .unwrap_or_else(|| Instant::now() + self.budget_length());
        let (value, from) = self
            .with_cluster(|cluster| {
                cluster.read_fallback(
                    hash_slot(key),
                    &command,
                    primary_answered,
                    max_lag,
                    deadline,
                )
            })
            .map_err(|err| failed(&err, "no replica could serve it"))?;
        stats::fallback_read(from);
        Ok((session_data(reply(Some(value))?)?, from))
    }

    fn get(&mut self, key: &[u8], refresh: Option<Duration>) -> Result<Option<Vec<u8>>> {
        let mut command = Vec::new();
        pack_get(&mut command, key, refresh);
        session_data(self.packed_command(key, &command, Duration::ZERO)?)
    }

    fn set(&mut self, key: &[u8], value: &[u8], ttl: Duration) -> Result<()> {
        self.packed_command(key, &set_command(key, value, ttl), Duration::ZERO)
            .map(drop)
    }

    fn set_acked(
        &mut self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
        ack: ReplicaAck,
    ) -> Result<u32> {
        self.with_wait(key, set_command(key, value, ttl), ack)
            .map(|(_, acked)| acked)
    }

    fn expire(&mut self, key: &[u8], ttl: Duration) -> Result<bool> {
        let seconds = Decimal::from(whole_seconds(ttl));
        Ok(self.command(key, &[b"EXPIRE", key, seconds.as_bytes()])? == Reply::Int(1))
    }

    fn get_with_lifetime(&mut self, key: &[u8], lifetime: &[u8]) -> Result<DataAndLifetime> {
        let mut command = Vec::with_capacity(64 + key.len() + lifetime.len());
        pack_get(&mut command, key, None);
        pack(&mut command, &[b"GET", lifetime]);
        let mut replies = self.request(key, &command, 2, Duration::ZERO)?.into_iter();
        let data = session_data(reply(replies.next())?)?;
        Ok((data, session_data(reply(replies.next())?)?))
    }

    fn set_with_lifetime(
        &mut self,
        key: &[u8],
        data: &[u8],
        expiry: Expiry,
        (lifetime, value): (&[u8], Option<&[u8]>),
        ack: Option<ReplicaAck>,
    ) -> Result<Option<u32>> {
        let (option, at) = expiry_args(expiry);
        let mut command = packed(&[b"SET", key, data, option, at.as_bytes()]);
        match value {
            Some(value) => pack(
                &mut command,
                &[b"SET", lifetime, value, option, at.as_bytes()],
            ),
            None => pack(&mut command, &[b"DEL", lifetime]),
        }
        if let Some(ack) = ack {
            self.append_wait(&mut command, ack);
        }
        let count = 2 + usize::from(ack.is_some());
        let mut replies = self
            .request(key, &command, count, Duration::ZERO)?
            .into_iter();
        reply(replies.next())?;
        reply(replies.next())?;
        ack.map(|_| acked(replies.next())).transpose()
    }

    fn expire_with_lifetime(
        &mut self,
        key: &[u8],
        lifetime: &[u8],
        expiry: Expiry,
    ) -> Result<bool> {
        let verb: &[u8] = match expiry {
            Expiry::After(_) => b"EXPIRE",
            Expiry::At(_) => b"PEXPIREAT",
        };
        let (_, at) = expiry_args(expiry);
        let mut command = packed(&[verb, key, at.as_bytes()]);
        pack(&mut command, &[verb, lifetime, at.as_bytes()]);
        let mut replies = self.request(key, &command, 2, Duration::ZERO)?.into_iter();
        let renewed = reply(replies.next())? == Reply::Int(1);
        reply(replies.next())?;
        Ok(renewed)
    }

    fn exists(&mut self, key: &[u8]) -> Result<bool> {
        Ok(self.command(key, &[b"EXISTS", key])? == Reply::Int(1))
    }

    fn delete(&mut self, keys: &[&[u8]]) -> Result<()> {
        let Some(first) = keys.first() else {
            return Ok(());
        };
        self.command(first, &del_args(keys)).map(drop)
    }

    fn delete_acked(&mut self, keys: &[&[u8]], ack: ReplicaAck) -> Result<u32> {
        let Some(first) = keys.first() else {
            return Ok(ack.replicas);
        };
        self.with_wait(first, packed(&del_args(keys)), ack)
            .map(|(_, acked)| acked)
    }
}

impl LockStore for ClusterStore {
    fn renewal_config(&self) -> Option<&Rc<ConnectionConfig>> {
        Some(&self.config)
    }

    fn lend_connection(&self, key: &[u8]) -> Option<Lent> {
        self.with_cluster(|cluster| cluster.lend(hash_slot(key)))
    }

    fn leave_grace_for_release(&mut self) {
        budget::leave_at_least(release_grace(self.config.read_timeout));
    }

    fn wait_for_full_nodes(&mut self) {
        self.wait_if_full.set(true);
    }

    fn eval(&mut self, script: &LuaScript, keys: &[&[u8]], args: &[&[u8]]) -> Result<Reply> {
        self.script(script, keys, args, None)
            .map(|(reply, _)| reply)
    }

    fn eval_acked(
        &mut self,
        script: &LuaScript,
        keys: &[&[u8]],
        args: &[&[u8]],
        ack: ReplicaAck,
    ) -> Result<(Reply, u32)> {
        let (reply, acked) = self.script(script, keys, args, Some(ack))?;
        Ok((reply, acked.unwrap_or(0)))
    }

    fn lock_and_read(&mut self, take: &PlainTake) -> Result<Option<PlainRead>> {
        let replies = with_packed(
            |packed| {
                let mut size = 0;
                take.each_command(|command| size += packed_size(command));
                packed.reserve(size);
                take.each_command(|command| pack(packed, command));
            },
            |packed| self.send(take.lock, packed, take.commands(), Duration::ZERO, false),
        )?;
        if replies.len() != take.commands() {
            bail!("missing reply to SET NX, GET and GETRANGE");
        }
        if replies.iter().any(is_redirect) {
            return Ok(None);
        }
        // On the stack.
        let mut converted: [Reply; PLAIN_TAKE_COMMANDS] = std::array::from_fn(|_| Reply::Nil);
        for (slot, value) in converted.iter_mut().zip(replies) {
            *slot = reply(Some(value))?;
        }
        take.read(converted)
    }

    fn poll_lock(&mut self, poll: &LockPoll, pause: Duration) -> Result<Option<Polled>> {
        let paused = Instant::now();
        std::thread::sleep(pause);
        let commands: [&[&[u8]]; 3] = [
            &[b"LPOP", poll.list],
            &[b"GET", poll.lock],
            &[b"GET", poll.beat],
        ];
        let sent = Instant::now();
        let replies = with_packed(
            |packed| commands.iter().for_each(|command| pack(packed, command)),
            |packed| self.send(poll.lock, packed, commands.len(), Duration::ZERO, false),
        )?;
        let replied = Instant::now();
        // The whole poll, however late the thread woke, as a BLPOP's block
        // is: a wait of many polls must not spend the call's budget.
        budget::extend(replied - paused);
        if replies.iter().any(is_redirect) {
            return Ok(None);
        }
        let mut replies = replies.into_iter().map(|value| reply(Some(value)));
        let mut bytes = |command: &str| match replies.next().transpose()? {
            Some(Reply::Data(bytes)) => Ok(Some(bytes)),
            Some(Reply::Nil) => Ok(None),
            other => bail!(
                "unexpected {} reply to {command}",
                other.as_ref().map_or("no", Reply::kind)
            ),
        };
        let (pushed, owner, beat) = (bytes("LPOP")?, bytes("GET")?, bytes("GET")?);
        let primary =
            self.with_cluster(|cluster| cluster.primary_of(hash_slot(poll.lock)).cloned());
        Ok(Some(Polled {
            pushed,
            owner,
            beat,
            sent,
            replied,
            primary,
        }))
    }

    fn pop_wait(&mut self, key: &[u8], timeout: Duration) -> Result<Option<Vec<u8>>> {
        let millis = timeout.as_millis().max(1);
        let seconds = format!("{}.{:03}", millis / 1000, millis % 1000);
        let command = packed(&[b"BLPOP", key, seconds.as_bytes()]);
        match self.packed_command(key, &command, timeout)? {
            Reply::Array(mut items) if items.len() == 2 => match items.pop() {
                Some(Reply::Data(element)) => Ok(Some(element)),
                _ => bail!("unexpected reply to BLPOP"),
            },
            Reply::Nil => Ok(None),
            other => Err(unexpected("BLPOP", &other)),
        }
    }

    fn delete_if_equal(
        &mut self,
        key: &[u8],
        value: &[u8],
        command: ReleaseCommand,
        queue: &[u8],
        beat: Option<&[u8]>,
    ) -> Result<Option<(bool, u64)>> {
        let name = match command {
            ReleaseCommand::Delex => "DELEX",
            ReleaseCommand::Delifeq => "DELIFEQ",
            ReleaseCommand::Eval => return Ok(None),
        };
        if self.with_cluster(|cluster| cluster.is_unsupported(name)) {
            return Ok(None);
        }
        let mut packed = match command {
            ReleaseCommand::Delex => packed(&[b"DELEX", key, b"IFEQ", value]),
            _ => packed(&[b"DELIFEQ", key, value]),
        };
        pack(&mut packed, &[b"ZCARD", queue]);
        if let Some(beat) = beat {
            pack(&mut packed, &[b"DEL", beat]);
        }
        let count = 2 + usize::from(beat.is_some());
        let mut replies = self
            .request(key, &packed, count, Duration::ZERO)?
            .into_iter();
        let deleted = match replies.next().map(server_reply) {
            Some(Ok(Reply::Int(n))) => n == 1,
            Some(Err(err)) if is_unknown_command(&err) => {
                self.with_cluster(|cluster| cluster.mark_unsupported(name));
                return Ok(None);
            }
            Some(Err(err)) => {
                return Err(failed(&err, "Error communicating with the Redis Cluster"));
            }
            _ => bail!("unexpected reply to {name}"),
        };
        let waiting = match reply(replies.next())? {
            Reply::Int(n) => n.unsigned_abs(),
            other => return Err(unexpected("ZCARD", &other)),
        };
        Ok(Some((deleted, waiting)))
    }
}

fn is_unknown_command(err: &RedisError) -> bool {
    err.code().is_some_and(|code| code == "ERR")
        && err
            .detail()
            .is_some_and(|detail| detail.starts_with("unknown command"))
}

/// Tests against the real cluster named by RCS_SEEDS; `scripts/test.sh` runs
/// them with `cargo test -- --ignored` after starting a cluster.
#[cfg(test)]
pub(crate) mod cluster_tests {
    use super::*;
    use crate::keys::{hash_slot, lock_key};
    use crate::save_path;
    use redis::cmd;

    /// A store on the cluster named by RCS_SEEDS.
    pub(crate) fn store() -> ClusterStore {
        let seeds =
            std::env::var("RCS_SEEDS").expect("RCS_SEEDS=host:port,... of a running cluster");
        let path = seeds
            .split(',')
            .map(|seed| format!("seed[]={seed}"))
            .collect::<Vec<_>>()
            .join("&");
        ClusterStore::new(Rc::new((&save_path::parse(&path).unwrap()).into()))
    }

    impl ClusterStore {
        /// A test's command on the primary of `key`'s slot.
        pub(crate) fn run(&self, key: &[u8], command: &redis::Cmd) -> Result<Reply> {
            self.packed_command(key, &command.get_packed_command(), Duration::ZERO)
        }
    }

    /// An integer reply to a command on `key`'s primary.
    pub(crate) fn int(store: &ClusterStore, key: &[u8], command: &redis::Cmd) -> i64 {
        match store.run(key, command).unwrap() {
            Reply::Int(n) => n,
            other => panic!("not an integer: {other:?}"),
        }
    }

    /// Direct connections to the nodes, replicas included.
    pub(crate) fn node(addr: &str) -> redis::Connection {
        redis::Client::open(format!("redis://{addr}"))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// The primary and the first replica (if listed) of `key`'s slot.
    pub(crate) fn owners(key: &[u8]) -> (String, String) {
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

    fn keyslot(store: &ClusterStore, key: &[u8]) -> u16 {
        // CLUSTER KEYSLOT is answered by any node; route it by the key.
        u16::try_from(int(store, key, cmd("CLUSTER").arg("KEYSLOT").arg(key))).unwrap()
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn hash_slots_match_cluster_keyslot() {
        let store = store();
        let mut keys: Vec<Vec<u8>> = [
            "",
            "foo",
            "{user1000}.following",
            "foo{}{bar}",
            "foo{{bar}}zap",
            "{}",
            "a}b{c",
        ]
        .iter()
        .map(|k| k.as_bytes().to_vec())
        .collect();
        keys.extend(
            (0..200u32).map(|i| format!("PHPREDIS_CLUSTER_SESSION:{i:x}{}", i * 7919).into_bytes()),
        );
        keys.push(vec![0, 0xff, b'{', 0x80, b'}']);
        for key in keys {
            let server = keyslot(&store, &key);
            assert_eq!(hash_slot(&key), server, "{key:?}");
            if let Ok(lock) = lock_key(&key) {
                let lock_slot = keyslot(&store, &lock);
                assert_eq!(lock_slot, server, "lock key of {key:?}");
            }
        }
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn store_commands_round_trip_binary_data() {
        let mut store = store();
        let key = format!("RCS_UNIT:{}", std::process::id()).into_bytes();
        let value: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
        store.delete(&[&key]).unwrap();
        assert_eq!(store.get(&key, None).unwrap(), None);
        assert!(!store.exists(&key).unwrap());
        assert!(!store.expire(&key, Duration::from_secs(5)).unwrap());
        store.set(&key, &value, Duration::from_secs(60)).unwrap();
        assert!(store.exists(&key).unwrap());
        assert_eq!(
            store.get(&key, Some(Duration::from_secs(90))).unwrap(),
            Some(value)
        );
        let ttl = int(&store, &key, cmd("TTL").arg(&key));
        assert!((85..=90).contains(&ttl), "{ttl}");
        store.delete(&[&key]).unwrap();
        assert!(!store.exists(&key).unwrap());
    }
}
