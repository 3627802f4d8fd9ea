//! The FFI boundary with PHP: module entry, INI, and the session hooks.

mod abi;
mod hooks;
mod ini;
mod module;
