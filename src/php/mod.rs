//! The FFI boundary with PHP: module entry, INI, the session hooks, the
//! stats function, and keeping the save_path password out of what PHP prints.

mod abi;
mod hooks;
mod ini;
mod module;
mod secrets;
mod stats;
