//! What both the router and a node connection need to know of a cluster:
//! how to reach it, and a node's address.

use std::time::Duration;

use crate::save_path::{Auth, SavePath, Seed, Tls};

/// Everything that identifies a cluster and how to reach it; each distinct one
/// gets its own slot map and connections.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnectionConfig {
    pub seeds: Vec<Seed>,
    pub auth: Option<Auth>,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub tls: Option<Tls>,
    /// Connections kept for the worker's life; without, closed at each
    /// request's end (`persistent=0`).
    pub persistent: bool,
    /// The slot map shared with this user's other workers (`shared_slot_map`).
    pub shared_slot_map: bool,
}

impl From<&SavePath> for ConnectionConfig {
    fn from(path: &SavePath) -> Self {
        ConnectionConfig {
            seeds: path.seeds.clone(),
            auth: path.auth.clone(),
            connect_timeout: path.connect_timeout,
            read_timeout: path.read_timeout,
            tls: path.tls.clone(),
            persistent: path.persistent,
            shared_slot_map: path.shared_slot_map,
        }
    }
}

/// A node's address as the slot map names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeAddr {
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for NodeAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}
