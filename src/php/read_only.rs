//! `rediscluster_session_read_only(): bool`: whether the session this request
//! opened is served read-only (`failover=error`: its primary could not serve
//! it), since `session_write_close()` returns true whatever the handler did.

use ext_php_rs::builders::FunctionBuilder;
use ext_php_rs::prelude::*;

#[php_function]
pub fn rediscluster_session_read_only() -> bool {
    crate::request::with(|request| request.read_only())
}

/// The function for the module builder (the macro's wrapper is private here).
pub fn function() -> FunctionBuilder<'static> {
    wrap_function!(rediscluster_session_read_only)
}
