//! One primary as the model checker sees it: the commands the lock scripts
//! and client steps use, over keys with absolute expiry times, and Lua 5.1
//! running the protocol's real script texts with `redis.call` bound to it.
//! Every key a call touches is checked against the keys it declared. Lua
//! runs once per distinct input of a script ([`Memo`]): the checker makes
//! the same call on the same keys from many states.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use mlua::{Function, Lua, MultiValue, Table, Value as LuaValue};

use crate::script::LuaScript;
use crate::store::Reply;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    Str(Vec<u8>),
    List(VecDeque<Vec<u8>>),
    /// Members by score, then by member, as Redis orders them.
    ZSet(Vec<(i64, Vec<u8>)>),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
}

/// Each key's value and expiry time.
pub type Keyspace = BTreeMap<Vec<u8>, (Value, Option<i64>)>;

/// The keyspace of one node and its clock (unix ms as its `TIME` says).
/// States share keyspaces until one changes: most steps change none, or
/// only one of a state's two nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Server {
    pub keys: Arc<Keyspace>,
    pub now_ms: i64,
    /// Calls to `TIME` within this tick: each sees a later microsecond, as
    /// calls that follow each other do.
    pub time_calls: i64,
    /// Microseconds added to every `TIME` reading: each failover moves them
    /// on by 500, so that no node ever repeats a reading an earlier primary
    /// gave, even a clock a tick behind (fewer than 500 calls a tick).
    pub time_offset: i64,
}

/// What went wrong in a call: a key it did not declare, or a command the
/// scripts should never send (a model or script bug).
#[derive(Clone, Debug)]
pub struct Fault(pub String);

impl Server {
    /// Drops every key whose expiry time has come (as active expiry would).
    pub fn expire_keys(&mut self) {
        self.time_calls = 0;
        let now = self.now_ms;
        let live = |at: &Option<i64>| at.is_none_or(|at| at > now);
        if !self.keys.values().all(|(_, at)| live(at)) {
            self.keys_mut().retain(|_, (_, at)| live(at));
        }
    }

    /// The keyspace to change: a copy of its own if another state shares it.
    pub fn keys_mut(&mut self) -> &mut Keyspace {
        Arc::make_mut(&mut self.keys)
    }

    pub fn get_str(&self, key: &[u8]) -> Option<&[u8]> {
        match self.keys.get(key) {
            Some((Value::Str(value), _)) => Some(value),
            _ => None,
        }
    }

    pub fn ttl_of(&self, key: &[u8]) -> Option<Option<i64>> {
        self.keys.get(key).map(|(_, at)| *at)
    }

    /// Runs one command; `declared` are the keys the caller named up front.
    pub fn call(&mut self, args: &[Vec<u8>], declared: &[&[u8]]) -> Result<Reply, Fault> {
        let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
        let key = |i: usize| -> Result<&[u8], Fault> {
            let key = args
                .get(i)
                .ok_or_else(|| Fault(format!("{name}: no key")))?;
            if !declared.contains(&key.as_slice()) {
                return Err(Fault(format!(
                    "{name} touches {} which was not declared",
                    String::from_utf8_lossy(key)
                )));
            }
            Ok(key)
        };
        let arg = |i: usize| -> Result<&[u8], Fault> {
            args.get(i)
                .map(Vec::as_slice)
                .ok_or_else(|| Fault(format!("{name}: missing argument {i}")))
        };
        let int = |i: usize| -> Result<i64, Fault> {
            let text = String::from_utf8_lossy(arg(i)?).into_owned();
            text.parse()
                .map_err(|_| Fault(format!("{name}: '{text}' is not an integer")))
        };
        let now = self.now_ms;
        // The absolute expiry time an EX, PX or PXAT option asks for.
        let expiry_at = |option: &[u8], number: i64| match option {
            b"EX" => Some(now + number * 1000),
            b"PX" => Some(now + number),
            b"PXAT" => Some(number),
            _ => None,
        };
        Ok(match name.as_str() {
            "TIME" => {
                self.time_calls += 1;
                let micros = now * 1000 + self.time_offset + self.time_calls;
                Reply::Array(vec![
                    Reply::Data((micros / 1_000_000).to_string().into_bytes()),
                    Reply::Data((micros % 1_000_000).to_string().into_bytes()),
                ])
            }
            "GET" => match self.keys.get(key(1)?) {
                Some((Value::Str(value), _)) => Reply::Data(value.clone()),
                Some(_) => return Err(Fault("GET of a non-string".into())),
                None => Reply::Nil,
            },
            "GETRANGE" => {
                // Only from 0, as the plain take asks: an empty string for none.
                let last = usize::try_from(int(3)?)
                    .map_err(|_| Fault("GETRANGE with a negative end".into()))?;
                match self.keys.get(key(1)?) {
                    Some((Value::Str(value), _)) => {
                        Reply::Data(value[..value.len().min(last + 1)].to_vec())
                    }
                    Some(_) => return Err(Fault("GETRANGE of a non-string".into())),
                    None => Reply::Data(Vec::new()),
                }
            }
            "EXISTS" => Reply::Int(i64::from(self.keys.contains_key(key(1)?))),
            "GETEX" => {
                let k = key(1)?.to_vec();
                let new_at = expiry_at(arg(2)?, int(3)?)
                    .ok_or_else(|| Fault("GETEX without EX or PXAT".into()))?;
                let reply = match self.keys_mut().get_mut(&k) {
                    Some((Value::Str(value), at)) => {
                        *at = Some(new_at);
                        Reply::Data(value.clone())
                    }
                    Some(_) => return Err(Fault("GETEX of a non-string".into())),
                    None => Reply::Nil,
                };
                self.drop_if_expired(&k);
                reply
            }
            "SET" => {
                let k = key(1)?.to_vec();
                let (mut nx, mut at) = (false, None);
                let mut i = 3;
                while i < args.len() {
                    let option = args[i].to_ascii_uppercase();
                    if option == b"NX" {
                        nx = true;
                    } else if option == b"KEEPTTL" {
                        at = self.ttl_of(&k).flatten();
                    } else {
                        at = Some(
                            expiry_at(&option, int(i + 1)?)
                                .ok_or_else(|| Fault("SET option".into()))?,
                        );
                        i += 1;
                    }
                    i += 1;
                }
                if nx && self.keys.contains_key(&k) {
                    return Ok(Reply::Nil);
                }
                self.keys_mut()
                    .insert(k.clone(), (Value::Str(arg(2)?.to_vec()), at));
                // A time already past (PXAT) deletes the key, as Redis does.
                self.drop_if_expired(&k);
                Reply::Status
            }
            "DELIFEQ" => {
                let k = key(1)?;
                let equal = self.get_str(k) == Some(arg(2)?);
                if equal {
                    self.keys_mut().remove(k);
                }
                Reply::Int(i64::from(equal))
            }
            "DEL" => {
                let mut deleted = 0;
                for i in 1..args.len() {
                    deleted += i64::from(self.keys_mut().remove(key(i)?).is_some());
                }
                Reply::Int(deleted)
            }
            "PEXPIRE" | "EXPIRE" => {
                let ms = if name == "EXPIRE" {
                    int(2)? * 1000
                } else {
                    int(2)?
                };
                let condition = args.get(3).map(|c| c.to_ascii_uppercase());
                match self.keys_mut().get_mut(key(1)?) {
                    None => Reply::Int(0),
                    Some((_, at)) => {
                        let new = now + ms;
                        let set = match condition.as_deref() {
                            None => true,
                            Some(b"NX") => at.is_none(),
                            Some(b"GT") => at.is_some_and(|at| new > at),
                            Some(_) => return Err(Fault("EXPIRE option".into())),
                        };
                        if set {
                            *at = Some(new);
                        }
                        Reply::Int(i64::from(set))
                    }
                }
            }
            "PEXPIREAT" => {
                let k = key(1)?.to_vec();
                let new_at = int(2)?;
                match self.keys_mut().get_mut(&k) {
                    None => Reply::Int(0),
                    Some((_, at)) => {
                        *at = Some(new_at);
                        self.drop_if_expired(&k);
                        Reply::Int(1)
                    }
                }
            }
            "PTTL" => match self.keys.get(key(1)?) {
                None => Reply::Int(-2),
                Some((_, None)) => Reply::Int(-1),
                Some((_, Some(at))) => Reply::Int(at - now),
            },
            "RPUSH" => {
                let k = key(1)?.to_vec();
                let entry = self
                    .keys_mut()
                    .entry(k)
                    .or_insert((Value::List(VecDeque::new()), None));
                let Value::List(list) = &mut entry.0 else {
                    return Err(Fault("RPUSH to a non-list".into()));
                };
                list.extend(args[2..].iter().cloned());
                Reply::Int(list.len() as i64)
            }
            "LPOP" => {
                let k = key(1)?.to_vec();
                let popped = match self.keys_mut().get_mut(&k) {
                    Some((Value::List(list), _)) => list.pop_front(),
                    Some(_) => return Err(Fault("LPOP of a non-list".into())),
                    None => None,
                };
                if matches!(self.keys.get(&k), Some((Value::List(list), _)) if list.is_empty()) {
                    self.keys_mut().remove(&k);
                }
                popped.map_or(Reply::Nil, Reply::Data)
            }
            "LINDEX" => match self.keys.get(key(1)?) {
                Some((Value::List(list), _)) => {
                    let i = usize::try_from(int(2)?).unwrap_or(usize::MAX);
                    list.get(i).cloned().map_or(Reply::Nil, Reply::Data)
                }
                Some(_) => return Err(Fault("LINDEX of a non-list".into())),
                None => Reply::Nil,
            },
            "ZADD" => {
                let k = key(1)?.to_vec();
                if !arg(2)?.eq_ignore_ascii_case(b"NX") {
                    return Err(Fault("ZADD without NX".into()));
                }
                let (score, member) = (int(3)?, arg(4)?.to_vec());
                let entry = self
                    .keys_mut()
                    .entry(k)
                    .or_insert((Value::ZSet(Vec::new()), None));
                let Value::ZSet(set) = &mut entry.0 else {
                    return Err(Fault("ZADD to a non-zset".into()));
                };
                if set.iter().any(|(_, m)| *m == member) {
                    Reply::Int(0)
                } else {
                    set.push((score, member));
                    set.sort();
                    Reply::Int(1)
                }
            }
            "ZREM" | "ZRANGE" | "ZRANK" | "ZCARD" | "ZSCORE" => {
                let k = key(1)?.to_vec();
                let empty = Vec::new();
                let set = match self.keys.get(&k) {
                    Some((Value::ZSet(set), _)) => set,
                    Some(_) => return Err(Fault(format!("{name} of a non-zset"))),
                    None => &empty,
                };
                let position = |member: &[u8]| set.iter().position(|(_, m)| m == member);
                match name.as_str() {
                    "ZCARD" => Reply::Int(set.len() as i64),
                    "ZRANK" => position(arg(2)?).map_or(Reply::Nil, |i| Reply::Int(i as i64)),
                    "ZSCORE" => position(arg(2)?).map_or(Reply::Nil, |i| {
                        Reply::Data(set[i].0.to_string().into_bytes())
                    }),
                    "ZRANGE" => {
                        let (start, stop) = (int(2)?, int(3)?);
                        if start < 0 || stop < 0 {
                            return Err(Fault("ZRANGE with negative indexes".into()));
                        }
                        Reply::Array(
                            set.iter()
                                .skip(start as usize)
                                .take((stop - start + 1).max(0) as usize)
                                .map(|(_, m)| Reply::Data(m.clone()))
                                .collect(),
                        )
                    }
                    _ => {
                        let Some(i) = position(arg(2)?) else {
                            return Ok(Reply::Int(0));
                        };
                        let Some((Value::ZSet(set), _)) = self.keys_mut().get_mut(&k) else {
                            unreachable!()
                        };
                        set.remove(i);
                        if set.is_empty() {
                            self.keys_mut().remove(&k);
                        }
                        Reply::Int(1)
                    }
                }
            }
            "HGET" | "HSET" | "HDEL" => {
                let k = key(1)?.to_vec();
                let field = arg(2)?.to_vec();
                match name.as_str() {
                    "HGET" => match self.keys.get(&k) {
                        Some((Value::Hash(hash), _)) => {
                            hash.get(&field).cloned().map_or(Reply::Nil, Reply::Data)
                        }
                        Some(_) => return Err(Fault("HGET of a non-hash".into())),
                        None => Reply::Nil,
                    },
                    "HSET" => {
                        let entry = self
                            .keys_mut()
                            .entry(k)
                            .or_insert((Value::Hash(BTreeMap::new()), None));
                        let Value::Hash(hash) = &mut entry.0 else {
                            return Err(Fault("HSET of a non-hash".into()));
                        };
                        Reply::Int(i64::from(hash.insert(field, arg(3)?.to_vec()).is_none()))
                    }
                    _ => {
                        let removed = match self.keys_mut().get_mut(&k) {
                            Some((Value::Hash(hash), _)) => hash.remove(&field).is_some(),
                            Some(_) => return Err(Fault("HDEL of a non-hash".into())),
                            None => false,
                        };
                        if matches!(self.keys.get(&k), Some((Value::Hash(h), _)) if h.is_empty()) {
                            self.keys_mut().remove(&k);
                        }
                        Reply::Int(i64::from(removed))
                    }
                }
            }
            _ => return Err(Fault(format!("the model has no {name}"))),
        })
    }

    /// Deletes `key` if its expiry time has come.
    fn drop_if_expired(&mut self, key: &[u8]) {
        let now = self.now_ms;
        if matches!(self.keys.get(key), Some((_, Some(at))) if *at <= now) {
            self.keys_mut().remove(key);
        }
    }

    /// Runs a script's real text on this node, atomically, or repeats what
    /// it did the last time it ran on the same inputs (see [`Memo`]).
    pub fn eval(
        &mut self,
        script: &LuaScript,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Result<Reply, Fault> {
        LUA.with(|lua| {
            let mut memo = lua.memo.borrow_mut();
            let Memo { effects, input } = &mut *memo;
            self.encode_input(input, script, keys, args);
            if let Some(effect) = effects.get(input.as_slice()) {
                for (key, entry) in keys.iter().zip(&effect.after) {
                    self.set_entry(key, entry.as_ref());
                }
                self.time_calls = effect.time_calls;
                return effect.result.clone();
            }
            let result = lua.eval(self, script, keys, args);
            if effects.len() == MEMO_ENTRIES {
                effects.clear();
            }
            let effect = Effect {
                after: keys
                    .iter()
                    .map(|key| self.keys.get(*key).cloned())
                    .collect(),
                time_calls: self.time_calls,
                result: result.clone(),
            };
            effects.insert(input.as_slice().into(), effect);
            result
        })
    }

    /// `key`'s entry set to `entry` (`None`: no key), the keyspace copied
    /// only if that changes it.
    fn set_entry(&mut self, key: &[u8], entry: Option<&(Value, Option<i64>)>) {
        if self.keys.get(key) == entry {
            return;
        }
        let keys = self.keys_mut();
        match (entry, keys.get_mut(key)) {
            (Some(entry), Some(slot)) => slot.clone_from(entry),
            (Some(entry), None) => drop(keys.insert(key.to_vec(), entry.clone())),
            (None, _) => drop(keys.remove(key)),
        }
    }

    /// Into `out`, all a script's run depends on: the script, its keys and
    /// arguments, the clock and the entries of the keys it declared (it may
    /// touch no other), each field length-prefixed, so that equal encodings
    /// mean equal inputs.
    fn encode_input(&self, out: &mut Vec<u8>, script: &LuaScript, keys: &[&[u8]], args: &[&[u8]]) {
        out.clear();
        // The scripts are statics: the text's address names one.
        out.extend_from_slice(&(script.source().as_ptr() as usize).to_le_bytes());
        out.extend_from_slice(&self.now_ms.to_le_bytes());
        out.extend_from_slice(&self.time_calls.to_le_bytes());
        for list in [keys, args] {
            put_len(out, list.len());
            for item in list {
                put_bytes(out, item);
            }
        }
        for key in keys {
            match self.keys.get(*key) {
                None => out.push(0),
                Some((value, at)) => {
                    match at {
                        None => out.push(1),
                        Some(at) => {
                            out.push(2);
                            out.extend_from_slice(&at.to_le_bytes());
                        }
                    }
                    value.encode(out);
                }
            }
        }
    }
}

impl Value {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Value::Str(bytes) => {
                out.push(0);
                put_bytes(out, bytes);
            }
            Value::List(list) => {
                out.push(1);
                put_len(out, list.len());
                list.iter().for_each(|item| put_bytes(out, item));
            }
            Value::ZSet(set) => {
                out.push(2);
                put_len(out, set.len());
                for (score, member) in set {
                    out.extend_from_slice(&score.to_le_bytes());
                    put_bytes(out, member);
                }
            }
            Value::Hash(hash) => {
                out.push(3);
                put_len(out, hash.len());
                for (field, value) in hash {
                    put_bytes(out, field);
                    put_bytes(out, value);
                }
            }
        }
    }
}

fn put_len(out: &mut Vec<u8>, len: usize) {
    out.extend_from_slice(&(len as u32).to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_len(out, bytes.len());
    out.extend_from_slice(bytes);
}

/// Bounds the memo's memory: it starts afresh when full.
const MEMO_ENTRIES: usize = 1 << 20;

/// What scripts did, by [`Server::encode_input`]. A script is a function of
/// its input there (no global state survives a run, `TIME` reads the node's
/// clock), and the checker makes the same call on the same keys from many
/// states that differ elsewhere: Lua runs once for them all.
#[derive(Default)]
struct Memo {
    effects: HashMap<Box<[u8]>, Effect>,
    /// The input being looked up, kept for its capacity.
    input: Vec<u8>,
}

struct Effect {
    /// The declared keys' entries after the run, in their order.
    after: Vec<Option<(Value, Option<i64>)>>,
    time_calls: i64,
    result: Result<Reply, Fault>,
}

thread_local! {
    /// One Lua 5.1 per checker thread, each script compiled once.
    static LUA: ScriptRunner = ScriptRunner::new();
}

struct ScriptRunner {
    lua: Lua,
    compiled: RefCell<HashMap<&'static str, Function>>,
    memo: RefCell<Memo>,
}

/// The node and the declared keys a running script's `redis.call` works on.
struct Running {
    server: *mut Server,
    declared: Vec<Vec<u8>>,
    fault: Option<Fault>,
}

thread_local! {
    static RUNNING: RefCell<Option<Running>> = const { RefCell::new(None) };
}

impl ScriptRunner {
    fn new() -> Self {
        let lua = Lua::new();
        let redis = lua.create_table().unwrap();
        let call = lua
            .create_function(|lua, args: MultiValue| {
                let args: Vec<Vec<u8>> = args
                    .into_iter()
                    .map(|value| match value {
                        LuaValue::String(s) => s.as_bytes().to_vec(),
                        LuaValue::Integer(n) => n.to_string().into_bytes(),
                        // Lua 5.1 numbers are doubles; Redis formats them as %.17g.
                        LuaValue::Number(n) if n.fract() == 0.0 => {
                            (n as i64).to_string().into_bytes()
                        }
                        other => format!("{other:?}").into_bytes(),
                    })
                    .collect();
                let reply = RUNNING.with(|running| {
                    let mut running = running.borrow_mut();
                    let running = running.as_mut().expect("a script is running");
                    let declared: Vec<&[u8]> = running.declared.iter().map(Vec::as_slice).collect();
                    // SAFETY: set by `eval` for the duration of the script, on this thread.
                    let server = unsafe { &mut *running.server };
                    server.call(&args, &declared).map_err(|fault| {
                        let text = fault.0.clone();
                        running.fault.get_or_insert(fault);
                        text
                    })
                });
                match reply {
                    Ok(reply) => to_lua(lua, reply),
                    Err(text) => Err(mlua::Error::runtime(text)),
                }
            })
            .unwrap();
        redis.set("call", call).unwrap();
        lua.globals().set("redis", redis).unwrap();
        ScriptRunner {
            lua,
            compiled: RefCell::new(HashMap::new()),
            memo: RefCell::default(),
        }
    }

    fn eval(
        &self,
        server: &mut Server,
        script: &LuaScript,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Result<Reply, Fault> {
        let function = self
            .compiled
            .borrow_mut()
            .entry(script.source())
            .or_insert_with(|| self.lua.load(script.source()).into_function().unwrap())
            .clone();
        let table = |items: &[&[u8]]| -> Table {
            let table = self.lua.create_table().unwrap();
            for (i, item) in items.iter().enumerate() {
                table
                    .set(i + 1, self.lua.create_string(item).unwrap())
                    .unwrap();
            }
            table
        };
        self.lua.globals().set("KEYS", table(keys)).unwrap();
        self.lua.globals().set("ARGV", table(args)).unwrap();
        RUNNING.with(|running| {
            *running.borrow_mut() = Some(Running {
                server,
                declared: keys.iter().map(|k| k.to_vec()).collect(),
                fault: None,
            })
        });
        let result = function.call::<LuaValue>(());
        let running = RUNNING.with(|running| running.borrow_mut().take()).unwrap();
        if let Some(fault) = running.fault {
            return Err(fault);
        }
        match result {
            Ok(value) => Ok(from_lua(value)),
            Err(err) => Err(Fault(format!("script error: {err}"))),
        }
    }
}

fn to_lua(lua: &Lua, reply: Reply) -> mlua::Result<LuaValue> {
    Ok(match reply {
        Reply::Nil => LuaValue::Boolean(false),
        Reply::Int(n) => LuaValue::Number(n as f64),
        Reply::Data(bytes) => LuaValue::String(lua.create_string(&bytes)?),
        Reply::Status => {
            let table = lua.create_table()?;
            table.set("ok", "OK")?;
            LuaValue::Table(table)
        }
        Reply::Array(items) => {
            let table = lua.create_table()?;
            for (i, item) in items.into_iter().enumerate() {
                table.set(i + 1, to_lua(lua, item)?)?;
            }
            LuaValue::Table(table)
        }
    })
}

/// Lua's return value as Redis converts it: numbers truncate to integers,
/// false is a nil reply, a table is an array up to its first nil.
fn from_lua(value: LuaValue) -> Reply {
    match value {
        LuaValue::Nil | LuaValue::Boolean(false) => Reply::Nil,
        LuaValue::Boolean(true) => Reply::Int(1),
        LuaValue::Integer(n) => Reply::Int(n),
        LuaValue::Number(n) => Reply::Int(n as i64),
        LuaValue::String(s) => Reply::Data(s.as_bytes().to_vec()),
        LuaValue::Table(table) => Reply::Array(
            table
                .sequence_values::<LuaValue>()
                .map_while(Result::ok)
                .map(from_lua)
                .collect(),
        ),
        _ => Reply::Nil,
    }
}
