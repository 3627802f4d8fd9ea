//! `failover=error`: where a session is read when its slot's primary could
//! not be reached or the cluster is down. The primary first if it answered
//! (`CLUSTERDOWN`: with `cluster-allow-reads-when-down` it still serves
//! reads), else the slot's replicas in the order the map lists them, each
//! over a connection of its own in `READONLY` mode, skipping any that fail or
//! whose link to the primary has been down too long: it may have missed a
//! logout. The map says nothing of liveness; the caller falls back on what
//! its request met.

use std::thread::sleep;
use std::time::{Duration, Instant};

use redis::{ErrorKind, RedisError, RedisResult, Value};

use super::{Cluster, NO_OWNER, RECOVERY_PAUSE, exchange_with, index_in};
use crate::config::NodeAddr;
use crate::link::ReplyWindow;
use crate::resp::packed;
use crate::stats::ReadFrom;

impl Cluster {
    /// Sends `read` (one packed read command on `slot`) to the slot's primary
    /// when `primary_answered`, then to each replica, within `deadline`; the
    /// first good reply wins. A replica whose link has been down longer than
    /// `max_lag` (or never up) is not read.
    pub fn read_fallback(
        &mut self,
        slot: u16,
        read: &[u8],
        primary_answered: bool,
        max_lag: Duration,
        deadline: Instant,
    ) -> RedisResult<(Value, ReadFrom)> {
        self.forget_if_forked();
        let mut last_error = None;
        let primary = self.slots[usize::from(slot)];
        if primary_answered && primary != NO_OWNER {
            let window = ReplyWindow::new(self.config.read_timeout, deadline);
            match self.send(usize::from(primary), read, 1, false, window, true) {
                Ok(mut replies) => match served(replies.pop()) {
                    Ok(value) => return Ok((value, ReadFrom::Primary)),
                    Err(error) => last_error = Some(error),
                },
                Err(error) => last_error = Some(error),
            }
        }
        // A map read at the promotion lists the new primary without its
        // replicas (and one read just before it, the old one): while none is
        // listed, the slot's owner is read, and the map asked again.
        let mut owner = primary;
        let mut replicas = self.replicas_of(slot).to_vec();
        while replicas.is_empty() {
            if owner != NO_OWNER {
                let addr = self.nodes[usize::from(owner)].addr.clone();
                match self.read_replica(addr, read, max_lag, deadline) {
                    Ok(value) => return Ok((value, ReadFrom::Primary)),
                    Err(error) => last_error = Some(error),
                }
            }
            if Instant::now() + RECOVERY_PAUSE >= deadline {
                break;
            }
            sleep(RECOVERY_PAUSE);
            if self.refresh_map(deadline).is_ok() {
                owner = self.slots[usize::from(slot)];
                replicas = self.replicas_of(slot).to_vec();
            }
        }
        for addr in replicas {
            if Instant::now() >= deadline {
                break;
            }
            match self.read_replica(addr, read, max_lag, deadline) {
                Ok(value) => return Ok((value, ReadFrom::Replica)),
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| refused("the slot map lists no replica".into())))
    }

    /// `READONLY`, `INFO replication` and the read in one round trip.
    fn read_replica(
        &mut self,
        addr: NodeAddr,
        read: &[u8],
        max_lag: Duration,
        deadline: Instant,
    ) -> RedisResult<Value> {
        let index = index_in(&mut self.replica_links, addr);
        let mut packed = packed(&[b"INFO", b"replication"]);
        packed.extend_from_slice(read);
        let window = ReplyWindow::new(self.config.read_timeout, deadline);
        let node = &mut self.replica_links[index];
        let mut replies = exchange_with(&self.config, node, READONLY, &packed, 2, window, true)?;
        let value = served(replies.pop())?;
        let info = match served(replies.pop())? {
            Value::BulkString(info) => info,
            _ => {
                return Err(RedisError::from((
                    ErrorKind::Parse,
                    "no INFO replication reply",
                )));
            }
        };
        match link_down_for(&info) {
            Some(down) if down.is_none_or(|down| down > max_lag) => {
                let addr = &self.replica_links[index].addr;
                Err(refused(match down {
                    Some(down) => format!(
                        "replica {addr} lost its primary {} s ago (rediscluster_session.fallback_max_lag={})",
                        down.as_secs(),
                        max_lag.as_secs()
                    ),
                    None => format!("replica {addr} never synced with its primary"),
                }))
            }
            _ => Ok(value),
        }
    }
}

/// Why no replica was read, as an error of its own words.
fn refused(why: String) -> RedisError {
    std::io::Error::other(why).into()
}

/// `READONLY`, sent ahead of a replica read; its reply is not needed.
const READONLY: &[u8] = b"*1\r\n$8\r\nREADONLY\r\n";

/// A read's reply, or the error it carries.
fn served(reply: Option<Value>) -> RedisResult<Value> {
    match reply {
        Some(Value::ServerError(error)) => Err(error.into()),
        Some(value) => Ok(value),
        None => Err(RedisError::from((ErrorKind::Parse, "no reply to the read"))),
    }
}

/// From `INFO replication`: `None` when the link to the primary is up (or
/// the node is a primary), `Some(None)` when it never came up, else for how
/// long it has been down.
fn link_down_for(info: &[u8]) -> Option<Option<Duration>> {
    let text = String::from_utf8_lossy(info);
    let seconds = text
        .lines()
        .find_map(|line| line.strip_prefix("master_link_down_since_seconds:"))?;
    Some(seconds.trim().parse::<u64>().ok().map(Duration::from_secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_link_down_is_read_from_info_replication() {
        let up = b"# Replication\r\nrole:slave\r\nmaster_link_status:up\r\n";
        assert_eq!(link_down_for(up), None);
        let down =
            b"role:slave\r\nmaster_link_status:down\r\nmaster_link_down_since_seconds:12\r\n";
        assert_eq!(link_down_for(down), Some(Some(Duration::from_secs(12))));
        let never = b"role:slave\r\nmaster_link_down_since_seconds:-1\r\n";
        assert_eq!(link_down_for(never), Some(None));
        assert_eq!(
            link_down_for(b"role:master\r\nconnected_slaves:1\r\n"),
            None
        );
    }
}
