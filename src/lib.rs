//! rediscluster_session: a `rediscluster` PHP session save handler with
//! session locking for Redis Cluster and Valkey cluster.
//!
//! Layout: `php/` is the only unsafe code, the FFI boundary with PHP's session
//! API. Everything else is a safe core that knows nothing of PHP:
//! `save_path` (the save_path grammar), `settings` (INI-derived settings),
//! `keys` (data key, lock keys, hash slots), `lock` (the lock protocol and
//! its Lua scripts), `script` (running a Lua script), `compression`
//! (phpredis's compressed formats), `handler` (one method per session hook), `request` (what a request
//! knows of its sessions between hooks), `budget` (one time budget per PHP call),
//! `store` (the storage interfaces and their cluster implementation),
//! `config` (how to reach a cluster), `cluster` (slot map, redirects and
//! retries), `link` (one node connection), `resolve` (host names, within the
//! connect's deadline), `poll` (waiting on sockets), `resp` (packing commands,
//! parsing replies), `stats` (the
//! counters behind `rediscluster_session_stats()`) and `watchdog` (the thread
//! that renews the leases of held locks).

pub mod budget;
pub mod cluster;
pub mod compression;
pub mod config;
pub mod handler;
pub mod keys;
pub mod lifetime;
pub mod link;
pub mod lock;
pub mod poll;
pub mod request;
pub mod resolve;
pub mod resp;
pub mod save_path;
pub mod script;
pub mod settings;
pub mod stats;
pub mod store;
pub mod watchdog;

// The PHP boundary references symbols that only exist inside a PHP process,
// so unit-test binaries leave it out.
#[cfg(not(test))]
mod php;
