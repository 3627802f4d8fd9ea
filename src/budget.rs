//! One time budget per PHP call. A call into the session module
//! (`session_start()`, `session_write_close()`, `session_regenerate_id()`,
//! `session_create_id()`, ..., and the request's startup and shutdown, where
//! PHP starts a `session.auto_start` session and writes the session last)
//! gets one budget, `timeout` + `read_timeout`, that every hook it runs
//! shares, across the two handlers `session_regenerate_id()` uses: a hook
//! gives up within what the hooks before it left, however many requests,
//! retries and nodes it takes. The budget starts with the call's first
//! request. A hook PHP runs outside such a call is a call of its own; outside
//! any (the watchdog's thread, `rediscluster_session_lock_info()`), each
//! request has a budget of its own.

use std::cell::RefCell;
use std::time::{Duration, Instant};

thread_local! {
    /// The calls running on this thread, innermost last, each with the end
    /// of its budget once its first request started it. A call runs inside
    /// another when the application's error handler, run by a hook's
    /// message, calls a session function.
    static CALLS: RefCell<Vec<Option<Instant>>> = const { RefCell::new(Vec::new()) };
}

pub fn call_begins() {
    CALLS.with_borrow_mut(|calls| calls.push(None));
}

pub fn call_ends() {
    CALLS.with_borrow_mut(|calls| calls.pop());
}

/// Runs a hook inside the call that runs it or, outside any, as a call of
/// its own.
pub fn hook<T>(body: impl FnOnce() -> T) -> T {
    /// Ends the hook's own call, also when it panics.
    struct OwnCall;
    impl Drop for OwnCall {
        fn drop(&mut self) {
            call_ends();
        }
    }
    let _own = CALLS.with_borrow(Vec::is_empty).then(|| {
        call_begins();
        OwnCall
    });
    body()
}

/// The end of the running call's budget, which starts now, `length` long,
/// with its first request; `None` outside any call.
pub fn end(length: Duration) -> Option<Instant> {
    CALLS.with_borrow_mut(|calls| {
        let end = calls.last_mut()?;
        Some(*end.get_or_insert_with(|| Instant::now() + length))
    })
}

/// Adds `time` to the running call's budget.
pub fn extend(time: Duration) {
    CALLS.with_borrow_mut(|calls| {
        if let Some(Some(end)) = calls.last_mut() {
            *end += time;
        }
    });
}

/// Leaves at least `grace` of the running call's budget, from now.
pub fn leave_at_least(grace: Duration) {
    CALLS.with_borrow_mut(|calls| {
        if let Some(Some(end)) = calls.last_mut() {
            *end = (*end).max(Instant::now() + grace);
        }
    });
}

/// The request ended: no call outlives it, not even one a fatal error inside
/// a hook jumped out of.
pub fn request_ended() {
    CALLS.with_borrow_mut(Vec::clear);
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn a_call_shares_one_budget_that_starts_with_its_first_request() {
        request_ended();
        assert_eq!(end(SECOND), None);
        call_begins();
        let before = Instant::now();
        let first = end(SECOND).unwrap();
        assert!(first >= before + SECOND);
        assert_eq!(end(10 * SECOND), Some(first));
        extend(SECOND);
        assert_eq!(end(SECOND), Some(first + SECOND));
        // A grace shorter than what is left changes nothing.
        leave_at_least(SECOND);
        assert_eq!(end(SECOND), Some(first + SECOND));
        call_ends();
        assert_eq!(end(SECOND), None);
    }

    #[test]
    fn a_call_inside_another_has_its_own_and_gives_the_outer_one_back() {
        request_ended();
        call_begins();
        let outer = end(SECOND).unwrap();
        call_begins();
        let inner = end(10 * SECOND).unwrap();
        assert!(inner > outer);
        call_ends();
        assert_eq!(end(SECOND), Some(outer));
        call_ends();
    }

    #[test]
    fn a_spent_budget_leaves_the_grace() {
        request_ended();
        call_begins();
        end(Duration::ZERO);
        let before = Instant::now();
        leave_at_least(SECOND);
        assert!(end(Duration::ZERO).unwrap() >= before + SECOND);
        request_ended();
    }

    #[test]
    fn a_hook_outside_any_call_is_one_of_its_own() {
        request_ended();
        let first = hook(|| end(SECOND).unwrap());
        assert_eq!(end(SECOND), None);
        call_begins();
        let call = end(SECOND).unwrap();
        assert_eq!(hook(|| end(10 * SECOND)), Some(call));
        call_ends();
        assert!(hook(|| end(10 * SECOND).unwrap()) > first);
        // One that panics ends its call too.
        let _ = std::panic::catch_unwind(|| hook(|| panic!("in a hook")));
        assert_eq!(end(SECOND), None);
    }
}
