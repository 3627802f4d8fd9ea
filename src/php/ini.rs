//! INI registration and reads. phpredis registers most of the same
//! `redis.session.*` names; PHP refuses a whole table when one name already
//! exists (and would then drop phpredis's own settings), so only the names
//! nobody registered yet are added, after phpredis's MINIT (see the optional
//! module dependency in `module.rs`). Reads go by name, so phpredis's values
//! apply when it owns a directive, but for `OWN_DEFAULTS_WIN` that the user
//! did not set, which take this extension's defaults (see [`origin`]).

use std::borrow::Cow;
use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_int};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use ext_php_rs::ffi::{
    GC_IMMUTABLE, zend_hash_str_find, zend_ini_entry, zend_register_ini_entries,
};
use ext_php_rs::flags::IniEntryPermission;
use ext_php_rs::zend::{ExecutorGlobals, IniEntryDef};

use super::abi::cfg_get_entry;
use crate::settings::{INI_DEFAULTS, IniSource, OWN_DEFAULTS_WIN, Origin, ini_long};

/// PHP's INI, read when a session opens.
pub struct PhpIni;

thread_local! {
    /// Each directive's entry, looked up once per thread (a hash lookup per
    /// directive and request cost more than the rest of reading settings).
    /// Every directive read here is registered at module startup (by PHP,
    /// ext/session, phpredis or this extension) and its entry lives until
    /// shutdown; `ini_set()` and the end of a request change only its value.
    static ENTRIES: RefCell<Entries> = const {
        RefCell::new(Entries {
            known: Vec::new(),
            next: 0,
        })
    };
}

/// The entries found so far, in the order they were first read. Every
/// request reads them in that same order, so a search starts where the last
/// one ended and finds the next entry at its first comparison.
struct Entries {
    known: Vec<(*const c_char, *const zend_ini_entry)>,
    next: usize,
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
    ENTRIES.with_borrow_mut(|entries| {
        entries.known.clear();
        entries.next = 0;
    });
}

/// `bytes` as text, replacing what is not UTF-8. Valid text, the usual case,
/// is checked by the standard library's fast path, not replaced char by char.
pub(super) fn text_of(bytes: &[u8]) -> Cow<'_, str> {
    std::str::from_utf8(bytes).map_or_else(|_| String::from_utf8_lossy(bytes), Cow::Borrowed)
}

impl Entries {
    /// The directive's entry, NULL when it does not exist.
    fn find(&mut self, name: &CStr) -> *const zend_ini_entry {
        if let Some(&(known, found)) = self.known.get(self.next)
            && known == name.as_ptr()
        {
            self.next += 1;
            return found;
        }
        let (behind, ahead) = self.known.split_at(self.next.min(self.known.len()));
        let hit = ahead
            .iter()
            .chain(behind)
            .position(|(known, _)| *known == name.as_ptr());
        if let Some(offset) = hit {
            let index = (self.next + offset) % self.known.len();
            self.next = index + 1;
            return self.known[index].1;
        }
        let found = find_entry(name);
        // A directive not registered yet may be later (by this extension's MINIT).
        if !found.is_null() {
            self.known.push((name.as_ptr(), found));
            self.next = self.known.len();
        }
        found
    }
}

/// This thread's entry of the directive, `None` when it does not exist.
fn entry(name: &CStr) -> Option<&'static zend_ini_entry> {
    let entry = ENTRIES.with_borrow_mut(|entries| entries.find(name));
    // SAFETY: a live entry (see ENTRIES), only read on this thread.
    unsafe { entry.as_ref() }
}

/// `read` of the entry's current value, `None` when it has none.
fn read_entry<T>(entry: &zend_ini_entry, read: impl FnOnce(&[u8]) -> T) -> Option<T> {
    // SAFETY: the value, when set, is a zend_string that nothing changes
    // while `read` runs. The bytes are reached through the raw pointer, since
    // they extend past `val`'s declared length of 1.
    unsafe {
        let value = entry.value;
        if value.is_null() {
            return None;
        }
        let bytes = (&raw const (*value).val).cast::<u8>();
        Some(read(std::slice::from_raw_parts(bytes, (*value).len)))
    }
}

/// `read` of the directive's current value (`entry`), `None` when it has none.
fn read_value<T>(entry: Option<&zend_ini_entry>, read: impl FnOnce(&[u8]) -> T) -> Option<T> {
    read_entry(entry?, read)
}

/// The reads of [`IniSource`], on the directive's entry however it was found.
mod reads {
    use super::*;

    pub fn long(entry: Option<&zend_ini_entry>) -> i64 {
        // As PHP's zend_ini_long, 0 when unset.
        read_value(entry, ini_long).unwrap_or(0)
    }

    pub fn string(entry: Option<&zend_ini_entry>) -> Option<String> {
        read_value(entry, |text| text_of(text).into_owned())
    }

    pub fn read_string(entry: Option<&zend_ini_entry>, read: &mut dyn FnMut(Option<&str>)) {
        if read_value(entry, |text| read(Some(&text_of(text)))).is_none() {
            read(None);
        }
    }

    pub fn user_long(name: &CStr, entry: Option<&zend_ini_entry>) -> Option<i64> {
        let (origin, value) = origin_of(name, entry)?;
        (origin != Origin::Registered).then_some(value)
    }
}

impl IniSource for PhpIni {
    fn long(&self, name: &CStr) -> i64 {
        reads::long(entry(name))
    }

    fn string(&self, name: &CStr) -> Option<String> {
        reads::string(entry(name))
    }

    fn read_string(&self, name: &CStr, read: &mut dyn FnMut(Option<&str>)) {
        reads::read_string(entry(name), read);
    }

    fn user_long(&self, name: &CStr) -> Option<i64> {
        reads::user_long(name, entry(name))
    }

    fn batch<T>(&self, load: impl FnOnce(&dyn IniSource) -> T) -> T {
        ENTRIES.with_borrow_mut(|entries| load(&Batch(RefCell::new(entries))))
    }
}

/// PHP's INI with this thread's entries borrowed once for a batch of reads
/// (see [`IniSource::batch`]), rather than once per read.
struct Batch<'a>(RefCell<&'a mut Entries>);

impl Batch<'_> {
    fn entry(&self, name: &CStr) -> Option<&'static zend_ini_entry> {
        let entry = self.0.borrow_mut().find(name);
        // SAFETY: a live entry (see ENTRIES), only read on this thread.
        unsafe { entry.as_ref() }
    }
}

impl IniSource for Batch<'_> {
    fn long(&self, name: &CStr) -> i64 {
        reads::long(self.entry(name))
    }

    fn string(&self, name: &CStr) -> Option<String> {
        reads::string(self.entry(name))
    }

    fn read_string(&self, name: &CStr, read: &mut dyn FnMut(Option<&str>)) {
        reads::read_string(self.entry(name), read);
    }

    fn user_long(&self, name: &CStr) -> Option<i64> {
        reads::user_long(name, self.entry(name))
    }
}

/// What startup left in one of [`OWN_DEFAULTS_WIN`]'s entries, recorded at
/// MINIT (again at a restart in the same process).
struct Startup {
    /// The value, which phpinfo() reports and a write is checked against
    /// too; a number, since opcache swaps the entries' strings after MINIT.
    value: AtomicI64,
    /// In PHP's configuration hash: php.ini, conf.d or `-d` set it.
    configured: AtomicBool,
    /// Registered by phpredis, not by this extension.
    by_phpredis: AtomicBool,
}

static STARTUP: [Startup; OWN_DEFAULTS_WIN.len()] = [const {
    Startup {
        value: AtomicI64::new(0),
        configured: AtomicBool::new(false),
        by_phpredis: AtomicBool::new(false),
    }
}; OWN_DEFAULTS_WIN.len()];

/// Where a directive of [`OWN_DEFAULTS_WIN`] gets its value from, and the
/// value; `None` for another directive or one that does not exist. A few
/// loads per read: it runs on every locked session_start().
pub fn origin(name: &CStr) -> Option<(Origin, i64)> {
    origin_of(name, entry(name))
}

/// [`origin`], with the directive's entry.
fn origin_of(name: &CStr, entry: Option<&zend_ini_entry>) -> Option<(Origin, i64)> {
    let startup = &STARTUP[OWN_DEFAULTS_WIN.iter().position(|own| *own == name)?];
    let entry = entry?;
    let value = read_entry(entry, ini_long).unwrap_or(0);
    let origin = if entry.modified != 0 {
        Origin::Altered
    } else if !interned(entry) || value != startup.value.load(Ordering::Relaxed) {
        Origin::Written
    } else if startup.configured.load(Ordering::Relaxed) {
        Origin::Configuration
    } else {
        Origin::Registered
    };
    Some((origin, value))
}

/// Whether the entry's value is an interned string (or none), as every value
/// startup gives is (`zend_register_ini_entries_ex` interns them; opcache
/// swaps them for interned copies in shared memory): php-fpm's writes are not.
fn interned(entry: &zend_ini_entry) -> bool {
    // SAFETY: the entry's value, when set, is a live zend_string.
    unsafe { entry.value.as_ref() }.is_none_or(|value| {
        // SAFETY: a zend_string's header, whose type_info holds its GC flags.
        let type_info = unsafe { value.gc.u.type_info };
        type_info & GC_IMMUTABLE != 0
    })
}

/// What startup registered for a directive of [`OWN_DEFAULTS_WIN`]: the
/// value its module registered (`None` where php.ini's replaced it) and
/// whether that module is phpredis.
pub fn registered(name: &CStr) -> Option<(Option<i64>, bool)> {
    let startup = &STARTUP[OWN_DEFAULTS_WIN.iter().position(|own| *own == name)?];
    let value = startup.value.load(Ordering::Relaxed);
    Some((
        (!startup.configured.load(Ordering::Relaxed)).then_some(value),
        startup.by_phpredis.load(Ordering::Relaxed),
    ))
}

/// Records what startup left in [`OWN_DEFAULTS_WIN`]'s entries, once every
/// module registered its own; `by_phpredis` tells which already existed.
fn remember_startup(by_phpredis: impl Fn(&CStr) -> bool) {
    for (name, startup) in OWN_DEFAULTS_WIN.iter().zip(&STARTUP) {
        let value = entry(name)
            .and_then(|entry| read_entry(entry, ini_long))
            .unwrap_or(0);
        startup.value.store(value, Ordering::Relaxed);
        // SAFETY: PHP's configuration hash, complete before any MINIT; the
        // name's bytes without the NUL, as PHP's own lookups pass them.
        let configured = unsafe { !cfg_get_entry(name.as_ptr(), name.count_bytes()).is_null() };
        startup.configured.store(configured, Ordering::Relaxed);
        startup
            .by_phpredis
            .store(by_phpredis(name), Ordering::Relaxed);
    }
    // A ZTS PHP gives this thread a copy of the table after startup
    // (zend_post_startup): pointers cached now would read the original,
    // which ini_set() never changes.
    forget_entries();
}

/// Registers the `redis.session.*` directives that do not exist yet; returns
/// how many this extension owns.
pub fn register_missing(module_number: c_int) -> usize {
    let (missing, phpredis): (Vec<_>, Vec<_>) = INI_DEFAULTS
        .iter()
        .partition(|(name, _)| PhpIni.string(name).is_none());
    let mut table: Vec<IniEntryDef> = missing
        .iter()
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
    remember_startup(|name| phpredis.iter().any(|(registered, _)| *registered == name));
    owned
}
