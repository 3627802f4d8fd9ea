//! The slot map shared by this user's workers on one machine, so that a new
//! worker (recycled by `pm.max_requests`, started by `pm=ondemand` or a
//! deploy) asks no seed for a map its siblings already have, and a map one
//! worker fetched after a `MOVED` reaches the others within a second.
//!
//! The trust boundary: php-fpm pools of different users fork from one master,
//! so memory made before the fork is writable by all of them. A map routes
//! traffic, with its `AUTH` password and session data, so it is shared only
//! through a directory of this user's in `/dev/shm`, mode 0700, checked
//! (owner, mode, not a symlink) before every use: no other user can list it
//! or put a file, FIFO or symlink in it. Its files, mode 0600, are named by
//! a hash of everything that decides where traffic goes and with which
//! credentials (seeds, ACL user, password, TLS settings), which each file
//! also holds. Every read checks the file's type, owner, mode and size, the
//! format's version, that identity and a checksum; a file that fails any of
//! them is ignored, and a worker still follows `MOVED` and `ASK` as it always
//! does, so a stale map costs a redirect, never a wrong write. A writer
//! replaces the file whole (`rename`), so a reader never sees half of one.

use std::fmt::Write as _;
use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ring::digest::{Context, SHA256};

use super::{SlotMap, SlotRange};
use crate::config::{ConnectionConfig, NodeAddr};
use crate::keys::SLOT_COUNT;
use crate::stats;

const SHARED_MEMORY: &str = "/dev/shm";
/// The format's first line; another version is ignored.
const HEADER: &str = "rediscluster_session slot map 1";
/// A map of 16384 single-slot ranges with two replicas each fits.
const MAX_BYTES: u64 = 4 << 20;
/// open(2) flags (Linux): a FIFO where the map belongs opens at once
/// instead of waiting for a writer forever, and a symlink is not followed.
const O_NONBLOCK: i32 = 0o4000;
#[cfg(any(
    target_arch = "aarch64",
    target_arch = "arm",
    target_arch = "powerpc64"
))]
const O_NOFOLLOW: i32 = 0o100000;
#[cfg(not(any(
    target_arch = "aarch64",
    target_arch = "arm",
    target_arch = "powerpc64"
)))]
const O_NOFOLLOW: i32 = 0o400000;
/// The most maps a directory keeps (one per cluster and credentials): a
/// writer removes the oldest past that, and any older than [`MAX_AGE`].
const MAX_FILES: usize = 32;
/// A temporary file this old was left by a writer that died.
const ABANDONED: Duration = Duration::from_secs(60);
/// How often a worker looks for a map another one fetched.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// A map fetched longer ago is not taken: a worker that starts then asks a
/// seed, and shares what it got.
pub const MAX_AGE: Duration = Duration::from_secs(10 * 60);

/// This cluster's shared map file, as this process last saw it.
pub struct SharedMap {
    /// This user's directory of maps.
    directory: PathBuf,
    path: PathBuf,
    /// SHA-256 of what decides where traffic goes and with which
    /// credentials, and the seeds: the file's second line.
    identity: String,
    uid: u32,
    /// The file's inode, change time and size when last read: unchanged, it is not read again.
    seen: Option<(u64, i64, i64, u64)>,
    next_check: Option<Instant>,
}

impl SharedMap {
    pub fn new(config: &ConnectionConfig) -> SharedMap {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let uid = unsafe { geteuid() };
        // The seeds in plain text too, for whoever looks at the file.
        let seeds: Vec<String> = (config.seeds.iter())
            .map(|seed| {
                format!("{}:{}", seed.host, seed.port).replace(|c: char| !c.is_ascii_graphic(), "?")
            })
            .collect();
        let identity = format!("{} seeds {}", hex(&digest_of(config, uid)), seeds.join(","));
        let directory = PathBuf::from(format!("{SHARED_MEMORY}/rediscluster_session-{uid}"));
        SharedMap {
            path: directory.join(format!("{}.slots", &identity[..32])),
            directory,
            identity,
            uid,
            seen: None,
            next_check: None,
        }
    }

    /// Whether the directory is this user's own and private. Checked before
    /// every use: a name in `/dev/shm` anyone may take first (then nothing is
    /// shared, which [`refusal_to_tell`] and a counter say once per process),
    /// and the sticky bit keeps others from replacing it once it is ours.
    fn directory_is_private(&self) -> bool {
        let Ok(meta) = fs::symlink_metadata(&self.directory) else {
            return false;
        };
        let private =
            meta.file_type().is_dir() && meta.uid() == self.uid && meta.mode() & 0o077 == 0;
        if !private && REFUSAL.get().is_none() {
            let refusal = format!(
                "rediscluster_session: {} is not this user's own private directory (owner uid {}, mode {:o}, uid {}): workers share no slot map; remove it",
                self.directory.display(),
                meta.uid(),
                meta.mode() & 0o7777,
                self.uid
            );
            if REFUSAL.set(refusal).is_ok() {
                stats::shared_slot_map_refused();
            }
        }
        private
    }

    /// Whether it is time to look at the file again (at most once per
    /// [`CHECK_INTERVAL`]); `now` is a clock reading the caller has anyway.
    pub fn due(&mut self, now: Instant) -> bool {
        if self.next_check.is_some_and(|at| now < at) {
            return false;
        }
        self.next_check = Some(now + CHECK_INTERVAL);
        true
    }

    /// The map in the file and when it was fetched (ms since the epoch), if
    /// the file changed since last seen, passes every check, and was fetched
    /// after `than_ms`, within `max_age` (at most [`MAX_AGE`]).
    pub fn newer(&mut self, than_ms: u64, max_age: Duration) -> Option<(SlotMap, u64)> {
        if !self.directory_is_private() {
            return None;
        }
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(O_NONBLOCK | O_NOFOLLOW)
            .open(&self.path)
            .ok()?;
        let meta = file.metadata().ok()?;
        let stamp = (meta.ino(), meta.ctime(), meta.ctime_nsec(), meta.len());
        if self.seen == Some(stamp) {
            return None;
        }
        self.seen = Some(stamp);
        let ours = meta.file_type().is_file() && meta.uid() == self.uid && meta.mode() & 0o077 == 0;
        if !ours || meta.len() > MAX_BYTES {
            return None;
        }
        let mut text = String::new();
        file.take(MAX_BYTES).read_to_string(&mut text).ok()?;
        let (map, fetched_ms) = parse(&text, &self.identity)?;
        let now_ms = unix_ms();
        let max_age_ms = u64::try_from(max_age.min(MAX_AGE).as_millis()).unwrap_or(u64::MAX);
        (fetched_ms > than_ms && fetched_ms <= now_ms && now_ms - fetched_ms <= max_age_ms)
            .then_some((map, fetched_ms))
    }

    /// Shares a map fetched at `fetched_ms`. Best effort: a file another
    /// user made under this name, a full or missing `/dev/shm`, and the map
    /// is simply not shared.
    pub fn publish(&mut self, map: &SlotMap, fetched_ms: u64) {
        let Some(text) = format(map, &self.identity, fetched_ms) else {
            return;
        };
        // Made by the first writer, not on every look.
        let _ = fs::DirBuilder::new().mode(0o700).create(&self.directory);
        if !self.directory_is_private() {
            return;
        }
        // One name per writer: threads of one process (ZTS) write apart too.
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let write = WRITES.fetch_add(1, Relaxed);
        let temporary = self
            .path
            .with_extension(format!("{}-{write}.tmp", std::process::id()));
        // A file left by a process of the same pid that died mid-write goes first.
        let _ = fs::remove_file(&temporary);
        let written = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)
            .and_then(|mut file| file.write_all(text.as_bytes()))
            .and_then(|()| fs::rename(&temporary, &self.path));
        if written.is_err() {
            let _ = fs::remove_file(&temporary);
        }
        prune(&self.directory, self.uid);
    }
}

/// Why this process shares no slot map, once: for the PHP log.
static REFUSAL: OnceLock<String> = OnceLock::new();
static REFUSAL_TOLD: AtomicBool = AtomicBool::new(false);

/// The first time it is asked after a process found the shared map's
/// directory taken by another user (or open to others), what to log.
pub fn refusal_to_tell() -> Option<&'static str> {
    let refusal = REFUSAL.get()?;
    (!REFUSAL_TOLD.swap(true, Relaxed)).then_some(refusal.as_str())
}

/// Bounds a directory of maps: a map older than [`MAX_AGE`] is never taken,
/// a temporary file older than [`ABANDONED`] was left by a writer that died,
/// and past [`MAX_FILES`] maps the oldest go. Only this user's files.
fn prune(directory: &std::path::Path, uid: u32) {
    let Ok(entries) = fs::read_dir(directory) else {
        return;
    };
    let now = SystemTime::now();
    let mut maps = Vec::new();
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        let age = meta
            .modified()
            .ok()
            .and_then(|at| now.duration_since(at).ok())
            .unwrap_or_default();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !meta.file_type().is_file() || meta.uid() != uid {
            continue;
        }
        if name.ends_with(".tmp") && age > ABANDONED || name.ends_with(".slots") && age > MAX_AGE {
            let _ = fs::remove_file(entry.path());
        } else if name.ends_with(".slots") {
            maps.push((age, entry.path()));
        }
    }
    if maps.len() > MAX_FILES {
        maps.sort_unstable_by_key(|(age, _)| std::cmp::Reverse(*age));
        for (_, path) in &maps[..maps.len() - MAX_FILES] {
            let _ = fs::remove_file(path);
        }
    }
}

unsafe extern "C" {
    fn geteuid() -> u32;
}

pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// What the file must hold, and names it: a hash of the user, the seeds,
/// the ACL user and password and the TLS settings. Timeouts and
/// `persistent` route nothing.
fn digest_of(config: &ConnectionConfig, uid: u32) -> Vec<u8> {
    let mut context = Context::new(&SHA256);
    let mut field = |bytes: &[u8]| {
        context.update(&(bytes.len() as u64).to_le_bytes());
        context.update(bytes);
    };
    field(HEADER.as_bytes());
    field(&uid.to_le_bytes());
    for seed in &config.seeds {
        field(seed.host.as_bytes());
        field(&seed.port.to_le_bytes());
    }
    let auth = config.auth.as_ref();
    field(
        auth.and_then(|auth| auth.user.as_deref())
            .unwrap_or("")
            .as_bytes(),
    );
    field(auth.map_or(&[][..], |auth| auth.password.as_bytes()));
    field(format!("{:?}", config.tls).as_bytes());
    context.finish().as_ref().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

fn checksum(body: &str) -> String {
    hex(ring::digest::digest(&SHA256, body.as_bytes()).as_ref())
}

/// The file's text: the header, the identity, when the map was fetched, a
/// line per range (`start end host port`, the primary then its replicas),
/// and the checksum of all that. `None` for a host that would not read back.
fn format(map: &SlotMap, identity: &str, fetched_ms: u64) -> Option<String> {
    let mut body = format!("{HEADER}\n{identity}\n{fetched_ms}\n");
    for range in map {
        let _ = write!(body, "{} {}", range.start, range.end);
        for node in std::iter::once(&range.primary).chain(&range.replicas) {
            if !is_plain_host(&node.host) {
                return None;
            }
            let _ = write!(body, " {} {}", node.host, node.port);
        }
        body.push('\n');
    }
    let sum = checksum(&body);
    Some(format!("{body}{sum}\n"))
}

/// A host name or address: no separator, control or non-ASCII character.
fn is_plain_host(host: &str) -> bool {
    !host.is_empty() && host.len() <= 255 && host.bytes().all(|byte| byte.is_ascii_graphic())
}

/// The map a file's text holds, if it is whole, of this format and of this
/// identity, with when it was fetched.
fn parse(text: &str, identity: &str) -> Option<(SlotMap, u64)> {
    let body_end = text.strip_suffix('\n')?.rfind('\n')? + 1;
    let (body, sum) = text.split_at(body_end);
    if sum.trim_end_matches('\n') != checksum(body) {
        return None;
    }
    let mut lines = body.lines();
    if lines.next()? != HEADER || lines.next()? != identity {
        return None;
    }
    let fetched_ms = lines.next()?.parse().ok()?;
    let mut map = Vec::new();
    for line in lines {
        let mut words = line.split(' ');
        let start: u16 = words.next()?.parse().ok()?;
        let end: u16 = words.next()?.parse().ok()?;
        if start > end || end >= SLOT_COUNT {
            return None;
        }
        let mut nodes = Vec::new();
        while let Some(host) = words.next() {
            let port = words.next()?.parse().ok()?;
            if !is_plain_host(host) {
                return None;
            }
            nodes.push(NodeAddr {
                host: host.to_owned(),
                port,
            });
        }
        if nodes.is_empty() {
            return None;
        }
        let primary = nodes.remove(0);
        map.push(SlotRange {
            start,
            end,
            primary,
            replicas: nodes,
        });
    }
    (!map.is_empty()).then_some((map, fetched_ms))
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::save_path::{Auth, Seed};

    fn config(password: &str) -> ConnectionConfig {
        ConnectionConfig {
            seeds: vec![Seed {
                host: "127.0.0.1".into(),
                port: 7000,
            }],
            auth: Some(Auth {
                user: Some("sessions".into()),
                password: password.into(),
            }),
            connect_timeout: Duration::from_secs(1),
            read_timeout: Duration::from_secs(1),
            tls: None,
            persistent: true,
            shared_slot_map: true,
        }
    }

    fn node(port: u16) -> NodeAddr {
        NodeAddr {
            host: "10.0.0.1".into(),
            port,
        }
    }

    fn map() -> SlotMap {
        vec![
            SlotRange {
                start: 0,
                end: 8191,
                primary: node(7000),
                replicas: vec![node(7003)],
            },
            SlotRange {
                start: 8192,
                end: 16383,
                primary: node(7001),
                replicas: vec![],
            },
        ]
    }

    fn ports(map: &SlotMap) -> Vec<(u16, u16, u16, Vec<u16>)> {
        map.iter()
            .map(|r| {
                let replicas = r.replicas.iter().map(|n| n.port).collect();
                (r.start, r.end, r.primary.port, replicas)
            })
            .collect()
    }

    /// A directory of its own for a test, under the system's temporary one.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rcs-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir(&dir).unwrap();
        dir
    }

    #[test]
    fn a_directory_others_may_read_turns_sharing_off_and_says_so_once() {
        let mut shared = SharedMap::new(&config("refused"));
        shared.directory = scratch("refused");
        shared.path = shared.directory.join("map.slots");
        fs::set_permissions(&shared.directory, fs::Permissions::from_mode(0o755)).unwrap();
        let before = stats::snapshot();
        shared.publish(&map(), unix_ms());
        assert!(!shared.path.exists(), "nothing shared");
        let told = refusal_to_tell().expect("said");
        assert!(
            told.contains("not this user's own private directory"),
            "{told}"
        );
        assert!(told.contains("mode 755"), "{told}");
        assert_eq!(refusal_to_tell(), None, "once");
        let refused = |snapshot: &[(&str, stats::Stat)]| match snapshot
            .iter()
            .find(|(name, _)| *name == "shared_slot_map_refused")
        {
            Some((_, stats::Stat::Count(n))) => *n,
            _ => panic!("no counter"),
        };
        assert_eq!(refused(&stats::snapshot()), refused(&before) + 1);
        fs::remove_dir_all(&shared.directory).unwrap();
    }

    #[test]
    fn a_directory_keeps_recent_maps_only_and_a_bounded_number() {
        let dir = scratch("prune");
        // SAFETY: geteuid has no preconditions and cannot fail.
        let uid = unsafe { geteuid() };
        let now = SystemTime::now();
        let file = |name: &str, age: Duration| {
            let path = dir.join(name);
            let file = File::create(&path).unwrap();
            file.set_modified(now - age).unwrap();
            path
        };
        let old_map = file("old.slots", MAX_AGE + Duration::from_secs(1));
        let abandoned = file("a.1-0.tmp", ABANDONED + Duration::from_secs(1));
        let writing = file("a.2-0.tmp", Duration::ZERO);
        let other = file("notes.txt", MAX_AGE * 2);
        let maps: Vec<PathBuf> = (0..MAX_FILES + 3)
            .map(|i| file(&format!("{i}.slots"), Duration::from_secs(i as u64)))
            .collect();
        prune(&dir, uid);
        assert!(!old_map.exists() && !abandoned.exists());
        assert!(writing.exists() && other.exists());
        let kept: Vec<bool> = maps.iter().map(|path| path.exists()).collect();
        assert_eq!(kept[..MAX_FILES], vec![true; MAX_FILES], "the newest stay");
        assert_eq!(kept[MAX_FILES..], vec![false; 3], "the oldest go");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_map_reads_back_whole_and_nothing_else_does() {
        let text = format(&map(), "id", 42).unwrap();
        let (back, at) = parse(&text, "id").unwrap();
        assert_eq!((ports(&back), at), (ports(&map()), 42));
        // Another identity (another password), a torn file, a changed byte.
        assert!(parse(&text, "other").is_none());
        for cut in 1..text.len() {
            assert!(parse(&text[..cut], "id").is_none(), "cut at {cut}");
        }
        assert!(parse(&text.replacen("7001", "7002", 1), "id").is_none());
        // A host that could not be read back is not shared.
        let mut odd = map();
        odd[0].primary.host = "a b".into();
        assert!(format(&odd, "id", 1).is_none());
    }

    #[test]
    fn each_password_has_a_file_of_its_own_in_a_private_directory() {
        let (mut one, two) = (
            SharedMap::new(&config("one")),
            SharedMap::new(&config("two")),
        );
        assert_ne!(one.path, two.path);
        assert_ne!(one.identity, two.identity);
        assert!(one.path.starts_with(&one.directory) && one.directory.starts_with("/dev/shm"));
        one.publish(&map(), unix_ms());
        assert!(one.directory_is_private());
        let mode = fs::metadata(&one.directory).unwrap().mode();
        assert_eq!(mode & 0o777, 0o700);
        fs::remove_file(&one.path).unwrap();
    }

    #[test]
    fn a_published_map_is_read_by_another_process_once_and_only_if_newer() {
        let mut config = config("pw");
        config.seeds[0].port = 1 + (std::process::id() % 60000) as u16;
        let (mut writer, mut reader) = (SharedMap::new(&config), SharedMap::new(&config));
        let now = unix_ms();
        writer.publish(&map(), now);
        let mode = fs::metadata(&writer.path).unwrap().mode();
        assert_eq!(mode & 0o777, 0o600);
        let (read, at) = reader.newer(0, MAX_AGE).unwrap();
        assert_eq!((ports(&read), at), (ports(&map()), now));
        // Unchanged since: not read again.
        assert!(reader.newer(0, MAX_AGE).is_none());
        // Not newer than the reader's own map.
        writer.publish(&map(), now);
        assert!(reader.newer(now, MAX_AGE).is_none());
        // Too old.
        writer.publish(&map(), now - MAX_AGE.as_millis() as u64 - 1);
        assert!(reader.newer(0, MAX_AGE).is_none());
        // Readable by others: ignored.
        writer.publish(&map(), now);
        fs::set_permissions(&writer.path, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(reader.newer(0, MAX_AGE).is_none());
        fs::remove_file(&writer.path).unwrap();
        // A FIFO or a symlink where the map belongs: ignored, at once (a
        // FIFO's open used to wait for a writer forever).
        let fifo = std::process::Command::new("mkfifo")
            .arg(&writer.path)
            .status();
        assert!(fifo.unwrap().success());
        let started = Instant::now();
        assert!(reader.newer(0, MAX_AGE).is_none());
        assert!(started.elapsed() < Duration::from_secs(5));
        fs::remove_file(&writer.path).unwrap();
        let elsewhere = writer.path.with_extension("elsewhere");
        writer.publish(&map(), now);
        fs::rename(&writer.path, &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &writer.path).unwrap();
        assert!(reader.newer(0, MAX_AGE).is_none());
        fs::remove_file(&writer.path).unwrap();
        fs::remove_file(&elsewhere).unwrap();
    }
}
