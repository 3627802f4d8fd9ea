//! The lease judged by the time the server served ([`heartbeat`]), checked
//! with stateright against a server that stalls and fails over.
//!
//! Each client takes the lock once and lets go by a save; a client that
//! finds it busy joins the queue and polls the lock and its holder's
//! heartbeat every tick, judging them with the real [`Chain`]; a holder's
//! watchdog moves its heartbeat every `renew_every` over the holder's own
//! connection. The server's steps are the protocol's calls, applied
//! atomically: a take (the lock and the taker's heartbeat, with the lock's
//! TTL the backstop, `lock_expire` + a window; a caller that finds it busy
//! queues, its heartbeat made for a hand-over), a renewal (the heartbeat
//! moves while the lock is the caller's), a poll (the lock's holder and its
//! heartbeat), a break (a compare-and-set on the holder and the heartbeat
//! the breaker saw, handing the lock to the head of the queue) and a save
//! (stores only while the lock is the caller's, and hands it on).
//!
//! Sending is apart from applying: each client has one connection, a queue
//! that the primary drains in order; calls of different connections apply
//! in any order. Time runs in ticks of `tick_ms`; while the primary serves,
//! every queued call applies before the next tick.
//!
//! The adversary: the primary stalls for any of `stall_ticks` (clocks
//! run, nothing applies, no key expires; at the resume due keys expire on
//! first touch and the queued calls interleave); a failover, at the end of
//! a stall, promotes a replica holding any prefix of the primary's history
//! (the Replicate step copies it), its clock up to `clock_step` ticks off,
//! and loses every queue: each client's call in flight fails and is sent
//! again, a poller's chain starts anew with the grace; a client dies at any
//! while it holds the lock, its queued calls still applied; a holder lets go at any tick
//! before `lock_expire`; clients start at any tick up to `begin_by`.
//!
//! Properties:
//! - live holder kept: a live holder's lock is never broken, nor expires,
//!   before it lets go or `lock_expire` has passed since its take, and its
//!   save is never refused (unless a failover lost the take itself);
//! - dead holder bound: a lock whose holder is dead keeps a live waiter
//!   waiting at most `dead_bound` ticks of serving, counted from the death
//!   or the take, the end of the last stall, or a failover plus the grace;
//! - no lost update holds by the save's fence (stores only over the data
//!   its saver read), the abstract form of the log of savers that the lock
//!   model checks on the real scripts;
//! - right actions succeed: a run where every client saves, one where a
//!   waiter breaks a dead holder's lock, and one where a live holder saves
//!   across a stall and across a failover, with a waiter queued.
//!
//! [`Rule::LeaseAsTtl`] (the lock's TTL is the lease, as in the previous
//! release) and [`Rule::NoGapCheck`] (a chain that takes two observations a
//! window apart without looking at the gaps) must fail the first property.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use stateright::{Checker, Model, Property};

use crate::lock::heartbeat::{Chain, LeaseTimes, Verdict};

/// How a waiter decides that the holder is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// The waiter's chain of observations ([`Chain`]).
    ServingTime,
    /// Wrong: the lock's TTL is the lease, the holder's renewals extend it,
    /// and a waiter takes a lock that expired.
    LeaseAsTtl,
    /// Wrong: a chain that never looks at the gaps between its calls.
    NoGapCheck,
}

#[derive(Clone, Debug)]
pub struct ServingModel {
    pub rule: Rule,
    /// How long each client holds the lock before its save, in ticks; `None`:
    /// any time before its `lock_expire`.
    pub holds: Vec<Option<i64>>,
    pub tick_ms: u64,
    pub times: LeaseTimes,
    pub lock_expire_ticks: i64,
    /// How many ticks of serving a dead holder may keep a live waiter.
    pub dead_bound: i64,
    pub stalls: u8,
    /// The lengths a stall may have, in ticks.
    pub stall_ticks: Vec<i64>,
    pub failovers: u8,
    pub clock_step: i64,
    pub crashes: u8,
    pub max_ticks: i64,
    /// Requests begin up to this tick.
    pub begin_by: i64,
    /// A waiter gives up on a poll after this many ticks.
    pub read_timeout: i64,
    pub reached: Arc<AtomicU8>,
}

/// A run reached this: a test asserts each one the configuration turns on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    /// A waiter broke a dead holder's lock.
    Break,
    /// A live holder saved after a stall in its hold with a waiter queued.
    SavedAcrossStall,
    /// A live holder saved after a failover in its hold with a waiter queued.
    SavedAcrossFailover,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Call {
    Take,
    Renew(u8),
    Poll,
    Break { holder: u8, beat: u8 },
    Save(u64),
}

/// A call on its way: when it left, and whether its client gave up
/// waiting for the reply (a read timeout: the call may still apply).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Sent {
    call: Call,
    at: i64,
    abandoned: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Lock {
    holder: u8,
    /// Server ticks.
    expires: i64,
    /// Real ticks: when it became the holder's.
    since: i64,
}

/// One node's keys.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Node {
    /// Its clock: real ticks + this.
    skew: i64,
    lock: Option<Lock>,
    /// Each client's heartbeat: its value and expiry (server ticks).
    beats: Vec<Option<(u8, i64)>>,
    queue: Vec<u8>,
    data: u64,
    /// Whose saves applied: a save repeated after its reply was lost finds
    /// itself here (the real protocol's log of savers).
    saved: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    /// Its take is on its way.
    Taking,
    Waiting,
    Holding,
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Client {
    phase: Phase,
    /// When its request began: a dead holder's time counts from then too.
    began: i64,
    died: Option<i64>,
    /// The request's call in flight, and when it was sent.
    call: Option<(Call, i64)>,
    /// The watchdog's renewal is in flight.
    renewing: bool,
    next_renewal: i64,
    beat: u8,
    read: u64,
    /// When the lock became its own (real ticks).
    taken: i64,
    /// A failover lost its take: its save may be refused.
    lost_to_failover: bool,
    stalled_in_hold: bool,
    failed_over_in_hold: bool,
    chain: Chain<(u8, u8)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    now: i64,
    primary: Node,
    replica: Node,
    /// Each client's connection: calls sent, not yet applied.
    queues: Vec<VecDeque<Sent>>,
    stalled_until: Option<i64>,
    /// Since when a dead holder's time counts: the end of the last stall,
    /// or the last failover plus the grace.
    counts_from: i64,
    clients: Vec<Client>,
    stalls: u8,
    failovers: u8,
    crashes: u8,
    violation: Option<(Invariant, String)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Invariant {
    LiveHolderKept,
    DeadHolderBound,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Tick,
    Begin(u8),
    Apply(u8),
    Save(u8),
    Crash(u8),
    Stall(i64),
    Replicate,
    /// At the end of a stall: the replica takes over, its clock this far off.
    Failover(i64),
}

/// A client's monotonic clock at `ticks`.
fn instant(ms: u64) -> Instant {
    static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);
    *EPOCH + Duration::from_millis(ms)
}

impl Node {
    fn now(&self, real: i64) -> i64 {
        real + self.skew
    }

    /// Keys past their TTL are gone by the first touch: the lock whose
    /// holder it was, if it expired.
    fn expire(&mut self, real: i64) -> Option<Lock> {
        let now = self.now(real);
        for beat in &mut self.beats {
            if beat.is_some_and(|(_, expires)| expires <= now) {
                *beat = None;
            }
        }
        self.lock.take_if(|lock| lock.expires <= now)
    }
}

impl State {
    fn fail(&mut self, invariant: Invariant, why: String) {
        self.violation.get_or_insert((invariant, why));
    }

    fn serving(&self) -> bool {
        self.stalled_until.is_none()
    }

    fn send(&mut self, c: usize, call: Call) {
        self.queues[c].push_back(Sent {
            call,
            at: self.now,
            abandoned: false,
        });
        if !matches!(call, Call::Renew(_)) {
            self.clients[c].call = Some((call, self.now));
        }
    }
}

impl ServingModel {
    fn reach(&self, feature: Feature) {
        self.reached.fetch_or(1 << feature as u8, Ordering::Relaxed);
    }

    pub fn reached(&self, feature: Feature) -> bool {
        self.reached.load(Ordering::Relaxed) & 1 << feature as u8 != 0
    }

    pub fn features(&self) -> Vec<Feature> {
        let mut on = vec![];
        if self.rule == Rule::ServingTime {
            if self.crashes > 0 {
                on.push(Feature::Break);
            }
            if self.stalls > 0 {
                on.push(Feature::SavedAcrossStall);
            }
            if self.failovers > 0 {
                on.push(Feature::SavedAcrossFailover);
            }
        }
        on
    }

    fn ticks(&self, duration: Duration) -> i64 {
        (duration.as_millis() as u64).div_ceil(self.tick_ms) as i64
    }

    fn at(&self, tick: i64) -> Instant {
        instant(tick as u64 * self.tick_ms)
    }

    /// The TTL a take or hand-over gives the lock, in ticks.
    fn lock_ttl(&self) -> i64 {
        match self.rule {
            Rule::LeaseAsTtl => self.ticks(self.times.window),
            // The backstop, with a margin for a clock step.
            _ => self.lock_expire_ticks + self.ticks(self.times.window),
        }
    }

    fn chain(&self) -> Chain<(u8, u8)> {
        let times = match self.rule {
            Rule::NoGapCheck => LeaseTimes {
                gap: Duration::from_secs(3600),
                ..self.times
            },
            _ => self.times,
        };
        Chain::new(times)
    }

    /// The lock goes to the head of the queue, or is deleted.
    fn hand_on(&self, node: &mut Node, real: i64) {
        node.lock = (!node.queue.is_empty()).then(|| Lock {
            holder: node.queue.remove(0),
            expires: node.now(real) + self.lock_ttl(),
            since: real,
        });
    }

    /// A lock is gone from under its holder `lock.holder`, by `how`.
    fn superseded(&self, state: &mut State, lock: Lock, how: &str) {
        let holder = &state.clients[usize::from(lock.holder)];
        let live = holder.died.is_none() && holder.phase == Phase::Holding;
        if live && state.now < lock.since + self.lock_expire_ticks {
            state.fail(
                Invariant::LiveHolderKept,
                format!(
                    "c{}'s lock {how} at {}, taken at {}",
                    lock.holder, state.now, lock.since
                ),
            );
        }
    }

    fn expire(&self, state: &mut State) {
        if let Some(lock) = state.primary.expire(state.now) {
            self.superseded(state, lock, "expired");
        }
    }

    /// The primary applies client `c`'s oldest queued call, and `c` reads
    /// the reply; what `c` sends next goes out at once.
    fn apply(&self, state: &mut State, c: usize) {
        let Sent {
            call,
            at: sent,
            abandoned,
        } = state.queues[c].pop_front().unwrap();
        self.expire(state);
        if abandoned {
            // Applied, but nobody reads the reply: a poll shows nothing.
            debug_assert_eq!(call, Call::Poll);
            return;
        }
        let next = match call {
            Call::Take => self.take(state, c),
            Call::Renew(beat) => {
                self.renew(state, c, beat);
                None
            }
            Call::Poll => self.poll(state, c, sent),
            Call::Break { holder, beat } => {
                self.break_lock(state, c, holder, beat);
                None
            }
            Call::Save(value) => {
                self.save(state, c, value);
                None
            }
        };
        if let Some(call) = next {
            state.send(c, call);
        }
    }

    fn take(&self, state: &mut State, c: usize) -> Option<Call> {
        let now = state.now;
        let c8 = c as u8;
        let State {
            primary: node,
            clients,
            ..
        } = state;
        let backstop = node.now(now) + self.lock_ttl();
        let client = &mut clients[c];
        client.call = None;
        match node.lock {
            None => {
                node.queue.retain(|&w| w != c8);
                node.lock = Some(Lock {
                    holder: c8,
                    expires: backstop,
                    since: now,
                });
                if self.rule != Rule::LeaseAsTtl {
                    node.beats[c] = Some((0, backstop));
                }
                self.holds(client, node.data, now, now);
            }
            Some(lock) if lock.holder == c8 => self.holds(client, node.data, lock.since, now),
            Some(_) => {
                if !node.queue.contains(&c8) {
                    node.queue.push(c8);
                    // Its heartbeat, for a hand-over: a lock handed to a
                    // waiter that died can be broken too.
                    if self.rule != Rule::LeaseAsTtl {
                        node.beats[c] = Some((0, backstop + self.max_ticks));
                    }
                }
                client.phase = Phase::Waiting;
            }
        }
        None
    }

    fn renew(&self, state: &mut State, c: usize, beat: u8) {
        state.clients[c].renewing = false;
        let now = state.primary.now(state.now);
        let node = &mut state.primary;
        let Some(lock) = &mut node.lock else {
            return;
        };
        if lock.holder != c as u8 {
            return;
        }
        match self.rule {
            Rule::LeaseAsTtl => lock.expires = now + self.ticks(self.times.window),
            _ => node.beats[c] = Some((beat, lock.expires)),
        }
    }

    fn poll(&self, state: &mut State, c: usize, sent: i64) -> Option<Call> {
        let now = state.now;
        let node = &state.primary;
        let since = node.lock.map_or(now, |lock| lock.since);
        let seen = node.lock.map(|lock| {
            let beat = node.beats[usize::from(lock.holder)].map(|(beat, _)| beat);
            (lock.holder, beat)
        });
        let data = node.data;
        let client = &mut state.clients[c];
        client.call = None;
        match seen {
            Some((holder, _)) if usize::from(holder) == c => {
                self.holds(client, data, since, now);
                None
            }
            None => Some(Call::Take),
            Some(_) if self.rule == Rule::LeaseAsTtl => None,
            Some((holder, beat)) => {
                let seen = beat.map(|beat| (holder, beat));
                match client.chain.observe(self.at(sent), self.at(now), seen) {
                    Verdict::Break((holder, beat)) => Some(Call::Break { holder, beat }),
                    Verdict::Wait => None,
                }
            }
        }
    }

    fn break_lock(&self, state: &mut State, c: usize, holder: u8, beat: u8) {
        state.clients[c].call = None;
        let h = usize::from(holder);
        let node = &mut state.primary;
        let Some(lock) = node.lock else {
            return;
        };
        if lock.holder != holder || node.beats[h].is_none_or(|(b, _)| b != beat) {
            return;
        }
        node.beats[h] = None;
        self.hand_on(node, state.now);
        if state.clients[h].died.is_some() {
            self.reach(Feature::Break);
        }
        self.superseded(state, lock, "broken");
    }

    fn save(&self, state: &mut State, c: usize, value: u64) {
        let now = state.now;
        let node = &state.primary;
        let repeat = node.saved & 1 << c != 0;
        let own = node.lock.is_some_and(|lock| usize::from(lock.holder) == c);
        let client = &state.clients[c];
        // The fence: a failover that undid a hand-over can bring back the
        // waiter's queue entry, and a later release hand it the lock again
        // with its data stale (the real protocol compares the log of savers).
        let fenced = own && !repeat && node.data != client.read;
        if own && !repeat && !fenced {
            let node = &mut state.primary;
            node.data = value;
            node.saved |= 1 << c;
            node.beats[c] = None;
            self.hand_on(node, now);
        } else if !repeat
            && (fenced || !own)
            && client.died.is_none()
            && !client.lost_to_failover
            && now < client.taken + self.lock_expire_ticks
        {
            let why = format!("c{c}'s save refused at {now}, taken at {}", client.taken);
            state.fail(Invariant::LiveHolderKept, why);
        }
        let others = state.primary.queue.len() + usize::from(state.primary.lock.is_some());
        let client = &mut state.clients[c];
        if client.died.is_none() && (own || repeat) && others > 0 {
            if client.stalled_in_hold {
                self.reach(Feature::SavedAcrossStall);
            }
            if client.failed_over_in_hold {
                self.reach(Feature::SavedAcrossFailover);
            }
        }
        client.call = None;
        client.phase = Phase::Done;
    }

    /// `client` learns at `now` that the lock is its own since `since`
    /// (the client's clock of a take is read before the call that took it).
    fn holds(&self, client: &mut Client, data: u64, since: i64, now: i64) {
        client.phase = Phase::Holding;
        client.read = data;
        client.taken = since;
        client.next_renewal = now + self.ticks(self.times.renew_every);
    }

    /// Whether holder `c` may let go at `now`, and whether it must: at its
    /// hold's end, and never past its `lock_expire`, so that its save is
    /// never late by its own choice.
    fn lets_go(&self, c: usize, client: &Client, now: i64) -> (bool, bool) {
        let by = client.taken + self.lock_expire_ticks - 2;
        let at = self.holds[c].map_or(by, |hold| (client.taken + hold).min(by));
        (self.holds[c].is_none() || now >= at, now >= at)
    }

    fn tick(&self, state: &mut State) {
        state.now += 1;
        let now = state.now;
        if state.stalled_until == Some(now) {
            state.stalled_until = None;
            state.counts_from = state.counts_from.max(now);
        }
        if state.serving() {
            self.expire(state);
        }
        for c in 0..state.clients.len() {
            let client = &state.clients[c];
            if client.died.is_some() {
                continue;
            }
            match client.phase {
                Phase::Holding if !client.renewing && now >= client.next_renewal => {
                    let beat = client.beat.wrapping_add(1);
                    let client = &mut state.clients[c];
                    client.beat = beat;
                    client.renewing = true;
                    client.next_renewal = now + self.ticks(self.times.renew_every);
                    state.send(c, Call::Renew(beat));
                }
                Phase::Waiting if client.call.is_none() => state.send(c, Call::Poll),
                // A poll unanswered for a read timeout: the waiter gives up
                // on it and sends another, on a new connection (kept in
                // order here: the old one's poll shows nothing anyway).
                Phase::Waiting
                    if client.call.is_some_and(|(call, at)| {
                        call == Call::Poll && now - at >= self.read_timeout
                    }) =>
                {
                    for sent in &mut state.queues[c] {
                        sent.abandoned |= sent.call == Call::Poll;
                    }
                    if self.rule == Rule::ServingTime {
                        state.clients[c].chain.interrupted();
                    }
                    state.send(c, Call::Poll);
                }
                _ => {}
            }
        }
        self.check_dead_holder(state);
    }

    /// A live waiter that began after the holder died, after the lock
    /// became the dead holder's and after the server last came back, waits
    /// at most `dead_bound` ticks.
    fn check_dead_holder(&self, state: &mut State) {
        let Some(lock) = state.primary.lock else {
            return;
        };
        let Some(died) = state.clients[usize::from(lock.holder)].died else {
            return;
        };
        let from = died.max(lock.since).max(state.counts_from);
        let waited = state
            .clients
            .iter()
            .filter(|client| client.died.is_none() && client.phase == Phase::Waiting)
            .map(|client| state.now - from.max(client.began))
            .max();
        if state.serving() && waited.is_some_and(|waited| waited > self.dead_bound) {
            let why = format!(
                "c{} dead since {died}, holding since {}, at {}",
                lock.holder, lock.since, state.now
            );
            state.fail(Invariant::DeadHolderBound, why);
        }
    }

    fn failover(&self, state: &mut State, step: i64) {
        let real = state.now;
        let mut node = state.replica.clone();
        node.skew += step;
        state.primary = node.clone();
        state.replica = node;
        state.stalled_until = None;
        state.counts_from = real + self.ticks(self.times.grace);
        for c in 0..state.clients.len() {
            state.queues[c].clear();
            let lost_take = state
                .primary
                .lock
                .is_none_or(|lock| usize::from(lock.holder) != c);
            let client = &mut state.clients[c];
            if client.phase != Phase::Idle {
                client.chain.interrupted();
            }
            if client.phase == Phase::Holding {
                client.failed_over_in_hold = true;
                client.lost_to_failover |= lost_take;
                // Its watchdog renews on the new primary at once.
                client.renewing = false;
                client.next_renewal = real;
            }
            // The call in flight failed: sent again (a poll waits its tick).
            let again = client.call.take().filter(|(call, _)| *call != Call::Poll);
            if client.died.is_none()
                && let Some((call, _)) = again
            {
                state.send(c, call);
            }
        }
    }
}

impl Model for ServingModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let n = self.holds.len();
        let node = Node {
            skew: 0,
            lock: None,
            beats: vec![None; n],
            queue: vec![],
            data: 0,
            saved: 0,
        };
        let client = Client {
            phase: Phase::Idle,
            began: 0,
            died: None,
            call: None,
            renewing: false,
            next_renewal: 0,
            beat: 0,
            read: 0,
            taken: 0,
            lost_to_failover: false,
            stalled_in_hold: false,
            failed_over_in_hold: false,
            chain: self.chain(),
        };
        vec![State {
            now: 0,
            primary: node.clone(),
            replica: node,
            queues: vec![VecDeque::new(); n],
            stalled_until: None,
            counts_from: 0,
            clients: vec![client; n],
            stalls: 0,
            failovers: 0,
            crashes: 0,
            violation: None,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.violation.is_some() {
            return;
        }
        let serving = state.serving();
        // While the primary serves, what was sent applies before anything
        // else happens: in any order across connections. (A crash, a stall
        // or a copy to the replica between two applied calls of one tick
        // shows nothing that one between ticks does not.)
        if serving {
            actions.extend(
                (0..state.clients.len())
                    .filter(|&c| !state.queues[c].is_empty())
                    .map(|c| Action::Apply(c as u8)),
            );
            if !actions.is_empty() {
                return;
            }
        }
        let mut must_let_go = false;
        for (c, client) in state.clients.iter().enumerate() {
            let c8 = c as u8;
            if client.died.is_some() {
                continue;
            }
            match client.phase {
                Phase::Idle if state.now <= self.begin_by => actions.push(Action::Begin(c8)),
                Phase::Holding if client.call.is_none() => {
                    let (may, must) = self.lets_go(c, client, state.now);
                    if may {
                        actions.push(Action::Save(c8));
                    }
                    must_let_go |= must;
                }
                _ => {}
            }
            // Holders die: a waiter that dies is the lock model's case.
            if state.crashes < self.crashes && client.phase == Phase::Holding {
                actions.push(Action::Crash(c8));
            }
        }
        let done = state
            .clients
            .iter()
            .all(|client| client.died.is_some() || client.phase == Phase::Done);
        if !must_let_go && !done && state.now < self.max_ticks {
            actions.push(Action::Tick);
        }
        if serving && state.stalls < self.stalls {
            actions.extend(self.stall_ticks.iter().copied().map(Action::Stall));
        }
        if self.failovers > state.failovers && state.replica != state.primary {
            actions.push(Action::Replicate);
        }
        if !serving && state.failovers < self.failovers {
            actions.extend([-self.clock_step, 0, self.clock_step].map(Action::Failover));
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Tick => self.tick(&mut state),
            Action::Begin(c) => {
                let client = &mut state.clients[usize::from(c)];
                client.began = state.now;
                client.phase = Phase::Taking;
                state.send(usize::from(c), Call::Take);
            }
            Action::Apply(c) => self.apply(&mut state, usize::from(c)),
            Action::Save(c) => {
                let c = usize::from(c);
                let value = state.clients[c].read + 1;
                state.send(c, Call::Save(value));
            }
            Action::Crash(c) => {
                state.crashes += 1;
                state.clients[usize::from(c)].died = Some(state.now);
                self.check_dead_holder(&mut state);
            }
            Action::Stall(ticks) => {
                state.stalls += 1;
                state.stalled_until = Some(state.now + ticks);
                let waiting = !state.primary.queue.is_empty();
                for client in &mut state.clients {
                    if client.phase == Phase::Holding && waiting {
                        client.stalled_in_hold = true;
                    }
                }
            }
            Action::Replicate => state.replica = state.primary.clone(),
            Action::Failover(step) => {
                state.failovers += 1;
                self.failover(&mut state, step);
            }
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            holds!("live holder kept", Invariant::LiveHolderKept),
            holds!("dead holder bound", Invariant::DeadHolderBound),
            Property::sometimes(
                "every client saved",
                |model: &ServingModel, state: &State| {
                    state.primary.saved.count_ones() as usize == model.holds.len()
                },
            ),
        ]
    }
}

/// Checks a model to the end, on one thread (see [`super::check`]).
pub fn check(model: ServingModel) -> impl Checker<ServingModel> {
    model
        .checker()
        .threads(1)
        .timeout(super::CHECK_TIMEOUT)
        .finish_when(stateright::HasDiscoveries::AnyFailures)
        .spawn_bfs()
        .join()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// Ticks of 100 ms: a window of 5 ticks, a renewal every tick, gaps of
    /// 1, a grace of 2; `lock_expire` 10 ticks.
    /// Client 0 holds until near its `lock_expire`, the others a tick.
    fn model(clients: u8, stalls: u8, failovers: u8, crashes: u8, max_ticks: i64) -> ServingModel {
        let ms = Duration::from_millis;
        let times = LeaseTimes {
            window: ms(500),
            renew_every: ms(100),
            gap: ms(100),
            grace: ms(200),
        };
        assert!(times.keeps_live_holders());
        ServingModel {
            rule: Rule::ServingTime,
            holds: (0..clients)
                .map(|c| Some(if c == 0 { 8 } else { 1 }))
                .collect(),
            tick_ms: 100,
            times,
            lock_expire_ticks: 10,
            dead_bound: 5 + 2,
            stalls,
            // Shorter than a gap, longer, and longer than the window.
            stall_ticks: vec![1, 2, 6],
            failovers,
            clock_step: 5,
            crashes,
            max_ticks,
            begin_by: 4,
            read_timeout: 2,
            reached: Arc::default(),
        }
    }

    /// The properties that fail, each with its trace.
    fn run(name: &str, model: ServingModel) -> Vec<(&'static str, String)> {
        let started = Instant::now();
        let checker = check(model);
        let model = checker.model();
        println!(
            "{name}: {} states ({} unique), depth {}, {:.1} s",
            checker.state_count(),
            checker.unique_state_count(),
            checker.max_depth(),
            started.elapsed().as_secs_f64()
        );
        let mut found = checker.discoveries();
        let saved = found.remove("every client saved").is_some();
        let mut failed: Vec<_> = found
            .into_iter()
            .map(|(property, path)| {
                let trace: Vec<String> = path
                    .into_vec()
                    .into_iter()
                    .map(|(state, action)| {
                        format!(
                            "t={} {action:?} lock {:?} queue {:?} {:?}",
                            state.now, state.primary.lock, state.primary.queue, state.violation
                        )
                    })
                    .collect();
                (property, trace.join("\n"))
            })
            .collect();
        failed.sort();
        if failed.is_empty() {
            assert!(saved, "{name}: no run where every client saved");
            for feature in model.features() {
                assert!(model.reached(feature), "{name}: no run reached {feature:?}");
            }
        }
        failed
    }

    fn holds(name: &str, model: ServingModel) {
        let failed = run(name, model);
        assert!(failed.is_empty(), "{name}: {failed:#?}");
    }

    /// A wrong rule: the checker must find a live holder superseded.
    fn fails(name: &str, model: ServingModel) {
        let failed = run(name, model);
        assert!(
            failed
                .iter()
                .any(|(property, _)| *property == "live holder kept"),
            "{name}: the checker found no live holder superseded: {failed:#?}"
        );
    }

    #[test]
    fn a_dead_holder() {
        holds("2 clients, 1 crash", model(2, 0, 0, 1, 12));
    }

    #[test]
    fn a_stall() {
        holds("2 clients, 1 stall", model(2, 1, 0, 0, 12));
    }

    #[test]
    #[ignore = "exhaustive, half a minute: scripts/test.sh runs it, optimised"]
    fn a_stall_then_a_failover() {
        holds("2 clients, 1 stall, 1 failover", model(2, 2, 1, 0, 12));
    }

    /// Two holders and a waiter beginning by tick 2, `stalls` stalls of 6
    /// ticks (longer than the window) and a failover at the end of one.
    fn two_holders_and_a_waiter(stalls: u8) -> ServingModel {
        ServingModel {
            stall_ticks: vec![6],
            begin_by: 2,
            ..model(3, stalls, 1, 0, 12)
        }
    }

    /// Two stalls and a failover in one trace. (With a crash too, it passed
    /// 26 M states and 12 GB without an end: the crash is
    /// [`a_dead_holder`]'s.)
    #[test]
    #[ignore = "exhaustive, tens of GB: run by hand until its bounds shrink"]
    fn two_holders_a_waiter_a_stall_and_a_failover() {
        holds(
            "3 clients, 2 stalls, 1 failover",
            two_holders_and_a_waiter(2),
        );
    }

    /// One stall that ends in a failover.
    #[test]
    #[ignore = "exhaustive, seconds: the quick tier"]
    fn two_holders_a_waiter_a_stall_ending_in_a_failover() {
        holds(
            "3 clients, 1 stall ending in a failover",
            two_holders_and_a_waiter(1),
        );
    }

    #[test]
    fn the_lease_as_the_locks_ttl_loses_a_live_holder_in_a_stall() {
        let model = ServingModel {
            rule: Rule::LeaseAsTtl,
            ..model(2, 1, 0, 0, 12)
        };
        fails("lease as TTL, 2 clients, 1 stall", model);
    }

    #[test]
    fn a_chain_that_ignores_its_gaps_loses_a_live_holder_in_a_stall() {
        let model = ServingModel {
            rule: Rule::NoGapCheck,
            ..model(2, 1, 0, 0, 12)
        };
        fails("no gap check, 2 clients, 1 stall", model);
    }
}
