//! A session's own lifetime (`rediscluster_session_set_lifetime()`), kept in
//! a key of its own beside the data (see [`crate::keys::lifetime_key`]):
//! `S<seconds>`, renewed by every write or touch, or `A<unix ms>`, a fixed
//! end. Never in the data: phpredis reads the raw bytes.

use std::fmt;
use std::time::Duration;

/// The longest lifetime: 400 days, the longest browsers keep a cookie.
pub const MAX_LIFETIME: Duration = Duration::from_secs(400 * 24 * 3600);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lifetime {
    /// Each write or touch renews the whole of it.
    Sliding(Duration),
    /// The session ends at this time (Unix ms), whatever comes in between.
    Until(u64),
}

/// Why `rediscluster_session_set_lifetime()` refused its arguments.
#[derive(Debug, PartialEq, Eq)]
pub enum LifetimeError {
    Negative,
    OverCap,
}

impl fmt::Display for LifetimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Negative => f.write_str("a session lifetime cannot be negative"),
            Self::OverCap => write!(
                f,
                "a session lifetime is at most {} seconds (400 days, the longest browsers keep a cookie)",
                MAX_LIFETIME.as_secs()
            ),
        }
    }
}

impl std::error::Error for LifetimeError {}

impl Lifetime {
    /// What `rediscluster_session_set_lifetime($seconds, $sliding)` asks for
    /// at `now_ms`: `None` for 0 (back to `session.gc_maxlifetime`).
    pub fn requested(
        seconds: i64,
        sliding: bool,
        now_ms: u64,
    ) -> Result<Option<Lifetime>, LifetimeError> {
        let seconds = u64::try_from(seconds).map_err(|_| LifetimeError::Negative)?;
        if seconds > MAX_LIFETIME.as_secs() {
            return Err(LifetimeError::OverCap);
        }
        Ok((seconds > 0).then(|| match sliding {
            true => Lifetime::Sliding(Duration::from_secs(seconds)),
            false => Lifetime::Until(now_ms + seconds * 1000),
        }))
    }

    /// The value stored in the lifetime key.
    pub fn encode(self) -> Vec<u8> {
        match self {
            Lifetime::Sliding(ttl) => format!("S{}", ttl.as_secs()),
            Lifetime::Until(at_ms) => format!("A{at_ms}"),
        }
        .into_bytes()
    }

    /// A stored value; `None` for anything this release did not write.
    pub fn decode(stored: &[u8]) -> Option<Lifetime> {
        let (kind, digits) = stored.split_first()?;
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let number: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
        match kind {
            b'S' if number > 0 && number <= MAX_LIFETIME.as_secs() => {
                Some(Lifetime::Sliding(Duration::from_secs(number)))
            }
            b'A' if number > 0 => Some(Lifetime::Until(number)),
            _ => None,
        }
    }
}

/// Now, in Unix ms, as a fixed end is told.
pub fn unix_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

/// When the data key expires: `Duration` from now, or at a Unix ms time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    After(Duration),
    At(u64),
}

impl Expiry {
    /// The data's expiry for `lifetime`, `ttl` (`session.gc_maxlifetime`) without one.
    pub fn of(lifetime: Option<Lifetime>, ttl: Duration) -> Expiry {
        match lifetime {
            Some(Lifetime::Sliding(own)) => Expiry::After(own),
            Some(Lifetime::Until(at_ms)) => Expiry::At(at_ms),
            None => Expiry::After(ttl),
        }
    }
}

/// What a request's save does with the session's lifetime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The stored one, if any, goes on.
    Keep,
    /// Back to `session.gc_maxlifetime`.
    Drop,
    Set(Lifetime),
}

impl Change {
    /// The lock scripts' argument: '' keeps, '-' drops.
    pub fn script_arg(self) -> Vec<u8> {
        match self {
            Change::Keep => Vec::new(),
            Change::Drop => b"-".to_vec(),
            Change::Set(lifetime) => lifetime.encode(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_checked_and_zero_resets() {
        let now = 1_000_000;
        assert_eq!(
            Lifetime::requested(30 * 86400, true, now),
            Ok(Some(Lifetime::Sliding(Duration::from_secs(30 * 86400))))
        );
        assert_eq!(
            Lifetime::requested(60, false, now),
            Ok(Some(Lifetime::Until(now + 60_000)))
        );
        assert_eq!(Lifetime::requested(0, true, now), Ok(None));
        assert_eq!(
            Lifetime::requested(-1, true, now),
            Err(LifetimeError::Negative)
        );
        let cap = MAX_LIFETIME.as_secs() as i64;
        assert!(Lifetime::requested(cap, false, now).is_ok());
        assert_eq!(
            Lifetime::requested(cap + 1, true, now),
            Err(LifetimeError::OverCap)
        );
    }

    #[test]
    fn stored_values_round_trip_and_strangers_are_ignored() {
        for lifetime in [
            Lifetime::Sliding(Duration::from_secs(1)),
            Lifetime::Sliding(MAX_LIFETIME),
            Lifetime::Until(1_767_225_600_000),
        ] {
            assert_eq!(Lifetime::decode(&lifetime.encode()), Some(lifetime));
        }
        assert_eq!(
            Lifetime::Sliding(Duration::from_secs(86400)).encode(),
            b"S86400"
        );
        for stranger in [
            &b""[..],
            b"S",
            b"S0",
            b"A0",
            b"S-5",
            b"S 5",
            b"X10",
            b"A1e9",
            b"S99999999999",
        ] {
            assert_eq!(Lifetime::decode(stranger), None, "{stranger:?}");
        }
    }
}
