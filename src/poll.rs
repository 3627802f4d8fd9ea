//! Waiting on sockets with `poll`: a node's connections for its replies,
//! a lookup's UDP sockets for their answers.

use std::os::fd::RawFd;
use std::time::Instant;

/// One zero-timeout `poll` of an idle socket: readable (EOF, or bytes
/// nobody asked for), hung up or failed. A failed `poll` counts as closed:
/// a new connection is the safe choice.
pub fn readable_or_closed(socket: RawFd) -> bool {
    poll_readable(&[socket], 0).is_none_or(|ready| ready.is_some())
}

/// Which of `sockets` has something to read (or an error) first, waiting
/// until `deadline`; `None` if none has by then.
pub fn first_readable(sockets: &[RawFd], deadline: Instant) -> Option<usize> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        // Rounded up: a poll that returns before the deadline would spin.
        let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        match poll_readable(sockets, ms) {
            Some(Some(ready)) => return Some(ready),
            // Woken a little early: poll again.
            Some(None) if !left.is_zero() => {}
            // Out of time, or the poll failed (an interrupted one included:
            // the watchdog's signals are blocked).
            _ => return None,
        }
    }
}

/// One `poll` of `sockets` for up to `timeout_ms`: the first readable, hung
/// up or failed (`Some(None)`: none in time; `None`: the poll failed).
fn poll_readable(sockets: &[RawFd], timeout_ms: i32) -> Option<Option<usize>> {
    use std::ffi::{c_int, c_short, c_ulong};
    #[repr(C)]
    struct PollFd {
        fd: c_int,
        events: c_short,
        revents: c_short,
    }
    unsafe extern "C" {
        fn poll(fds: *mut PollFd, count: c_ulong, timeout_ms: c_int) -> c_int;
    }
    const POLLIN: c_short = 0x001;
    // The peer shut its side (Linux): seen even before its FIN's EOF is read.
    #[cfg(target_os = "linux")]
    const POLLRDHUP: c_short = 0x2000;
    #[cfg(not(target_os = "linux"))]
    const POLLRDHUP: c_short = 0;
    let mut entries: Vec<PollFd> = sockets
        .iter()
        .map(|&socket| PollFd {
            fd: socket,
            events: POLLIN | POLLRDHUP,
            revents: 0,
        })
        .collect();
    // SAFETY: `entries` is valid for the call's duration, its length given.
    let ready = unsafe { poll(entries.as_mut_ptr(), entries.len() as c_ulong, timeout_ms) };
    (ready >= 0).then(|| entries.iter().position(|entry| entry.revents != 0))
}
