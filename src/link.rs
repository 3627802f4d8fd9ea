//! One connection to one node: connect (TLS, AUTH), send packed commands,
//! read their replies.
//!
//! Plain TCP connections read replies with our own reader: a buffer kept for
//! the connection's life that is never cleared, and a parser for the RESP2
//! replies sessions get. The `redis` crate's reader zeroes up to 8 KiB before
//! every socket read, about a quarter of a warm request's client
//! instructions, and its API offers no way around it. TLS connections are the
//! `redis` crate's: there the cipher dwarfs the reader.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use redis::{
    Client, ConnectionAddr, ConnectionInfo, ErrorKind, IntoConnectionInfo, RedisConnectionInfo,
    RedisError, RedisResult, Value,
};

use crate::cluster::{ConnectionConfig, NodeAddr};
use crate::resp::{Parsed, packed, parse};
use crate::save_path::Tls;

/// What a new connection's reply buffer starts with: a session's usual
/// replies fit; larger ones grow it.
const INITIAL_BUFFER: usize = 16 * 1024;

pub enum Link {
    Plain(Box<PlainLink>),
    Tls(Box<redis::Connection>),
}

pub struct PlainLink {
    stream: TcpStream,
    reader: ReplyReader,
    read_timeout: Option<Duration>,
}

impl Link {
    /// A connection whose connect, TLS handshake and AUTH take at most `timeout`.
    pub fn open(
        config: &ConnectionConfig,
        addr: &NodeAddr,
        timeout: Duration,
    ) -> RedisResult<Link> {
        if let Some(tls) = &config.tls {
            let info = connection_info(config, tls, addr)?;
            let connection = Client::open(info)?.get_connection_with_timeout(timeout)?;
            connection.set_write_timeout(Some(config.read_timeout))?;
            return Ok(Link::Tls(Box::new(connection)));
        }
        let deadline = Instant::now() + timeout;
        let stream = connect_tcp(addr, deadline)?;
        stream.set_nodelay(true)?;
        stream.set_write_timeout(Some(config.read_timeout))?;
        let mut link = PlainLink {
            stream,
            reader: ReplyReader::default(),
            read_timeout: None,
        };
        if let Some(auth) = &config.auth {
            let password = auth.password.as_bytes();
            let command = match &auth.user {
                Some(user) => packed(&[b"AUTH", user.as_bytes(), password]),
                None => packed(&[b"AUTH", password]),
            };
            let remaining = deadline.saturating_duration_since(Instant::now());
            let reply = link.exchange(&command, 0, 1, remaining)?;
            if let Some(Value::ServerError(error)) = reply.into_iter().next() {
                let error = RedisError::from(error);
                return Err(RedisError::from((
                    ErrorKind::AuthenticationFailed,
                    "AuthenticationFailed",
                    error.to_string(),
                )));
            }
        }
        Ok(Link::Plain(Box::new(link)))
    }

    /// Sends `packed` and reads `skip + count` replies; returns the last
    /// `count`. Error replies come back as `Value::ServerError`.
    pub fn exchange(
        &mut self,
        packed: &[u8],
        skip: usize,
        count: usize,
        reply_timeout: Duration,
    ) -> RedisResult<Vec<Value>> {
        let reply_timeout = reply_timeout.max(Duration::from_millis(1));
        match self {
            Link::Plain(link) => link.exchange(packed, skip, count, reply_timeout),
            Link::Tls(connection) => {
                connection.set_read_timeout(Some(reply_timeout))?;
                redis::ConnectionLike::req_packed_commands(&mut **connection, packed, skip, count)
            }
        }
    }

    /// Lets go of a connection another process made (the parent of a fork)
    /// without touching what it shares: a plain socket is closed with
    /// `close(2)` alone; a TLS connection is forgotten, since dropping it
    /// would send `close_notify` on the parent's session.
    pub fn abandon(self) {
        match self {
            Link::Plain(link) => drop(link),
            Link::Tls(connection) => std::mem::forget(connection),
        }
    }
}

impl PlainLink {
    fn exchange(
        &mut self,
        packed: &[u8],
        skip: usize,
        count: usize,
        reply_timeout: Duration,
    ) -> RedisResult<Vec<Value>> {
        // A socket option is a system call: set it only when it changes.
        if self.read_timeout != Some(reply_timeout) {
            self.stream.set_read_timeout(Some(reply_timeout))?;
            self.read_timeout = Some(reply_timeout);
        }
        self.stream.write_all(packed)?;
        for _ in 0..skip {
            self.reader.read_reply(&mut self.stream)?;
        }
        let mut replies = Vec::with_capacity(count);
        for _ in 0..count {
            replies.push(self.reader.read_reply(&mut self.stream)?);
        }
        Ok(replies)
    }
}

/// Connects to the first of the host's addresses that answers by `deadline`.
fn connect_tcp(addr: &NodeAddr, deadline: Instant) -> io::Result<TcpStream> {
    let mut last_error = None;
    for address in (addr.host.as_str(), addr.port).to_socket_addrs()? {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            break;
        }
        match TcpStream::connect_timeout(&address, remaining) {
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

/// Replies read from a stream into a buffer that keeps its size; bytes of the
/// next reply that came with this one stay for the next read.
#[derive(Default)]
struct ReplyReader {
    buffer: Vec<u8>,
    start: usize,
    end: usize,
}

impl ReplyReader {
    fn read_reply(&mut self, stream: &mut impl Read) -> RedisResult<Value> {
        loop {
            match parse(&self.buffer[self.start..self.end])? {
                Parsed::Done(value, used) => {
                    self.start += used;
                    if self.start == self.end {
                        self.start = 0;
                        self.end = 0;
                    }
                    return Ok(value);
                }
                Parsed::Incomplete(needed) => self.fill(stream, needed)?,
            }
        }
    }

    /// Reads more of a reply that needs at least `needed` bytes in all.
    fn fill(&mut self, stream: &mut impl Read, needed: usize) -> io::Result<()> {
        if self.start > 0 && self.start + needed > self.buffer.len() {
            self.buffer.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buffer.len() || needed > self.buffer.len() {
            // Zeroed once, when the buffer grows; never before a read.
            let size = needed.max(self.buffer.len() * 2).max(INITIAL_BUFFER);
            self.buffer.resize(size, 0);
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

/// A TLS connection, with certificates read from the files the save_path names.
fn connection_info(
    config: &ConnectionConfig,
    tls: &Tls,
    addr: &NodeAddr,
) -> RedisResult<ConnectionInfo> {
    let mut redis = RedisConnectionInfo::default().set_skip_set_lib_name();
    if let Some(auth) = &config.auth {
        redis = redis.set_password(&auth.password);
        if let Some(user) = &auth.user {
            redis = redis.set_username(user);
        }
    }
    Ok(tls_addr(tls, addr)?
        .into_connection_info()?
        .set_redis_settings(redis)
        .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true)))
}

fn tls_addr(tls: &Tls, addr: &NodeAddr) -> RedisResult<ConnectionAddr> {
    // rustls needs its crypto provider chosen once per process.
    static PROVIDER: std::sync::Once = std::sync::Once::new();
    PROVIDER.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    let read = |option: &str, path: &std::path::Path| {
        std::fs::read(path).map_err(|err| {
            RedisError::from((
                ErrorKind::InvalidClientConfig,
                "cannot read a TLS file",
                format!("stream[{option}] {}: {err}", path.display()),
            ))
        })
    };
    let client_tls = match &tls.client_cert {
        Some((cert, key)) => Some(redis::ClientTlsConfig {
            client_cert: read("local_cert", cert)?,
            client_key: read("local_pk", key)?,
        }),
        None => None,
    };
    let root_cert = tls
        .cafile
        .as_deref()
        .map(|path| read("cafile", path))
        .transpose()?;
    let plain = ConnectionAddr::TcpTls {
        host: addr.host.clone(),
        port: addr.port,
        insecure: !tls.verify_peer,
        tls_params: None,
    };
    let mut address = if client_tls.is_some() || root_cert.is_some() {
        let certificates = redis::TlsCertificates {
            client_tls,
            root_cert,
        };
        Client::build_with_tls(plain, certificates)?
            .get_connection_info()
            .addr()
            .clone()
    } else {
        plain
    };
    address.set_danger_accept_invalid_hostnames(!tls.verify_peer_name);
    Ok(address)
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
}
