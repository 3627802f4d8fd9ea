//! Our own routing on a Redis/Valkey cluster, over node connections
//! ([`crate::link`]): a slot map learnt from one node, a connection to each
//! primary only when a request goes there, and every cluster redirect handled
//! in one place.
//!
//! - `MOVED`: the slot has a new owner. The entry is fixed at once and the
//!   whole map is fetched again, at most once per [`MAP_REFRESH_INTERVAL`].
//! - `ASK`: the slot is migrating and our keys are on the target: send
//!   `ASKING` and the request there, once; the map is not changed.
//! - `TRYAGAIN`: the slot is migrating and only some of our keys have moved:
//!   the same request again after a short pause, until the migration ends.
//! - `CLUSTERDOWN` (or a script refused "while the cluster is down"),
//!   `MASTERDOWN`, `LOADING`, `READONLY` and broken or hung connections: a
//!   failover or restart is under way; the map is fetched again and the
//!   request retried.
//! - A node at `maxclients` refusing the connection: usually no change of
//!   the cluster, so the map is checked once per request (the full primary
//!   may have been failed over) and kept if that fails; the connection is
//!   tried again after pauses that grow ([`FULL_NODE_PAUSE`]).
//!
//! None of these replies means the request ran, except an I/O error, which
//! may come after it ran: the session protocol makes every request safe to
//! repeat (see `lock.rs`). Everything is retried until the request's
//! deadline. Only the broken connection is dropped; redirects keep them all.
//!
//! A request that may fall back (`failover=error`, see [`fallback`]) gives up
//! at once on `CLUSTERDOWN`, and on a refused connection once a fresh map
//! still names the same primary.

use std::cell::Cell;
use std::rc::Rc;
use std::thread::sleep;
use std::time::{Duration, Instant};

use redis::{ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};

use crate::config::{ConnectionConfig, NodeAddr};
use crate::keys::SLOT_COUNT;
use crate::link::{self, Lent, Link, ReplyWindow, closed_by_peer};
use crate::stats::{self, NodeEvent, SlotMapSource};
use shared_map::SharedMap;

/// A storm of `MOVED` (a reshard, a failover) fetches the map at most this often.
const MAP_REFRESH_INTERVAL: Duration = Duration::from_millis(100);
/// Pause before repeating a request a migrating slot answered `TRYAGAIN`.
const TRYAGAIN_PAUSE: Duration = Duration::from_millis(10);
/// Pause between attempts while a failover or restart is under way.
const RECOVERY_PAUSE: Duration = Duration::from_millis(100);
/// Pause before following a `MOVED` right after a fresh map: the cluster is
/// still converging, and the pause keeps a redirect loop from spinning.
const MOVED_PAUSE: Duration = Duration::from_millis(1);
/// The first pause before connecting again to a node that refused us at
/// `maxclients`; each next one doubles, up to [`FULL_NODE_PAUSE_MAX`]. Every
/// retry costs the full node an accept, so a stuck request makes a few, not
/// one every [`RECOVERY_PAUSE`].
const FULL_NODE_PAUSE: Duration = Duration::from_millis(100);
const FULL_NODE_PAUSE_MAX: Duration = Duration::from_secs(1);
/// What the last try at a full node is left of the deadline: a pause that
/// would end later ends this much before it instead.
const FULL_NODE_LAST_TRY: Duration = Duration::from_millis(50);
const NO_OWNER: u16 = u16::MAX;

/// An exchange this large (request and replies) closes its connection
/// afterwards, so the buffers it grew go back.
const LARGE_EXCHANGE: usize = 1 << 20;

thread_local! {
    /// A large exchange freed memory: see [`release_memory_after_large_exchange`].
    static TRIM_PENDING: Cell<bool> = const { Cell::new(false) };
}

/// Gives the heap a large exchange freed back to the system. The PHP hooks
/// call it once their work is done and every reply is dropped, before any
/// warning runs the application's error handler (which may end the request
/// without another hook, and the worker would keep tens of MB meanwhile).
pub fn release_memory_after_large_exchange() {
    if TRIM_PENDING.take() {
        release_free_memory();
    }
}

/// `ASKING`, sent ahead of a request that an `ASK` redirected.
const ASKING: &[u8] = b"*1\r\n$6\r\nASKING\r\n";

/// A range of slots, first and last, with its primary and its replicas in the
/// order `CLUSTER SLOTS` lists them.
#[derive(Debug)]
struct SlotRange {
    start: u16,
    end: u16,
    primary: NodeAddr,
    replicas: Vec<NodeAddr>,
}

type SlotMap = Vec<SlotRange>;

struct Node {
    addr: NodeAddr,
    connection: Option<Link>,
    /// The connection while lent to the lease watchdog (see [`Cluster::lend`]).
    lent: Option<Lent>,
}

impl Node {
    fn new(addr: NodeAddr, connection: Option<Link>) -> Node {
        Node {
            addr,
            connection,
            lent: None,
        }
    }

    /// The lent connection back before a call, if the watchdog has not
    /// dropped it (a failed renewal) and is done with it by `deadline`.
    fn take_back(&mut self, deadline: Instant) {
        if let Some(lent) = self.lent.take()
            && let Some(link) = lent.take_back(deadline)
        {
            self.connection.get_or_insert(link);
        }
    }
}

/// One cluster's slot map and connections, kept for the worker's life.
pub struct Cluster {
    config: Rc<ConnectionConfig>,
    /// The process that made the connections: a forked child must not use them.
    pid: u32,
    nodes: Vec<Node>,
    /// Index into `nodes` of each slot's primary, or [`NO_OWNER`].
    slots: Box<[u16]>,
    /// Each slot range's first and last slot and replicas, in slot order:
    /// where a session is read when its primary cannot be reached
    /// (`failover=error`).
    replicas: Vec<(u16, u16, Vec<NodeAddr>)>,
    refreshed: Option<Instant>,
    /// When the map was fetched from a node, by us or a sibling (ms since the
    /// epoch; 0 before the first).
    map_fetched_ms: u64,
    /// The map this user's other workers share (`shared_slot_map`).
    shared: Option<SharedMap>,
    /// Seeds in the order to try them: one that failed goes last.
    seed_order: Vec<usize>,
    /// Commands a node answered "unknown command", not tried again.
    unsupported: Vec<&'static str>,
    /// Replicas read from while their primary could not be reached, one
    /// connection each; closed once a primary answers again.
    replica_links: Vec<Node>,
}

/// One request: `count` packed commands whose keys are all on `slot`.
pub struct Request<'a> {
    pub slot: u16,
    pub packed: &'a [u8],
    pub count: usize,
    /// How long one attempt waits for its replies.
    pub reply_timeout: Duration,
    /// When to stop retrying.
    pub deadline: Instant,
    /// Whether to send it again after a connection broke: not for a blocking
    /// pop, whose lost reply must not block again.
    pub retry_broken: bool,
    /// Whether to follow redirects; without, replies come back as they are
    /// (a pipeline whose commands a migrating slot may split between nodes).
    pub follow_redirects: bool,
    /// Whether the session may be read elsewhere instead (`failover=error`):
    /// then `CLUSTERDOWN` and a refused primary end the request at once.
    pub may_fall_back: bool,
    /// Whether to wait for a node at `maxclients` (pauses that grow until
    /// the deadline), or give up at its first refusal.
    pub wait_if_full: bool,
}

/// Why a request failed for good, and whether it may still succeed later.
#[derive(Debug)]
pub struct Failure {
    pub error: RedisError,
    /// No slot map could be had from any node.
    pub no_map: bool,
    /// A connection broke (I/O error or timeout): the request may have run.
    pub broken: bool,
    /// How the slot's primary failed us, when it did.
    pub unreachable: Option<Unreachable>,
}

/// Why a request could not be served by its slot's primary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unreachable {
    Refused,
    /// It refused the connection: it has `maxclients` clients already.
    Full,
    TimedOut,
    Broken,
    /// It answered, `CLUSTERDOWN`: it may still serve reads.
    ClusterDown,
}

impl Unreachable {
    fn of(error: &RedisError) -> Unreachable {
        if link::refused_at_maxclients(error).is_some() {
            Unreachable::Full
        } else if error.is_connection_refusal() {
            Unreachable::Refused
        } else if error.is_timeout() {
            Unreachable::TimedOut
        } else {
            Unreachable::Broken
        }
    }

    pub fn reason(self) -> &'static str {
        match self {
            Unreachable::Refused => "connection refused",
            Unreachable::Full => "max number of clients reached",
            Unreachable::TimedOut => "no answer in time",
            Unreachable::Broken => "connection broken",
            Unreachable::ClusterDown => "the cluster is down",
        }
    }
}

impl Failure {
    fn new(error: RedisError) -> Failure {
        Failure {
            error,
            no_map: false,
            broken: false,
            unreachable: None,
        }
    }
}

/// What a redirect or error reply asks of the next attempt.
enum Next {
    Done,
    Ask(NodeAddr),
    Again(Duration),
    Refresh(Duration),
    /// `CLUSTERDOWN`.
    Down(RedisError),
}

impl Cluster {
    pub fn new(config: Rc<ConnectionConfig>) -> Self {
        stats::process_started();
        let seed_order = (0..config.seeds.len()).collect();
        let shared = config.shared_slot_map.then(|| SharedMap::new(&config));
        Cluster {
            config,
            pid: std::process::id(),
            nodes: Vec::new(),
            slots: vec![NO_OWNER; usize::from(SLOT_COUNT)].into_boxed_slice(),
            replicas: Vec::new(),
            refreshed: None,
            map_fetched_ms: 0,
            shared,
            seed_order,
            unsupported: Vec::new(),
            replica_links: Vec::new(),
        }
    }

    pub fn config(&self) -> &Rc<ConnectionConfig> {
        &self.config
    }

    pub fn is_unsupported(&self, command: &'static str) -> bool {
        self.unsupported.contains(&command)
    }

    pub fn mark_unsupported(&mut self, command: &'static str) {
        self.unsupported.push(command);
    }

    /// After `fork()` the child shares the parent's sockets: closing its
    /// copies with `close(2)` alone (no `QUIT`, no `shutdown(2)`, no TLS
    /// `close_notify`, which rustls never sends on drop) leaves the parent's intact.
    fn forget_if_forked(&mut self) {
        let pid = std::process::id();
        if pid != self.pid {
            // A lent one too, unlocked: the parent's watchdog may hold it.
            for node in self.nodes.iter_mut().chain(&mut self.replica_links) {
                node.connection = None;
                node.lent = None;
            }
            self.pid = pid;
            stats::process_started();
        }
    }

    /// Closes every connection and keeps the slot map: a request's end with
    /// `persistent=0`, whose next request connects to its primary again but
    /// asks no seed for the map.
    pub fn close_connections(&mut self) {
        for node in &mut self.nodes {
            node.connection = None;
            node.lent = None;
        }
        self.replica_links.clear();
    }

    /// Closes the connections to primaries that own none of `slots` (a seed
    /// asked for the map, a lock's primary once the lock is let go of).
    pub fn close_connections_except(&mut self, slots: &[u16]) {
        for (index, node) in self.nodes.iter_mut().enumerate() {
            let owner = u16::try_from(index).unwrap_or(NO_OWNER);
            if !slots
                .iter()
                .any(|&slot| self.slots[usize::from(slot)] == owner)
            {
                node.connection = None;
            }
        }
    }

    /// Lends the connection to `slot`'s primary to the lease watchdog while
    /// the request runs PHP code; the next call to that node takes it back.
    /// `None` without one (the request has not called that node).
    pub fn lend(&mut self, slot: u16) -> Option<Lent> {
        let node = self
            .nodes
            .get_mut(usize::from(*self.slots.get(usize::from(slot))?))?;
        if node.lent.is_none() {
            node.lent = Some(Lent::new(node.connection.take()?));
        }
        node.lent.clone()
    }

    /// The primary this map names for `slot`, if any.
    pub fn primary_of(&self, slot: u16) -> Option<&NodeAddr> {
        let index = *self.slots.get(usize::from(slot))?;
        self.nodes.get(usize::from(index)).map(|node| &node.addr)
    }

    /// Sends the request to its slot's primary and returns the replies,
    /// following redirects and retrying until its deadline. Error replies
    /// other than redirects come back as `Value::ServerError`.
    pub fn request(&mut self, request: &Request) -> Result<Vec<Value>, Failure> {
        self.forget_if_forked();
        let mut ask: Option<NodeAddr> = None;
        let mut refusal_seen = false;
        let mut map_checked_at_full_node = false;
        let mut full_node_pause = FULL_NODE_PAUSE;
        loop {
            let pause = match self.attempt(request, ask.take()) {
                Ok((replies, Next::Done)) => {
                    if !self.replica_links.is_empty() {
                        self.replica_links.clear();
                    }
                    return Ok(replies);
                }
                // No owner in the map: nothing was sent, so it is retried
                // like any request (the caller has no reply to judge).
                Ok((replies, next)) if !request.follow_redirects && !replies.is_empty() => {
                    if matches!(next, Next::Refresh(_)) {
                        self.refreshed = None;
                    }
                    return Ok(replies);
                }
                Ok((_, Next::Ask(target))) => {
                    ask = Some(target);
                    Duration::ZERO
                }
                Ok((_, Next::Again(pause))) => pause,
                Ok((_, Next::Refresh(pause))) => {
                    self.refreshed = None;
                    pause
                }
                Ok((_, Next::Down(error))) if request.may_fall_back => {
                    return Err(Failure {
                        unreachable: Some(Unreachable::ClusterDown),
                        ..Failure::new(error)
                    });
                }
                Ok((_, Next::Down(_))) => {
                    self.refreshed = None;
                    RECOVERY_PAUSE
                }
                // A node at maxclients is up: a few tries until the deadline.
                // The map is checked once (another node's, or a sibling's
                // shared one): an operator may have failed the full primary
                // over, and the new one serves the slot. On failure it stays.
                // A close in the TLS handshake may also be a proxy whose node
                // is down: the map is checked at each try, and tried at once
                // if the slot has a new primary.
                Err(failure) if link::refused_at_maxclients(&failure.error).is_some() => {
                    if link::closed_in_tls_handshake(&failure.error) {
                        let owner = self.owner_addr(request.slot);
                        if self.refresh_map(request.deadline).is_ok()
                            && self.owner_addr(request.slot) != owner
                        {
                            continue;
                        }
                    } else if !std::mem::replace(&mut map_checked_at_full_node, true)
                        && self.refresh_map(request.deadline).is_ok()
                    {
                        continue;
                    }
                    let pause = request
                        .wait_if_full
                        .then(|| next_full_node_pause(&mut full_node_pause, request.deadline))
                        .flatten();
                    match pause {
                        Some(pause) => pause,
                        None => return Err(failure),
                    }
                }
                // A refused primary may be one the map no longer names.
                Err(failure)
                    if request.may_fall_back
                        && failure.unreachable == Some(Unreachable::Refused) =>
                {
                    if std::mem::replace(&mut refusal_seen, true) {
                        return Err(failure);
                    }
                    self.refreshed = None;
                    Duration::ZERO
                }
                Err(failure) => {
                    let transient = !failure.no_map
                        && is_transient(&failure.error)
                        && (request.retry_broken || !failure.broken);
                    if !transient || Instant::now() + RECOVERY_PAUSE >= request.deadline {
                        return Err(failure);
                    }
                    self.refreshed = None;
                    RECOVERY_PAUSE
                }
            };
            if Instant::now() + pause >= request.deadline {
                return Err(Failure::new(RedisError::from((
                    ErrorKind::Io,
                    "the cluster did not settle in time",
                    "redirected or asked to try again until the read timeout".to_owned(),
                ))));
            }
            sleep(pause);
        }
    }

    /// Requests on any slots, each as [`Self::request`] would send it, in one
    /// pipelined exchange per primary while the map is right: a request whose
    /// replies hold a redirect, or whose exchange failed, is then sent again
    /// alone, with every redirect and retry of [`Self::request`].
    pub fn request_each(&mut self, requests: &[Request]) -> Vec<Result<Vec<Value>, Failure>> {
        self.forget_if_forked();
        let mut results: Vec<Option<Result<Vec<Value>, Failure>>> =
            requests.iter().map(|_| None).collect();
        // The latest deadline for the slot map: a request with a shorter
        // one must not cut the others short.
        if let Some(deadline) = requests.iter().map(|request| request.deadline).max()
            && (self.refreshed.is_some() || self.refresh_map(deadline).is_ok())
        {
            let mut by_owner: Vec<(usize, Vec<usize>)> = Vec::new();
            for (index, request) in requests.iter().enumerate() {
                let owner = self.slots[usize::from(request.slot)];
                if owner == NO_OWNER {
                    continue;
                }
                let owner = usize::from(owner);
                match by_owner.iter_mut().find(|(node, _)| *node == owner) {
                    Some((_, members)) => members.push(index),
                    None => by_owner.push((owner, vec![index])),
                }
            }
            // Every primary's batch goes out before any reply is awaited: a
            // primary that stalls delays no other's.
            let mut sent: Vec<(usize, Vec<usize>, usize, Instant)> = Vec::new();
            for (owner, members) in by_owner {
                let mut packed = Vec::new();
                for &index in &members {
                    packed.extend_from_slice(requests[index].packed);
                }
                let count = members.iter().map(|&index| requests[index].count).sum();
                let reply_timeout = members
                    .iter()
                    .map(|&index| requests[index].reply_timeout)
                    .min()
                    .unwrap_or_default();
                // Each batch until its own latest deadline: a stalled primary
                // holds the round no longer than its own locks allow.
                let batch_deadline = members
                    .iter()
                    .map(|&index| requests[index].deadline)
                    .max()
                    .unwrap_or(deadline);
                let window = ReplyWindow::new(reply_timeout, batch_deadline);
                if send_to(&self.config, &mut self.nodes[owner], &packed, window).is_ok() {
                    sent.push((owner, members, count, window.end()));
                }
            }
            // The replies in the order they come, until the last batch's
            // reply timeout.
            while !sent.is_empty() {
                let end = sent.iter().map(|&(.., end)| end).max().unwrap_or(deadline);
                let links: Option<Vec<&Link>> = sent
                    .iter()
                    .map(|&(owner, ..)| self.nodes[owner].connection.as_ref())
                    .collect();
                let Some(ready) = links.and_then(|links| link::first_ready(&links, end)) else {
                    break;
                };
                let (owner, members, count, _) = sent.swap_remove(ready);
                let node = &mut self.nodes[owner];
                let received = node
                    .connection
                    .as_mut()
                    .map(|connection| connection.receive(0, count, end));
                let Some(Ok(replies)) = received else {
                    node.connection = None;
                    continue;
                };
                let mut replies = replies.into_iter();
                for index in members {
                    let own: Vec<Value> = replies.by_ref().take(requests[index].count).collect();
                    if !own.iter().any(is_redirect) {
                        results[index] = Some(Ok(own));
                    }
                }
            }
            // No answer in time: out of step, never reused.
            for (owner, ..) in sent {
                self.nodes[owner].connection = None;
            }
        }
        results
            .into_iter()
            .zip(requests)
            .map(|(result, request)| result.unwrap_or_else(|| self.request(request)))
            .collect()
    }

    fn attempt(
        &mut self,
        request: &Request,
        ask: Option<NodeAddr>,
    ) -> Result<(Vec<Value>, Next), Failure> {
        let Request {
            slot,
            packed,
            count,
            reply_timeout,
            deadline,
            ..
        } = *request;
        let asking = ask.is_some();
        let mut window = ReplyWindow::new(reply_timeout, deadline);
        let index = match ask {
            Some(target) => self.node_index(target),
            None => {
                if self
                    .shared
                    .as_mut()
                    .is_some_and(|shared| shared.due(window.now))
                {
                    self.adopt_shared_map(shared_map::MAX_AGE);
                }
                if self.slots[usize::from(slot)] == NO_OWNER || self.refreshed.is_none() {
                    self.refresh_map(deadline)?;
                    window = window.reopened();
                }
                match self.slots[usize::from(slot)] {
                    NO_OWNER => {
                        return Ok((Vec::new(), Next::Refresh(RECOVERY_PAUSE)));
                    }
                    owner => usize::from(owner),
                }
            }
        };
        if window.now >= deadline {
            return Err(Failure::new(out_of_time("no time left for the request")));
        }
        let replies = self
            .send(index, packed, count, asking, window, request.retry_broken)
            .map_err(|error| {
                // Not the node to ask for a fresh map next.
                let failed = &self.nodes[index].addr;
                if let Some(seed) = self
                    .config
                    .seeds
                    .iter()
                    .position(|seed| seed.port == failed.port && seed.host == failed.host)
                {
                    self.ask_seed_last(seed);
                }
                let unreachable = Unreachable::of(&error);
                Failure {
                    unreachable: Some(unreachable),
                    // A node at maxclients ran nothing sent on the connection.
                    broken: unreachable != Unreachable::Full,
                    ..Failure::new(error)
                }
            })?;
        let next = self.redirect(slot, index, &replies);
        Ok((replies, next))
    }

    /// What the first redirect among the replies asks for.
    fn redirect(&mut self, slot: u16, asked: usize, replies: &[Value]) -> Next {
        let Some(Value::ServerError(error)) = replies.iter().find(|reply| is_redirect(reply))
        else {
            return Next::Done;
        };
        let error: RedisError = error.clone().into();
        let asked = &self.nodes[asked].addr;
        match error.kind() {
            ErrorKind::Server(ServerErrorKind::Moved) => {
                if let Some(addr) = redirect_target(&error, asked) {
                    let index = self.node_index(addr);
                    self.slots[usize::from(slot)] = u16::try_from(index).unwrap_or(NO_OWNER);
                }
                // Keep the map we have if it was fetched just now.
                let stale = self
                    .refreshed
                    .is_none_or(|at| at.elapsed() >= MAP_REFRESH_INTERVAL);
                if stale {
                    Next::Refresh(Duration::ZERO)
                } else {
                    Next::Again(MOVED_PAUSE)
                }
            }
            ErrorKind::Server(ServerErrorKind::Ask) => match redirect_target(&error, asked) {
                Some(addr) => Next::Ask(addr),
                None => Next::Done,
            },
            ErrorKind::Server(ServerErrorKind::TryAgain) => Next::Again(TRYAGAIN_PAUSE),
            ErrorKind::Server(ServerErrorKind::ClusterDown) => Next::Down(error),
            _ if is_script_cluster_down(&error) => Next::Down(error),
            _ => Next::Refresh(RECOVERY_PAUSE),
        }
    }

    fn node_index(&mut self, addr: NodeAddr) -> usize {
        index_in(&mut self.nodes, addr)
    }

    /// One round trip to a node within `window`, connecting first if needed
    /// (see [`exchange_with`] for `repeat_if_closed`).
    fn send(
        &mut self,
        index: usize,
        packed: &[u8],
        count: usize,
        asking: bool,
        window: ReplyWindow,
        repeat_if_closed: bool,
    ) -> RedisResult<Vec<Value>> {
        let prefix = if asking { ASKING } else { &[] };
        exchange_with(
            &self.config,
            &mut self.nodes[index],
            prefix,
            packed,
            count,
            window,
            repeat_if_closed,
        )
    }

    /// Installs the map a sibling shared, if it was fetched after ours;
    /// returns whether it did.
    fn adopt_shared_map(&mut self, max_age: Duration) -> bool {
        let Some((map, fetched_ms)) = self
            .shared
            .as_mut()
            .and_then(|shared| shared.newer(self.map_fetched_ms, max_age))
        else {
            return false;
        };
        self.install_map(map);
        // As old as its fetch: a MOVED soon after fetches a fresh one.
        let age = Duration::from_millis(shared_map::unix_ms().saturating_sub(fetched_ms));
        let now = Instant::now();
        self.refreshed = Some(now.checked_sub(age).unwrap_or(now));
        self.map_fetched_ms = fetched_ms;
        stats::slot_map(SlotMapSource::Shared);
        true
    }

    /// Installs a map fetched from a node just now, and shares it.
    fn install_fetched_map(&mut self, map: SlotMap) {
        self.map_fetched_ms = shared_map::unix_ms();
        if let Some(shared) = &mut self.shared {
            shared.publish(&map, self.map_fetched_ms);
        }
        self.install_map(map);
        stats::slot_map(SlotMapSource::Fetched);
    }

    /// The address of `slot`'s primary in the map, if it has one.
    fn owner_addr(&self, slot: u16) -> Option<NodeAddr> {
        let owner = self.slots[usize::from(slot)];
        (owner != NO_OWNER).then(|| self.nodes[usize::from(owner)].addr.clone())
    }

    /// Takes a map a sibling fetched after ours, else fetches it from a node
    /// we are connected to, else from the seeds in turn, each asked within
    /// what is left of `deadline`; the first good answer ends it. A seed
    /// connection is kept only if the seed is a primary.
    fn refresh_map(&mut self, deadline: Instant) -> Result<(), Failure> {
        // A worker whose map failed it takes only one fetched since: one
        // fetched before a failover's end may name the primary that failed.
        let max_age = if self.map_fetched_ms == 0 {
            shared_map::MAX_AGE
        } else {
            MAP_REFRESH_INTERVAL
        };
        if self.adopt_shared_map(max_age) {
            return Ok(());
        }
        let mut last_error = None;
        let connected: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].connection.is_some() || self.nodes[i].lent.is_some())
            .collect();
        for index in connected {
            if Instant::now() >= deadline {
                break;
            }
            let window = ReplyWindow::new(self.config.read_timeout, deadline);
            match self.send(index, CLUSTER_SLOTS, 1, false, window, true) {
                Ok(mut replies) => {
                    let asked = self.nodes[index].addr.clone();
                    match parse_slots(replies.pop(), &asked) {
                        Ok(map) => {
                            self.install_fetched_map(map);
                            return Ok(());
                        }
                        Err(error) => remember_failure(&mut last_error, error),
                    }
                }
                Err(error) => remember_failure(&mut last_error, error),
            }
        }
        for seed_index in self.seed_order.clone() {
            if Instant::now() >= deadline {
                last_error.get_or_insert_with(|| out_of_time("no time left to ask the seeds"));
                break;
            }
            let seed = &self.config.seeds[seed_index];
            let asked = NodeAddr {
                host: seed.host.clone(),
                port: seed.port,
            };
            match self.map_from_seed(&asked, deadline) {
                Ok((map, connection)) => {
                    self.install_fetched_map(map);
                    if let Some(node) = self.nodes.iter_mut().find(|node| node.addr == asked) {
                        node.connection.get_or_insert(connection);
                    }
                    return Ok(());
                }
                Err(error) => {
                    remember_failure(&mut last_error, error);
                    self.ask_seed_last(seed_index);
                }
            }
        }
        Err(Failure {
            no_map: true,
            ..Failure::new(last_error.unwrap_or_else(|| {
                RedisError::from((ErrorKind::InvalidClientConfig, "no seed to connect to"))
            }))
        })
    }

    /// A seed that failed is asked last for the next map.
    fn ask_seed_last(&mut self, seed_index: usize) {
        self.seed_order.retain(|&index| index != seed_index);
        self.seed_order.push(seed_index);
    }

    fn map_from_seed(&self, asked: &NodeAddr, deadline: Instant) -> RedisResult<(SlotMap, Link)> {
        let mut connection = connect(&self.config, asked, deadline)?;
        let window = ReplyWindow::new(self.config.read_timeout, deadline);
        let mut reply = connection.exchange(CLUSTER_SLOTS, 0, 1, window)?;
        let map = parse_slots(reply.pop(), asked)?;
        Ok((map, connection))
    }

    /// The replicas of `slot`'s range, as the last map listed them.
    fn replicas_of(&self, slot: u16) -> &[NodeAddr] {
        let after = self
            .replicas
            .partition_point(|(start, _, _)| *start <= slot);
        match after.checked_sub(1).map(|index| &self.replicas[index]) {
            Some((_, end, replicas)) if slot <= *end => replicas,
            _ => &[],
        }
    }

    /// Installs a fresh map. The nodes kept are its primaries, with their
    /// connections: a worker that lives through scale-outs and replaced
    /// nodes holds no address it no longer needs.
    fn install_map(&mut self, map: SlotMap) {
        self.slots.fill(NO_OWNER);
        self.replicas.clear();
        let mut owners: Vec<Node> = Vec::new();
        for SlotRange {
            start,
            end,
            primary: addr,
            replicas,
        } in map
        {
            let index = match owners.iter().position(|node| node.addr == addr) {
                Some(index) => index,
                None => {
                    let kept = self.nodes.iter_mut().find(|node| node.addr == addr);
                    owners.push(match kept {
                        Some(kept) => Node {
                            addr,
                            connection: kept.connection.take(),
                            lent: kept.lent.take(),
                        },
                        None => Node::new(addr, None),
                    });
                    owners.len() - 1
                }
            };
            self.replicas.push((start, end, replicas));
            let start = usize::from(start);
            let end = usize::from(end.min(SLOT_COUNT - 1));
            if start <= end {
                self.slots[start..=end].fill(u16::try_from(index).unwrap_or(NO_OWNER));
            }
        }
        self.replicas.sort_unstable_by_key(|(start, _, _)| *start);
        // Connections to nodes that no longer own a slot (demoted, removed) go.
        self.nodes = owners;
        self.refreshed = Some(Instant::now());
    }
}

/// Keeps the last failure to fetch the map, but a node's refusal at
/// `maxclients` over any later one: it is what to tell, and to wait for.
fn remember_failure(last: &mut Option<RedisError>, error: RedisError) {
    if last
        .as_ref()
        .is_none_or(|last| link::refused_at_maxclients(last).is_none())
    {
        *last = Some(error);
    }
}

/// The pause before trying a node at `maxclients` again, growing with each
/// (see [`FULL_NODE_PAUSE`]) and ending [`FULL_NODE_LAST_TRY`] before
/// `deadline` at the latest; `None` when no try is left.
fn next_full_node_pause(pause: &mut Duration, deadline: Instant) -> Option<Duration> {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .checked_sub(FULL_NODE_LAST_TRY)
        .filter(|left| !left.is_zero())?;
    let this = (*pause).min(left);
    *pause = (*pause * 2).min(FULL_NODE_PAUSE_MAX);
    Some(this)
}

/// The index of the node at `addr` in `nodes`, added (not connected) if new.
fn index_in(nodes: &mut Vec<Node>, addr: NodeAddr) -> usize {
    match nodes.iter().position(|node| node.addr == addr) {
        Some(index) => index,
        None => {
            nodes.push(Node::new(addr, None));
            nodes.len() - 1
        }
    }
}

/// One round trip to `node`, connecting first if needed, with `prefix`
/// (`ASKING`, `READONLY`) sent ahead and its reply skipped. A kept connection
/// the node closed while it sat idle is replaced before use; one it closed
/// since its last use is found at send, and the call repeated at once on a
/// new connection when `repeat_if_closed` (every call is safe to repeat; a
/// closed idle connection is no change of the cluster, so no pause and no
/// new slot map).
fn exchange_with(
    config: &ConnectionConfig,
    node: &mut Node,
    prefix: &[u8],
    packed: &[u8],
    count: usize,
    window: ReplyWindow,
    repeat_if_closed: bool,
) -> RedisResult<Vec<Value>> {
    node.take_back(window.deadline);
    drop_if_closed_while_idle(node, window.now);
    let kept = node.connection.is_some();
    match exchange_once(config, node, prefix, packed, count, window) {
        Err(error) if kept && repeat_if_closed && closed_by_peer(&error) => {
            stats::node_connection(NodeEvent::Replaced);
            exchange_once(config, node, prefix, packed, count, window.reopened())
        }
        result => result,
    }
}

/// A kept connection the node closed while it sat idle is dropped.
fn drop_if_closed_while_idle(node: &mut Node, now: Instant) {
    if node
        .connection
        .as_ref()
        .is_some_and(|connection| connection.closed_while_idle(now))
    {
        stats::node_connection(NodeEvent::ClosedIdle);
        node.connection = None;
    }
}

/// The node's connection, made now if there is none (`window` then opens
/// after the connect).
fn connection<'a>(
    config: &ConnectionConfig,
    node: &'a mut Node,
    window: &mut ReplyWindow,
) -> RedisResult<&'a mut Link> {
    if node.connection.is_none() {
        let link = connect(config, &node.addr, window.deadline)?;
        *window = window.reopened();
        return Ok(node.connection.insert(link));
    }
    Ok(node.connection.as_mut().expect("checked above"))
}

/// The first half of an exchange for [`Cluster::request_each`]: `packed`
/// sent to `node`, connecting first if needed; the replies are read once
/// the node has them. A connection that fails is closed.
fn send_to(
    config: &ConnectionConfig,
    node: &mut Node,
    packed: &[u8],
    mut window: ReplyWindow,
) -> RedisResult<()> {
    node.take_back(window.deadline);
    drop_if_closed_while_idle(node, window.now);
    let sent = connection(config, node, &mut window).and_then(|link| link.send(packed, window));
    if sent.is_err() {
        node.connection = None;
    }
    sent
}

/// [`exchange_with`]'s one attempt. A connection that fails is closed, never
/// reused: it may be out of step.
fn exchange_once(
    config: &ConnectionConfig,
    node: &mut Node,
    prefix: &[u8],
    packed: &[u8],
    count: usize,
    mut window: ReplyWindow,
) -> RedisResult<Vec<Value>> {
    let connection = connection(config, node, &mut window)?;
    let result = if prefix.is_empty() {
        connection.exchange(packed, 0, count, window)
    } else {
        let mut with_prefix = Vec::with_capacity(prefix.len() + packed.len());
        with_prefix.extend_from_slice(prefix);
        with_prefix.extend_from_slice(packed);
        connection.exchange(&with_prefix, 1, count, window)
    };
    match &result {
        Err(_) => node.connection = None,
        // The connection's buffers keep the size of its largest exchange:
        // after a big session, let them go rather than keep them for the
        // worker's life; the freed heap goes back to the system once the
        // caller has dropped the replies too.
        Ok(replies) if packed.len() + reply_bytes(replies) > LARGE_EXCHANGE => {
            node.connection = None;
            TRIM_PENDING.set(true);
        }
        Ok(_) => {}
    }
    result
}

/// A connection whose connect and TLS handshake end by `deadline`,
/// and at the latest after the connect timeout.
fn connect(config: &ConnectionConfig, addr: &NodeAddr, deadline: Instant) -> RedisResult<Link> {
    let now = Instant::now();
    let deadline = (now + config.connect_timeout).min(deadline);
    if now >= deadline {
        return Err(out_of_time("no time left to connect"));
    }
    let link = Link::open(config, addr, deadline)?;
    stats::node_connection(NodeEvent::Opened);
    Ok(link)
}

fn out_of_time(what: &'static str) -> RedisError {
    RedisError::from(std::io::Error::new(std::io::ErrorKind::TimedOut, what))
}

/// A reply that asks for another node, another try or a fresh slot map:
/// the command did not run.
pub fn is_redirect(reply: &Value) -> bool {
    let Value::ServerError(error) = reply else {
        return false;
    };
    let error = RedisError::from(error.clone());
    matches!(
        error.kind(),
        ErrorKind::Server(
            ServerErrorKind::Moved
                | ServerErrorKind::Ask
                | ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::MasterDown
                | ServerErrorKind::BusyLoading
                | ServerErrorKind::ReadOnly
        )
    ) || is_script_cluster_down(&error)
}

/// A script stopped at its first write because the cluster is down with
/// `cluster-allow-reads-when-down`: Redis and Valkey word it as a script
/// error, not `CLUSTERDOWN`, but nothing was written, as with `CLUSTERDOWN`.
fn is_script_cluster_down(error: &RedisError) -> bool {
    error.to_string().contains("while the cluster is down")
}

/// The bytes of string data in replies.
fn reply_bytes(replies: &[Value]) -> usize {
    replies
        .iter()
        .map(|reply| match reply {
            Value::BulkString(bytes) => bytes.len(),
            Value::Array(items) => reply_bytes(items),
            _ => 0,
        })
        .sum()
}

/// Returns freed heap memory to the system (glibc keeps it otherwise, since
/// a large free raises its threshold for returning memory).
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: malloc_trim only returns free memory; any pad is valid.
        unsafe {
            malloc_trim(0);
        }
    }
}

const CLUSTER_SLOTS: &[u8] = b"*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n";

/// The `host:port` an `ASK` or `MOVED` names (`-MOVED <slot> <host>:<port>`;
/// an IPv6 host may come in brackets, an empty one means the node asked).
fn redirect_target(error: &RedisError, asked: &NodeAddr) -> Option<NodeAddr> {
    let (addr, _slot) = error.redirect_node()?;
    let (host, port) = addr.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some(NodeAddr {
        host: if host.is_empty() || host == "?" {
            asked.host.clone()
        } else {
            host.to_owned()
        },
        port: port.parse().ok()?,
    })
}

/// `CLUSTER SLOTS`: ranges with their primary first, then their replicas. An
/// empty or `?` host means the node we asked.
fn parse_slots(reply: Option<Value>, asked: &NodeAddr) -> RedisResult<SlotMap> {
    let invalid = || RedisError::from((ErrorKind::Parse, "unexpected reply to CLUSTER SLOTS"));
    let reply = match reply {
        Some(Value::ServerError(error)) => return Err(error.into()),
        Some(reply) => reply,
        None => return Err(invalid()),
    };
    let Value::Array(ranges) = reply else {
        return Err(invalid());
    };
    let mut map = Vec::with_capacity(ranges.len());
    for range in ranges {
        let Value::Array(items) = range else {
            return Err(invalid());
        };
        let int = |value: Option<&Value>| match value {
            Some(Value::Int(n)) => u16::try_from(*n).ok(),
            _ => None,
        };
        let (Some(start), Some(end)) = (int(items.first()), int(items.get(1))) else {
            return Err(invalid());
        };
        let node = |value: &Value| {
            let Value::Array(node) = value else {
                return Err(invalid());
            };
            let host = match node.first() {
                Some(Value::BulkString(host)) => String::from_utf8_lossy(host).into_owned(),
                Some(Value::SimpleString(host)) => host.clone(),
                Some(Value::Nil) | None => String::new(),
                _ => return Err(invalid()),
            };
            let host = if host.is_empty() || host == "?" {
                asked.host.clone()
            } else {
                host
            };
            let port = int(node.get(1)).ok_or_else(invalid)?;
            Ok(NodeAddr { host, port })
        };
        let primary = node(items.get(2).ok_or_else(invalid)?)?;
        let replicas = items[3..].iter().map(node).collect::<RedisResult<_>>()?;
        map.push(SlotRange {
            start,
            end,
            primary,
            replicas,
        });
    }
    if map.is_empty() {
        return Err(RedisError::from((
            ErrorKind::Server(ServerErrorKind::ClusterDown),
            "the cluster serves no slots",
        )));
    }
    Ok(map)
}

/// Failures that last only until the cluster has failed over, a node is back
/// or the slot map has settled. Refused logins and certificates fail at once.
pub fn is_transient(err: &RedisError) -> bool {
    let text = err.to_string();
    let refused = text.contains("AuthenticationFailed")
        || text.contains("WRONGPASS")
        || text.contains("certificate");
    !refused
        && (matches!(
            err.kind(),
            ErrorKind::Io
                | ErrorKind::Server(
                    ServerErrorKind::TryAgain
                        | ServerErrorKind::ClusterDown
                        | ServerErrorKind::MasterDown
                        | ServerErrorKind::BusyLoading
                        | ServerErrorKind::ReadOnly
                        | ServerErrorKind::Moved
                        | ServerErrorKind::Ask
                )
        ) || err.is_timeout()
            || err.is_connection_dropped())
}

/// The kind of error the stats count `err` as.
pub fn error_kind(err: &RedisError) -> stats::ErrorKind {
    let text = err.to_string();
    if text.contains("certificate") || text.contains("TLS") || text.contains("tls") {
        return stats::ErrorKind::Tls;
    }
    if err.is_timeout() {
        return stats::ErrorKind::Timeout;
    }
    match err.kind() {
        ErrorKind::AuthenticationFailed | ErrorKind::Server(ServerErrorKind::NoPerm) => {
            stats::ErrorKind::Auth
        }
        _ if text.contains("AuthenticationFailed") || text.contains("WRONGPASS") => {
            stats::ErrorKind::Auth
        }
        _ if err.code() == Some("OOM") => stats::ErrorKind::Oom,
        ErrorKind::Io => stats::ErrorKind::Io,
        _ if is_transient(err) => stats::ErrorKind::Cluster,
        _ => stats::ErrorKind::Server,
    }
}

mod fallback;
mod shared_map;
pub use crate::stats::ReadFrom;
pub use shared_map::refusal_to_tell as shared_map_refusal_to_tell;
#[cfg(test)]
mod server_replies;

#[cfg(test)]
mod tests {
    use super::*;

    fn node(host: &str, port: i64) -> Value {
        Value::Array(vec![
            Value::BulkString(host.as_bytes().to_vec()),
            Value::Int(port),
            Value::BulkString(b"id".to_vec()),
        ])
    }

    #[test]
    fn slot_map_hosts_default_to_the_node_asked() {
        let asked = NodeAddr {
            host: "10.0.0.9".into(),
            port: 7000,
        };
        let reply = Value::Array(vec![
            Value::Array(vec![Value::Int(0), Value::Int(5460), node("?", 7001)]),
            Value::Array(vec![Value::Int(5461), Value::Int(10922), node("", 7002)]),
            Value::Array(vec![
                Value::Int(10923),
                Value::Int(16383),
                node("::1", 7003),
                node("replica.example", 7004),
            ]),
        ]);
        let map = parse_slots(Some(reply), &asked).unwrap();
        let hosts: Vec<String> = map.iter().map(|range| range.primary.to_string()).collect();
        assert_eq!(hosts, ["10.0.0.9:7001", "10.0.0.9:7002", "[::1]:7003"]);
        assert_eq!((map[2].start, map[2].end), (10923, 16383));
        assert!(map[0].replicas.is_empty());
        assert_eq!(map[2].replicas[0].to_string(), "replica.example:7004");
    }

    #[test]
    fn redirects_name_host_and_port() {
        let asked = NodeAddr {
            host: "10.0.0.9".into(),
            port: 7000,
        };
        let target = |reply: &str| {
            let error: RedisError = match redis::parse_redis_value(reply.as_bytes()).unwrap() {
                Value::ServerError(error) => error.into(),
                other => panic!("{other:?}"),
            };
            redirect_target(&error, &asked).map(|addr| addr.to_string())
        };
        assert_eq!(
            target("-MOVED 3999 127.0.0.1:6381\r\n").as_deref(),
            Some("127.0.0.1:6381")
        );
        assert_eq!(
            target("-ASK 3999 [::1]:6381\r\n").as_deref(),
            Some("[::1]:6381")
        );
        assert_eq!(
            target("-MOVED 3999 :6381\r\n").as_deref(),
            Some("10.0.0.9:6381")
        );
        assert_eq!(target("-ERR wrong\r\n"), None);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_seed_that_failed_is_tried_last_next_time() {
        let seeds = std::env::var("RCS_SEEDS").expect("RCS_SEEDS of a running cluster");
        let live = seeds.split(',').next().unwrap();
        // Connections complete (the kernel accepts them) and nothing answers.
        let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let hung = hung.local_addr().unwrap();
        let path = format!("seed[]={hung}&seed[]={live}&timeout=1&read_timeout=0.3");
        let config = ConnectionConfig::from(&crate::save_path::parse(&path).unwrap());
        let mut cluster = Cluster::new(Rc::new(config));
        let timed_refresh = |cluster: &mut Cluster| {
            let started = Instant::now();
            cluster
                .refresh_map(started + Duration::from_secs(2))
                .unwrap();
            started.elapsed()
        };
        let first = timed_refresh(&mut cluster);
        assert!(first >= Duration::from_millis(300), "{first:?}");
        // Without connections, the next refresh starts from the seeds again.
        for node in &mut cluster.nodes {
            node.connection = None;
        }
        let second = timed_refresh(&mut cluster);
        assert!(second < Duration::from_millis(250), "{second:?}");
    }

    #[test]
    fn nodes_that_left_the_map_are_forgotten() {
        let config = ConnectionConfig::from(&crate::save_path::parse("seed[]=h:1").unwrap());
        let mut cluster = Cluster::new(Rc::new(config));
        let addr = |port| NodeAddr {
            host: "10.0.0.1".into(),
            port,
        };
        // Months of scale-outs, replaced nodes and redirects to nodes since gone.
        for round in 0..100u16 {
            cluster.node_index(addr(20000 + round));
            let range = |start, end, port| SlotRange {
                start,
                end,
                primary: addr(port),
                replicas: vec![addr(port + 1000)],
            };
            cluster.install_map(vec![
                range(0, 8191, 7000 + round),
                range(8192, 16383, 7001 + round),
            ]);
        }
        let kept: Vec<String> = cluster.nodes.iter().map(|n| n.addr.to_string()).collect();
        assert_eq!(kept, ["10.0.0.1:7099", "10.0.0.1:7100"]);
        assert_eq!(cluster.slots[0], 0);
        assert_eq!(cluster.slots[16383], 1);
        let replicas: Vec<String> = cluster
            .replicas_of(16383)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(replicas, ["10.0.0.1:8100"]);
    }

    #[test]
    fn a_full_node_is_tried_after_pauses_that_double_up_to_a_second() {
        let mut pause = FULL_NODE_PAUSE;
        let far = Instant::now() + Duration::from_secs(60);
        let pauses: Vec<u128> = (0..6)
            .map(|_| next_full_node_pause(&mut pause, far).unwrap().as_millis())
            .collect();
        assert_eq!(pauses, [100, 200, 400, 800, 1000, 1000]);
        // The last ends before the deadline, leaving time for one more try.
        let near = Instant::now() + Duration::from_millis(300);
        let last = next_full_node_pause(&mut pause, near).unwrap();
        assert!(last <= Duration::from_millis(250), "{last:?}");
        // No time for another.
        let now = Instant::now() + FULL_NODE_LAST_TRY;
        assert_eq!(next_full_node_pause(&mut pause, now), None);
    }

    #[test]
    fn a_map_without_slots_is_an_error() {
        let asked = NodeAddr {
            host: "h".into(),
            port: 1,
        };
        assert!(parse_slots(Some(Value::Array(vec![])), &asked).is_err());
        assert!(parse_slots(Some(Value::Int(3)), &asked).is_err());
    }
}
