//! `rediscluster_session_set_lifetime(int $seconds, bool $sliding = true): bool`:
//! the active session's own lifetime, kept by every later request (see
//! [`crate::lifetime`]). Refused, with a warning, without an active session of
//! this handler or with a lifetime out of range.

use ext_php_rs::builders::FunctionBuilder;
use ext_php_rs::prelude::*;

use super::abi::rediscluster_session_active_with;
use super::hooks::{queue, raise_pending, session_module};
use crate::handler::Message;

#[php_function]
#[php(defaults(sliding = true))]
pub fn rediscluster_session_set_lifetime(seconds: i64, sliding: bool) -> bool {
    let outcome = std::panic::catch_unwind(|| {
        // SAFETY: reads this thread's session globals; the module is 'static.
        if unsafe { rediscluster_session_active_with(session_module()) } == 0 {
            anyhow::bail!("no active session of the rediscluster save handler");
        }
        crate::request::set_lifetime(seconds, sliding)
    })
    .unwrap_or_else(|_| {
        Err(anyhow::anyhow!(
            "rediscluster: internal error setting the lifetime"
        ))
    });
    match outcome {
        Ok(()) => true,
        Err(err) => {
            queue(Message::Warning(format!("{err:#}")));
            drop(err);
            raise_pending();
            false
        }
    }
}

/// The function for the module builder (the macro's wrapper is private here).
pub fn function() -> FunctionBuilder<'static> {
    wrap_function!(rediscluster_session_set_lifetime)
}
