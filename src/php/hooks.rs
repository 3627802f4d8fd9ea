//! The nine `ps_module` hooks, and the table that registers them as the
//! `rediscluster` save handler. Each hook converts PHP's arguments, calls the
//! safe [`SessionHandler`], and maps the outcome back: any error or panic
//! becomes one PHP warning plus FAILURE, and nothing unwinds into PHP.
//!
//! Warnings and notices wait in one queue until the hook's work is done and
//! every Rust value of it is dropped: raising one runs the application's
//! error handler, and a fatal error there makes PHP `longjmp` past our frames,
//! which would leak (or worse) anything they still owned. While the read's
//! messages are raised, and after such a bailout out of them, `$_SESSION` is
//! empty with the session active: the request's saves are refused, or the
//! error handler or PHP's shutdown would store the empty session.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::{CStr, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::null_mut;

use anyhow::{Context, Result, anyhow};
use ext_php_rs::boxed::ZBox;
use ext_php_rs::ffi::{zend_long, zend_result, zend_string};
use ext_php_rs::flags::ErrorType;
use ext_php_rs::types::ZendStr;

use super::abi::{
    FAILURE, ModData, SUCCESS, StaticPsModule, php_session_create_id, ps_module,
    rediscluster_session_bailout, rediscluster_session_raise,
};
use super::ini::{PhpIni, text_of};
use super::metrics;
use super::secrets;
use crate::handler::{Message, SessionHandler};
use crate::stats;
use crate::store::ClusterStore;

pub(super) const HANDLER_NAME: &CStr = c"rediscluster";
static SESSION_MODULE: StaticPsModule = StaticPsModule(ps_module {
    s_name: HANDLER_NAME.as_ptr(),
    s_open: Some(open),
    s_close: Some(close),
    s_read: Some(read),
    s_write: Some(write),
    s_destroy: Some(destroy),
    s_gc: Some(gc),
    s_create_sid: Some(create_sid),
    s_validate_sid: Some(validate_sid),
    s_update_timestamp: Some(update_timestamp),
});

/// The save handler PHP serves sessions through, for checks that a session is ours.
pub(super) fn session_module() -> *const ps_module {
    &SESSION_MODULE.0
}

type Handler = SessionHandler<ClusterStore>;

thread_local! {
    /// Messages for PHP, raised by [`guard`] once the hook's work is done.
    static PENDING: RefCell<VecDeque<Message>> = const { RefCell::new(VecDeque::new()) };
}

pub(super) fn queue(message: Message) {
    PENDING.with_borrow_mut(|pending| pending.push_back(message));
}

/// Runs a hook body: its error or panic becomes a warning and `failure`.
/// PHP follows a failure with a warning of its own that quotes the save_path,
/// so the password in it is masked first. The queued messages are raised
/// last, when only `T` (a status or a string PHP owns) is left.
fn guard<T>(hook: &str, failure: T, body: impl FnOnce() -> Result<T>) -> T {
    guard_raising(hook, failure, |_| {}, body)
}

/// [`guard`], telling `raising` when the hook's messages start to be raised
/// (`true`) and when all were (`false`, never said when a fatal error in the
/// error handler they run makes PHP bail out of them).
fn guard_raising<T>(
    hook: &str,
    failure: T,
    raising: impl Fn(bool),
    body: impl FnOnce() -> Result<T>,
) -> T {
    let outcome = match catch_unwind(AssertUnwindSafe(|| crate::budget::hook(body))) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(format!("{err:#}")),
        Err(_) => Err(format!("rediscluster: internal error in the {hook} hook")),
    };
    let value = match outcome {
        Ok(value) => value,
        Err(message) => {
            secrets::mask_save_path();
            queue(Message::Warning(message));
            failure
        }
    };
    crate::cluster::release_memory_after_large_exchange();
    if PENDING.with_borrow(|pending| !pending.is_empty()) {
        raising(true);
        raise_pending();
        raising(false);
    }
    value
}

/// Raises the queued messages one at a time, each copied into PHP's request
/// memory. If the application's error handler dies with a fatal error, PHP
/// bails out: the rest of the queue and the copy are dropped, and the
/// bailout goes on past the hook.
pub(super) fn raise_pending() {
    while let Some(message) = PENDING.with_borrow_mut(VecDeque::pop_front) {
        let (level, text) = match message {
            Message::Warning(text) => (ErrorType::Warning, text),
            Message::Notice(text) => (ErrorType::Notice, text),
        };
        let text = ZendStr::new(text.as_str(), false).into_raw();
        let level = c_int::try_from(level.bits()).unwrap_or(0);
        // SAFETY: a NUL-terminated string PHP owns, released once PHP
        // returns or bails out.
        let bailed = unsafe {
            let raised = rediscluster_session_raise(level, (&raw const (*text).val).cast());
            drop(ZBox::from_raw(text));
            raised != 0
        };
        if bailed {
            PENDING.with_borrow_mut(VecDeque::clear);
            // SAFETY: only values without destructors are left on the Rust
            // frames PHP's longjmp passes (see the module's comment).
            unsafe { rediscluster_session_bailout() }
        }
    }
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

/// Runs `f` on the open handler and queues the messages it left.
///
/// # Safety
/// As for [`handler`].
unsafe fn with_handler<T>(
    mod_data: ModData,
    f: impl FnOnce(&mut Handler) -> Result<T>,
) -> Result<T> {
    let handler = unsafe { handler(mod_data)? };
    let result = f(handler);
    queue_messages(handler);
    result
}

/// Queues the warnings and notices the handler left for PHP.
fn queue_messages(handler: &mut Handler) {
    let messages = handler.take_messages();
    // Usually none: the queue is left alone.
    if !messages.is_empty() {
        PENDING.with_borrow_mut(|pending| pending.extend(messages));
    }
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
            .map(|p| text_of(unsafe { CStr::from_ptr(p) }.to_bytes()))
            .unwrap_or_default();
        metrics::log_if_loaded_after_fork();
        metrics::log_shared_map_refusal();
        crate::request::with(crate::request::Request::opened);
        let mut handler = Handler::open(&save_path, &PhpIni)?;
        stats::request();
        queue_messages(&mut handler);
        // SAFETY: the slot is NULL or a Box::into_raw from an earlier open
        // that was not closed (session_reset()); that handler is taken back.
        let previous = unsafe { std::mem::replace(&mut *mod_data, null_mut()) };
        let taken_over = if previous.is_null() {
            Ok(())
        } else {
            handler.take_over(*unsafe { Box::from_raw(previous.cast::<Handler>()) })
        };
        // SAFETY: the slot owns the handler until `close`.
        unsafe { *mod_data = Box::into_raw(Box::new(handler)).cast() };
        taken_over?;
        Ok(SUCCESS)
    })
}

pub unsafe extern "C" fn close(mod_data: ModData) -> zend_result {
    guard("close", FAILURE, || {
        // Found in this request's session, if at all: said before it ends.
        metrics::log_shared_map_refusal();
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
    // PHP fills $_SESSION once the read returns: until then, a save (from
    // the error handler its messages run, or at shutdown after a fatal error
    // there) would store an empty session.
    let unread = |raising| crate::request::with(|request| request.set_unread(raising));
    guard_raising("read", FAILURE, unread, || {
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
                queue(Message::Warning(format!("{err:#}")));
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
