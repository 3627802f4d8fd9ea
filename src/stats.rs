//! Counters of what the locks cost and what went wrong: per process for
//! `rediscluster_session_stats()` and phpinfo(), and for the whole pool (every
//! process forked after startup) in shared memory for
//! `rediscluster_session_metrics()`. Relaxed atomics: each counter is exact,
//! a snapshot is not one instant.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::settings::ReleaseCommand;

/// Why a command to the cluster failed, as far as an operator cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Connection refused or reset, or any other transport failure.
    Io,
    /// No reply within the timeout.
    Timeout,
    /// CLUSTERDOWN, TRYAGAIN, MASTERDOWN, LOADING, READONLY, MOVED, ASK, or
    /// no connection for a slot: the cluster was changing.
    Cluster,
    /// A refused password or ACL user, or a missing permission.
    Auth,
    /// A TLS handshake or certificate failure.
    Tls,
    /// Out of memory (maxmemory with noeviction).
    Oom,
    /// Any other error reply.
    Server,
}

impl ErrorKind {
    const ALL: [ErrorKind; 7] = [
        ErrorKind::Io,
        ErrorKind::Timeout,
        ErrorKind::Cluster,
        ErrorKind::Auth,
        ErrorKind::Tls,
        ErrorKind::Oom,
        ErrorKind::Server,
    ];

    fn name(self) -> &'static str {
        match self {
            ErrorKind::Io => "io",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Cluster => "cluster",
            ErrorKind::Auth => "auth",
            ErrorKind::Tls => "tls",
            ErrorKind::Oom => "oom",
            ErrorKind::Server => "server",
        }
    }
}

/// What happened to a connection to a node, as an operator alerts on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeEvent {
    /// A connection opened (TCP, TLS and AUTH done).
    Opened,
    /// A kept connection found closed by the node (or a middlebox) while it
    /// sat idle, before it was used: replaced at no cost.
    ClosedIdle,
    /// A kept connection that failed at its next use, closed by the peer
    /// before it answered: the call repeated at once on a new connection.
    Replaced,
    /// A connection the node refused: it had `maxclients` clients already.
    RefusedMaxclients,
}

impl NodeEvent {
    const ALL: [NodeEvent; 4] = [
        NodeEvent::Opened,
        NodeEvent::ClosedIdle,
        NodeEvent::Replaced,
        NodeEvent::RefusedMaxclients,
    ];

    fn name(self) -> &'static str {
        match self {
            NodeEvent::Opened => "opened",
            NodeEvent::ClosedIdle => "closed_idle",
            NodeEvent::Replaced => "replaced",
            NodeEvent::RefusedMaxclients => "refused_maxclients",
        }
    }
}

/// Where a slot map came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotMapSource {
    /// `CLUSTER SLOTS` from a node.
    Fetched,
    /// The file this user's workers share (`shared_slot_map`).
    Shared,
}

impl SlotMapSource {
    const ALL: [SlotMapSource; 2] = [SlotMapSource::Fetched, SlotMapSource::Shared];

    fn name(self) -> &'static str {
        match self {
            SlotMapSource::Fetched => "fetched",
            SlotMapSource::Shared => "shared",
        }
    }
}

/// Where a session served read-only (`failover=error`) was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadFrom {
    Primary,
    Replica,
}

impl ReadFrom {
    const ALL: [ReadFrom; 2] = [ReadFrom::Primary, ReadFrom::Replica];

    pub fn name(self) -> &'static str {
        match self {
            ReadFrom::Primary => "primary",
            ReadFrom::Replica => "replica",
        }
    }
}

const RELEASE_COMMANDS: [(ReleaseCommand, &str); 3] = [
    (ReleaseCommand::Eval, "lua"),
    (ReleaseCommand::Delex, "delex"),
    (ReleaseCommand::Delifeq, "delifeq"),
];

/// Upper bounds of the lock-wait histogram, in µs: 0.1 ms to 10 s.
const WAIT_BUCKETS_US: [u64; 11] = [
    100, 500, 1_000, 5_000, 10_000, 50_000, 100_000, 500_000, 1_000_000, 5_000_000, 10_000_000,
];

/// One set of counters: this process's, or the pool's in shared memory
/// (zeroed memory is a valid, empty set).
#[repr(C)]
struct Counters {
    requests: AtomicU64,
    locks_acquired: AtomicU64,
    lock_waits: AtomicU64,
    lock_wait_us_total: AtomicU64,
    lock_wait_us_max: AtomicU64,
    /// Lock attempts by wait, in the bucket of the first bound at or above
    /// it; the last one counts the waits over 10 s.
    lock_wait_buckets: [AtomicU64; WAIT_BUCKETS_US.len() + 1],
    acquire_failures: AtomicU64,
    waiters_rejected: AtomicU64,
    writes_refused_lock_lost: AtomicU64,
    releases: [AtomicU64; RELEASE_COMMANDS.len()],
    release_fallbacks: AtomicU64,
    /// failover=error reads, by where they were served: primary, replica.
    fallback_reads: [AtomicU64; 2],
    connects: AtomicU64,
    node_connections: [AtomicU64; NodeEvent::ALL.len()],
    slot_maps: [AtomicU64; SlotMapSource::ALL.len()],
    errors: [AtomicU64; ErrorKind::ALL.len()],
    lease_renewals: AtomicU64,
    lease_renewal_failures: AtomicU64,
    locks_lost_to_expiry: AtomicU64,
    locks_broken: AtomicU64,
    shared_slot_map_refused: AtomicU64,
}

impl Counters {
    const fn new() -> Self {
        Counters {
            requests: AtomicU64::new(0),
            locks_acquired: AtomicU64::new(0),
            lock_waits: AtomicU64::new(0),
            lock_wait_us_total: AtomicU64::new(0),
            lock_wait_us_max: AtomicU64::new(0),
            lock_wait_buckets: [const { AtomicU64::new(0) }; WAIT_BUCKETS_US.len() + 1],
            acquire_failures: AtomicU64::new(0),
            waiters_rejected: AtomicU64::new(0),
            writes_refused_lock_lost: AtomicU64::new(0),
            releases: [const { AtomicU64::new(0) }; RELEASE_COMMANDS.len()],
            release_fallbacks: AtomicU64::new(0),
            fallback_reads: [const { AtomicU64::new(0) }; 2],
            connects: AtomicU64::new(0),
            node_connections: [const { AtomicU64::new(0) }; NodeEvent::ALL.len()],
            slot_maps: [const { AtomicU64::new(0) }; SlotMapSource::ALL.len()],
            errors: [const { AtomicU64::new(0) }; ErrorKind::ALL.len()],
            lease_renewals: AtomicU64::new(0),
            lease_renewal_failures: AtomicU64::new(0),
            locks_lost_to_expiry: AtomicU64::new(0),
            locks_broken: AtomicU64::new(0),
            shared_slot_map_refused: AtomicU64::new(0),
        }
    }
}

/// Processes whose pids the pool's memory keeps (alive ones are counted at
/// scrape time); more than that share the counters but go uncounted.
const MAX_PROCESSES: usize = 1024;

/// What every process forked from the one that started the extension shares.
#[repr(C)]
struct Pool {
    counters: Counters,
    process_starts: AtomicU64,
    pids: [AtomicU32; MAX_PROCESSES],
}

/// This process's counters, for `rediscluster_session_stats()`.
static LOCAL: Counters = Counters::new();
/// The pool's, once [`share_with_forks`] mapped them.
static POOL: AtomicPtr<Pool> = AtomicPtr::new(std::ptr::null_mut());
/// The process that mapped the pool's memory (and the one that registered).
static MAPPED_BY: AtomicU32 = AtomicU32::new(0);
static REGISTERED: AtomicU32 = AtomicU32::new(0);

fn pool() -> Option<&'static Pool> {
    // SAFETY: set once to a mapping that is never unmapped.
    unsafe { POOL.load(Relaxed).as_ref() }
}

/// Maps the pool's counters into memory that the processes forked from this
/// one share: anonymous (no name to guard: the php-fpm master runs as root,
/// its workers as another user), fixed size, zeroed. Called at module
/// startup, before php-fpm or Apache fork. Returns false if the system
/// refused (counters stay per process).
pub fn share_with_forks() -> bool {
    if pool().is_some() {
        return true;
    }
    unsafe extern "C" {
        fn mmap(
            addr: *mut c_void,
            len: usize,
            prot: c_int,
            flags: c_int,
            fd: c_int,
            off: i64,
        ) -> *mut c_void;
    }
    const PROT_READ_WRITE: c_int = 0x1 | 0x2;
    const MAP_SHARED_ANONYMOUS: c_int = 0x01 | 0x20;
    // SAFETY: a new anonymous mapping; nothing else refers to it yet.
    let memory = unsafe {
        mmap(
            std::ptr::null_mut(),
            size_of::<Pool>(),
            PROT_READ_WRITE,
            MAP_SHARED_ANONYMOUS,
            -1,
            0,
        )
    };
    if memory as isize == -1 {
        return false;
    }
    POOL.store(memory.cast(), Relaxed);
    MAPPED_BY.store(std::process::id(), Relaxed);
    true
}

/// Whether the counters are the pool's; `None` when this process mapped them
/// itself: the extension was loaded after the fork, or nothing forked.
pub fn pool_wide() -> Option<bool> {
    pool()?;
    Some(MAPPED_BY.load(Relaxed) != std::process::id())
}

fn each(update: impl Fn(&Counters)) {
    update(&LOCAL);
    if let Some(pool) = pool() {
        update(&pool.counters);
    }
}

fn bump(counter: impl Fn(&Counters) -> &AtomicU64) {
    each(|counters| {
        counter(counters).fetch_add(1, Relaxed);
    });
}

/// A session opened.
pub fn request() {
    bump(|c| &c.requests);
}

/// This process is about to use the cluster (a first connection set, or one
/// inherited through a fork): its pid goes into the pool's table, once.
/// Called where the cluster client already notices a new process, so that
/// no request pays for asking the pid.
pub fn process_started() {
    let pid = std::process::id();
    if REGISTERED.swap(pid, Relaxed) == pid {
        return;
    }
    let Some(pool) = pool() else {
        return;
    };
    pool.process_starts.fetch_add(1, Relaxed);
    for slot in &pool.pids {
        let current = slot.load(Relaxed);
        if (current == 0 || !alive(current))
            && slot
                .compare_exchange(current, pid, Relaxed, Relaxed)
                .is_ok()
        {
            return;
        }
    }
}

fn alive(pid: u32) -> bool {
    unsafe extern "C" {
        fn kill(pid: c_int, signal: c_int) -> c_int;
    }
    let Ok(pid) = c_int::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only asks whether the process exists; EPERM (another
    // user's process) still means it does.
    unsafe { kill(pid, 0) == 0 || std::io::Error::last_os_error().raw_os_error() == Some(1) }
}

/// A lock attempt's outcome; `waited` is zero when the lock was free at once.
pub fn lock_attempt(acquired: bool, waited: Duration) {
    let micros = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
    let bucket = WAIT_BUCKETS_US
        .iter()
        .position(|&bound| micros <= bound)
        .unwrap_or(WAIT_BUCKETS_US.len());
    each(|c| {
        let outcome = if acquired {
            &c.locks_acquired
        } else {
            &c.acquire_failures
        };
        outcome.fetch_add(1, Relaxed);
        c.lock_wait_buckets[bucket].fetch_add(1, Relaxed);
        if micros > 0 {
            c.lock_waits.fetch_add(1, Relaxed);
            c.lock_wait_us_total.fetch_add(micros, Relaxed);
            c.lock_wait_us_max.fetch_max(micros, Relaxed);
        }
    });
}

/// A request did not queue: `max_waiters` already waited.
pub fn waiter_rejected() {
    bump(|c| &c.waiters_rejected);
}

pub fn write_refused_lock_lost() {
    bump(|c| &c.writes_refused_lock_lost);
}

/// A lock released with `command`.
pub fn released(command: ReleaseCommand) {
    if let Some(index) = RELEASE_COMMANDS.iter().position(|(c, _)| *c == command) {
        bump(|c| &c.releases[index]);
    }
}

/// DELEX or DELIFEQ was configured but the server lacks it: Lua released.
pub fn release_fell_back() {
    bump(|c| &c.release_fallbacks);
}

/// A session served read-only (failover=error), read from `from`.
pub fn fallback_read(from: ReadFrom) {
    bump_labelled(&ReadFrom::ALL, from, |c| &c.fallback_reads);
}

/// A cluster set up in this process: its slot map and connections, kept.
pub fn connected() {
    bump(|c| &c.connects);
}

/// Bumps `label`'s counter in a group whose counters are in `labels`' order.
fn bump_labelled<T: PartialEq>(labels: &[T], label: T, group: impl Fn(&Counters) -> &[AtomicU64]) {
    if let Some(index) = labels.iter().position(|each| *each == label) {
        bump(|c| &group(c)[index]);
    }
}

pub fn node_connection(event: NodeEvent) {
    bump_labelled(&NodeEvent::ALL, event, |c| &c.node_connections);
}

pub fn slot_map(source: SlotMapSource) {
    bump_labelled(&SlotMapSource::ALL, source, |c| &c.slot_maps);
}

pub fn error(kind: ErrorKind) {
    bump_labelled(&ErrorKind::ALL, kind, |c| &c.errors);
}

/// The watchdog renewed a lock's lease.
pub fn lease_renewed() {
    bump(|c| &c.lease_renewals);
}

/// A renewal failed (no answer in time, an error reply): tried again.
pub fn lease_renewal_failed() {
    bump(|c| &c.lease_renewal_failures);
}

/// A renewal found another secret in the lock, or none: the lease had run out.
pub fn lease_lost() {
    bump(|c| &c.locks_lost_to_expiry);
}

/// A waiter broke a lock whose holder's heartbeat stood still for a lease
/// of the server's serving (see `lock::heartbeat`).
pub fn lock_broken() {
    bump(|c| &c.locks_broken);
}

/// A process found the shared slot map's directory not its user's own and
/// private: it shares no map (counted once per process).
pub fn shared_slot_map_refused() {
    bump(|c| &c.shared_slot_map_refused);
}

pub enum Stat {
    Count(u64),
    Group(Vec<(&'static str, u64)>),
}

/// This process's counters by name, in a stable order, for PHP.
pub fn snapshot() -> Vec<(&'static str, Stat)> {
    let get = |counter: &AtomicU64| counter.load(Relaxed);
    let count = |counter: &AtomicU64| Stat::Count(get(counter));
    // Counters by label, the labels in the counters' order.
    let group = |names: &mut dyn Iterator<Item = &'static str>, counters: &[AtomicU64]| {
        Stat::Group(
            names
                .zip(counters)
                .map(|(name, counter)| (name, get(counter)))
                .collect(),
        )
    };
    let connects = get(&LOCAL.connects);
    let c = &LOCAL;
    vec![
        ("locks_acquired", count(&c.locks_acquired)),
        ("lock_waits", count(&c.lock_waits)),
        ("lock_wait_us_total", count(&c.lock_wait_us_total)),
        ("lock_wait_us_max", count(&c.lock_wait_us_max)),
        ("acquire_failures", count(&c.acquire_failures)),
        ("waiters_rejected", count(&c.waiters_rejected)),
        (
            "writes_refused_lock_lost",
            count(&c.writes_refused_lock_lost),
        ),
        (
            "releases",
            group(
                &mut RELEASE_COMMANDS.iter().map(|(_, name)| *name),
                &c.releases,
            ),
        ),
        ("release_fallbacks", count(&c.release_fallbacks)),
        (
            "fallback_reads",
            group(
                &mut ReadFrom::ALL.iter().map(|from| from.name()),
                &c.fallback_reads,
            ),
        ),
        ("connects", Stat::Count(connects)),
        ("reconnects", Stat::Count(connects.saturating_sub(1))),
        (
            "node_connections",
            group(
                &mut NodeEvent::ALL.iter().map(|event| event.name()),
                &c.node_connections,
            ),
        ),
        (
            "slot_maps",
            group(
                &mut SlotMapSource::ALL.iter().map(|source| source.name()),
                &c.slot_maps,
            ),
        ),
        (
            "errors",
            group(
                &mut ErrorKind::ALL.iter().map(|kind| kind.name()),
                &c.errors,
            ),
        ),
        ("lease_renewals", count(&c.lease_renewals)),
        ("lease_renewal_failures", count(&c.lease_renewal_failures)),
        ("locks_lost_to_expiry", count(&c.locks_lost_to_expiry)),
        ("locks_broken", count(&c.locks_broken)),
        ("shared_slot_map_refused", count(&c.shared_slot_map_refused)),
    ]
}

/// The pool's counters (this process's when there is no pool) in
/// Prometheus text exposition format 0.0.4.
pub fn prometheus_text() -> String {
    let pool = pool();
    let c = pool.map_or(&LOCAL, |pool| &pool.counters);
    let get = |counter: &AtomicU64| counter.load(Relaxed);
    let mut out = String::with_capacity(4096);
    let mut family = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
        out.push_str(&format!("# HELP rediscluster_session_{name} {help}\n"));
        out.push_str(&format!("# TYPE rediscluster_session_{name} {kind}\n"));
        for (suffix, value) in samples {
            out.push_str(&format!("rediscluster_session_{name}{suffix} {value}\n"));
        }
    };
    let one = |value: u64| [(String::new(), value as f64)];
    let plain: [(&str, &str, &AtomicU64); 11] = [
        ("requests_total", "Sessions opened.", &c.requests),
        (
            "locks_acquired_total",
            "Session locks taken.",
            &c.locks_acquired,
        ),
        (
            "lock_waits_total",
            "Lock attempts that found the lock busy and waited.",
            &c.lock_waits,
        ),
        (
            "writes_refused_lock_lost_total",
            "Writes refused because the lock had expired or been taken.",
            &c.writes_refused_lock_lost,
        ),
        (
            "release_fallbacks_total",
            "Releases by Lua because the server lacks the configured DELEX or DELIFEQ.",
            &c.release_fallbacks,
        ),
        (
            "connects_total",
            "Cluster connection sets opened (slot map and connections).",
            &c.connects,
        ),
        (
            "lease_renewals_total",
            "Lock leases renewed by the watchdog (rediscluster_session.lock_lease_ms).",
            &c.lease_renewals,
        ),
        (
            "lease_renewal_failures_total",
            "Lease renewals that failed (no answer in time, an error reply), tried again while the lease lasted.",
            &c.lease_renewal_failures,
        ),
        (
            "locks_lost_to_expiry_total",
            "Locks whose renewal found another holder or none: the lease had run out while the request ran.",
            &c.locks_lost_to_expiry,
        ),
        (
            "locks_broken_total",
            "Locks a waiter broke: their holder's heartbeat stood still for a lease while the server served.",
            &c.locks_broken,
        ),
        (
            "shared_slot_map_refused_total",
            "Processes that shared no slot map: the shared map's directory in /dev/shm was not their user's own and private.",
            &c.shared_slot_map_refused,
        ),
    ];
    for (name, help, counter) in plain {
        family(name, "counter", help, &one(get(counter)));
    }
    family(
        "acquire_failures_total",
        "counter",
        "Requests that did not get the lock: still busy after every retry (timeout), or max_waiters already waiting (rejected).",
        &[
            ("{kind=\"timeout\"}".into(), get(&c.acquire_failures) as f64),
            (
                "{kind=\"rejected\"}".into(),
                get(&c.waiters_rejected) as f64,
            ),
        ],
    );
    let by = |label: &str, names: &[&str], counters: &[AtomicU64]| -> Vec<(String, f64)> {
        names
            .iter()
            .zip(counters)
            .map(|(name, counter)| (format!("{{{label}=\"{name}\"}}"), get(counter) as f64))
            .collect()
    };
    let commands: Vec<&str> = RELEASE_COMMANDS.iter().map(|(_, name)| *name).collect();
    family(
        "releases_total",
        "counter",
        "Locks released, by command (lua: any release by a script).",
        &by("cmd", &commands, &c.releases),
    );
    let sources: Vec<&str> = ReadFrom::ALL.iter().map(|from| from.name()).collect();
    family(
        "fallback_reads_total",
        "counter",
        "Sessions served read-only (failover=error) because their primary could not serve them, by where they were read.",
        &by("from", &sources, &c.fallback_reads),
    );
    let events: Vec<&str> = NodeEvent::ALL.iter().map(|event| event.name()).collect();
    family(
        "node_connections_total",
        "counter",
        "Connections to nodes: opened, found closed while idle (replaced before use), closed by the peer at their next use (the call repeated at once), refused by a node at maxclients.",
        &by("event", &events, &c.node_connections),
    );
    let sources: Vec<&str> = SlotMapSource::ALL
        .iter()
        .map(|source| source.name())
        .collect();
    family(
        "slot_maps_total",
        "counter",
        "Slot maps installed: fetched from a node (CLUSTER SLOTS), or taken from the file this user's workers share.",
        &by("source", &sources, &c.slot_maps),
    );
    let kinds: Vec<&str> = ErrorKind::ALL.iter().map(|kind| kind.name()).collect();
    family(
        "errors_total",
        "counter",
        "Failed commands or connection attempts, retried ones included, by kind.",
        &by("kind", &kinds, &c.errors),
    );
    let mut cumulative = 0;
    let mut buckets: Vec<(String, f64)> = WAIT_BUCKETS_US
        .iter()
        .zip(&c.lock_wait_buckets)
        .map(|(bound, counter)| {
            cumulative += get(counter);
            (
                format!("_bucket{{le=\"{}\"}}", *bound as f64 / 1e6),
                cumulative as f64,
            )
        })
        .collect();
    let count = cumulative + get(&c.lock_wait_buckets[WAIT_BUCKETS_US.len()]);
    buckets.push(("_bucket{le=\"+Inf\"}".into(), count as f64));
    buckets.push(("_sum".into(), get(&c.lock_wait_us_total) as f64 / 1e6));
    buckets.push(("_count".into(), count as f64));
    family(
        "lock_wait_seconds",
        "histogram",
        "How long a request waited for its session lock (0 when it was free).",
        &buckets,
    );
    family(
        "lock_wait_max_seconds",
        "gauge",
        "The longest lock wait so far.",
        &[(String::new(), get(&c.lock_wait_us_max) as f64 / 1e6)],
    );
    let (processes, starts) = match pool {
        Some(pool) => (
            pool.pids
                .iter()
                .map(|slot| slot.load(Relaxed))
                .filter(|&pid| pid != 0 && alive(pid))
                .count(),
            get(&pool.process_starts),
        ),
        None => (1, 1),
    };
    family(
        "processes",
        "gauge",
        "Processes alive now that have used the handler.",
        &[(String::new(), processes as f64)],
    );
    family(
        "process_starts_total",
        "counter",
        "Processes that have used the handler.",
        &one(starts),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(name: &str) -> u64 {
        snapshot()
            .into_iter()
            .find_map(|(n, stat)| match stat {
                Stat::Count(value) if n == name => Some(value),
                _ => None,
            })
            .unwrap()
    }

    fn in_group(group: &str, name: &str) -> u64 {
        snapshot()
            .into_iter()
            .find_map(|(n, stat)| match stat {
                Stat::Group(entries) if n == group => entries
                    .into_iter()
                    .find(|(e, _)| *e == name)
                    .map(|(_, v)| v),
                _ => None,
            })
            .unwrap()
    }

    // One test: the counters are process-wide and tests run in parallel.
    #[test]
    fn counters_add_up() {
        let (acquired, waits, total) = (
            count("locks_acquired"),
            count("lock_waits"),
            count("lock_wait_us_total"),
        );
        lock_attempt(true, Duration::ZERO);
        lock_attempt(true, Duration::from_micros(1500));
        lock_attempt(false, Duration::from_micros(500));
        assert!(count("locks_acquired") >= acquired + 2);
        assert!(count("lock_waits") >= waits + 2);
        assert!(count("lock_wait_us_total") >= total + 2000);
        assert!(count("lock_wait_us_max") >= 1500);
        let delex = in_group("releases", "delex");
        released(ReleaseCommand::Delex);
        assert!(in_group("releases", "delex") > delex);
        let oom = in_group("errors", "oom");
        error(ErrorKind::Oom);
        assert!(in_group("errors", "oom") > oom);
    }
}
