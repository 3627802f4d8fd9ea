//! The FFI boundary with PHP: module entry, INI, the session hooks, the
//! stats function, and keeping the save_path password out of what PHP prints.

use std::panic::{AssertUnwindSafe, catch_unwind};

// Every entry point catches panics, which only works while they unwind.
#[cfg(panic = "abort")]
compile_error!(
    "rediscluster_session needs panic = \"unwind\": a panic must become a PHP warning, not end the process"
);

/// Runs an entry point's body so that a panic never unwinds into PHP: it
/// becomes `fallback` instead (a failure status, an empty row).
fn no_unwind<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

mod abi;
mod hooks;
mod ini;
mod lifetime;
mod lock_info;
mod lock_wait;
mod metrics;
mod module;
mod read_only;
mod secrets;
mod stats;
