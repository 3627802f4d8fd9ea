//! The PHP module: its entry point, dependencies, startup, shutdown and phpinfo().

use std::ffi::{CStr, CString, c_char, c_int};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

use ext_php_rs::builders::ModuleBuilder;
use ext_php_rs::error::php_error;
use ext_php_rs::ffi::{
    _zend_module_dep, php_info_print_table_end, php_info_print_table_row,
    php_info_print_table_start,
};
use ext_php_rs::flags::ErrorType;
use ext_php_rs::zend::{ModuleEntry, StaticModuleEntry};

use super::abi::{
    _php_find_ps_module, FAILURE, SUCCESS, php_session_register_module, ps_module,
    rediscluster_session_unwrap_calls, rediscluster_session_wrap_calls,
    zend_unregister_ini_entries,
};
use super::hooks;
use super::ini::{self, PhpIni};
use super::lifetime;
use super::lock_info;
use super::lock_wait;
use super::metrics;
use super::no_unwind;
use super::read_only;
use super::secrets;
use super::stats;
use crate::request::{EndStep, request_end};
use crate::settings::{INI_DEFAULTS, IniSource, LockSettings};

/// The name phpredis's own `rediscluster` handler keeps when both are loaded.
const PHPREDIS_HANDLER_RENAMED: &CStr = c"rediscluster_phpredis";

struct ModuleDeps([_zend_module_dep; 3]);
// SAFETY: immutable static C strings; PHP only reads the table.
unsafe impl Sync for ModuleDeps {}

const MODULE_DEP_REQUIRED: u8 = 1;
const MODULE_DEP_OPTIONAL: u8 = 3;

const fn dep(name: &'static CStr, type_: u8) -> _zend_module_dep {
    _zend_module_dep {
        name: name.as_ptr(),
        rel: null(),
        version: null(),
        type_,
    }
}

/// session is required; phpredis (module "redis") is optional but, when
/// loaded, starts first, so its INI entries and handler exist at our MINIT.
static DEPS: ModuleDeps = ModuleDeps([
    dep(c"session", MODULE_DEP_REQUIRED),
    dep(c"redis", MODULE_DEP_OPTIONAL),
    _zend_module_dep {
        name: null(),
        rel: null(),
        version: null(),
        type_: 0,
    },
]);

/// The entry point PHP looks up after `dlopen`.
#[unsafe(no_mangle)]
pub extern "C" fn get_module() -> *mut ModuleEntry {
    static ENTRY: StaticModuleEntry = StaticModuleEntry::new();
    // A NULL entry makes PHP refuse to load the library, with its own message.
    no_unwind(null_mut(), || {
        ENTRY.get_or_init(|| {
            let (mut entry, _startup, owned) =
                ModuleBuilder::new("rediscluster_session", env!("CARGO_PKG_VERSION"))
                    .startup_function(minit)
                    .shutdown_function(mshutdown)
                    .request_startup_function(rinit)
                    .request_shutdown_function(rshutdown)
                    .post_deactivate_function(post_deactivate)
                    .info_function(info)
                    .function(stats::function())
                    .function(lock_info::function())
                    .function(lock_wait::function())
                    .function(metrics::function())
                    .function(read_only::function())
                    .function(lifetime::function())
                    .try_into()
                    .expect(
                        "the module entry has no functions or classes that could fail to build",
                    );
            entry.deps = DEPS.0.as_ptr();
            (entry, owned)
        })
    })
}

unsafe extern "C" fn minit(_type: i32, module_number: i32) -> i32 {
    no_unwind(FAILURE, || {
        ini::register_missing(module_number);
        // Before php-fpm or Apache fork: their workers share the counters.
        if !crate::stats::share_with_forks() {
            php_error(
                &ErrorType::CoreWarning,
                "rediscluster_session: no shared memory for the pool's metrics; rediscluster_session_metrics() covers each process alone",
            );
        }
        take_over_phpredis_handler();
        // SAFETY: MINIT, before any request: the function table is not in use.
        let missing = unsafe { rediscluster_session_wrap_calls() };
        if !missing.is_null() {
            // SAFETY: a static C string of session_globals.c.
            let missing = unsafe { CStr::from_ptr(missing) }.to_string_lossy();
            let lifetime = if missing == "session_regenerate_id" {
                ", and a new id will not keep its session's lifetime"
            } else {
                ""
            };
            php_error(
                &ErrorType::CoreWarning,
                &format!(
                    "rediscluster_session: the session module's {missing} not found: each hook it runs gets a time budget of its own{lifetime}"
                ),
            );
        }
        secrets::mask_in_phpinfo();
        // SAFETY: a 'static module that PHP may keep for the life of the process.
        unsafe { php_session_register_module(hooks::session_module()) }
    })
}

/// The process whose request last looked at its INI for the lease watchdog:
/// a process forked after a request of its parent's (php-fpm's workers after
/// `opcache.preload`, a child of `pcntl_fork()`) looks again.
static WATCHDOG_CONSIDERED_BY: AtomicU32 = AtomicU32::new(0);

/// A request's start. The first of a process (a worker after its fork, a CLI
/// script) whose INI leases session locks starts the lease watchdog's thread
/// (about 150 µs: `clone`, the stack, the signal mask) here, off any session's
/// path, so that no locked request waits for it.
unsafe extern "C" fn rinit(_type: i32, _module_number: i32) -> i32 {
    no_unwind(SUCCESS, || {
        let pid = std::process::id();
        if WATCHDOG_CONSIDERED_BY.swap(pid, Ordering::Relaxed) != pid && leases_locks() {
            // On failure the first lock tries again, and warns.
            let _ = crate::lock::start_watchdog();
        }
        SUCCESS
    })
}

/// The session handler is ours, with locking and a lease.
fn leases_locks() -> bool {
    PhpIni
        .string(c"session.save_handler")
        .is_some_and(|name| name.as_bytes() == hooks::HANDLER_NAME.to_bytes())
        && PhpIni.long(c"redis.session.locking_enabled") != 0
        && LockSettings::load(&PhpIni).lease.is_some()
}

/// The request's end, before the session module's final write (see
/// [`EndStep`]: what each step does is the safe core's, where the handler's
/// property test runs the steps in php-src's order).
unsafe extern "C" fn rshutdown(_type: i32, _module_number: i32) -> i32 {
    no_unwind(FAILURE, || {
        request_end(EndStep::ModuleShutdown);
        SUCCESS
    })
}

/// The request's end, after every module's RSHUTDOWN.
unsafe extern "C" fn post_deactivate() -> i32 {
    no_unwind(FAILURE, || {
        request_end(EndStep::PostDeactivate);
        SUCCESS
    })
}

/// A call into the session module starts (`running` 1) or returns (0),
/// from the wrappers `session_globals.c` puts around them: its hooks share
/// one time budget. `regenerating`: it is `session_regenerate_id()`, whose new
/// id takes the old one's lifetime.
#[unsafe(no_mangle)]
pub extern "C" fn rediscluster_session_call(running: c_int, regenerating: c_int) {
    no_unwind((), || {
        if running != 0 {
            crate::budget::call_begins();
        } else {
            crate::budget::call_ends();
        }
        if regenerating != 0 {
            crate::request::with(|request| request.regenerating(running != 0));
        }
    });
}

unsafe extern "C" fn mshutdown(_type: i32, module_number: i32) -> i32 {
    no_unwind(FAILURE, || {
        // Before PHP unloads the library the thread runs in.
        if !crate::watchdog::stop() {
            php_error(
                &ErrorType::CoreWarning,
                "rediscluster_session: the lease watchdog did not stop in time",
            );
        }
        // SAFETY: only removes the entries registered under our module number.
        unsafe { zend_unregister_ini_entries(module_number) };
        // A server that restarts PHP in the same process (Apache's graceful
        // restart) registers the directives anew.
        secrets::unmask_in_phpinfo();
        ini::forget_entries();
        restore_phpredis_handler();
        // SAFETY: MSHUTDOWN, after every request.
        unsafe { rediscluster_session_unwrap_calls() };
        SUCCESS
    })
}

/// PHP picks the first save handler registered under a name, and phpredis,
/// when loaded, registers `rediscluster` before us. Renaming its entry makes
/// `session.save_handler=rediscluster` ours in any load order, while phpredis's
/// classes and INI stay untouched. Its module is a writable C global; the
/// write is skipped (with a warning) if the memory is not writable.
fn take_over_phpredis_handler() {
    // SAFETY: PHP returns a registered module or NULL.
    let existing = unsafe { _php_find_ps_module(hooks::HANDLER_NAME.as_ptr()) }.cast_mut();
    if existing.is_null() {
        return;
    }
    if is_writable(existing as usize) {
        // SAFETY: a live, writable ps_module; the name is a 'static C string.
        let original = unsafe {
            std::mem::replace(&mut (*existing).s_name, PHPREDIS_HANDLER_RENAMED.as_ptr())
        };
        PHPREDIS_NAME.store(original.cast_mut(), Ordering::Relaxed);
        RENAMED.store(existing, Ordering::Relaxed);
    } else {
        php_error(&ErrorType::CoreWarning, SHADOWED);
    }
}

/// What startup and phpinfo() say when the name could not be taken over.
const SHADOWED: &str = "rediscluster is phpredis's handler: no locking (rediscluster_session could not take the name over; load it before phpredis)";

/// phpredis's module, while it carries the name this extension gave it, and
/// its own name (phpredis's static string).
static RENAMED: AtomicPtr<ps_module> = AtomicPtr::new(null_mut());
static PHPREDIS_NAME: AtomicPtr<c_char> = AtomicPtr::new(null_mut());

/// Gives phpredis's handler its name back: the one it carries now lives in
/// this library, which PHP unloads after shutdown.
fn restore_phpredis_handler() {
    let renamed = RENAMED.swap(null_mut(), Ordering::Relaxed);
    // SAFETY: the module renamed at startup; PHP keeps it until its own shutdown.
    if let Some(module) = unsafe { renamed.as_mut() } {
        module.s_name = PHPREDIS_NAME.load(Ordering::Relaxed);
    }
}

/// Whether `addr` lies in a writable mapping of this process.
fn is_writable(addr: usize) -> bool {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return false;
    };
    maps.lines().any(|line| {
        let mut fields = line.split_whitespace();
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
            return false;
        };
        let Some((start, end)) = range.split_once('-') else {
            return false;
        };
        let parse = |hex| usize::from_str_radix(hex, 16).unwrap_or(0);
        (parse(start)..parse(end)).contains(&addr) && perms.starts_with("rw")
    })
}

unsafe extern "C" fn info(_module: *mut ModuleEntry) {
    no_unwind((), info_table);
}

fn info_table() {
    // SAFETY: PHP's phpinfo() table API; each row passes NUL-terminated strings.
    let row = |name: &str, value: &str| {
        let name = CString::new(name).unwrap_or_default();
        let value = CString::new(value.replace('\0', "")).unwrap_or_default();
        unsafe { php_info_print_table_row(2, name.as_ptr(), value.as_ptr()) };
    };
    unsafe { php_info_print_table_start() };
    row("rediscluster_session support", "enabled");
    row("Version", env!("CARGO_PKG_VERSION"));
    row("Built for PHP", env!("RCS_BUILT_FOR_PHP"));
    // SAFETY: as in take_over_phpredis_handler.
    let serving =
        unsafe { _php_find_ps_module(hooks::HANDLER_NAME.as_ptr()) } == hooks::session_module();
    row(
        "Save handler",
        if serving { "rediscluster" } else { SHADOWED },
    );
    for (name, _) in INI_DEFAULTS {
        let value = lock_wait::describe(name)
            .or_else(|| PhpIni.string(name))
            .unwrap_or_default();
        row(&format!("{} (effective)", name.to_string_lossy()), &value);
    }
    row(
        "Lock wait, at most (effective)",
        &lock_wait::describe_total(),
    );
    row("Metrics", metrics::scope());
    for (name, value) in stats::info_rows() {
        row(&name, &value);
    }
    unsafe { php_info_print_table_end() };
}
