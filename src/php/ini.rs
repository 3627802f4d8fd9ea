//! INI registration and reads. phpredis registers most of the same
//! `redis.session.*` names; PHP refuses a whole table when one name already
//! exists (and would then drop phpredis's own settings), so only the names
//! nobody registered yet are added, after phpredis's MINIT (see the optional
//! module dependency in `module.rs`). Reads go by name, so phpredis's values
//! apply when it owns a directive.

use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_int};

use ext_php_rs::ffi::{zend_hash_str_find, zend_ini_entry, zend_register_ini_entries};
use ext_php_rs::flags::IniEntryPermission;
use ext_php_rs::zend::{ExecutorGlobals, IniEntryDef};

use crate::settings::{INI_DEFAULTS, IniSource, ini_long};

/// PHP's INI, read when a session opens.
pub struct PhpIni;

thread_local! {
    /// Each directive's entry, looked up once per thread (a hash lookup per
    /// directive and request cost more than the rest of reading settings).
    /// Every directive read here is registered at module startup (by PHP,
    /// ext/session, phpredis or this extension) and its entry lives until
    /// shutdown; `ini_set()` and the end of a request change only its value.
    static ENTRIES: RefCell<Vec<(*const c_char, *const zend_ini_entry)>> =
        const { RefCell::new(Vec::new()) };
}

/// The directive's entry in PHP's table, NULL when it does not exist.
pub fn find_entry(name: &CStr) -> *mut zend_ini_entry {
    let directives = ExecutorGlobals::get().ini_directives;
    if directives.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: PHP's table of directives, read on the thread that owns it;
    // its values are `zend_ini_entry` pointers.
    unsafe {
        zend_hash_str_find(directives, name.as_ptr(), name.count_bytes())
            .as_ref()
            .map_or(std::ptr::null_mut(), |zval| zval.value.ptr.cast())
    }
}

/// Drops this thread's entries, which PHP frees at module shutdown.
pub fn forget_entries() {
    ENTRIES.with_borrow_mut(Vec::clear);
}

/// `read` of the directive's current value, `None` when it does not exist.
fn read_value<T>(name: &CStr, read: impl FnOnce(&[u8]) -> T) -> Option<T> {
    let entry = ENTRIES.with(|cell| {
        let mut entries = cell.borrow_mut();
        if let Some(&(_, entry)) = entries.iter().find(|(known, _)| *known == name.as_ptr()) {
            return entry;
        }
        let found = find_entry(name);
        // A directive not registered yet may be later (by this extension's MINIT).
        if !found.is_null() {
            entries.push((name.as_ptr(), found));
        }
        found
    });
    // SAFETY: a live entry (see ENTRIES); its value, when set, is a
    // zend_string that nothing changes while `read` runs. The bytes are
    // reached through the raw pointer, since they extend past `val`'s
    // declared length of 1.
    unsafe {
        let value = entry.as_ref()?.value;
        if value.is_null() {
            return None;
        }
        let bytes = (&raw const (*value).val).cast::<u8>();
        Some(read(std::slice::from_raw_parts(bytes, (*value).len)))
    }
}

impl IniSource for PhpIni {
    fn long(&self, name: &CStr) -> i64 {
        // As PHP's zend_ini_long, 0 when unset.
        read_value(name, ini_long).unwrap_or(0)
    }

    fn string(&self, name: &CStr) -> Option<String> {
        read_value(name, |text| String::from_utf8_lossy(text).into_owned())
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
