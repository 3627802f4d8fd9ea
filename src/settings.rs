//! Settings read from PHP's INI when a session opens, so `ini_set()` applies
//! from the next `session_start()`. The names and defaults are phpredis's
//! `redis.session.*`, plus this extension's own `rediscluster_session.*`.

use std::ffi::CStr;
use std::time::Duration;

use crate::compression::Compression;
use crate::save_path::Failover;

/// Every directive with its default: phpredis's `redis.session.*` (registered
/// by this extension unless phpredis already did; then its values apply) and
/// this extension's own.
pub const INI_DEFAULTS: [(&CStr, &CStr); 15] = [
    (c"redis.session.locking_enabled", c"0"),
    (c"redis.session.lock_expire", c"0"),
    (c"redis.session.lock_wait_time", c"20000"),
    (c"redis.session.lock_retries", c"100"),
    (c"redis.session.lock_failure_readonly", c"0"),
    (c"redis.session.lock_release_cmd", c"eval"),
    (c"redis.session.early_refresh", c"0"),
    (c"redis.session.compression", c"none"),
    (c"redis.session.compression_level", c"3"),
    (c"rediscluster_session.write_replicas", c"0"),
    (c"rediscluster_session.write_replicas_timeout", c"100"),
    (c"rediscluster_session.lock_wait_notice_ms", c"0"),
    (c"rediscluster_session.max_waiters", c"0"),
    // A dead holder gives way within about a second (bench/lease-death.sh)
    // while a live one on 2 busy cores kept every lock (bench/lease-soak.sh).
    (c"rediscluster_session.lock_lease_ms", c"1000"),
    (c"rediscluster_session.fallback_max_lag", c"10"),
];

/// Session TTL used when `session.gc_maxlifetime` is not positive (phpredis).
const FALLBACK_TTL_SECS: i64 = 1440;
/// Lock TTL when both `lock_expire` and `max_execution_time` are 0 (the CLI):
/// phpredis would create a lock that never expires; a crashed process must not
/// lock a session forever.
pub const FALLBACK_LOCK_TTL: Duration = Duration::from_secs(30);

/// The longest lock TTL: a day. Longer ones (up to i64::MAX seconds) would
/// overflow the server's expiry arithmetic and fail every request.
pub const MAX_LOCK_TTL_SECS: u64 = 86_400;
/// The shortest `lock_lease_ms`: renewed every 100 ms.
pub const MIN_LEASE_MS: u64 = 300;
/// The shortest `lock_wait_time`, in µs.
const MIN_LOCK_WAIT_MICROS: i64 = 1_000;

/// The directives whose default here wins over the one their module
/// registered, where the user set none: Debian 12's phpredis 5.3 registers
/// 2000 µs × 10 (20 ms of waiting, so every queued request fails), phpredis 6
/// and this extension 20000 × 100.
pub const OWN_DEFAULTS_WIN: [&CStr; 2] = [
    c"redis.session.lock_wait_time",
    c"redis.session.lock_retries",
];

/// Where the value of one of [`OWN_DEFAULTS_WIN`] comes from, as PHP's INI
/// records it (php-src 8.2: Zend/zend_ini.c, main/php_ini.c,
/// sapi/fpm/fpm/fpm_main.c and fpm_php.c).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// PHP's configuration hash: php.ini, conf.d, `-d`. Startup gave the
    /// entry this value.
    Configuration,
    /// `zend_alter_ini_entry_ex` marked the entry modified for this request:
    /// `ini_set()`, `.user.ini`, php.ini's `[PATH=]`/`[HOST=]` sections,
    /// Apache's `php_value`/`php_admin_value`/`.htaccess`.
    Altered,
    /// Unmarked, but not startup's string: php-fpm writes its pool's
    /// `php_value`/`php_admin_value` and a FastCGI `PHP_VALUE` straight into
    /// the entry (`fpm_php_zend_ini_alter_master`), as a new string that is
    /// not interned, for the worker's life.
    Written,
    /// The value its module registered: nobody set it.
    Registered,
}

/// Where the value a directive of [`OWN_DEFAULTS_WIN`] has for the handler
/// comes from, for phpinfo() and `rediscluster_session_lock_wait()`.
#[derive(Debug)]
pub struct WaitSource {
    pub name: &'static CStr,
    /// The directive's value for the handler: the user's, or this extension's
    /// default (before the rules of [`LockSettings`]: 0 for the default, a floor).
    pub value: i64,
    pub origin: Origin,
    /// What the directive's module registered; `None` where php.ini's value
    /// replaced it at startup.
    pub registered: Option<i64>,
    pub by_phpredis: bool,
}

impl WaitSource {
    /// `value` is the directive's, which gives way to this extension's
    /// default where nobody set it.
    pub fn new(
        name: &'static CStr,
        origin: Origin,
        value: i64,
        registered: Option<i64>,
        by_phpredis: bool,
    ) -> Self {
        let value = match origin {
            Origin::Registered => INI_DEFAULTS
                .iter()
                .find(|(known, _)| *known == name)
                .map_or(0, |(_, default)| ini_long(default.to_bytes())),
            _ => value,
        };
        WaitSource {
            name,
            value,
            origin,
            registered,
            by_phpredis,
        }
    }

    /// phpredis registered another value, which nobody set: this extension's
    /// default replaced it.
    pub fn overridden(&self) -> bool {
        self.origin == Origin::Registered && self.by_phpredis && self.registered != Some(self.value)
    }

    pub fn origin_name(&self) -> &'static str {
        match self.origin {
            Origin::Configuration => "php.ini",
            Origin::Altered => "runtime",
            Origin::Written => "php-fpm",
            Origin::Registered => "default",
        }
    }

    pub fn registered_by(&self) -> &'static str {
        if self.by_phpredis {
            "phpredis"
        } else {
            "rediscluster_session"
        }
    }

    /// The value and why, as phpinfo() shows it.
    pub fn describe(&self) -> String {
        let why = match self.origin {
            Origin::Configuration => "set in php.ini, conf.d or -d".to_owned(),
            Origin::Altered => "set for this request (ini_set(), .user.ini, a [PATH=] or [HOST=] section, or the web server's php_value)".to_owned(),
            Origin::Written => "set by php-fpm (the pool's php_value or php_admin_value, or a FastCGI PHP_VALUE, which the worker keeps for its later requests)".to_owned(),
            Origin::Registered if self.overridden() => format!(
                "this extension's default, not the {} phpredis registered (set the directive to choose)",
                self.registered.unwrap_or_default()
            ),
            Origin::Registered if self.by_phpredis => {
                "this extension's default (phpredis registered the same)".to_owned()
            }
            Origin::Registered => "this extension's default".to_owned(),
        };
        format!("{}: {why}", self.value)
    }
}

/// Where settings come from: PHP's INI in the extension, a map in tests.
pub trait IniSource {
    /// The value as PHP's `INI_INT` reads it (0 when unset or not a number).
    fn long(&self, name: &CStr) -> i64;
    /// The value as a string, `None` when the directive does not exist.
    fn string(&self, name: &CStr) -> Option<String>;
    /// `read` of [`string`](Self::string)'s value, lent rather than copied
    /// where the source can: every session's open reads two strings.
    fn read_string(&self, name: &CStr, read: &mut dyn FnMut(Option<&str>)) {
        read(self.string(name).as_deref());
    }
    /// [`long`](Self::long) where the user set the directive, `None` while it
    /// holds the default its module registered (asked only of
    /// [`OWN_DEFAULTS_WIN`]). A map holds only what was set.
    fn user_long(&self, name: &CStr) -> Option<i64> {
        Some(self.long(name))
    }
    /// Runs `load`, which reads many directives, with reads that share
    /// their lookups (PHP's: one thread-local access for all of an open's).
    fn batch<T>(&self, load: impl FnOnce(&dyn IniSource) -> T) -> T
    where
        Self: Sized,
    {
        load(self)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReleaseCommand {
    Eval,
    Delex,
    Delifeq,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LockSettings {
    pub ttl: Duration,
    /// How long one attempt waits for a hand-over (or sleeps, under 1 ms).
    pub wait: Duration,
    /// Attempts after the first; `None` waits forever.
    pub retries: Option<u64>,
    pub failure_readonly: bool,
    pub release: ReleaseCommand,
    /// Waits longer than this get an E_NOTICE; `None` when off.
    pub wait_notice: Option<Duration>,
    /// A request finding this many already waiting for the lock does not
    /// queue; `None` for no cap.
    pub max_waiters: Option<u32>,
    /// The lock key's lease, renewed while the request lives and never past
    /// `ttl` from the take; `None`: the lock lives for `ttl` (lease 0).
    pub lease: Option<Duration>,
}

impl LockSettings {
    /// The longest anyone waits for the lock: `lock_retries` × `lock_wait_time`,
    /// `None` for ever (and when the product overflows).
    pub fn total_wait(&self) -> Option<Duration> {
        let retries = u32::try_from(self.retries?).unwrap_or(u32::MAX);
        self.wait.checked_mul(retries)
    }

    /// The longest wait, as phpinfo() shows it.
    pub fn describe_total_wait(&self) -> String {
        let wait = self.wait.as_micros();
        match (self.total_wait(), self.retries) {
            (Some(total), Some(retries)) => {
                format!("{} ms ({retries} retries × {wait} µs)", total.as_millis())
            }
            _ => format!("no limit (retries × {wait} µs, for ever)"),
        }
    }
}

/// A write counts only once this many replicas have it (Redis `WAIT`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReplicaAck {
    pub replicas: u32,
    pub timeout: Duration,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// TTL of the data key, from `session.gc_maxlifetime`.
    pub session_ttl: Duration,
    /// Why `session.gc_maxlifetime` was clamped, for an E_NOTICE.
    pub ttl_notice: Option<&'static str>,
    pub early_refresh: bool,
    pub use_strict_mode: bool,
    /// `None` when `redis.session.locking_enabled` is off.
    pub lock: Option<LockSettings>,
    pub compression: Compression,
    /// Why the configured compression was turned off, for an E_NOTICE.
    pub compression_notice: Option<&'static str>,
    /// `None` unless `rediscluster_session.write_replicas` is positive.
    pub replica_ack: Option<ReplicaAck>,
    /// `failover=error` (or `distribute`): a session its primary cannot
    /// serve is read elsewhere (see [`fallback_max_lag`]).
    pub may_fall_back: bool,
}

/// `rediscluster_session.fallback_max_lag`: a replica whose link to its
/// primary has been down longer is not read from (it may miss a logout).
/// Read only when a session falls back: an INI read costs every warm
/// request about 1% of its instructions.
pub fn fallback_max_lag(ini: &dyn IniSource) -> Duration {
    Duration::from_secs(
        ini.long(c"rediscluster_session.fallback_max_lag")
            .max(0)
            .unsigned_abs(),
    )
}

impl Settings {
    /// The settings for a session whose save_path says `failover`.
    pub fn load(ini: &(impl IniSource + ?Sized), failover: Failover) -> Self {
        let (session_ttl, ttl_notice) = clamp_session_ttl(ini.long(c"session.gc_maxlifetime"));
        let level = ini.long(c"redis.session.compression_level");
        let mut compression = (Compression::None, None);
        ini.read_string(c"redis.session.compression", &mut |name| {
            compression = Compression::from_ini(name.unwrap_or_default(), level);
        });
        let (compression, compression_notice) = compression;
        let flag = |name: &CStr| ini.long(name) != 0;
        Settings {
            session_ttl,
            ttl_notice,
            early_refresh: flag(c"redis.session.early_refresh"),
            use_strict_mode: flag(c"session.use_strict_mode"),
            lock: flag(c"redis.session.locking_enabled").then(|| LockSettings::load(ini)),
            replica_ack: u32::try_from(ini.long(c"rediscluster_session.write_replicas"))
                .ok()
                .filter(|&replicas| replicas > 0)
                .map(|replicas| ReplicaAck {
                    replicas,
                    // WAIT 0 would wait forever: at least 1 ms.
                    timeout: Duration::from_millis(
                        ini.long(c"rediscluster_session.write_replicas_timeout")
                            .max(1)
                            .unsigned_abs(),
                    ),
                }),
            compression,
            compression_notice,
            may_fall_back: failover != Failover::None,
        }
    }
}

impl LockSettings {
    pub fn load(ini: &(impl IniSource + ?Sized)) -> Self {
        let expire = match ini.long(c"redis.session.lock_expire") {
            0 => ini.long(c"max_execution_time"),
            seconds => seconds,
        };
        // Not set by the user, OWN_DEFAULTS_WIN take 0's meaning: the default here.
        let own = |name| ini.user_long(name).unwrap_or(0);
        // Under 1 ms (or negative) would poll the server in a tight loop.
        let wait = match own(c"redis.session.lock_wait_time") {
            0 => 20_000,
            micros => micros.max(MIN_LOCK_WAIT_MICROS),
        };
        let retries = match own(c"redis.session.lock_retries") {
            0 => Some(100),
            n if n < 0 => None,
            n => Some(n.unsigned_abs()),
        };
        let mut release = ReleaseCommand::Eval;
        ini.read_string(c"redis.session.lock_release_cmd", &mut |cmd| {
            release = match cmd.unwrap_or_default() {
                cmd if cmd.eq_ignore_ascii_case("delex") => ReleaseCommand::Delex,
                cmd if cmd.eq_ignore_ascii_case("delifeq") => ReleaseCommand::Delifeq,
                _ => ReleaseCommand::Eval,
            };
        });
        LockSettings {
            ttl: u64::try_from(expire)
                .ok()
                .filter(|&s| s > 0)
                .map_or(FALLBACK_LOCK_TTL, |s| {
                    Duration::from_secs(s.min(MAX_LOCK_TTL_SECS))
                }),
            wait: Duration::from_micros(wait.unsigned_abs()),
            retries,
            failure_readonly: ini.long(c"redis.session.lock_failure_readonly") != 0,
            release,
            wait_notice: u64::try_from(ini.long(c"rediscluster_session.lock_wait_notice_ms"))
                .ok()
                .filter(|&ms| ms > 0)
                .map(Duration::from_millis),
            max_waiters: u32::try_from(ini.long(c"rediscluster_session.max_waiters"))
                .ok()
                .filter(|&cap| cap > 0),
            // At least MIN_LEASE_MS: a lease of a few ms lapses before its
            // first renewal and floods the primary with renewals. No longer
            // than the longest lock: the clock arithmetic stays in range.
            lease: u64::try_from(ini.long(c"rediscluster_session.lock_lease_ms"))
                .ok()
                .filter(|&ms| ms > 0)
                .map(|ms| Duration::from_millis(ms.clamp(MIN_LEASE_MS, MAX_LOCK_TTL_SECS * 1000))),
        }
    }
}

/// An INI value as PHP's `INI_INT` reads it: C's `strtol(text, NULL, 0)`
/// (leading spaces, a sign, `0x` hex, `0` octal, digits up to the first
/// other byte; saturated on overflow).
pub fn ini_long(text: &[u8]) -> i64 {
    // The usual values, 0 or a few decimal digits (not octal), in a quick
    // pass: every open reads about 16 of them.
    match text {
        [] | [b'0'] => return 0,
        [first @ b'1'..=b'9', rest @ ..]
            if rest.len() < 18 && rest.iter().all(u8::is_ascii_digit) =>
        {
            let digits = rest.iter().map(|&digit| i64::from(digit - b'0'));
            return digits.fold(i64::from(first - b'0'), |number, digit| number * 10 + digit);
        }
        _ => {}
    }
    let text = text.trim_ascii_start();
    let (negative, text) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = match text {
        [b'0', b'x' | b'X', next, ..] if next.is_ascii_hexdigit() => (16, &text[2..]),
        [b'0', ..] => (8, text),
        _ => (10, text),
    };
    let limit = if negative {
        i64::MIN.unsigned_abs()
    } else {
        i64::MAX.unsigned_abs()
    };
    let mut magnitude: u64 = 0;
    for &byte in digits {
        let Some(digit) = char::from(byte).to_digit(radix) else {
            break;
        };
        magnitude = magnitude
            .saturating_mul(u64::from(radix))
            .saturating_add(u64::from(digit))
            .min(limit);
    }
    if negative {
        0i64.checked_sub_unsigned(magnitude).unwrap_or(i64::MIN)
    } else {
        i64::try_from(magnitude).unwrap_or(i64::MAX)
    }
}

/// phpredis's `session_gc_maxlifetime()`: at most INT_MAX, and 1440 s when
/// not positive, each with its notice.
pub fn clamp_session_ttl(gc_maxlifetime: i64) -> (Duration, Option<&'static str>) {
    let (secs, notice) = if gc_maxlifetime > i64::from(i32::MAX) {
        (
            i64::from(i32::MAX),
            Some("session.gc_maxlifetime overflows INT_MAX, truncating."),
        )
    } else if gc_maxlifetime <= 0 {
        (
            FALLBACK_TTL_SECS,
            Some("session.gc_maxlifetime is <= 0, defaulting to 1440 seconds"),
        )
    } else {
        (gc_maxlifetime, None)
    };
    (Duration::from_secs(secs.unsigned_abs()), notice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ini_long_reads_numbers_as_c_strtol_does() {
        unsafe extern "C" {
            fn strtol(text: *const std::ffi::c_char, end: *mut *mut u8, base: i32) -> i64;
        }
        let texts = [
            "",
            "0",
            "42",
            "1000",
            "999999999999999999",
            "1000000000000000000",
            "-42",
            "+7",
            "  12abc",
            "0x1F",
            "0X",
            "0xg",
            "010",
            "09",
            "-0x10",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999999",
            "\t\n 5",
            "abc",
            "1e3",
            "- 5",
        ];
        for text in texts {
            let c_text = std::ffi::CString::new(text).unwrap();
            // SAFETY: a NUL-terminated string; no end pointer.
            let expected = unsafe { strtol(c_text.as_ptr(), std::ptr::null_mut(), 0) };
            assert_eq!(ini_long(text.as_bytes()), expected, "{text:?}");
        }
    }
    use std::collections::HashMap;

    struct Ini(HashMap<&'static CStr, &'static str>);

    impl IniSource for Ini {
        fn long(&self, name: &CStr) -> i64 {
            self.string(name).and_then(|v| v.parse().ok()).unwrap_or(0)
        }
        fn string(&self, name: &CStr) -> Option<String> {
            self.0.get(name).map(|v| (*v).to_owned())
        }
    }

    fn ini(overrides: &[(&'static CStr, &'static str)]) -> Ini {
        let mut map: HashMap<_, _> = INI_DEFAULTS
            .iter()
            .map(|(k, v)| (*k, v.to_str().unwrap()))
            .collect();
        map.insert(c"session.gc_maxlifetime", "1440");
        map.extend(overrides.iter().copied());
        Ini(map)
    }

    #[test]
    fn ttl_is_clamped_like_phpredis() {
        assert_eq!(clamp_session_ttl(600), (Duration::from_secs(600), None));
        assert_eq!(clamp_session_ttl(0).0, Duration::from_secs(1440));
        assert_eq!(clamp_session_ttl(-5).0, Duration::from_secs(1440));
        assert!(clamp_session_ttl(0).1.unwrap().contains("<= 0"));
        let (ttl, notice) = clamp_session_ttl(i64::from(i32::MAX) + 1);
        assert_eq!(ttl, Duration::from_secs(i32::MAX as u64));
        assert!(notice.unwrap().contains("INT_MAX"));
    }

    #[test]
    fn replica_acks_are_opt_in_and_never_wait_forever() {
        assert_eq!(Settings::load(&ini(&[]), Failover::None).replica_ack, None);
        let settings = Settings::load(
            &ini(&[
                (c"rediscluster_session.write_replicas", "1"),
                (c"rediscluster_session.write_replicas_timeout", "0"),
            ]),
            Failover::None,
        );
        assert_eq!(
            settings.replica_ack,
            Some(ReplicaAck {
                replicas: 1,
                timeout: Duration::from_millis(1)
            })
        );
    }

    #[test]
    fn fallback_max_lag_is_seconds_never_negative() {
        let lag =
            |value| fallback_max_lag(&ini(&[(c"rediscluster_session.fallback_max_lag", value)]));
        assert_eq!(fallback_max_lag(&ini(&[])), Duration::from_secs(10));
        assert_eq!(lag("3"), Duration::from_secs(3));
        assert_eq!(lag("-1"), Duration::ZERO);
        let falls_back = |failover| Settings::load(&ini(&[]), failover).may_fall_back;
        assert!(falls_back(Failover::Error) && falls_back(Failover::Distribute));
        assert!(!falls_back(Failover::None));
    }

    #[test]
    fn defaults_leave_locking_off() {
        let settings = Settings::load(&ini(&[]), Failover::None);
        assert_eq!(settings.lock, None);
        assert!(!settings.early_refresh);
        assert_eq!(settings.session_ttl, Duration::from_secs(1440));
        assert_eq!(settings.compression, Compression::None);
    }

    #[test]
    fn lock_settings_follow_phpredis_zero_rules() {
        let on = [(c"redis.session.locking_enabled", "1")];
        let lock = Settings::load(&ini(&on), Failover::None).lock.unwrap();
        assert_eq!(lock.wait, Duration::from_micros(20_000));
        assert_eq!(lock.retries, Some(100));
        assert_eq!(lock.ttl, FALLBACK_LOCK_TTL);
        assert_eq!(lock.release, ReleaseCommand::Eval);

        let lock = Settings::load(
            &ini(&[
                on[0],
                (c"redis.session.lock_wait_time", "0"),
                (c"redis.session.lock_retries", "-1"),
                (c"max_execution_time", "7"),
                (c"redis.session.lock_release_cmd", "DELIFEQ"),
            ]),
            Failover::None,
        )
        .lock
        .unwrap();
        assert_eq!(lock.wait, Duration::from_micros(20_000));
        assert_eq!(lock.retries, None);
        assert_eq!(lock.ttl, Duration::from_secs(7));
        assert_eq!(lock.release, ReleaseCommand::Delifeq);

        let lock = Settings::load(
            &ini(&[
                on[0],
                (c"redis.session.lock_expire", "3"),
                (c"max_execution_time", "7"),
                (c"redis.session.lock_retries", "5"),
            ]),
            Failover::None,
        )
        .lock
        .unwrap();
        assert_eq!(lock.ttl, Duration::from_secs(3));
        assert_eq!(lock.retries, Some(5));
    }

    /// PHP's INI with phpredis 5.3's registered lock defaults, where the
    /// user set only `set`.
    struct Phpredis53 {
        ini: Ini,
        set: &'static [&'static CStr],
    }

    impl IniSource for Phpredis53 {
        fn long(&self, name: &CStr) -> i64 {
            self.ini.long(name)
        }
        fn string(&self, name: &CStr) -> Option<String> {
            self.ini.string(name)
        }
        fn user_long(&self, name: &CStr) -> Option<i64> {
            self.set.contains(&name).then(|| self.long(name))
        }
    }

    #[test]
    fn unset_lock_waits_take_this_extensions_defaults() {
        let load = |overrides: &[(&'static CStr, &'static str)], set| {
            let mut ini = ini(&[
                (c"redis.session.locking_enabled", "1"),
                (c"redis.session.lock_wait_time", "2000"),
                (c"redis.session.lock_retries", "10"),
            ]);
            ini.0.extend(overrides.iter().copied());
            LockSettings::load(&Phpredis53 { ini, set })
        };
        let unset = load(&[], &[]);
        assert_eq!(unset.total_wait(), Some(Duration::from_secs(2)));
        // The same as INI_DEFAULTS, which this extension registers without phpredis.
        let registered = LockSettings::load(&ini(&[(c"redis.session.locking_enabled", "1")]));
        assert_eq!(
            (unset.wait, unset.retries),
            (registered.wait, registered.retries)
        );

        let both = load(&[], &OWN_DEFAULTS_WIN);
        assert_eq!(
            (both.wait, both.retries),
            (Duration::from_millis(2), Some(10))
        );
        let retries_only = load(
            &[(c"redis.session.lock_retries", "3")],
            &[c"redis.session.lock_retries"],
        );
        assert_eq!(
            (retries_only.wait, retries_only.retries),
            (Duration::from_millis(20), Some(3))
        );
    }

    fn source(origin: Origin, registered: Option<i64>, by_phpredis: bool) -> WaitSource {
        WaitSource::new(
            c"redis.session.lock_retries",
            origin,
            10,
            registered,
            by_phpredis,
        )
    }

    #[test]
    fn wait_sources_say_why_a_value_applies() {
        let phpredis53 = source(Origin::Registered, Some(10), true);
        assert!(phpredis53.overridden());
        assert_eq!(
            phpredis53.describe(),
            "100: this extension's default, not the 10 phpredis registered (set the directive to choose)"
        );
        let phpredis6 = source(Origin::Registered, Some(100), true);
        assert!(!phpredis6.overridden());
        assert_eq!(
            phpredis6.describe(),
            "100: this extension's default (phpredis registered the same)"
        );
        let alone = source(Origin::Registered, Some(100), false);
        assert_eq!(
            (alone.describe().as_str(), alone.registered_by()),
            ("100: this extension's default", "rediscluster_session")
        );
        let fpm = source(Origin::Written, Some(10), true);
        assert!(!fpm.overridden());
        assert_eq!((fpm.value, fpm.origin_name()), (10, "php-fpm"));
        let wait = WaitSource::new(
            c"redis.session.lock_wait_time",
            Origin::Registered,
            2000,
            Some(2000),
            true,
        );
        assert_eq!(wait.value, 20_000);
    }

    #[test]
    fn total_wait_is_described() {
        let on = (c"redis.session.locking_enabled", "1");
        let describe = |retries| {
            LockSettings::load(&ini(&[on, (c"redis.session.lock_retries", retries)]))
                .describe_total_wait()
        };
        assert_eq!(describe("100"), "2000 ms (100 retries × 20000 µs)");
        assert_eq!(describe("-1"), "no limit (retries × 20000 µs, for ever)");
    }

    #[test]
    fn out_of_range_lock_settings_are_clamped() {
        let load = |name: &'static CStr, value: &'static str| {
            Settings::load(
                &ini(&[(c"redis.session.locking_enabled", "1"), (name, value)]),
                Failover::None,
            )
            .lock
            .unwrap()
        };
        for tiny in ["1", "999", "-5", "-9223372036854775808"] {
            assert_eq!(
                load(c"redis.session.lock_wait_time", tiny).wait,
                Duration::from_millis(1)
            );
        }
        for huge in ["86401", "9223372036854775807"] {
            let ttl = load(c"redis.session.lock_expire", huge).ttl;
            assert_eq!(ttl, Duration::from_secs(MAX_LOCK_TTL_SECS));
        }
        let lease = |ms| load(c"rediscluster_session.lock_lease_ms", ms).lease;
        assert_eq!(
            lease("9223372036854775807"),
            Some(Duration::from_secs(MAX_LOCK_TTL_SECS))
        );
        assert_eq!(lease("1500"), Some(Duration::from_millis(1500)));
        assert_eq!(lease("1"), Some(Duration::from_millis(MIN_LEASE_MS)));
        assert_eq!(lease("0"), None);
        assert_eq!(lease("-1"), None);
        let forever = LockSettings {
            wait: Duration::from_micros(i64::MAX.unsigned_abs()),
            retries: Some(u64::MAX),
            ..load(c"redis.session.lock_retries", "1")
        };
        assert_eq!(
            forever.total_wait(),
            None,
            "an overflow waits for ever, no panic"
        );
        let lock = load(c"redis.session.lock_retries", "3");
        assert_eq!(lock.total_wait(), Some(Duration::from_millis(60)));
        assert_eq!(load(c"redis.session.lock_retries", "-1").total_wait(), None);
    }

    #[test]
    fn compression_reads_name_and_level() {
        let settings = Settings::load(
            &ini(&[
                (c"redis.session.compression", "LZ4"),
                (c"redis.session.compression_level", "9"),
            ]),
            Failover::None,
        );
        assert_eq!(settings.compression, Compression::Lz4 { hc_level: Some(9) });
        let settings = Settings::load(
            &ini(&[(c"redis.session.compression", "brotli")]),
            Failover::None,
        );
        assert_eq!(settings.compression, Compression::None);
        assert!(settings.compression_notice.is_some());
    }
}
