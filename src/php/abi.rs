//! Hand-written declarations of PHP's session module API (`ext/session/php_session.h`)
//! that ext-php-rs does not bind. They are exported by the
//! PHP binary (session is compiled in on Debian) and resolved when PHP loads us.

use std::ffi::{c_char, c_int, c_void};

use ext_php_rs::ffi::{zend_long, zend_result, zend_string};

pub const SUCCESS: zend_result = ext_php_rs::ffi::ZEND_RESULT_CODE_SUCCESS;
pub const FAILURE: zend_result = ext_php_rs::ffi::ZEND_RESULT_CODE_FAILURE;

pub type ModData = *mut *mut c_void;

/// `ps_module`: a save handler's name and hooks. Unchanged since PHP 7.0.
#[repr(C)]
pub struct PsModule {
    pub s_name: *const c_char,
    pub s_open: unsafe extern "C" fn(ModData, *const c_char, *const c_char) -> zend_result,
    pub s_close: unsafe extern "C" fn(ModData) -> zend_result,
    pub s_read: unsafe extern "C" fn(
        ModData,
        *mut zend_string,
        *mut *mut zend_string,
        zend_long,
    ) -> zend_result,
    pub s_write:
        unsafe extern "C" fn(ModData, *mut zend_string, *mut zend_string, zend_long) -> zend_result,
    pub s_destroy: unsafe extern "C" fn(ModData, *mut zend_string) -> zend_result,
    pub s_gc: unsafe extern "C" fn(ModData, zend_long, *mut zend_long) -> zend_long,
    pub s_create_sid: unsafe extern "C" fn(ModData) -> *mut zend_string,
    pub s_validate_sid: unsafe extern "C" fn(ModData, *mut zend_string) -> zend_result,
    pub s_update_timestamp:
        unsafe extern "C" fn(ModData, *mut zend_string, *mut zend_string, zend_long) -> zend_result,
}

const _: () = assert!(size_of::<PsModule>() == 80);

/// PHP keeps a pointer to the registered module for the life of the process.
pub struct StaticPsModule(pub PsModule);

// SAFETY: immutable after construction; PHP only reads it.
unsafe impl Sync for StaticPsModule {}

unsafe extern "C" {
    pub fn php_session_register_module(module: *const PsModule) -> zend_result;
    pub fn _php_find_ps_module(name: *const c_char) -> *const PsModule;
    pub fn php_session_create_id(mod_data: ModData) -> *mut zend_string;
    pub fn zend_unregister_ini_entries(module_number: c_int);
    pub fn php_html_puts(text: *const c_char, size: usize);
    pub fn php_output_write(text: *const c_char, len: usize) -> usize;
}
