//! Keeping the save_path password out of what PHP itself prints. PHP puts
//! `session.save_path` verbatim into its own follow-up warnings ("Failed to
//! read session data: rediscluster (path: ...)") and into phpinfo(). Our own
//! warnings never contain it; for PHP's, a failing hook points PS(save_path)
//! at a redacted copy until the next `open` puts the original back, and
//! phpinfo() shows the INI value through a displayer that masks it.

use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::panic::catch_unwind;
use std::sync::{Mutex, PoisonError};

use ext_php_rs::ffi::{sapi_module, zend_ini_entry};

use super::abi::{
    php_html_puts, php_output_write, rediscluster_session_save_path_new,
    rediscluster_session_save_path_release, rediscluster_session_save_path_text,
};
use super::ini::find_entry;
use crate::save_path::redact;

/// A redacted save_path of `PS(save_path)`'s type, released when dropped.
struct MaskedCopy(*mut c_void);

impl MaskedCopy {
    fn new(text: &str) -> Self {
        // SAFETY: text and its length; the C side copies it (and adds the NUL).
        Self(unsafe { rediscluster_session_save_path_new(text.as_ptr().cast(), text.len()) })
    }

    fn text(&self) -> *const c_char {
        // SAFETY: a live value of rediscluster_session_save_path_new().
        unsafe { rediscluster_session_save_path_text(self.0) }
    }
}

impl Drop for MaskedCopy {
    fn drop(&mut self) {
        // SAFETY: made by rediscluster_session_save_path_new(), dropped once.
        unsafe { rediscluster_session_save_path_release(self.0) }
    }
}

thread_local! {
    /// While PHP's copy is masked: the redacted copy it points at, and the original.
    static MASKED: RefCell<Option<(MaskedCopy, *mut c_void)>> = const { RefCell::new(None) };
}

/// PHP's copy of the save_path, `PS(save_path)` (per thread on ZTS builds).
mod session_globals {
    use std::ffi::{c_char, c_void};

    use super::super::abi::{
        rediscluster_session_save_path, rediscluster_session_save_path_text,
        rediscluster_session_set_save_path,
    };

    pub fn save_path() -> *mut c_void {
        // SAFETY: this thread's session globals, read on PHP's thread.
        unsafe { rediscluster_session_save_path() }
    }

    pub fn text(value: *const c_void) -> *const c_char {
        // SAFETY: a value PS(save_path) holds or held, still alive (INI's or ours).
        unsafe { rediscluster_session_save_path_text(value) }
    }

    pub fn set_save_path(value: *mut c_void) {
        // SAFETY: as above; `value` is of PS(save_path)'s type.
        unsafe { rediscluster_session_set_save_path(value) }
    }
}

/// Called when a hook fails, before PHP prints its own warning with the save_path.
pub fn mask_save_path() {
    let current = session_globals::save_path();
    if current.is_null() {
        return;
    }
    MASKED.with_borrow_mut(|masked| {
        if masked.as_ref().is_some_and(|(copy, _)| copy.0 == current) {
            return;
        }
        // SAFETY: PS(save_path)'s text is NUL-terminated.
        let text = unsafe { CStr::from_ptr(session_globals::text(current)) }.to_string_lossy();
        if let Some(redacted) = redact(&text).filter(|text| !text.contains('\0')) {
            let copy = MaskedCopy::new(&redacted);
            session_globals::set_save_path(copy.0);
            *masked = Some((copy, current));
        }
    });
}

/// The save_path `open` was given, with a masked one swapped back for the
/// original; PS(save_path) gets the original back too.
pub fn unmask(save_path: *const c_char) -> *const c_char {
    let Some((copy, original)) = MASKED.take() else {
        return save_path;
    };
    if session_globals::save_path() == copy.0 {
        session_globals::set_save_path(original);
    }
    if save_path == copy.text() {
        session_globals::text(original)
    } else {
        save_path
    }
}

type Displayer = unsafe extern "C" fn(*mut zend_ini_entry, c_int);

/// The displayer `session.save_path` had before ours, put back at shutdown
/// (ours lives in this library, which PHP unloads after shutdown).
static PREVIOUS_DISPLAYER: Mutex<Option<Option<Displayer>>> = Mutex::new(None);

/// `session.save_path`'s INI entry, which lives until ext/session's own
/// shutdown, after ours.
fn save_path_entry() -> Option<&'static mut zend_ini_entry> {
    // SAFETY: an entry of PHP's table, used at MINIT and MSHUTDOWN only.
    unsafe { find_entry(c"session.save_path").as_mut() }
}

/// Makes phpinfo() show `session.save_path` with its password masked.
pub fn mask_in_phpinfo() {
    if let Some(entry) = save_path_entry() {
        let previous = entry.displayer.replace(display_save_path);
        *PREVIOUS_DISPLAYER
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(previous);
    }
}

/// Puts `session.save_path`'s own displayer back.
pub fn unmask_in_phpinfo() {
    let previous = PREVIOUS_DISPLAYER
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    if let (Some(previous), Some(entry)) = (previous, save_path_entry()) {
        entry.displayer = previous;
    }
}

/// `ZEND_INI_DISPLAY_ORIG`: phpinfo's "Master Value" column.
const DISPLAY_ORIGINAL: c_int = 1;

unsafe extern "C" fn display_save_path(entry: *mut zend_ini_entry, kind: c_int) {
    // Nothing here should panic; if it does, phpinfo shows nothing for the row.
    let _ = catch_unwind(|| {
        // SAFETY: PHP passes its live INI entry.
        let entry = unsafe { &*entry };
        let value = if kind == DISPLAY_ORIGINAL && entry.modified != 0 {
            entry.orig_value
        } else {
            entry.value
        };
        let text = if value.is_null() {
            String::new()
        } else {
            // SAFETY: a zend_string's bytes are `len` long from `val`, reached
            // through the raw pointer since they extend past `val`'s declared 1.
            let bytes = unsafe {
                std::slice::from_raw_parts((&raw const (*value).val).cast::<u8>(), (*value).len)
            };
            String::from_utf8_lossy(bytes).into_owned()
        };
        let shown = redact(&text).unwrap_or(text);
        // SAFETY: PHP's SAPI table, read on PHP's thread.
        let as_text = unsafe { sapi_module.phpinfo_as_text } != 0;
        // SAFETY: buffers with their lengths; PHP copies them out.
        unsafe {
            match (shown.is_empty(), as_text) {
                (true, true) => write_raw("no value"),
                (true, false) => write_raw("<i>no value</i>"),
                (false, true) => write_raw(&shown),
                (false, false) => php_html_puts(shown.as_ptr().cast(), shown.len()),
            }
        }
    });
}

/// # Safety
/// Only while PHP's output layer is up (phpinfo runs in a request).
unsafe fn write_raw(text: &str) {
    unsafe { php_output_write(text.as_ptr().cast(), text.len()) };
}
