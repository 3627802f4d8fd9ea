//! `rediscluster_session_lock_info(string $id): ?array`: who holds a
//! session's lock and how many wait, for an operator looking at a stuck
//! session. It never shows the lock's secret or the session data.

use std::ffi::c_char;

use anyhow::{Result, anyhow};
use ext_php_rs::args::Arg;
use ext_php_rs::boxed::ZBox;
use ext_php_rs::builders::FunctionBuilder;
use ext_php_rs::ffi::zend_string;
use ext_php_rs::flags::DataType;
use ext_php_rs::types::{ZendHashTable, Zval};
use ext_php_rs::zend::{ExecuteData, ExecutorGlobals};

use super::hooks::{queue, raise_pending};
use super::ini::PhpIni;
use crate::handler::{Message, SessionHandler};
use crate::lifetime::{Lifetime, unix_now_ms};
use crate::settings::IniSource;

/// The function's body: `id` as PHP's own functions take a `string`
/// (an int, float, bool or Stringable coerced unless `strict_types`; bytes,
/// not UTF-8 text). Returns `['locked' => bool, 'ttl_ms' => int, 'waiters' => int,
/// 'data_ttl_ms' => int, 'lifetime' => ['seconds' => int, 'sliding' => bool] or null,
/// 'lease_ms' => int (0: off), 'lease_expires_ms' => ?int, 'lease_renewed_for_ms' => ?int]`
/// for the id under the current `session.save_path` (its prefix and cluster);
/// null with a warning when the cluster cannot tell.
extern "C" fn rediscluster_session_lock_info(ex: &mut ExecuteData, retval: &mut Zval) {
    let mut id = Arg::new("id", DataType::String);
    // A wrong argument count throws ArgumentCountError.
    if ex.parser().arg(&mut id).parse().is_err() {
        return;
    }
    let Some(zval) = id.zval() else {
        return;
    };
    let zval: *mut Zval = &mut **zval;
    let mut string: *mut zend_string = std::ptr::null_mut();
    // SAFETY: a live argument zval; PHP converts it in place, as for its own
    // functions, and `string` then points into it.
    let taken = unsafe {
        match (*zval).zend_str() {
            Some(_) => {
                string = (*zval).value.str_;
                true
            }
            None => zend_parse_arg_str_slow(zval, &mut string, 1),
        }
    };
    if !taken {
        if !ExecutorGlobals::has_exception() {
            // SAFETY: PHP's own message for a wrong argument type.
            unsafe {
                zend_argument_type_error(
                    1,
                    c"must be of type string, %s given".as_ptr(),
                    zend_zval_type_name(zval),
                );
            }
        }
        return;
    }
    // SAFETY: the argument's string lives until the function returns.
    let id = unsafe { string.as_ref() }.map_or(&[][..], |s| s.as_bytes());
    let outcome = std::panic::catch_unwind(|| lock_info(id))
        .unwrap_or_else(|_| Err(anyhow!("rediscluster: internal error reading the lock")));
    match outcome {
        Ok(table) => retval.set_hashtable(table),
        Err(err) => {
            retval.set_null();
            queue(Message::Warning(format!("{err:#}")));
            // Nothing of ours stays alive while PHP runs the error handler.
            drop(err);
            raise_pending();
        }
    }
}

unsafe extern "C" {
    fn zend_parse_arg_str_slow(arg: *mut Zval, dest: *mut *mut zend_string, arg_num: u32) -> bool;
    fn zend_argument_type_error(arg_num: u32, format: *const c_char, ...);
    fn zend_zval_type_name(arg: *const Zval) -> *const c_char;
}

fn lock_info(id: &[u8]) -> Result<ZBox<ZendHashTable>> {
    let save_path = PhpIni.string(c"session.save_path").unwrap_or_default();
    let handler = SessionHandler::open(&save_path, &PhpIni)?;
    let info = handler.lock_info(id)?;
    let mut table = ZendHashTable::new();
    table.insert("locked", info.locked)?;
    table.insert("ttl_ms", info.ttl_ms)?;
    table.insert("waiters", i64::try_from(info.waiters).unwrap_or(i64::MAX))?;
    table.insert("data_ttl_ms", info.data_ttl_ms)?;
    match info.lifetime {
        Some(lifetime) => {
            let mut shown = ZendHashTable::new();
            let (seconds, sliding) = match lifetime {
                Lifetime::Sliding(ttl) => (ttl.as_secs(), true),
                // A fixed end: the seconds left, rounded up.
                Lifetime::Until(at_ms) => {
                    (at_ms.saturating_sub(unix_now_ms()).div_ceil(1000), false)
                }
            };
            shown.insert("seconds", i64::try_from(seconds).unwrap_or(i64::MAX))?;
            shown.insert("sliding", sliding)?;
            table.insert("lifetime", shown)?;
        }
        None => table.insert("lifetime", ())?,
    }
    let millis =
        |duration: std::time::Duration| i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
    table.insert("lease_ms", info.lease.map_or(0, millis))?;
    // Only for a lock this process holds: when its lease, as last renewed,
    // runs out, and how much longer it is renewed (`lock_expire`).
    match info.renewing {
        Some(lease) => {
            table.insert("lease_expires_ms", millis(lease.expires_in))?;
            table.insert("lease_renewed_for_ms", millis(lease.renewed_for))?;
        }
        None => {
            table.insert("lease_expires_ms", ())?;
            table.insert("lease_renewed_for_ms", ())?;
        }
    }
    Ok(table)
}

/// The function for the module builder.
pub fn function() -> FunctionBuilder<'static> {
    FunctionBuilder::new(
        "rediscluster_session_lock_info",
        rediscluster_session_lock_info,
    )
    .arg(Arg::new("id", DataType::String))
    .returns(DataType::Array, false, true)
}
