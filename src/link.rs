//! One connection to one node: connect (TLS, AUTH), send packed commands,
//! read their replies, every socket operation within one deadline.
//!
//! Plain TCP and TLS (rustls over the same socket) share our reader: a buffer
//! kept for the connection's life that grows only as bytes arrive, a framer
//! that finds a reply's end without reading it twice, and a parser for the
//! RESP2 replies sessions get. The `redis` crate's reader zeroes up to 8 KiB
//! before every socket read (about a quarter of a warm request's client
//! instructions), bounds each read but not a reply, and trusts the lengths a
//! node announces; its API offers no way around any of it.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use redis::{ErrorKind, RedisError, RedisResult, Value};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ClientConnection, WebPkiServerVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::config::{ConnectionConfig, NodeAddr};
use crate::poll;
use crate::resolve;
use crate::resp::{Framer, packed, parse};
use crate::save_path::Tls;
use crate::stats;

/// What a new connection's reply buffer starts with: a session's usual
/// replies fit; larger ones grow it.
const INITIAL_BUFFER: usize = 16 * 1024;
/// A buffer that grew past this for one large reply is released once that
/// reply is consumed: an idle php-fpm worker should not keep tens of MB per
/// connection because one session was large.
const KEPT_BUFFER: usize = 1024 * 1024;

/// A kept connection idle this long is checked before it is used again (one
/// zero-timeout `poll`, no round trip): servers (`timeout` in redis.conf),
/// load balancers, NAT and firewalls close idle clients. A connection used
/// more recently than this is used as it is: a close found at send is
/// repeated at once on a new one (see `cluster::exchange_with`).
const IDLE_CHECK_AFTER: Duration = Duration::from_millis(100);

pub struct Link {
    stream: Stream,
    reader: ReplyReader,
    timeouts: Timeouts,
    /// When its last exchange began.
    last_used: Instant,
    addr: NodeAddr,
    /// AUTH, sent ahead of the first exchange's commands.
    pending_auth: Option<Vec<u8>>,
    /// AUTH was sent and its reply is still to be read.
    auth_unread: bool,
    /// Replies of exchanges given up on at their deadline (see
    /// [`Self::exchange_or_owe`]), read past before the next exchange's.
    owed: usize,
}

enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl Stream {
    fn socket(&self) -> &TcpStream {
        match self {
            Stream::Plain(socket) => socket,
            Stream::Tls(tls) => &tls.socket,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(socket) => socket.read(buf),
            Stream::Tls(tls) => tls.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(socket) => socket.write(buf),
            Stream::Tls(tls) => tls.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(socket) => socket.flush(),
            Stream::Tls(tls) => tls.flush(),
        }
    }
}

/// rustls driven one socket operation at a time. Its `StreamOwned` loops
/// inside one call until a whole record has come, each socket read with the
/// timeout set before the call: a node sending a record a byte every 0.2 s
/// held a 2 s budget for 15 s. Here each call reads or writes the socket at
/// most once and answers `WouldBlock` when it needs another, so [`Bounded`]
/// checks the deadline and fits the socket's timeout between them.
struct TlsStream {
    conn: ClientConnection,
    socket: TcpStream,
}

impl TlsStream {
    /// Plaintext already decrypted, or else what one socket read completes.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.conn.reader().read(buf) {
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
            other => return other,
        }
        // At the socket's end, the reader answers `UnexpectedEof` (or 0 after
        // a `close_notify`).
        self.receive()?;
        self.conn.reader().read(buf)
    }

    /// Encrypts into rustls's buffer; sends some of it once that is full.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.conn.writer().write(buf)? {
            0 => {
                self.send()?;
                Err(io::ErrorKind::WouldBlock.into())
            }
            accepted => Ok(accepted),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.conn.wants_write() {
            self.send()?;
        }
        again_if(self.conn.wants_write())
    }

    /// One step of the handshake, which ends once its last message is sent.
    fn handshake(&mut self) -> io::Result<()> {
        if self.conn.wants_write() {
            self.send()?;
        } else if self.conn.is_handshaking() && self.receive()? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        again_if(self.conn.is_handshaking() || self.conn.wants_write())
    }

    /// One socket read, and the records it completed decrypted.
    fn receive(&mut self) -> io::Result<usize> {
        let read = self.conn.read_tls(&mut self.socket)?;
        self.conn
            .process_new_packets()
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?;
        Ok(read)
    }

    /// One socket write of what rustls has ready to send.
    fn send(&mut self) -> io::Result<()> {
        match self.conn.write_tls(&mut self.socket)? {
            0 => Err(io::ErrorKind::WriteZero.into()),
            _ => Ok(()),
        }
    }
}

/// `WouldBlock` (call again, deadline permitting) while there is `more` to do.
fn again_if(more: bool) -> io::Result<()> {
    if more {
        Err(io::ErrorKind::WouldBlock.into())
    } else {
        Ok(())
    }
}

/// The socket's timeouts as last set: a system call is made only when one
/// must shrink to fit what is left of a deadline.
#[derive(Default)]
struct Timeouts {
    read: Option<Duration>,
    write: Option<Duration>,
}

impl Timeouts {
    fn fit(
        &mut self,
        socket: &TcpStream,
        read: bool,
        write: bool,
        left: Duration,
    ) -> io::Result<()> {
        // Rounded down to 10 ms, so a warm worker's requests, each with a
        // deadline a little later than the last, set nothing.
        let timeout = if left > Duration::from_millis(20) {
            Duration::from_millis(left.as_millis() as u64 / 10 * 10)
        } else {
            left.max(Duration::from_millis(1))
        };
        if read && self.read.is_none_or(|set| set > left) {
            socket.set_read_timeout(Some(timeout))?;
            self.read = Some(timeout);
        }
        if write && self.write.is_none_or(|set| set > left) {
            socket.set_write_timeout(Some(timeout))?;
            self.write = Some(timeout);
        }
        Ok(())
    }
}

/// How long an exchange may wait for its replies: `timeout` from `now`, and
/// no later than `deadline`. It carries its clock reading, so a warm request
/// reads the clock once before sending.
#[derive(Clone, Copy)]
pub struct ReplyWindow {
    pub timeout: Duration,
    pub deadline: Instant,
    pub now: Instant,
}

impl ReplyWindow {
    pub fn new(timeout: Duration, deadline: Instant) -> ReplyWindow {
        ReplyWindow {
            timeout,
            deadline,
            now: Instant::now(),
        }
    }

    /// The same window, opening now (after a connect, say).
    pub fn reopened(self) -> ReplyWindow {
        ReplyWindow::new(self.timeout, self.deadline)
    }

    pub fn end(&self) -> Instant {
        self.now
            .checked_add(self.timeout)
            .map_or(self.deadline, |end| end.min(self.deadline))
    }
}

/// The stream seen through a deadline: every read, write and handshake step
/// waits at most what is left of it, and a read or write that timed out
/// early (a socket timeout set for an earlier, shorter budget) goes on.
struct Bounded<'a> {
    stream: &'a mut Stream,
    timeouts: &'a mut Timeouts,
    deadline: Instant,
    /// A clock reading just taken, for the first operation.
    now: Option<Instant>,
}

impl Bounded<'_> {
    fn io<T>(
        &mut self,
        (read, write): (bool, bool),
        mut op: impl FnMut(&mut Stream) -> io::Result<T>,
    ) -> io::Result<T> {
        loop {
            let now = self.now.take().unwrap_or_else(Instant::now);
            let left = self.deadline.saturating_duration_since(now);
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the node did not answer in time",
                ));
            }
            self.timeouts.fit(self.stream.socket(), read, write, left)?;
            match op(self.stream) {
                Err(error)
                    if matches!(
                        error.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                other => return other,
            }
        }
    }

    fn handshake(&mut self) -> io::Result<()> {
        self.io((true, true), |stream| match stream {
            Stream::Tls(tls) => tls.handshake(),
            Stream::Plain(_) => Ok(()),
        })
    }
}

impl Read for Bounded<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.io((true, false), |stream| stream.read(buf))
    }
}

impl Write for Bounded<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.io((false, true), |stream| stream.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.stream {
            // A plain socket buffers nothing: no clock reading for it.
            Stream::Plain(_) => Ok(()),
            Stream::Tls(_) => self.io((false, true), |stream| stream.flush()),
        }
    }
}

impl Link {
    /// A connection whose lookup, connect and TLS handshake end by
    /// `deadline`; its AUTH goes with the first exchange.
    pub fn open(
        config: &ConnectionConfig,
        addr: &NodeAddr,
        deadline: Instant,
    ) -> RedisResult<Link> {
        let socket = connect_tcp(addr, deadline)?;
        socket.set_nodelay(true)?;
        let stream = match &config.tls {
            Some(tls) => {
                let name = ServerName::try_from(addr.host.clone()).map_err(|_| {
                    RedisError::from((
                        ErrorKind::InvalidClientConfig,
                        "not a TLS server name",
                        addr.host.clone(),
                    ))
                })?;
                let conn =
                    ClientConnection::new(tls_config(tls)?, name).map_err(io::Error::other)?;
                Stream::Tls(Box::new(TlsStream { conn, socket }))
            }
            None => Stream::Plain(socket),
        };
        let mut link = Link {
            stream,
            reader: ReplyReader::default(),
            timeouts: Timeouts::default(),
            last_used: Instant::now(),
            addr: addr.clone(),
            pending_auth: None,
            auth_unread: false,
            owed: 0,
        };
        let handshake = Bounded {
            stream: &mut link.stream,
            timeouts: &mut link.timeouts,
            deadline,
            now: None,
        }
        .handshake();
        if let Err(error) = handshake {
            // A node at `maxclients` closes a TLS connection in the handshake
            // (no alert, the refusal unsent): a node that rejects the client
            // sends an alert.
            return Err(if closed(&error) {
                refusal_at_maxclients(AtMaxclients::InTlsHandshake(addr.clone()))
            } else {
                error.into()
            });
        }
        // AUTH goes out with the first command, in the same round trip: a
        // connection per request (`persistent=0`) costs no extra one.
        link.pending_auth = config.auth.as_ref().map(|auth| {
            let password = auth.password.as_bytes();
            match &auth.user {
                Some(user) => packed(&[b"AUTH", user.as_bytes(), password]),
                None => packed(&[b"AUTH", password]),
            }
        });
        Ok(link)
    }

    /// Sends `packed` and reads `skip + count` replies by `deadline`; returns
    /// the last `count`. Error replies come back as `Value::ServerError`,
    /// skipped ones too are only read past.
    pub fn exchange(
        &mut self,
        packed: &[u8],
        skip: usize,
        count: usize,
        window: ReplyWindow,
    ) -> RedisResult<Vec<Value>> {
        self.send(packed, window)?;
        self.receive(skip, count, window.end())
    }

    /// The first half of an exchange: sends `packed` within `window`, its
    /// replies left for [`Self::receive`].
    pub fn send(&mut self, packed: &[u8], window: ReplyWindow) -> RedisResult<()> {
        self.last_used = window.now;
        let auth = self.pending_auth.take();
        let mut stream = Bounded {
            stream: &mut self.stream,
            timeouts: &mut self.timeouts,
            deadline: window.end(),
            now: Some(window.now),
        };
        // AUTH and the first commands in one write: one packet, not two.
        match &auth {
            Some(auth) => stream.write_all(&[auth, packed].concat())?,
            None => stream.write_all(packed)?,
        }
        stream.flush()?;
        self.auth_unread = auth.is_some();
        Ok(())
    }

    /// The second half: reads `skip + count` replies by `deadline`; returns
    /// the last `count`.
    pub fn receive(
        &mut self,
        skip: usize,
        count: usize,
        deadline: Instant,
    ) -> RedisResult<Vec<Value>> {
        let auth_unread = std::mem::take(&mut self.auth_unread);
        let mut stream = Bounded {
            stream: &mut self.stream,
            timeouts: &mut self.timeouts,
            deadline,
            now: None,
        };
        if auth_unread {
            let reply = self.reader.read_reply(&mut stream)?;
            refused_for_maxclients(&self.addr, &reply)?;
            if let Value::ServerError(error) = reply {
                // The connection goes with the error: the replies behind are refusals.
                return Err(RedisError::from((
                    ErrorKind::AuthenticationFailed,
                    "AuthenticationFailed",
                    RedisError::from(error).to_string(),
                )));
            }
        }
        while self.owed > 0 {
            let reply = self.reader.read_reply(&mut stream)?;
            refused_for_maxclients(&self.addr, &reply)?;
            self.owed -= 1;
        }
        for _ in 0..skip {
            let reply = self.reader.read_reply(&mut stream)?;
            refused_for_maxclients(&self.addr, &reply)?;
        }
        let mut replies = Vec::with_capacity(count);
        for _ in 0..count {
            let reply = self.reader.read_reply(&mut stream)?;
            refused_for_maxclients(&self.addr, &reply)?;
            replies.push(reply);
        }
        Ok(replies)
    }

    /// One command whose reply may be given up on at the window's end
    /// without losing the connection: `None` then, the reply owed and read
    /// past before the next exchange's. Other errors as [`Self::exchange`].
    pub fn exchange_or_owe(
        &mut self,
        packed: &[u8],
        window: ReplyWindow,
    ) -> RedisResult<Option<Value>> {
        self.send(packed, window)?;
        // An AUTH sent with it is one reply more to read past.
        self.owed += 1 + usize::from(std::mem::take(&mut self.auth_unread));
        let mut stream = Bounded {
            stream: &mut self.stream,
            timeouts: &mut self.timeouts,
            deadline: window.end(),
            now: None,
        };
        let mut last = None;
        while self.owed > 0 {
            match self.reader.read_reply(&mut stream) {
                Ok(reply) => {
                    refused_for_maxclients(&self.addr, &reply)?;
                    self.owed -= 1;
                    last = Some(reply);
                }
                Err(error) if error.is_timeout() => return Ok(None),
                Err(error) => return Err(error),
            }
        }
        Ok(last)
    }
}

/// A request's connection to a locked session's primary, lent to the lease
/// watchdog while the request runs PHP code: renewals over it need no
/// connection of their own, which a node at `maxclients`, a lost SYN, a slow
/// TLS handshake or a password rotated since the request connected would
/// refuse or delay. The request takes it back before its next call.
#[derive(Clone)]
pub struct Lent(Arc<Mutex<Option<Link>>>);

/// How often a request that wants its connection back looks again while the
/// watchdog exchanges over it (one renewal: well under a millisecond unless
/// the node stalls).
const TAKE_BACK_PAUSE: Duration = Duration::from_millis(1);

impl Lent {
    pub fn new(link: Link) -> Lent {
        Lent(Arc::new(Mutex::new(Some(link))))
    }

    /// The link for one exchange of the watchdog's, unless the request is
    /// taking it back now or has (`None` inside).
    pub fn borrow(&self) -> Option<MutexGuard<'_, Option<Link>>> {
        match self.0.try_lock() {
            Ok(guard) => Some(guard),
            // An exchange cut short by a panic: the link may be out of step.
            Err(TryLockError::Poisoned(poisoned)) => {
                let mut guard = poisoned.into_inner();
                *guard = None;
                Some(guard)
            }
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// The link back for the request, waiting while the watchdog exchanges
    /// over it, up to `deadline`; `None` if the watchdog dropped it (broken)
    /// or still uses it then.
    pub fn take_back(&self, deadline: Instant) -> Option<Link> {
        loop {
            match self.0.try_lock() {
                Ok(mut guard) => return guard.take(),
                // An exchange cut short by a panic: the link may be out of step.
                Err(TryLockError::Poisoned(_)) => return None,
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(TAKE_BACK_PAUSE);
                }
                Err(TryLockError::WouldBlock) => return None,
            }
        }
    }
}

impl Link {
    /// Whether the node closed this connection (or sent what nobody asked
    /// for, or it failed) while it sat idle for at least [`IDLE_CHECK_AFTER`]
    /// before `now`.
    /// One that owes replies cannot tell by being readable: a close is
    /// found when they are read.
    pub fn closed_while_idle(&self, now: Instant) -> bool {
        self.owed == 0
            && now.saturating_duration_since(self.last_used) >= IDLE_CHECK_AFTER
            && poll::readable_or_closed(self.stream.socket().as_raw_fd())
    }
}

/// Which of `links` has something to read (a reply, EOF, an error) first,
/// waiting until `deadline`; `None` if none has by then.
pub fn first_ready(links: &[&Link], deadline: Instant) -> Option<usize> {
    let sockets: Vec<RawFd> = links
        .iter()
        .map(|link| link.stream.socket().as_raw_fd())
        .collect();
    poll::first_readable(&sockets, deadline)
}

/// A node that has `maxclients` clients already accepts a connection, sends
/// this error and closes it: whatever was sent on it gets it as its first
/// reply, and none of it ran.
fn refused_for_maxclients(addr: &NodeAddr, reply: &Value) -> RedisResult<()> {
    match reply {
        Value::ServerError(error)
            if error
                .details()
                .is_some_and(|text| text.starts_with("max number of clients")) =>
        {
            Err(refusal_at_maxclients(AtMaxclients::Said(addr.clone())))
        }
        _ => Ok(()),
    }
}

fn refusal_at_maxclients(refusal: AtMaxclients) -> RedisError {
    stats::node_connection(stats::NodeEvent::RefusedMaxclients);
    RedisError::from(io::Error::new(io::ErrorKind::ConnectionRefused, refusal))
}

/// The refusal of a node at `maxclients`, told apart from other failures:
/// the node is up and the slot map right, so the router waits for a free
/// connection rather than asking for a new map (over TLS, checking it at
/// each try: a proxy whose node is down refuses alike).
#[derive(Debug)]
enum AtMaxclients {
    /// It said so.
    Said(NodeAddr),
    /// It closed a TLS connection in the handshake, as it does then.
    InTlsHandshake(NodeAddr),
}

impl AtMaxclients {
    fn node(&self) -> &NodeAddr {
        match self {
            AtMaxclients::Said(node) | AtMaxclients::InTlsHandshake(node) => node,
        }
    }
}

impl std::fmt::Display for AtMaxclients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = match self {
            AtMaxclients::Said(_) => "refused the connection: max number of clients reached",
            AtMaxclients::InTlsHandshake(_) => {
                "closed the connection in the TLS handshake, as a node does at max number of clients (or a proxy whose node is down)"
            }
        };
        write!(
            f,
            "{} {how} (raise maxclients on the node, or hold fewer connections to it)",
            self.node()
        )
    }
}

impl std::error::Error for AtMaxclients {}

fn at_maxclients(error: &RedisError) -> Option<&AtMaxclients> {
    io_error(error)?.get_ref()?.downcast_ref::<AtMaxclients>()
}

/// Whether `error` is a close in the TLS handshake: a node at `maxclients`,
/// or a proxy whose node is down (a failover may be under way).
pub fn closed_in_tls_handshake(error: &RedisError) -> bool {
    matches!(at_maxclients(error), Some(AtMaxclients::InTlsHandshake(_)))
}

/// The node that refused the connection because it had `maxclients`
/// clients already (or, over TLS, closed it as such a node does), if that
/// is what `error` is.
pub fn refused_at_maxclients(error: &RedisError) -> Option<&NodeAddr> {
    at_maxclients(error).map(AtMaxclients::node)
}

/// Whether an exchange failed because the node had closed the connection
/// (EOF, reset, broken pipe) rather than by a timeout or a bad reply.
pub fn closed_by_peer(error: &RedisError) -> bool {
    io_error(error).is_some_and(closed)
}

fn closed(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}

/// The I/O error behind `error`, if it is one.
fn io_error(error: &RedisError) -> Option<&io::Error> {
    // The crate keeps the io::Error behind an Arc, its only public trace.
    type Shared = Arc<dyn std::error::Error + Send + Sync>;
    std::error::Error::source(error)?
        .downcast_ref::<Shared>()?
        .downcast_ref::<io::Error>()
}

/// Connects to `addr` by `deadline`: its IP address, or the addresses its
/// host name has (see [`resolve::connect`]).
fn connect_tcp(addr: &NodeAddr, deadline: Instant) -> io::Result<TcpStream> {
    let connect_any = |addresses: &[IpAddr]| connect_first(addresses, addr, deadline);
    match addr.host.parse::<IpAddr>() {
        Ok(ip) => connect_any(&[ip]),
        // On this thread, within the deadline: `getaddrinfo` takes no
        // timeout, and a thread given up on inside it would hand a
        // `pcntl_fork()` child the resolver's locks, held by a thread the
        // child does not have. `resolve` says where it still falls back to
        // `getaddrinfo`, unbounded.
        Err(_) => resolve::connect(&addr.host, deadline, connect_any),
    }
}

/// Connects to the first of `addresses` that answers by `deadline`.
fn connect_first(
    addresses: &[IpAddr],
    addr: &NodeAddr,
    deadline: Instant,
) -> io::Result<TcpStream> {
    let mut last_error = None;
    for &ip in addresses {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            break;
        }
        match TcpStream::connect_timeout(&SocketAddr::new(ip, addr.port), remaining) {
            Ok(stream) => return Ok(stream),
            Err(error) => last_error = Some(error),
        }
    }
    Err(last_error.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no address of {addr} answered in time"),
        )
    }))
}

/// Replies read from a stream into a buffer that grows only when full, so its
/// size stays within twice the bytes that arrived; bytes of the next reply
/// that came with this one stay for the next read.
#[derive(Default)]
struct ReplyReader {
    buffer: Vec<u8>,
    start: usize,
    end: usize,
    framer: Framer,
}

impl ReplyReader {
    fn read_reply(&mut self, stream: &mut impl Read) -> RedisResult<Value> {
        if self.start == self.end {
            self.fill(stream)?;
        }
        // Usually the whole reply came in one read: one pass parses it.
        if let Some((value, used)) = parse(&self.buffer[self.start..self.end])? {
            self.consume(used);
            return Ok(value);
        }
        // Otherwise it is framed as the rest arrives, and parsed once complete.
        loop {
            self.fill(stream)?;
            if let Some(length) = self.framer.frame(&self.buffer[self.start..self.end])? {
                self.framer.reset();
                let framed = &self.buffer[self.start..self.start + length];
                let Some((value, _)) = parse(framed)? else {
                    return Err(RedisError::from((
                        ErrorKind::Parse,
                        "a framed reply is incomplete",
                    )));
                };
                self.consume(length);
                return Ok(value);
            }
        }
    }

    fn consume(&mut self, length: usize) {
        self.start += length;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if self.buffer.len() > KEPT_BUFFER {
                self.buffer = Vec::new();
            }
        }
    }

    /// Reads whatever more has arrived.
    fn fill(&mut self, stream: &mut impl Read) -> io::Result<()> {
        if self.end == self.buffer.len() {
            if self.start > 0 {
                self.buffer.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                // Zeroed once, when the buffer grows; never before a read.
                let size = (self.buffer.len() * 2).max(INITIAL_BUFFER);
                self.buffer.resize(size, 0);
            }
        }
        loop {
            match stream.read(&mut self.buffer[self.end..]) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(read) => {
                    self.end += read;
                    return Ok(());
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
    }
}

/// The TLS client config the save_path's `stream[...]` options describe,
/// with certificates read from the files they name.
fn tls_config(tls: &Tls) -> RedisResult<Arc<rustls::ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config_error = |what: &'static str| {
        move |error: rustls::Error| {
            RedisError::from((ErrorKind::InvalidClientConfig, what, error.to_string()))
        }
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(config_error("no TLS version to offer"))?;
    let algorithms = provider.signature_verification_algorithms;
    let builder = if tls.verify_peer {
        let mut roots = RootCertStore::empty();
        match &tls.cafile {
            Some(path) => {
                for cert in CertificateDer::pem_slice_iter(&read_tls_file("cafile", path)?) {
                    let cert = cert.map_err(|error| tls_file_error("cafile", path, error))?;
                    roots
                        .add(cert)
                        .map_err(config_error("a cafile certificate is unusable"))?;
                }
            }
            None => {
                roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            }
        }
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|error| {
                RedisError::from((
                    ErrorKind::InvalidClientConfig,
                    "no CA certificate to verify the nodes with",
                    error.to_string(),
                ))
            })?;
        if tls.verify_peer_name {
            builder.with_webpki_verifier(verifier)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Lenient {
                    chain: Some(verifier),
                    algorithms,
                }))
        }
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Lenient {
                chain: None,
                algorithms,
            }))
    };
    let config = match &tls.client_cert {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(&read_tls_file("local_cert", cert)?)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|error| tls_file_error("local_cert", cert, error))?;
            let key = PrivateKeyDer::from_pem_slice(&read_tls_file("local_pk", key)?)
                .map_err(|error| tls_file_error("local_pk", key, error))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(config_error("the client certificate is unusable"))?
        }
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

fn read_tls_file(option: &str, path: &std::path::Path) -> RedisResult<Vec<u8>> {
    std::fs::read(path).map_err(|error| tls_file_error(option, path, error))
}

fn tls_file_error(
    option: &str,
    path: &std::path::Path,
    error: impl std::fmt::Display,
) -> RedisError {
    RedisError::from((
        ErrorKind::InvalidClientConfig,
        "cannot read a TLS file",
        format!("stream[{option}] {}: {error}", path.display()),
    ))
}

/// `stream[verify_peer]=0` (no `chain`: no certificate check at all, as
/// phpredis) or `stream[verify_peer_name]=0` (the chain is verified, the name
/// in it is not). Handshake signatures are always checked.
#[derive(Debug)]
struct Lenient {
    chain: Option<Arc<WebPkiServerVerifier>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream that hands out its bytes a few at a time, as a socket may.
    struct Trickle<'a> {
        bytes: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    fn read_all(bytes: &[u8], step: usize, count: usize) -> RedisResult<Vec<Value>> {
        let mut stream = Trickle { bytes, step };
        let mut reader = ReplyReader::default();
        (0..count).map(|_| reader.read_reply(&mut stream)).collect()
    }

    #[test]
    fn reads_every_reply_type_whatever_the_read_sizes() {
        let big = vec![b'x'; 100_000];
        let mut bytes = b"+OK\r\n+QUEUED\r\n:-42\r\n$-1\r\n*-1\r\n$0\r\n\r\n".to_vec();
        bytes.extend_from_slice(b"*3\r\n:1\r\n*2\r\n$3\r\na\r\n\r\n-ERR inner\r\n$2\r\nhi\r\n");
        bytes.extend_from_slice(format!("${}\r\n", big.len()).as_bytes());
        bytes.extend_from_slice(&big);
        bytes.extend_from_slice(b"\r\n-MOVED 3999 127.0.0.1:6381\r\n");
        let expected_error = redis::parse_redis_value(b"-ERR inner\r\n").unwrap();
        for step in [1, 2, 7, 4096, usize::MAX] {
            let replies = read_all(&bytes, step, 9).unwrap();
            assert_eq!(replies[0], Value::Okay);
            assert_eq!(replies[1], Value::SimpleString("QUEUED".into()));
            assert_eq!(replies[2], Value::Int(-42));
            assert_eq!(replies[3], Value::Nil);
            assert_eq!(replies[4], Value::Nil);
            assert_eq!(replies[5], Value::BulkString(Vec::new()));
            assert_eq!(
                replies[6],
                Value::Array(vec![
                    Value::Int(1),
                    Value::Array(vec![
                        Value::BulkString(b"a\r\n".to_vec()),
                        expected_error.clone()
                    ]),
                    Value::BulkString(b"hi".to_vec()),
                ])
            );
            assert_eq!(replies[7], Value::BulkString(big.clone()));
            let Value::ServerError(moved) = &replies[8] else {
                panic!("{:?}", replies[8]);
            };
            let moved = RedisError::from(moved.clone());
            assert_eq!(moved.redirect_node(), Some(("127.0.0.1:6381", 3999)));
        }
    }

    #[test]
    fn a_close_by_the_peer_is_told_from_other_failures() {
        for kind in [
            io::ErrorKind::UnexpectedEof,
            io::ErrorKind::ConnectionReset,
            io::ErrorKind::BrokenPipe,
        ] {
            assert!(
                closed_by_peer(&RedisError::from(io::Error::from(kind))),
                "{kind:?}"
            );
        }
        for kind in [io::ErrorKind::TimedOut, io::ErrorKind::ConnectionRefused] {
            assert!(
                !closed_by_peer(&RedisError::from(io::Error::from(kind))),
                "{kind:?}"
            );
        }
        assert!(!closed_by_peer(&RedisError::from((ErrorKind::Io, "no"))));
    }

    #[test]
    fn a_closed_or_garbled_stream_is_an_error_not_a_hang() {
        let eof = read_all(b"$10\r\nabc", 3, 1).unwrap_err();
        assert!(eof.is_connection_dropped(), "{eof}");
        for garbled in [
            &b"?what\r\n"[..],
            b":12x\r\n",
            b"$3\r\nabcde\r\n",
            b"+OK\n",
            b"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n",
        ] {
            let error = read_all(garbled, 64, 1).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Parse, "{garbled:?}");
        }
    }

    #[test]
    fn a_huge_announced_array_reserves_nothing_before_its_bytes_come() {
        let error = read_all(b"*2000000000\r\n:1\r\n", 64, 1).unwrap_err();
        assert!(error.is_connection_dropped(), "{error}");
    }

    #[test]
    fn memory_follows_the_bytes_that_arrived_not_the_length_announced() {
        let mut bytes = b"$536870912\r\n".to_vec();
        bytes.resize(bytes.len() + 100_000, b'x');
        let mut stream = Trickle {
            bytes: &bytes,
            step: 1000,
        };
        let mut reader = ReplyReader::default();
        let error = reader.read_reply(&mut stream).unwrap_err();
        assert!(error.is_connection_dropped(), "{error}");
        assert!(
            reader.buffer.len() <= 2 * bytes.len() + INITIAL_BUFFER,
            "{}",
            reader.buffer.len()
        );
    }

    #[test]
    fn a_large_reply_leaves_no_large_buffer_behind() {
        let big = vec![b'x'; 3 * KEPT_BUFFER];
        let mut bytes = format!("${}\r\n", big.len()).into_bytes();
        bytes.extend_from_slice(&big);
        bytes.extend_from_slice(b"\r\n");
        let mut stream = Trickle {
            bytes: &bytes,
            step: 64 * 1024,
        };
        let mut reader = ReplyReader::default();
        assert_eq!(
            reader.read_reply(&mut stream).unwrap(),
            Value::BulkString(big)
        );
        assert!(
            reader.buffer.len() <= KEPT_BUFFER,
            "{}",
            reader.buffer.len()
        );
    }

    #[test]
    fn bulk_lengths_above_512_mib_are_protocol_errors() {
        for header in [
            "$536870913",
            "$200000000000",
            "$4611686018427387904",
            "$9223372036854775807",
            "*1\r\n$536870913",
        ] {
            let bytes = format!("{header}\r\nabc");
            let error = read_all(bytes.as_bytes(), 7, 1).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Parse, "{header}: {error}");
        }
    }

    #[test]
    fn a_reply_streaming_in_is_framed_once_not_once_per_read() {
        // Parsing everything again on each read took minutes here.
        let mut bytes = b"*1000000\r\n".to_vec();
        for _ in 0..1_000_000 {
            bytes.extend_from_slice(b":1\r\n");
        }
        let replies = read_all(&bytes, 4096, 1).unwrap();
        let Value::Array(items) = &replies[0] else {
            panic!("not an array");
        };
        assert_eq!(items.len(), 1_000_000);
    }

    /// A node on a local port that answers every connection with `reply`,
    /// `step` bytes every `pause`.
    fn fake_node(reply: &'static [u8], step: usize, pause: Duration) -> NodeAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for mut socket in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    for chunk in reply.chunks(step) {
                        std::thread::sleep(pause);
                        if socket.write_all(chunk).is_err() {
                            return;
                        }
                    }
                    std::thread::sleep(Duration::from_secs(30));
                });
            }
        });
        NodeAddr {
            host: "127.0.0.1".into(),
            port,
        }
    }

    fn plain_config() -> ConnectionConfig {
        ConnectionConfig::from(&crate::save_path::parse("seed[]=127.0.0.1:1").unwrap())
    }

    #[test]
    fn a_lent_link_comes_back_once_the_watchdog_is_done_with_it() {
        let node = fake_node(b"+PONG\r\n", 64, Duration::ZERO);
        let open = || {
            Link::open(
                &plain_config(),
                &node,
                Instant::now() + Duration::from_secs(5),
            )
        };
        let lent = Lent::new(open().unwrap());
        let renewing = std::sync::Barrier::new(2);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let link = lent.borrow().expect("free");
                renewing.wait();
                std::thread::sleep(Duration::from_millis(100));
                drop(link);
            });
            renewing.wait();
            // While the watchdog exchanges over it: not lent twice; the
            // request waits no longer than its deadline...
            assert!(lent.borrow().is_none());
            let started = Instant::now();
            assert!(
                lent.take_back(started + Duration::from_millis(20))
                    .is_none()
            );
            assert!(started.elapsed() >= Duration::from_millis(20));
            // ...and gets it once the watchdog is done.
            assert!(lent.take_back(started + Duration::from_secs(5)).is_some());
        });
        // Taken back: nothing left for the watchdog.
        assert!(lent.borrow().expect("free").is_none());
        // One the watchdog dropped (a renewal failed on it): none to take back.
        let dropped = Lent::new(open().unwrap());
        *dropped.borrow().expect("free") = None;
        assert!(dropped.take_back(Instant::now()).is_none());
    }

    #[test]
    fn a_reply_given_up_on_is_owed_and_read_past_by_the_next_exchange() {
        // Two replies, a byte every 40 ms: the first is complete after 280 ms.
        let node = fake_node(b"+PONG\r\n:7\r\n", 1, Duration::from_millis(40));
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut link = Link::open(&plain_config(), &node, deadline).unwrap();
        let ping = b"*1\r\n$4\r\nPING\r\n";
        let soon = ReplyWindow::new(Duration::MAX, Instant::now() + Duration::from_millis(100));
        assert_eq!(link.exchange_or_owe(ping, soon).unwrap(), None);
        // Owing, it cannot tell a close from a late reply.
        assert!(!link.closed_while_idle(Instant::now() + Duration::from_secs(1)));
        let replies = link.exchange(ping, 0, 1, ReplyWindow::new(Duration::MAX, deadline));
        assert_eq!(replies.unwrap(), vec![Value::Int(7)]);
    }

    /// A PING to a fake node that answers `answer`, its first `skipped`
    /// replies read past.
    fn ping_fake_node(
        answer: &'static [u8],
        skipped: usize,
    ) -> (NodeAddr, RedisResult<Vec<Value>>) {
        let node = fake_node(answer, 64, Duration::ZERO);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut link = Link::open(&plain_config(), &node, deadline).unwrap();
        let window = ReplyWindow::new(Duration::MAX, deadline);
        let replies = link.exchange(b"*1\r\n$4\r\nPING\r\n", skipped, 1, window);
        (node, replies)
    }

    #[test]
    fn a_skipped_error_reply_leaves_the_next_reply_intact() {
        // ASKING ahead of a redirected request: its reply is read past, error or not.
        let (_, replies) = ping_fake_node(b"-ERR not now\r\n+OK\r\n", 1);
        assert_eq!(replies.unwrap(), [Value::Okay]);
    }

    #[test]
    fn a_node_at_maxclients_is_told_from_other_refusals() {
        // What a full node sends a new connection before it closes it.
        let (node, replies) = ping_fake_node(
            b"-ERR max number of clients + cluster connections reached\r\n",
            0,
        );
        let error = replies.unwrap_err();
        assert_eq!(refused_at_maxclients(&error), Some(&node));
        assert!(error.is_connection_refusal(), "{error}");
        assert!(
            error
                .to_string()
                .contains("refused the connection: max number of clients reached"),
            "{error}"
        );
        let refused = RedisError::from(io::Error::from(io::ErrorKind::ConnectionRefused));
        assert_eq!(refused_at_maxclients(&refused), None);
        let other = RedisError::from((ErrorKind::Io, "max number of clients reached"));
        assert_eq!(refused_at_maxclients(&other), None);
    }

    /// 1000 bytes that start with `header`, then `filler`: for a node that
    /// sends them a byte at a time.
    const fn trickle(header: &[u8], filler: u8) -> [u8; 1000] {
        let mut bytes = [filler; 1000];
        let mut i = 0;
        while i < header.len() {
            bytes[i] = header[i];
            i += 1;
        }
        bytes
    }

    #[test]
    fn a_reply_trickling_in_ends_at_the_deadline() {
        // One byte every 50 ms: each read gets something, the reply never ends.
        static TRICKLE: [u8; 1000] = trickle(b"$990\r\n", b'x');
        let node = fake_node(&TRICKLE, 1, Duration::from_millis(50));
        let started = Instant::now();
        let deadline = started + Duration::from_millis(500);
        let mut link = Link::open(&plain_config(), &node, deadline).unwrap();
        let error = link
            .exchange(
                b"*1\r\n$4\r\nPING\r\n",
                0,
                1,
                ReplyWindow::new(Duration::MAX, deadline),
            )
            .unwrap_err();
        assert!(error.is_timeout(), "{error}");
        let elapsed = started.elapsed();
        // Generous for a loaded machine; without the deadline it took 50 s.
        assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    }

    #[test]
    fn a_tls_handshake_trickling_in_ends_at_the_deadline() {
        // A handshake record one byte every 50 ms: each socket read gets
        // something, the record never ends. rustls alone waited for all of it.
        static TRICKLE: [u8; 1000] = trickle(&[0x16, 0x03, 0x03, 0x03, 0xe3], 0);
        let node = fake_node(&TRICKLE, 1, Duration::from_millis(50));
        let config = ConnectionConfig::from(
            &crate::save_path::parse("seed[]=127.0.0.1:1&stream[verify_peer]=0").unwrap(),
        );
        let started = Instant::now();
        let Err(error) = Link::open(&config, &node, started + Duration::from_millis(500)) else {
            panic!("a handshake that never ended succeeded");
        };
        assert!(error.is_timeout(), "{error}");
        let elapsed = started.elapsed();
        // Generous for a loaded machine; without the deadline it took 50 s.
        assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    }
}
