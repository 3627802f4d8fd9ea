//! The handler's request state, checked as a state machine: random sequences
//! of PHP's session calls over a few ids and requests, each turned into the
//! hooks PHP's session module calls for it (as `ext/session/session.c` does),
//! drive the real [`SessionHandler`] and [`crate::request`] state over the
//! lock protocol's real Lua scripts on an in-memory node (the model checker's
//! server, see [`Node`]). A request ends with php-src's steps in its order
//! (`php_request_shutdown()`): the shutdown functions' calls, the
//! extension's RSHUTDOWN, the session module's (its write and close), then
//! the extension's post_deactivate, each of the extension's steps the one
//! its module registers ([`request::request_end`]). After every call an
//! oracle written from PHP's semantics and
//! the rules of docs/configuration.md and docs/locking.md says what each
//! session must hold:
//!
//! - nothing is refused that a holder was entitled to do (every hook
//!   succeeds), and nothing is acknowledged that is not stored (the data is
//!   the oracle's);
//! - a lifetime belongs to exactly one id: the one read last when it was
//!   asked for, or the id `session_regenerate_id()` made from it;
//! - the data's TTL follows its own lifetime, or `gc_maxlifetime` without
//!   one, on every path (locked or not, `early_refresh`, `lazy_write`), and
//!   the lifetime key expires with it.
//!
//! Not here: `session_reset()` (its hand-over of the handler is the cluster
//! store's), `pcntl_fork()` (the lock model runs this handler's rule in its
//! forked children; `060-fork-lock.phpt`),
//! concurrency and failures (the lock model), the clock (`056`, `059`).

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use proptest::prelude::*;

use super::SessionHandler;
use crate::keys::{self, LockKeys};
use crate::lifetime::{Change, Lifetime, unix_now_ms};
use crate::lock::model::node::{Ini, Node};
use crate::request::{self, EndStep};
use crate::save_path::Failover;
use crate::settings::Settings;

const GC_MAXLIFETIME: u64 = 1440;
const PREFIX: &[u8] = b"PHPREDIS_SESSION:";

/// How a test case's requests run.
#[derive(Clone, Copy, Debug)]
struct Mode {
    locking: bool,
    early_refresh: bool,
    lazy_write: bool,
}

/// A PHP call, in the request that runs it.
#[derive(Clone, Debug)]
enum Call {
    /// `session_id(ids[id])` (or none: a new visitor) and `session_start()`.
    Start {
        id: Option<usize>,
        read_and_close: bool,
    },
    /// `$_SESSION['n']++`.
    Change,
    /// `rediscluster_session_set_lifetime()`.
    SetLifetime(Pick),
    WriteClose,
    Abort,
    Destroy,
    Regenerate {
        delete_old: bool,
    },
    /// The request ends (normally, by `exit()`, an uncaught exception or a
    /// fatal error: php-src ends it the same way), after these calls made
    /// by the functions given to `register_shutdown_function()`.
    EndRequest {
        shutdown: Vec<Call>,
    },
}

#[derive(Clone, Copy, Debug)]
enum Pick {
    Day,
    Month,
    /// Two hours from now, whatever comes in between.
    Fixed,
    Reset,
}

/// What PHP and the oracle know between calls.
#[derive(Default)]
struct Php {
    /// Ids made so far (index 0..3 are given ones, then PHP's).
    ids: Vec<Vec<u8>>,
    /// The active session: its id, `$_SESSION` and what was read.
    active: Option<(Vec<u8>, u64, u64)>,
    handler: Option<SessionHandler<Node>>,
    /// The oracle: each id's stored counter and lifetime.
    stored: BTreeMap<Vec<u8>, (u64, Option<Lifetime>)>,
    /// The lifetime asked for the active session, not saved yet.
    pending: Option<Change>,
    next_id: u32,
}

struct Checker {
    node: Node,
    ini: &'static Ini,
    mode: Mode,
}

fn counter(data: &[u8]) -> u64 {
    std::str::from_utf8(data)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(0)
}

impl Checker {
    fn new(mode: Mode) -> Self {
        let Ini(mut map) = Ini::defaults();
        map.insert(c"session.gc_maxlifetime", GC_MAXLIFETIME.to_string());
        map.insert(
            c"redis.session.locking_enabled",
            u8::from(mode.locking).to_string(),
        );
        map.insert(
            c"redis.session.early_refresh",
            u8::from(mode.early_refresh).to_string(),
        );
        map.insert(c"redis.session.lock_retries", "1".into());
        map.insert(c"redis.session.lock_wait_time", "1000".into());
        let ini: &'static Ini = Box::leak(Box::new(Ini(map)));
        Checker {
            node: Node::wall_clock(),
            ini,
            mode,
        }
    }

    fn open(&self) -> SessionHandler<Node> {
        let settings = Settings::load(self.ini, Failover::None);
        SessionHandler::with_store(self.node.clone(), PREFIX, settings, self.ini)
    }

    fn new_id(php: &mut Php) -> Vec<u8> {
        php.next_id += 1;
        let id = format!("new{}", php.next_id).into_bytes();
        php.ids.push(id.clone());
        id
    }

    /// What `read` gives PHP, and the oracle's lifetime for a session read.
    fn read(&self, php: &mut Php, sid: &[u8]) -> Result<()> {
        let handler = php.handler.as_mut().expect("open");
        let data = handler.read(sid)?;
        let read = counter(&data);
        let expected = php.stored.get(sid).map_or(0, |(n, _)| *n);
        if read != expected {
            bail!("read {read} from {sid:?}, stored {expected}");
        }
        php.active = Some((sid.to_vec(), read, read));
        Ok(())
    }

    /// PHP's save of the active session at a close: write, or touch when
    /// unchanged with lazy_write; the oracle applies it.
    fn save(&self, php: &mut Php, always_write: bool) -> Result<()> {
        let (sid, now, was) = php.active.clone().expect("active");
        let handler = php.handler.as_mut().expect("open");
        let data = now.to_string();
        if self.mode.lazy_write && now == was && !always_write {
            handler.update_timestamp(&sid, data.as_bytes())?;
        } else {
            handler.write(&sid, data.as_bytes())?;
        }
        let kept = php.stored.get(&sid).and_then(|(_, lifetime)| *lifetime);
        let lifetime = match php.pending.take() {
            Some(Change::Set(lifetime)) => Some(lifetime),
            Some(Change::Drop) => None,
            Some(Change::Keep) | None => kept,
        };
        php.stored.insert(sid, (now, lifetime));
        Ok(())
    }

    fn close(&self, php: &mut Php) -> Result<()> {
        php.pending = None;
        php.active = None;
        php.handler.take().expect("open").close()
    }

    /// Runs one call as PHP's session module does.
    fn run(&self, php: &mut Php, call: &Call) -> Result<()> {
        let active = php.active.is_some();
        match call {
            // "Ignoring session_start() because a session is already active".
            Call::Start { .. } if active => Ok(()),
            Call::Start { id, read_and_close } => {
                php.handler = Some(self.open());
                let sid = match id {
                    Some(id) => php.ids[*id].clone(),
                    None => {
                        let made = Self::new_id(php);
                        php.handler
                            .as_mut()
                            .unwrap()
                            .create_sid(|| Ok(made.clone()))?
                    }
                };
                self.read(php, &sid)?;
                if *read_and_close {
                    self.close(php)?;
                }
                Ok(())
            }
            // php_request_shutdown()'s steps, in its order.
            Call::EndRequest { shutdown } => {
                for call in shutdown {
                    self.run(php, call)?;
                }
                request::request_end(EndStep::ModuleShutdown);
                // The session module's RSHUTDOWN.
                if php.active.is_some() {
                    self.save(php, false)?;
                    self.close(php)?;
                }
                request::request_end(EndStep::PostDeactivate);
                Ok(())
            }
            // No active session: PHP calls no hook.
            _ if !active => Ok(()),
            Call::Change => {
                php.active.as_mut().unwrap().1 += 1;
                Ok(())
            }
            Call::SetLifetime(pick) => {
                let (seconds, sliding) = match pick {
                    Pick::Day => (86_400, true),
                    Pick::Month => (30 * 86_400, true),
                    Pick::Fixed => (7200, false),
                    Pick::Reset => (0, true),
                };
                let before = unix_now_ms();
                request::set_lifetime(seconds, sliding)?;
                // A fixed end is counted from the clock at the call: any
                // millisecond it lasted (one apart failed 1 run in 60).
                let (sid, ..) = php.active.as_ref().unwrap();
                let asked = request::with(|request| request.change(sid));
                let fits = (before..=unix_now_ms()).any(|now| {
                    let change = Lifetime::requested(seconds, sliding, now)
                        .map(|lifetime| lifetime.map_or(Change::Drop, Change::Set));
                    change.is_ok_and(|change| change == asked)
                });
                if !fits {
                    bail!("set_lifetime({seconds}, {sliding}) asked for {asked:?}");
                }
                php.pending = Some(asked);
                Ok(())
            }
            Call::WriteClose => {
                self.save(php, false)?;
                self.close(php)
            }
            Call::Abort => self.close(php),
            Call::Destroy => {
                let (sid, ..) = php.active.clone().unwrap();
                php.handler.as_mut().unwrap().destroy(&sid)?;
                php.stored.remove(&sid);
                self.close(php)
            }
            Call::Regenerate { delete_old } => {
                let (sid, now, _) = php.active.clone().unwrap();
                request::with(|request| request.regenerating(true));
                let result = self.regenerate(php, &sid, *delete_old);
                request::with(|request| request.regenerating(false));
                result?;
                php.active.as_mut().unwrap().1 = now;
                Ok(())
            }
        }
    }

    /// `session_regenerate_id()`: the old id destroyed or written (always a
    /// write), closed; a new one made and read; its lifetime the old one's.
    fn regenerate(&self, php: &mut Php, sid: &[u8], delete_old: bool) -> Result<()> {
        let carried = if delete_old {
            let had = php.stored.remove(sid).and_then(|(_, lifetime)| lifetime);
            php.handler.as_mut().unwrap().destroy(sid)?;
            match php.pending.take() {
                Some(Change::Set(lifetime)) => Some(lifetime),
                Some(Change::Drop) => None,
                Some(Change::Keep) | None => had,
            }
        } else {
            self.save(php, true)?;
            php.stored[sid].1
        };
        php.handler.take().unwrap().close()?;
        php.handler = Some(self.open());
        let made = Self::new_id(php);
        let new = php
            .handler
            .as_mut()
            .unwrap()
            .create_sid(|| Ok(made.clone()))?;
        self.read(php, &new)?;
        php.pending = carried.map(Change::Set);
        Ok(())
    }

    /// Every id's keys against the oracle.
    fn check(&self, php: &Php) -> Result<()> {
        let server = self.node.server();
        let now = unix_now_ms() as i64;
        for sid in &php.ids {
            let key = keys::session_key(PREFIX, sid, self.mode.locking)?;
            let lifetime_key = keys::lifetime_key(&key)?;
            if php.active.is_none()
                && self.mode.locking
                && server.get_str(&LockKeys::new(&key)?.lock).is_some()
            {
                bail!("{sid:?}'s lock is left after its session closed");
            }
            let data = server.get_str(&key).map(counter);
            let expected = php.stored.get(sid);
            if data != expected.map(|(n, _)| *n) {
                bail!("{sid:?} holds {data:?}, the oracle {expected:?}");
            }
            let Some((_, lifetime)) = expected else {
                if server.get_str(&lifetime_key).is_some() {
                    bail!("{sid:?} is gone but its lifetime key is not");
                }
                continue;
            };
            let at = server.ttl_of(&key).flatten().unwrap_or(i64::MAX);
            let (want, slack) = match lifetime {
                Some(Lifetime::Sliding(ttl)) => (now + ttl.as_millis() as i64, 5000),
                Some(Lifetime::Until(end)) => (*end as i64, 0),
                None => (now + 1000 * GC_MAXLIFETIME as i64, 5000),
            };
            if (at - want).abs() > slack {
                bail!(
                    "{sid:?} expires in {} ms, its lifetime {lifetime:?} says {} ms",
                    at - now,
                    want - now
                );
            }
            let stored = server.get_str(&lifetime_key).map(<[u8]>::to_vec);
            if stored != lifetime.map(Lifetime::encode) {
                bail!("{sid:?}'s lifetime key holds {stored:?}, the oracle {lifetime:?}");
            }
            if stored.is_some() && server.ttl_of(&lifetime_key).flatten() != Some(at) {
                bail!("{sid:?}'s lifetime key expires apart from its data");
            }
        }
        Ok(())
    }
}

/// A call within a request: any but its end.
fn call_in_request() -> impl Strategy<Value = Call> + Clone {
    let pick = prop_oneof![
        Just(Pick::Day),
        Just(Pick::Month),
        Just(Pick::Fixed),
        Just(Pick::Reset)
    ];
    prop_oneof![
        3 => (proptest::option::weighted(0.8, 0..3usize), any::<bool>())
            .prop_map(|(id, rac)| Call::Start { id, read_and_close: rac && id.is_some() }),
        2 => Just(Call::Change),
        2 => pick.prop_map(Call::SetLifetime),
        2 => Just(Call::WriteClose),
        1 => Just(Call::Abort),
        1 => Just(Call::Destroy),
        1 => any::<bool>().prop_map(|delete_old| Call::Regenerate { delete_old }),
    ]
}

fn call() -> impl Strategy<Value = Call> {
    let shutdown = proptest::collection::vec(call_in_request(), 0..3);
    prop_oneof![
        12 => call_in_request(),
        2 => shutdown.prop_map(|shutdown| Call::EndRequest { shutdown }),
    ]
}

fn mode() -> impl Strategy<Value = Mode> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
        |(locking, early_refresh, lazy_write)| Mode {
            locking,
            early_refresh,
            lazy_write,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 5000, ..ProptestConfig::default() })]

    #[test]
    fn request_state_follows_php_and_the_readme(mode in mode(), calls in proptest::collection::vec(call(), 1..24)) {
        request::with(request::Request::ended);
        let checker = Checker::new(mode);
        let mut php = Php {
            ids: vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()],
            ..Php::default()
        };
        for (step, call) in calls.iter().enumerate() {
            let outcome = checker.run(&mut php, call).and_then(|()| checker.check(&php));
            prop_assert!(outcome.is_ok(), "step {step}, {call:?}: {:#}", outcome.unwrap_err());
        }
    }
}
