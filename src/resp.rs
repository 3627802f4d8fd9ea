//! RESP2, the part sessions use: commands packed for sending, and the
//! replies parsed from a buffer.

use redis::{ErrorKind, RedisError, RedisResult, Value};

/// Nesting deeper than any reply sessions get (`CLUSTER SLOTS` has 3 levels).
const MAX_DEPTH: usize = 8;

/// Appends one command to `out`, growing it at most once.
pub fn pack(out: &mut Vec<u8>, args: &[&[u8]]) {
    pack_parts(out, &[args]);
}

/// Appends one command whose arguments are `parts` one after the other (a
/// script's verb, keys and arguments), growing `out` at most once: no list
/// of them all is made.
pub fn pack_parts(out: &mut Vec<u8>, parts: &[&[&[u8]]]) {
    let (mut size, mut count) = (0, 0);
    for args in parts {
        size += packed_size(args);
        count += args.len();
    }
    out.reserve(size);
    push_header(out, b'*', count);
    for args in parts {
        for arg in *args {
            push_header(out, b'$', arg.len());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// At least the size of `args` packed: a pipeline reserves the sum of its
/// commands' once, rather than growing (and copying) command by command.
pub fn packed_size(args: &[&[u8]]) -> usize {
    // A header is a type byte, at most 20 digits and CRLF; each argument ends in CRLF.
    args.iter().map(|arg| arg.len() + 25).sum::<usize>() + 23
}

/// One command, packed.
pub fn packed(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    pack(&mut out, args);
    out
}

// Inlined: a script call packs some 20 headers.
#[inline(always)]
fn push_header(out: &mut Vec<u8>, kind: u8, length: usize) {
    // Most arguments are shorter than 100 bytes: their digits go in directly.
    match u8::try_from(length) {
        Ok(n @ 0..10) => out.extend_from_slice(&[kind, b'0' + n, b'\r', b'\n']),
        Ok(n @ 10..100) => {
            out.extend_from_slice(&[kind, b'0' + n / 10, b'0' + n % 10, b'\r', b'\n'])
        }
        _ => {
            out.push(kind);
            out.extend_from_slice(Decimal::from(length as u64).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// A number's decimal digits, without allocating.
#[derive(Clone, Copy)]
#[cfg_attr(test, derive(Debug, PartialEq, Eq, Hash))]
pub struct Decimal {
    digits: [u8; 20],
    start: usize,
}

/// Every number under 100 as two digits.
const DIGIT_PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

impl From<u64> for Decimal {
    fn from(mut n: u64) -> Self {
        let mut digits = [0; 20];
        let mut start = digits.len();
        // Two digits a division: a request formats a few numbers of 5.
        let mut push_pair = |pair: u64| {
            let at = 2 * pair as usize;
            start -= 2;
            digits[start..start + 2].copy_from_slice(&DIGIT_PAIRS[at..at + 2]);
        };
        while n >= 100 {
            push_pair(n % 100);
            n /= 100;
        }
        if n >= 10 {
            push_pair(n);
        } else {
            start -= 1;
            digits[start] = b'0' + n as u8;
        }
        Decimal { digits, start }
    }
}

impl Decimal {
    pub fn as_bytes(&self) -> &[u8] {
        &self.digits[self.start..]
    }
}

/// The longest bulk string a reply may announce: the servers' default
/// `proto-max-bulk-len` (512 MiB). The client cannot read the setting, since
/// `CONFIG` is outside the least-privilege ACL of docs/clusters.md.
pub const MAX_BULK_LEN: u64 = 512 * 1024 * 1024;

/// Finds where a reply ends as its bytes arrive, resuming where the last call
/// stopped: a reply that comes in many reads costs time in proportion to its
/// size, and nothing is allocated for what a header merely announces.
#[derive(Default)]
pub struct Framer {
    /// Bytes of the reply checked so far.
    at: usize,
    /// Where the line search resumes, for a line not yet ended.
    searched: usize,
    /// Where the bulk string before `at` must end in CRLF, checked once it arrived.
    bulk_end: Option<usize>,
    /// Items still to come in each array opened and not yet complete.
    open: Vec<u64>,
}

impl Framer {
    /// The length of the reply at the start of `input`, once all of it is
    /// there; `None` while more is needed. `input` only grows between calls
    /// until [`Self::reset`].
    pub fn frame(&mut self, input: &[u8]) -> RedisResult<Option<usize>> {
        loop {
            if input.len() < self.at {
                return Ok(None);
            }
            if let Some(end) = self.bulk_end.take() {
                if &input[end..end + 2] != b"\r\n" {
                    return Err(invalid("a bulk string without its CRLF"));
                }
                if self.item_done() {
                    return Ok(Some(self.at));
                }
            }
            let from = self.searched.max(self.at);
            let Some(newline) = input[from..].iter().position(|&byte| byte == b'\n') else {
                self.searched = input.len();
                return Ok(None);
            };
            let newline = from + newline;
            let Some(line_end) = newline
                .checked_sub(1)
                .filter(|&at| at > self.at && input[at] == b'\r')
            else {
                return Err(invalid("a line without CRLF"));
            };
            let line = &input[self.at + 1..line_end];
            let kind = input[self.at];
            self.at = newline + 1;
            match kind {
                b'+' | b'-' => {}
                b':' => {
                    number(line)?;
                }
                b'$' => match u64::try_from(number(line)?) {
                    Err(_) => {}
                    Ok(length) if length > MAX_BULK_LEN => {
                        return Err(invalid("a bulk string longer than 512 MiB"));
                    }
                    Ok(length) => {
                        let end = self.at + length as usize;
                        self.bulk_end = Some(end);
                        self.at = end + 2;
                        continue;
                    }
                },
                b'*' => match u64::try_from(number(line)?) {
                    Ok(length) if length > 0 => {
                        if self.open.len() >= MAX_DEPTH {
                            return Err(invalid("a reply nested too deep"));
                        }
                        self.open.push(length);
                        continue;
                    }
                    _ => {}
                },
                _ => return Err(invalid("a reply of an unknown type")),
            }
            if self.item_done() {
                return Ok(Some(self.at));
            }
        }
    }

    /// Counts a complete item against the arrays it closes: whether the
    /// whole reply is complete.
    fn item_done(&mut self) -> bool {
        while let Some(left) = self.open.last_mut() {
            *left -= 1;
            if *left > 0 {
                return false;
            }
            self.open.pop();
        }
        true
    }

    /// Ready for the next reply.
    pub fn reset(&mut self) {
        self.at = 0;
        self.searched = 0;
        self.bulk_end = None;
        self.open.clear();
    }
}

/// Parses the reply at the start of `input`: the reply and how many bytes it
/// took, or `None` when `input` holds only part of it. A partial reply costs
/// a pass over it: call this once per reply, then let a [`Framer`] find its end.
pub fn parse(input: &[u8]) -> RedisResult<Option<(Value, usize)>> {
    parse_nested(input, 0)
}

fn parse_nested(input: &[u8], depth: usize) -> RedisResult<Option<(Value, usize)>> {
    let Some(newline) = input.iter().position(|&byte| byte == b'\n') else {
        return Ok(None);
    };
    let Some(line_end) = newline
        .checked_sub(1)
        .filter(|&at| at > 0 && input[at] == b'\r')
    else {
        return Err(invalid("a line without CRLF"));
    };
    let line = &input[1..line_end];
    let after_line = line_end + 2;
    let value = match input[0] {
        b'+' if line == b"OK" => Value::Okay,
        b'+' => Value::SimpleString(String::from_utf8_lossy(line).into_owned()),
        // Errors are rare (redirects, refusals): the `redis` crate's parser
        // gives them the kinds the rest of the client matches on.
        b'-' => redis::parse_redis_value(&input[..after_line])?,
        b':' => Value::Int(number(line)?),
        b'$' => {
            let Ok(length) = u64::try_from(number(line)?) else {
                return Ok(Some((Value::Nil, after_line)));
            };
            if length > MAX_BULK_LEN {
                return Err(invalid("a bulk string longer than 512 MiB"));
            }
            let end = after_line + length as usize;
            if input.len() < end + 2 {
                return Ok(None);
            }
            if &input[end..end + 2] != b"\r\n" {
                return Err(invalid("a bulk string without its CRLF"));
            }
            return Ok(Some((
                Value::BulkString(input[after_line..end].to_vec()),
                end + 2,
            )));
        }
        b'*' => {
            let Ok(length) = usize::try_from(number(line)?) else {
                return Ok(Some((Value::Nil, after_line)));
            };
            if depth >= MAX_DEPTH {
                return Err(invalid("a reply nested too deep"));
            }
            // Each element takes at least 3 bytes: a length alone reserves nothing.
            let mut items = Vec::with_capacity(length.min(input.len() / 3));
            let mut at = after_line;
            for _ in 0..length {
                let Some((item, used)) = parse_nested(&input[at..], depth + 1)? else {
                    return Ok(None);
                };
                items.push(item);
                at += used;
            }
            return Ok(Some((Value::Array(items), at)));
        }
        _ => return Err(invalid("a reply of an unknown type")),
    };
    Ok(Some((value, after_line)))
}

fn number(digits: &[u8]) -> RedisResult<i64> {
    std::str::from_utf8(digits)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| invalid("a malformed number"))
}

fn invalid(what: &'static str) -> RedisError {
    RedisError::from((
        ErrorKind::Parse,
        "invalid reply from the server",
        what.to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_commands_as_the_redis_crate_does() {
        let big = vec![7u8; 1000];
        let args: [&[u8]; 4] = [b"SET", b"k\r\n", &big, b""];
        let mut ours = packed(&args);
        pack(&mut ours, &[b"GET", b"k"]);
        let mut theirs = redis::cmd("SET").arg(&args[1..]).get_packed_command();
        redis::cmd("GET").arg("k").write_packed_command(&mut theirs);
        assert_eq!(ours, theirs);
        let mut parts = Vec::new();
        pack_parts(&mut parts, &[&args[..1], &[], &args[1..]]);
        assert_eq!(parts, packed(&args));
    }

    #[test]
    fn decimals() {
        for n in [0, 7, 10, 99, 100, 999, 1_000_000, 12_345, u64::MAX] {
            assert_eq!(Decimal::from(n).as_bytes(), n.to_string().as_bytes());
        }
    }
}
