//! A Lua script with its SHA1, run as EVALSHA with an EVAL fallback. The
//! scripts themselves live with the protocol they implement (`lock.rs`).

use std::sync::OnceLock;

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
