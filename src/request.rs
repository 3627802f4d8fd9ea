//! What a PHP request knows of its sessions between the save handler's hooks,
//! in one type whose methods are the transitions PHP's calls make: a session
//! read, `rediscluster_session_set_lifetime()`, a save, a destroy, a close,
//! `session_regenerate_id()` and the request's end ([`request_end`]). A session's own lifetime
//! belongs to exactly one id: it is asked for the id read last, applied by
//! that id's next save, dropped by a close that did not save it
//! (`session_abort()`), and carried to another id only by
//! `session_regenerate_id()`.
//!
//! One per thread: PHP runs one request at a time on a thread. The worker's
//! own state (whether its next lock is tried with plain commands first) lives
//! here too, kept across requests.

use std::cell::RefCell;

use anyhow::{Result, bail};

use crate::lifetime::{Change, Lifetime, unix_now_ms};

#[derive(Default)]
pub struct Request {
    /// The session read last in this request.
    session: Option<Session>,
    /// `session_regenerate_id()` runs: its save or destroy of the old id
    /// leaves in `carried` what the new id takes over.
    regenerating: bool,
    carried: Option<Change>,
    /// A session was read since `session_regenerate_id()` started: the new id's.
    read_while_regenerating: bool,
    /// The session opened last is served read only (`failover=error`).
    read_only: bool,
    /// The read of the session opened last has not reached `$_SESSION`:
    /// its messages are being raised (the error handler they run may save
    /// the session), or a fatal error in that handler left the read by a
    /// bailout. PHP's writes would store an empty session.
    unread: bool,
    /// The worker's last lock acquisition had to wait: its next one queues
    /// by script at once instead of trying plain `SET NX` first.
    lock_contended: bool,
}

struct Session {
    sid: Vec<u8>,
    /// The lifetime stored for it, as its read found it (unknown, `None`,
    /// for a lock handed over: the lock scripts keep it themselves).
    stored: Option<Lifetime>,
    /// A lifetime key is there that this session does not keep (left
    /// without data, or not this release's): a save deletes it.
    left_over: bool,
    /// Asked for by `rediscluster_session_set_lifetime()`, not saved yet.
    pending: Option<Change>,
    /// Why this session cannot have a lifetime, if it cannot.
    no_lifetime: Option<&'static str>,
}

/// How a session was read, as far as its lifetime goes.
pub enum Read {
    /// Saved by this request: its stored lifetime if known, and whether a
    /// leftover lifetime key waits to be deleted.
    Writable {
        stored: Option<Lifetime>,
        left_over: bool,
    },
    /// It cannot have a lifetime, for this reason.
    NoLifetime(&'static str),
}

/// Why a session whose key has braces outside a hash tag has no lifetime.
pub const BRACES: &str = "a session whose key (prefix and id) has braces outside a hash tag cannot have a lifetime: its lifetime key would be on another slot";
/// Why a session read without its lock (busy) has none.
pub const LOCK_NOT_HELD: &str =
    "the session is read only: its lock is held by another request, which saves it";
/// Why a session served read only has none.
pub const READ_ONLY: &str = "the session is read only: nothing of it will be saved in this request";

impl Request {
    /// PHP read session `sid`. The id `session_regenerate_id()` made takes
    /// what the old one carried; the same id read again (`session_reset()`,
    /// a second `session_start()`) keeps what was asked for it.
    pub fn read(&mut self, sid: &[u8], read: Read) {
        self.read_while_regenerating = self.regenerating;
        let carried = self.carried.take();
        let same = self.session.take().filter(|session| session.sid == sid);
        let (stored, left_over, no_lifetime) = match read {
            Read::Writable { stored, left_over } => (stored, left_over, None),
            Read::NoLifetime(why) => (None, false, Some(why)),
        };
        let pending = carried.or(same.and_then(|session| session.pending));
        self.session = Some(Session {
            sid: sid.to_vec(),
            stored,
            left_over,
            pending: pending.filter(|_| no_lifetime.is_none()),
            no_lifetime,
        });
    }

    /// `rediscluster_session_set_lifetime()`: `change` for the session read
    /// last, from its next save on. The caller checked that one is active.
    pub fn set_lifetime(&mut self, change: Change) -> Result<()> {
        let Some(session) = self.session.as_mut() else {
            bail!("no session of the rediscluster save handler was read in this request");
        };
        if let Some(why) = session.no_lifetime {
            bail!("{why}");
        }
        session.pending = Some(change);
        Ok(())
    }

    fn session(&self, sid: &[u8]) -> Option<&Session> {
        self.session.as_ref().filter(|session| session.sid == sid)
    }

    /// What a save of `sid` does with its lifetime.
    pub fn change(&self, sid: &[u8]) -> Change {
        self.session(sid)
            .and_then(|session| session.pending)
            .unwrap_or(Change::Keep)
    }

    /// Without a lock: the lifetime stored for `sid` as read, and whether a
    /// leftover lifetime key waits to be deleted.
    pub fn stored(&self, sid: &[u8]) -> (Option<Lifetime>, bool) {
        self.session(sid)
            .map_or((None, false), |session| (session.stored, session.left_over))
    }

    /// A save of `sid` landed, with this lifetime.
    pub fn saved(&mut self, sid: &[u8], lifetime: Option<Lifetime>) {
        if let Some(session) = self.session.as_mut().filter(|session| session.sid == sid) {
            (session.stored, session.left_over, session.pending) = (lifetime, false, None);
        }
        if self.regenerating {
            self.carried = lifetime.map(Change::Set);
        }
    }

    /// `sid` was destroyed; it had `had` (`None` also when not known). Its
    /// lifetime goes with it, to the new id only when regenerating.
    pub fn destroyed(&mut self, sid: &[u8], had: Option<Lifetime>) {
        let session = self.session.take_if(|session| session.sid == sid);
        if self.regenerating {
            let (pending, stored) = session.map_or((None, None), |s| (s.pending, s.stored));
            self.carried = match pending {
                Some(Change::Set(lifetime)) => Some(Change::Set(lifetime)),
                Some(Change::Drop) => None,
                Some(Change::Keep) | None => had.or(stored).map(Change::Set),
            };
        }
    }

    /// The handler closed: a lifetime asked for and not saved is dropped
    /// (`session_abort()`), unless `session_regenerate_id()` closes the old
    /// id on its way to the new one.
    pub fn closed(&mut self) {
        if self.regenerating {
            return;
        }
        if let Some(session) = self.session.as_mut() {
            session.pending = None;
        }
    }

    /// `session_regenerate_id()` starts (`true`) or returns (`false`). One
    /// that failed before the new id's read (its old id's save or destroy
    /// failed, or the new id's open) closed the old id without saving it:
    /// what was asked for it goes, as after any such close.
    pub fn regenerating(&mut self, running: bool) {
        let failed = self.regenerating && !running && !self.read_while_regenerating;
        self.regenerating = running;
        self.read_while_regenerating = false;
        self.carried = None;
        if failed {
            self.closed();
        }
    }

    /// The save handler opened a session: it is writable and read in full
    /// until its read says otherwise.
    pub fn opened(&mut self) {
        self.read_only = false;
        self.unread = false;
    }

    pub fn set_read_only(&mut self) {
        self.read_only = true;
    }

    /// The read's messages are being raised (`true`), or were (`false`).
    /// Inside `session_regenerate_id()` `$_SESSION` holds the session (the
    /// new id's read only checks it), so its saves stay.
    pub fn set_unread(&mut self, unread: bool) {
        self.unread = unread && !self.regenerating;
    }

    /// Whether a save of the session opened last would store what PHP never
    /// read.
    pub fn unread(&self) -> bool {
        self.unread
    }

    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// Whether the next lock is tried with plain commands first.
    pub fn lock_plain_first(&self) -> bool {
        !self.lock_contended
    }

    pub fn lock_waited(&mut self, waited: bool) {
        self.lock_contended = waited;
    }

    /// The request ended: the next one starts afresh, in the same worker.
    pub fn ended(&mut self) {
        *self = Request {
            lock_contended: self.lock_contended,
            ..Request::default()
        };
    }
}

thread_local! {
    static REQUEST: RefCell<Request> = RefCell::new(Request::default());
}

/// The steps of php-src's request end (`php_request_shutdown()`) that the
/// extension hooks, in the order PHP runs them. Before them, the functions
/// given to `register_shutdown_function()` and the destructors run: the
/// application may still use its session there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndStep {
    /// Every module's RSHUTDOWN, in reverse order of their startup: this
    /// extension's first (it starts after the session module it depends
    /// on), then the session module's, which writes and closes a session
    /// still active.
    ModuleShutdown,
    /// Every module's post_deactivate, once every RSHUTDOWN has run.
    PostDeactivate,
}

/// The extension's part in step `step` of the request's end. The request's
/// state, the watchdog's leases and the connections of `persistent=0`
/// clusters end only after the session module's final write, which uses
/// them all; the next request then starts afresh.
pub fn request_end(step: EndStep) {
    if step == EndStep::PostDeactivate {
        with(Request::ended);
        crate::budget::request_ended();
        crate::watchdog::request_ended();
        crate::store::request_ended();
    }
}

/// `rediscluster_session_set_lifetime($seconds, $sliding)` for the session
/// read last, from its next write or touch on; 0 goes back to
/// `session.gc_maxlifetime`. The caller checked that a session is active and
/// that this handler serves it.
pub fn set_lifetime(seconds: i64, sliding: bool) -> Result<()> {
    let change = match Lifetime::requested(seconds, sliding, unix_now_ms())? {
        Some(lifetime) => Change::Set(lifetime),
        None => Change::Drop,
    };
    with(|request| request.set_lifetime(change))
}

/// This thread's request state.
pub fn with<T>(f: impl FnOnce(&mut Request) -> T) -> T {
    REQUEST.with_borrow_mut(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const MONTH: Lifetime = Lifetime::Sliding(Duration::from_secs(30 * 86400));

    fn writable(stored: Option<Lifetime>) -> Read {
        Read::Writable {
            stored,
            left_over: false,
        }
    }

    #[test]
    fn a_lifetime_asked_for_applies_to_its_own_id_only() {
        let mut request = Request::default();
        request.read(b"a", writable(None));
        request.set_lifetime(Change::Set(MONTH)).unwrap();
        assert_eq!(request.change(b"a"), Change::Set(MONTH));
        assert_eq!(request.change(b"b"), Change::Keep);
        // session_abort(), then another id: nothing carried.
        request.closed();
        request.read(b"b", writable(None));
        assert_eq!(request.change(b"b"), Change::Keep);
        request.read(b"a", writable(None));
        assert_eq!(request.change(b"a"), Change::Keep);
    }

    #[test]
    fn a_logout_ends_the_lifetime() {
        let mut request = Request::default();
        request.read(b"a", writable(Some(MONTH)));
        request.destroyed(b"a", Some(MONTH));
        request.closed();
        request.read(b"new", writable(None));
        assert_eq!(request.change(b"new"), Change::Keep);
        assert_eq!(request.stored(b"new"), (None, false));
    }

    #[test]
    fn regenerating_carries_the_lifetime_to_the_new_id() {
        // What PHP does to the old id inside session_regenerate_id(), then
        // the new id's read: the new id asks for the month.
        let regenerated = |asked: bool, old_id: &dyn Fn(&mut Request)| {
            let mut request = Request::default();
            request.read(b"a", writable(None));
            if asked {
                request.set_lifetime(Change::Set(MONTH)).unwrap();
            }
            request.regenerating(true);
            old_id(&mut request);
            request.read(b"new", writable(None));
            request.regenerating(false);
            assert_eq!(request.change(b"new"), Change::Set(MONTH));
        };
        // Stored, destroyed with the old id.
        regenerated(false, &|request| {
            request.destroyed(b"a", Some(MONTH));
            request.closed();
        });
        // Asked for, then the old id saved with it.
        regenerated(true, &|request| {
            request.saved(b"a", Some(MONTH));
            request.closed();
        });
        // Asked for, the old id destroyed before it was saved.
        regenerated(true, &|request| request.destroyed(b"a", None));
    }

    #[test]
    fn a_failed_regenerate_drops_what_it_did_not_save() {
        // The old id's save failed (its lock was lost): PHP closes it and
        // returns false; the session started again does not inherit the month.
        let mut request = Request::default();
        request.read(b"a", writable(None));
        request.set_lifetime(Change::Set(MONTH)).unwrap();
        request.regenerating(true);
        request.closed();
        request.regenerating(false);
        request.read(b"a", writable(None));
        assert_eq!(request.change(b"a"), Change::Keep);
    }

    #[test]
    fn a_session_that_cannot_have_a_lifetime_says_why() {
        let mut request = Request::default();
        assert!(request.set_lifetime(Change::Drop).is_err());
        request.read(b"a", Read::NoLifetime(READ_ONLY));
        let err = request.set_lifetime(Change::Drop).unwrap_err();
        assert!(err.to_string().contains("read only"), "{err}");
    }

    #[test]
    fn the_worker_remembers_contention_across_requests() {
        let mut request = Request::default();
        assert!(request.lock_plain_first());
        request.lock_waited(true);
        request.read(b"a", writable(None));
        request.set_read_only();
        request.set_unread(true);
        request.ended();
        assert!(!request.lock_plain_first());
        assert!(!request.read_only());
        assert!(!request.unread());
        assert_eq!(request.change(b"a"), Change::Keep);
    }

    #[test]
    fn a_read_not_in_session_refuses_saves_until_raised_or_the_next_open() {
        let mut request = Request::default();
        request.opened();
        request.set_unread(true);
        assert!(request.unread());
        request.set_unread(false);
        assert!(!request.unread());
        request.set_unread(true);
        request.opened();
        assert!(!request.unread());
        // The new id's read inside session_regenerate_id(): $_SESSION is whole.
        request.regenerating(true);
        request.set_unread(true);
        request.regenerating(false);
        assert!(!request.unread());
    }
}
