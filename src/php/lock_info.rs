//! `rediscluster_session_lock_info(string $id): ?array`: who holds a
//! session's lock and how many wait, for an operator looking at a stuck
//! session. It never shows the lock's secret or the session data.

use anyhow::{Result, anyhow};
use ext_php_rs::boxed::ZBox;
use ext_php_rs::builders::FunctionBuilder;
use ext_php_rs::prelude::*;
use ext_php_rs::types::ZendHashTable;

use super::hooks::{queue, raise_pending};
use super::ini::PhpIni;
use crate::handler::{Message, SessionHandler};
use crate::settings::{IniSource, Settings};

/// `['locked' => bool, 'ttl_ms' => int, 'waiters' => int]` for the session id
/// under the current `session.save_path` (its prefix and cluster); null
/// with a warning when the cluster cannot tell.
#[php_function]
pub fn rediscluster_session_lock_info(id: String) -> Option<ZBox<ZendHashTable>> {
    let outcome = std::panic::catch_unwind(|| lock_info(&id))
        .unwrap_or_else(|_| Err(anyhow!("rediscluster: internal error reading the lock")));
    match outcome {
        Ok(table) => Some(table),
        Err(err) => {
            queue(Message::Warning(format!("{err:#}")));
            // Nothing of ours stays alive while PHP runs the error handler.
            drop((err, id));
            raise_pending();
            None
        }
    }
}

fn lock_info(id: &str) -> Result<ZBox<ZendHashTable>> {
    let save_path = PhpIni.string(c"session.save_path").unwrap_or_default();
    let handler = SessionHandler::open(&save_path, Settings::load(&PhpIni))?;
    let info = handler.lock_info(id.as_bytes())?;
    let mut table = ZendHashTable::new();
    table.insert("locked", info.locked)?;
    table.insert("ttl_ms", info.ttl_ms)?;
    table.insert("waiters", i64::try_from(info.waiters).unwrap_or(i64::MAX))?;
    Ok(table)
}

/// The function for the module builder (the macro's wrapper is private here).
pub fn function() -> FunctionBuilder<'static> {
    wrap_function!(rediscluster_session_lock_info)
}
