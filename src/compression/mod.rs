//! `redis.session.compression`: session data compressed exactly as phpredis
//! compresses it (`redis_compress` / `redis_uncompress`), so either extension
//! reads what the other wrote. There is no marker byte: a read tries the
//! configured algorithm and passes the bytes through unchanged when they do not
//! decompress, which keeps data written before compression was enabled.

use std::borrow::Cow;
use std::cell::RefCell;

mod lzf_encoder;

/// phpredis's `ZSTD_CLEVEL_DEFAULT`, used for levels below 1.
const ZSTD_DEFAULT_LEVEL: i32 = 3;
/// The LZ4 levels phpredis hands to `LZ4_compress_HC`; others mean the fast mode.
const LZ4_HC_LEVELS: std::ops::RangeInclusive<i64> = 1..=12;
/// Nothing larger is decompressed: Redis's own limit on one value
/// (proto-max-bulk-len), so a corrupt length cannot allocate gigabytes.
const MAX_DECOMPRESSED: usize = 512 << 20;
/// LZF's best case: a 3-byte back reference stands for 264 bytes.
const LZF_MAX_RATIO: usize = 88;
/// LZ4's best case ratio per the block format (255 bytes per extra length byte).
const LZ4_MAX_RATIO: usize = 255;
/// phpredis's LZ4 framing: a CRC-8 of the length, then the length as a
/// native `int`, then the LZ4 block.
const LZ4_HEADER_LEN: usize = 5;

pub const INVALID_NOTICE: &str = "redis.session.compression is outside of valid values, disabling";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Lzf,
    Zstd { level: i32 },
    Lz4 { hc_level: Option<i32> },
}

impl Compression {
    /// phpredis's reading of the INI: `none` or empty is off; `lzf`, `zstd`
    /// and `lz4` match as case-insensitive prefixes; anything else is off with
    /// [`INVALID_NOTICE`].
    pub fn from_ini(name: &str, level: i64) -> (Self, Option<&'static str>) {
        // Compared without case, and without a lowercase copy: every open reads it.
        let name = name.trim().as_bytes();
        let named = |prefix: &str| {
            name.get(..prefix.len())
                .is_some_and(|start| start.eq_ignore_ascii_case(prefix.as_bytes()))
        };
        let algorithm = if name.is_empty() || name.eq_ignore_ascii_case(b"none") {
            Compression::None
        } else if named("lzf") {
            Compression::Lzf
        } else if named("zstd") {
            let max = i64::from(zstd::zstd_safe::max_c_level());
            let level = if level < 1 {
                ZSTD_DEFAULT_LEVEL
            } else {
                // Clamped to the maximum, so it fits.
                i32::try_from(level.min(max)).unwrap_or(ZSTD_DEFAULT_LEVEL)
            };
            Compression::Zstd { level }
        } else if named("lz4") {
            let hc_level = LZ4_HC_LEVELS
                .contains(&level)
                .then(|| i32::try_from(level).ok())
                .flatten();
            Compression::Lz4 { hc_level }
        } else {
            return (Compression::None, Some(INVALID_NOTICE));
        };
        (algorithm, None)
    }

    /// The bytes to store. As in phpredis, a failed compression stores the
    /// data as it is, and empty data is left alone by LZF and LZ4.
    pub fn compress<'a>(&self, data: &'a [u8]) -> Cow<'a, [u8]> {
        let compressed = match self {
            Compression::None => None,
            _ if data.is_empty() && !matches!(self, Compression::Zstd { .. }) => None,
            Compression::Lzf => lzf_encoder::compress(data),
            Compression::Zstd { level } => zstd_compress(data, *level),
            Compression::Lz4 { hc_level } => lz4_compress(data, *hc_level),
        };
        compressed.map_or(Cow::Borrowed(data), Cow::Owned)
    }

    /// The session data from stored bytes: decompressed, or unchanged when
    /// they are not data of the configured algorithm.
    pub fn decompress(&self, stored: Vec<u8>) -> Vec<u8> {
        let decompressed = match self {
            _ if stored.is_empty() => None,
            Compression::None => None,
            Compression::Lzf => lzf_decompress(&stored),
            Compression::Zstd { .. } => zstd_decompress(&stored),
            Compression::Lz4 { .. } => lz4_decompress(&stored),
        };
        decompressed.unwrap_or(stored)
    }
}

/// LZF stores no length: grow the buffer until the data fits, as phpredis does.
fn lzf_decompress(stored: &[u8]) -> Option<Vec<u8>> {
    let limit = stored
        .len()
        .saturating_mul(LZF_MAX_RATIO)
        .min(MAX_DECOMPRESSED);
    let mut capacity = stored.len().saturating_mul(4).clamp(64, limit.max(64));
    loop {
        match lzf::decompress(stored, capacity) {
            Ok(data) => return Some(data),
            Err(lzf::LzfError::BufferTooSmall) if capacity < limit => {
                capacity = capacity.saturating_mul(2).min(limit);
            }
            Err(_) => return None,
        }
    }
}

// zstd's contexts live with the worker: creating them costs more than
// compressing a typical session.
thread_local! {
    static ZSTD_COMPRESSOR: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { RefCell::new(None) };
    static ZSTD_DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

fn zstd_compress(data: &[u8], level: i32) -> Option<Vec<u8>> {
    ZSTD_COMPRESSOR.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.as_ref().is_none_or(|(current, _)| *current != level) {
            *cell = Some((level, zstd::bulk::Compressor::new(level).ok()?));
        }
        let (_, compressor) = cell.as_mut()?;
        compressor.compress(data).ok()
    })
}

fn zstd_decompress(stored: &[u8]) -> Option<Vec<u8>> {
    let size = zstd_content_size(stored)?;
    let data = ZSTD_DECOMPRESSOR.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            *cell = Some(zstd::bulk::Decompressor::new().ok()?);
        }
        cell.as_mut()?.decompress(stored, size).ok()
    })?;
    (data.len() == size).then_some(data)
}

/// The frame's content size, if it is given and not beyond [`MAX_DECOMPRESSED`].
fn zstd_content_size(stored: &[u8]) -> Option<usize> {
    let size = zstd::zstd_safe::get_frame_content_size(stored).ok()??;
    usize::try_from(size)
        .ok()
        .filter(|&size| size <= MAX_DECOMPRESSED)
}

fn lz4_compress(data: &[u8], hc_level: Option<i32>) -> Option<Vec<u8>> {
    let length = i32::try_from(data.len()).ok()?.to_ne_bytes();
    let mode = hc_level.map(lz4::block::CompressionMode::HIGHCOMPRESSION);
    let block = lz4::block::compress(data, mode, false).ok()?;
    let mut out = Vec::with_capacity(LZ4_HEADER_LEN + block.len());
    out.push(crc8(&length));
    out.extend_from_slice(&length);
    out.extend_from_slice(&block);
    Some(out)
}

fn lz4_decompress(stored: &[u8]) -> Option<Vec<u8>> {
    let (size, block) = lz4_header(stored)?;
    let data = lz4::block::decompress(block, Some(i32::try_from(size).ok()?)).ok()?;
    (data.len() == size).then_some(data)
}

/// The length phpredis's header claims and the block after it; `None` unless
/// the CRC matches and the length is one the block could hold.
fn lz4_header(stored: &[u8]) -> Option<(usize, &[u8])> {
    let (header, block) = stored.split_at_checked(LZ4_HEADER_LEN)?;
    let length: [u8; 4] = header[1..].try_into().ok()?;
    if header[0] != crc8(&length) {
        return None;
    }
    let size = usize::try_from(i32::from_ne_bytes(length)).ok()?;
    let fits =
        size > 0 && size <= MAX_DECOMPRESSED && size <= block.len().saturating_mul(LZ4_MAX_RATIO);
    fits.then_some((size, block))
}

/// phpredis's CRC-8 of the LZ4 length: polynomial 0x31, initial value 0xFF.
fn crc8(bytes: &[u8]) -> u8 {
    bytes.iter().fold(0xFF, |crc, &byte| {
        (0..8).fold(crc ^ byte, |crc, _| {
            if crc & 0x80 != 0 {
                (crc << 1) ^ 0x31
            } else {
                crc << 1
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Compression; 4] = [
        Compression::Lzf,
        Compression::Zstd { level: 3 },
        Compression::Lz4 { hc_level: None },
        Compression::Lz4 { hc_level: Some(3) },
    ];

    fn samples() -> Vec<Vec<u8>> {
        let repeated = "user|s:5:\"alice\";".repeat(50).into_bytes();
        let noise: Vec<u8> = (0u32..3000)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        vec![
            b"a|i:1;".to_vec(),
            b"xy".to_vec(),
            repeated,
            noise,
            vec![0; 100_000],
        ]
    }

    #[test]
    fn ini_values_follow_phpredis() {
        assert_eq!(Compression::from_ini("none", 3), (Compression::None, None));
        assert_eq!(Compression::from_ini("", 3), (Compression::None, None));
        assert_eq!(Compression::from_ini("LZF", 3).0, Compression::Lzf);
        assert_eq!(
            Compression::from_ini("zstd", 0).0,
            Compression::Zstd { level: 3 }
        );
        assert_eq!(
            Compression::from_ini("zstd", 1000).0,
            Compression::Zstd {
                level: zstd::zstd_safe::max_c_level()
            }
        );
        assert_eq!(
            Compression::from_ini("lz4", 0).0,
            Compression::Lz4 { hc_level: None }
        );
        assert_eq!(
            Compression::from_ini("lz4", 13).0,
            Compression::Lz4 { hc_level: None }
        );
        assert_eq!(
            Compression::from_ini("lz4hc", 9).0,
            Compression::Lz4 { hc_level: Some(9) }
        );
        assert_eq!(
            Compression::from_ini("gzip", 3),
            (Compression::None, Some(INVALID_NOTICE))
        );
    }

    #[test]
    fn every_algorithm_round_trips() {
        for algorithm in ALL {
            for data in samples() {
                let stored = algorithm.compress(&data).into_owned();
                assert_eq!(algorithm.decompress(stored), data, "{algorithm:?}");
            }
        }
    }

    #[test]
    fn lz4_header_is_phpredis_framing() {
        // phpredis's bytes for "a|i:1;" with COMPRESSION_LZ4.
        let stored = Compression::Lz4 { hc_level: None }.compress(b"a|i:1;");
        assert_eq!(&stored[..6], b"\xde\x06\x00\x00\x00\x60");
    }

    #[test]
    fn empty_data_is_stored_as_phpredis_stores_it() {
        for algorithm in [Compression::Lzf, Compression::Lz4 { hc_level: None }] {
            assert!(algorithm.compress(b"").is_empty());
        }
        let zstd = Compression::Zstd { level: 3 };
        assert_eq!(zstd.compress(b"").len(), 9);
        assert_eq!(zstd.decompress(Vec::new()), b"");
    }

    #[test]
    fn data_of_another_format_passes_through() {
        let legacy = b"count|i:41;".to_vec();
        for algorithm in ALL {
            assert_eq!(algorithm.decompress(legacy.clone()), legacy);
        }
        // A valid LZ4 header with a corrupt block, an absurd zstd size.
        let mut lz4 = Compression::Lz4 { hc_level: None }
            .compress(&[7; 1000])
            .into_owned();
        lz4.truncate(8);
        assert_eq!(
            Compression::Lz4 { hc_level: None }.decompress(lz4.clone()),
            lz4
        );
        let zstd = Compression::Zstd { level: 3 };
        let mut frame = zstd.compress(&[7; 1000]).into_owned();
        frame.truncate(frame.len() - 3);
        assert_eq!(zstd.decompress(frame.clone()), frame);
    }

    #[test]
    fn claimed_lengths_cannot_allocate_gigabytes() {
        // An LZ4 header claiming 2 GiB for a 3-byte block, with a valid CRC.
        let length = i32::MAX.to_ne_bytes();
        let mut stored = vec![crc8(&length)];
        stored.extend_from_slice(&length);
        stored.extend_from_slice(&[0x10, b'x', 0]);
        assert!(lz4_header(&stored).is_none());
        let lz4 = Compression::Lz4 { hc_level: None };
        assert_eq!(lz4_header(&lz4.compress(&[7; 1000])).unwrap().0, 1000);
        // A zstd frame header announcing 4 GiB of content.
        let mut frame = b"\x28\xb5\x2f\xfd\xa0".to_vec();
        frame.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(
            zstd::zstd_safe::get_frame_content_size(&frame).unwrap() == Some(u64::from(u32::MAX))
        );
        assert_eq!(zstd_content_size(&frame), None);
        let zstd = Compression::Zstd { level: 3 };
        assert_eq!(zstd_content_size(&zstd.compress(&[7; 1000])), Some(1000));
    }
}

/// Property tests; `scripts/test.sh --all` runs a million cases of each, optimised.
#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    fn algorithm() -> impl Strategy<Value = Compression> {
        prop_oneof![
            Just(Compression::Lzf),
            (1..=22i32).prop_map(|level| Compression::Zstd { level }),
            prop_oneof![Just(None), (1..=12i32).prop_map(Some)]
                .prop_map(|hc_level| Compression::Lz4 { hc_level }),
        ]
    }

    /// Bytes with runs, so that every algorithm finds matches.
    fn data() -> impl Strategy<Value = Vec<u8>> {
        vec((any::<u8>(), 1..40usize), 0..30)
            .prop_map(|runs| runs.into_iter().flat_map(|(b, n)| vec![b; n]).collect())
    }

    proptest! {
        #[test]
        fn fuzz_compressed_data_reads_back(algorithm in algorithm(), data in data()) {
            let stored = algorithm.compress(&data).into_owned();
            prop_assert_eq!(algorithm.decompress(stored), data);
        }

        #[test]
        fn fuzz_any_stored_bytes_read_without_panic(algorithm in algorithm(), stored in vec(any::<u8>(), 0..300)) {
            algorithm.decompress(stored);
        }
    }
}
