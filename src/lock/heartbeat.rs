//! A lease judged by the time the server served, not by the server's clock.
//!
//! A holder's watchdog moves its heartbeat every [`LeaseTimes::renew_every`];
//! the lock key itself lives `lock_expire` (the backstop). A waiter breaks
//! the lock only after its own unbroken [`Chain`] of observations spanning
//! [`LeaseTimes::window`] in which the heartbeat never moved: each call
//! answered within [`LeaseTimes::gap`] of its sending and each sent within
//! `gap` of the reply before it, on the waiter's monotonic clock. A primary
//! that stalls for longer than `gap` breaks the chain (the call in flight
//! waits out the stall), so time in which the server did not serve is never
//! counted against the holder: whatever stall a chain does not see is at most
//! 3 × `gap` long, and a live holder's renewals land at least every
//! `renew_every` + 3 × `gap` < `window`. A connection error, a redirect,
//! `CLUSTERDOWN` or a new owner of the slot restarts the chain, and nothing
//! is broken before a window and [`LeaseTimes::grace`] from the next reply,
//! the time a live holder needs to find the new primary, unless the chain
//! sees the heartbeat move.
//!
//! Safety does not rest on these times: a break is a compare-and-set on the
//! holder and the heartbeat the waiter saw, and a holder's write still
//! stores only while the lock holds its secret. The times decide only who
//! waits how long.

use std::time::{Duration, Instant};

/// The times of a lease of `lock_lease_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LeaseTimes {
    /// How long a waiter must see the server serve and the heartbeat stand
    /// still before it breaks the lock: `lock_lease_ms`.
    pub window: Duration,
    /// The holder's watchdog moves its heartbeat this often.
    pub renew_every: Duration,
    /// The longest send-to-reply, and reply-to-next-send, a chain accepts.
    pub gap: Duration,
    /// Added to the window of the first chain after a connection error, a
    /// redirect or a new owner of the slot.
    pub grace: Duration,
}

impl LeaseTimes {
    /// The times of a lease of `window` (`lock_lease_ms`, at least 300 ms):
    /// renewals every third of it, gaps of a tenth, a grace of two windows.
    pub fn of(window: Duration) -> LeaseTimes {
        LeaseTimes {
            window,
            renew_every: window / 3,
            gap: window / 10,
            grace: window * 2,
        }
    }

    /// Whether a live holder's heartbeat moves within every window a chain
    /// can span: the stall a chain cannot see is at most 3 gaps.
    #[cfg(test)]
    pub fn keeps_live_holders(&self) -> bool {
        self.renew_every + self.gap * 3 < self.window
    }
}

/// One waiter's observations of the lock it waits behind, as long as they
/// prove that the server served and the heartbeat `S` stood still.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Chain<S> {
    times: LeaseTimes,
    /// What the chain has seen, and the reply that first showed it.
    seen: Option<(S, Instant)>,
    /// The last reply, whatever it showed: the next call must leave within
    /// a gap of it.
    last_reply: Option<Instant>,
    /// After an interruption, the first reply starts the grace: no break
    /// before a window and the grace after it, until the heartbeat moves.
    graced: bool,
    not_before: Option<Instant>,
}

/// What a waiter does after an observation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Verdict<S> {
    Wait,
    /// Break the lock if it still shows this: the compare of the break.
    Break(S),
}

impl<S: Clone + PartialEq> Chain<S> {
    pub fn new(times: LeaseTimes) -> Chain<S> {
        Chain {
            times,
            seen: None,
            last_reply: None,
            graced: false,
            not_before: None,
        }
    }

    /// The reply to a call sent at `sent` came at `replied` and showed
    /// `seen`: the holder and its heartbeat, or `None` for a lock that
    /// carries no heartbeat (an older release's, a lease of 0), which is
    /// never broken, or no lock at all.
    pub fn observe(&mut self, sent: Instant, replied: Instant, seen: Option<S>) -> Verdict<S> {
        // A call that took longer than a gap may have waited out a stall: it
        // shows nothing about when it was served. One sent longer than a gap
        // after the last reply may follow a stall unseen: it starts anew.
        let quick = replied.saturating_duration_since(sent) <= self.times.gap;
        let paced = self
            .last_reply
            .is_none_or(|last| sent.saturating_duration_since(last) <= self.times.gap);
        self.last_reply = Some(replied);
        if std::mem::take(&mut self.graced) {
            self.not_before = Some(replied + self.times.window + self.times.grace);
        }
        let Some(seen) = seen else {
            self.seen = None;
            return Verdict::Wait;
        };
        if let Some((before, since)) = &self.seen {
            if *before == seen && quick && paced {
                if sent.saturating_duration_since(*since) >= self.times.window
                    && self.not_before.is_none_or(|not_before| sent >= not_before)
                {
                    return Verdict::Break(seen);
                }
                return Verdict::Wait;
            }
            if *before != seen {
                // The heartbeat moved, or another holder: the server serves
                // them, so the grace has done its work.
                self.not_before = None;
            }
        }
        self.seen = quick.then_some((seen, replied));
        Verdict::Wait
    }

    /// The times it judges by.
    pub fn times(&self) -> LeaseTimes {
        self.times
    }

    /// A call failed (a connection error, a redirect, `CLUSTERDOWN`) or the
    /// slot has a new owner: start anew, and break nothing before a window
    /// and the grace from the next reply (the new primary's first).
    pub fn interrupted(&mut self) {
        self.seen = None;
        self.last_reply = None;
        self.graced = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        static EPOCH: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);
        *EPOCH + Duration::from_millis(ms)
    }

    fn times() -> LeaseTimes {
        LeaseTimes::of(Duration::from_millis(1000))
    }

    /// Polls every `every` ms from `from` to `to`, each answered in 1 ms,
    /// always seeing `seen`; the first verdict to break, with its time.
    fn poll(chain: &mut Chain<u8>, from: u64, to: u64, every: u64, seen: u8) -> Option<u64> {
        (from..to)
            .step_by(every as usize)
            .find(|&ms| chain.observe(at(ms), at(ms + 1), Some(seen)) == Verdict::Break(seen))
    }

    #[test]
    fn the_default_times_keep_live_holders() {
        assert!(times().keeps_live_holders());
        assert!(LeaseTimes::of(Duration::from_millis(300)).keeps_live_holders());
    }

    #[test]
    fn a_still_heartbeat_is_broken_after_the_window() {
        let mut chain = Chain::new(times());
        // First seen at 1 (its reply), broken by the call sent 1000 ms later.
        assert_eq!(poll(&mut chain, 0, 3000, 50, 7), Some(1050));
    }

    #[test]
    fn a_moving_heartbeat_is_never_broken() {
        let mut chain = Chain::new(times());
        for beat in 0..10u8 {
            let from = u64::from(beat) * 333;
            assert_eq!(poll(&mut chain, from, from + 333, 50, beat), None);
        }
    }

    #[test]
    fn a_gap_starts_the_chain_anew() {
        let mut chain = Chain::new(times());
        assert_eq!(poll(&mut chain, 0, 900, 50, 7), None);
        // A call that waited out a stall: sent at 900, answered at 1200.
        assert_eq!(chain.observe(at(900), at(1200), Some(7)), Verdict::Wait);
        // The chain starts at the next reply (1201): 1000 ms later.
        assert_eq!(poll(&mut chain, 1200, 3000, 50, 7), Some(2250));
        // A pause between calls longer than a gap does the same.
        let mut chain = Chain::new(times());
        assert_eq!(poll(&mut chain, 0, 900, 50, 7), None);
        assert_eq!(poll(&mut chain, 1100, 3000, 50, 7), Some(2150));
    }

    #[test]
    fn no_heartbeat_is_never_broken() {
        let mut chain = Chain::<u8>::new(times());
        for ms in (0..5000).step_by(50) {
            assert_eq!(chain.observe(at(ms), at(ms + 1), None), Verdict::Wait);
        }
    }

    #[test]
    fn an_interruption_adds_the_grace_until_the_heartbeat_moves() {
        let mut chain = Chain::new(times());
        chain.interrupted();
        assert_eq!(poll(&mut chain, 0, 5000, 50, 7), Some(3050));
        let mut chain = Chain::new(times());
        chain.interrupted();
        assert_eq!(poll(&mut chain, 0, 500, 50, 7), None);
        assert_eq!(poll(&mut chain, 500, 5000, 50, 8), Some(1550));
    }
}
