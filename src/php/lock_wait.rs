//! How long a locked `session_start()` waits at most, and why: the
//! `rediscluster_session_lock_wait()` array and phpinfo()'s rows. Debian 12's
//! phpredis 5.3 registers 10 × 2 ms for the shared directives, which this
//! extension's defaults replace where the user set neither (see
//! `ini::origin`): an operator must be able to see which applied.

use std::ffi::CStr;
use std::time::Duration;

use ext_php_rs::boxed::ZBox;
use ext_php_rs::builders::FunctionBuilder;
use ext_php_rs::prelude::*;
use ext_php_rs::types::ZendHashTable;

use super::ini::{self, PhpIni};
use crate::settings::{LockSettings, OWN_DEFAULTS_WIN, WaitSource};

/// Where a directive of [`OWN_DEFAULTS_WIN`] gets its value; `None` for another.
fn source(name: &'static CStr) -> Option<WaitSource> {
    let (origin, value) = ini::origin(name)?;
    let (registered, by_phpredis) = ini::registered(name)?;
    Some(WaitSource::new(
        name,
        origin,
        value,
        registered,
        by_phpredis,
    ))
}

/// phpinfo()'s value of a directive of [`OWN_DEFAULTS_WIN`], with why it
/// applies; `None` for another directive.
pub fn describe(name: &'static CStr) -> Option<String> {
    source(name).map(|source| source.describe())
}

/// phpinfo()'s longest wait.
pub fn describe_total() -> String {
    LockSettings::load(&PhpIni).describe_total_wait()
}

/// The wait a locked session_start() of this request would use, and where
/// each directive's value comes from.
#[php_function]
pub fn rediscluster_session_lock_wait() -> PhpResult<ZBox<ZendHashTable>> {
    std::panic::catch_unwind(lock_wait_array).unwrap_or_else(|_| {
        Err("rediscluster_session: internal error reading the lock wait".into())
    })
}

fn lock_wait_array() -> PhpResult<ZBox<ZendHashTable>> {
    let lock = LockSettings::load(&PhpIni);
    let micros = |duration: Duration| i64::try_from(duration.as_micros()).ok();
    let mut array = ZendHashTable::new();
    array.insert("max_wait_us", lock.total_wait().and_then(micros))?;
    array.insert("wait_us", micros(lock.wait))?;
    array.insert(
        "retries",
        lock.retries.and_then(|retries| i64::try_from(retries).ok()),
    )?;
    for source in OWN_DEFAULTS_WIN.iter().filter_map(|&name| source(name)) {
        let mut entry = ZendHashTable::new();
        entry.insert("value", source.value)?;
        entry.insert("source", source.origin_name())?;
        entry.insert("registered", source.registered)?;
        entry.insert("registered_by", source.registered_by())?;
        entry.insert("overridden", source.overridden())?;
        array.insert(source.name.to_string_lossy().as_ref(), entry)?;
    }
    Ok(array)
}

/// The function for the module builder (the macro's wrapper is private here).
pub fn function() -> FunctionBuilder<'static> {
    wrap_function!(rediscluster_session_lock_wait)
}
