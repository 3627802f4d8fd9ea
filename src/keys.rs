//! Key rules: session ids, the data key, the lock key and Redis Cluster hash slots.

use std::cell::RefCell;
use std::fmt;

/// Longest session id PHP itself accepts (`php_session_valid_key`).
pub const MAX_SID_LEN: usize = 256;
pub const LOCK_SUFFIX: &[u8] = b"_LOCK";
pub const LIFETIME_SUFFIX: &[u8] = b"_LIFETIME";
pub const SLOT_COUNT: u16 = 16384;

#[derive(Debug, PartialEq, Eq)]
pub enum KeyError {
    /// The id is empty or longer than PHP's limit.
    InvalidSessionId,
    /// With locking on, the id has a brace: its lock keys could land on
    /// another slot than its data, or every such id on one slot.
    BracedSessionId,
    /// The prefix has braces that would put the lock key on another slot.
    MalformedPrefix,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::InvalidSessionId => "Session ID is empty or longer than 256 bytes",
            Self::BracedSessionId => {
                "Session ID contains { or }, which with locking on would move its lock to another cluster slot than its data"
            }
            Self::MalformedPrefix => {
                "Cluster session prefix must contain no braces or a non-empty {hash-tag}"
            }
        })
    }
}

impl std::error::Error for KeyError {}

/// Any id PHP passes on (it drops ids with spaces, quotes or control
/// characters itself) and phpredis stores, such as `uniqid('', true)`'s, up to
/// PHP's length limit. With locking on, no braces: the prefix alone decides
/// the lock keys' hash tag.
pub fn check_session_id(sid: &[u8], locking: bool) -> Result<(), KeyError> {
    if sid.is_empty() || sid.len() > MAX_SID_LEN {
        return Err(KeyError::InvalidSessionId);
    }
    if locking && memchr::memchr2(b'{', b'}', sid).is_some() {
        return Err(KeyError::BracedSessionId);
    }
    Ok(())
}

/// The data key, `prefix . sid`, as phpredis stores it.
pub fn session_key(prefix: &[u8], sid: &[u8], locking: bool) -> Result<Vec<u8>, KeyError> {
    check_session_id(sid, locking)?;
    Ok([prefix, sid].concat())
}

/// The lock key, on the data key's slot:
/// no braces: `{key}_LOCK`; a valid non-empty first `{tag}`: `key_LOCK`;
/// any other brace shape is rejected, as in phpredis PR #2836.
pub fn lock_key(session_key: &[u8]) -> Result<Vec<u8>, KeyError> {
    on_the_data_slot(session_key, LOCK_SUFFIX)
}

/// The key of a session's own lifetime (`rediscluster_session_set_lifetime()`),
/// derived as the lock key is: `{key}_LIFETIME`, on the data key's slot.
pub fn lifetime_key(session_key: &[u8]) -> Result<Vec<u8>, KeyError> {
    on_the_data_slot(session_key, LIFETIME_SUFFIX)
}

/// `session_key` with `suffix`, on its slot (see [`lock_key`]).
fn on_the_data_slot(session_key: &[u8], suffix: &[u8]) -> Result<Vec<u8>, KeyError> {
    // `{}` would be an empty tag; data keys always hold a session id anyway.
    if session_key.is_empty() {
        return Err(KeyError::InvalidSessionId);
    }
    // The usual key has no brace at all.
    if memchr::memchr2(b'{', b'}', session_key).is_none() {
        let mut key = Vec::with_capacity(session_key.len() + 2 + suffix.len());
        key.push(b'{');
        key.extend_from_slice(session_key);
        key.push(b'}');
        key.extend_from_slice(suffix);
        return Ok(key);
    }
    match hash_tag(session_key) {
        Some(_) => Ok([session_key, suffix].concat()),
        None => Err(KeyError::MalformedPrefix),
    }
}

/// Every key of one session's lock. All of them carry the lock key's hash
/// tag, so they share the data key's slot, and every script is handed the
/// ones it touches in `KEYS`: no script builds a key name. The keys derived
/// from the lock key, the holder's among them, share one buffer: one
/// allocation, not six, per request.
#[derive(Clone)]
#[cfg_attr(test, derive(Debug, PartialEq, Eq, Hash))]
pub struct LockKeys {
    pub data: Vec<u8>,
    /// `{prefix.sid}_LOCK`: the holder's secret, with the holder's lock TTL.
    pub lock: Vec<u8>,
    /// The queue, waiters, done and lifetime keys, then the holder's list
    /// and heartbeat (see [`Self::hold`]), one after the other.
    derived: Vec<u8>,
    /// Where each of them ends in `derived`.
    ends: [usize; 6],
}

/// What a holder's list adds to the lock key before its secret.
const NEXT_INFIX: &[u8] = b"_NEXT_";
/// What a holder's heartbeat adds to the lock key before its secret.
const BEAT_INFIX: &[u8] = b"_BEAT_";
/// The secrets the lock protocol makes: 16 random bytes as hex digits. Room
/// for a holder's keys with one is made with the others (a longer one grows
/// the buffer).
const SECRET_LEN: usize = 32;

impl LockKeys {
    pub fn new(data_key: &[u8]) -> Result<Self, KeyError> {
        Self::from_data_key(data_key.to_vec())
    }

    /// [`Self::new`] keeping `data_key`, not a copy of it.
    pub fn from_data_key(data_key: Vec<u8>) -> Result<Self, KeyError> {
        let lock = lock_key(&data_key)?;
        // The lifetime key is derived from the lock key too: no second look for braces.
        let tagged = &lock[..lock.len() - LOCK_SUFFIX.len()];
        let parts: [[&[u8]; 2]; 4] = [
            [&lock, b"_FIFO"],
            [&lock, b"_WAITERS"],
            [&lock, DONE_SUFFIX],
            [tagged, LIFETIME_SUFFIX],
        ];
        let holder = 2 * (lock.len() + NEXT_INFIX.len() + SECRET_LEN);
        let mut derived = Vec::with_capacity(4 * lock.len() + 24 + holder);
        let ends = parts.map(|[base, suffix]| {
            derived.extend_from_slice(base);
            derived.extend_from_slice(suffix);
            derived.len()
        });
        let end = derived.len();
        Ok(LockKeys {
            data: data_key,
            lock,
            derived,
            ends: [ends[0], ends[1], ends[2], ends[3], end, end],
        })
    }

    /// Adds the keys of the holder with `secret`, in place of any earlier
    /// holder's: its list ([`Self::own_list`]) and, with `beat`, its
    /// heartbeat ([`Self::own_beat`]).
    pub fn hold(&mut self, secret: &[u8], beat: bool) {
        self.derived.truncate(self.ends[3]);
        self.push_holder_key(NEXT_INFIX, secret);
        self.ends[4] = self.derived.len();
        if beat {
            self.push_holder_key(BEAT_INFIX, secret);
        }
        self.ends[5] = self.derived.len();
    }

    fn push_holder_key(&mut self, infix: &[u8], secret: &[u8]) {
        self.derived.extend_from_slice(&self.lock);
        self.derived.extend_from_slice(infix);
        self.derived.extend_from_slice(secret);
    }

    fn derived(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.derived[start..self.ends[i]]
    }

    /// `<lock>_FIFO`: waiters in order of arrival (sorted set of secrets).
    pub fn queue(&self) -> &[u8] {
        self.derived(0)
    }

    /// `<lock>_WAITERS`: each waiter's terms (hash of secret to "lock ms,
    /// data TTL s, deadline ms"), or "handed <ms> <releaser>" once the lock
    /// went to it.
    pub fn waiters(&self) -> &[u8] {
        self.derived(1)
    }

    /// `<lock>_DONE`: the secrets of the last holders whose save (write,
    /// touch or destroy) landed, newest first, for the lock's TTL: the next
    /// holder's fence, and a repeat's proof after a lost reply.
    pub fn done(&self) -> &[u8] {
        self.derived(2)
    }

    /// `{prefix.sid}_LIFETIME`: the session's own lifetime, if it has one
    /// (see [`lifetime_key`]), with the data key's expiry.
    pub fn lifetime(&self) -> &[u8] {
        self.derived(3)
    }

    /// The holder's list, [`Self::next`] of its secret (see [`Self::hold`];
    /// empty before).
    pub fn own_list(&self) -> &[u8] {
        self.derived(4)
    }

    /// The holder's secret, the end of its list's name (see [`Self::hold`]).
    pub fn own_secret(&self) -> &[u8] {
        let at = self.lock.len() + NEXT_INFIX.len();
        self.own_list().get(at..).unwrap_or_default()
    }

    /// The holder's heartbeat, [`Self::beat`] of its secret, if it has one
    /// (see [`Self::hold`]).
    pub fn own_beat(&self) -> Option<&[u8]> {
        Some(self.derived(5)).filter(|beat| !beat.is_empty())
    }

    /// `<lock>_NEXT_<secret>`: where the holder with this secret pushes the
    /// lock and the data when it hands over; the waiter behind it blocks there.
    pub fn next(&self, secret: &[u8]) -> Vec<u8> {
        [&self.lock[..], NEXT_INFIX, secret].concat()
    }

    /// `<lock>_BEAT_<secret>`: the heartbeat of the holder with this secret,
    /// which its renewals move (see `lock::heartbeat`). Only the holder makes
    /// it, when it takes the lock or queues for it: a lock whose holder has
    /// none (an older release's, a lease of 0) is never broken.
    pub fn beat(&self, secret: &[u8]) -> Vec<u8> {
        beat_key(&self.lock, secret)
    }
}

/// What a lock key's log of savers adds to it (see [`LockKeys::done`]).
const DONE_SUFFIX: &[u8] = b"_DONE";

/// The log of savers of `lock` (see [`LockKeys::done`]), made from the lock
/// key alone, as the watchdog knows it.
pub fn done_key(lock: &[u8]) -> Vec<u8> {
    [lock, DONE_SUFFIX].concat()
}

/// The heartbeat of `lock`'s holder with `secret` (see [`LockKeys::beat`]),
/// made from the lock key alone, as the watchdog knows it.
pub fn beat_key(lock: &[u8], secret: &[u8]) -> Vec<u8> {
    [lock, BEAT_INFIX, secret].concat()
}

/// The bytes Redis hashes for a key with a hash tag: between the first `{`
/// and the first `}` after it, if that is non-empty (Redis `keyHashSlot`).
pub fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    // memchr: every request routes its calls by a key of 40 bytes or so; a
    // lock key of a prefix without braces starts with its tag.
    let open = match key.first() {
        Some(b'{') => 0,
        _ => memchr::memchr(b'{', key)?,
    };
    let len = memchr::memchr(b'}', &key[open + 1..])?;
    (len > 0).then(|| &key[open + 1..open + 1 + len])
}

/// The longest hashed bytes [`hash_slot`] remembers: a session's tag is
/// its prefix and id, far shorter.
const REMEMBERED_TAG_LEN: usize = 512;

thread_local! {
    /// The bytes [`hash_slot`] hashed last, and their slot: every call of a
    /// session routes by its data key or a key tagged with it, the same
    /// bytes, so the CRC runs once per session rather than once per call.
    static LAST_HASHED: RefCell<(Vec<u8>, u16)> = const { RefCell::new((Vec::new(), 0)) };
}

/// The cluster slot of a key: CRC16/XMODEM of its hash tag or of the whole key.
pub fn hash_slot(key: &[u8]) -> u16 {
    let hashed = hash_tag(key).unwrap_or(key);
    if hashed.len() > REMEMBERED_TAG_LEN {
        return crc16_slot(hashed);
    }
    // The empty bytes it starts with hash to slot 0, as remembered.
    LAST_HASHED.with_borrow_mut(|(last, slot)| {
        if last.as_slice() != hashed {
            *slot = crc16_slot(hashed);
            last.clear();
            last.extend_from_slice(hashed);
        }
        *slot
    })
}

fn crc16_slot(hashed: &[u8]) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(hashed) % SLOT_COUNT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_as_php_and_phpredis_take_them() {
        for locking in [false, true] {
            for good in [
                &b"abcXYZ019,-"[..],
                b"x6b0e26251dba55.05814117",
                b"a/b",
                b"\xc3\xa9",
            ] {
                assert!(check_session_id(good, locking).is_ok(), "{good:?}");
            }
            assert!(check_session_id(&[b'a'; MAX_SID_LEN], locking).is_ok());
            assert_eq!(
                check_session_id(b"", locking),
                Err(KeyError::InvalidSessionId)
            );
            assert_eq!(
                check_session_id(&[b'a'; MAX_SID_LEN + 1], locking),
                Err(KeyError::InvalidSessionId)
            );
        }
        for braced in [&b"a{b}"[..], b"}", b"{"] {
            assert!(check_session_id(braced, false).is_ok());
            assert_eq!(
                check_session_id(braced, true),
                Err(KeyError::BracedSessionId)
            );
        }
    }

    #[test]
    fn data_key_is_prefix_and_id() {
        assert_eq!(session_key(b"P:", b"abc", true).unwrap(), b"P:abc");
        assert_eq!(session_key(b"", b"abc", true).unwrap(), b"abc");
        assert_eq!(session_key(b"P:", b"a}c", false).unwrap(), b"P:a}c");
        assert!(session_key(b"P:", b"a}c", true).is_err());
    }

    #[test]
    fn lock_key_shapes() {
        assert_eq!(lock_key(b"P:abc").unwrap(), b"{P:abc}_LOCK");
        assert_eq!(lock_key(b"t:{tenant}:abc").unwrap(), b"t:{tenant}:abc_LOCK");
        assert_eq!(lock_key(b"{x}{}abc").unwrap(), b"{x}{}abc_LOCK");
        for bad in [
            &b"ab{}c:abc"[..],
            b"mal:}xy:abc",
            b"mal:{tenant:abc",
            b"mal:{}:x:{tenant}:a",
        ] {
            assert_eq!(lock_key(bad), Err(KeyError::MalformedPrefix), "{bad:?}");
        }
    }

    #[test]
    fn lifetime_key_is_derived_as_the_lock_key() {
        assert_eq!(lifetime_key(b"P:abc").unwrap(), b"{P:abc}_LIFETIME");
        assert_eq!(
            lifetime_key(b"t:{tenant}:abc").unwrap(),
            b"t:{tenant}:abc_LIFETIME"
        );
        assert_eq!(
            lifetime_key(b"mal:{tenant:abc"),
            Err(KeyError::MalformedPrefix)
        );
        for key in [&b"P:abc"[..], b"t:{tenant}:abc"] {
            assert_eq!(hash_slot(&lifetime_key(key).unwrap()), hash_slot(key));
            assert_eq!(
                LockKeys::new(key).unwrap().lifetime().to_vec(),
                lifetime_key(key).unwrap()
            );
        }
    }

    #[test]
    fn lock_key_shares_the_data_key_slot() {
        for key in [
            &b"PHPREDIS_CLUSTER_SESSION:abc"[..],
            b"t:{tenant}:abc",
            b"x",
        ] {
            assert_eq!(hash_slot(&lock_key(key).unwrap()), hash_slot(key));
        }
    }

    #[test]
    fn every_lock_key_shares_the_data_key_slot() {
        for data_key in [&b"P:abc"[..], b"t:{tenant}:abc"] {
            let mut keys = LockKeys::new(data_key).unwrap();
            keys.hold(b"00ff", true);
            let slot = hash_slot(data_key);
            for key in [
                &keys.lock[..],
                keys.queue(),
                keys.waiters(),
                &keys.next(b"00ff"),
                keys.own_list(),
                keys.own_beat().unwrap(),
            ] {
                assert_eq!(hash_slot(key), slot, "{:?}", String::from_utf8_lossy(key));
            }
        }
        assert_eq!(
            LockKeys::new(b"P:abc").unwrap().queue(),
            b"{P:abc}_LOCK_FIFO"
        );
    }

    #[test]
    fn a_holders_keys_replace_the_last_holders() {
        let mut keys = LockKeys::new(b"P:abc").unwrap();
        let base = keys.clone();
        assert_eq!((keys.own_list(), keys.own_beat()), (&b""[..], None));
        keys.hold(b"00ff", true);
        assert_eq!(keys.own_list(), b"{P:abc}_LOCK_NEXT_00ff");
        assert_eq!(keys.own_list(), keys.next(b"00ff"));
        assert_eq!(keys.own_beat(), Some(&keys.beat(b"00ff")[..]));
        assert_eq!(keys.own_secret(), b"00ff");
        let secret = [b'a'; SECRET_LEN];
        keys.hold(&secret, false);
        assert_eq!(keys.own_list(), keys.next(&secret));
        assert_eq!((keys.own_secret(), keys.own_beat()), (&secret[..], None));
        for (key, was) in [
            (keys.queue(), base.queue()),
            (keys.waiters(), base.waiters()),
            (keys.done(), base.done()),
            (keys.lifetime(), base.lifetime()),
        ] {
            assert_eq!(key, was);
        }
    }

    #[test]
    fn hash_slot_matches_redis_reference_values() {
        // Values from the Redis Cluster spec and `CLUSTER KEYSLOT`.
        assert_eq!(
            crc16::State::<crc16::XMODEM>::calculate(b"123456789"),
            0x31C3
        );
        assert_eq!(hash_slot(b"foo"), 12182);
        assert_eq!(hash_slot(b"{user1000}.following"), hash_slot(b"user1000"));
        assert_eq!(hash_slot(b"foo{}{bar}"), hash_slot(b"foo{}{bar}"));
        assert_eq!(hash_slot(b"foo{{bar}}zap"), hash_slot(b"{bar"));
        // A key that starts with its tag, as lock keys do, and one whose tag is empty.
        assert_eq!(hash_slot(b"{foo}_LOCK"), hash_slot(b"foo"));
        assert_eq!(hash_slot(b"{}foo"), crc16_slot(b"{}foo"));
    }

    #[test]
    fn the_remembered_slot_is_the_last_keys_only() {
        let long = [b'x'; REMEMBERED_TAG_LEN + 1];
        let long_slot = crc16_slot(&long);
        for _ in 0..2 {
            assert_eq!(hash_slot(b""), 0);
            assert_eq!(hash_slot(b"foo"), 12182);
            assert_eq!(hash_slot(b"{foo}_LOCK"), 12182);
            assert_eq!(hash_slot(b"bar"), 5061);
            assert_eq!(hash_slot(&long), long_slot);
            assert_eq!(hash_slot(b"bar"), 5061);
        }
    }
}

/// Property tests; `scripts/test.sh --all` runs a million cases of each, optimised.
#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    /// Session ids as PHP may pass them, braces left out (locking refuses them).
    fn sid() -> impl Strategy<Value = Vec<u8>> {
        let unbraced = any::<u8>().prop_map(|b| if b == b'{' || b == b'}' { b'x' } else { b });
        vec(unbraced, 1..=MAX_SID_LEN)
    }

    /// Prefixes full of braces and arbitrary bytes.
    fn prefix() -> impl Strategy<Value = Vec<u8>> {
        vec(prop_oneof![Just(b'{'), Just(b'}'), any::<u8>()], 0..40)
    }

    proptest! {
        #[test]
        fn fuzz_the_lock_key_stays_on_the_data_key_slot(
            prefix in prefix(),
            sid in sid(),
        ) {
            let key = session_key(&prefix, &sid, true).unwrap();
            match lock_key(&key) {
                Ok(lock) => prop_assert_eq!(hash_slot(&lock), hash_slot(&key)),
                Err(err) => prop_assert_eq!(err, KeyError::MalformedPrefix),
            }
        }

        #[test]
        fn fuzz_only_php_session_ids_make_keys(prefix in prefix(), sid in vec(any::<u8>(), 0..300)) {
            if let Ok(key) = session_key(&prefix, &sid, true) {
                prop_assert!((1..=MAX_SID_LEN).contains(&sid.len()));
                let braced = sid.iter().any(|&b| b == b'{' || b == b'}');
                prop_assert!(!braced);
                prop_assert!(key.ends_with(&sid));
            }
        }
    }
}
