//! A node's host name resolved within the connect's deadline: a stub
//! resolver that reads `/etc/hosts` and `/etc/resolv.conf` as glibc does and
//! asks the name servers over UDP, each wait cut to what is left.
//!
//! Not `getaddrinfo`: it takes no timeout (a name server answering in 5 s
//! held a 2 s budget for 5 s), and a thread given up on inside it would hand
//! a `pcntl_fork()` child the resolver's locks, held by a thread the child
//! does not have. This runs on the caller's thread, waits for no lock, and its
//! sockets close before it returns.
//!
//! - Order: `/etc/hosts` (`localhost` is the loopback addresses when not
//!   listed there), the process's cache, then DNS. Both files are read at
//!   each lookup: containers rewrite them.
//! - DNS: the names resolv.conf's `search` (or `domain`) and `ndots` make of
//!   the host, in glibc's order; for each, A and AAAA at once, from two
//!   sockets (a conntrack race drops one of two datagrams sent at once from
//!   one port), to the name servers in turn (`127.0.0.1` when it names none,
//!   as glibc), `attempts` times over, each waited on up to `timeout` and at
//!   most its share of what is left (a dead first server leaves the next
//!   some time). NXDOMAIN, or no address of either type: the
//!   next name. SERVFAIL, REFUSED, an ICMP error, no reply or a truncated
//!   reply with no address in it: the next server (no retry over TCP: a
//!   node's few addresses fit in a UDP reply). A datagram that does not
//!   answer the question asked is ignored.
//! - Fallback, outside the deadline: `getaddrinfo` when every name was
//!   answered as having no address (nsswitch.conf's other sources, mDNS or
//!   LDAP say, may know it).
//! - Cache: per process, a name's DNS answer for its TTL (an hour at most),
//!   until a connect to its addresses fails; DNS is then asked again at once
//!   and a new address tried in the same connect.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6, ToSocketAddrs, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::{Mutex, TryLockError};
use std::time::{Duration, Instant};

use crate::poll::first_readable;

const HOSTS: &str = "/etc/hosts";
const RESOLV_CONF: &str = "/etc/resolv.conf";
/// glibc's limits: `MAXNS`, `RES_MAXNDOTS`, `RES_MAXRETRANS`, `RES_MAXRETRY`.
const MAX_NAMESERVERS: usize = 3;
const MAX_NDOTS: usize = 15;
const MAX_TIMEOUT_SECONDS: u64 = 30;
const MAX_ATTEMPTS: u32 = 5;
/// The longest a DNS answer is kept, whatever TTL it comes with.
const LONGEST_TTL: Duration = Duration::from_secs(3600);
/// Names a thread keeps answers for.
const CACHED_NAMES: usize = 64;
/// Once one of A and AAAA has addresses, how much longer the other is
/// waited for: A's come first in the connect order, so a late or dropped
/// AAAA reply must not spend the budget.
const OTHER_TYPE_GRACE: Duration = Duration::from_millis(100);
/// A name's longest wire form, and the most compression pointers followed
/// in one name (a loop of them ends there).
const MAX_NAME: usize = 255;
const MAX_POINTERS: usize = 128;
/// Larger than any reply to a query without EDNS (512 bytes).
const REPLY_BUFFER: usize = 4096;

const TYPE_A: u16 = 1;
const TYPE_CNAME: u16 = 5;
const TYPE_AAAA: u16 = 28;
const CLASS_IN: u16 = 1;
const FLAG_REPLY: u16 = 0x8000;
const OPCODE: u16 = 0x7800;
const FLAG_TRUNCATED: u16 = 0x0200;
const FLAG_RECURSION_DESIRED: u16 = 0x0100;
const RCODE: u16 = 0x000f;

/// What resolv.conf says of the name servers.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvConf {
    pub nameservers: Vec<SocketAddr>,
    pub search: Vec<String>,
    pub ndots: usize,
    /// How long one server is waited on for one name.
    pub timeout: Duration,
    /// How many times each server is asked for one name.
    pub attempts: u32,
}

impl Default for ResolvConf {
    /// glibc's defaults: with no `nameserver` line, the local one.
    fn default() -> Self {
        ResolvConf {
            nameservers: vec![SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 53)],
            search: Vec::new(),
            ndots: 1,
            timeout: Duration::from_secs(5),
            attempts: 2,
        }
    }
}

impl ResolvConf {
    pub fn parse(text: &str) -> ResolvConf {
        let mut conf = ResolvConf {
            nameservers: Vec::new(),
            ..ResolvConf::default()
        };
        for line in text.lines() {
            let mut words = line.split_whitespace();
            match words.next() {
                Some("nameserver") => {
                    if let Some(server) = words.next().and_then(nameserver_address)
                        && conf.nameservers.len() < MAX_NAMESERVERS
                    {
                        conf.nameservers.push(server);
                    }
                }
                // The last of `search` and `domain` wins.
                Some("search") => conf.search = words.map(str::to_owned).collect(),
                Some("domain") => {
                    conf.search = words.next().map(str::to_owned).into_iter().collect()
                }
                Some("options") => words.for_each(|option| conf.set_option(option)),
                _ => {}
            }
        }
        if conf.nameservers.is_empty() {
            conf.nameservers = ResolvConf::default().nameservers;
        }
        conf
    }

    fn set_option(&mut self, option: &str) {
        let Some((name, value)) = option.split_once(':') else {
            return;
        };
        match name {
            "ndots" => {
                if let Ok(ndots) = value.parse::<usize>() {
                    self.ndots = ndots.min(MAX_NDOTS);
                }
            }
            "timeout" => {
                if let Ok(seconds) = value.parse::<u64>() {
                    self.timeout = Duration::from_secs(seconds.clamp(1, MAX_TIMEOUT_SECONDS));
                }
            }
            "attempts" => {
                if let Ok(attempts) = value.parse::<u32>() {
                    self.attempts = attempts.clamp(1, MAX_ATTEMPTS);
                }
            }
            _ => {}
        }
    }
}

/// A `nameserver` line's address, port 53. A scoped IPv6 one (`fe80::1%eth0`,
/// as NetworkManager writes from a router's advertisement) is used as glibc
/// does: the scope is an interface's name or number, and a scope that is
/// neither is ignored, never the server (skipped, a host whose only server is
/// link-local would ask 127.0.0.1 and resolve nothing).
fn nameserver_address(word: &str) -> Option<SocketAddr> {
    let Some((address, scope)) = word.split_once('%') else {
        return word
            .parse::<IpAddr>()
            .ok()
            .map(|ip| SocketAddr::new(ip, 53));
    };
    let ip: Ipv6Addr = address.parse().ok()?;
    let scope_id = interface_index(scope).or_else(|| scope.parse().ok());
    Some(SocketAddrV6::new(ip, 53, 0, scope_id.unwrap_or(0)).into())
}

fn interface_index(name: &str) -> Option<u32> {
    unsafe extern "C" {
        fn if_nametoindex(name: *const std::ffi::c_char) -> std::ffi::c_uint;
    }
    let name = std::ffi::CString::new(name).ok()?;
    // SAFETY: `name` is a NUL-terminated string that outlives the call.
    let index = unsafe { if_nametoindex(name.as_ptr()) };
    (index != 0).then_some(index)
}

/// A name's addresses from DNS, and how long they may be kept.
#[derive(Clone, Debug, PartialEq)]
struct Found {
    addresses: Vec<IpAddr>,
    ttl: Duration,
}

struct Cached {
    addresses: Vec<IpAddr>,
    until: Instant,
}

/// DNS answers, shared by the process's threads: the watchdog's connects
/// find what the requests resolved (cold, a lookup slower than a lease would
/// cost a live holder its lock). Only ever `try_lock`ed: a thread that held
/// it at a `pcntl_fork()` is not in the child, and a busy cache is a miss,
/// never a wait.
struct Cache(Mutex<Option<HashMap<String, Cached>>>);

static CACHE: Cache = Cache::new();

impl Cache {
    const fn new() -> Cache {
        Cache(Mutex::new(None))
    }

    fn with<R>(&self, f: impl FnOnce(&mut HashMap<String, Cached>) -> R) -> Option<R> {
        let mut names = match self.0.try_lock() {
            Ok(names) => names,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        Some(f(names.get_or_insert_with(HashMap::new)))
    }

    fn get(&self, host: &str) -> Option<Vec<IpAddr>> {
        let now = Instant::now();
        self.with(|names| {
            names
                .get(host)
                .filter(|entry| entry.until > now)
                .map(|entry| entry.addresses.clone())
        })
        .flatten()
    }

    /// A connect to one of `host`'s addresses failed: the next lookup asks DNS again.
    fn forget(&self, host: &str) {
        self.with(|names| names.remove(host));
    }

    fn remember(&self, host: &str, found: &Found) {
        if found.ttl.is_zero() {
            return;
        }
        let now = Instant::now();
        self.with(|names| {
            if names.len() >= CACHED_NAMES && !names.contains_key(host) {
                names.retain(|_, entry| entry.until > now);
                if names.len() >= CACHED_NAMES
                    && let Some(oldest) = names
                        .iter()
                        .min_by_key(|(_, entry)| entry.until)
                        .map(|(name, _)| name.clone())
                {
                    names.remove(&oldest);
                }
            }
            names.insert(
                host.to_owned(),
                Cached {
                    addresses: found.addresses.clone(),
                    until: now + found.ttl,
                },
            );
        });
    }
}

/// Connects with `connect` to the addresses of `host`, a name (not an IP
/// address), tried in order; DNS is asked within `deadline`. When none of
/// them answers, the name may point elsewhere now (a DNS endpoint whose nodes
/// changed): its cached answer is forgotten and DNS asked again, and any new
/// address is tried, within the same deadline.
pub fn connect<T>(
    host: &str,
    deadline: Instant,
    connect: impl FnMut(&[IpAddr]) -> io::Result<T>,
) -> io::Result<T> {
    let read =
        |path: &str| String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned();
    connect_in(
        host,
        deadline,
        &read(HOSTS),
        &ResolvConf::parse(&read(RESOLV_CONF)),
        &CACHE,
        connect,
    )
}

fn connect_in<T>(
    host: &str,
    deadline: Instant,
    hosts: &str,
    conf: &ResolvConf,
    cache: &Cache,
    mut connect: impl FnMut(&[IpAddr]) -> io::Result<T>,
) -> io::Result<T> {
    let was_cached = cache.get(host).is_some();
    let addresses = lookup_in(host, deadline, hosts, conf, cache)?;
    let error = match connect(&addresses) {
        Ok(connected) => return Ok(connected),
        Err(error) => error,
    };
    cache.forget(host);
    // A fresh answer that failed is asked again only by the next connect.
    if !was_cached {
        return Err(error);
    }
    let moved: Vec<IpAddr> = lookup_in(host, deadline, hosts, conf, cache)?
        .into_iter()
        .filter(|ip| !addresses.contains(ip))
        .collect();
    if moved.is_empty() {
        return Err(error);
    }
    connect(&moved)
}

fn lookup_in(
    host: &str,
    deadline: Instant,
    hosts: &str,
    conf: &ResolvConf,
    cache: &Cache,
) -> io::Result<Vec<IpAddr>> {
    let listed = hosts_addresses(hosts, host);
    if !listed.is_empty() {
        return Ok(listed);
    }
    if host
        .strip_suffix('.')
        .unwrap_or(host)
        .eq_ignore_ascii_case("localhost")
    {
        return Ok(vec![Ipv4Addr::LOCALHOST.into(), Ipv6Addr::LOCALHOST.into()]);
    }
    if let Some(addresses) = cache.get(host) {
        return Ok(addresses);
    }
    if let Some(found) = ask_name_servers(conf, host, deadline)? {
        cache.remember(host, &found);
        return Ok(found.addresses);
    }
    // Unbounded, but only where DNS has answered.
    match (host, 0).to_socket_addrs() {
        Ok(addresses) => Ok(addresses.map(|address| address.ip()).collect()),
        Err(error) => Err(io::Error::new(
            error.kind(),
            format!("resolving {host} failed: {error}"),
        )),
    }
}

/// The addresses `/etc/hosts` (its text) lists for `host`, IPv4 first.
fn hosts_addresses(text: &str, host: &str) -> Vec<IpAddr> {
    let host = host.strip_suffix('.').unwrap_or(host);
    let mut addresses: Vec<IpAddr> = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default();
        let mut fields = line.split_whitespace();
        let Some(Ok(address)) = fields.next().map(str::parse::<IpAddr>) else {
            continue;
        };
        if fields.any(|name| name.eq_ignore_ascii_case(host)) && !addresses.contains(&address) {
            addresses.push(address);
        }
    }
    addresses.sort_by_key(IpAddr::is_ipv6);
    addresses
}

/// The names DNS is asked for, in glibc's order: a name ending in a dot as
/// it is only; one with at least `ndots` dots as it is, then under each
/// search domain; one with fewer under each search domain, then as it is.
fn candidate_names(host: &str, conf: &ResolvConf) -> Vec<String> {
    if let Some(absolute) = host.strip_suffix('.') {
        return vec![absolute.to_owned()];
    }
    let searched = conf.search.iter().map(|domain| {
        let domain = domain.strip_suffix('.').unwrap_or(domain);
        format!("{host}.{domain}")
    });
    let mut names = Vec::with_capacity(conf.search.len() + 1);
    if host.matches('.').count() >= conf.ndots {
        names.push(host.to_owned());
        names.extend(searched);
    } else {
        names.extend(searched);
        names.push(host.to_owned());
    }
    names
}

/// `name` in DNS's wire form, lower case: its labels, each after its
/// length, then the root's empty label. `None` for a name DNS cannot carry.
fn wire_name(name: &str) -> Option<Vec<u8>> {
    let mut wire = Vec::with_capacity(name.len() + 2);
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return None;
        }
        wire.push(label.len() as u8);
        wire.extend(label.bytes().map(|byte| byte.to_ascii_lowercase()));
    }
    wire.push(0);
    (wire.len() <= MAX_NAME).then_some(wire)
}

/// A query for `qname`'s records of type `qtype`, recursion desired.
fn query(id: u16, qname: &[u8], qtype: u16) -> Vec<u8> {
    let mut message = Vec::with_capacity(12 + qname.len() + 4);
    message.extend_from_slice(&id.to_be_bytes());
    message.extend_from_slice(&FLAG_RECURSION_DESIRED.to_be_bytes());
    // One question; no answer, authority or additional record.
    message.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
    message.extend_from_slice(qname);
    message.extend_from_slice(&qtype.to_be_bytes());
    message.extend_from_slice(&CLASS_IN.to_be_bytes());
    message
}

/// What one reply says of the name asked.
#[derive(Debug, PartialEq)]
enum Answer {
    Addresses(Found),
    /// NXDOMAIN.
    NoSuchName,
    /// The name exists, with no address of the type asked.
    NoAddress,
    /// This server could not answer: why.
    Failed(String),
}

/// What reply `message` says of the query `id` for `qname`'s records of
/// type `qtype`; `None` if it answers some other query. Every length in it
/// is checked: a broken or hostile reply is refused, never trusted.
fn answer(message: &[u8], id: u16, qname: &[u8], qtype: u16) -> Option<Answer> {
    let mut reader = Reader { message, at: 0 };
    let (reply_id, flags, questions, records) =
        (reader.u16()?, reader.u16()?, reader.u16()?, reader.u16()?);
    // The authority and additional sections are not read.
    reader.bytes(4)?;
    if reply_id != id || flags & FLAG_REPLY == 0 || flags & OPCODE != 0 {
        return None;
    }
    let rcode = flags & RCODE;
    match questions {
        1 => {
            if reader.name()? != qname || reader.u16()? != qtype || reader.u16()? != CLASS_IN {
                return None;
            }
        }
        // Some servers leave the question out of an error reply.
        0 if rcode != 0 => {}
        _ => return None,
    }
    match rcode {
        0 => {}
        3 => return Some(Answer::NoSuchName),
        2 => return Some(Answer::Failed("SERVFAIL".into())),
        5 => return Some(Answer::Failed("REFUSED".into())),
        other => return Some(Answer::Failed(format!("RCODE {other}"))),
    }
    let truncated = flags & FLAG_TRUNCATED != 0;
    // The name asked and its aliases, each CNAME record leading to the next
    // (a recursive server puts the chain and the target's addresses in one
    // answer); records of any other owner are not about this name.
    let mut names = vec![qname.to_vec()];
    let mut found = Found {
        addresses: Vec::new(),
        ttl: LONGEST_TTL,
    };
    for _ in 0..records {
        let Some(record) = reader.record() else {
            // A truncated reply ends where the server cut it.
            if truncated {
                break;
            }
            return Some(Answer::Failed("a malformed reply".into()));
        };
        if record.class != CLASS_IN || !names.contains(&record.owner) {
            continue;
        }
        match (record.kind, record.data.len()) {
            (TYPE_CNAME, _) => {
                let Some(target) = (Reader {
                    message,
                    at: record.data_at,
                })
                .name() else {
                    return Some(Answer::Failed("a malformed reply".into()));
                };
                names.push(target);
            }
            (TYPE_A, 4) if qtype == TYPE_A => {
                let octets: [u8; 4] = record.data.try_into().expect("4 bytes");
                found.addresses.push(IpAddr::from(octets));
            }
            (TYPE_AAAA, 16) if qtype == TYPE_AAAA => {
                let octets: [u8; 16] = record.data.try_into().expect("16 bytes");
                found.addresses.push(IpAddr::from(octets));
            }
            _ => continue,
        }
        found.ttl = found.ttl.min(Duration::from_secs(record.ttl.into()));
    }
    Some(if !found.addresses.is_empty() {
        Answer::Addresses(found)
    } else if truncated {
        Answer::Failed("a truncated reply without an address".into())
    } else {
        Answer::NoAddress
    })
}

struct Record<'a> {
    owner: Vec<u8>,
    kind: u16,
    class: u16,
    ttl: u32,
    data: &'a [u8],
    /// Where `data` starts in the message: a name in it may point anywhere before.
    data_at: usize,
}

/// A DNS message read from its start, every read bounds-checked.
struct Reader<'a> {
    message: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, count: usize) -> Option<&'a [u8]> {
        let bytes = self.message.get(self.at..self.at.checked_add(count)?)?;
        self.at += count;
        Some(bytes)
    }

    fn u16(&mut self) -> Option<u16> {
        self.bytes(2)
            .map(|bytes| u16::from_be_bytes([bytes[0], bytes[1]]))
    }

    fn u32(&mut self) -> Option<u32> {
        self.bytes(4)
            .map(|bytes| u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// A name in lower-case wire form, its compression pointers followed.
    fn name(&mut self) -> Option<Vec<u8>> {
        let mut wire = Vec::new();
        let mut at = self.at;
        // Where reading goes on after the name: past its first pointer.
        let mut after = None;
        let mut pointers = 0;
        loop {
            let length = *self.message.get(at)?;
            match length >> 6 {
                0 => {
                    let end = at + 1 + usize::from(length);
                    let label = self.message.get(at + 1..end)?;
                    wire.push(length);
                    wire.extend(label.iter().map(u8::to_ascii_lowercase));
                    if wire.len() > MAX_NAME {
                        return None;
                    }
                    at = end;
                    if length == 0 {
                        break;
                    }
                }
                3 => {
                    let low = *self.message.get(at + 1)?;
                    after.get_or_insert(at + 2);
                    pointers += 1;
                    if pointers > MAX_POINTERS {
                        return None;
                    }
                    at = usize::from(length & 0x3f) << 8 | usize::from(low);
                }
                // The extended label types, never used.
                _ => return None,
            }
        }
        self.at = after.unwrap_or(at);
        Some(wire)
    }

    fn record(&mut self) -> Option<Record<'a>> {
        let owner = self.name()?;
        let (kind, class, ttl, length) = (self.u16()?, self.u16()?, self.u32()?, self.u16()?);
        let data_at = self.at;
        let data = self.bytes(usize::from(length))?;
        Some(Record {
            owner,
            kind,
            class,
            ttl,
            data,
            data_at,
        })
    }
}

/// The addresses the name servers of `conf` give `host`, asked within
/// `deadline`; `None` if every name it may stand for has none.
fn ask_name_servers(conf: &ResolvConf, host: &str, deadline: Instant) -> io::Result<Option<Found>> {
    let started = Instant::now();
    let mut unanswered = None;
    for name in candidate_names(host, conf) {
        let Some(qname) = wire_name(&name) else {
            continue;
        };
        match ask_servers(conf, &qname, deadline) {
            Round::Found(found) => return Ok(Some(found)),
            Round::Absent => {}
            Round::Unanswered(why) => {
                if Instant::now() >= deadline {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "resolving {host} timed out after {} ms",
                            started.elapsed().as_millis()
                        ),
                    ));
                }
                unanswered = Some(why);
            }
        }
    }
    match unanswered {
        None => Ok(None),
        Some(why) => Err(io::Error::other(format!("resolving {host} failed: {why}"))),
    }
}

/// What a server, or all of them, made of one name.
enum Round {
    Found(Found),
    /// The name has no address.
    Absent,
    /// No answer to go by: why.
    Unanswered(String),
}

/// One name asked of the servers in turn, `attempts` times over, until one
/// of them settles it or `deadline` passes.
fn ask_servers(conf: &ResolvConf, qname: &[u8], deadline: Instant) -> Round {
    let mut why = String::from("no name server asked");
    for _ in 0..conf.attempts {
        for (asked, &server) in conf.nameservers.iter().enumerate() {
            let now = Instant::now();
            if now >= deadline {
                return Round::Unanswered(why);
            }
            // The servers left in this round share what is left: a silent
            // first one must not spend the time the next would answer in.
            let share = (deadline - now) / (conf.nameservers.len() - asked) as u32;
            match ask_server(server, qname, now + conf.timeout.min(share)) {
                Round::Unanswered(reason) => why = reason,
                settled => return settled,
            }
        }
    }
    Round::Unanswered(why)
}

/// One query on a socket of its own.
struct Query {
    socket: UdpSocket,
    id: u16,
    qtype: u16,
    answer: Option<Answer>,
}

impl Query {
    fn send(server: SocketAddr, qname: &[u8], qtype: u16) -> io::Result<Query> {
        let local: SocketAddr = match server {
            SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let socket = UdpSocket::bind(local)?;
        // Connected: the kernel drops datagrams from anyone else, and
        // reports the server's ICMP errors.
        socket.connect(server)?;
        socket.set_nonblocking(true)?;
        let mut id = [0; 2];
        getrandom::fill(&mut id).map_err(io::Error::other)?;
        let id = u16::from_ne_bytes(id);
        socket.send(&query(id, qname, qtype))?;
        Ok(Query {
            socket,
            id,
            qtype,
            answer: None,
        })
    }

    /// Reads what arrived; the first datagram that answers this query settles it.
    fn receive(&mut self, qname: &[u8]) {
        let mut buffer = [0; REPLY_BUFFER];
        while self.answer.is_none() {
            match self.socket.recv(&mut buffer) {
                Ok(length) => self.answer = answer(&buffer[..length], self.id, qname, self.qtype),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => self.answer = Some(Answer::Failed(error.to_string())),
            }
        }
    }
}

/// A and AAAA for one name sent to `server` at once, their replies awaited
/// until `until`.
fn ask_server(server: SocketAddr, qname: &[u8], until: Instant) -> Round {
    let mut queries = Vec::with_capacity(2);
    for qtype in [TYPE_A, TYPE_AAAA] {
        match Query::send(server, qname, qtype) {
            Ok(query) => queries.push(query),
            Err(error) => return Round::Unanswered(format!("no answer from {server} ({error})")),
        }
    }
    let mut grace_end = None;
    loop {
        let answers = || queries.iter().filter_map(|query| query.answer.as_ref());
        if answers().any(|answer| *answer == Answer::NoSuchName) {
            return Round::Absent;
        }
        let mut found: Option<Found> = None;
        for answer in answers() {
            if let Answer::Addresses(more) = answer {
                let found = found.get_or_insert_with(|| Found {
                    addresses: Vec::new(),
                    ttl: LONGEST_TTL,
                });
                found.addresses.extend_from_slice(&more.addresses);
                found.ttl = found.ttl.min(more.ttl);
            }
        }
        let pending: Vec<usize> = (0..queries.len())
            .filter(|&index| queries[index].answer.is_none())
            .collect();
        let failure = answers().find_map(|answer| match answer {
            Answer::Failed(why) => Some(format!("no answer from {server} ({why})")),
            _ => None,
        });
        if pending.is_empty() {
            return match (found, failure) {
                (Some(found), _) => Round::Found(found),
                (None, Some(why)) => Round::Unanswered(why),
                (None, None) => Round::Absent,
            };
        }
        if found.is_some() {
            grace_end.get_or_insert_with(|| Instant::now() + OTHER_TYPE_GRACE);
        }
        let sockets: Vec<_> = pending
            .iter()
            .map(|&index| queries[index].socket.as_raw_fd())
            .collect();
        match first_readable(&sockets, grace_end.map_or(until, |end| until.min(end))) {
            Some(ready) => queries[pending[ready]].receive(qname),
            None => {
                return match (found, failure) {
                    (Some(found), _) => Round::Found(found),
                    (None, Some(why)) => Round::Unanswered(why),
                    (None, None) => Round::Unanswered(format!("no answer from {server} in time")),
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::sync::{Arc, Mutex};

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn wire(name: &str) -> Vec<u8> {
        wire_name(name).unwrap()
    }

    #[test]
    fn resolv_conf_is_read_as_glibc_reads_it() {
        let conf = ResolvConf::parse(
            "# comment\n; comment\nnameserver 10.0.0.1\nnameserver bad\n\
             nameserver fe80::1%nosuch0\nnameserver ::1\nnameserver 10.0.0.2\nnameserver 10.0.0.3\n\
             search a.test b.test\ndomain c.test\n\
             options ndots:20 timeout:0 rotate attempts:9\n",
        );
        assert_eq!(
            conf,
            ResolvConf {
                nameservers: vec![
                    "10.0.0.1:53".parse().unwrap(),
                    "[fe80::1]:53".parse().unwrap(),
                    "[::1]:53".parse().unwrap(),
                ],
                search: vec!["c.test".into()],
                ndots: 15,
                timeout: Duration::from_secs(1),
                attempts: 5,
            }
        );
        let conf = ResolvConf::parse("domain c.test\nsearch a.test b.test\noptions timeout:2\n");
        assert_eq!(conf.search, ["a.test", "b.test"]);
        assert_eq!(
            (conf.ndots, conf.timeout, conf.attempts),
            (1, Duration::from_secs(2), 2)
        );
        assert_eq!(ResolvConf::parse(""), ResolvConf::default());
        assert_eq!(
            ResolvConf::parse("nameserver bogus\n").nameservers,
            ["127.0.0.1:53".parse::<SocketAddr>().unwrap()]
        );
    }

    #[test]
    fn a_scoped_ipv6_name_server_is_used_as_glibc_does() {
        let servers = |line: &str| ResolvConf::parse(line).nameservers;
        // Skipped, the host's only name server became 127.0.0.1.
        assert_eq!(
            servers("nameserver fe80::1%lo\n"),
            [SocketAddr::from(SocketAddrV6::new(
                "fe80::1".parse().unwrap(),
                53,
                0,
                interface_index("lo").unwrap()
            ))]
        );
        assert_eq!(
            servers("nameserver fe80::1%7\n"),
            ["[fe80::1%7]:53".parse().unwrap()]
        );
        // An unknown interface: the scope ignored, not the server.
        assert_eq!(
            servers("nameserver fe80::1%nosuch0\n"),
            ["[fe80::1]:53".parse().unwrap()]
        );
        assert_eq!(
            servers("nameserver 10.0.0.1%lo\n"),
            ["127.0.0.1:53".parse().unwrap()]
        );
    }

    #[test]
    fn hosts_entries_match_any_name_of_a_line_in_any_case() {
        let hosts = "# 10.0.0.9 node\n::1 localhost ip6-localhost\n127.0.0.1\tlocalhost\n\
                     10.0.0.1 node.test Node # 10.0.0.8 node\n10.0.0.2 other node\n\
                     not-an-ip node\n10.0.0.1 node\n10.0.0.3 node2\n";
        assert_eq!(
            hosts_addresses(hosts, "NODE"),
            [ip("10.0.0.1"), ip("10.0.0.2")]
        );
        assert_eq!(hosts_addresses(hosts, "node.test."), [ip("10.0.0.1")]);
        assert_eq!(
            hosts_addresses(hosts, "localhost"),
            [ip("127.0.0.1"), ip("::1")]
        );
        assert!(hosts_addresses(hosts, "node.tes").is_empty());
        assert!(hosts_addresses(hosts, "10.0.0.1").is_empty());
    }

    #[test]
    fn candidate_names_follow_ndots_and_the_search_list() {
        let mut conf = ResolvConf {
            search: vec!["a.test".into(), "b.test.".into()],
            ..ResolvConf::default()
        };
        assert_eq!(
            candidate_names("node", &conf),
            ["node.a.test", "node.b.test", "node"]
        );
        assert_eq!(
            candidate_names("node.x", &conf),
            ["node.x", "node.x.a.test", "node.x.b.test"]
        );
        assert_eq!(candidate_names("node.x.", &conf), ["node.x"]);
        conf.ndots = 2;
        assert_eq!(
            candidate_names("node.x", &conf),
            ["node.x.a.test", "node.x.b.test", "node.x"]
        );
        conf.search.clear();
        assert_eq!(candidate_names("node", &conf), ["node"]);
    }

    #[test]
    fn names_dns_cannot_carry_are_refused() {
        assert_eq!(wire("Node.Test"), b"\x04node\x04test\x00");
        assert_eq!(wire_name("a..b"), None);
        assert_eq!(wire_name(""), None);
        assert_eq!(wire_name(&"a".repeat(64)), None);
        let longest = ["a".repeat(63).as_str(); 4].join(".");
        assert_eq!(wire_name(&longest[..253]).map(|wire| wire.len()), Some(255));
        assert_eq!(wire_name(&longest[..255]), None);
    }

    #[test]
    fn a_query_is_one_question_with_recursion_desired() {
        assert_eq!(
            query(0x1234, &wire("node.test"), TYPE_AAAA),
            b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x04node\x04test\x00\x00\x1c\x00\x01"
        );
    }

    /// A record whose owner is the question's name (a pointer to it).
    fn record(kind: u16, ttl: u32, data: &[u8]) -> Vec<u8> {
        record_of(b"\xc0\x0c", kind, ttl, data)
    }

    fn record_of(owner: &[u8], kind: u16, ttl: u32, data: &[u8]) -> Vec<u8> {
        let mut bytes = owner.to_vec();
        bytes.extend_from_slice(&kind.to_be_bytes());
        bytes.extend_from_slice(&CLASS_IN.to_be_bytes());
        bytes.extend_from_slice(&ttl.to_be_bytes());
        bytes.extend_from_slice(&(data.len() as u16).to_be_bytes());
        bytes.extend_from_slice(data);
        bytes
    }

    /// The reply to `query` with `flags` (QR added) and `records` in its answer section.
    fn reply(query: &[u8], flags: u16, records: &[Vec<u8>]) -> Vec<u8> {
        let mut bytes = query.to_vec();
        bytes[2..4].copy_from_slice(&(flags | FLAG_REPLY).to_be_bytes());
        bytes[6..8].copy_from_slice(&(records.len() as u16).to_be_bytes());
        records
            .iter()
            .for_each(|record| bytes.extend_from_slice(record));
        bytes
    }

    fn addresses(addresses: &[&str], ttl: u64) -> Option<Answer> {
        Some(Answer::Addresses(Found {
            addresses: addresses.iter().map(|text| ip(text)).collect(),
            ttl: Duration::from_secs(ttl),
        }))
    }

    #[test]
    fn addresses_are_read_from_the_answer_section() {
        let qname = wire("node.test");
        let asked = query(7, &qname, TYPE_A);
        let message = reply(
            &asked,
            0,
            &[
                record(TYPE_A, 300, &[10, 0, 0, 1]),
                // Not an address: skipped.
                record(16, 5, b"\x03txt"),
                record(TYPE_AAAA, 5, &[0; 16]),
                record(TYPE_A, 60, &[10, 0, 0, 2]),
            ],
        );
        assert_eq!(
            answer(&message, 7, &qname, TYPE_A),
            addresses(&["10.0.0.1", "10.0.0.2"], 60)
        );
        let asked = query(8, &qname, TYPE_AAAA);
        let message = reply(
            &asked,
            0,
            &[record(TYPE_AAAA, 99_999, &Ipv6Addr::LOCALHOST.octets())],
        );
        assert_eq!(
            answer(&message, 8, &qname, TYPE_AAAA),
            addresses(&["::1"], 3600)
        );
    }

    #[test]
    fn a_cname_chain_leads_to_the_target_s_addresses() {
        let qname = wire("alias.test");
        let asked = query(1, &qname, TYPE_A);
        // alias.test -> mid.alias.test (compressed) -> node.other -> A; a record
        // of a name not in the chain is not this name's.
        let mid_at = asked.len() + 12;
        let mut records = vec![record(TYPE_CNAME, 100, b"\x03mid\xc0\x0c")];
        let mid = [0xc0, mid_at as u8];
        records.push(record_of(&mid, TYPE_CNAME, 50, b"\x04node\x05other\x00"));
        records.push(record_of(
            b"\x05stray\x04test\x00",
            TYPE_A,
            100,
            &[10, 9, 9, 9],
        ));
        records.push(record_of(
            b"\x04NODE\x05other\x00",
            TYPE_A,
            200,
            &[10, 0, 0, 3],
        ));
        let message = reply(&asked, 0, &records);
        assert_eq!(message[mid_at..mid_at + 4], *b"\x03mid");
        assert_eq!(
            answer(&message, 1, &qname, TYPE_A),
            addresses(&["10.0.0.3"], 50)
        );
        // The chain without the target's addresses: no address.
        let message = reply(&asked, 0, &records[..1]);
        assert_eq!(answer(&message, 1, &qname, TYPE_A), Some(Answer::NoAddress));
    }

    #[test]
    fn datagrams_that_answer_another_query_are_ignored() {
        let qname = wire("node.test");
        let asked = query(7, &qname, TYPE_A);
        let good = reply(&asked, 0, &[record(TYPE_A, 1, &[10, 0, 0, 1])]);
        assert!(answer(&good, 7, &qname, TYPE_A).is_some());
        // Another id, a query rather than a reply, another opcode.
        assert_eq!(answer(&good, 8, &qname, TYPE_A), None);
        assert_eq!(answer(&asked, 7, &qname, TYPE_A), None);
        let mut notify = good.clone();
        notify[2] |= 0x20;
        assert_eq!(answer(&notify, 7, &qname, TYPE_A), None);
        // Another question.
        assert_eq!(answer(&good, 7, &wire("other.test"), TYPE_A), None);
        assert_eq!(answer(&good, 7, &qname, TYPE_AAAA), None);
        let mut two = good.clone();
        two[5] = 2;
        assert_eq!(answer(&two, 7, &qname, TYPE_A), None);
        // The question's name in another case is the same name.
        let upper = reply(&query(7, b"\x04NODE\x04test\x00", TYPE_A), 0, &[]);
        assert_eq!(answer(&upper, 7, &qname, TYPE_A), Some(Answer::NoAddress));
    }

    #[test]
    fn error_codes_say_what_comes_next() {
        let qname = wire("node.test");
        let asked = query(7, &qname, TYPE_A);
        let with_code = |rcode: u16| answer(&reply(&asked, rcode, &[]), 7, &qname, TYPE_A);
        assert_eq!(with_code(0), Some(Answer::NoAddress));
        assert_eq!(with_code(3), Some(Answer::NoSuchName));
        assert_eq!(with_code(2), Some(Answer::Failed("SERVFAIL".into())));
        assert_eq!(with_code(5), Some(Answer::Failed("REFUSED".into())));
        assert_eq!(with_code(4), Some(Answer::Failed("RCODE 4".into())));
        // An error reply without the question.
        let mut bare = reply(&asked, 2, &[])[..12].to_vec();
        bare[5] = 0;
        assert_eq!(
            answer(&bare, 7, &qname, TYPE_A),
            Some(Answer::Failed("SERVFAIL".into()))
        );
        bare[3] = 0x80;
        assert_eq!(answer(&bare, 7, &qname, TYPE_A), None);
    }

    #[test]
    fn a_truncated_reply_gives_the_records_it_holds() {
        let qname = wire("node.test");
        let asked = query(7, &qname, TYPE_A);
        let whole = record(TYPE_A, 10, &[10, 0, 0, 1]);
        let mut message = reply(&asked, FLAG_TRUNCATED, &[whole.clone(), whole.clone()]);
        message.truncate(message.len() - 3);
        assert_eq!(
            answer(&message, 7, &qname, TYPE_A),
            addresses(&["10.0.0.1"], 10)
        );
        let message = reply(&asked, FLAG_TRUNCATED, &[]);
        assert_eq!(
            answer(&message, 7, &qname, TYPE_A),
            Some(Answer::Failed(
                "a truncated reply without an address".into()
            ))
        );
        // Cut without the flag: malformed.
        let mut message = reply(&asked, 0, &[whole]);
        message.pop();
        assert_eq!(
            answer(&message, 7, &qname, TYPE_A),
            Some(Answer::Failed("a malformed reply".into()))
        );
    }

    #[test]
    fn broken_names_are_refused_without_looping() {
        let qname = wire("node.test");
        let asked = query(7, &qname, TYPE_A);
        let malformed = Some(Answer::Failed("a malformed reply".into()));
        let end = reply(&asked, 0, &[]).len() as u8;
        let address = |owner: &[u8]| record_of(owner, TYPE_A, 1, &[10, 0, 0, 1]);
        for record in [
            // A pointer to itself, to each other, past the end.
            address(&[0xc0, end]),
            address(&[0xc0, end + 2, 0xc0, end]),
            address(&[0xc0, 0xff]),
            // An extended label type.
            address(&[0x41, 0]),
            // A pointer or a label cut short by the message's end.
            vec![0xc0],
            vec![9, b'a'],
        ] {
            let message = reply(&asked, 0, &[record]);
            assert_eq!(
                answer(&message, 7, &qname, TYPE_A),
                malformed,
                "{message:?}"
            );
        }
        // A name longer than 255 bytes, through pointers to one label.
        let mut message = reply(&asked, 0, &[]);
        message[7] = 1;
        let label_at = message.len();
        message.extend_from_slice(
            b"\x3fabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij123",
        );
        for _ in 0..5 {
            message.extend_from_slice(&[0xc0, label_at as u8]);
        }
        assert_eq!(answer(&message, 7, &qname, TYPE_A), malformed);
        // A CNAME whose target is broken.
        let message = reply(&asked, 0, &[record(TYPE_CNAME, 1, &[0xc0, 0xff])]);
        assert_eq!(answer(&message, 7, &qname, TYPE_A), malformed);
    }

    proptest::proptest! {
        #[test]
        fn any_reply_is_read_without_panic(tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600), records in 0..40u16) {
            let qname = wire("node.test");
            let mut message = reply(&query(7, &qname, TYPE_A), 0, &[]);
            message[6..8].copy_from_slice(&records.to_be_bytes());
            message.extend_from_slice(&tail);
            let _ = answer(&message, 7, &qname, TYPE_A);
            let _ = answer(&tail, 7, &qname, TYPE_A);
        }
    }

    /// The names a test's name server was asked, with their types.
    type Asked = Arc<Mutex<Vec<(String, u16)>>>;

    /// A name server on a local port: each query gets `respond`'s reply (if
    /// any) after `delay`. Returns its address and the names it was asked,
    /// with their types.
    fn name_server(
        delay: Duration,
        respond: impl Fn(&str, u16, &[u8]) -> Option<Vec<u8>> + Send + 'static,
    ) -> (SocketAddr, Asked) {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let address = socket.local_addr().unwrap();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = asked.clone();
        std::thread::spawn(move || {
            let mut buffer = [0; 512];
            while let Ok((length, peer)) = socket.recv_from(&mut buffer) {
                let query = &buffer[..length];
                let mut reader = Reader {
                    message: query,
                    at: 12,
                };
                let qname = reader.name().unwrap();
                let qtype = reader.u16().unwrap();
                let mut name = String::new();
                let mut at = 0;
                while qname[at] != 0 {
                    let label = &qname[at + 1..at + 1 + usize::from(qname[at])];
                    name.push_str(&String::from_utf8_lossy(label));
                    name.push('.');
                    at += 1 + usize::from(qname[at]);
                }
                name.pop();
                log.lock().unwrap().push((name.clone(), qtype));
                if let Some(reply) = respond(&name, qtype, query) {
                    let socket = socket.try_clone().unwrap();
                    std::thread::spawn(move || {
                        std::thread::sleep(delay);
                        let _ = socket.send_to(&reply, peer);
                    });
                }
            }
        });
        (address, asked)
    }

    /// Answers A queries for `name` with `address`, TTL `ttl`; AAAA with no
    /// address; any other name with NXDOMAIN.
    fn answering(
        name: &'static str,
        address: [u8; 4],
        ttl: u32,
    ) -> impl Fn(&str, u16, &[u8]) -> Option<Vec<u8>> {
        move |asked, qtype, query| {
            Some(if asked != name {
                reply(query, 3, &[])
            } else if qtype == TYPE_A {
                reply(query, 0, &[record(TYPE_A, ttl, &address)])
            } else {
                reply(query, 0, &[])
            })
        }
    }

    fn conf(nameservers: &[SocketAddr], search: &[&str]) -> ResolvConf {
        ResolvConf {
            nameservers: nameservers.to_vec(),
            search: search.iter().map(|domain| domain.to_string()).collect(),
            timeout: Duration::from_secs(1),
            ..ResolvConf::default()
        }
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[test]
    fn a_name_server_that_answers_gives_the_addresses() {
        let (server, asked) =
            name_server(Duration::ZERO, answering("node.test", [10, 0, 0, 7], 60));
        let found = ask_name_servers(&conf(&[server], &[]), "node.test", soon()).unwrap();
        assert_eq!(found.unwrap().addresses, [ip("10.0.0.7")]);
        let mut asked = asked.lock().unwrap().clone();
        asked.sort();
        assert_eq!(
            asked,
            [
                ("node.test".into(), TYPE_A),
                ("node.test".into(), TYPE_AAAA)
            ]
        );
    }

    #[test]
    fn a_name_server_that_answers_late_is_given_up_at_the_deadline() {
        let (server, _) = name_server(
            Duration::from_secs(3),
            answering("slow.test", [10, 0, 0, 7], 60),
        );
        let started = Instant::now();
        let conf = ResolvConf {
            timeout: Duration::from_secs(5),
            ..conf(&[server], &[])
        };
        let error =
            ask_name_servers(&conf, "slow.test", started + Duration::from_millis(500)).unwrap_err();
        let elapsed = started.elapsed();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(
            error
                .to_string()
                .starts_with("resolving slow.test timed out after "),
            "{error}"
        );
        // Generous for a loaded machine; before, it waited for the answer (3 s).
        assert!(
            elapsed >= Duration::from_millis(450) && elapsed < Duration::from_secs(2),
            "{elapsed:?}"
        );
    }

    #[test]
    fn a_name_missing_under_one_search_domain_is_asked_under_the_next() {
        let (server, asked) =
            name_server(Duration::ZERO, answering("node.b.test", [10, 0, 0, 8], 60));
        let conf = conf(&[server], &["a.test", "b.test"]);
        let found = ask_name_servers(&conf, "node", soon()).unwrap();
        assert_eq!(found.unwrap().addresses, [ip("10.0.0.8")]);
        let names: Vec<String> = asked
            .lock()
            .unwrap()
            .iter()
            .map(|(name, _)| name.clone())
            .collect();
        assert_eq!(names[0], "node.a.test");
        assert!(
            names[2..].iter().all(|name| name == "node.b.test"),
            "{names:?}"
        );
        // Absent under every name: for getaddrinfo to try.
        assert_eq!(ask_name_servers(&conf, "none", soon()).unwrap(), None);
    }

    #[test]
    fn a_failing_or_silent_server_is_passed_over_for_the_next() {
        let (failing, _) = name_server(Duration::ZERO, |_, _, query| Some(reply(query, 2, &[])));
        let (silent, _) = name_server(Duration::ZERO, |_, _, _| None);
        let (good, _) = name_server(Duration::ZERO, answering("node.test", [10, 0, 0, 9], 60));
        let started = Instant::now();
        let found =
            ask_name_servers(&conf(&[failing, silent, good], &[]), "node.test", soon()).unwrap();
        assert_eq!(found.unwrap().addresses, [ip("10.0.0.9")]);
        // The silent one was waited on for its timeout (1 s).
        assert!(started.elapsed() >= Duration::from_millis(900));
        let error = ask_name_servers(&conf(&[failing], &[]), "node.test", soon()).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("resolving node.test failed: no answer from {failing} (SERVFAIL)")
        );
    }

    #[test]
    fn a_dead_first_server_leaves_the_next_its_share_of_the_deadline() {
        let (silent, _) = name_server(Duration::ZERO, |_, _, _| None);
        let (good, _) = name_server(
            Duration::from_millis(200),
            answering("node.test", [10, 0, 0, 9], 60),
        );
        let conf = ResolvConf {
            timeout: Duration::from_secs(5),
            ..conf(&[silent, good], &[])
        };
        let started = Instant::now();
        // Before, the silent server was waited on until the deadline.
        let found = ask_name_servers(&conf, "node.test", started + Duration::from_secs(2));
        assert_eq!(found.unwrap().unwrap().addresses, [ip("10.0.0.9")]);
        assert!(started.elapsed() >= Duration::from_millis(900));
    }

    #[test]
    fn answers_are_kept_until_a_connect_fails_or_their_ttl_ends() {
        let (server, asked) = name_server(Duration::ZERO, |name, qtype, query| {
            let ttl = if name == "short.test" { 0 } else { 60 };
            Some(match qtype {
                TYPE_A => reply(query, 0, &[record(TYPE_A, ttl, &[10, 0, 0, 5])]),
                _ => reply(
                    query,
                    0,
                    &[record(TYPE_AAAA, ttl, &Ipv6Addr::LOCALHOST.octets())],
                ),
            })
        });
        let conf = conf(&[server], &[]);
        let cache = Cache::new();
        let queries = || asked.lock().unwrap().len();
        let lookup = |host| lookup_in(host, soon(), "", &conf, &cache).unwrap();
        assert_eq!(lookup("kept.test"), [ip("10.0.0.5"), ip("::1")]);
        assert_eq!(lookup("kept.test"), [ip("10.0.0.5"), ip("::1")]);
        assert_eq!(queries(), 2);
        cache.forget("kept.test");
        lookup("kept.test");
        assert_eq!(queries(), 4);
        lookup("short.test");
        lookup("short.test");
        assert_eq!(queries(), 8);
        // /etc/hosts and localhost: no query.
        assert_eq!(
            lookup_in("kept.test", soon(), "10.1.1.1 kept.test", &conf, &cache).unwrap(),
            [ip("10.1.1.1")]
        );
        assert_eq!(lookup("LocalHost"), [ip("127.0.0.1"), ip("::1")]);
        assert_eq!(queries(), 8);
    }

    #[test]
    fn a_connect_that_fails_asks_again_and_follows_the_name_one_that_works_keeps_it() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let live = listener.local_addr().unwrap().port();
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // The name now points at 127.0.0.1; the cache still says 127.0.0.2.
        let (server, asked) = name_server(Duration::ZERO, |_, qtype, query| {
            Some(match qtype {
                TYPE_A => reply(query, 0, &[record(TYPE_A, 60, &[127, 0, 0, 1])]),
                _ => reply(query, 0, &[]),
            })
        });
        let conf = conf(&[server], &[]);
        let cache = Cache::new();
        let queries = || asked.lock().unwrap().len();
        let connect = |host: &str, port| {
            let tried = RefCell::new(Vec::new());
            let result = connect_in(host, soon(), "", &conf, &cache, |addresses| {
                tried.borrow_mut().extend_from_slice(addresses);
                let addresses: Vec<_> = addresses
                    .iter()
                    .map(|&ip| SocketAddr::new(ip, port))
                    .collect();
                std::net::TcpStream::connect(&addresses[..])
            });
            (result.is_ok(), tried.into_inner())
        };
        let stale = Found {
            addresses: vec![ip("127.0.0.2")],
            ttl: Duration::from_secs(60),
        };
        cache.remember("moved.test", &stale);
        assert_eq!(
            connect("moved.test", live),
            (true, vec![ip("127.0.0.2"), ip("127.0.0.1")])
        );
        assert_eq!(cache.get("moved.test"), Some(vec![ip("127.0.0.1")]));
        assert_eq!(queries(), 2);
        // Kept while it works: no query.
        assert!(connect("moved.test", live).0);
        assert_eq!(queries(), 2);
        // The same address again after a failure: asked again, not tried twice.
        assert_eq!(
            connect("moved.test", closed),
            (false, vec![ip("127.0.0.1")])
        );
        assert_eq!(queries(), 4);
        // A fresh answer that fails is not asked again in the same connect.
        cache.forget("moved.test");
        assert_eq!(
            connect("moved.test", closed),
            (false, vec![ip("127.0.0.1")])
        );
        assert_eq!(queries(), 6);
        assert_eq!(cache.get("moved.test"), None);
    }

    #[test]
    fn the_cache_keeps_a_bounded_number_of_names_for_every_thread() {
        let found = Found {
            addresses: vec![ip("10.0.0.1")],
            ttl: Duration::from_secs(60),
        };
        let cache = Cache::new();
        for index in 0..CACHED_NAMES * 2 {
            cache.remember(&format!("node{index}.test"), &found);
        }
        assert_eq!(cache.with(|names| names.len()), Some(CACHED_NAMES));
        let newest = format!("node{}.test", CACHED_NAMES * 2 - 1);
        // The watchdog's thread finds what a request's resolved.
        std::thread::scope(|scope| {
            scope.spawn(|| assert_eq!(cache.get(&newest), Some(vec![ip("10.0.0.1")])));
        });
        // Held elsewhere: a miss, not a wait.
        let _held = cache.0.lock().unwrap();
        assert_eq!(cache.get(&newest), None);
    }
}
