//! LZF compression as liblzf 3.6 does it (`HLOG` 16, `VERY_FAST`), the
//! format phpredis stores. The `lzf` crate gives the same bytes and stays the
//! decoder, but it zeroes a 512 KiB hash table on every call, which cost more
//! than the rest of a session request; here the table lives with the worker
//! and a generation number in each slot says whether it is from this call.
//! Unlike the crate, the output may grow past the input, as liblzf's does in
//! phpredis's larger buffer.

use std::cell::RefCell;

const HASH_BITS: u32 = 16;
const HASH_SLOTS: usize = 1 << HASH_BITS;
/// How far back a match may point, and how long it may be (format limits).
const MAX_OFFSET: usize = 1 << 13;
const MAX_MATCH: usize = (1 << 8) + (1 << 3);
/// The longest literal run one control byte announces.
const MAX_LITERALS: usize = 1 << 5;

/// Input position per hash slot, tagged with the call that stored it.
struct HashTable {
    slots: Box<[u64]>,
    generation: u32,
}

impl HashTable {
    fn new() -> Self {
        HashTable {
            slots: vec![0; HASH_SLOTS].into_boxed_slice(),
            generation: 0,
        }
    }

    /// Forgets every slot, in O(1) except once every 2^32 calls.
    fn start_call(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.slots.fill(0);
            self.generation = 1;
        }
    }

    /// Stores `position` in `slot`; returns what this call stored there before.
    fn replace(&mut self, slot: usize, position: usize) -> Option<usize> {
        let tag = u64::from(self.generation) << 32;
        let previous = std::mem::replace(&mut self.slots[slot], tag | position as u64);
        (previous & !0xFFFF_FFFF == tag).then_some((previous & 0xFFFF_FFFF) as usize)
    }
}

thread_local! {
    static TABLE: RefCell<Option<HashTable>> = const { RefCell::new(None) };
}

fn first(data: &[u8], at: usize) -> u32 {
    (u32::from(data[at]) << 8) | u32::from(data[at + 1])
}

fn next(hash: u32, data: &[u8], at: usize) -> u32 {
    (hash << 8) | u32::from(data[at + 2])
}

fn slot(hash: u32) -> usize {
    let hash = u64::from(hash);
    ((hash >> (24 - HASH_BITS)).wrapping_sub(hash * 5) & (HASH_SLOTS as u64 - 1)) as usize
}

/// The output: literal runs, each behind a control byte (run length - 1),
/// and back references.
struct Output {
    bytes: Vec<u8>,
    run_start: usize,
    literals: usize,
}

impl Output {
    fn start_run(&mut self) {
        self.run_start = self.bytes.len();
        self.literals = 0;
        self.bytes.push(0);
    }

    /// Writes the open run's control byte, or drops it when the run is empty.
    fn end_run(&mut self) {
        if self.literals == 0 {
            self.bytes.truncate(self.run_start);
        } else {
            self.bytes[self.run_start] = (self.literals - 1) as u8;
        }
    }

    fn literal(&mut self, byte: u8) {
        self.bytes.push(byte);
        self.literals += 1;
        if self.literals == MAX_LITERALS {
            self.end_run();
            self.start_run();
        }
    }

    /// A match of `length` bytes (at least 3) starting `offset + 1` bytes back.
    fn back_reference(&mut self, offset: usize, length: usize) {
        let length_code = length - 2;
        let high = (offset >> 8) as u8;
        if length_code < 7 {
            self.bytes.push(high + ((length_code as u8) << 5));
        } else {
            self.bytes.push(high + (7 << 5));
            self.bytes.push((length_code - 7) as u8);
        }
        self.bytes.push(offset as u8);
    }
}

/// The compressed bytes; `None` only for input beyond 4 GiB.
pub fn compress(data: &[u8]) -> Option<Vec<u8>> {
    u32::try_from(data.len()).ok()?;
    TABLE.with(|cell| {
        let mut cell = cell.borrow_mut();
        let table = cell.get_or_insert_with(HashTable::new);
        table.start_call();
        Some(compress_with(table, data))
    })
}

fn compress_with(table: &mut HashTable, data: &[u8]) -> Vec<u8> {
    let len = data.len();
    let mut out = Output {
        bytes: Vec::with_capacity(len + len / MAX_LITERALS + 2),
        run_start: 0,
        literals: 0,
    };
    out.start_run();
    let mut at = 0;
    if len >= 3 {
        let mut hash = first(data, 0);
        while at < len - 2 {
            hash = next(hash, data, at);
            let candidate = table.replace(slot(hash), at).filter(|&earlier| earlier > 0);
            let matched = candidate.filter(|&earlier| {
                at - earlier - 1 < MAX_OFFSET
                    && at + 4 < len
                    && data[earlier..earlier + 3] == data[at..at + 3]
            });
            let Some(earlier) = matched else {
                out.literal(data[at]);
                at += 1;
                continue;
            };
            let longest = (len - at - 2).min(MAX_MATCH);
            let mut length = 3;
            while length < longest && data[earlier + length] == data[at + length] {
                length += 1;
            }
            out.end_run();
            out.back_reference(at - earlier - 1, length);
            out.start_run();
            // liblzf hashes the last two positions of the match, then goes on after it.
            at += length - 2;
            hash = first(data, at);
            for _ in 0..2 {
                hash = next(hash, data, at);
                table.replace(slot(hash), at);
                at += 1;
            }
        }
    }
    for &byte in &data[at..] {
        out.literal(byte);
    }
    out.end_run();
    out.bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    #[test]
    fn short_and_incompressible_data_is_literal_runs() {
        assert_eq!(compress(b"").unwrap(), b"");
        assert_eq!(compress(b"x").unwrap(), b"\x00x");
        // phpredis stores "a|i:1;" as 05 61 7c 69 3a 31 3b.
        assert_eq!(compress(b"a|i:1;").unwrap(), b"\x05a|i:1;");
        let distinct: Vec<u8> = (0..40).collect();
        let stored = compress(&distinct).unwrap();
        assert_eq!(stored.len(), 42);
        assert_eq!((stored[0], stored[33]), (31, 7));
    }

    #[test]
    fn one_call_never_sees_another_calls_positions() {
        let long = b"abcdefgh".repeat(100);
        let expected = lzf::compress(b"abcdefgh abcdefgh").unwrap();
        compress(&long).unwrap();
        assert_eq!(compress(b"abcdefgh abcdefgh").unwrap(), expected);
    }

    #[test]
    fn generations_wrap_around() {
        let mut table = HashTable::new();
        table.generation = u32::MAX;
        table.replace(7, 42);
        table.start_call();
        assert_eq!(table.generation, 1);
        assert_eq!(table.replace(7, 43), None);
        assert_eq!(table.replace(7, 44), Some(43));
    }

    /// Bytes with runs and repeats, so matches of every length occur.
    fn data() -> impl Strategy<Value = Vec<u8>> {
        vec((any::<u8>(), 1..300usize), 0..40)
            .prop_map(|runs| runs.into_iter().flat_map(|(b, n)| vec![b; n]).collect())
    }

    proptest! {
        /// The `lzf` crate (a port of liblzf) is the reference where its
        /// output buffer (the input's length) has room to spare: near that
        /// limit it gives up, or indexes past its buffer and panics. It
        /// decodes everything.
        #[test]
        fn fuzz_lzf_output_is_liblzf_output(data in prop_oneof![data(), vec(any::<u8>(), 0..2000)]) {
            let ours = compress(&data).unwrap();
            if ours.len() + 8 < data.len() {
                prop_assert_eq!(&ours, &lzf::compress(&data).unwrap());
            }
            if !data.is_empty() {
                prop_assert_eq!(lzf::decompress(&ours, data.len()).unwrap(), data);
            }
        }
    }
}
