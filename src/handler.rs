//! The session save handler's logic, one method per PHP session hook, with the
//! state that lives from `open` to `close`. It knows nothing of PHP: settings
//! come in as [`Settings`] read when the session opens (as PHP reads its own
//! `session.*`), data as bytes, failures go out as errors whose text becomes
//! the PHP warning.

#[cfg(test)]
mod model;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use anyhow::{Result, bail};

use crate::cluster::{ReadFrom, Unreachable};
use crate::config::ConnectionConfig;
use crate::keys;
use crate::lifetime::{Change, Expiry, Lifetime};
use crate::lock::{self, Acquired, HeldLock, Save};
use crate::request::{self, Read, Request};
use crate::save_path::{self, Failover};
use crate::settings::{self, IniSource, Settings};
use crate::stats;
use crate::store::{ClusterStore, LockStore, NodeFull, PrimaryUnreachable, SessionStore};
use crate::watchdog::{self, LeaseView};

/// How many fresh ids `create_sid` tries in strict mode before giving up.
const SID_ATTEMPTS: usize = 3;

pub struct SessionHandler<S> {
    store: S,
    prefix: Rc<[u8]>,
    settings: Settings,
    /// The last read found no data key, so an early refresh refreshed nothing.
    key_missing: bool,
    /// What the last read served read only (`failover=error`, or a lock it
    /// could not get with `lock_failure_readonly`): a write of the same data
    /// changes nothing and is not refused.
    read_only_data: Option<Vec<u8>>,
    /// The session lock, from the read until it is released. Boxed, as the
    /// acquire hands it over: not copied, and the handler, moved at every
    /// open, stays small.
    lock: Option<Box<HeldLock>>,
    /// A read `validate_sid` had to make elsewhere, for `read` to serve.
    fallback_read: Option<FallbackRead>,
    /// For the settings read only when needed.
    ini: &'static dyn IniSource,
    /// Warnings and notices for PHP from the last hook.
    messages: Vec<Message>,
}

/// What `rediscluster_session_lock_info()` shows of a session's lock, and of
/// its data's TTL and own lifetime.
pub struct LockInfo {
    pub locked: bool,
    pub ttl_ms: i64,
    pub waiters: u64,
    /// -2: no session; -1: no TTL.
    pub data_ttl_ms: i64,
    pub lifetime: Option<Lifetime>,
    /// `rediscluster_session.lock_lease_ms`, `None` when off.
    pub lease: Option<Duration>,
    /// The lease of a lock this process holds and renews.
    pub renewing: Option<LeaseView>,
}

pub enum Message {
    Warning(String),
    Notice(String),
}

/// A session read where its primary could not serve it: the key, the data,
/// why and from where.
struct FallbackRead {
    key: Vec<u8>,
    data: Option<Vec<u8>>,
    why: Unreachable,
    from: ReadFrom,
}

/// The error a hook that writes gives for a read-only session.
fn read_only_refusal(what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "Unable to {what}: the session is read only (its primary could not serve it at session_start(), failover=error)"
    )
}

/// The error a hook that saves gives before the session's read reached
/// `$_SESSION` (see [`request::Request::unread`]): saving it would wipe it.
fn unread_refusal(what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "Unable to {what}: the session's data has not reached $_SESSION (session_start() was raising a message, and its error handler saved or died with a fatal error); the stored session is kept as it was"
    )
}

/// The error a hook that saves gives in a process forked from the one that
/// holds the session's lock.
fn forked_refusal(what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "Unable to {what}: its lock belongs to the process this one was forked from (pcntl_fork()), which saves the session; nothing was stored"
    )
}

/// `rediscluster_session.lock_wait_notice_ms`: names the session by a hash,
/// since the id itself would let anyone reading the log take the session over.
fn slow_wait_notice(sid: &[u8], waited: Duration, threshold: Duration) -> String {
    format!(
        "rediscluster: waited {} ms for the lock of session {} (rediscluster_session.lock_wait_notice_ms={})",
        waited.as_millis(),
        session_digest(sid),
        threshold.as_millis()
    )
}

/// A waiter broke the lock of a holder whose heartbeat stood still for the
/// lease `window` of the server's serving: that holder died, or was stopped
/// or cut off from its primary; its save, if it ever comes, stores nothing.
fn broke_lock_warning(sid: &[u8], window: Duration) -> String {
    format!(
        "rediscluster: took over the lock of session {}: its holder's heartbeat stood still for {} ms while the server served (rediscluster_session.lock_lease_ms); a save of that holder stores nothing",
        session_digest(sid),
        window.as_millis()
    )
}

/// A session named in the log by the first 12 hex digits of its id's SHA-256.
fn session_digest(sid: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, sid);
    let hex: String = digest.as_ref()[..6]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// A write or touch found the lock no longer ours: it stored nothing.
fn lock_lost() -> Result<()> {
    stats::write_refused_lock_lost();
    bail!("Session lock expired")
}

/// A save_path's text, its key prefix, its cluster and its `failover`.
type OpenedPath = (String, Rc<[u8]>, Rc<ConnectionConfig>, Failover);

thread_local! {
    /// The last save_path opened, parsed: a worker opens the same one on every
    /// request, so it is parsed once and its config shared, not copied.
    static LAST_OPENED: RefCell<Option<OpenedPath>> = const { RefCell::new(None) };
}

impl SessionHandler<ClusterStore> {
    /// Parses the save_path; the cluster is contacted on first use.
    pub fn open<I: IniSource>(save_path: &str, ini: &'static I) -> Result<Self> {
        let mut notice = None;
        let (prefix, config, failover) = LAST_OPENED.with_borrow_mut(|last| -> Result<_> {
            if let Some((text, prefix, config, failover)) = last.as_ref()
                && text == save_path
            {
                return Ok((prefix.clone(), config.clone(), *failover));
            }
            let path = save_path::parse(save_path)?;
            let config = Rc::new(ConnectionConfig::from(&path));
            let prefix: Rc<[u8]> = path.prefix.into();
            if path.failover == Failover::Distribute {
                notice = Some(Message::Notice(
                    "rediscluster: failover=distribute and distribute_slaves act as failover=error: a session is read from a replica only when its primary cannot serve it".into(),
                ));
            }
            *last = Some((save_path.to_owned(), prefix.clone(), config.clone(), path.failover));
            Ok((prefix, config, path.failover))
        })?;
        let settings = ini.batch(|ini| Settings::load(ini, failover));
        let mut store = ClusterStore::new(config);
        // validate_sid or create_sid, then read, may fall back.
        store.set_may_fall_back(settings.may_fall_back);
        let mut handler = Self::with_store(store, prefix, settings, ini);
        handler.messages.extend(notice);
        Ok(handler)
    }

    /// Whether the session's lock is held, for how much longer and how many
    /// wait for it; never the secret or the data.
    pub fn lock_info(&self, sid: &[u8]) -> Result<LockInfo> {
        let keys = keys::LockKeys::new(&keys::session_key(&self.prefix, sid, true)?)?;
        let state = self.store.lock_state(&keys)?;
        Ok(LockInfo {
            locked: state.lock_ttl_ms != -2,
            ttl_ms: state.lock_ttl_ms.max(0),
            waiters: state.waiters,
            data_ttl_ms: state.data_ttl_ms,
            // One its data outlived is a leftover: the next read drops it.
            lifetime: state
                .lifetime
                .filter(|_| state.data_ttl_ms != -2)
                .as_deref()
                .and_then(Lifetime::decode),
            lease: self.settings.lock.as_ref().and_then(|lock| lock.lease),
            renewing: watchdog::lease_of(&keys.lock),
        })
    }

    /// `session_reset()` opens again without closing. The lock the previous
    /// handler holds comes over when both use the same cluster and prefix, so
    /// the session stays ours; otherwise it is released.
    pub fn take_over(&mut self, mut previous: Self) -> Result<()> {
        match previous.lock.take() {
            Some(held)
                if previous.prefix == self.prefix && previous.store.same_cluster(&self.store) =>
            {
                self.lock = Some(held);
                Ok(())
            }
            Some(held) => lock::release(&mut previous.store, &held).map(drop),
            None => Ok(()),
        }
    }
}

impl<S: SessionStore + LockStore> SessionHandler<S> {
    pub fn with_store(
        store: S,
        prefix: impl Into<Rc<[u8]>>,
        settings: Settings,
        ini: &'static dyn IniSource,
    ) -> Self {
        let messages = settings
            .compression_notice
            .map(|notice| Message::Notice(notice.to_owned()))
            .into_iter()
            .collect();
        SessionHandler {
            store,
            prefix: prefix.into(),
            settings,
            key_missing: false,
            read_only_data: None,
            lock: None,
            fallback_read: None,
            ini,
            messages,
        }
    }

    /// The handler as it stands with `lock` held: the lock model's forked
    /// children start from their parent's.
    #[cfg(test)]
    pub(crate) fn with_lock(mut self, lock: HeldLock) -> Self {
        self.lock = Some(Box::new(lock));
        self
    }

    /// A clamped `session.gc_maxlifetime` gets phpredis's notice in the hooks
    /// that store data, once per read and once per write.
    fn notice_clamped_ttl(&mut self) {
        if let Some(notice) = self.settings.ttl_notice {
            self.messages.push(Message::Notice(notice.to_owned()));
        }
    }

    /// Warnings and notices the last hook left for PHP.
    pub fn take_messages(&mut self) -> Vec<Message> {
        std::mem::take(&mut self.messages)
    }

    fn key(&self, sid: &[u8]) -> Result<Vec<u8>> {
        Ok(keys::session_key(
            &self.prefix,
            sid,
            self.settings.lock.is_some(),
        )?)
    }

    /// The session data; a missing session is empty data, not an error. With
    /// locking on, the lock is taken first and the data read under it. With
    /// `failover=error`, a session its primary cannot serve is read elsewhere
    /// and served read-only.
    pub fn read(&mut self, sid: &[u8]) -> Result<Vec<u8>> {
        self.notice_clamped_ttl();
        let key = self.key(sid)?;
        let data = match self.fallback_read.take().filter(|read| read.key == key) {
            Some(read) => self.serve_read_only(sid, read),
            None => match self.read_from_primary(sid, key) {
                Err(err) => {
                    // The key went to the lock's keys: made again, on this rare path.
                    let read = self.read_elsewhere(self.key(sid)?, err)?;
                    self.serve_read_only(sid, read)
                }
                Ok(data) => data,
            },
        };
        self.key_missing = data.is_none();
        let data = self
            .settings
            .compression
            .decompress(data.unwrap_or_default());
        let lock_not_held = self.settings.lock.is_some() && self.lock.is_none();
        self.read_only_data = (self.read_only() || lock_not_held).then(|| data.clone());
        Ok(data)
    }

    /// `failover=error`: when `err` says the primary could not serve `key`,
    /// reads it where it still can be; otherwise, or when nowhere can, the
    /// request fails.
    fn read_elsewhere(&mut self, key: Vec<u8>, err: anyhow::Error) -> Result<FallbackRead> {
        let Some(why) = err
            .downcast_ref::<PrimaryUnreachable>()
            .filter(|_| self.settings.may_fall_back)
            .map(|unreachable| unreachable.why)
        else {
            return Err(err);
        };
        let max_lag = settings::fallback_max_lag(self.ini);
        match self
            .store
            .read_fallback(&key, why == Unreachable::ClusterDown, max_lag)
        {
            Ok((data, from)) => Ok(FallbackRead {
                key,
                data,
                why,
                from,
            }),
            Err(fallback_err) => bail!("{err}; failover=error: {fallback_err}"),
        }
    }

    /// The session read elsewhere, from now on read only, with a warning.
    fn serve_read_only(&mut self, sid: &[u8], read: FallbackRead) -> Option<Vec<u8>> {
        request::with(|request| {
            request.set_read_only();
            request.read(sid, Read::NoLifetime(request::READ_ONLY));
        });
        let from = match read.from {
            ReadFrom::Primary => "its primary, without a lock",
            ReadFrom::Replica => "a replica",
        };
        self.messages.push(Message::Warning(format!(
            "Session {} is read only: its primary could not serve it ({}), so it was read from {from} (failover=error)",
            session_digest(sid),
            read.why.reason(),
        )));
        read.data
    }

    /// The session data from its primary, under the lock when locking is on.
    fn read_from_primary(&mut self, sid: &[u8], key: Vec<u8>) -> Result<Option<Vec<u8>>> {
        let settings = &self.settings;
        let refresh = settings.early_refresh.then_some(settings.session_ttl);
        // A lock taken over from a re-open for another id is not this one's.
        if let Some(held) = self.lock.take_if(|held| held.keys.data != key) {
            lock::release(&mut self.store, &held)?;
        }
        let Some(lock_settings) = settings.lock.as_ref().filter(|_| self.lock.is_none()) else {
            return self.read_unlocked(sid, &key, refresh);
        };
        let plain_first = request::with(|request| request.lock_plain_first());
        let (acquired, waited) = lock::acquire_and_read(
            &mut self.store,
            keys::LockKeys::from_data_key(key)?,
            lock_settings,
            refresh,
            plain_first,
        )?;
        request::with(|request| request.lock_waited(!waited.is_zero()));
        if let Some(threshold) = lock_settings.wait_notice.filter(|&t| waited > t) {
            self.messages
                .push(Message::Notice(slow_wait_notice(sid, waited, threshold)));
        }
        let (data, warning) = match acquired {
            Acquired::Locked(held, data) => {
                if let Some(window) = held.broke {
                    self.messages
                        .push(Message::Warning(broke_lock_warning(sid, window)));
                }
                if let Err(err) = lock::watch(&self.store, &held) {
                    // Without renewals its heartbeat would stand still: it
                    // goes, and no waiter breaks the lock (as with lease 0).
                    let dropped = held
                        .heartbeat()
                        .is_none_or(|beat| self.store.delete(&[beat]).is_ok());
                    self.messages.push(Message::Warning(format!(
                        "rediscluster: no watchdog to renew the lock's lease ({err}): {}",
                        if dropped {
                            "no waiter breaks the lock, which lasts redis.session.lock_expire and a lease"
                        } else {
                            "a waiter may take it over after rediscluster_session.lock_lease_ms"
                        }
                    )));
                }
                let stored = held.lifetime;
                request::with(|request| {
                    let left_over = false;
                    request.read(sid, Read::Writable { stored, left_over })
                });
                self.lock = Some(held);
                return Ok(data);
            }
            Acquired::Busy(_) if !lock_settings.failure_readonly => {
                bail!("Failed to acquire session lock")
            }
            Acquired::Busy(data) => (
                data,
                "Failed to acquire session lock, session will be read only".to_owned(),
            ),
            Acquired::Rejected(data, waiting) => {
                let cap = lock_settings.max_waiters.unwrap_or(0);
                let text = format!(
                    "Session {} already has {waiting} waiters for its lock (rediscluster_session.max_waiters={cap})",
                    session_digest(sid)
                );
                if !lock_settings.failure_readonly {
                    bail!(text);
                }
                (data, format!("{text}, session will be read only"))
            }
        };
        self.messages.push(Message::Warning(warning));
        request::with(|request| request.read(sid, Read::NoLifetime(request::LOCK_NOT_HELD)));
        Ok(data)
    }

    /// The data without a lock, and its own lifetime in the same round trip.
    fn read_unlocked(
        &mut self,
        sid: &[u8],
        key: &[u8],
        refresh: Option<Duration>,
    ) -> Result<Option<Vec<u8>>> {
        let Ok(lifetime_key) = keys::lifetime_key(key) else {
            request::with(|request| request.read(sid, Read::NoLifetime(request::BRACES)));
            return self.store.get(key, refresh);
        };
        let (data, stored) = match refresh {
            // GETEX would renew by gc_maxlifetime: the script renews by the session's own lifetime.
            Some(ttl) => lock::read_and_renew(&mut self.store, key, &lifetime_key, ttl)?,
            None => self.store.get_with_lifetime(key, &lifetime_key)?,
        };
        // A lifetime its data outlived is not the session's: phpredis's destroy leaves it.
        let lifetime = stored
            .as_deref()
            .and_then(Lifetime::decode)
            .filter(|_| data.is_some());
        let left_over = stored.is_some() && lifetime.is_none();
        let stored = lifetime;
        request::with(|request| request.read(sid, Read::Writable { stored, left_over }));
        Ok(data)
    }

    /// A lock this process inherited from the one it was forked from
    /// (`pcntl_fork()`) is that process's to save and release: it is let go
    /// of here without a call. Whether there was one.
    fn inherited_lock(&mut self) -> bool {
        self.lock.take_if(|held| held.inherited()).is_some()
    }

    /// Stores the data. With locking on, only while our lock is still held,
    /// atomically, and the lock is released in the same call: PHP always
    /// closes right after its final write.
    pub fn write(&mut self, sid: &[u8], data: &[u8]) -> Result<()> {
        if request::with(|request| request.unread()) {
            return Err(unread_refusal("write session"));
        }
        // PHP writes an empty session without comparing it with the read
        // (lazy_write compares only a non-empty one).
        if self.read_only_data.as_deref() == Some(data) {
            return Ok(());
        }
        if self.read_only() {
            return Err(read_only_refusal("write session"));
        }
        if self.inherited_lock() {
            return Err(forked_refusal("write session"));
        }
        self.store.set_may_fall_back(false);
        self.notice_clamped_ttl();
        let key = self.key(sid)?;
        let compression = self.settings.compression;
        let data = &compression.compress(data);
        match self.save_locked(Save::Write, sid, &key, data)? {
            Some(true) => Ok(()),
            Some(false) => lock_lost(),
            None if self.settings.lock.is_some() => {
                bail!("Unable to write session: session lock not held")
            }
            None if self.keeps_a_lifetime(sid) => self.store_with_lifetime(sid, &key, data),
            None => match self.settings.replica_ack {
                Some(ack) => {
                    let acked = self
                        .store
                        .set_acked(&key, data, self.settings.session_ttl, ack)?;
                    lock::check_replicas(lock::STORED, ack, acked)
                }
                None => self.store.set(&key, data, self.settings.session_ttl),
            },
        }
    }

    fn read_only(&self) -> bool {
        request::with(|request| request.read_only())
    }

    /// Without a lock: whether this save sets, keeps or drops a lifetime key
    /// (the session has one, the request asked for one, or one is left over).
    fn keeps_a_lifetime(&self, sid: &[u8]) -> bool {
        request::with(|request| {
            let (stored, left_over) = request.stored(sid);
            // A lifetime dropped is deleted even if the read found none: unlocked,
            // another request (a forked child) may have set one since.
            stored.is_some() || left_over || !matches!(request.change(sid), Change::Keep)
        })
    }

    /// Without a lock: the data and its lifetime key, with the expiry of the
    /// lifetime this save keeps or sets (`gc_maxlifetime` without one).
    fn store_with_lifetime(&mut self, sid: &[u8], key: &[u8], data: &[u8]) -> Result<()> {
        let lifetime = request::with(|request| match request.change(sid) {
            Change::Set(lifetime) => Some(lifetime),
            Change::Drop => None,
            Change::Keep => request.stored(sid).0,
        });
        let lifetime_key = keys::lifetime_key(key)?;
        let expiry = Expiry::of(lifetime, self.settings.session_ttl);
        let value = lifetime.map(Lifetime::encode);
        let ack = self.settings.replica_ack;
        let acked = self.store.set_with_lifetime(
            key,
            data,
            expiry,
            (&lifetime_key, value.as_deref()),
            ack,
        )?;
        request::with(|request| request.saved(sid, lifetime));
        match (ack, acked) {
            (Some(ack), Some(acked)) => lock::check_replicas(lock::STORED, ack, acked),
            _ => Ok(()),
        }
    }

    /// Saves under our lock and releases it in the same call: `None` when no
    /// lock on `key` is held, else whether it was still ours. Either way close
    /// has nothing left to release; after a transport error it still does.
    fn save_locked(
        &mut self,
        save: Save,
        sid: &[u8],
        key: &[u8],
        data: &[u8],
    ) -> Result<Option<bool>> {
        let Some(held) = self.lock.as_ref().filter(|held| held.keys.data == key) else {
            return Ok(None);
        };
        let (ttl, ack) = (self.settings.session_ttl, self.settings.replica_ack);
        let change = request::with(|request| request.change(sid));
        let released = lock::save_and_release(&mut self.store, save, held, data, ttl, change, ack)?;
        self.lock = None;
        if released.ours {
            request::with(|request| request.saved(sid, released.lifetime));
        }
        Ok(Some(released.ours))
    }

    /// `session.lazy_write` with unchanged data: refresh the TTL only, unless
    /// the read already did (early_refresh: always without a lock, by the
    /// lock script only with one, see [`HeldLock::renewed`]), by the
    /// session's own lifetime; rewrite the data if the key is gone (only
    /// under our lock when locking is on). A held lock is released in the
    /// same call; one lost meanwhile warns as in [`Self::write`].
    /// A read-only session's is skipped: its data did not change, and its
    /// primary could not serve it a moment ago (or another request holds its
    /// lock and saves it).
    pub fn update_timestamp(&mut self, sid: &[u8], data: &[u8]) -> Result<()> {
        if request::with(|request| request.unread()) {
            return Err(unread_refusal("update session timestamp"));
        }
        if self.read_only() || self.inherited_lock() {
            return Ok(());
        }
        self.store.set_may_fall_back(false);
        let key = self.key(sid)?;
        let change = request::with(|request| request.change(sid));
        let compression = self.settings.compression;
        if self.lock.is_some() {
            // Renewed by the read, unless this request changes the lifetime.
            let renewed = self
                .lock
                .take_if(|held| held.renewed && held.keys.data == key && change == Change::Keep);
            let ours = match renewed {
                Some(held) => Some(lock::release(&mut self.store, &held)?),
                None => self.save_locked(Save::Touch, sid, &key, &compression.compress(data))?,
            };
            // A lock lost meanwhile warns as a write's does.
            return match ours {
                Some(false) => lock_lost(),
                _ => Ok(()),
            };
        }
        if self.settings.lock.is_some() {
            // Busy when read: its holder saves it.
            return Ok(());
        }
        if self.keeps_a_lifetime(sid) {
            // Renewed by the lifetime, unless this request changes it: then the data is stored anew.
            if let (Change::Keep, (Some(lifetime), false)) =
                (change, request::with(|request| request.stored(sid)))
            {
                let lifetime_key = keys::lifetime_key(&key)?;
                let expiry = Expiry::of(Some(lifetime), self.settings.session_ttl);
                if self
                    .store
                    .expire_with_lifetime(&key, &lifetime_key, expiry)?
                {
                    return Ok(());
                }
            }
            return self.store_with_lifetime(sid, &key, &compression.compress(data));
        }
        if self.settings.early_refresh && !self.key_missing {
            return Ok(());
        }
        let ttl = self.settings.session_ttl;
        // Compressed only when the key is gone: usually the TTL is all that changes.
        if !self.store.expire(&key, ttl)? {
            self.store.set(&key, &compression.compress(data), ttl)?;
        }
        Ok(())
    }

    /// Strict mode: whether a session with this id exists. Ids PHP would not
    /// have generated are simply unknown.
    /// With `failover=error`, a session its primary cannot tell of is looked
    /// up where it can be read, and that read serves `read`.
    pub fn validate_sid(&mut self, sid: &[u8]) -> Result<bool> {
        let Ok(key) = self.key(sid) else {
            return Ok(false);
        };
        match self.store.exists(&key) {
            Err(err) => {
                let read = self.read_elsewhere(key, err)?;
                let exists = read.data.is_some();
                self.fallback_read = Some(read);
                Ok(exists)
            }
            exists => exists,
        }
    }

    /// A new id from PHP's generator (`generate`). In strict mode it must be
    /// unused; nothing is stored to reserve it, so no orphan keys are left.
    /// A read-only session gets none: `session_regenerate_id()` fails.
    /// With `failover=error`, when the primary cannot tell, the new id is
    /// served read-only as the session `read` finds elsewhere: it is new, so
    /// empty (a primary already found unreachable is not asked again).
    pub fn create_sid(&mut self, mut generate: impl FnMut() -> Result<Vec<u8>>) -> Result<Vec<u8>> {
        if self.read_only() {
            return Err(read_only_refusal("create a new session id"));
        }
        if !self.settings.use_strict_mode {
            return generate();
        }
        if let Some(unknown) = self.fallback_read.take() {
            let sid = generate()?;
            let key = self.key(&sid)?;
            let data = None;
            self.fallback_read = Some(FallbackRead {
                key,
                data,
                ..unknown
            });
            return Ok(sid);
        }
        for _ in 0..SID_ATTEMPTS {
            let sid = generate()?;
            let key = self.key(&sid)?;
            match self.store.exists(&key) {
                Ok(false) => return Ok(sid),
                Ok(true) => continue,
                Err(err) => {
                    let read = self.read_elsewhere(key, err)?;
                    self.fallback_read = Some(read);
                    return Ok(sid);
                }
            }
        }
        bail!("Could not create an unused session id in {SID_ATTEMPTS} attempts")
    }

    /// Deletes the session, and releases our lock in the same call. With
    /// `write_replicas`, fails unless that many replicas have the deletion.
    pub fn destroy(&mut self, sid: &[u8]) -> Result<()> {
        // session_regenerate_id(true) would store the empty $_SESSION under the new id.
        if request::with(|request| request.unread()) {
            return Err(unread_refusal("destroy session"));
        }
        if self.read_only() {
            return Err(read_only_refusal("destroy session"));
        }
        if self.inherited_lock() {
            return Err(forked_refusal("destroy session"));
        }
        self.store.set_may_fall_back(false);
        let key = self.key(sid)?;
        let ack = self.settings.replica_ack;
        let (had, acked) = match self.lock.as_ref().filter(|held| held.keys.data == key) {
            Some(held) => {
                let (released, acked) = lock::destroy_and_release(&mut self.store, held, ack)?;
                self.lock = None;
                if !released.ours {
                    return lock_lost();
                }
                (released.lifetime, acked)
            }
            // Another request holds it (this one was served read-only after
            // waiting): deleting under it would let its write bring the
            // session back, so the logout would not hold.
            None if self.settings.lock.is_some() => {
                bail!("Unable to destroy session: session lock not held")
            }
            None => {
                let lifetime_key = keys::lifetime_key(&key).ok();
                let keys: Vec<&[u8]> = [Some(key.as_slice()), lifetime_key.as_deref()]
                    .into_iter()
                    .flatten()
                    .collect();
                let acked = match ack {
                    Some(ack) => Some(self.store.delete_acked(&keys, ack)?),
                    None => self.store.delete(&keys).map(|()| None)?,
                };
                (None, acked)
            }
        };
        request::with(|request| request.destroyed(sid, had));
        match (ack, acked) {
            (Some(ack), Some(acked)) => lock::check_replicas(lock::DESTROYED, ack, acked),
            _ => Ok(()),
        }
    }

    /// Releases a lock that no write released: session_abort(),
    /// read_and_close, a write that failed in transit, a fatal error. A
    /// lifetime asked for and not saved goes with it.
    pub fn close(&mut self) -> Result<()> {
        request::with(Request::closed);
        if self.inherited_lock() {
            return Ok(());
        }
        self.store.set_may_fall_back(false);
        let released = match self.lock.take() {
            Some(held) => {
                // A write that failed before, in the same PHP call, may have spent its budget.
                self.store.leave_grace_for_release();
                // Unleased, a lock not released lives `lock_expire`: worth
                // the close's whole budget even at a node at maxclients that
                // kept the write waiting. Leased, it lapses within a lease.
                if held.lease().is_none() {
                    self.store.wait_for_full_nodes();
                }
                lock::release(&mut self.store, &held)
                    .map(drop)
                    .map_err(|err| match err.downcast_ref::<NodeFull>() {
                        // The release did not reach the primary: what ends the lock instead.
                        Some(_) => anyhow::anyhow!(
                            "{err}; if the session lock is still held, {}",
                            held.lapse()
                        ),
                        None => err,
                    })
            }
            None => Ok(()),
        };
        self.store.session_closed();
        released
    }
}
