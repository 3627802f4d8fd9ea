//! The nine `ps_module` hooks. Each one converts PHP's arguments, calls the
//! safe [`SessionHandler`], and maps the outcome back: any error or panic
//! becomes one PHP warning plus FAILURE, and nothing unwinds into PHP.
//! Warnings are raised only after the handler returned, so no Rust borrow is
//! live if a user error handler does something drastic.

use std::ffi::{CStr, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::null_mut;

use anyhow::{Context, Result, anyhow};
use ext_php_rs::boxed::ZBox;
use ext_php_rs::error::php_error;
use ext_php_rs::ffi::{zend_long, zend_result, zend_string};
use ext_php_rs::flags::ErrorType;
use ext_php_rs::types::ZendStr;

use super::abi::{FAILURE, ModData, SUCCESS, php_session_create_id};
use super::ini::PhpIni;
use super::secrets;
use crate::handler::{Message, SessionHandler};
use crate::settings::Settings;
use crate::store::ClusterStore;

type Handler = SessionHandler<ClusterStore>;

fn warn(message: &str) {
    php_error(&ErrorType::Warning, message);
}

/// Runs a hook body: its error or panic becomes a warning and `failure`.
/// PHP follows a failure with a warning of its own that quotes the save_path,
/// so the password in it is masked first.
fn guard<T>(hook: &str, failure: T, body: impl FnOnce() -> Result<T>) -> T {
    let message = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => return value,
        Ok(Err(err)) => format!("{err:#}"),
        Err(_) => format!("rediscluster: internal error in the {hook} hook"),
    };
    secrets::mask_save_path();
    warn(&message);
    failure
}

/// A clamped `session.gc_maxlifetime` gets phpredis's notice in the hooks
/// that store data, once per read and once per write.
///
/// # Safety
/// As for [`handler`].
unsafe fn notice_clamped_ttl(mod_data: ModData) -> Result<()> {
    let notice = unsafe { handler(mod_data)? }.settings().ttl_notice;
    if let Some(notice) = notice {
        php_error(&ErrorType::Notice, notice);
    }
    Ok(())
}

/// The handler `open` stored in `*mod_data`.
///
/// # Safety
/// `mod_data` is PHP's pointer to this handler's slot.
unsafe fn handler<'a>(mod_data: ModData) -> Result<&'a mut Handler> {
    // SAFETY: the slot is either NULL or a Box::into_raw from `open`.
    unsafe { (*mod_data).cast::<Handler>().as_mut() }
        .ok_or_else(|| anyhow!("rediscluster: the session storage is not open"))
}

/// Runs `f` on the open handler, then raises the messages it left; they are
/// collected first so no borrow of the handler is live while PHP runs.
///
/// # Safety
/// As for [`handler`].
unsafe fn with_handler<T>(
    mod_data: ModData,
    f: impl FnOnce(&mut Handler) -> Result<T>,
) -> Result<T> {
    let handler = unsafe { handler(mod_data)? };
    let result = f(handler);
    for message in handler.take_messages() {
        match message {
            Message::Warning(text) => warn(text),
            Message::Notice(text) => php_error(&ErrorType::Notice, &text),
        }
    }
    result
}

/// # Safety
/// `string` is a live zend_string for the duration of the hook.
unsafe fn bytes<'a>(string: *mut zend_string) -> &'a [u8] {
    // SAFETY: PHP passes valid zend_strings to the hooks.
    unsafe { string.as_ref() }.map_or(&[], |s| s.as_bytes())
}

fn new_zend_string(bytes: &[u8]) -> *mut zend_string {
    ZendStr::new(bytes, false).into_raw()
}

pub unsafe extern "C" fn open(
    mod_data: ModData,
    save_path: *const c_char,
    _session_name: *const c_char,
) -> zend_result {
    guard("open", FAILURE, || {
        let save_path = secrets::unmask(save_path);
        // SAFETY: PHP passes a NUL-terminated save_path (or NULL).
        let save_path = unsafe { save_path.as_ref() }
            .map(|p| unsafe { CStr::from_ptr(p) }.to_string_lossy())
            .unwrap_or_default();
        let handler = Handler::open(&save_path, Settings::load(&PhpIni))?;
        let notice = handler.settings().compression_notice;
        // SAFETY: a reopen without close would leak the old handler; drop it.
        unsafe {
            let previous =
                std::mem::replace(&mut *mod_data, Box::into_raw(Box::new(handler)).cast());
            if !previous.is_null() {
                drop(Box::from_raw(previous.cast::<Handler>()));
            }
        }
        if let Some(notice) = notice {
            php_error(&ErrorType::Notice, notice);
        }
        Ok(SUCCESS)
    })
}

pub unsafe extern "C" fn close(mod_data: ModData) -> zend_result {
    guard("close", FAILURE, || {
        // SAFETY: take ownership back from the slot, leaving it NULL.
        let slot = unsafe { std::mem::replace(&mut *mod_data, null_mut()) };
        if slot.is_null() {
            return Ok(SUCCESS);
        }
        let mut handler = unsafe { Box::from_raw(slot.cast::<Handler>()) };
        handler.close()?;
        Ok(SUCCESS)
    })
}

pub unsafe extern "C" fn read(
    mod_data: ModData,
    key: *mut zend_string,
    val: *mut *mut zend_string,
    _maxlifetime: zend_long,
) -> zend_result {
    guard("read", FAILURE, || {
        unsafe { notice_clamped_ttl(mod_data)? };
        let data = unsafe { with_handler(mod_data, |h| h.read(bytes(key)))? };
        // SAFETY: PHP owns and frees the non-persistent string.
        unsafe { *val = new_zend_string(&data) };
        Ok(SUCCESS)
    })
}

pub unsafe extern "C" fn write(
    mod_data: ModData,
    key: *mut zend_string,
    val: *mut zend_string,
    _maxlifetime: zend_long,
) -> zend_result {
    guard("write", FAILURE, || {
        unsafe { notice_clamped_ttl(mod_data)? };
        unsafe { with_handler(mod_data, |h| h.write(bytes(key), bytes(val)))? };
        Ok(SUCCESS)
    })
}

pub unsafe extern "C" fn update_timestamp(
    mod_data: ModData,
    key: *mut zend_string,
    val: *mut zend_string,
    _maxlifetime: zend_long,
) -> zend_result {
    guard("update_timestamp", FAILURE, || {
        unsafe { with_handler(mod_data, |h| h.update_timestamp(bytes(key), bytes(val)))? };
        Ok(SUCCESS)
    })
}

pub unsafe extern "C" fn destroy(mod_data: ModData, key: *mut zend_string) -> zend_result {
    guard("destroy", FAILURE, || {
        unsafe { with_handler(mod_data, |h| h.destroy(bytes(key)))? };
        Ok(SUCCESS)
    })
}

/// Sessions expire through their TTL; there is nothing to collect.
pub unsafe extern "C" fn gc(
    _mod_data: ModData,
    _maxlifetime: zend_long,
    nrdels: *mut zend_long,
) -> zend_long {
    // SAFETY: PHP passes a valid out-pointer (or NULL).
    if let Some(nrdels) = unsafe { nrdels.as_mut() } {
        *nrdels = 0;
    }
    0
}

pub unsafe extern "C" fn validate_sid(mod_data: ModData, key: *mut zend_string) -> zend_result {
    guard("validate_sid", FAILURE, || {
        let exists = unsafe { with_handler(mod_data, |h| h.validate_sid(bytes(key)))? };
        Ok(if exists { SUCCESS } else { FAILURE })
    })
}

/// A new id from PHP's own generator, so `session.sid_length` and
/// `session.sid_bits_per_character` apply. If the cluster cannot be asked
/// whether the id is in use, the id is still returned (after a warning): the
/// read that follows reports the outage, where a NULL here would make PHP throw.
pub unsafe extern "C" fn create_sid(mod_data: ModData) -> *mut zend_string {
    guard("create_sid", null_mut(), || {
        let generate = || generate_sid(mod_data);
        let checked = unsafe { handler(mod_data) }.and_then(|h| h.create_sid(generate));
        let sid = match checked {
            Ok(sid) => sid,
            Err(err) => {
                warn(&format!("{err:#}"));
                generate()?
            }
        };
        Ok(new_zend_string(&sid))
    })
}

fn generate_sid(mod_data: ModData) -> Result<Vec<u8>> {
    // SAFETY: PHP's generator returns an owned zend_string or NULL.
    let raw = unsafe { php_session_create_id(mod_data) };
    let sid = (!raw.is_null())
        .then(|| unsafe { ZBox::from_raw(raw.cast::<ZendStr>()) })
        .context("PHP could not generate a session id")?;
    Ok(sid.as_bytes().to_vec())
}
