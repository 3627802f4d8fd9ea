//! What the pool-wide metrics add to a request, for the benchmark, which runs
//! this under callgrind: the counter updates of one locked request, N times,
//! with the counters per process only (`local`) or also in the pool's shared
//! memory (`shared`, as in a PHP process).
//!   metrics_cost local|shared N

use std::time::Duration;

use rediscluster_session::settings::ReleaseCommand;
use rediscluster_session::stats;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(mode), Some(Ok(requests))) = (args.get(1), args.get(2).map(|n| n.parse::<u64>()))
    else {
        eprintln!("usage: metrics_cost local|shared N");
        std::process::exit(2);
    };
    if mode == "shared" && !stats::share_with_forks() {
        eprintln!("no shared memory");
        std::process::exit(1);
    }
    for _ in 0..requests {
        stats::request();
        stats::lock_attempt(true, Duration::ZERO);
        stats::released(ReleaseCommand::Eval);
    }
}
