//! Log compaction's native work (Kafka's Cleaner): build the offset map over a
//! log's dirty range, and filter batches into their cleaned form.
//!
//! Both work on a buffer of whole batches read from a segment (the caller
//! reads, throttles and appends); a batch cut by the buffer's end is left for
//! the next call, its size reported in `needed` so the caller can grow the
//! buffer. Only magic v2 batches are compacted; legacy messages pass through.

pub mod offset_map;

use std::collections::HashMap;

use crate::batch::{
    self, BatchHeader, BatchMeta, HEADER_SIZE, LOG_OVERHEAD, MAGIC_OFFSET, MAGIC_V2, RECORDS_OFFSET,
};
use crate::compression;
use crate::error::{Error, Result};
use crate::records::{frame_error, frame_record};
use crate::varint::{read_varint, read_varlong};
pub use offset_map::{hash_key, KeyHash, OffsetMap};

/// The next whole batch in `buf[at..]`: its size, or `Err(needed)` when the
/// buffer holds only part of it (`needed` = its full size, or 0 if even the
/// length field is cut).
fn next_batch(buf: &[u8], at: usize, position: u64) -> Result<std::result::Result<usize, usize>> {
    let rest = &buf[at..];
    if rest.len() < LOG_OVERHEAD {
        return Ok(Err(0));
    }
    let size = match batch::framed_size(rest) {
        Some(s) if s > MAGIC_OFFSET => s,
        _ => {
            return Err(Error::corrupt(
                position + at as u64,
                "invalid batch length in a segment being cleaned",
            ))
        }
    };
    if size > rest.len() {
        return Ok(Err(size));
    }
    if rest[MAGIC_OFFSET] as i8 == MAGIC_V2 && size < HEADER_SIZE {
        return Err(Error::corrupt(
            position + at as u64,
            format!("batch of {size} bytes is shorter than its header"),
        ));
    }
    Ok(Ok(size))
}

/// One record's key (None when null), whether its value is null, its offset
/// delta and timestamp delta; `data[at..end]` must frame (checked first).
struct RecordView<'a> {
    key: Option<&'a [u8]>,
    null_value: bool,
    offset_delta: i32,
    timestamp_delta: i64,
    end: usize,
}

fn view_record(data: &[u8], at: usize, index: usize, position: u64) -> Result<RecordView<'_>> {
    let (shape, end) = frame_record(data, at).map_err(|e| frame_error(position, index, at, e))?;
    let body = &data[..end];
    let mut p = at;
    // framing was checked: these reads succeed
    read_varint(body, &mut p);
    p += 1;
    read_varlong(body, &mut p);
    read_varint(body, &mut p);
    read_varint(body, &mut p);
    let key = if shape.key_len >= 0 {
        let k = &body[p..p + shape.key_len as usize];
        p += shape.key_len as usize;
        Some(k)
    } else {
        None
    };
    let value_len = read_varint(body, &mut p).unwrap_or(-1);
    Ok(RecordView {
        key,
        null_value: value_len < 0,
        offset_delta: shape.offset_delta,
        timestamp_delta: shape.timestamp_delta,
        end,
    })
}

/// The records section of a v2 batch, decompressed when needed (at most
/// `limit` bytes). An empty batch has none, whatever its codec bits say.
fn records_of<'a>(
    b: &'a [u8],
    h: &BatchHeader,
    position: u64,
    limit: usize,
) -> Result<std::borrow::Cow<'a, [u8]>> {
    let section = &b[RECORDS_OFFSET..h.size_in_bytes()];
    if h.compression_codec() == compression::NONE {
        Ok(std::borrow::Cow::Borrowed(section))
    } else if h.records_count == 0 {
        Ok(std::borrow::Cow::Borrowed(&[]))
    } else {
        compression::decompress_bounded(h.compression_codec(), section, limit)
            .map(std::borrow::Cow::Owned)
            .map_err(|e| compression::at_position(e, position))
    }
}

/// What one [`build_offset_map`] call did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MapBuild {
    /// Bytes of whole batches processed from the start of the buffer.
    pub consumed: usize,
    /// Size of the cut batch at `consumed` (0 when none or unknown yet).
    pub needed: usize,
    /// The map filled up: entries after `map.latest_offset()` were not added.
    pub full: bool,
    /// A batch at or past `end_offset` was reached: nothing more to map.
    pub done: bool,
    pub records: u64,
}

/// Add the keys of the records in `buf` (batches from `position` of a
/// segment) with offsets in `[start_offset, end_offset)` to `map`, a later
/// offset replacing an earlier one. Control batches and keyless records are
/// skipped. A batch's records decompress to at most `max_decompressed_size`
/// bytes (RecordsTooLarge beyond).
pub fn build_offset_map(
    map: &mut OffsetMap,
    buf: &[u8],
    start_offset: i64,
    end_offset: i64,
    position: u64,
    max_decompressed_size: usize,
) -> Result<MapBuild> {
    let mut r = MapBuild::default();
    let mut at = 0usize;
    let mut keys: Vec<(KeyHash, i64)> = Vec::new();
    while at < buf.len() {
        let size = match next_batch(buf, at, position)? {
            Ok(s) => s,
            Err(needed) => {
                r.needed = needed;
                break;
            }
        };
        let b = &buf[at..at + size];
        let pos = position + at as u64;
        if b[MAGIC_OFFSET] as i8 == MAGIC_V2 {
            let h = BatchHeader::parse(b, pos)?;
            if h.base_offset >= end_offset {
                r.done = true;
                break;
            }
            if h.last_offset() >= start_offset && !h.is_control() {
                let data = records_of(b, &h, pos, max_decompressed_size)?;
                let mut p = 0usize;
                keys.clear();
                for index in 0..h.records_count.max(0) as usize {
                    if p >= data.len() {
                        return Err(Error::corrupt(pos, "records end before the records count"));
                    }
                    let rec = view_record(&data, p, index, pos)?;
                    p = rec.end;
                    let offset = h.base_offset + rec.offset_delta as i64;
                    if offset < start_offset || offset >= end_offset {
                        continue;
                    }
                    if let Some(key) = rec.key {
                        let hash = hash_key(key);
                        map.prefetch(&hash);
                        keys.push((hash, offset));
                    }
                }
                for &(hash, offset) in &keys {
                    if !map.put_hashed(hash, offset) {
                        r.full = true;
                        r.consumed = at;
                        return Ok(r);
                    }
                    r.records += 1;
                }
            }
        }
        at += size;
    }
    r.consumed = at;
    Ok(r)
}

/// How a segment is cleaned.
#[derive(Debug, Clone)]
pub struct CleanOptions {
    /// When the clean started. A tombstone stays until its batch's delete
    /// horizon (KIP-534): the first clean that keeps it writes the horizon,
    /// `now_ms + delete_retention_ms`, in the batch header; a clean after it
    /// drops the tombstone.
    pub now_ms: i64,
    pub delete_retention_ms: i64,
    /// Producer id → last data offset of each active producer: a batch ending
    /// there keeps at least its (empty) header, so the producer's state survives.
    pub active_producers: HashMap<i64, i64>,
    /// Most bytes a batch's records may decompress to (RecordsTooLarge beyond).
    pub max_decompressed_size: usize,
}

impl Default for CleanOptions {
    fn default() -> Self {
        CleanOptions {
            now_ms: 0,
            delete_retention_ms: 86_400_000,
            active_producers: HashMap::new(),
            max_decompressed_size: compression::MAX_DECOMPRESSED_SIZE,
        }
    }
}

/// The output of one [`clean_batches`] call.
#[derive(Debug, Clone, Default)]
pub struct CleanedChunk {
    pub consumed: usize,
    pub needed: usize,
    /// The retained batches, ready to append.
    pub out: Vec<u8>,
    /// Facts of each batch of `out`, positions relative to `out`.
    pub batches: Vec<BatchMeta>,
    pub records_read: u64,
    pub records_retained: u64,
    pub batches_read: u64,
}

/// Filter the batches in `buf`: a record stays when it has a key, no later
/// offset of that key is in `map`, and it has a value or its batch's delete
/// horizon has not passed (none yet counts as not passed).
/// A batch keeping every record and needing no horizon is copied as is; one
/// keeping some, or keeping a tombstone with no horizon yet, is rebuilt
/// (same base offset, last offset delta, producer fields, flags and codec;
/// retained records byte for byte, or with their timestamp deltas rebased on
/// a new horizon, which then is the base timestamp and sets the attribute's
/// delete-horizon bit, as Kafka writes it; new max timestamp, count, length,
/// CRC32C);
/// one keeping none is dropped, unless it is an active producer's last batch,
/// which keeps its header with no records, uncompressed (codec bits cleared,
/// as Kafka writes empty batches: a consumer cannot decompress 0 bytes).
/// An empty batch with codec bits already on disk (older cleaners wrote
/// them) is rewritten that way too. Control batches and legacy messages are
/// kept.
pub fn clean_batches(
    map: &mut OffsetMap,
    buf: &[u8],
    opts: &CleanOptions,
    position: u64,
) -> Result<CleanedChunk> {
    let mut c = CleanedChunk {
        out: Vec::with_capacity(buf.len() / 4),
        ..Default::default()
    };
    let mut at = 0usize;
    let mut kept: Vec<(usize, usize)> = Vec::new();
    // (key hash, offset, record start, record end, timestamp delta, tombstone)
    let mut seen: Vec<(KeyHash, i64, usize, usize, i64, bool)> = Vec::new();
    while at < buf.len() {
        let size = match next_batch(buf, at, position)? {
            Ok(s) => s,
            Err(needed) => {
                c.needed = needed;
                break;
            }
        };
        let b = &buf[at..at + size];
        let pos = position + at as u64;
        at += size;
        c.batches_read += 1;
        if b[MAGIC_OFFSET] as i8 != MAGIC_V2 {
            let meta = crate::validate::validate_any(b, pos, &Default::default())?;
            let out_pos = c.out.len() as u64;
            c.out.extend_from_slice(b);
            c.batches.push(BatchMeta {
                position: out_pos,
                ..meta
            });
            continue;
        }
        let h = BatchHeader::parse(b, pos)?;
        let count = h.records_count.max(0) as usize;
        c.records_read += count as u64;
        if h.is_control() {
            c.records_retained += count as u64;
            copy_whole(&mut c, b, &h);
            continue;
        }
        let data = records_of(b, &h, pos, opts.max_decompressed_size)?;
        kept.clear();
        seen.clear();
        let mut p = 0usize;
        let log_append_time = h.timestamp_type() == 1;
        let horizon =
            (h.attributes & batch::DELETE_HORIZON_FLAG_MASK != 0).then_some(h.base_timestamp);
        let retain_deletes = horizon.is_none_or(|t| opts.now_ms < t);
        let mut kept_tombstone = false;
        let mut max_ts = batch::NO_TIMESTAMP;
        for index in 0..count {
            if p >= data.len() {
                return Err(Error::corrupt(pos, "records end before the records count"));
            }
            let rec = view_record(&data, p, index, pos)?;
            let start = p;
            p = rec.end;
            // keyless records are dropped (Kafka counts them invalid)
            let Some(key) = rec.key else { continue };
            if rec.null_value && !retain_deletes {
                continue;
            }
            let hash = hash_key(key);
            map.prefetch(&hash);
            let offset = h.base_offset + rec.offset_delta as i64;
            seen.push((
                hash,
                offset,
                start,
                rec.end,
                rec.timestamp_delta,
                rec.null_value,
            ));
        }
        for &(hash, offset, start, end, ts_delta, null_value) in &seen {
            if offset < map.get_hashed(hash) {
                continue;
            }
            let ts = h.base_timestamp.wrapping_add(ts_delta);
            if ts > max_ts {
                max_ts = ts;
            }
            kept_tombstone |= null_value;
            kept.push((start, end));
        }
        c.records_retained += kept.len() as u64;
        // The first clean keeping a tombstone starts its retention.
        let new_horizon = (kept_tombstone && horizon.is_none())
            .then(|| opts.now_ms.saturating_add(opts.delete_retention_ms));
        if kept.len() == count
            && new_horizon.is_none()
            && !(count == 0 && h.compression_codec() != compression::NONE)
        {
            copy_whole(&mut c, b, &h);
            continue;
        }
        let last_of_producer = h.producer_id >= 0
            && opts.active_producers.get(&h.producer_id) == Some(&h.last_offset());
        if kept.is_empty() && !last_of_producer {
            continue;
        }
        let mut section = Vec::with_capacity(kept.iter().map(|(s, e)| e - s).sum());
        for &(s, e) in &kept {
            match new_horizon {
                Some(t) => rebase_record(&mut section, &data[s..e], h.base_timestamp, t),
                None => section.extend_from_slice(&data[s..e]),
            }
        }
        let section = if kept.is_empty() || h.compression_codec() == compression::NONE {
            section
        } else {
            compression::compress(h.compression_codec(), &section)?
        };
        let attributes = if kept.is_empty() {
            // Kafka's empty header: no codec and no horizon
            h.attributes & !(batch::COMPRESSION_CODEC_MASK | batch::DELETE_HORIZON_FLAG_MASK)
        } else if new_horizon.is_some() {
            h.attributes | batch::DELETE_HORIZON_FLAG_MASK
        } else {
            h.attributes
        };
        let max_timestamp = if log_append_time || kept.is_empty() {
            h.max_timestamp
        } else {
            max_ts
        };
        let out_pos = c.out.len();
        c.out.extend_from_slice(&b[..HEADER_SIZE]);
        c.out.extend_from_slice(&section);
        let nb = &mut c.out[out_pos..];
        let length = (HEADER_SIZE - LOG_OVERHEAD + section.len()) as i32;
        batch::write_i32(nb, batch::LENGTH_OFFSET, length);
        batch::write_i64(nb, batch::MAX_TIMESTAMP_OFFSET, max_timestamp);
        batch::write_i32(nb, batch::RECORDS_COUNT_OFFSET, kept.len() as i32);
        nb[batch::ATTRIBUTES_OFFSET..batch::ATTRIBUTES_OFFSET + 2]
            .copy_from_slice(&attributes.to_be_bytes());
        if kept.is_empty() {
            // Kafka's empty header: the base timestamp is the max timestamp.
            batch::write_i64(nb, batch::BASE_TIMESTAMP_OFFSET, max_timestamp);
        } else if let Some(t) = new_horizon {
            batch::write_i64(nb, batch::BASE_TIMESTAMP_OFFSET, t);
        }
        let crc = batch::compute_crc(nb);
        batch::write_u32(nb, batch::CRC_OFFSET, crc);
        let nh = BatchHeader::parse(nb, out_pos as u64)?;
        c.batches.push(BatchMeta::from_header(&nh, out_pos as u64));
    }
    c.consumed = at;
    Ok(c)
}

/// Append the record `rec` (one framed record of a batch whose base timestamp
/// is `old_base`) to `out` with its timestamp delta taken from `new_base`:
/// its timestamp unchanged, its length field and delta re-encoded.
fn rebase_record(out: &mut Vec<u8>, rec: &[u8], old_base: i64, new_base: i64) {
    // framing was checked: these reads succeed
    let mut p = 0usize;
    read_varint(rec, &mut p);
    let attributes = rec[p];
    p += 1;
    let delta = read_varlong(rec, &mut p).unwrap_or(0);
    let rest = &rec[p..];
    let ts = old_base.wrapping_add(delta);
    let mut head = vec![attributes];
    crate::varint::write_varlong(&mut head, ts.wrapping_sub(new_base));
    crate::varint::write_varint(out, (head.len() + rest.len()) as i32);
    out.extend_from_slice(&head);
    out.extend_from_slice(rest);
}

/// Copy batch `b` as it is — except an empty one with codec bits (a control
/// batch, or one older cleaners wrote), which goes out as its bare header
/// uncompressed, with a fresh CRC.
fn copy_whole(c: &mut CleanedChunk, b: &[u8], h: &BatchHeader) {
    let out_pos = c.out.len();
    if h.records_count == 0 && h.compression_codec() != compression::NONE {
        c.out.extend_from_slice(&b[..HEADER_SIZE]);
        let nb = &mut c.out[out_pos..];
        batch::write_i32(
            nb,
            batch::LENGTH_OFFSET,
            (HEADER_SIZE - LOG_OVERHEAD) as i32,
        );
        let attributes = h.attributes & !batch::COMPRESSION_CODEC_MASK;
        nb[batch::ATTRIBUTES_OFFSET..batch::ATTRIBUTES_OFFSET + 2]
            .copy_from_slice(&attributes.to_be_bytes());
        let crc = batch::compute_crc(nb);
        batch::write_u32(nb, batch::CRC_OFFSET, crc);
        let nh = BatchHeader {
            batch_length: (HEADER_SIZE - LOG_OVERHEAD) as i32,
            attributes,
            crc,
            ..*h
        };
        c.batches.push(BatchMeta::from_header(&nh, out_pos as u64));
        return;
    }
    c.out.extend_from_slice(b);
    c.batches.push(BatchMeta::from_header(h, out_pos as u64));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compression::MAX_DECOMPRESSED_SIZE as MAX;
    use crate::records::{build_batch, BuildOptions, BuildRecord};
    use crate::validate::decode_batch_records;

    fn rec(k: Option<&str>, v: Option<&str>, ts: i64) -> BuildRecord {
        BuildRecord {
            key: k.map(|s| s.as_bytes().to_vec()),
            value: v.map(|s| s.as_bytes().to_vec()),
            headers: vec![],
            timestamp: ts,
        }
    }

    fn log(codec: u8) -> Vec<u8> {
        // offsets 0..=5: a=1, b=1, a=2 | c=1, b=tombstone, a=3
        let mut out = build_batch(
            &[
                rec(Some("a"), Some("1"), 10),
                rec(Some("b"), Some("1"), 11),
                rec(Some("a"), Some("2"), 12),
            ],
            &BuildOptions {
                compression: codec,
                ..Default::default()
            },
        )
        .unwrap();
        out.extend(
            build_batch(
                &[
                    rec(Some("c"), Some("1"), 13),
                    rec(Some("b"), None, 14),
                    rec(Some("a"), Some("3"), 15),
                ],
                &BuildOptions {
                    base_offset: 3,
                    compression: codec,
                    producer_id: 7,
                    producer_epoch: 1,
                    base_sequence: 0,
                    ..Default::default()
                },
            )
            .unwrap(),
        );
        out
    }

    fn values(buf: &[u8]) -> Vec<(i64, String, Option<String>)> {
        let mut at = 0;
        let mut v = vec![];
        while at < buf.len() {
            let size = batch::framed_size(&buf[at..]).unwrap();
            for r in decode_batch_records(&buf[at..at + size]).unwrap() {
                v.push((
                    r.offset,
                    String::from_utf8(r.key.unwrap()).unwrap(),
                    r.value.map(|x| String::from_utf8(x).unwrap()),
                ));
            }
            at += size;
        }
        v
    }

    #[test]
    fn keeps_latest_per_key_in_every_codec() {
        for codec in [0u8, 1, 2, 3, 4] {
            let buf = log(codec);
            let mut map = OffsetMap::new(24 * 64, 0.9);
            let m = build_offset_map(&mut map, &buf, 0, i64::MAX, 0, MAX).unwrap();
            assert_eq!((m.consumed, m.full, m.records), (buf.len(), false, 6));
            assert_eq!(map.latest_offset(), 5);
            // the first clean keeping the tombstone writes its delete horizon
            let opts = CleanOptions {
                now_ms: 1_000,
                delete_retention_ms: 500,
                ..Default::default()
            };
            let c = clean_batches(&mut map, &buf, &opts, 0).unwrap();
            assert_eq!(c.consumed, buf.len());
            assert_eq!(
                values(&c.out),
                vec![
                    (3, "c".into(), Some("1".into())),
                    (4, "b".into(), None),
                    (5, "a".into(), Some("3".into()))
                ]
            );
            assert_eq!(c.batches.len(), 1);
            assert_eq!(c.batches[0].compression, codec);
            assert_eq!(c.batches[0].producer_id, 7);
            let h = BatchHeader::parse(&c.out, 0).unwrap();
            assert_ne!(h.attributes & batch::DELETE_HORIZON_FLAG_MASK, 0);
            assert_eq!((h.base_timestamp, h.max_timestamp), (1_500, 15));
            crate::validate::validate_batch(&c.out, 0, &Default::default()).unwrap();
            // the records keep their timestamps, now relative to the horizon
            let ts: Vec<i64> = decode_batch_records(&c.out)
                .unwrap()
                .iter()
                .map(|r| r.timestamp)
                .collect();
            assert_eq!(ts, vec![13, 14, 15]);
            let cleaned = c.out.clone();
            // before the horizon a clean keeps that batch as it is
            let again = CleanOptions {
                now_ms: 1_499,
                ..opts.clone()
            };
            let c = clean_batches(&mut map, &cleaned, &again, 0).unwrap();
            assert_eq!(c.out, cleaned);
            // at the horizon the tombstone goes; the horizon stays on the batch
            let past = CleanOptions {
                now_ms: 1_500,
                ..opts.clone()
            };
            let c = clean_batches(&mut map, &cleaned, &past, 0).unwrap();
            assert_eq!(
                values(&c.out),
                vec![
                    (3, "c".into(), Some("1".into())),
                    (5, "a".into(), Some("3".into()))
                ]
            );
            let h = BatchHeader::parse(&c.out, 0).unwrap();
            assert_eq!((h.base_offset, h.last_offset(), h.records_count), (3, 5, 2));
            assert_eq!(
                (h.producer_id, h.base_sequence, h.max_timestamp),
                (7, 0, 15)
            );
            assert_eq!(h.base_timestamp, 1_500);
            crate::validate::validate_batch(&c.out, 0, &Default::default()).unwrap();
            let ts: Vec<i64> = decode_batch_records(&c.out)
                .unwrap()
                .iter()
                .map(|r| r.timestamp)
                .collect();
            assert_eq!(ts, vec![13, 15]);
            // a batch with no tombstone kept gets no horizon
            let mut only_values = OffsetMap::new(24 * 64, 0.9);
            build_offset_map(&mut only_values, &buf, 0, i64::MAX, 0, MAX).unwrap();
            only_values.put(b"b", 9);
            let c = clean_batches(&mut only_values, &buf, &opts, 0).unwrap();
            let h = BatchHeader::parse(&c.out, 0).unwrap();
            assert_eq!(h.attributes & batch::DELETE_HORIZON_FLAG_MASK, 0);
            assert_eq!(h.base_timestamp, 13);
        }
    }

    #[test]
    fn active_producers_last_batch_keeps_an_empty_header() {
        let buf = log(0);
        let mut map = OffsetMap::new(24 * 64, 0.9);
        build_offset_map(&mut map, &buf, 0, i64::MAX, 0, MAX).unwrap();
        // a later "a", "b" and "c" supersede everything
        for (k, o) in [("a", 10), ("b", 11), ("c", 12)] {
            map.put(k.as_bytes(), o);
        }
        let c = clean_batches(&mut map, &buf, &CleanOptions::default(), 0).unwrap();
        assert!(c.out.is_empty());
        let opts = CleanOptions {
            active_producers: HashMap::from([(7, 5)]),
            ..Default::default()
        };
        let c = clean_batches(&mut map, &buf, &opts, 0).unwrap();
        assert_eq!(c.out.len(), HEADER_SIZE);
        let h = crate::validate::validate_batch(&c.out, 0, &Default::default()).unwrap();
        assert_eq!(
            (
                h.base_offset,
                h.last_offset(),
                h.records_count,
                h.base_sequence
            ),
            (3, 5, 0, 0)
        );
    }

    #[test]
    fn full_map_stops_and_cut_batches_are_reported() {
        let buf = log(0);
        let mut map = OffsetMap::new(24 * 3, 1.0);
        let m = build_offset_map(&mut map, &buf, 0, i64::MAX, 0, MAX).unwrap();
        assert!(m.full);
        assert_eq!(map.latest_offset(), 2); // a, b, a fit; c does not
        let first = batch::framed_size(&buf).unwrap();
        let m = build_offset_map(&mut map, &buf[..first + 20], 0, i64::MAX, 0, MAX).unwrap();
        assert_eq!((m.consumed, m.needed), (first, buf.len() - first));
        let c = clean_batches(&mut map, &buf[..first + 5], &CleanOptions::default(), 0).unwrap();
        assert_eq!((c.consumed, c.needed), (first, 0));
        // end offset bounds the map
        map.clear();
        let m = build_offset_map(&mut OffsetMap::new(24 * 64, 0.9), &buf, 0, 3, 0, MAX).unwrap();
        assert!(m.done);
        assert_eq!(m.records, 3);
    }

    #[test]
    fn an_empty_header_is_written_uncompressed_and_old_ones_are_repaired() {
        for codec in [1u8, 2, 3, 4] {
            let buf = log(codec);
            let mut map = OffsetMap::new(24 * 64, 0.9);
            build_offset_map(&mut map, &buf, 0, i64::MAX, 0, MAX).unwrap();
            for (k, o) in [("a", 10), ("b", 11), ("c", 12)] {
                map.put(k.as_bytes(), o);
            }
            let opts = CleanOptions {
                active_producers: HashMap::from([(7, 5)]),
                ..Default::default()
            };
            let c = clean_batches(&mut map, &buf, &opts, 0).unwrap();
            assert_eq!(c.out.len(), HEADER_SIZE);
            let h = crate::validate::validate_batch(&c.out, 0, &Default::default()).unwrap();
            assert_eq!(
                (h.records_count, h.compression_codec()),
                (0, 0),
                "codec {codec}"
            );
            assert_eq!(h.attributes & !batch::COMPRESSION_CODEC_MASK, 0);
            assert_eq!(c.batches[0].compression, 0);

            // what older cleaners wrote: the same header with the codec bits
            let mut old = c.out.clone();
            old[batch::ATTRIBUTES_OFFSET + 1] |= codec;
            let crc = batch::compute_crc(&old);
            batch::write_u32(&mut old, batch::CRC_OFFSET, crc);
            // the map and the cleaner read it as empty, and rewrite it uncompressed
            let mut map2 = OffsetMap::new(24 * 64, 0.9);
            let m = build_offset_map(&mut map2, &old, 0, i64::MAX, 0, MAX).unwrap();
            assert_eq!((m.consumed, m.records), (old.len(), 0));
            let again = clean_batches(&mut map2, &old, &opts, 0).unwrap();
            assert_eq!(again.out, c.out);
            // not the producer's last batch any more: dropped
            let gone = clean_batches(&mut map2, &old, &CleanOptions::default(), 0).unwrap();
            assert!(gone.out.is_empty());
            // and an uncompressed empty header is copied as it is
            let kept = clean_batches(&mut map2, &c.out, &CleanOptions::default(), 0).unwrap();
            assert_eq!(kept.out, c.out);
        }
    }

    #[test]
    fn records_decompressing_past_the_limit_stop_the_clean() {
        let big = build_batch(
            &[rec(Some("a"), Some(&"z".repeat(1 << 20)), 1)],
            &BuildOptions {
                compression: 4,
                ..Default::default()
            },
        )
        .unwrap();
        let mut map = OffsetMap::new(24 * 64, 0.9);
        assert!(matches!(
            build_offset_map(&mut map, &big, 0, i64::MAX, 0, 1000),
            Err(Error::RecordsTooLarge { .. })
        ));
        let opts = CleanOptions {
            max_decompressed_size: 1000,
            ..Default::default()
        };
        assert!(matches!(
            clean_batches(&mut map, &big, &opts, 0),
            Err(Error::RecordsTooLarge { .. })
        ));
    }
}
