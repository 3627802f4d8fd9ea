//! A Lua script with its SHA1, run as EVALSHA with an EVAL fallback. The
//! scripts themselves live with the protocol they implement (`lock.rs`).

use std::sync::OnceLock;

use redis::{ErrorKind, RedisError, ServerErrorKind, Value};

use crate::resp::{Decimal, pack_parts};

pub struct LuaScript {
    source: &'static str,
    sha1: OnceLock<String>,
}

impl LuaScript {
    pub const fn new(source: &'static str) -> Self {
        LuaScript {
            source,
            sha1: OnceLock::new(),
        }
    }

    pub fn source(&self) -> &'static str {
        self.source
    }

    pub fn sha1(&self) -> &str {
        self.sha1
            .get_or_init(|| redis::Script::new(self.source).get_hash().to_owned())
    }
}

/// EVAL/EVALSHA, packed into `out`.
pub fn script_command(out: &mut Vec<u8>, verb: &str, body: &str, keys: &[&[u8]], args: &[&[u8]]) {
    let key_count = Decimal::from(keys.len() as u64);
    let head: &[&[u8]] = &[verb.as_bytes(), body.as_bytes(), key_count.as_bytes()];
    pack_parts(out, &[head, keys, args]);
}

/// The reply of an EVALSHA of a script the server does not have (a restart,
/// a failover lost it): EVAL sends it again.
pub fn no_script(reply: &Value) -> bool {
    matches!(reply, Value::ServerError(error)
        if RedisError::from(error.clone()).kind() == ErrorKind::Server(ServerErrorKind::NoScript))
}
