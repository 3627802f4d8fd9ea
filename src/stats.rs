//! Per-process counters for `rediscluster_session_stats()` and phpinfo():
//! what the locks cost and what went wrong, since the process started.
//! Relaxed atomics: each counter is exact, a snapshot is not one instant.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
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

const RELEASE_COMMANDS: [(ReleaseCommand, &str); 3] = [
    (ReleaseCommand::Eval, "lua"),
    (ReleaseCommand::Delex, "delex"),
    (ReleaseCommand::Delifeq, "delifeq"),
];

struct Counters {
    locks_acquired: AtomicU64,
    lock_waits: AtomicU64,
    lock_wait_us_total: AtomicU64,
    lock_wait_us_max: AtomicU64,
    acquire_failures: AtomicU64,
    waiters_rejected: AtomicU64,
    writes_refused_lock_lost: AtomicU64,
    releases: [AtomicU64; RELEASE_COMMANDS.len()],
    release_fallbacks: AtomicU64,
    connects: AtomicU64,
    errors: [AtomicU64; ErrorKind::ALL.len()],
}

static COUNTERS: Counters = Counters {
    locks_acquired: AtomicU64::new(0),
    lock_waits: AtomicU64::new(0),
    lock_wait_us_total: AtomicU64::new(0),
    lock_wait_us_max: AtomicU64::new(0),
    acquire_failures: AtomicU64::new(0),
    waiters_rejected: AtomicU64::new(0),
    writes_refused_lock_lost: AtomicU64::new(0),
    releases: [const { AtomicU64::new(0) }; RELEASE_COMMANDS.len()],
    release_fallbacks: AtomicU64::new(0),
    connects: AtomicU64::new(0),
    errors: [const { AtomicU64::new(0) }; ErrorKind::ALL.len()],
};

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Relaxed);
}

/// A lock attempt's outcome; `waited` is zero when the lock was free at once.
pub fn lock_attempt(acquired: bool, waited: Duration) {
    bump(if acquired {
        &COUNTERS.locks_acquired
    } else {
        &COUNTERS.acquire_failures
    });
    if !waited.is_zero() {
        let micros = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
        bump(&COUNTERS.lock_waits);
        COUNTERS.lock_wait_us_total.fetch_add(micros, Relaxed);
        COUNTERS.lock_wait_us_max.fetch_max(micros, Relaxed);
    }
}

/// A request did not queue: `max_waiters` already waited.
pub fn waiter_rejected() {
    bump(&COUNTERS.waiters_rejected);
}

pub fn write_refused_lock_lost() {
    bump(&COUNTERS.writes_refused_lock_lost);
}

/// A lock released with `command`.
pub fn released(command: ReleaseCommand) {
    if let Some(index) = RELEASE_COMMANDS.iter().position(|(c, _)| *c == command) {
        bump(&COUNTERS.releases[index]);
    }
}

/// DELEX or DELIFEQ was configured but the server lacks it: Lua released.
pub fn release_fell_back() {
    bump(&COUNTERS.release_fallbacks);
}

/// A cluster set up in this process: its slot map and connections, kept.
pub fn connected() {
    bump(&COUNTERS.connects);
}

pub fn error(kind: ErrorKind) {
    if let Some(index) = ErrorKind::ALL.iter().position(|k| *k == kind) {
        bump(&COUNTERS.errors[index]);
    }
}

pub enum Stat {
    Count(u64),
    Group(Vec<(&'static str, u64)>),
}

/// The counters by name, in a stable order, for PHP.
pub fn snapshot() -> Vec<(&'static str, Stat)> {
    let get = |counter: &AtomicU64| counter.load(Relaxed);
    let connects = get(&COUNTERS.connects);
    vec![
        ("locks_acquired", Stat::Count(get(&COUNTERS.locks_acquired))),
        ("lock_waits", Stat::Count(get(&COUNTERS.lock_waits))),
        (
            "lock_wait_us_total",
            Stat::Count(get(&COUNTERS.lock_wait_us_total)),
        ),
        (
            "lock_wait_us_max",
            Stat::Count(get(&COUNTERS.lock_wait_us_max)),
        ),
        (
            "acquire_failures",
            Stat::Count(get(&COUNTERS.acquire_failures)),
        ),
        (
            "waiters_rejected",
            Stat::Count(get(&COUNTERS.waiters_rejected)),
        ),
        (
            "writes_refused_lock_lost",
            Stat::Count(get(&COUNTERS.writes_refused_lock_lost)),
        ),
        (
            "releases",
            Stat::Group(
                RELEASE_COMMANDS
                    .iter()
                    .zip(&COUNTERS.releases)
                    .map(|((_, name), counter)| (*name, get(counter)))
                    .collect(),
            ),
        ),
        (
            "release_fallbacks",
            Stat::Count(get(&COUNTERS.release_fallbacks)),
        ),
        ("connects", Stat::Count(connects)),
        ("reconnects", Stat::Count(connects.saturating_sub(1))),
        (
            "errors",
            Stat::Group(
                ErrorKind::ALL
                    .iter()
                    .zip(&COUNTERS.errors)
                    .map(|(kind, counter)| (kind.name(), get(counter)))
                    .collect(),
            ),
        ),
    ]
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
