//! The lease watchdog (issue 38): one thread per process renews the lease
//! of every session lock its requests hold by moving its holder's heartbeat
//! (see `lock::heartbeat`), so that a holder that dies gives way to a waiter
//! within about one lease while a live one keeps its lock, up to
//! `lock_expire` from taking it, whatever its PHP thread is busy with.
//!
//! - Life: started at a process's first request startup when its INI
//!   leases session locks ([`start`]: a worker pays for it once, off any
//!   session's path), else by the first lock a request registers; never at
//!   module startup (which runs in php-fpm's master, before the fork); stopped and
//!   joined by [`stop`] at module shutdown, before PHP unloads the library.
//!   It starts with every signal blocked: PHP's `max_execution_time`
//!   (SIGPROF), pcntl and php-fpm expect their handlers to run on PHP's thread.
//! - Sleep: the thread blocks reading a timerfd that the request threads
//!   arm and disarm under the registry's mutex. A request that ends before
//!   its first renewal costs two `timerfd_settime` calls and never wakes the
//!   thread; an idle worker's thread never wakes.
//! - Renewal: every third of the lease ([`interval`]), the lock protocol's
//!   script ([`RenewalScript`]) for each lock due, first over the connection
//!   its request lent while it runs PHP code ([`Lent`]): a live holder then
//!   needs no new connection, which a node at `maxclients`, a lost SYN, a
//!   slow TLS handshake or a rotated password could refuse. Else (the request
//!   is taking it back, it broke, a redirect) pipelined per primary over the
//!   thread's own connections, made with the registering request's save_path
//!   settings by the cluster code the requests use: redirects, `TRYAGAIN`,
//!   refused connections and retries as there, each call within what is left
//!   of the lease. Those are kept while locks are held and closed once none is.
//! - Fork: the registry belongs to the process that made it. A forked child
//!   never touches its parent's (the thread may have held its mutex at the
//!   fork), has no thread, never renews the locks it inherited (they are its
//!   parent's), and makes a registry of its own at its first registration.

use std::cell::{Cell, RefCell};
use std::ffi::{c_int, c_long};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::FromRawFd;
use std::ptr::null_mut;
use std::rc::Rc;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redis::{RedisError, Value};

use crate::cluster::{Cluster, Request, error_kind};
use crate::config::ConnectionConfig;
use crate::keys::hash_slot;
use crate::link::{Lent, ReplyWindow, refused_at_maxclients};
use crate::script::{LuaScript, no_script, script_command};
use crate::stats;

/// A renewal that failed (no answer in time, `BUSY`, a refused connection)
/// is tried again this soon while the lease lasts, then after pauses that
/// double, up to a third of it, until `lock_expire`.
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// The longest a round of renewals waits for its replies, however long the
/// lease: [`stop`] waits for a round to end.
const LONGEST_ROUND: Duration = Duration::from_secs(2);
/// The shortest: a lease already out (a failover, a late hand-over) still
/// holds the lock until a waiter breaks it.
const SHORTEST_ROUND: Duration = Duration::from_millis(100);
/// The longest a renewal waits for its reply over a lent connection: the
/// primary answers within a millisecond or stalls, and the locks after it in
/// the round, maybe on other primaries, are not held up for longer.
const LENT_REPLY_WAIT: Duration = Duration::from_millis(100);
/// How long [`stop`] waits for the thread to end.
const STOP_WAIT: Duration = Duration::from_secs(3);
/// The slot maps kept for save_paths whose locks are all released: a
/// worker serving many (one per virtual host, say) keeps no more.
const IDLE_CLUSTERS_KEPT: usize = 4;

/// When a lock's lease is renewed: a third of it, as Redisson and etcd do.
/// A request shorter than that costs no call; a renewal that fails leaves
/// two thirds of the lease for its retries.
pub fn interval(lease: Duration) -> Duration {
    lease / 3
}

/// How a lease is renewed, as the lock protocol that holds the lock says:
/// the script, and what a call of it sends.
pub struct RenewalScript {
    pub lua: &'static LuaScript,
    pub keys_and_args: RenewalArgs,
}

/// Calls `send` with the keys and arguments of a renewal of `lock_key`,
/// held with `secret`, for `ttl`, that keeps its `fence` for what is `left`
/// of `lock_expire`.
pub type RenewalArgs = fn(
    lock_key: &[u8],
    secret: &[u8],
    ttl: Duration,
    fence: Option<&[u8]>,
    left: Duration,
    send: &mut KeysAndArgs,
);

/// What takes a script call's keys and arguments.
pub type KeysAndArgs<'a> = dyn FnMut(&[&[u8]], &[&[u8]]) + 'a;

/// A lock as the watchdog renews it.
pub struct Watched<'a> {
    pub lock_key: &'a [u8],
    /// The log of savers a re-take would compare, which renewals keep.
    pub fence: Option<&'a [u8]>,
    pub secret: &'a [u8],
    pub lease: Duration,
    /// Sent no later than the call that took it.
    pub taken_at: Instant,
    /// Renewed no further than this from `taken_at`.
    pub lock_expire: Duration,
    pub script: &'static RenewalScript,
    /// The request's connection to the lock's primary, for renewals first.
    pub lent: Option<Lent>,
}

#[cfg(test)]
impl Watched<'_> {
    /// What the watchdog sends for this lock at `now`: `call` with the
    /// script, keys and arguments; `None` once `lock_expire` has passed
    /// since the take.
    pub(crate) fn renewal_call<R>(
        &self,
        now: Instant,
        call: impl FnOnce(&LuaScript, &[&[u8]], &[&[u8]]) -> R,
    ) -> Option<R> {
        let ttl = renewal_ttl(self.lease, self.taken_at, self.lock_expire, now)?;
        let left = renewal_ttl(self.lock_expire, self.taken_at, self.lock_expire, now)?;
        let mut call = Some(call);
        let mut reply = None;
        (self.script.keys_and_args)(
            self.lock_key,
            self.secret,
            ttl,
            self.fence,
            left,
            &mut |keys, args| reply = call.take().map(|call| call(self.script.lua, keys, args)),
        );
        reply
    }
}

/// The TTL a lease renewed at `now` gets: the lease, cut to what is left of
/// `lock_expire` since `taken_at`; `None` once nothing (under 1 ms) is left,
/// when the renewals stop and the heartbeat stands still.
pub fn renewal_ttl(
    lease: Duration,
    taken_at: Instant,
    lock_expire: Duration,
    now: Instant,
) -> Option<Duration> {
    let left = Duration::from_millis(ms_left(taken_at, lock_expire, now));
    (!left.is_zero()).then(|| left.min(lease))
}

/// What is left at `now` of `lock_expire` from `taken_at`, in whole ms
/// (0 once past it).
pub fn ms_left(taken_at: Instant, lock_expire: Duration, now: Instant) -> u64 {
    lock_expire
        .checked_sub(now.saturating_duration_since(taken_at))
        .map_or(0, |left| {
            u64::try_from(left.as_millis()).unwrap_or(u64::MAX)
        })
}

/// What `rediscluster_session_lock_info()` shows of a lock this process renews.
pub struct LeaseView {
    /// Until the lease as last set runs out, unless renewed.
    pub expires_in: Duration,
    /// Until renewals stop (`lock_expire` from taking the lock).
    pub renewed_for: Duration,
}

/// A lock's key, its holder's secret and fence, in one allocation: every
/// locked request registers one.
#[derive(Clone)]
struct LockName {
    bytes: Vec<u8>,
    secret_at: usize,
    /// Where the fence starts, if there is one.
    fence_at: Option<usize>,
}

impl LockName {
    /// The name of `lock`, made in `bytes` (a buffer of an earlier name, or a new one).
    fn new_in(mut bytes: Vec<u8>, lock: &Watched) -> Self {
        let secret_at = lock.lock_key.len();
        let fence = lock.fence.unwrap_or_default();
        bytes.clear();
        for part in [lock.lock_key, lock.secret, fence] {
            bytes.extend_from_slice(part);
        }
        LockName {
            bytes,
            secret_at,
            fence_at: lock.fence.map(|_| secret_at + lock.secret.len()),
        }
    }

    fn lock_key(&self) -> &[u8] {
        &self.bytes[..self.secret_at]
    }

    fn secret(&self) -> &[u8] {
        let end = self.fence_at.unwrap_or(self.bytes.len());
        &self.bytes[self.secret_at..end]
    }

    fn fence(&self) -> Option<&[u8]> {
        self.fence_at.map(|at| &self.bytes[at..])
    }
}

struct Entry {
    id: u64,
    /// The request thread that registered it.
    owner: u64,
    config: Arc<ConnectionConfig>,
    name: LockName,
    script: &'static RenewalScript,
    lease: Duration,
    taken_at: Instant,
    /// No renewal past `taken_at` + this.
    lock_expire: Duration,
    /// When the lease as last set runs out (from the send of the call that set it).
    expires: Instant,
    /// When to renew next; `None` once renewals ended (capped, lost) or while in flight.
    due: Option<Instant>,
    /// Renewed at least once: its request has outlived the first interval, so
    /// it may go a little early, with a round that renews others.
    renewed: bool,
    /// Renewals that failed in a row past the lease's end: each waits twice
    /// as long as the one before, so that a stalled primary is not sent a
    /// new connection every [`RETRY_PAUSE`] until `lock_expire`.
    failed: u32,
    lent: Option<Lent>,
}

#[derive(Default)]
struct State {
    entries: Vec<Entry>,
    next_id: u64,
    /// When the timer fires, as last armed.
    armed: Option<Instant>,
    /// The thread holds connections, to close once no lock is held.
    connected: bool,
    stopping: bool,
    thread: Option<JoinHandle<()>>,
    /// The name's buffer of a lock let go of, for the next one registered:
    /// a worker registers one a request.
    spare_name: Vec<u8>,
}

struct Watchdog {
    /// The process it belongs to.
    pid: u32,
    state: Mutex<State>,
    timer: Timer,
}

/// This process's watchdog, or its parent's in a forked child (never used
/// there). Freed by [`stop`] only.
static WATCHDOG: AtomicPtr<Watchdog> = AtomicPtr::new(null_mut());
static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This request thread, as the owner of the locks it registers.
    static OWNER: u64 = NEXT_OWNER.fetch_add(1, Ordering::Relaxed);
    /// This thread registered a lock since its request began: only then do
    /// its releases and its request's end look at the registry.
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    /// The config this thread registered with last, as the thread's copy: a
    /// worker registers with the same one request after request.
    static SHARED_CONFIG: RefCell<Option<(Rc<ConnectionConfig>, Arc<ConnectionConfig>)>> =
        const { RefCell::new(None) };
}

impl Watchdog {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic in the thread's round leaves the registry consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// This process's watchdog; made if `create` and there is none yet, or only
/// the parent's (a forked child).
fn this_process(create: bool) -> io::Result<Option<&'static Watchdog>> {
    let pid = std::process::id();
    let current = WATCHDOG.load(Ordering::Acquire);
    // SAFETY: a pointer from Box::into_raw, freed only by `stop` after the
    // last request of the process.
    if let Some(watchdog) = unsafe { current.as_ref() }
        && watchdog.pid == pid
    {
        return Ok(Some(watchdog));
    }
    if !create {
        return Ok(None);
    }
    // A parent's is left as it is (leaked): its mutex may be held by a
    // thread this process does not have.
    let made = Box::into_raw(Box::new(Watchdog {
        pid,
        state: Mutex::default(),
        timer: Timer::new()?,
    }));
    match WATCHDOG.compare_exchange(current, made, Ordering::AcqRel, Ordering::Acquire) {
        // SAFETY: just made, and now shared for the process's life.
        Ok(_) => Ok(Some(unsafe { &*made })),
        Err(other) => {
            // Another thread of this process made one first.
            // SAFETY: ours, never shared.
            drop(unsafe { Box::from_raw(made) });
            Ok(unsafe { other.as_ref() }.filter(|watchdog| watchdog.pid == pid))
        }
    }
}

/// Renews `lock`'s lease every [`interval`] until [`unwatch`], the request's
/// end ([`request_ended`]) or `lock_expire` from taking it. The lock must be
/// on the cluster `config` reaches. An error when the thread cannot start:
/// the lock's heartbeat then stands still, and a waiter breaks it after a lease.
pub fn watch(config: &Rc<ConnectionConfig>, lock: Watched) -> io::Result<()> {
    let lease = lock.lease;
    let Some(watchdog) = this_process(true)? else {
        return Ok(());
    };
    let config = shared_config(config);
    let due = lock.taken_at + interval(lease);
    let mut state = watchdog.state();
    if state.stopping {
        return Ok(());
    }
    // Started by the first lock unless [`start`] did, and again if a panic
    // ever ended it.
    run_thread(watchdog, &mut state, lock.script)?;
    let id = state.next_id;
    state.next_id += 1;
    let name = LockName::new_in(std::mem::take(&mut state.spare_name), &lock);
    state.entries.push(Entry {
        id,
        owner: OWNER.with(|owner| *owner),
        config,
        name,
        script: lock.script,
        lease,
        taken_at: lock.taken_at,
        lock_expire: lock.lock_expire,
        expires: lock.taken_at + lease,
        due: Some(due),
        renewed: false,
        failed: 0,
        lent: lock.lent,
    });
    WATCHING.set(true);
    if state.armed.is_none_or(|armed| due < armed) {
        watchdog.timer.arm(&mut state, Some(due));
    }
    Ok(())
}

/// Starts this process's thread ahead of its first lock, off any session's
/// path (a worker's first request's startup): [`watch`] then only registers.
pub fn start(script: &RenewalScript) -> io::Result<()> {
    let Some(watchdog) = this_process(true)? else {
        return Ok(());
    };
    let mut state = watchdog.state();
    if state.stopping {
        return Ok(());
    }
    run_thread(watchdog, &mut state, script)
}

fn run_thread(
    watchdog: &'static Watchdog,
    state: &mut State,
    script: &RenewalScript,
) -> io::Result<()> {
    if state.thread.as_ref().is_none_or(JoinHandle::is_finished) {
        state.thread = Some(start_thread(watchdog, script.lua)?);
    }
    Ok(())
}

/// The request's config as the thread's copy, made once per config.
fn shared_config(config: &Rc<ConnectionConfig>) -> Arc<ConnectionConfig> {
    SHARED_CONFIG.with_borrow_mut(|last| match last {
        Some((rc, arc)) if Rc::ptr_eq(rc, config) => arc.clone(),
        _ => {
            let arc = Arc::new(ConnectionConfig::clone(config));
            *last = Some((config.clone(), arc.clone()));
            arc
        }
    })
}

/// The lock leaves the watchdog: it is being released.
pub fn unwatch(lock_key: &[u8], secret: &[u8]) {
    if WATCHING.get() {
        forget(|entry| entry.name.lock_key() == lock_key && entry.name.secret() == secret);
    }
}

/// The request ended (after a fatal error too): its thread's locks leave
/// the watchdog, released or not (a lock its request could not release
/// keeps a still heartbeat: a waiter breaks it, or else its backstop ends it).
pub fn request_ended() {
    if WATCHING.replace(false) {
        let owner = OWNER.with(|owner| *owner);
        forget(|entry| entry.owner == owner);
    }
}

fn forget(matching: impl Fn(&Entry) -> bool) {
    // A forked child's locks are its parent's: nothing of them here.
    let Ok(Some(watchdog)) = this_process(false) else {
        return;
    };
    let mut guard = watchdog.state();
    let state = &mut *guard;
    for gone in state.entries.extract_if(.., |entry| matching(entry)) {
        state.spare_name = gone.name.bytes;
    }
    if state.entries.is_empty() {
        // The thread wakes only to close the connections it holds.
        let wake = state.connected.then(Instant::now);
        watchdog.timer.arm(state, wake);
    }
}

/// The lease of a lock this process renews, by its key.
pub fn lease_of(lock_key: &[u8]) -> Option<LeaseView> {
    let watchdog = this_process(false).ok()??;
    let state = watchdog.state();
    let entry = state
        .entries
        .iter()
        .find(|entry| entry.name.lock_key() == lock_key)?;
    let now = Instant::now();
    Some(LeaseView {
        expires_in: entry.expires.saturating_duration_since(now),
        renewed_for: entry
            .lock_expire
            .saturating_sub(now.saturating_duration_since(entry.taken_at)),
    })
}

/// Module shutdown: stops the thread and waits for it, at most
/// [`STOP_WAIT`] (a round's calls end within [`LONGEST_ROUND`]). False if it
/// did not end in time: the library then stays mapped, for the thread.
pub fn stop() -> bool {
    let pointer = WATCHDOG.load(Ordering::Acquire);
    // SAFETY: as in `this_process`.
    let Some(watchdog) = (unsafe { pointer.as_ref() }) else {
        return true;
    };
    if watchdog.pid != std::process::id() {
        // A forked child's copy of its parent's: no thread here.
        return true;
    }
    let thread = {
        let mut state = watchdog.state();
        state.stopping = true;
        state.entries.clear();
        watchdog.timer.arm(&mut state, Some(Instant::now()));
        state.thread.take()
    };
    if let Some(thread) = thread {
        let until = Instant::now() + STOP_WAIT;
        while !thread.is_finished() {
            if Instant::now() >= until {
                // Its code must outlive the unload that follows, and its
                // state too (left to it): a module started again in this
                // process makes a watchdog of its own.
                pin_library();
                WATCHDOG.store(null_mut(), Ordering::Release);
                return false;
            }
            // It ends within microseconds of the timer firing, as a rule.
            std::thread::sleep(Duration::from_micros(50));
        }
        let _ = thread.join();
    }
    if WATCHDOG
        .compare_exchange(pointer, null_mut(), Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        // SAFETY: the thread has ended and no request runs at shutdown.
        drop(unsafe { Box::from_raw(pointer) });
    }
    true
}

/// Keeps this library mapped for the process's life (`RTLD_NODELETE`): a
/// thread that did not stop in time still runs its code when PHP unloads it.
fn pin_library() {
    use std::ffi::{c_char, c_void};
    #[repr(C)]
    struct DlInfo {
        fname: *const c_char,
        fbase: *mut c_void,
        sname: *const c_char,
        saddr: *mut c_void,
    }
    unsafe extern "C" {
        fn dladdr(addr: *const c_void, info: *mut DlInfo) -> c_int;
        fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void;
    }
    const RTLD_NOW: c_int = 2;
    const RTLD_NOLOAD: c_int = 4;
    const RTLD_NODELETE: c_int = 0x1000;
    let mut info = DlInfo {
        fname: std::ptr::null(),
        fbase: null_mut(),
        sname: std::ptr::null(),
        saddr: null_mut(),
    };
    // SAFETY: an address in this library and a valid out-parameter; the
    // name it yields is the loaded library's, reopened without loading
    // anything (RTLD_NOLOAD). The handle is kept on purpose: never closed.
    unsafe {
        if dladdr(pin_library as *const c_void, &mut info) != 0 && !info.fname.is_null() {
            dlopen(info.fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
        }
    }
}

/// Starts the thread with every signal blocked from its first instruction:
/// the mask is inherited from the thread that creates it.
fn start_thread(watchdog: &'static Watchdog, script: &LuaScript) -> io::Result<JoinHandle<()>> {
    // The renewal script's SHA1, made here, on a PHP thread: a fork while the
    // thread made it would leave the child's copy of its `OnceLock` busy for ever.
    script.sha1();
    let previous = block_signals(None);
    let started = std::thread::Builder::new()
        .name("rcs-watchdog".into())
        .spawn(move || run(watchdog));
    block_signals(Some(&previous));
    started
}

/// `sigset_t` as glibc and musl size it on Linux (1024 bits).
#[repr(C)]
struct SigSet([u64; 16]);

/// Blocks every signal in the calling thread, or restores `previous`;
/// returns the mask it replaced.
fn block_signals(previous: Option<&SigSet>) -> SigSet {
    unsafe extern "C" {
        fn sigfillset(set: *mut SigSet) -> c_int;
        fn pthread_sigmask(how: c_int, set: *const SigSet, old: *mut SigSet) -> c_int;
    }
    const SIG_SETMASK: c_int = 2;
    let mut all = SigSet([0; 16]);
    let mut old = SigSet([0; 16]);
    // SAFETY: valid sets for the calls' duration.
    unsafe {
        let set = match previous {
            Some(previous) => previous,
            None => {
                sigfillset(&mut all);
                &all
            }
        };
        pthread_sigmask(SIG_SETMASK, set, &mut old);
    }
    old
}

/// A renewal in flight.
struct Renewal {
    id: u64,
    config: Arc<ConnectionConfig>,
    name: LockName,
    script: &'static RenewalScript,
    ttl: Duration,
    /// What is left of `lock_expire`: how long the log of savers must last.
    left: Duration,
    deadline: Instant,
    lent: Option<Lent>,
}

/// What a renewal found.
enum Outcome {
    /// The lease runs `ttl` from `sent`.
    Renewed { sent: Instant, ttl: Duration },
    /// The lock holds another secret, or none: a waiter broke it, or its
    /// backstop ran out.
    Lost,
    /// No answer in time, an error, a refused connection: tried again.
    Failed,
    /// Refused by a node at `maxclients`: tried again at the slow pace.
    FullNode,
}

fn run(watchdog: &'static Watchdog) {
    let mut clusters: Vec<(Arc<ConnectionConfig>, Cluster)> = Vec::new();
    loop {
        watchdog.timer.wait();
        let (due, close) = {
            let mut state = watchdog.state();
            if state.stopping {
                return;
            }
            state.armed = None;
            let due = due_renewals(&mut state, Instant::now());
            let close = due.is_empty() && state.entries.is_empty() && state.connected;
            if close {
                state.connected = false;
            }
            let next = next_due(&state);
            watchdog.timer.arm(&mut state, next);
            (due, close)
        };
        if close {
            clusters.iter_mut().for_each(|(_, c)| c.close_connections());
        }
        if due.is_empty() {
            continue;
        }
        let outcomes =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| renew(&mut clusters, &due)))
                .unwrap_or_else(|_| due.iter().map(|_| Outcome::Failed).collect());
        let mut state = watchdog.state();
        // Stopped during the round: the timer `stop` armed is not undone.
        if state.stopping {
            return;
        }
        for (renewal, outcome) in due.iter().zip(outcomes) {
            // One unwatched meanwhile is no longer ours to judge.
            if let Some(entry) = state.entries.iter_mut().find(|e| e.id == renewal.id) {
                apply(entry, outcome);
            }
        }
        // The connections kept: one to each primary of a lock still renewed.
        let held: Vec<(Arc<ConnectionConfig>, u16)> = state
            .entries
            .iter()
            .filter(|entry| entry.due.is_some())
            .map(|entry| (entry.config.clone(), hash_slot(entry.name.lock_key())))
            .collect();
        state.connected = !held.is_empty();
        let next = next_due(&state);
        watchdog.timer.arm(&mut state, next);
        drop(state);
        for (config, cluster) in &mut clusters {
            let slots: Vec<u16> = held
                .iter()
                .filter(|(held_on, _)| held_on == config)
                .map(|&(_, slot)| slot)
                .collect();
            cluster.close_connections_except(&slots);
        }
        // The slot maps of save_paths no held lock uses: a few, the latest.
        let mut idle = 0;
        for index in (0..clusters.len()).rev() {
            if !held
                .iter()
                .any(|(held_on, _)| *held_on == clusters[index].0)
            {
                idle += 1;
                if idle > IDLE_CLUSTERS_KEPT {
                    clusters.remove(index);
                }
            }
        }
    }
}

/// The renewals due by `now`, taken out of the schedule while in flight.
/// A lock at its cap gets none: renewals stop at `lock_expire`.
fn due_renewals(state: &mut State, now: Instant) -> Vec<Renewal> {
    let mut due = Vec::new();
    for entry in &mut state.entries {
        // Up to a quarter interval early, so that the locks of one process
        // fall into the same rounds and each primary gets one write per round.
        let early = if entry.renewed {
            interval(entry.lease) / 4
        } else {
            Duration::ZERO
        };
        if entry.due.is_none_or(|at| at > now + early) {
            continue;
        }
        entry.due = None;
        let Some(ttl) = renewal_ttl(entry.lease, entry.taken_at, entry.lock_expire, now) else {
            continue;
        };
        let left = entry.expires.saturating_duration_since(now);
        due.push(Renewal {
            id: entry.id,
            config: entry.config.clone(),
            name: entry.name.clone(),
            script: entry.script,
            ttl,
            left: renewal_ttl(entry.lock_expire, entry.taken_at, entry.lock_expire, now)
                .unwrap_or_default(),
            deadline: now + left.clamp(SHORTEST_ROUND, LONGEST_ROUND),
            lent: entry.lent.clone(),
        });
    }
    due
}

fn next_due(state: &State) -> Option<Instant> {
    state.entries.iter().filter_map(|entry| entry.due).min()
}

fn apply(entry: &mut Entry, outcome: Outcome) {
    match outcome {
        Outcome::Renewed { sent, ttl } => {
            stats::lease_renewed();
            entry.expires = sent + ttl;
            entry.due = Some(sent + interval(entry.lease));
            entry.renewed = true;
            entry.failed = 0;
        }
        Outcome::Lost => stats::lease_lost(),
        Outcome::Failed | Outcome::FullNode => {
            stats::lease_renewal_failed();
            let now = Instant::now();
            // While the lease lasts every retry counts (the heartbeat must
            // move before a watching waiter's chain spans a lease); past its
            // end, the slower pace. A node at maxclients, which each try costs
            // an accept (two, with the map's check), is tried once a lease.
            let pause = if matches!(outcome, Outcome::FullNode) {
                entry.lease.max(RETRY_PAUSE)
            } else if now < entry.expires {
                RETRY_PAUSE
            } else {
                entry.failed += 1;
                RETRY_PAUSE
                    .saturating_mul(1 << entry.failed.min(16))
                    .min(interval(entry.lease).max(RETRY_PAUSE))
            };
            // Tried until `lock_expire`: the lock lives that long whatever
            // the primary's clock says, and a heartbeat that stands still
            // while the server serves lets a waiter break it.
            entry.due = Some(now + pause);
        }
    }
}

/// One round: every renewal due, over its request's lent connection if it
/// answers, the others in one pipelined exchange per primary.
fn renew(clusters: &mut Vec<(Arc<ConnectionConfig>, Cluster)>, due: &[Renewal]) -> Vec<Outcome> {
    let mut outcomes: Vec<Option<Outcome>> = due.iter().map(renew_over_lent).collect();
    let mut configs: Vec<&Arc<ConnectionConfig>> = Vec::new();
    for (renewal, _) in due.iter().zip(&outcomes).filter(|(_, done)| done.is_none()) {
        if !configs.iter().any(|config| ***config == *renewal.config) {
            configs.push(&renewal.config);
        }
    }
    for config in configs {
        let cluster = match clusters.iter().position(|(c, _)| **c == **config) {
            Some(index) => &mut clusters[index].1,
            None => {
                let cluster = Cluster::new(Rc::new(ConnectionConfig::clone(config)));
                clusters.push((config.clone(), cluster));
                &mut clusters.last_mut().expect("just pushed").1
            }
        };
        let members: Vec<usize> = (0..due.len())
            .filter(|&index| outcomes[index].is_none() && *due[index].config == **config)
            .collect();
        let sent = Instant::now();
        let commands: Vec<Vec<u8>> = members
            .iter()
            .map(|&index| renew_command(&due[index], Verb::EvalSha))
            .collect();
        let requests: Vec<Request> = members
            .iter()
            .zip(&commands)
            .map(|(&index, packed)| renew_request(&due[index], config, packed))
            .collect();
        let replies = cluster.request_each(&requests);
        for (&index, reply) in members.iter().zip(replies) {
            let renewal = &due[index];
            let reply = match reply {
                // A primary that lost its scripts (a restart, a failover).
                Ok(replies) if matches!(&replies[..], [reply] if no_script(reply)) => {
                    let packed = renew_command(renewal, Verb::Eval);
                    cluster.request(&renew_request(renewal, config, &packed))
                }
                other => other,
            };
            outcomes[index] = Some(match reply.as_deref() {
                Ok([reply]) => answered(renewal, sent, reply),
                Ok(_) => Outcome::Failed,
                // Each try costs a node at maxclients an accept: the slow pace.
                Err(failure) if refused_at_maxclients(&failure.error).is_some() => {
                    stats::error(error_kind(&failure.error));
                    Outcome::FullNode
                }
                Err(failure) => {
                    stats::error(error_kind(&failure.error));
                    Outcome::Failed
                }
            });
        }
    }
    outcomes
        .into_iter()
        .map(|outcome| outcome.unwrap_or(Outcome::Failed))
        .collect()
}

/// A renewal's outcome by its reply.
fn answered(renewal: &Renewal, sent: Instant, reply: &Value) -> Outcome {
    match reply {
        Value::Int(1) => Outcome::Renewed {
            sent,
            ttl: renewal.ttl,
        },
        Value::Int(0) => Outcome::Lost,
        Value::ServerError(error) => {
            stats::error(error_kind(&RedisError::from(error.clone())));
            Outcome::Failed
        }
        _ => Outcome::Failed,
    }
}

/// The renewal over the connection its request lent, while the request runs
/// PHP code: `None` when there is none (or the request is taking it back),
/// and on a redirect, a refusal, an error or no reply within
/// [`LENT_REPLY_WAIT`], which the round's own connections then handle. A
/// reply not in yet (a stall) is owed: the link stays the request's, which
/// reads past it. One that fails is dropped: the request connects anew.
fn renew_over_lent(renewal: &Renewal) -> Option<Outcome> {
    let mut lent = renewal.lent.as_ref()?.borrow()?;
    let link = lent.as_mut()?;
    let sent = Instant::now();
    if link.closed_while_idle(sent) {
        *lent = None;
        return None;
    }
    let reply_by = renewal.deadline.min(sent + LENT_REPLY_WAIT);
    let window = ReplyWindow::new(renewal.config.read_timeout, reply_by);
    let mut reply = link.exchange_or_owe(&renew_command(renewal, Verb::EvalSha), window);
    if matches!(&reply, Ok(Some(reply)) if no_script(reply)) {
        let window = ReplyWindow::new(renewal.config.read_timeout, reply_by);
        reply = link.exchange_or_owe(&renew_command(renewal, Verb::Eval), window);
    }
    match reply {
        Ok(Some(reply @ Value::Int(_))) => Some(answered(renewal, sent, &reply)),
        Ok(_) => None,
        Err(_) => {
            *lent = None;
            None
        }
    }
}

enum Verb {
    EvalSha,
    Eval,
}

fn renew_command(renewal: &Renewal, verb: Verb) -> Vec<u8> {
    let script = renewal.script.lua;
    let (verb, body) = match verb {
        Verb::EvalSha => ("EVALSHA", script.sha1()),
        Verb::Eval => ("EVAL", script.source()),
    };
    let mut packed = Vec::new();
    (renewal.script.keys_and_args)(
        renewal.name.lock_key(),
        renewal.name.secret(),
        renewal.ttl,
        renewal.name.fence(),
        renewal.left,
        &mut |keys, args| script_command(&mut packed, verb, body, keys, args),
    );
    packed
}

fn renew_request<'a>(
    renewal: &Renewal,
    config: &ConnectionConfig,
    packed: &'a [u8],
) -> Request<'a> {
    Request {
        slot: hash_slot(renewal.name.lock_key()),
        packed,
        count: 1,
        reply_timeout: config.read_timeout,
        deadline: renewal.deadline,
        retry_broken: true,
        follow_redirects: true,
        may_fall_back: false,
        // One connect a round at a full node: the next round comes soon
        // enough (see `apply`), and each try costs that node an accept.
        wait_if_full: false,
    }
}

/// A `timerfd` on the monotonic clock: the thread blocks reading it, the
/// request threads arm it without waking the thread.
struct Timer(File);

#[repr(C)]
struct TimeSpec {
    seconds: c_long,
    nanos: c_long,
}

#[repr(C)]
struct TimerSpec {
    interval: TimeSpec,
    value: TimeSpec,
}

unsafe extern "C" {
    fn timerfd_create(clock: c_int, flags: c_int) -> c_int;
    fn timerfd_settime(
        fd: c_int,
        flags: c_int,
        new: *const TimerSpec,
        old: *mut TimerSpec,
    ) -> c_int;
}

impl Timer {
    fn new() -> io::Result<Timer> {
        const CLOCK_MONOTONIC: c_int = 1;
        const TFD_CLOEXEC: c_int = 0o2_000_000;
        // SAFETY: no pointers; a new descriptor or -1.
        let fd = unsafe { timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor just made, owned by the file from now on.
        Ok(Timer(unsafe { File::from_raw_fd(fd) }))
    }

    /// Fires at `at` (at once if past), or never for `None`; the caller holds
    /// the registry, whose `armed` it updates.
    fn arm(&self, state: &mut State, at: Option<Instant>) {
        use std::os::fd::AsRawFd;
        if state.armed == at {
            return;
        }
        state.armed = at;
        let after = at.map_or(Duration::ZERO, |at| {
            at.saturating_duration_since(Instant::now())
                .max(Duration::from_nanos(1))
        });
        let spec = TimerSpec {
            interval: TimeSpec {
                seconds: 0,
                nanos: 0,
            },
            value: TimeSpec {
                seconds: c_long::try_from(after.as_secs()).unwrap_or(c_long::MAX),
                nanos: c_long::from(after.subsec_nanos()),
            },
        };
        // SAFETY: a valid spec; the old one is not asked for. It fails only
        // for a bad descriptor, which this one is not.
        unsafe { timerfd_settime(self.0.as_raw_fd(), 0, &spec, null_mut()) };
    }

    /// Blocks until the timer fires.
    fn wait(&self) {
        let mut expirations = [0u8; 8];
        // Interrupted calls (no signal reaches this thread) are repeated.
        while let Err(error) = (&self.0).read_exact(&mut expirations) {
            if error.kind() != io::ErrorKind::Interrupted {
                // Not a timerfd's failure: do not spin on it.
                std::thread::sleep(RETRY_PAUSE);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::RENEWAL;

    #[test]
    fn a_lock_name_keeps_its_key_secret_and_fence_apart() {
        // Each name is made in the buffer of the one before, as the registry does.
        let mut earlier = b"{an earlier, longer}_LOCK and its secret".to_vec();
        for fence in [None, Some(&b""[..]), Some(b"~s")] {
            let name = LockName::new_in(
                earlier,
                &Watched {
                    lock_key: b"{s}_LOCK",
                    fence,
                    secret: b"secret",
                    lease: Duration::from_secs(1),
                    taken_at: Instant::now(),
                    lock_expire: Duration::from_secs(30),
                    script: &RENEWAL,
                    lent: None,
                },
            );
            assert_eq!(name.lock_key(), b"{s}_LOCK");
            assert_eq!(name.secret(), b"secret");
            assert_eq!(name.fence(), fence);
            earlier = name.bytes;
        }
    }

    /// A lock taken at `now`, its lease not renewed yet.
    fn entry_taken_at(now: Instant, lease: Duration) -> Entry {
        let config =
            ConnectionConfig::from(&crate::save_path::parse("seed[]=127.0.0.1:1").unwrap());
        Entry {
            id: 0,
            owner: 0,
            config: Arc::new(config),
            name: LockName::new_in(
                Vec::new(),
                &Watched {
                    lock_key: b"{s}_LOCK",
                    fence: None,
                    secret: b"secret",
                    lease,
                    taken_at: now,
                    lock_expire: Duration::from_secs(60),
                    script: &RENEWAL,
                    lent: None,
                },
            ),
            script: &RENEWAL,
            lease,
            taken_at: now,
            lock_expire: Duration::from_secs(30),
            expires: now + lease,
            due: None,
            renewed: false,
            failed: 0,
            lent: None,
        }
    }

    #[test]
    fn failed_renewals_back_off_past_the_lease_and_go_on() {
        let lease = Duration::from_millis(900);
        let now = Instant::now();
        let mut entry = entry_taken_at(now, lease);
        let mut pauses = Vec::new();
        for _ in 0..20 {
            let before = Instant::now();
            apply(&mut entry, Outcome::Failed);
            let due = entry.due.take().expect("tried again until lock_expire");
            let pause = due - before;
            pauses.push(pause.as_millis() / 50 * 50);
            // The pause goes by: the lease's end comes that much nearer.
            entry.expires -= pause;
        }
        // 100 ms while the lease lasts (900 ms), then doubling up to a
        // third: the lock is ours until a waiter sees the server serve a
        // lease without a heartbeat, so a stalled primary is tried on.
        assert_eq!(pauses[..9], [100; 9], "{pauses:?}");
        assert_eq!(pauses[9..12], [200, 300, 300], "{pauses:?}");
        assert_eq!(pauses[12..], [300; 8], "{pauses:?}");
        entry.due = Some(now);
        apply(
            &mut entry,
            Outcome::Renewed {
                sent: now,
                ttl: lease,
            },
        );
        assert_eq!(entry.failed, 0, "a renewal starts the pauses again");
    }

    #[test]
    fn a_full_node_is_tried_again_once_a_lease_from_the_first_refusal() {
        let lease = Duration::from_millis(900);
        let mut entry = entry_taken_at(Instant::now(), lease);
        let before = Instant::now();
        apply(&mut entry, Outcome::FullNode);
        let pause = entry.due.take().expect("tried again") - before;
        assert!(pause >= lease, "{pause:?}");
    }
}

/// The thread on a real cluster; `scripts/test.sh` runs these with
/// `cargo test -- --ignored` after starting one. A renewal shows as the
/// holder's heartbeat moving; the lock key keeps the TTL of its take.
#[cfg(test)]
mod cluster_tests {
    use super::*;
    use crate::keys::beat_key;
    use crate::lock::RENEWAL;
    use crate::store::cluster_tests::{int, node, owners, store};
    use crate::store::{ClusterStore, Reply};
    use redis::cmd;
    use std::thread::sleep;

    const LEASE: Duration = Duration::from_millis(600);
    /// The `lock_expire` of a lock that outlives its test.
    const HELD: Duration = Duration::from_secs(30);
    /// A live watchdog moves a heartbeat within this, however busy the
    /// machine (it does every third of a lease).
    const RENEWED_WITHIN: Duration = Duration::from_secs(5);
    /// A heartbeat still renewed moves about six times in this.
    const STILL: Duration = LEASE.saturating_mul(2);

    fn config() -> Rc<ConnectionConfig> {
        let seeds = std::env::var("RCS_SEEDS").expect("RCS_SEEDS of a running cluster");
        let path = seeds
            .split(',')
            .map(|seed| format!("seed[]={seed}"))
            .collect::<Vec<_>>()
            .join("&");
        Rc::new((&crate::save_path::parse(&path).unwrap()).into())
    }

    /// A lock held by `secret` as a take with a lease leaves it: the lock
    /// lives its backstop (`lock_expire` and a lease), the heartbeat is '0'.
    fn take(store: &ClusterStore, key: &[u8], secret: &[u8], lock_expire: Duration) -> Instant {
        let taken = Instant::now();
        let ms = (lock_expire + LEASE).as_millis().to_string();
        for (key, value) in [(key, secret), (&beat_key(key, secret), b"0")] {
            let set = cmd("SET").arg(key).arg(value).arg("PX").arg(&ms).clone();
            assert_eq!(store.run(key, &set).unwrap(), Reply::Status);
        }
        taken
    }

    fn watch_for(key: &[u8], secret: &[u8], taken_at: Instant, lock_expire: Duration) {
        let lock = Watched {
            lock_key: key,
            fence: None,
            secret,
            lease: LEASE,
            taken_at,
            lock_expire,
            script: &RENEWAL,
            lent: None,
        };
        watch(&config(), lock).unwrap();
    }

    /// A lock taken and watched with `lock_expire` [`HELD`].
    fn hold(store: &ClusterStore, key: &[u8], secret: &[u8]) {
        let taken = take(store, key, secret, HELD);
        watch_for(key, secret, taken, HELD);
    }

    fn holder(store: &ClusterStore, key: &[u8]) -> Option<Vec<u8>> {
        match store.run(key, cmd("GET").arg(key)).unwrap() {
            Reply::Data(secret) => Some(secret),
            _ => None,
        }
    }

    /// The test's end: the lock leaves the watchdog and the cluster, with
    /// `secret`'s heartbeat.
    fn let_go(store: &ClusterStore, key: &[u8], secret: &[u8]) {
        unwatch(key, secret);
        let del = cmd("DEL").arg(key).arg(beat_key(key, secret)).clone();
        store.run(key, &del).unwrap();
    }

    /// `secret`'s heartbeat on `key`: what was left of `lock_expire` in ms
    /// at its last renewal (0: none yet), and its PTTL; `None` once gone.
    fn beat(store: &ClusterStore, key: &[u8], secret: &[u8]) -> Option<(u64, i64)> {
        let beat = beat_key(key, secret);
        let Reply::Data(value) = store.run(&beat, cmd("GET").arg(&beat)).unwrap() else {
            return None;
        };
        let value = String::from_utf8(value).unwrap().parse().unwrap();
        Some((value, int(store, &beat, cmd("PTTL").arg(&beat))))
    }

    /// Waits for a renewal that lands from now on: the heartbeat moves to
    /// less of `lock_expire` left (from the take's 0, to any) and has a TTL.
    /// Fails if it stands still for [`RENEWED_WITHIN`]. Returns the value.
    fn moves(store: &ClusterStore, key: &[u8], secret: &[u8], what: &str) -> u64 {
        let beat_now =
            || beat(store, key, secret).unwrap_or_else(|| panic!("{what}: no heartbeat"));
        let (from, _) = beat_now();
        let since = Instant::now();
        loop {
            sleep(Duration::from_millis(20));
            let (value, ttl) = beat_now();
            if value != from {
                assert!(
                    from == 0 || value < from,
                    "{what}: from {from} ms left to {value}"
                );
                assert!(ttl > 0, "{what}: a heartbeat with PTTL {ttl}");
                return value;
            }
            assert!(since.elapsed() < RENEWED_WITHIN, "{what}: it stood still");
        }
    }

    /// Watches `secret`'s heartbeat for [`STILL`], failing if it moves more
    /// than `late` times: a renewal sent before the watchdog let go still
    /// lands, with some of `lock_expire` left. Gone counts as still: it
    /// expires after `lock_expire`.
    fn stands_still(store: &ClusterStore, key: &[u8], secret: &[u8], late: usize, what: &str) {
        let value = || beat(store, key, secret).map(|(value, _)| value);
        let mut seen = value();
        let mut moved = 0;
        let since = Instant::now();
        while since.elapsed() < STILL {
            sleep(Duration::from_millis(20));
            let now = value();
            if now.is_some() && now != seen {
                moved += 1;
                if let (Some(before), Some(now)) = (seen, now) {
                    assert!(
                        0 < now && now < before,
                        "{what}: from {before} ms left to {now}"
                    );
                }
            }
            seen = now;
            assert!(moved <= late, "{what}: its heartbeat moved {moved} times");
        }
    }

    fn lost() -> u64 {
        stats::snapshot()
            .into_iter()
            .find_map(|(name, stat)| match stat {
                stats::Stat::Count(n) if name == "locks_lost_to_expiry" => Some(n),
                _ => None,
            })
            .unwrap()
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_renewed_lock_beats_through_leases_and_stands_still_once_let_go() {
        let store = store();
        let key: &[u8] = b"{wd-renewed}_LOCK";
        hold(&store, key, b"ours");
        let began = Instant::now();
        while began.elapsed() < 4 * LEASE {
            moves(&store, key, b"ours", "renewed");
        }
        assert_eq!(holder(&store, key).as_deref(), Some(&b"ours"[..]));
        let lease = lease_of(key).expect("renewed by this process");
        assert!(lease.expires_in <= LEASE && lease.renewed_for > Duration::from_secs(20));
        unwatch(key, b"ours");
        stands_still(&store, key, b"ours", 1, "renewed once let go");
        // Past a lease: a waiter breaks it, not its TTL.
        assert_eq!(holder(&store, key).as_deref(), Some(&b"ours"[..]));
        let_go(&store, key, b"ours");
    }

    fn opened() -> u64 {
        stats::snapshot()
            .into_iter()
            .find_map(|(name, stat)| match stat {
                stats::Stat::Group(events) if name == "node_connections" => events
                    .into_iter()
                    .find_map(|(event, n)| (event == "opened").then_some(n)),
                _ => None,
            })
            .unwrap()
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn many_locks_are_renewed_over_one_connection_per_primary() {
        let store = store();
        let keys: Vec<Vec<u8>> = (0..12)
            .map(|n| format!("{{wd-many-{n}}}_LOCK").into_bytes())
            .collect();
        let primaries: std::collections::HashSet<String> =
            keys.iter().map(|key| owners(key).0).collect();
        let taken: Vec<Instant> = keys
            .iter()
            .map(|key| take(&store, key, b"ours", HELD))
            .collect();
        let opened_before = opened();
        for (key, taken) in keys.iter().zip(taken) {
            watch_for(key, b"ours", taken, HELD);
        }
        sleep(4 * LEASE);
        // Counted before the test's own reads, which a busy machine may
        // time out and reconnect.
        let opened = opened() - opened_before;
        for key in &keys {
            assert_eq!(holder(&store, key).as_deref(), Some(&b"ours"[..]));
            moves(&store, key, b"ours", "renewed");
        }
        assert!(
            opened <= primaries.len() as u64,
            "{opened} connections for {} primaries",
            primaries.len()
        );
        for key in &keys {
            let_go(&store, key, b"ours");
        }
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_request_that_ends_stops_renewing_its_locks() {
        let store = store();
        let keys: [&[u8]; 2] = [b"{wd-end-a}_LOCK", b"{wd-end-b}_LOCK"];
        for key in keys {
            hold(&store, key, b"ours");
        }
        for key in keys {
            moves(&store, key, b"ours", "renewed");
        }
        // A thread gone with its request (a fatal error, a lost release).
        request_ended();
        for key in keys {
            assert!(lease_of(key).is_none());
        }
        for key in keys {
            stands_still(&store, key, b"ours", 1, "renewed after its request ended");
            let_go(&store, key, b"ours");
        }
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn renewals_stop_at_lock_expire() {
        let store = store();
        let key: &[u8] = b"{wd-cap}_LOCK";
        let lock_expire = 5 * LEASE;
        let taken = take(&store, key, b"ours", lock_expire);
        watch_for(key, b"ours", taken, lock_expire);
        // Renewed past a lease from the take: less than the rest left.
        let past_a_lease = u64::try_from((lock_expire - LEASE).as_millis()).unwrap();
        while moves(&store, key, b"ours", "renewed until its cap") > past_a_lease {}
        // One sent before `lock_expire` may land after it.
        sleep((taken + lock_expire).saturating_duration_since(Instant::now()));
        stands_still(&store, key, b"ours", 1, "renewed past lock_expire");
        let_go(&store, key, b"ours");
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn a_lock_taken_over_is_counted_lost_and_not_renewed() {
        let store = store();
        let key: &[u8] = b"{wd-lost}_LOCK";
        let taken = take(&store, key, b"ours", HELD);
        let lost_before = lost();
        // Our lock was broken (a frozen process) and another request took it.
        let set = cmd("SET")
            .arg(key)
            .arg("theirs")
            .arg("PX")
            .arg(5000)
            .clone();
        store.run(key, &set).unwrap();
        watch_for(key, b"ours", taken, HELD);
        sleep(LEASE);
        assert_eq!(lost(), lost_before + 1);
        let ttl = int(&store, key, cmd("PTTL").arg(key));
        assert!(
            (3000..5000 - 400).contains(&ttl),
            "their TTL was reset: {ttl}"
        );
        let ours = beat(&store, key, b"ours").map(|(value, _)| value);
        assert_eq!(ours, Some(0), "our heartbeat moved");
        sleep(LEASE);
        assert_eq!(lost(), lost_before + 1, "a lost lock is tried once");
        let_go(&store, key, b"ours");
    }

    /// Moves `slot` from the primary at `from` to the one at `to` as
    /// `redis-cli --cluster reshard` does, its keys (a lock and its
    /// heartbeat) and all, running `during` while they are on `to` and the
    /// slot still `from`'s (renewals get `ASK`).
    fn move_slot(slot: u16, from: &str, to: &str, during: impl FnOnce()) {
        let (mut source, mut target) = (node(from), node(to));
        let id = |conn: &mut redis::Connection| -> String {
            cmd("CLUSTER").arg("MYID").query(conn).unwrap()
        };
        let (source_id, target_id) = (id(&mut source), id(&mut target));
        let setslot = |conn: &mut redis::Connection, state: &str, id: &str| {
            let () = cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg(state)
                .arg(id)
                .query(conn)
                .unwrap();
        };
        setslot(&mut target, "IMPORTING", &source_id);
        setslot(&mut source, "MIGRATING", &target_id);
        let keys: Vec<Vec<u8>> = cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(100)
            .query(&mut source)
            .unwrap();
        let (host, port) = to.rsplit_once(':').unwrap();
        let () = cmd("MIGRATE")
            .arg(host)
            .arg(port)
            .arg("")
            .arg(0)
            .arg(5000)
            .arg("KEYS")
            .arg(keys)
            .query(&mut source)
            .unwrap();
        during();
        setslot(&mut target, "NODE", &target_id);
        setslot(&mut source, "NODE", &target_id);
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn renewals_follow_a_slot_that_moves_and_back() {
        let store = store();
        let key: &[u8] = b"{wd-moving}_LOCK";
        let slot = crate::keys::hash_slot(key);
        let (first, _) = owners(key);
        let other = std::env::var("RCS_SEEDS")
            .unwrap()
            .split(',')
            .map(str::to_owned)
            .find(|seed| {
                *seed != first
                    && cmd("ROLE")
                        .query::<Vec<redis::Value>>(&mut node(seed))
                        .is_ok_and(|role| {
                            role.first() == Some(&redis::Value::BulkString(b"master".to_vec()))
                        })
            })
            .expect("another primary");
        let lost_before = lost();
        hold(&store, key, b"ours");
        moves(&store, key, b"ours", "renewed");
        // Renewed through ASK, then MOVED; and back the same way.
        for (from, to, way) in [(&first, &other, "out"), (&other, &first, "back")] {
            move_slot(slot, from, to, || {
                moves(
                    &store,
                    key,
                    b"ours",
                    &format!("renewed on its way {way} (ASK)"),
                );
            });
            moves(
                &store,
                key,
                b"ours",
                &format!("renewed on its way {way} (MOVED)"),
            );
            let held = holder(&store, key);
            assert_eq!(held.as_deref(), Some(&b"ours"[..]), "lost on its way {way}");
        }
        assert_eq!(lost(), lost_before, "a renewal counted the lock lost");
        let_go(&store, key, b"ours");
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn the_thread_blocks_signals_and_stops_in_time_while_renewing() {
        let store = store();
        let key: &[u8] = b"{wd-stop}_LOCK";
        hold(&store, key, b"ours");
        moves(&store, key, b"ours", "renewed");
        // PHP's max_execution_time (SIGPROF), pcntl's and php-fpm's signals.
        let blocked = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .find(|task| {
                std::fs::read_to_string(task.path().join("comm"))
                    .is_ok_and(|name| name.trim() == "rcs-watchdog")
            })
            .map(|task| std::fs::read_to_string(task.path().join("status")).unwrap())
            .and_then(|status| {
                let mask = status
                    .lines()
                    .find_map(|line| line.strip_prefix("SigBlk:"))?;
                u64::from_str_radix(mask.trim(), 16).ok()
            })
            .expect("the thread and its signal mask");
        for signal in [2, 10, 12, 14, 15, 17, 27] {
            assert_ne!(
                blocked & (1 << (signal - 1)),
                0,
                "signal {signal} not blocked"
            );
        }
        let stopping = Instant::now();
        assert!(stop());
        assert!(stopping.elapsed() < STOP_WAIT);
        // Joined: every renewal it sent was answered before this.
        stands_still(&store, key, b"ours", 0, "renewed after the thread stopped");
        let_go(&store, key, b"ours");
        // The next lock starts a thread again (Apache's graceful restart).
        hold(&store, key, b"again");
        moves(&store, key, b"again", "renewed by a new thread");
        let_go(&store, key, b"again");
    }

    unsafe extern "C" {
        fn fork() -> c_int;
        fn waitpid(pid: c_int, status: *mut c_int, options: c_int) -> c_int;
        fn kill(pid: c_int, signal: c_int) -> c_int;
        fn _exit(status: c_int) -> !;
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn forks_while_renewals_run_never_hang_the_child() {
        let store = store();
        let key: &[u8] = b"{wd-fork}_LOCK";
        let lock_expire = Duration::from_secs(60);
        let taken = take(&store, key, b"ours", lock_expire);
        // Renewals every 100 ms, many forks in between: some land while the
        // thread holds the registry's mutex.
        let short = Duration::from_millis(300);
        let lock = Watched {
            lock_key: key,
            fence: None,
            secret: b"ours",
            lease: short,
            taken_at: taken,
            lock_expire,
            script: &RENEWAL,
            lent: None,
        };
        watch(&config(), lock).unwrap();
        let started = Instant::now();
        let mut forks = 0;
        while started.elapsed() < Duration::from_secs(3) {
            // SAFETY: the child calls only the registry's functions and _exit.
            let pid = unsafe { fork() };
            assert!(pid >= 0, "fork failed");
            if pid == 0 {
                // The parent's lock is not the child's to see or let go of.
                let seen = lease_of(key).is_some();
                unwatch(key, b"ours");
                request_ended();
                // Its own requests start a watchdog of its own.
                let child_lock = Watched {
                    lock_key: b"{wd-fork-child}_LOCK",
                    fence: None,
                    secret: b"child",
                    lease: short,
                    taken_at: Instant::now(),
                    lock_expire,
                    script: &RENEWAL,
                    lent: None,
                };
                let own = watch(&config(), child_lock).is_ok();
                let stopped = stop();
                // SAFETY: ends the child without running the parent's destructors.
                unsafe { _exit(if seen || !own || !stopped { 1 } else { 0 }) };
            }
            forks += 1;
            let waited = Instant::now();
            let mut status = 0;
            loop {
                // SAFETY: our child; WNOHANG (1) never blocks.
                let done = unsafe { waitpid(pid, &mut status, 1) };
                if done == pid {
                    break;
                }
                if waited.elapsed() > Duration::from_secs(5) {
                    unsafe { kill(pid, 9) };
                    panic!("a child forked while renewals ran hung (fork {forks})");
                }
                sleep(Duration::from_micros(200));
            }
            assert_eq!(status, 0, "the child saw or stopped its parent's watchdog");
        }
        assert!(forks > 50, "{forks} forks");
        assert_eq!(holder(&store, key).as_deref(), Some(&b"ours"[..]));
        // The forks stopped no renewal: the parent's go on.
        assert_ne!(beat(&store, key, b"ours").map(|(value, _)| value), Some(0));
        moves(&store, key, b"ours", "renewed after the forks");
        let_go(&store, key, b"ours");
    }
}
