//! One time budget per PHP call. A call into the session module
//! (`session_start()`, `session_write_close()`, `session_regenerate_id()`,
//! `session_create_id()`, ..., and the request's startup and shutdown, where
//! PHP starts a `session.auto_start` session and writes the session last)
//! gets one budget, `timeout` + `read_timeout`, that every hook it runs
//! shares, across the two handlers `session_regenerate_id()` uses: a hook
//! gives up within what the hooks before it left, however many requests,
//! retries and nodes it takes. The budget starts with the call's first
//! request, and only time inside the hooks is spent: the application's code
//! between them is not the cluster's. A hook PHP runs outside such a call is a call of its own; outside
//! any (the watchdog's thread, `rediscluster_session_lock_info()`), each
//! request has a budget of its own.

use std::cell::RefCell;
use std::time::{Duration, Instant};

/// One PHP call's budget. Only time inside its hooks is spent: the
/// application's own time between them (a `SessionHandler` subclass's code,
/// an error handler run by a hook's message) is not the cluster's.
#[derive(Default)]
struct Call {
    /// `timeout` + `read_timeout`, fixed by the call's first request.
    length: Option<Duration>,
    /// Spent by the call's hooks that ended.
    spent: Duration,
    /// Added: time a node spent answering a lock wait, a release's grace.
    granted: Duration,
    /// When the running hook's first request started its clock.
    hook_started: Option<Instant>,
}

thread_local! {
    /// The calls running on this thread, innermost last. A call runs inside
    /// another when the application's error handler, run by a hook's
    /// message, calls a session function.
    static CALLS: RefCell<Vec<Call>> = const { RefCell::new(Vec::new()) };
}

pub fn call_begins() {
    CALLS.with_borrow_mut(|calls| calls.push(Call::default()));
}

pub fn call_ends() {
    CALLS.with_borrow_mut(|calls| calls.pop());
}

/// Runs a hook inside the call that runs it or, outside any, as a call of
/// its own; the time it ran from its first request on is spent.
pub fn hook<T>(body: impl FnOnce() -> T) -> T {
    /// Ends the hook, and its own call, also when it panics.
    struct Hook {
        own_call: bool,
    }
    impl Drop for Hook {
        fn drop(&mut self) {
            CALLS.with_borrow_mut(|calls| {
                if let Some(call) = calls.last_mut()
                    && let Some(started) = call.hook_started.take()
                {
                    call.spent += started.elapsed();
                }
                if self.own_call {
                    calls.pop();
                }
            });
        }
    }
    let own_call = CALLS.with_borrow_mut(|calls| {
        let own_call = calls.is_empty();
        if own_call {
            calls.push(Call::default());
        }
        own_call
    });
    let _hook = Hook { own_call };
    body()
}

/// The end of what is left of the running call's budget (`length` long, as
/// its first request says), counted from the running hook's first request;
/// `None` outside any call.
pub fn end(length: Duration) -> Option<Instant> {
    CALLS.with_borrow_mut(|calls| {
        let call = calls.last_mut()?;
        let length = *call.length.get_or_insert(length);
        let started = *call.hook_started.get_or_insert_with(Instant::now);
        Some(started + (length + call.granted).saturating_sub(call.spent))
    })
}

/// Adds `time` to the running call's budget.
pub fn extend(time: Duration) {
    CALLS.with_borrow_mut(|calls| {
        if let Some(call) = calls.last_mut() {
            call.granted += time;
        }
    });
}

/// Leaves at least `grace` of the running call's budget, from now.
pub fn leave_at_least(grace: Duration) {
    CALLS.with_borrow_mut(|calls| {
        let Some(call) = calls.last_mut() else {
            return;
        };
        let Some(length) = call.length else {
            // No request yet: the whole budget is left.
            return;
        };
        let now = Instant::now();
        let started = *call.hook_started.get_or_insert(now);
        let wanted = (now + grace).saturating_duration_since(started);
        if wanted > (length + call.granted).saturating_sub(call.spent) {
            // What makes length + granted - spent the time wanted.
            call.granted = (call.spent + wanted).saturating_sub(length);
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
    fn only_the_time_inside_hooks_is_spent() {
        request_ended();
        call_begins();
        let first = hook(|| {
            let end = end(SECOND).unwrap();
            std::thread::sleep(SECOND / 10);
            end
        });
        // The application's time between the hooks.
        std::thread::sleep(SECOND / 5);
        let second_started = Instant::now();
        let second = hook(|| end(SECOND).unwrap());
        assert!(
            second >= second_started + SECOND * 8 / 10,
            "{second:?} {first:?}"
        );
        assert!(second < Instant::now() + SECOND * 9 / 10);
        // A grace leaves what a spent budget no longer has.
        let spent = hook(|| {
            std::thread::sleep(SECOND);
            leave_at_least(SECOND / 2);
            end(SECOND).unwrap()
        });
        assert!(spent >= Instant::now() + SECOND * 4 / 10);
        call_ends();
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
