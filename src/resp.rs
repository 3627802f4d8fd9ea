//! RESP2, the part sessions use: commands packed for sending, and the
//! replies parsed from a buffer.

use redis::{ErrorKind, RedisError, RedisResult, Value};

/// Nesting deeper than any reply sessions get (`CLUSTER SLOTS` has 3 levels).
const MAX_DEPTH: usize = 8;

/// Appends one command to `out`, growing it at most once.
pub fn pack(out: &mut Vec<u8>, args: &[&[u8]]) {
    // A header is a type byte, at most 20 digits and CRLF; each argument ends in CRLF.
    let size: usize = args.iter().map(|arg| arg.len() + 25).sum();
    out.reserve(size + 23);
    push_header(out, b'*', args.len());
    for arg in args {
        push_header(out, b'$', arg.len());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// One command, packed.
pub fn packed(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    pack(&mut out, args);
    out
}

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
pub struct Decimal {
    digits: [u8; 20],
    start: usize,
}

impl From<u64> for Decimal {
    fn from(mut n: u64) -> Self {
        let mut digits = [0; 20];
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        Decimal { digits, start }
    }
}

impl Decimal {
    pub fn as_bytes(&self) -> &[u8] {
        &self.digits[self.start..]
    }
}

pub enum Parsed {
    /// A reply and how many bytes it took.
    Done(Value, usize),
    /// The reply needs at least this many bytes in all.
    Incomplete(usize),
}

/// Parses one reply from the start of `input`.
pub fn parse(input: &[u8]) -> RedisResult<Parsed> {
    parse_nested(input, 0)
}

fn parse_nested(input: &[u8], depth: usize) -> RedisResult<Parsed> {
    let Some(newline) = input.iter().position(|&byte| byte == b'\n') else {
        return Ok(Parsed::Incomplete(input.len() + 1));
    };
    let Some(line_end) = newline.checked_sub(1).filter(|&at| input[at] == b'\r') else {
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
            let Ok(length) = usize::try_from(number(line)?) else {
                return Ok(Parsed::Done(Value::Nil, after_line));
            };
            let end = after_line + length;
            if input.len() < end + 2 {
                return Ok(Parsed::Incomplete(end + 2));
            }
            if &input[end..end + 2] != b"\r\n" {
                return Err(invalid("a bulk string without its CRLF"));
            }
            return Ok(Parsed::Done(
                Value::BulkString(input[after_line..end].to_vec()),
                end + 2,
            ));
        }
        b'*' => {
            let Ok(length) = usize::try_from(number(line)?) else {
                return Ok(Parsed::Done(Value::Nil, after_line));
            };
            if depth >= MAX_DEPTH {
                return Err(invalid("a reply nested too deep"));
            }
            // Each element takes at least 3 bytes: a hostile length must not
            // reserve memory before its bytes arrived.
            let mut items = Vec::with_capacity(length.min(input.len() / 3));
            let mut at = after_line;
            for _ in 0..length {
                match parse_nested(&input[at..], depth + 1)? {
                    Parsed::Done(item, used) => {
                        items.push(item);
                        at += used;
                    }
                    Parsed::Incomplete(needed) => return Ok(Parsed::Incomplete(at + needed)),
                }
            }
            return Ok(Parsed::Done(Value::Array(items), at));
        }
        _ => return Err(invalid("a reply of an unknown type")),
    };
    Ok(Parsed::Done(value, after_line))
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
    }

    #[test]
    fn decimals() {
        for n in [0, 7, 10, 999, 1_000_000, u64::MAX] {
            assert_eq!(Decimal::from(n).as_bytes(), n.to_string().as_bytes());
        }
    }
}
