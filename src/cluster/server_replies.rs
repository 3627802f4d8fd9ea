//! What the servers (Redis 7.0 and 8.0, Valkey 8.1 and 9.1) really answer
//! where the router and the store sort replies: each reply is provoked, read
//! by the extension's own reader and sorted by the same functions. The errors
//! a shared cluster must not show (the cluster down, a node loading, a busy
//! script) come from nodes of the test's own, started from `RCS_SERVER_BIN`.
//! `scripts/test.sh` runs them on every server it tests.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::thread::sleep;
use std::time::{Duration, Instant};

use redis::{ErrorKind, RedisError, ServerErrorKind, Value};

use super::{NodeAddr, is_redirect, is_transient, parse_slots};
use crate::keys::hash_slot;
use crate::lock::SCRIPTS;
use crate::resp::{packed, parse};
use crate::save_path;
use crate::store::cluster_tests::owners;
use crate::store::{ClusterStore, LockStore, PlainTake};

/// One connection to one node, speaking through the extension's parser.
struct Raw {
    stream: TcpStream,
    buffer: Vec<u8>,
}

impl Raw {
    fn to(addr: &str) -> Raw {
        let stream = TcpStream::connect(addr).unwrap_or_else(|err| panic!("{addr}: {err}"));
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Raw {
            stream,
            buffer: Vec::new(),
        }
    }

    fn send(&mut self, args: &[&str]) {
        let args: Vec<&[u8]> = args.iter().map(|arg| arg.as_bytes()).collect();
        self.stream.write_all(&packed(&args)).unwrap();
    }

    fn reply(&mut self) -> Value {
        loop {
            if let Some((value, used)) = parse(&self.buffer).unwrap() {
                self.buffer.drain(..used);
                return value;
            }
            let mut chunk = [0; 16 * 1024];
            let read = self.stream.read(&mut chunk).unwrap();
            assert!(read > 0, "the node closed the connection");
            self.buffer.extend_from_slice(&chunk[..read]);
        }
    }

    fn call(&mut self, args: &[&str]) -> Value {
        self.send(args);
        self.reply()
    }
}

/// The error in `reply`, as the router turns it into a `RedisError`.
fn error(reply: &Value) -> RedisError {
    match reply {
        Value::ServerError(error) => error.clone().into(),
        other => panic!("not an error reply: {other:?}"),
    }
}

fn seeds() -> Vec<String> {
    std::env::var("RCS_SEEDS")
        .expect("RCS_SEEDS=host:port,... of a running cluster")
        .split(',')
        .map(str::to_owned)
        .collect()
}

fn node_id(addr: &str) -> String {
    match Raw::to(addr).call(&["CLUSTER", "MYID"]) {
        Value::BulkString(id) => String::from_utf8(id).unwrap(),
        other => panic!("CLUSTER MYID: {other:?}"),
    }
}

/// A key of its own for this run, and a key whose slot another primary owns.
fn keys_on_two_primaries(name: &str) -> (String, String, String, String) {
    let tag = format!("rcs-replies-{name}-{}", std::process::id());
    let key = format!("{{{tag}}}a");
    let (primary, _) = owners(key.as_bytes());
    for i in 0.. {
        let other_key = format!("{tag}-other-{i}");
        let (other, _) = owners(other_key.as_bytes());
        if other != primary {
            return (key, primary, other_key, other);
        }
    }
    unreachable!()
}

/// Puts a slot back as it was, whatever the test did to it.
struct StableSlot<'a> {
    slot: u16,
    nodes: [&'a str; 2],
}

impl Drop for StableSlot<'_> {
    fn drop(&mut self) {
        for addr in self.nodes {
            Raw::to(addr).call(&["CLUSTER", "SETSLOT", &self.slot.to_string(), "STABLE"]);
        }
    }
}

#[test]
#[ignore = "needs a cluster: scripts/test.sh"]
fn moved_ask_and_tryagain_name_what_the_router_follows() {
    let (key, primary, _, other) = keys_on_two_primaries("redirects");
    let slot = hash_slot(key.as_bytes());
    let mut at_other = Raw::to(&other);
    let moved = at_other.call(&["GET", &key]);
    assert!(is_redirect(&moved), "{moved:?}");
    let moved = error(&moved);
    assert_eq!(moved.kind(), ErrorKind::Server(ServerErrorKind::Moved));
    assert_eq!(moved.redirect_node(), Some((primary.as_str(), slot)));

    // The slot migrating from its primary to the other: a key not moved yet
    // is served where it is, one that is gone is asked for on the target, and
    // a script over both is refused until they are on one node.
    let sibling = key.replace("}a", "}b");
    let mut at_primary = Raw::to(&primary);
    at_primary.call(&["SET", &key, "here"]);
    let _stable = StableSlot {
        slot,
        nodes: [&primary, &other],
    };
    let (primary_id, other_id) = (node_id(&primary), node_id(&other));
    let setslot = |raw: &mut Raw, state: &str, id: &str| {
        let reply = raw.call(&["CLUSTER", "SETSLOT", &slot.to_string(), state, id]);
        assert_eq!(reply, Value::Okay, "SETSLOT {state}");
    };
    setslot(&mut at_other, "IMPORTING", &primary_id);
    setslot(&mut at_primary, "MIGRATING", &other_id);
    let ask = at_primary.call(&["GET", &sibling]);
    assert!(is_redirect(&ask), "{ask:?}");
    let ask = error(&ask);
    assert_eq!(ask.kind(), ErrorKind::Server(ServerErrorKind::Ask));
    assert_eq!(ask.redirect_node(), Some((other.as_str(), slot)));
    let tryagain = at_primary.call(&["EVAL", "return 1", "2", &key, &sibling]);
    assert!(is_redirect(&tryagain), "{tryagain:?}");
    assert_eq!(
        error(&tryagain).kind(),
        ErrorKind::Server(ServerErrorKind::TryAgain)
    );
    at_primary.call(&["DEL", &key]);
}

#[test]
#[ignore = "needs a cluster: scripts/test.sh"]
fn a_keyless_write_on_a_replica_is_readonly_and_recovered_from() {
    let (key, _, _, _) = keys_on_two_primaries("readonly");
    // A replica still syncing is not listed yet.
    let started = Instant::now();
    let replica = loop {
        let (_, replica) = owners(key.as_bytes());
        if !replica.is_empty() {
            break replica;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{key}: no replica"
        );
        sleep(Duration::from_millis(50));
    };
    let mut at_replica = Raw::to(&replica);
    let role = at_replica.call(&["ROLE"]);
    assert!(format!("{role:?}").contains("slave"), "{role:?}");
    // A write without keys is not redirected: the replica refuses it. On a
    // primary it would only find no such library.
    let reply = at_replica.call(&["FUNCTION", "DELETE", "rcs_no_such_library"]);
    assert!(is_redirect(&reply), "{reply:?}");
    let readonly = error(&reply);
    assert_eq!(
        readonly.kind(),
        ErrorKind::Server(ServerErrorKind::ReadOnly)
    );
    assert!(is_transient(&readonly));
}

#[test]
#[ignore = "needs a cluster: scripts/test.sh"]
fn scripts_hash_and_load_as_the_store_expects() {
    let mut at_seed = Raw::to(&seeds()[0]);
    let unknown = error(&at_seed.call(&["EVALSHA", &"f".repeat(40), "0"]));
    assert_eq!(unknown.kind(), ErrorKind::Server(ServerErrorKind::NoScript));
    for script in SCRIPTS {
        let loaded = at_seed.call(&["SCRIPT", "LOAD", script.source()]);
        assert_eq!(
            loaded,
            Value::BulkString(script.sha1().as_bytes().to_vec()),
            "{}",
            script.source()
        );
    }
}

/// `CLUSTER SLOTS`, which the router reads, and `CLUSTER SHARDS` name the
/// same primary for every slot.
#[test]
#[ignore = "needs a cluster: scripts/test.sh"]
fn cluster_slots_and_cluster_shards_agree() {
    let seed = &seeds()[0];
    let (host, port) = seed.rsplit_once(':').unwrap();
    let asked = NodeAddr {
        host: host.to_owned(),
        port: port.parse().unwrap(),
    };
    let slots = parse_slots(Some(Raw::to(seed).call(&["CLUSTER", "SLOTS"])), &asked).unwrap();
    let mut from_slots = vec![String::new(); 16384];
    for range in slots {
        from_slots[usize::from(range.start)..=usize::from(range.end)]
            .fill(range.primary.to_string());
    }
    let Value::Array(shards) = Raw::to(seed).call(&["CLUSTER", "SHARDS"]) else {
        panic!("CLUSTER SHARDS is not an array");
    };
    let mut from_shards = vec![String::new(); 16384];
    for shard in shards {
        let field = |map: &Value, name: &str| -> Value {
            let items: Vec<(Value, Value)> = match map {
                Value::Map(items) => items.clone(),
                Value::Array(flat) => flat
                    .chunks(2)
                    .map(|pair| (pair[0].clone(), pair[1].clone()))
                    .collect(),
                other => panic!("not a map: {other:?}"),
            };
            items
                .into_iter()
                .find(|(key, _)| *key == Value::BulkString(name.as_bytes().to_vec()))
                .map(|(_, value)| value)
                .unwrap_or_else(|| panic!("no {name} in {map:?}"))
        };
        let Value::Array(ranges) = field(&shard, "slots") else {
            panic!("slots");
        };
        let Value::Array(nodes) = field(&shard, "nodes") else {
            panic!("nodes");
        };
        let primary = nodes
            .iter()
            .find(|node| field(node, "role") == Value::BulkString(b"master".to_vec()))
            .expect("a shard without a primary");
        let text = |value: Value| match value {
            Value::BulkString(bytes) => String::from_utf8(bytes).unwrap(),
            Value::Int(n) => n.to_string(),
            other => panic!("{other:?}"),
        };
        let addr = format!(
            "{}:{}",
            text(field(primary, "ip")),
            text(field(primary, "port"))
        );
        for pair in ranges.chunks(2) {
            let bound = |value: &Value| match value {
                Value::Int(n) => usize::try_from(*n).unwrap(),
                other => panic!("{other:?}"),
            };
            from_shards[bound(&pair[0])..=bound(&pair[1])].fill(addr.clone());
        }
    }
    assert!(from_slots.iter().all(|owner| !owner.is_empty()));
    assert_eq!(from_slots, from_shards);
}

/// A node of the test's own, on a free port, in a directory of its own;
/// killed when dropped.
struct OwnNode {
    child: Child,
    addr: String,
    dir: PathBuf,
}

impl OwnNode {
    fn start(name: &str, args: &[&str]) -> OwnNode {
        let server = std::env::var("RCS_SERVER_BIN")
            .expect("RCS_SERVER_BIN=the cluster's redis-server or valkey-server");
        // A cluster node also listens on its port + 10000. Each process
        // starts looking elsewhere: test runs side by side (the test command
        // runs several) would otherwise find the same port free at once.
        let offset = std::process::id() % 500 * 20;
        let port = (0..10000)
            .map(|i| 20000 + (offset + i) % 10000)
            .map(|port| u16::try_from(port).expect("below 30000"))
            .find(|port| {
                TcpListener::bind(("127.0.0.1", *port)).is_ok()
                    && TcpListener::bind(("127.0.0.1", port + 10000)).is_ok()
            })
            .expect("a free port");
        let dir = std::env::temp_dir().join(format!("rcs-replies-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        OwnNode::start_in(&server, dir, port, args)
    }

    fn start_in(server: &str, dir: PathBuf, port: u16, args: &[&str]) -> OwnNode {
        let port_text = port.to_string();
        let mut command = Command::new(server);
        command
            .args(["--port", &port_text, "--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", "no", "--dir"])
            .arg(&dir)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = command.spawn().unwrap();
        let addr = format!("127.0.0.1:{port}");
        let started = Instant::now();
        while TcpStream::connect(&addr).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{server} did not start"
            );
            sleep(Duration::from_millis(20));
        }
        OwnNode { child, addr, dir }
    }

    /// Stops it, keeping its directory (its dump), and starts it again.
    fn restart(mut self, args: &[&str]) -> OwnNode {
        let server = std::env::var("RCS_SERVER_BIN").unwrap();
        let port = self.addr.rsplit_once(':').unwrap().1.parse().unwrap();
        let dir = std::mem::take(&mut self.dir);
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        OwnNode::start_in(&server, dir, port, args)
    }
}

impl Drop for OwnNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !self.dir.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[test]
#[ignore = "needs a cluster: scripts/test.sh"]
fn cluster_down_and_loading_are_waited_out() {
    // A cluster node that serves no slot: its cluster is down.
    let lone = OwnNode::start("lone", &["--cluster-enabled", "yes"]);
    let down = Raw::to(&lone.addr).call(&["GET", "some-key"]);
    assert!(is_redirect(&down), "{down:?}");
    let down = error(&down);
    assert_eq!(down.kind(), ErrorKind::Server(ServerErrorKind::ClusterDown));
    assert!(is_transient(&down));

    // A node loading its data set, slowed down per key.
    let loading = OwnNode::start("loading", &[]);
    let mut raw = Raw::to(&loading.addr);
    for batch in 0..20 {
        for i in 0..1000 {
            raw.send(&["SET", &format!("k{batch}-{i}"), "v"]);
        }
        for _ in 0..1000 {
            assert_eq!(raw.reply(), Value::Okay);
        }
    }
    assert_eq!(raw.call(&["SAVE"]), Value::Okay);
    drop(raw);
    // It answers clients only between pieces of the file: make them small.
    let loading = loading.restart(&[
        "--key-load-delay",
        "100",
        "--loading-process-events-interval-bytes",
        "1024",
    ]);
    let mut raw = Raw::to(&loading.addr);
    let reply = raw.call(&["GET", "k0-0"]);
    assert!(is_redirect(&reply), "{reply:?}");
    let error = error(&reply);
    assert_eq!(
        error.kind(),
        ErrorKind::Server(ServerErrorKind::BusyLoading)
    );
    assert!(is_transient(&error));
}

/// With `cluster-allow-reads-when-down`, a down cluster serves reads and
/// refuses writes: a plain write with `CLUSTERDOWN`, a script at its first
/// write with a script error of its own words, which the router must wait
/// out (or fall back on) as it does `CLUSTERDOWN`.
#[test]
#[ignore = "needs a cluster: scripts/test.sh"]
fn a_down_cluster_that_serves_reads_refuses_writes_and_scripts_alike() {
    let node = OwnNode::start(
        "reads-when-down",
        &[
            "--cluster-enabled",
            "yes",
            "--cluster-allow-reads-when-down",
            "yes",
        ],
    );
    let mut raw = Raw::to(&node.addr);
    // It owns the key's slot, but not all slots: its cluster is down.
    let slot = hash_slot(b"k").to_string();
    assert_eq!(raw.call(&["CLUSTER", "ADDSLOTS", &slot]), Value::Okay);
    wait_for_cluster_state(&mut raw, "fail");
    assert_eq!(raw.call(&["GET", "k"]), Value::Nil);
    let set = raw.call(&["SET", "k", "v"]);
    assert!(is_redirect(&set), "{set:?}");
    assert_eq!(
        error(&set).kind(),
        ErrorKind::Server(ServerErrorKind::ClusterDown)
    );
    let script = raw.call(&["EVAL", "return redis.call('SET', KEYS[1], 'v')", "1", "k"]);
    assert!(is_redirect(&script), "{script:?}");
    assert_eq!(raw.call(&["GET", "k"]), Value::Nil);
    // Any other script error is the script's own.
    let failed = raw.call(&["EVAL", "return redis.call('NOSUCHCOMMAND')", "0"]);
    assert!(
        matches!(failed, Value::ServerError(_)) && !is_redirect(&failed),
        "{failed:?}"
    );
}

/// Until the node's `CLUSTER INFO` says `cluster_state:STATE` (at most 10 s).
fn wait_for_cluster_state(raw: &mut Raw, state: &str) {
    let wanted = format!("cluster_state:{state}");
    let started = Instant::now();
    while !matches!(raw.call(&["CLUSTER", "INFO"]), Value::BulkString(info)
        if String::from_utf8_lossy(&info).contains(&wanted))
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the cluster never reached {wanted}"
        );
        sleep(Duration::from_millis(20));
    }
}

/// A slot no node serves (mid-failover, or mid-migration on a map that
/// lost it) is waited for within the budget by the plain lock try too,
/// whose pipeline otherwise comes back unfollowed: it once failed at once
/// with "missing reply to SET NX and GET".
#[test]
#[ignore = "needs a cluster: scripts/test.sh"]
fn a_slot_without_an_owner_is_waited_for_by_the_plain_lock_try() {
    let node = OwnNode::start(
        "ownerless",
        &[
            "--cluster-enabled",
            "yes",
            "--cluster-require-full-coverage",
            "no",
        ],
    );
    let slot = hash_slot(b"{s}");
    let mut raw = Raw::to(&node.addr);
    for range in [(0, slot.checked_sub(1)), (slot + 1, Some(16383))] {
        if let (start, Some(end)) = range
            && start <= end
        {
            let (start, end) = (start.to_string(), end.to_string());
            assert_eq!(
                raw.call(&["CLUSTER", "ADDSLOTSRANGE", &start, &end]),
                Value::Okay
            );
        }
    }
    // A new primary turns ok 2 s after it started at the earliest.
    wait_for_cluster_state(&mut raw, "ok");
    // Its own map: another run's, shared on the same port, may name an owner.
    let path = format!(
        "seed[]={}&timeout=2&read_timeout=2&shared_slot_map=0",
        node.addr
    );
    let mut store = ClusterStore::new(Rc::new((&save_path::parse(&path).unwrap()).into()));
    let addr = node.addr.clone();
    let owner = std::thread::spawn(move || {
        sleep(Duration::from_millis(500));
        Raw::to(&addr).call(&["CLUSTER", "ADDSLOTS", &slot.to_string()])
    });
    let started = Instant::now();
    let read = store.lock_and_read(&PlainTake {
        lock: b"{s}_LOCK",
        secret: b"secret",
        lock_ms: b"5000",
        data: b"{s}",
        log: b"{s}_LOCK_DONE",
        beat: None,
    });
    assert_eq!(owner.join().unwrap(), Value::Okay);
    let read = read.unwrap().expect("the lock taken");
    assert_eq!(read.data, None, "no data");
    assert!(started.elapsed() >= Duration::from_millis(400));
}

#[test]
#[ignore = "needs a cluster: scripts/test.sh"]
fn a_busy_script_and_an_unblocked_pop_fail_the_request() {
    let own = OwnNode::start("busy", &["--busy-reply-threshold", "100"]);
    // UNBLOCKED: a blocked pop ended by another client. Not a redirect: the
    // lock's wait takes it as a piece of waiting that ended.
    let mut popper = Raw::to(&own.addr);
    let Value::Int(id) = popper.call(&["CLIENT", "ID"]) else {
        panic!("CLIENT ID");
    };
    popper.send(&["BLPOP", "some-list", "10"]);
    let mut other = Raw::to(&own.addr);
    let started = Instant::now();
    while other.call(&["CLIENT", "UNBLOCK", &id.to_string(), "ERROR"]) != Value::Int(1) {
        assert!(started.elapsed() < Duration::from_secs(5), "never blocked");
        sleep(Duration::from_millis(10));
    }
    let unblocked = popper.reply();
    assert!(!is_redirect(&unblocked), "{unblocked:?}");
    assert_eq!(error(&unblocked).code(), Some("UNBLOCKED"));

    // BUSY: another client's script runs past busy-reply-threshold. The
    // request did not run; it fails with a warning rather than wait.
    let mut runner = Raw::to(&own.addr);
    runner.send(&[
        "EVAL",
        "local t = redis.call('TIME') local start = t[1] * 1000000 + t[2]
         repeat local now = redis.call('TIME') until now[1] * 1000000 + now[2] - start > 1000000
         return 1",
        "0",
    ]);
    let started = Instant::now();
    let busy = loop {
        let reply = other.call(&["GET", "some-key"]);
        if matches!(reply, Value::ServerError(_)) || started.elapsed() > Duration::from_secs(5) {
            break reply;
        }
        sleep(Duration::from_millis(20));
    };
    assert!(!is_redirect(&busy), "{busy:?}");
    let busy = error(&busy);
    assert_eq!(busy.code(), Some("BUSY"));
    assert!(!is_transient(&busy));
    assert_eq!(runner.reply(), Value::Int(1));
}

#[test]
#[ignore = "needs a cluster: scripts/test.sh"]
fn a_stalled_primary_delays_no_other_primarys_batch() {
    // Two primaries of the test's own, half the slots each.
    let nodes =
        ["stall-a", "stall-b"].map(|name| OwnNode::start(name, &["--cluster-enabled", "yes"]));
    let [a, b] = &nodes;
    Raw::to(&a.addr).call(&["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]);
    Raw::to(&b.addr).call(&["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]);
    let (host, port) = b.addr.rsplit_once(':').unwrap();
    Raw::to(&a.addr).call(&["CLUSTER", "MEET", host, port]);
    for node in &nodes {
        wait_for_cluster_state(&mut Raw::to(&node.addr), "ok");
    }
    let key_on = |slots: std::ops::Range<u16>| {
        (0..)
            .map(|i| format!("stall-{i}"))
            .find(|key| slots.contains(&hash_slot(key.as_bytes())))
            .unwrap()
    };
    let (on_a, on_b) = (key_on(0..8192), key_on(8192..16384));
    let path = format!(
        "seed[]={}&timeout=1&read_timeout=1&shared_slot_map=0",
        a.addr
    );
    let mut cluster = super::Cluster::new(Rc::new((&save_path::parse(&path).unwrap()).into()));
    let set = |key: &str| packed(&[b"SET", key.as_bytes(), b"v", b"PX", b"3000"]);
    let (set_a, set_b) = (set(&on_a), set(&on_b));
    let request = |key: &str, packed| super::Request {
        slot: hash_slot(key.as_bytes()),
        packed,
        count: 1,
        reply_timeout: Duration::from_secs(1),
        deadline: Instant::now() + Duration::from_millis(1500),
        retry_broken: true,
        follow_redirects: true,
        may_fall_back: false,
        wait_if_full: true,
    };
    // Connected to both, as a watchdog that renewed before.
    let warm = cluster.request_each(&[request(&on_a, &set_a), request(&on_b, &set_b)]);
    assert!(warm.iter().all(Result::is_ok), "{warm:?}");

    let pid = a.child.id().to_string();
    let signal = |name: &str| {
        let sent = Command::new("kill").args([name, &pid]).status().unwrap();
        assert!(sent.success(), "kill {name}");
    };
    signal("-STOP");
    let replies = cluster.request_each(&[request(&on_a, &set_a), request(&on_b, &set_b)]);
    let ttl_on_b = Raw::to(&b.addr).call(&["PTTL", &on_b]);
    signal("-CONT");
    assert!(
        replies[0].is_err(),
        "the stalled primary answered: {:?}",
        replies[0]
    );
    assert!(replies[1].is_ok(), "{:?}", replies[1]);
    // Sent at once, not after the stalled primary's reply timeout (1 s):
    // at least that much of its 3-s TTL has gone by.
    let Value::Int(ttl_on_b) = ttl_on_b else {
        panic!("PTTL: {ttl_on_b:?}");
    };
    assert!(
        ttl_on_b <= 2000,
        "the other primary's SET ran late: PTTL {ttl_on_b} ms"
    );
}
