//! One node of the model checker ([`Server`]) as the session handler's
//! store, for the tests that drive the real [`SessionHandler`](crate::handler::SessionHandler)
//! on it: the handler's property test, and the lock model's forked children.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::CStr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};

use super::server::Server;
use crate::cluster::ReadFrom;
use crate::lifetime::{Expiry, unix_now_ms};
use crate::script::LuaScript;
use crate::settings::{INI_DEFAULTS, IniSource, ReleaseCommand, ReplicaAck};
use crate::store::{
    DataAndLifetime, LockPoll, LockStore, PlainRead, PlainTake, Polled, Reply, SessionStore,
    whole_seconds,
};

/// One node as the handler's store, shared by the handlers that use it
/// (each open makes one).
#[derive(Clone, Default)]
pub(crate) struct Node {
    server: Rc<RefCell<Server>>,
    /// Each call sets the node's clock to the wall clock's first; otherwise
    /// it keeps the checker's.
    wall_clock: bool,
}

impl Node {
    /// A node on the wall clock.
    pub(crate) fn wall_clock() -> Self {
        Node {
            wall_clock: true,
            ..Node::default()
        }
    }

    /// A node holding `server`, on its clock.
    pub(crate) fn holding(server: Server) -> Self {
        Node {
            server: Rc::new(RefCell::new(server)),
            wall_clock: false,
        }
    }

    /// The server, as the calls so far left it.
    pub(crate) fn server(&self) -> std::cell::Ref<'_, Server> {
        self.server.borrow()
    }

    /// A call's time: the wall clock's, if the node is on it.
    fn set_clock(&self) {
        if self.wall_clock {
            self.server.borrow_mut().now_ms = unix_now_ms() as i64;
        }
    }

    fn call(&self, args: &[&[u8]]) -> Result<Reply> {
        self.set_clock();
        self.call_at_same_time(args)
    }

    /// A command of the same pipeline as the last `call`: at the same time,
    /// as the store's pipelined commands run on the server (two clock
    /// readings a millisecond apart gave the data and its lifetime key
    /// different expiry times, and the oracle failed 1 run in 3).
    fn call_at_same_time(&self, args: &[&[u8]]) -> Result<Reply> {
        let mut server = self.server.borrow_mut();
        let args: Vec<Vec<u8>> = args.iter().map(|arg| arg.to_vec()).collect();
        let keys: Vec<&[u8]> = args[1..].iter().map(Vec::as_slice).collect();
        server.call(&args, &keys).map_err(|fault| anyhow!(fault.0))
    }

    fn value(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.call(&[b"GET", key])? {
            Reply::Data(data) => Ok(Some(data)),
            _ => Ok(None),
        }
    }

    fn expiry(&self, expiry: Expiry) -> (&'static [u8], String) {
        match expiry {
            Expiry::After(ttl) => (b"EX", whole_seconds(ttl).to_string()),
            Expiry::At(at) => (b"PXAT", at.to_string()),
        }
    }
}

fn not_modelled<T>() -> Result<T> {
    bail!("not modelled: replicas and failover")
}

impl SessionStore for Node {
    fn set_may_fall_back(&mut self, _may_fall_back: bool) {}

    fn read_fallback(
        &mut self,
        _: &[u8],
        _: bool,
        _: Duration,
    ) -> Result<(Option<Vec<u8>>, ReadFrom)> {
        not_modelled()
    }

    fn get(&mut self, key: &[u8], refresh: Option<Duration>) -> Result<Option<Vec<u8>>> {
        if let Some(ttl) = refresh {
            let seconds = whole_seconds(ttl).to_string();
            return match self.call(&[b"GETEX", key, b"EX", seconds.as_bytes()])? {
                Reply::Data(data) => Ok(Some(data)),
                _ => Ok(None),
            };
        }
        self.value(key)
    }

    fn set(&mut self, key: &[u8], value: &[u8], ttl: Duration) -> Result<()> {
        let seconds = whole_seconds(ttl).to_string();
        self.call(&[b"SET", key, value, b"EX", seconds.as_bytes()])
            .map(drop)
    }

    fn set_acked(&mut self, _: &[u8], _: &[u8], _: Duration, _: ReplicaAck) -> Result<u32> {
        not_modelled()
    }

    fn expire(&mut self, key: &[u8], ttl: Duration) -> Result<bool> {
        let seconds = whole_seconds(ttl).to_string();
        Ok(self.call(&[b"EXPIRE", key, seconds.as_bytes()])? == Reply::Int(1))
    }

    fn get_with_lifetime(&mut self, key: &[u8], lifetime: &[u8]) -> Result<DataAndLifetime> {
        Ok((self.value(key)?, self.value(lifetime)?))
    }

    fn set_with_lifetime(
        &mut self,
        key: &[u8],
        data: &[u8],
        expiry: Expiry,
        (lifetime, value): (&[u8], Option<&[u8]>),
        ack: Option<ReplicaAck>,
    ) -> Result<Option<u32>> {
        if ack.is_some() {
            return not_modelled();
        }
        let (option, at) = self.expiry(expiry);
        self.call(&[b"SET", key, data, option, at.as_bytes()])?;
        match value {
            Some(value) => {
                self.call_at_same_time(&[b"SET", lifetime, value, option, at.as_bytes()])?
            }
            None => self.call_at_same_time(&[b"DEL", lifetime])?,
        };
        Ok(None)
    }

    fn expire_with_lifetime(
        &mut self,
        key: &[u8],
        lifetime: &[u8],
        expiry: Expiry,
    ) -> Result<bool> {
        let (verb, at): (&[u8], String) = match expiry {
            Expiry::After(ttl) => (b"EXPIRE", whole_seconds(ttl).to_string()),
            Expiry::At(at) => (b"PEXPIREAT", at.to_string()),
        };
        let renewed = self.call(&[verb, key, at.as_bytes()])? == Reply::Int(1);
        self.call_at_same_time(&[verb, lifetime, at.as_bytes()])?;
        Ok(renewed)
    }

    fn exists(&mut self, key: &[u8]) -> Result<bool> {
        Ok(self.call(&[b"EXISTS", key])? == Reply::Int(1))
    }

    fn delete(&mut self, keys: &[&[u8]]) -> Result<()> {
        let mut args: Vec<&[u8]> = vec![b"DEL"];
        args.extend_from_slice(keys);
        self.call(&args).map(drop)
    }

    fn delete_acked(&mut self, _: &[&[u8]], _: ReplicaAck) -> Result<u32> {
        not_modelled()
    }
}

impl LockStore for Node {
    fn eval(&mut self, script: &LuaScript, keys: &[&[u8]], args: &[&[u8]]) -> Result<Reply> {
        self.set_clock();
        self.server
            .borrow_mut()
            .eval(script, keys, args)
            .map_err(|fault| anyhow!(fault.0))
    }

    fn eval_acked(
        &mut self,
        _: &LuaScript,
        _: &[&[u8]],
        _: &[&[u8]],
        _: ReplicaAck,
    ) -> Result<(Reply, u32)> {
        not_modelled()
    }

    fn lock_and_read(&mut self, take: &PlainTake) -> Result<Option<PlainRead>> {
        let mut replies = Vec::new();
        take.each_command(|command| replies.push(self.call(command)));
        take.read(replies.into_iter().collect::<Result<Vec<_>>>()?)
    }

    fn poll_lock(&mut self, poll: &LockPoll, _: Duration) -> Result<Option<Polled>> {
        let sent = Instant::now();
        let bytes = |command: &[&[u8]]| match self.call(command)? {
            Reply::Data(bytes) => Ok(Some(bytes)),
            _ => Ok::<_, anyhow::Error>(None),
        };
        let pushed = bytes(&[b"LPOP", poll.list])?;
        let owner = bytes(&[b"GET", poll.lock])?;
        let beat = bytes(&[b"GET", poll.beat])?;
        Ok(Some(Polled {
            pushed,
            owner,
            beat,
            sent,
            replied: Instant::now(),
            primary: None,
        }))
    }

    /// One process: nobody else hands the lock over.
    fn pop_wait(&mut self, _: &[u8], _: Duration) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }

    fn delete_if_equal(
        &mut self,
        _: &[u8],
        _: &[u8],
        _: ReleaseCommand,
        _: &[u8],
        _: Option<&[u8]>,
    ) -> Result<Option<(bool, u64)>> {
        Ok(None)
    }
}

/// INI settings by name.
pub(crate) struct Ini(pub(crate) BTreeMap<&'static CStr, String>);

impl Ini {
    /// The extension's defaults, PHP's where it has none.
    pub(crate) fn defaults() -> Self {
        Ini(INI_DEFAULTS
            .iter()
            .map(|(name, value)| (*name, value.to_string_lossy().into_owned()))
            .collect())
    }
}

impl IniSource for Ini {
    fn long(&self, name: &CStr) -> i64 {
        self.string(name).and_then(|v| v.parse().ok()).unwrap_or(0)
    }
    fn string(&self, name: &CStr) -> Option<String> {
        self.0.get(name).cloned()
    }
}
