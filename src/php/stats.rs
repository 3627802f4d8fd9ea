//! `rediscluster_session_stats()` and the same counters in phpinfo().

use ext_php_rs::boxed::ZBox;
use ext_php_rs::builders::FunctionBuilder;
use ext_php_rs::prelude::*;
use ext_php_rs::types::ZendHashTable;

use crate::stats::{self, Stat};

/// The per-process counters as an array; groups are nested arrays.
#[php_function]
pub fn rediscluster_session_stats() -> PhpResult<ZBox<ZendHashTable>> {
    std::panic::catch_unwind(stats_array)
        .unwrap_or_else(|_| Err("rediscluster_session: internal error reading the stats".into()))
}

fn stats_array() -> PhpResult<ZBox<ZendHashTable>> {
    let mut array = ZendHashTable::new();
    for (name, stat) in stats::snapshot() {
        match stat {
            Stat::Count(value) => array.insert(name, clamp(value))?,
            Stat::Group(entries) => {
                let mut group = ZendHashTable::new();
                for (entry, value) in entries {
                    group.insert(entry, clamp(value))?;
                }
                array.insert(name, group)?;
            }
        }
    }
    Ok(array)
}

/// The function for the module builder (the macro's wrapper is private here).
pub fn function() -> FunctionBuilder<'static> {
    wrap_function!(rediscluster_session_stats)
}

/// PHP integers are signed.
fn clamp(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The counters as phpinfo() rows: name, value (groups as `a=1, b=2`).
pub fn info_rows() -> Vec<(String, String)> {
    stats::snapshot()
        .into_iter()
        .map(|(name, stat)| {
            let value = match stat {
                Stat::Count(value) => value.to_string(),
                Stat::Group(entries) => entries
                    .iter()
                    .map(|(entry, value)| format!("{entry}={value}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            (format!("stats: {name}"), value)
        })
        .collect()
}
