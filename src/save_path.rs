//! The `session.save_path` grammar, parsed as a query string the way phpredis's
//! `rediscluster` handler does:
//! `seed[]=host:port&seed[]=...&timeout=2&read_timeout=2&persistent=1&prefix=...&auth=...`.
//!
//! Unlike phpredis, every malformed part is an error: a half-understood
//! configuration must not silently talk to the wrong place.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Key prefix used when `prefix` is absent, the same as phpredis.
pub const DEFAULT_PREFIX: &[u8] = b"PHPREDIS_CLUSTER_SESSION:";
/// Connect timeout when `timeout` is absent or 0 (phpredis would wait for
/// `default_socket_timeout`, 60 s, which hangs workers).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Read timeout when `read_timeout` is absent or 0.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Seed {
    pub host: String,
    pub port: u16,
}

/// Credentials; the password is never printed (see the `Debug` impl).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Auth {
    pub user: Option<String>,
    pub password: String,
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Auth")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// TLS for every node, which phpredis turns on with any `stream[...]` option.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Tls {
    /// `verify_peer=0`: no certificate check at all.
    pub verify_peer: bool,
    /// `verify_peer_name=0`: the certificate is checked, the name in it is not.
    pub verify_peer_name: bool,
    /// `cafile`: trust this CA instead of the system's.
    pub cafile: Option<PathBuf>,
    /// `local_cert` and `local_pk`: a client certificate, for mutual TLS.
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

/// `failover`: what a session does when its slot's primary cannot be reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Failover {
    /// `none` (or absent): the request fails, as with phpredis.
    #[default]
    None,
    /// `error`: the session is served read-only, from a replica if need be.
    Error,
    /// `distribute` or `distribute_slaves`: phpredis reads from replicas all
    /// the time, which a locked session must never do; they act as `error`.
    Distribute,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SavePath {
    pub seeds: Vec<Seed>,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub auth: Option<Auth>,
    pub prefix: Vec<u8>,
    pub tls: Option<Tls>,
    pub failover: Failover,
    /// `persistent`: keep connections for the worker's life (absent, or any
    /// value PHP takes as true), or close them at each request's end
    /// (`persistent=0`, as phpredis means it), keeping the slot map.
    pub persistent: bool,
    /// `shared_slot_map`: share the slot map with this user's other workers
    /// on the machine (absent, or true), or keep it to this process (`0`).
    pub shared_slot_map: bool,
}

/// A malformed save_path. The texts are phpredis's where it has one; none of
/// them contains a password.
#[derive(Debug, PartialEq, Eq)]
pub enum SavePathError {
    NoSeeds,
    SeedNotArray,
    BadSeed(String),
    NegativeTimeout,
    BadNumber { name: &'static str, value: String },
    AuthArraySize,
    AuthArrayKeys,
    NotUtf8(&'static str),
    NotAString(&'static str),
    BadTlsOption(String),
    BadFailover(String),
}

impl fmt::Display for SavePathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSeeds => f.write_str("No valid seeds detected"),
            Self::SeedNotArray => f.write_str(
                "session.save_path needs one or more seed[]=host:port entries for the rediscluster handler",
            ),
            Self::BadSeed(seed) => write!(f, "Seed '{seed}' not in host:port format"),
            Self::NegativeTimeout => {
                f.write_str("Can't set negative timeout values in session configuration")
            }
            Self::BadNumber { name, value } => {
                write!(f, "session.save_path: {name}='{value}' is not a number of seconds")
            }
            Self::AuthArraySize => {
                f.write_str("When passing an array as auth it must have one or two elements!")
            }
            Self::AuthArrayKeys => f.write_str(
                "session.save_path: an auth array needs auth[]=user&auth[]=pass or auth[user]=..&auth[pass]=..",
            ),
            Self::NotUtf8(name) => write!(f, "session.save_path: {name} is not valid UTF-8"),
            Self::NotAString(name) => write!(f, "session.save_path: {name} must be a single value"),
            Self::BadTlsOption(why) => write!(f, "session.save_path: {why}"),
            Self::BadFailover(value) => write!(
                f,
                "session.save_path: failover='{value}' is not none, error, distribute or distribute_slaves"
            ),
        }
    }
}

impl std::error::Error for SavePathError {}

/// One query-string parameter after PHP's `parse_str` rules.
#[derive(Debug, PartialEq)]
enum Param {
    Scalar(Vec<u8>),
    /// `name[]=v` and `name[key]=v` entries as (key, value); `[]` gets the next
    /// free integer key, as in a PHP array.
    Array(Vec<(Vec<u8>, Vec<u8>)>),
}

pub fn parse(save_path: &str) -> Result<SavePath, SavePathError> {
    let mut params = parse_query(save_path.trim().as_bytes());

    let seeds = match params.remove("seed") {
        None | Some(Param::Scalar(_)) => return Err(SavePathError::SeedNotArray),
        Some(Param::Array(entries)) => entries
            .into_iter()
            .map(|(_, seed)| parse_seed(&seed))
            .collect::<Result<Vec<_>, _>>()?,
    };
    if seeds.is_empty() {
        return Err(SavePathError::NoSeeds);
    }
    let tls = parse_tls(params.remove("stream"))?;
    let connect_timeout =
        parse_timeout(params.remove("timeout"), "timeout")?.unwrap_or(DEFAULT_CONNECT_TIMEOUT);
    let read_timeout = parse_timeout(params.remove("read_timeout"), "read_timeout")?
        .unwrap_or(DEFAULT_READ_TIMEOUT);
    let prefix = match params.remove("prefix") {
        None => DEFAULT_PREFIX.to_vec(),
        Some(Param::Scalar(prefix)) => prefix,
        Some(Param::Array(_)) => return Err(SavePathError::NotAString("prefix")),
    };
    let auth = parse_auth(params.remove("auth"))?;
    let failover = parse_failover(params.remove("failover"))?;
    let persistent = parse_switch(params.remove("persistent"), "persistent")?;
    let shared_slot_map = parse_switch(params.remove("shared_slot_map"), "shared_slot_map")?;
    Ok(SavePath {
        seeds,
        connect_timeout,
        read_timeout,
        auth,
        prefix,
        tls,
        failover,
        persistent,
        shared_slot_map,
    })
}

/// An on/off switch, on when absent; PHP's truth of a string, as phpredis
/// reads `persistent`: only "" and "0" are false.
fn parse_switch(param: Option<Param>, name: &'static str) -> Result<bool, SavePathError> {
    match param {
        None => Ok(true),
        Some(Param::Scalar(raw)) => Ok(!matches!(raw.as_slice(), b"" | b"0")),
        Some(Param::Array(_)) => Err(SavePathError::NotAString(name)),
    }
}

/// phpredis's values, in any case.
fn parse_failover(param: Option<Param>) -> Result<Failover, SavePathError> {
    let raw = match param {
        None => return Ok(Failover::None),
        Some(Param::Array(_)) => return Err(SavePathError::NotAString("failover")),
        Some(Param::Scalar(raw)) => raw,
    };
    match raw.to_ascii_lowercase().as_slice() {
        b"none" => Ok(Failover::None),
        b"error" => Ok(Failover::Error),
        b"distribute" | b"distribute_slaves" => Ok(Failover::Distribute),
        _ => Err(SavePathError::BadFailover(
            String::from_utf8_lossy(&raw).into_owned(),
        )),
    }
}

fn parse_tls(param: Option<Param>) -> Result<Option<Tls>, SavePathError> {
    let bad = |why: String| SavePathError::BadTlsOption(why);
    let options = match param {
        None => return Ok(None),
        Some(Param::Scalar(_)) => {
            return Err(bad("stream must be given as stream[option]=value".into()));
        }
        Some(Param::Array(options)) => options,
    };
    let mut tls = Tls {
        verify_peer: true,
        verify_peer_name: true,
        cafile: None,
        client_cert: None,
    };
    let (mut cert, mut key) = (None, None);
    for (name, value) in options {
        let name = String::from_utf8_lossy(&name).into_owned();
        let text = String::from_utf8(value).map_err(|_| SavePathError::NotUtf8("stream"))?;
        let flag = || match text.as_str() {
            "1" | "true" | "on" => Ok(true),
            "0" | "false" | "off" | "" => Ok(false),
            _ => Err(bad(format!("stream[{name}] must be 0 or 1"))),
        };
        match name.as_str() {
            "verify_peer" => tls.verify_peer = flag()?,
            "verify_peer_name" => tls.verify_peer_name = flag()?,
            "cafile" => tls.cafile = Some(PathBuf::from(text)),
            "local_cert" => cert = Some(PathBuf::from(text)),
            "local_pk" => key = Some(PathBuf::from(text)),
            "peer_name" => {
                return Err(bad(
                    "stream[peer_name] is not supported: certificates are checked against each node's address; use stream[verify_peer_name]=0 to skip the name check".into(),
                ));
            }
            // Other PHP stream context options have no counterpart here.
            _ => {}
        }
    }
    tls.client_cert = match (cert, key) {
        (None, None) => None,
        (Some(cert), Some(key)) => Some((cert, key)),
        _ => {
            return Err(bad(
                "stream[local_cert] and stream[local_pk] go together".into()
            ));
        }
    };
    Ok(Some(tls))
}

fn parse_seed(seed: &[u8]) -> Result<Seed, SavePathError> {
    let text = std::str::from_utf8(seed).map_err(|_| SavePathError::NotUtf8("seed"))?;
    let bad = || SavePathError::BadSeed(text.to_owned());
    let (host, port) = text.rsplit_once(':').ok_or_else(bad)?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let port: u16 = port.parse().map_err(|_| bad())?;
    if host.is_empty() || port == 0 {
        return Err(bad());
    }
    Ok(Seed {
        host: host.to_owned(),
        port,
    })
}

/// `None` when absent or 0, which both mean "use the default".
fn parse_timeout(
    param: Option<Param>,
    name: &'static str,
) -> Result<Option<Duration>, SavePathError> {
    let raw = match param {
        None => return Ok(None),
        Some(Param::Array(_)) => return Err(SavePathError::NotAString(name)),
        Some(Param::Scalar(raw)) => raw,
    };
    let text = String::from_utf8_lossy(&raw);
    let seconds: f64 = text.trim().parse().map_err(|_| SavePathError::BadNumber {
        name,
        value: text.to_string(),
    })?;
    if seconds < 0.0 {
        return Err(SavePathError::NegativeTimeout);
    }
    if !seconds.is_finite() || seconds > 86_400.0 {
        return Err(SavePathError::BadNumber {
            name,
            value: text.to_string(),
        });
    }
    Ok((seconds > 0.0).then(|| Duration::from_secs_f64(seconds)))
}

fn parse_auth(param: Option<Param>) -> Result<Option<Auth>, SavePathError> {
    let utf8 =
        |bytes: Vec<u8>| String::from_utf8(bytes).map_err(|_| SavePathError::NotUtf8("auth"));
    match param {
        None => Ok(None),
        Some(Param::Scalar(password)) if password.is_empty() => Ok(None),
        Some(Param::Scalar(password)) => Ok(Some(Auth {
            user: None,
            password: utf8(password)?,
        })),
        Some(Param::Array(mut entries)) => {
            let count = entries.len();
            let mut take = |names: [&[u8]; 2]| {
                let at = entries
                    .iter()
                    .position(|(k, _)| names.contains(&k.as_slice()));
                at.map(|at| entries.remove(at).1)
                    .ok_or(SavePathError::AuthArrayKeys)
            };
            match count {
                1 => Ok(Some(Auth {
                    user: None,
                    password: utf8(take([b"pass", b"0"])?)?,
                })),
                2 => {
                    let user = utf8(take([b"user", b"0"])?)?;
                    let password = utf8(take([b"pass", b"1"])?)?;
                    Ok(Some(Auth {
                        user: Some(user).filter(|u| !u.is_empty()),
                        password,
                    }))
                }
                _ => Err(SavePathError::AuthArraySize),
            }
        }
    }
}

/// One `name=value` pair of a query string, named as PHP's `parse_str` names
/// it: decoded, leading and trailing spaces trimmed, `name[key]` split.
struct Pair<'a> {
    raw_name: &'a [u8],
    base: String,
    /// `Some` for `name[key]` (empty for `name[]`).
    key: Option<Vec<u8>>,
    value: &'a [u8],
}

/// The pair in one `&`-separated part; `None` for an empty part.
fn pair(part: &[u8]) -> Option<Pair<'_>> {
    if part.is_empty() {
        return None;
    }
    let (raw_name, value) = match part.iter().position(|&b| b == b'=') {
        Some(eq) => (&part[..eq], &part[eq + 1..]),
        None => (part, &b""[..]),
    };
    let name = url_decode(raw_name);
    let open = name.iter().position(|&b| b == b'[');
    let close = open.and_then(|o| name[o..].iter().position(|&b| b == b']').map(|c| o + c));
    let (base, key) = match (open, close) {
        (Some(open), Some(close)) if open > 0 => {
            (&name[..open], Some(name[open + 1..close].to_vec()))
        }
        _ => (&name[..], None),
    };
    Some(Pair {
        raw_name,
        base: String::from_utf8_lossy(base).trim().to_owned(),
        key,
        value,
    })
}

/// The save_path as it may be shown: the value of every pair the parser
/// reads as `auth` (`auth`, `auth[]`, `+auth[user]`, `%61uth`, ...) replaced
/// by `***`, the rest as written. `None` when there is nothing to hide.
pub fn redact(save_path: &str) -> Option<String> {
    let mut hidden = false;
    let parts: Vec<String> = save_path
        .split('&')
        .map(|part| match pair(part.as_bytes()) {
            Some(pair) if pair.base == "auth" => {
                hidden = true;
                format!("{}=***", String::from_utf8_lossy(pair.raw_name))
            }
            _ => part.to_owned(),
        })
        .collect();
    hidden.then(|| parts.join("&"))
}

/// The subset of PHP's `parse_str` that save paths use: `&`-separated pairs,
/// percent and `+` decoding, `name[]` and `name[key]` arrays; later values win.
fn parse_query(query: &[u8]) -> BTreeMap<String, Param> {
    let mut params = BTreeMap::new();
    for pair in query.split(|&b| b == b'&').filter_map(pair) {
        let value = url_decode(pair.value);
        match pair.key {
            Some(key) => {
                let param = params.entry(pair.base).or_insert(Param::Array(Vec::new()));
                if let Param::Scalar(_) = param {
                    *param = Param::Array(Vec::new());
                }
                let Param::Array(entries) = param else {
                    continue;
                };
                let key = if key.is_empty() {
                    next_array_index(entries).to_string().into_bytes()
                } else {
                    key
                };
                entries.retain(|(k, _)| *k != key);
                entries.push((key, value));
            }
            None => {
                params.insert(pair.base, Param::Scalar(value));
            }
        }
    }
    params
}

fn next_array_index(entries: &[(Vec<u8>, Vec<u8>)]) -> u64 {
    entries
        .iter()
        .filter_map(|(k, _)| std::str::from_utf8(k).ok()?.parse::<u64>().ok())
        .map(|i| i + 1)
        .max()
        .unwrap_or(0)
}

fn url_decode(input: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        match input[i] {
            b'+' => out.push(b' '),
            b'%' => match (
                input.get(i + 1).and_then(|&b| hex(b)),
                input.get(i + 2).and_then(|&b| hex(b)),
            ) {
                (Some(hi), Some(lo)) => {
                    out.push(hi << 4 | lo);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_options_turn_on_tls() {
        assert_eq!(parse("seed[]=h:1").unwrap().tls, None);
        let path = "seed[]=h:1&stream[verify_peer_name]=0&stream[cafile]=/ca.pem\
            &stream[local_cert]=/c.pem&stream[local_pk]=/k.pem&stream[ciphers]=x";
        assert_eq!(
            parse(path).unwrap().tls,
            Some(Tls {
                verify_peer: true,
                verify_peer_name: false,
                cafile: Some("/ca.pem".into()),
                client_cert: Some(("/c.pem".into(), "/k.pem".into())),
            })
        );
        let tls = parse("seed[]=h:1&stream[verify_peer]=0")
            .unwrap()
            .tls
            .unwrap();
        assert!(!tls.verify_peer && tls.cafile.is_none());
        assert!(matches!(
            parse("seed[]=h:1&stream[peer_name]=redis.local"),
            Err(SavePathError::BadTlsOption(_))
        ));
    }

    #[test]
    fn redact_hides_every_auth_value_and_nothing_else() {
        assert_eq!(redact("seed[]=h:1&timeout=2"), None);
        assert_eq!(
            redact("seed[]=h:1&auth=pw&prefix=p"),
            Some("seed[]=h:1&auth=***&prefix=p".into())
        );
        assert_eq!(
            redact("auth[]=user&auth[]=pw&%61uth[pass]=x&seed[]=h:1"),
            Some("auth[]=***&auth[]=***&%61uth[pass]=***&seed[]=h:1".into())
        );
        // Names the parser trims and decodes to `auth`.
        for spelled in [" auth", "+auth", "%20auth", "auth+", "+auth%5B%5D"] {
            let path = format!("seed[]=h:1&{spelled}=secret");
            assert_eq!(parse(&path).unwrap().auth.unwrap().password, "secret");
            assert_eq!(redact(&path), Some(format!("seed[]=h:1&{spelled}=***")));
        }
    }

    fn seed(host: &str, port: u16) -> Seed {
        Seed {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn failover_takes_phpredis_values_in_any_case() {
        let failover = |value: &str| parse(&format!("seed[]=h:1{value}")).map(|p| p.failover);
        assert_eq!(failover(""), Ok(Failover::None));
        assert_eq!(failover("&failover=none"), Ok(Failover::None));
        assert_eq!(failover("&failover=ERROR"), Ok(Failover::Error));
        assert_eq!(failover("&failover=distribute"), Ok(Failover::Distribute));
        assert_eq!(
            failover("&failover=Distribute_Slaves"),
            Ok(Failover::Distribute)
        );
        assert_eq!(
            failover("&failover=errors"),
            Err(SavePathError::BadFailover("errors".into()))
        );
        assert_eq!(
            failover("&failover[]=error"),
            Err(SavePathError::NotAString("failover"))
        );
    }

    #[test]
    fn switches_are_false_only_as_php_reads_a_string() {
        let persistent = |value: &str| parse(&format!("seed[]=h:1{value}")).map(|p| p.persistent);
        assert_eq!(persistent(""), Ok(true));
        for kept in [
            "&persistent=1",
            "&persistent=yes",
            "&persistent=00",
            "&persistent=x",
        ] {
            assert_eq!(persistent(kept), Ok(true), "{kept}");
        }
        for closed in ["&persistent=0", "&persistent="] {
            assert_eq!(persistent(closed), Ok(false), "{closed}");
        }
        assert_eq!(
            persistent("&persistent[]=0"),
            Err(SavePathError::NotAString("persistent"))
        );
        let shared = |value: &str| parse(&format!("seed[]=h:1{value}")).map(|p| p.shared_slot_map);
        assert_eq!(shared(""), Ok(true));
        assert_eq!(shared("&shared_slot_map=0"), Ok(false));
        assert_eq!(
            shared("&shared_slot_map[]=0"),
            Err(SavePathError::NotAString("shared_slot_map"))
        );
    }

    #[test]
    fn full_phpredis_example() {
        let path = parse(
            "seed[]=host1:7000&seed[]=10.0.0.2:7001&timeout=2&read_timeout=2.5&failover=error&persistent=1&auth=secret",
        )
        .unwrap();
        assert_eq!(
            path.seeds,
            vec![seed("host1", 7000), seed("10.0.0.2", 7001)]
        );
        assert_eq!(path.connect_timeout, Duration::from_secs(2));
        assert_eq!(path.read_timeout, Duration::from_millis(2500));
        assert_eq!(path.failover, Failover::Error);
        assert_eq!(path.prefix, DEFAULT_PREFIX);
        assert_eq!(
            path.auth,
            Some(Auth {
                user: None,
                password: "secret".into()
            })
        );
    }

    #[test]
    fn defaults_apply_for_missing_or_zero_timeouts() {
        let path = parse("seed[]=h:1&timeout=0").unwrap();
        assert_eq!(path.connect_timeout, DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(path.read_timeout, DEFAULT_READ_TIMEOUT);
        assert_eq!(path.auth, None);
    }

    #[test]
    fn seeds_accept_ipv6_and_decode_percent() {
        let path = parse("seed[]=[::1]:7000&seed%5B%5D=127.0.0.1%3A7001").unwrap();
        assert_eq!(path.seeds, vec![seed("::1", 7000), seed("127.0.0.1", 7001)]);
    }

    #[test]
    fn prefix_forms() {
        assert_eq!(parse("seed[]=h:1&prefix=").unwrap().prefix, b"");
        assert_eq!(
            parse("seed[]=h:1&prefix=a+b%7Bt%7D:").unwrap().prefix,
            b"a b{t}:"
        );
        assert_eq!(
            parse("seed[]=h:1&prefix[]=x"),
            Err(SavePathError::NotAString("prefix"))
        );
    }

    #[test]
    fn auth_forms() {
        let auth = |s: &str| parse(&format!("seed[]=h:1&{s}")).map(|p| p.auth);
        let user_pass = Ok(Some(Auth {
            user: Some("u".into()),
            password: "p w".into(),
        }));
        assert_eq!(auth("auth[]=u&auth[]=p+w"), user_pass);
        assert_eq!(auth("auth[user]=u&auth[pass]=p%20w"), user_pass);
        assert_eq!(auth("auth[pass]=u&auth[user]=u&auth[pass]=p+w"), user_pass);
        assert_eq!(
            auth("auth[]=only"),
            Ok(Some(Auth {
                user: None,
                password: "only".into()
            }))
        );
        assert_eq!(auth("auth="), Ok(None));
        assert_eq!(
            auth("auth[]=a&auth[]=b&auth[]=c"),
            Err(SavePathError::AuthArraySize)
        );
        assert_eq!(
            auth("auth[x]=a&auth[y]=b"),
            Err(SavePathError::AuthArrayKeys)
        );
        assert_eq!(auth("auth=%FF"), Err(SavePathError::NotUtf8("auth")));
    }

    #[test]
    fn malformed_forms_are_errors() {
        let cases: &[(&str, SavePathError)] = &[
            ("", SavePathError::SeedNotArray),
            ("tcp://127.0.0.1:6379", SavePathError::SeedNotArray),
            ("seed=127.0.0.1:7000", SavePathError::SeedNotArray),
            ("seed[]=nohost", SavePathError::BadSeed("nohost".into())),
            ("seed[]=:7000", SavePathError::BadSeed(":7000".into())),
            ("seed[]=h:0", SavePathError::BadSeed("h:0".into())),
            ("seed[]=h:99999", SavePathError::BadSeed("h:99999".into())),
            (
                "seed[]=h:1&seed[]=h:x",
                SavePathError::BadSeed("h:x".into()),
            ),
            ("seed[]=h:1&timeout=-1", SavePathError::NegativeTimeout),
            (
                "seed[]=h:1&read_timeout=-0.5",
                SavePathError::NegativeTimeout,
            ),
            (
                "seed[]=h:1&timeout=abc",
                SavePathError::BadNumber {
                    name: "timeout",
                    value: "abc".into(),
                },
            ),
            (
                "seed[]=h:1&read_timeout=inf",
                SavePathError::BadNumber {
                    name: "read_timeout",
                    value: "inf".into(),
                },
            ),
            (
                "seed[]=h:1&timeout[]=1",
                SavePathError::NotAString("timeout"),
            ),
            (
                "seed[]=h:1&stream=1",
                SavePathError::BadTlsOption("stream must be given as stream[option]=value".into()),
            ),
            (
                "seed[]=h:1&stream[verify_peer]=maybe",
                SavePathError::BadTlsOption("stream[verify_peer] must be 0 or 1".into()),
            ),
            (
                "seed[]=h:1&stream[local_cert]=/c.pem",
                SavePathError::BadTlsOption(
                    "stream[local_cert] and stream[local_pk] go together".into(),
                ),
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(parse(input).as_ref(), Err(expected), "{input}");
        }
    }

    #[test]
    fn error_texts_never_contain_the_password() {
        for input in [
            "seed[]=h:1&auth[]=a&auth[]=s3cr3t&auth[]=c",
            "seed[]=h:1&auth[x]=s3cr3t&auth[y]=b",
        ] {
            let message = parse(input).unwrap_err().to_string();
            assert!(!message.contains("s3cr3t"), "{message}");
        }
        let debug = format!("{:?}", parse("seed[]=h:1&auth=s3cr3t").unwrap());
        assert!(!debug.contains("s3cr3t"), "{debug}");
    }

    #[test]
    fn query_parsing_follows_parse_str() {
        let params = parse_query(b"a=1&a=2&b[]=x&b[]=y&b[k]=z&c&=&d[5]=p&d[]=q");
        assert_eq!(params["a"], Param::Scalar(b"2".to_vec()));
        assert_eq!(
            params["b"],
            Param::Array(vec![
                (b"0".to_vec(), b"x".to_vec()),
                (b"1".to_vec(), b"y".to_vec()),
                (b"k".to_vec(), b"z".to_vec()),
            ])
        );
        assert_eq!(params["c"], Param::Scalar(Vec::new()));
        assert_eq!(
            params["d"],
            Param::Array(vec![
                (b"5".to_vec(), b"p".to_vec()),
                (b"6".to_vec(), b"q".to_vec())
            ])
        );
        assert_eq!(url_decode(b"%41%zz%4"), b"A%zz%4");
    }
}

/// Property tests over random save_paths glued from grammar fragments. The
/// count is proptest's default; `scripts/test.sh --all` runs a million, optimised.
#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    /// Pieces that reach every branch of the grammar, plus random text.
    fn fragment() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "seed[]=",
                "seed[x]=",
                "seed=",
                "&",
                "=",
                "[",
                "]",
                "[]",
                "%",
                "%5B",
                "%5d",
                "%zz",
                "+",
                "127.0.0.1:7000",
                "[::1]:7000",
                "host:",
                ":0",
                ":65536",
                "timeout=",
                "read_timeout=",
                "-1",
                "0",
                "1.5",
                "1e400",
                "nan",
                "auth[]=",
                "auth[user]=",
                "auth[pass]=",
                "auth=",
                "prefix=",
                "{",
                "}",
                "persistent=1",
                "shared_slot_map=0",
                "failover=error",
                "stream[verify_peer]=0",
            ])
            .prop_map(str::to_owned),
            "[ -~]{0,8}",
            any::<char>().prop_map(String::from),
        ]
    }

    /// Spellings PHP's `parse_str` (and so the parser) reads as `auth`.
    fn auth_name() -> impl Strategy<Value = String> {
        let spaces = prop::sample::select(vec!["", " ", "+", "%20", "%09", "+%20"]);
        let base = prop::sample::select(vec!["auth", "%61uth", "AUTH", "%61%75%74%68"]);
        let suffix = prop::sample::select(vec!["", "[]", "[pass]", "%5B%5D", "[0]"]);
        (spaces.clone(), base, spaces, suffix)
            .prop_map(|(lead, base, trail, suffix)| format!("{lead}{base}{trail}{suffix}"))
    }

    proptest! {
        #[test]
        fn fuzz_any_save_path_parses_or_fails_cleanly(parts in vec(fragment(), 0..24)) {
            if let Ok(path) = parse(&parts.concat()) {
                prop_assert!(!path.seeds.is_empty());
                prop_assert!(path.connect_timeout > Duration::ZERO);
                prop_assert!(path.read_timeout > Duration::ZERO);
            }
        }

        #[test]
        fn fuzz_the_password_is_never_shown(
            before in vec(fragment(), 0..12),
            name in auth_name(),
            password in "[A-Za-z0-9]{12,20}",
            after in vec(fragment(), 0..12),
        ) {
            let path = format!("{}&{name}=PW{password}&{}", before.concat(), after.concat());
            let parsed = parse(&path);
            // The value may end up the ACL user name, which may be shown.
            let is_password = parsed
                .as_ref()
                .ok()
                .and_then(|parsed| parsed.auth.as_ref())
                .is_some_and(|auth| auth.password.contains(&password));
            let shown = match &parsed {
                Ok(parsed) => format!("{parsed:?}"),
                Err(err) => format!("{err} {err:?}"),
            };
            if is_password || parsed.is_err() {
                prop_assert!(!shown.contains(&password), "{shown}");
            }
            if is_password {
                let redacted = redact(&path);
                prop_assert!(redacted.as_ref().is_some_and(|r| !r.contains(&password)), "{redacted:?}");
            }
        }
    }
}
