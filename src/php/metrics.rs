//! `rediscluster_session_metrics(): string`, the pool's counters in
//! Prometheus text format, and saying so when they cover one process only.

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use ext_php_rs::builders::FunctionBuilder;
use ext_php_rs::ffi::sapi_module;
use ext_php_rs::prelude::*;

use super::abi::php_log_err_with_severity;
use crate::stats;

/// Every counter of every process that shares this extension's parent (a
/// php-fpm master, Apache, `php -S` workers), in Prometheus text exposition
/// format 0.0.4.
#[php_function]
pub fn rediscluster_session_metrics() -> String {
    std::panic::catch_unwind(stats::prometheus_text).unwrap_or_default()
}

/// The function for the module builder (the macro's wrapper is private here).
pub fn function() -> FunctionBuilder<'static> {
    wrap_function!(rediscluster_session_metrics)
}

/// What the metrics cover, for phpinfo().
pub fn scope() -> &'static str {
    match stats::pool_wide() {
        Some(true) => "every process of the pool (shared memory)",
        Some(false) if forking_sapi() => {
            "this process only: the extension was loaded after the fork (php_admin_value[extension]?)"
        }
        Some(false) => "this process (and any it forks)",
        None => "this process only: no shared memory",
    }
}

/// Logs once per process when a forking server's worker loaded the extension
/// itself, so its metrics are its own, not the pool's.
pub fn log_if_loaded_after_fork() {
    // Asked once per process (forked workers inherit `false` from the master,
    // which never opens a session): the answer needs the pid, a system call.
    static CHECKED: AtomicBool = AtomicBool::new(false);
    if !CHECKED.swap(true, Relaxed) && stats::pool_wide() == Some(false) && forking_sapi() {
        const LOG_NOTICE: i32 = 5;
        // SAFETY: a NUL-terminated message; PHP only reads it.
        unsafe {
            php_log_err_with_severity(
                c"rediscluster_session: loaded after the fork (php_admin_value[extension]?): rediscluster_session_metrics() covers this process only; load it with extension= in php.ini".as_ptr(),
                LOG_NOTICE,
            );
        }
    }
}

/// Logs, once per process, that its workers share no slot map (see
/// [`crate::cluster::shared_map_refusal_to_tell`]).
pub fn log_shared_map_refusal() {
    if let Some(refusal) = crate::cluster::shared_map_refusal_to_tell() {
        const LOG_WARNING: i32 = 4;
        let text = std::ffi::CString::new(refusal).unwrap_or_default();
        // SAFETY: a NUL-terminated message; PHP only reads it.
        unsafe { php_log_err_with_severity(text.as_ptr(), LOG_WARNING) };
    }
}

/// SAPIs that start the extension once and fork their workers after.
fn forking_sapi() -> bool {
    // SAFETY: PHP's SAPI table, read on PHP's thread; the name is a C string.
    let name = unsafe { sapi_module.name.as_ref() }.map(|name| unsafe { CStr::from_ptr(name) });
    matches!(
        name.map(CStr::to_bytes),
        Some(b"fpm-fcgi" | b"apache2handler" | b"cli-server")
    )
}
