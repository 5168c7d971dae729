//! Entry points for arbitrary bytes, shared by the cargo-fuzz targets
//! (`rust/pylog-core/fuzz`, `make fuzz`) and the bounded random-mutation test
//! of `cargo test` (`tests/mutation.rs`). Each feeds its input to the batch
//! validator, the leader's assignment, the decoders and the cleaner, and
//! panics only when an invariant breaks — above all: a batch the leader
//! accepts, and a batch the cleaner writes, reads back.
//!
//! Not part of the storage API.

use std::collections::HashMap;

use crate::batch::{
    self, BatchHeader, ATTRIBUTES_OFFSET, HEADER_SIZE, LOG_OVERHEAD, MAGIC_OFFSET, MAGIC_V2,
};
use crate::cleaner::{build_offset_map, clean_batches, CleanOptions, OffsetMap};
use crate::compression::{self, Decoder};
use crate::error::Error;
use crate::records::{walk_records, walk_records_stream};
use crate::validate::{
    analyze_records, decode_batch_records, validate_and_assign_offsets, validate_any,
    validate_batch, AssignOptions, ValidationOptions,
};

/// The decompression limit of every entry point: small, so that bombs are
/// found fast and memory stays bounded under the fuzzer.
pub const LIMIT: usize = 4 << 20;

/// Give the batch at the start of `b` a right length field and CRC32C (and
/// magic 2), so that inputs reach past the checksum.
pub fn fix_batch(b: &mut [u8]) {
    if b.len() < HEADER_SIZE {
        return;
    }
    let len = (b.len() - LOG_OVERHEAD) as i32;
    batch::write_i32(b, batch::LENGTH_OFFSET, len);
    b[MAGIC_OFFSET] = MAGIC_V2 as u8;
    let crc = batch::compute_crc(b);
    batch::write_u32(b, batch::CRC_OFFSET, crc);
}

/// A v2 batch from `data`: its header (when long enough) fixed up, or, with
/// the first byte's top bit set, a 61-byte header built from the first bytes
/// around a records section that is the rest compressed with the codec of
/// the low bits (valid streams of fuzzed records) — then every check.
pub fn batch(data: &[u8]) {
    if let Some((&mode, rest)) = data.split_first() {
        if mode & 0x80 != 0 && rest.len() >= 4 {
            let codec = mode % 5;
            let count = i32::from(u16::from_be_bytes([rest[0], rest[1]]) % 1024);
            let section = if mode & 0x40 != 0 {
                rest[2..].to_vec()
            } else {
                compression::compress(codec, &rest[2..]).expect("every codec compresses")
            };
            let mut b = vec![0u8; HEADER_SIZE];
            b[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2]
                .copy_from_slice(&i16::from(codec).to_be_bytes());
            batch::write_i32(&mut b, batch::LAST_OFFSET_DELTA_OFFSET, (count - 1).max(0));
            batch::write_i64(&mut b, batch::PRODUCER_ID_OFFSET, -1);
            batch::write_i32(&mut b, batch::BASE_SEQUENCE_OFFSET, -1);
            batch::write_i32(&mut b, batch::RECORDS_COUNT_OFFSET, count);
            b.extend_from_slice(&section);
            fix_batch(&mut b);
            check(&b);
            return;
        }
    }
    let mut b = data.to_vec();
    fix_batch(&mut b);
    check(&b);
    check(data);
    legacy(data);
}

/// `data` as a legacy message (size and CRC32 made right, magic 0 or 1)
/// through the conversion to v2: whatever converts validates deeply.
pub fn legacy(data: &[u8]) {
    let mut m = data.to_vec();
    if m.len() >= LOG_OVERHEAD + crate::legacy::MIN_SIZE_V0 {
        let size = (m.len() - LOG_OVERHEAD) as i32;
        batch::write_i32(&mut m, batch::LENGTH_OFFSET, size);
        m[MAGIC_OFFSET] %= 2;
        let crc = crc32fast::hash(&m[MAGIC_OFFSET..]);
        batch::write_u32(&mut m, crate::legacy::CRC_OFFSET, crc);
    }
    let deep = ValidationOptions {
        max_batch_size: usize::MAX,
        deep: true,
        max_decompressed_size: LIMIT,
    };
    for input in [&m[..], data] {
        let _ = analyze_records(input, &deep);
        if let Ok(v2) = crate::legacy::convert_legacy_to_v2_bounded(input, LIMIT) {
            analyze_records(&v2, &deep)
                .unwrap_or_else(|e| panic!("a converted legacy set fails validation: {e}"));
        }
    }
}

/// Every reader over `b`, and the invariants between them.
pub fn check(b: &[u8]) {
    let deep = ValidationOptions {
        max_batch_size: usize::MAX,
        deep: true,
        max_decompressed_size: LIMIT,
    };
    let valid = analyze_records(b, &deep);
    let _ = validate_any(b, 0, &deep);
    let _ = validate_batch(b, 0, &Default::default());
    let _ = decode_batch_records(b);

    // the leader's append: whatever it accepts, a consumer reads
    let mut assigned = b.to_vec();
    let leader = AssignOptions {
        base_offset: 1000,
        partition_leader_epoch: 3,
        now_ms: 1_700_000_000_000,
        max_batch_size: usize::MAX,
        max_decompressed_size: LIMIT,
        ..Default::default()
    };
    if let Ok(info) = validate_and_assign_offsets(&mut assigned, &leader) {
        let again = analyze_records(&assigned, &deep)
            .unwrap_or_else(|e| panic!("an assigned batch fails deep validation: {e}"));
        assert_eq!(again.num_records, info.num_records);
        for m in &info.batches {
            let one = &assigned[m.position as usize..m.position as usize + m.size];
            let records = decode_batch_records(one)
                .unwrap_or_else(|e| panic!("an assigned batch does not decode: {e}"));
            assert_eq!(records.len(), m.records_count as usize);
        }
    }

    // the cleaner, over batches that are valid on disk
    if let Ok(info) = valid {
        if info.valid_bytes == b.len() && info.num_batches > 0 {
            clean(&b[..info.valid_bytes], &info.batches, &deep);
        }
    }
}

fn clean(log: &[u8], batches: &[batch::BatchMeta], deep: &ValidationOptions) {
    let mut map = OffsetMap::new(24 * 4096, 0.9);
    if build_offset_map(&mut map, log, 0, i64::MAX, 0, LIMIT).is_err() {
        return;
    }
    // a later write of one key, and every producer active
    map.put(b"k", i64::MAX - 1);
    let active: HashMap<i64, i64> = batches
        .iter()
        .filter(|m| m.producer_id >= 0)
        .map(|m| (m.producer_id, m.last_offset))
        .collect();
    // a clean that writes delete horizons, and one past every horizon
    for now_ms in [0, i64::MAX] {
        let opts = CleanOptions {
            now_ms,
            delete_retention_ms: 1000,
            active_producers: active.clone(),
            max_decompressed_size: LIMIT,
        };
        let Ok(c) = clean_batches(&mut map, log, &opts, 0) else {
            continue;
        };
        if c.out.is_empty() {
            continue;
        }
        let info = analyze_records(&c.out, deep)
            .unwrap_or_else(|e| panic!("the cleaner wrote a batch that fails validation: {e}"));
        assert_eq!(info.valid_bytes, c.out.len());
        for m in &info.batches {
            let one = &c.out[m.position as usize..m.position as usize + m.size];
            if one[MAGIC_OFFSET] as i8 != MAGIC_V2 {
                continue;
            }
            let h = BatchHeader::parse(one, 0).unwrap();
            if h.records_count == 0 {
                assert_eq!(
                    h.compression_codec(),
                    0,
                    "an empty batch written compressed"
                );
            }
            let records = decode_batch_records(one)
                .unwrap_or_else(|e| panic!("the cleaner wrote a batch that does not decode: {e}"));
            assert_eq!(records.len(), h.records_count as usize);
        }
    }
}

/// A records section walked in place and streamed must agree: the first
/// two bytes are the count, the rest the records.
pub fn records(data: &[u8]) {
    if data.len() < 2 {
        return;
    }
    let count = usize::from(u16::from_be_bytes([data[0], data[1]]) % 4096);
    let section = &data[2..];
    let mut in_place = Vec::new();
    let a = walk_records(section, count, 0, |_, s| {
        in_place.push(s);
        Ok(())
    });
    // the 64 KiB window, and a small one: records larger than the window
    // are framed as they stream by
    for window in [0, 16 + data.len() % 48] {
        let mut streamed = Vec::new();
        let mut scratch = vec![0u8; window];
        let mut dec = Decoder::new(compression::NONE, section, LIMIT).unwrap();
        let b = walk_records_stream(&mut dec, count, 0, &mut scratch, |_, s| {
            streamed.push(s);
            Ok(())
        });
        assert_eq!(
            a.is_ok(),
            b.is_ok(),
            "in place {a:?}, streamed {b:?} ({count} records, window {window})"
        );
        assert_eq!(in_place, streamed);
    }
}

/// `data[0] % 5` names a codec, the rest is its input: decoding is bounded,
/// the same in small reads as in one go, and round-trips.
pub fn decompress(data: &[u8]) {
    let Some((&c, input)) = data.split_first() else {
        return;
    };
    let codec = c % 5;
    let limit = 1 << 20;
    let whole = compression::decompress_bounded(codec, input, limit);
    if let Ok(out) = &whole {
        assert!(out.len() <= limit);
    }
    let mut dec = match Decoder::new(codec, input, limit) {
        Ok(d) => d,
        Err(e) => {
            assert!(whole.is_err(), "{e}");
            return;
        }
    };
    let mut pieces = Vec::new();
    let mut buf = [0u8; 7];
    let small = loop {
        match dec.read(&mut buf) {
            Ok(0) => break Ok(pieces),
            Ok(n) => pieces.extend_from_slice(&buf[..n]),
            Err(e) => break Err(e),
        }
    };
    match (&whole, &small) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(Error::RecordsTooLarge { .. }), Err(Error::RecordsTooLarge { .. })) => {}
        (Err(_), Err(_)) => {}
        _ => panic!("one read {whole:?} vs small reads {small:?}"),
    }
    if let Ok(out) = whole {
        let again = compression::compress(codec, &out).unwrap();
        assert_eq!(
            compression::decompress_bounded(codec, &again, limit).unwrap(),
            out
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn entry_points_take_anything_small() {
        for n in 0..80usize {
            let data: Vec<u8> = (0..n).map(|i| (i * 31 + n) as u8).collect();
            super::batch(&data);
            super::records(&data);
            super::decompress(&data);
        }
    }
}
