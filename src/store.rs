//! The storage interface the session logic runs on, and its implementation on
//! a Redis/Valkey cluster through the `redis` crate's sync cluster client.
//!
//! One cluster connection (sockets plus slot map) is kept per thread and
//! reused across requests: a PHP-FPM worker connects once, a threaded SAPI
//! never shares a socket between threads. It is created on first use, never
//! at module startup, because FPM forks after startup.

use std::cell::RefCell;
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::Result;
use redis::cluster::{ClusterClient, ClusterConnection, Connect};
use redis::{
    Cmd, ConnectionLike, ErrorKind, FromRedisValue, IntoConnectionInfo, RedisError, RedisResult,
    ServerErrorKind, cmd,
};

use crate::lock::LuaScript;
use crate::save_path::{Auth, SavePath, Seed, Tls};
use crate::settings::{ReleaseCommand, ReplicaAck};
use crate::stats;

/// What the session logic needs from storage. Every command goes to the
/// primary that owns the key's slot.
pub trait SessionStore {
    /// GET, or GETEX with a new TTL when `refresh` is set.
    fn get(&mut self, key: &[u8], refresh: Option<Duration>) -> Result<Option<Vec<u8>>>;
    /// SET with EX.
    fn set(&mut self, key: &[u8], value: &[u8], ttl: Duration) -> Result<()>;
    /// EXPIRE; false when the key does not exist.
    fn expire(&mut self, key: &[u8], ttl: Duration) -> Result<bool>;
    fn exists(&mut self, key: &[u8]) -> Result<bool>;
    fn delete(&mut self, key: &[u8]) -> Result<()>;
    /// Runs a script on the primary of its keys' slot (EVALSHA, then EVAL on NOSCRIPT).
    fn eval(&mut self, script: &LuaScript, keys: &[&[u8]], args: &[&[u8]]) -> Result<redis::Value>;
    /// [`Self::eval`] with `WAIT` pipelined behind it on the same primary, in
    /// the same round trip: the reply, and how many replicas acknowledged.
    fn eval_acked(
        &mut self,
        script: &LuaScript,
        keys: &[&[u8]],
        args: &[&[u8]],
        ack: ReplicaAck,
    ) -> Result<(redis::Value, u32)>;
    /// [`Self::set`] with `WAIT` pipelined behind it: how many replicas acknowledged.
    fn set_acked(
        &mut self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
        ack: ReplicaAck,
    ) -> Result<u32>;
    /// BLPOP: waits up to `timeout` (less if the read timeout is shorter) for
    /// an element on the list, and returns it.
    fn wait_for_wake(&mut self, key: &[u8], timeout: Duration) -> Result<Option<Vec<u8>>>;
    /// DELEX/DELIFEQ compare-and-delete: whether it deleted, or `None` for
    /// `Eval` and when the server lacks the command (then not tried again on
    /// this connection).
    fn delete_if_equal(
        &mut self,
        key: &[u8],
        value: &[u8],
        command: ReleaseCommand,
    ) -> Result<Option<bool>>;
}

/// Everything that identifies a cluster connection; a change of any of it
/// (another save_path) gets a new connection.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnectionConfig {
    pub seeds: Vec<Seed>,
    pub auth: Option<Auth>,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub tls: Option<Tls>,
}

impl From<&SavePath> for ConnectionConfig {
    fn from(path: &SavePath) -> Self {
        ConnectionConfig {
            seeds: path.seeds.clone(),
            auth: path.auth.clone(),
            connect_timeout: path.connect_timeout,
            read_timeout: path.read_timeout,
            tls: path.tls.clone(),
        }
    }
}

/// Redirects and retries the client makes for one command before our own
/// retry loop (a fresh connection and slot map) takes over: one follows a
/// MOVED or ASK cheaply; more would let a hung node cost the client's
/// retries times the timeouts before our deadline is even looked at.
const CLIENT_RETRIES: u32 = 1;

/// A cluster connection and what was learnt about its servers.
struct Connection {
    config: ConnectionConfig,
    cluster: ClusterConnection<NodeConnection>,
    /// Release commands that answered "unknown command".
    unsupported: Vec<ReleaseCommand>,
}

thread_local! {
    static CONNECTION: RefCell<Option<Connection>> = const { RefCell::new(None) };
}

pub struct ClusterStore {
    config: ConnectionConfig,
}

impl ClusterStore {
    pub fn new(config: ConnectionConfig) -> Self {
        ClusterStore { config }
    }

    /// Runs `f` on this thread's connection, connecting first if needed. A
    /// connection that saw a transport error is dropped, never reused.
    ///
    /// Failures a cluster recovers from by itself (a primary that died and is
    /// being replaced, a node restarting, a slot map that is still converging)
    /// are retried on a fresh connection and slot map until the read timeout
    /// has passed since the first try. Every step of the session protocol is
    /// safe to repeat: an acquire recognises its own secret, a write whose
    /// reply was lost finds its own data stored, a release finds nothing to do.
    fn with_connection<T>(
        &self,
        mut f: impl FnMut(&mut Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let deadline = Instant::now() + self.config.read_timeout;
        loop {
            match self.try_once(&mut f) {
                Err(Failure {
                    transient: true, ..
                }) if Instant::now() < deadline => sleep(RETRY_PAUSE),
                outcome => return outcome.map_err(|failure| failure.error),
            }
        }
    }

    fn try_once<T>(
        &self,
        f: &mut impl FnMut(&mut Connection) -> redis::RedisResult<T>,
    ) -> Result<T, Failure> {
        CONNECTION.with(|cell| {
            let mut cached = cell.borrow_mut();
            if cached.as_ref().is_none_or(|c| c.config != self.config) {
                *cached = None;
                let cluster = connect(&self.config).map_err(|err| {
                    Failure::new(err, "Couldn't map cluster keyspace using any provided seed")
                })?;
                stats::connected();
                *cached = Some(Connection {
                    config: self.config.clone(),
                    cluster,
                    unsupported: Vec::new(),
                });
            }
            let connection = cached.as_mut().expect("connection was just created");
            f(connection).map_err(|err| {
                if !leaves_connection_usable(&err) {
                    *cached = None;
                }
                Failure::new(err, "Error communicating with the Redis Cluster")
            })
        })
    }

    /// A WAIT that outlasted the read timeout would drop the connection.
    fn within_read_timeout(&self, ack: ReplicaAck) -> ReplicaAck {
        ReplicaAck {
            timeout: ack.timeout.min(self.config.read_timeout / 2),
            ..ack
        }
    }

    pub fn query<T: FromRedisValue>(&self, command: &Cmd) -> Result<T> {
        self.with_connection(|connection| command.query(&mut connection.cluster))
    }
}

fn connect(config: &ConnectionConfig) -> redis::RedisResult<ClusterConnection<NodeConnection>> {
    let nodes = config
        .seeds
        .iter()
        .map(|seed| redis::ConnectionAddr::Tcp(seed.host.clone(), seed.port));
    let mut builder = ClusterClient::builder(nodes)
        .connection_timeout(config.connect_timeout)
        .response_timeout(config.read_timeout)
        .retries(CLIENT_RETRIES)
        .tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true))
        .min_retry_wait(10)
        .max_retry_wait(100);
    if let Some(auth) = &config.auth {
        builder = builder.password(&auth.password);
        if let Some(user) = &auth.user {
            builder = builder.username(user);
        }
    }
    if let Some(tls) = &config.tls {
        builder = with_tls(builder, tls)?;
    }
    builder.build()?.get_generic_connection()
}

/// TLS for every node, with certificates read from the files the save_path names.
fn with_tls(
    builder: redis::cluster::ClusterClientBuilder,
    tls: &Tls,
) -> RedisResult<redis::cluster::ClusterClientBuilder> {
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
    let mode = if tls.verify_peer {
        redis::TlsMode::Secure
    } else {
        redis::TlsMode::Insecure
    };
    let mut builder = builder
        .tls(mode)
        .danger_accept_invalid_hostnames(!tls.verify_peer_name);
    if client_tls.is_some() || root_cert.is_some() {
        builder = builder.certs(redis::TlsCertificates {
            client_tls,
            root_cert,
        });
    }
    Ok(builder)
}

/// A connection to one node whose reads are bounded from the start. The
/// cluster client PINGs a new node before it applies the response timeout,
/// with no timeout at all: a node that accepts connections but does not
/// answer (stopped, swapping, in a long command) would hang the worker there.
/// Here the connect timeout covers that PING too.
struct NodeConnection(redis::Connection);

impl Connect for NodeConnection {
    fn connect<T: IntoConnectionInfo>(info: T, timeout: Option<Duration>) -> RedisResult<Self> {
        let connection = <redis::Connection as Connect>::connect(info, timeout)?;
        connection.set_read_timeout(timeout)?;
        connection.set_write_timeout(timeout)?;
        Ok(NodeConnection(connection))
    }

    fn send_packed_command(&mut self, cmd: &[u8]) -> RedisResult<()> {
        self.0.send_packed_command(cmd)
    }

    fn set_write_timeout(&self, dur: Option<Duration>) -> RedisResult<()> {
        self.0.set_write_timeout(dur)
    }

    fn set_read_timeout(&self, dur: Option<Duration>) -> RedisResult<()> {
        self.0.set_read_timeout(dur)
    }

    fn recv_response(&mut self) -> RedisResult<redis::Value> {
        self.0.recv_response()
    }
}

impl ConnectionLike for NodeConnection {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<redis::Value> {
        self.0.req_packed_command(cmd)
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<redis::Value>> {
        self.0.req_packed_commands(cmd, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }

    fn check_connection(&mut self) -> bool {
        self.0.check_connection()
    }

    fn is_open(&self) -> bool {
        self.0.is_open()
    }
}

/// A failed attempt, and whether trying again may succeed.
struct Failure {
    error: anyhow::Error,
    transient: bool,
}

impl Failure {
    /// Counts the error by kind and words it for the PHP warning. The
    /// client's error repeats its own text as its source, so only its
    /// display is kept.
    fn new(err: RedisError, context: &str) -> Self {
        stats::error(error_kind(&err));
        Failure {
            transient: is_transient(&err),
            error: anyhow::anyhow!("{context}: {err}"),
        }
    }
}

/// Pause between attempts while the cluster recovers.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

fn error_kind(err: &RedisError) -> stats::ErrorKind {
    let text = err.to_string();
    if text.contains("certificate") || text.contains("TLS") || text.contains("tls") {
        return stats::ErrorKind::Tls;
    }
    if err.is_timeout() {
        return stats::ErrorKind::Timeout;
    }
    match err.kind() {
        ErrorKind::AuthenticationFailed | ErrorKind::Server(ServerErrorKind::NoPerm) => {
            stats::ErrorKind::Auth
        }
        _ if text.contains("AuthenticationFailed") || text.contains("WRONGPASS") => {
            stats::ErrorKind::Auth
        }
        _ if err.code() == Some("OOM") => stats::ErrorKind::Oom,
        ErrorKind::Io => stats::ErrorKind::Io,
        _ if is_transient(err) => stats::ErrorKind::Cluster,
        _ => stats::ErrorKind::Server,
    }
}

/// Failures that last only until the cluster has failed over, a node is back
/// or the slot map has settled. Authentication, permission and script errors
/// are not among them: they fail at once.
fn is_transient(err: &RedisError) -> bool {
    // The client reports a refused login or certificate while connecting as
    // an I/O error whose text names the cause.
    let text = err.to_string();
    let refused = text.contains("AuthenticationFailed") || text.contains("certificate");
    !refused
        && matches!(
            err.kind(),
            ErrorKind::Io
                | ErrorKind::ClusterConnectionNotFound
                | ErrorKind::Client
                | ErrorKind::Server(
                    ServerErrorKind::TryAgain
                        | ServerErrorKind::ClusterDown
                        | ServerErrorKind::MasterDown
                        | ServerErrorKind::BusyLoading
                        | ServerErrorKind::ReadOnly
                        | ServerErrorKind::Moved
                        | ServerErrorKind::Ask
                )
        )
}

/// Error replies leave the connection in sync; anything else (I/O, timeout,
/// cluster down, protocol confusion) may not.
fn leaves_connection_usable(err: &RedisError) -> bool {
    matches!(
        err.kind(),
        ErrorKind::Extension
            | ErrorKind::UnexpectedReturnType
            | ErrorKind::Server(
                ServerErrorKind::ResponseError
                    | ServerErrorKind::NoScript
                    | ServerErrorKind::ExecAbort
                    | ServerErrorKind::CrossSlot
                    | ServerErrorKind::NoPerm
            )
    )
}

/// A TTL as Redis takes it in EX/EXPIRE: whole seconds, at least 1 (0 is an error).
pub fn whole_seconds(ttl: Duration) -> u64 {
    ttl.as_secs().max(1)
}

impl SessionStore for ClusterStore {
    fn get(&mut self, key: &[u8], refresh: Option<Duration>) -> Result<Option<Vec<u8>>> {
        match refresh {
            Some(ttl) => self.query(cmd("GETEX").arg(key).arg("EX").arg(whole_seconds(ttl))),
            None => self.query(cmd("GET").arg(key)),
        }
    }

    fn set(&mut self, key: &[u8], value: &[u8], ttl: Duration) -> Result<()> {
        self.query(
            cmd("SET")
                .arg(key)
                .arg(value)
                .arg("EX")
                .arg(whole_seconds(ttl)),
        )
    }

    fn expire(&mut self, key: &[u8], ttl: Duration) -> Result<bool> {
        self.query(cmd("EXPIRE").arg(key).arg(whole_seconds(ttl)))
    }

    fn exists(&mut self, key: &[u8]) -> Result<bool> {
        self.query(cmd("EXISTS").arg(key))
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.query::<i64>(cmd("DEL").arg(key)).map(drop)
    }

    fn eval(&mut self, script: &LuaScript, keys: &[&[u8]], args: &[&[u8]]) -> Result<redis::Value> {
        self.with_connection(|connection| {
            run_script(script, keys, args, |command| {
                command.query(&mut connection.cluster)
            })
        })
    }

    fn eval_acked(
        &mut self,
        script: &LuaScript,
        keys: &[&[u8]],
        args: &[&[u8]],
        ack: ReplicaAck,
    ) -> Result<(redis::Value, u32)> {
        let ack = self.within_read_timeout(ack);
        self.with_connection(|connection| {
            run_script(script, keys, args, |command| {
                query_then_wait(&mut connection.cluster, command, ack)
            })
        })
    }

    fn set_acked(
        &mut self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
        ack: ReplicaAck,
    ) -> Result<u32> {
        let ack = self.within_read_timeout(ack);
        let mut command = cmd("SET");
        command
            .arg(key)
            .arg(value)
            .arg("EX")
            .arg(whole_seconds(ttl));
        self.with_connection(|connection| {
            query_then_wait(&mut connection.cluster, &command, ack).map(|(_, acked)| acked)
        })
    }

    fn wait_for_wake(&mut self, key: &[u8], timeout: Duration) -> Result<Option<Vec<u8>>> {
        // A socket read timeout mid-BLPOP would drop the connection.
        let timeout = timeout.min(self.config.read_timeout / 2);
        let millis = timeout.as_millis().max(1);
        let seconds = format!("{}.{:03}", millis / 1000, millis % 1000);
        let popped: Option<(Vec<u8>, Vec<u8>)> = self.query(cmd("BLPOP").arg(key).arg(seconds))?;
        Ok(popped.map(|(_, element)| element))
    }

    fn delete_if_equal(
        &mut self,
        key: &[u8],
        value: &[u8],
        command: ReleaseCommand,
    ) -> Result<Option<bool>> {
        let request = match command {
            ReleaseCommand::Delex => cmd("DELEX").arg(key).arg("IFEQ").arg(value).clone(),
            ReleaseCommand::Delifeq => cmd("DELIFEQ").arg(key).arg(value).clone(),
            ReleaseCommand::Eval => return Ok(None),
        };
        self.with_connection(|connection| {
            if connection.unsupported.contains(&command) {
                return Ok(None);
            }
            match request.query::<i64>(&mut connection.cluster) {
                Ok(deleted) => Ok(Some(deleted == 1)),
                Err(err) if is_unknown_command(&err) => {
                    connection.unsupported.push(command);
                    Ok(None)
                }
                Err(err) => Err(err),
            }
        })
    }
}

/// Runs a script with `query`: EVALSHA, then EVAL if the server lacks it.
fn run_script<T>(
    script: &LuaScript,
    keys: &[&[u8]],
    args: &[&[u8]],
    mut query: impl FnMut(&Cmd) -> RedisResult<T>,
) -> RedisResult<T> {
    // Sized up front: growing the argument buffers cost more than the rest of building it.
    let count = 3 + keys.len() + args.len();
    let size: usize = keys.iter().chain(args).map(|arg| arg.len()).sum();
    let invoke = |verb: &str, body: &str| {
        let mut command = Cmd::with_capacity(count, size + verb.len() + body.len() + 4);
        command
            .arg(verb)
            .arg(body)
            .arg(keys.len())
            .arg(keys)
            .arg(args);
        command
    };
    match query(&invoke("EVALSHA", script.sha1())) {
        Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            query(&invoke("EVAL", script.source()))
        }
        result => result,
    }
}

/// `command`, then `WAIT replicas timeout`, in one round trip: routed as a
/// unit by the command's key, so WAIT asks the primary that ran it.
fn query_then_wait(
    cluster: &mut ClusterConnection<NodeConnection>,
    command: &Cmd,
    ack: ReplicaAck,
) -> RedisResult<(redis::Value, u32)> {
    let mut wait = cmd("WAIT");
    wait.arg(ack.replicas)
        .arg(u64::try_from(ack.timeout.as_millis()).unwrap_or(u64::MAX));
    let mut pipe = redis::Pipeline::with_capacity(2);
    pipe.add_command(command.clone()).add_command(wait);
    let mut replies = cluster.req_packed_commands(&pipe.get_packed_pipeline(), 0, 2)?;
    let acked = match replies.pop() {
        Some(reply) => u32::from_redis_value(reply)?,
        None => 0,
    };
    Ok((replies.pop().unwrap_or(redis::Value::Nil), acked))
}

fn is_unknown_command(err: &RedisError) -> bool {
    err.code().is_some_and(|code| code == "ERR")
        && err
            .detail()
            .is_some_and(|detail| detail.starts_with("unknown command"))
}

/// Tests against the real cluster named by RCS_SEEDS; `scripts/test.sh` runs
/// them with `cargo test -- --ignored` after starting a cluster.
#[cfg(test)]
pub(crate) mod cluster_tests {
    use super::*;
    use crate::keys::{hash_slot, lock_key};
    use crate::save_path;

    /// A store on the cluster named by RCS_SEEDS.
    pub(crate) fn store() -> ClusterStore {
        let seeds =
            std::env::var("RCS_SEEDS").expect("RCS_SEEDS=host:port,... of a running cluster");
        let path = seeds
            .split(',')
            .map(|seed| format!("seed[]={seed}"))
            .collect::<Vec<_>>()
            .join("&");
        ClusterStore::new((&save_path::parse(&path).unwrap()).into())
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn hash_slots_match_cluster_keyslot() {
        let store = store();
        let mut keys: Vec<Vec<u8>> = [
            "",
            "foo",
            "{user1000}.following",
            "foo{}{bar}",
            "foo{{bar}}zap",
            "{}",
            "a}b{c",
        ]
        .iter()
        .map(|k| k.as_bytes().to_vec())
        .collect();
        keys.extend(
            (0..200u32).map(|i| format!("PHPREDIS_CLUSTER_SESSION:{i:x}{}", i * 7919).into_bytes()),
        );
        keys.push(vec![0, 0xff, b'{', 0x80, b'}']);
        for key in keys {
            let server: u16 = store
                .query(cmd("CLUSTER").arg("KEYSLOT").arg(&key))
                .unwrap();
            assert_eq!(hash_slot(&key), server, "{key:?}");
            if let Ok(lock) = lock_key(&key) {
                let lock_slot: u16 = store
                    .query(cmd("CLUSTER").arg("KEYSLOT").arg(&lock))
                    .unwrap();
                assert_eq!(lock_slot, server, "lock key of {key:?}");
            }
        }
    }

    #[test]
    #[ignore = "needs a cluster: scripts/test.sh"]
    fn store_commands_round_trip_binary_data() {
        let mut store = store();
        let key = format!("RCS_UNIT:{}", std::process::id()).into_bytes();
        let value: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
        store.delete(&key).unwrap();
        assert_eq!(store.get(&key, None).unwrap(), None);
        assert!(!store.exists(&key).unwrap());
        assert!(!store.expire(&key, Duration::from_secs(5)).unwrap());
        store.set(&key, &value, Duration::from_secs(60)).unwrap();
        assert!(store.exists(&key).unwrap());
        assert_eq!(
            store.get(&key, Some(Duration::from_secs(90))).unwrap(),
            Some(value)
        );
        let ttl: i64 = store.query(cmd("TTL").arg(&key)).unwrap();
        assert!((85..=90).contains(&ttl), "{ttl}");
        store.delete(&key).unwrap();
        assert!(!store.exists(&key).unwrap());
    }
}
