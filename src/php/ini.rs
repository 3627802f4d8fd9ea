//! INI registration and reads. phpredis registers most of the same
//! `redis.session.*` names; PHP refuses a whole table when one name already
//! exists (and would then drop phpredis's own settings), so only the names
//! nobody registered yet are added, after phpredis's MINIT (see the optional
//! module dependency in `module.rs`). Reads go by name, so phpredis's values
//! apply when it owns a directive.

use std::ffi::{CStr, c_int};

use ext_php_rs::ffi::zend_register_ini_entries;
use ext_php_rs::flags::IniEntryPermission;
use ext_php_rs::zend::IniEntryDef;

use super::abi::{zend_ini_long, zend_ini_string_ex};
use crate::settings::{INI_DEFAULTS, IniSource};

/// PHP's INI, read by name when a session opens.
pub struct PhpIni;

impl IniSource for PhpIni {
    fn long(&self, name: &CStr) -> i64 {
        // SAFETY: a NUL-terminated name with its length; PHP only reads it.
        unsafe { zend_ini_long(name.as_ptr(), name.count_bytes(), 0) }
    }

    fn string(&self, name: &CStr) -> Option<String> {
        let mut exists = false;
        // SAFETY: as above; the returned pointer is PHP's NUL-terminated value
        // (or NULL) and is copied before anything else runs.
        let value =
            unsafe { zend_ini_string_ex(name.as_ptr(), name.count_bytes(), 0, &mut exists) };
        if !exists || value.is_null() {
            return None;
        }
        Some(
            unsafe { CStr::from_ptr(value) }
                .to_string_lossy()
                .into_owned(),
        )
    }
}

/// Registers the `redis.session.*` directives that do not exist yet; returns
/// how many this extension owns.
pub fn register_missing(module_number: c_int) -> usize {
    let mut table: Vec<IniEntryDef> = INI_DEFAULTS
        .iter()
        .filter(|(name, _)| PhpIni.string(name).is_none())
        .map(|(name, default)| IniEntryDef::new(name, default, IniEntryPermission::All))
        .collect();
    let owned = table.len();
    if owned > 0 {
        table.push(IniEntryDef::end());
        // PHP keeps pointing into the table until MSHUTDOWN, like a C static.
        let table: &'static [IniEntryDef] = Box::leak(table.into_boxed_slice());
        // SAFETY: a terminated table of 'static definitions, none already registered.
        unsafe { zend_register_ini_entries(table.as_ptr(), module_number) };
    }
    owned
}
