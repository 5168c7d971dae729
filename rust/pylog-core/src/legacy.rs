//! Legacy message sets: magic 0 and 1 messages (Kafka before 0.11).
//!
//! One message, big-endian: `offset i64 · size i32 · crc u32 · magic i8 ·
//! attributes i8 · [timestamp i64, magic 1 only] · keyLength i32 (-1 = null) ·
//! key · valueLength i32 (-1 = null) · value`. The CRC32 (IEEE) covers magic
//! to the end. Attributes bits 0-2 are the codec and, for magic 1, bit 3 the
//! timestamp type. A compressed message is a *wrapper*: its value is a
//! compressed message set of inner messages. Inner offsets of a magic 1
//! wrapper are relative (0..n-1); the wrapper carries the absolute offset of
//! the last one. Inner offsets of a magic 0 wrapper are absolute.

use crate::batch::{self, BatchMeta, ValidationOptions, LOG_OVERHEAD, MAGIC_V0, MAGIC_V1};
use crate::compression;
use crate::error::{Error, Result};
use crate::records::{build_batch, BuildOptions, BuildRecord, Record};

pub const CRC_OFFSET: usize = 12;
pub const MAGIC_OFFSET: usize = 16;
pub const ATTRIBUTES_OFFSET: usize = 17;
pub const TIMESTAMP_OFFSET: usize = 18;
/// Smallest `size` field: crc, magic, attributes, key and value lengths.
pub const MIN_SIZE_V0: usize = 4 + 1 + 1 + 4 + 4;
pub const MIN_SIZE_V1: usize = MIN_SIZE_V0 + 8;

/// One legacy message, framed and CRC-checked, borrowing its key and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    pub offset: i64,
    pub magic: i8,
    pub attributes: i8,
    pub crc: u32,
    /// -1 for magic 0.
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// The whole message, 12-byte framing included.
    pub size: usize,
}

impl Message<'_> {
    #[inline]
    pub fn codec(&self) -> u8 {
        (self.attributes as u8) & 0x07
    }
    /// 1 when a magic 1 message says LogAppendTime.
    #[inline]
    pub fn timestamp_type(&self) -> u8 {
        u8::from(self.magic == MAGIC_V1 && self.attributes & 0x08 != 0)
    }
}

fn len_prefixed<'a>(
    buf: &'a [u8],
    at: &mut usize,
    end: usize,
    position: u64,
    what: &str,
) -> Result<Option<&'a [u8]>> {
    if end - *at < 4 {
        return Err(Error::corrupt(
            position,
            format!("legacy message too short for its {what} length"),
        ));
    }
    let len = batch::read_i32(buf, *at);
    *at += 4;
    if len < 0 {
        if len != -1 {
            return Err(Error::corrupt(
                position,
                format!("legacy message {what} length {len}"),
            ));
        }
        return Ok(None);
    }
    let len = len as usize;
    if len > end - *at {
        return Err(Error::corrupt(
            position,
            format!("legacy message {what} of {len} bytes runs past the message end"),
        ));
    }
    let v = &buf[*at..*at + len];
    *at += len;
    Ok(Some(v))
}

/// Frame the legacy message at the start of `buf` and check its CRC32.
pub fn parse_message(buf: &[u8], position: u64) -> Result<Message<'_>> {
    if buf.len() < LOG_OVERHEAD + MIN_SIZE_V0 {
        return Err(Error::corrupt(
            position,
            format!("{} bytes left, too few for a legacy message", buf.len()),
        ));
    }
    let offset = batch::read_i64(buf, 0);
    let size = batch::read_i32(buf, batch::LENGTH_OFFSET);
    let magic = buf[MAGIC_OFFSET] as i8;
    let min = match magic {
        MAGIC_V0 => MIN_SIZE_V0,
        MAGIC_V1 => MIN_SIZE_V1,
        m => {
            return Err(Error::corrupt(
                position,
                format!("magic {m} is not a legacy message"),
            ))
        }
    };
    if size < 0 || (size as usize) < min {
        return Err(Error::corrupt(
            position,
            format!("legacy message size {size} is smaller than the minimum {min}"),
        ));
    }
    let total = LOG_OVERHEAD + size as usize;
    if total > buf.len() {
        return Err(Error::corrupt(
            position,
            format!(
                "legacy message of {total} bytes but only {} bytes left",
                buf.len()
            ),
        ));
    }
    let stored = batch::read_u32(buf, CRC_OFFSET);
    let computed = crc32fast::hash(&buf[MAGIC_OFFSET..total]);
    if stored != computed {
        return Err(Error::corrupt(
            position,
            format!(
                "legacy message CRC32 mismatch: stored {stored:#010x}, computed {computed:#010x}"
            ),
        ));
    }
    let attributes = buf[ATTRIBUTES_OFFSET] as i8;
    let (timestamp, mut at) = if magic == MAGIC_V1 {
        (batch::read_i64(buf, TIMESTAMP_OFFSET), TIMESTAMP_OFFSET + 8)
    } else {
        (batch::NO_TIMESTAMP, TIMESTAMP_OFFSET)
    };
    let key = len_prefixed(buf, &mut at, total, position, "key")?;
    let value = len_prefixed(buf, &mut at, total, position, "value")?;
    if at != total {
        return Err(Error::corrupt(
            position,
            format!(
                "legacy message size {size} but its fields end {} bytes earlier",
                total - at
            ),
        ));
    }
    Ok(Message {
        offset,
        magic,
        attributes,
        crc: stored,
        timestamp,
        key,
        value,
        size: total,
    })
}

/// The records of one message: itself, or a wrapper's inner messages with
/// absolute offsets and (under LogAppendTime) the wrapper's timestamp. A
/// wrapper's payload decompresses to at most `limit` bytes.
fn message_records(
    m: &Message<'_>,
    position: u64,
    out: &mut Vec<Record>,
    limit: usize,
) -> Result<()> {
    let codec = m.codec();
    if codec == compression::NONE {
        out.push(Record {
            offset: m.offset,
            timestamp: m.timestamp,
            key: m.key.map(<[u8]>::to_vec),
            value: m.value.map(<[u8]>::to_vec),
            headers: Vec::new(),
            sequence: -1,
        });
        return Ok(());
    }
    let Some(payload) = m.value else {
        return Err(Error::corrupt(
            position,
            "compressed legacy wrapper with a null value",
        ));
    };
    let data = compression::decompress_bounded(codec, payload, limit)
        .map_err(|e| compression::at_position(e, position))?;
    let first = out.len();
    let mut at = 0;
    while at < data.len() {
        let inner = parse_message(&data[at..], position)
            .map_err(|e| compression::at_position(e, position))
            .map_err(|e| match e {
                Error::CorruptRecord { position, reason } => Error::CorruptRecord {
                    position,
                    reason: format!(
                        "inner message at byte {at} of a {} wrapper: {reason}",
                        compression::codec_name(codec)
                    ),
                },
                other => other,
            })?;
        if inner.magic != m.magic {
            return Err(Error::corrupt(
                position,
                format!(
                    "inner message magic {} inside a magic {} wrapper",
                    inner.magic, m.magic
                ),
            ));
        }
        if inner.codec() != compression::NONE {
            return Err(Error::corrupt(
                position,
                "compressed inner message inside a compressed wrapper",
            ));
        }
        let timestamp = if m.timestamp_type() == 1 {
            m.timestamp
        } else {
            inner.timestamp
        };
        out.push(Record {
            offset: inner.offset,
            timestamp,
            key: inner.key.map(<[u8]>::to_vec),
            value: inner.value.map(<[u8]>::to_vec),
            headers: Vec::new(),
            sequence: -1,
        });
        at += inner.size;
    }
    if out.len() == first {
        return Err(Error::corrupt(
            position,
            "compressed legacy wrapper holds no messages",
        ));
    }
    if m.magic == MAGIC_V1 && m.offset != 0 {
        // relative inner offsets: the wrapper holds the absolute offset of the last
        let last_inner = out.last().map_or(0, |r| r.offset);
        let base = m.offset - last_inner;
        if base < 0 {
            return Err(Error::corrupt(
                position,
                format!(
                    "wrapper offset {} is smaller than its last inner offset {last_inner}",
                    m.offset
                ),
            ));
        }
        for r in &mut out[first..] {
            r.offset += base;
        }
    }
    Ok(())
}

/// Validate the legacy message (or wrapper, inner messages included) at the
/// start of `buf` and return its facts.
pub fn validate_legacy(buf: &[u8], position: u64, opts: &ValidationOptions) -> Result<BatchMeta> {
    if buf.len() >= LOG_OVERHEAD {
        if let Some(size) = batch::framed_size(buf) {
            if size > opts.max_batch_size {
                return Err(Error::MessageTooLarge {
                    size: size as u64,
                    max: opts.max_batch_size as u64,
                });
            }
        }
    }
    let m = parse_message(buf, position)?;
    let (base_offset, base_timestamp, count) = if m.codec() == compression::NONE {
        (m.offset, m.timestamp, 1)
    } else {
        let mut inner = Vec::new();
        message_records(&m, position, &mut inner, opts.max_decompressed_size)?;
        (inner[0].offset, inner[0].timestamp, inner.len() as i32)
    };
    Ok(BatchMeta {
        position,
        size: m.size,
        magic: m.magic,
        base_offset,
        last_offset: m.offset,
        partition_leader_epoch: batch::NO_PARTITION_LEADER_EPOCH,
        crc: m.crc,
        compression: m.codec(),
        timestamp_type: m.timestamp_type(),
        is_transactional: false,
        is_control: false,
        base_timestamp,
        max_timestamp: m.timestamp,
        producer_id: batch::NO_PRODUCER_ID,
        producer_epoch: batch::NO_PRODUCER_EPOCH,
        base_sequence: batch::NO_SEQUENCE,
        last_sequence: batch::NO_SEQUENCE,
        records_count: count,
        delete_horizon_ms: batch::NO_TIMESTAMP,
    })
}

/// The records of the first message of `buf` (`first_only`) or of every
/// message, wrappers decompressed.
pub fn decode_message_set(buf: &[u8], first_only: bool) -> Result<Vec<Record>> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < buf.len() {
        let m = parse_message(&buf[at..], at as u64)?;
        message_records(&m, at as u64, &mut out, compression::MAX_DECOMPRESSED_SIZE)?;
        at += m.size;
        if first_only {
            break;
        }
    }
    Ok(out)
}

fn to_build(records: Vec<Record>) -> Vec<BuildRecord> {
    records
        .into_iter()
        .map(|r| BuildRecord {
            key: r.key,
            value: r.value,
            headers: Vec::new(),
            timestamp: r.timestamp,
        })
        .collect()
}

/// Validate a legacy message set (CRC32 of every message, wrappers and inner
/// messages) and rewrite it as v2 batches: one per wrapper, with its codec,
/// and one per run of uncompressed messages. Keys, values and timestamps are
/// kept (magic 0 has none: -1); each batch has base offset 0 and offset
/// deltas 0..n-1, as a client writes them, ready for the leader's offset
/// assignment. Each wrapper decompresses to at most
/// [`compression::MAX_DECOMPRESSED_SIZE`] bytes.
pub fn convert_legacy_to_v2(buf: &[u8]) -> Result<Vec<u8>> {
    convert_legacy_to_v2_bounded(buf, compression::MAX_DECOMPRESSED_SIZE)
}

/// [`convert_legacy_to_v2`] with each wrapper decompressing to at most
/// `max_decompressed_size` bytes (RecordsTooLarge beyond).
pub fn convert_legacy_to_v2_bounded(buf: &[u8], max_decompressed_size: usize) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(buf.len() + buf.len() / 4 + 64);
    let mut run: Vec<Record> = Vec::new();
    let flush = |records: Vec<Record>, codec: u8, out: &mut Vec<u8>| -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let options = BuildOptions {
            compression: codec,
            ..Default::default()
        };
        out.extend_from_slice(&build_batch(&to_build(records), &options)?);
        Ok(())
    };
    let mut at = 0usize;
    while at < buf.len() {
        if buf.len() - at > MAGIC_OFFSET && buf[at + MAGIC_OFFSET] as i8 == batch::MAGIC_V2 {
            return Err(Error::corrupt(
                at as u64,
                "a magic 2 batch inside a legacy message set",
            ));
        }
        let m = parse_message(&buf[at..], at as u64)?;
        if m.codec() == compression::NONE {
            message_records(&m, at as u64, &mut run, max_decompressed_size)?;
        } else {
            flush(std::mem::take(&mut run), compression::NONE, &mut out)?;
            let mut inner = Vec::new();
            message_records(&m, at as u64, &mut inner, max_decompressed_size)?;
            flush(inner, m.codec(), &mut out)?;
        }
        at += m.size;
    }
    flush(run, compression::NONE, &mut out)?;
    Ok(out)
}

/// Build one legacy message (tests and tools): `codec` other than 0 only for
/// wrappers, whose `value` is the compressed inner set.
pub fn build_message(
    offset: i64,
    magic: i8,
    attributes: i8,
    timestamp: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&[0; 8]); // size, crc
    out.push(magic as u8);
    out.push(attributes as u8);
    if magic == MAGIC_V1 {
        out.extend_from_slice(&timestamp.to_be_bytes());
    }
    for field in [key, value] {
        match field {
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(b) => {
                out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                out.extend_from_slice(b);
            }
        }
    }
    let size = (out.len() - LOG_OVERHEAD) as i32;
    batch::write_i32(&mut out, batch::LENGTH_OFFSET, size);
    let crc = crc32fast::hash(&out[MAGIC_OFFSET..]);
    batch::write_u32(&mut out, CRC_OFFSET, crc);
    out
}

/// Build a compressed wrapper around `inner` (a message set) for tests/tools.
pub fn build_wrapper(
    offset: i64,
    magic: i8,
    codec: u8,
    timestamp: i64,
    inner: &[u8],
) -> Result<Vec<u8>> {
    let payload = compression::compress(codec, inner)?;
    Ok(build_message(
        offset,
        magic,
        codec as i8,
        timestamp,
        None,
        Some(&payload),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::decode_batch_records;
    use crate::validate::validate_any;

    fn v1_set(n: usize, relative: bool) -> Vec<u8> {
        let mut set = Vec::new();
        for i in 0..n {
            let off = if relative { i as i64 } else { 100 + i as i64 };
            set.extend(build_message(
                off,
                MAGIC_V1,
                0,
                1000 + i as i64,
                Some(format!("k{i}").as_bytes()),
                Some(b"value"),
            ));
        }
        set
    }

    #[test]
    fn plain_messages_validate_and_decode() {
        let m0 = build_message(5, MAGIC_V0, 0, -1, None, Some(b"v0"));
        let meta = validate_any(&m0, 40, &Default::default()).unwrap();
        assert_eq!(
            (
                meta.magic,
                meta.base_offset,
                meta.last_offset,
                meta.records_count
            ),
            (0, 5, 5, 1)
        );
        assert_eq!(
            (meta.base_timestamp, meta.max_timestamp, meta.position),
            (-1, -1, 40)
        );
        assert_eq!(meta.size, m0.len());
        let recs = decode_batch_records(&m0).unwrap();
        assert_eq!(recs[0].value.as_deref(), Some(&b"v0"[..]));
        assert_eq!(
            (recs[0].key.clone(), recs[0].timestamp, recs[0].offset),
            (None, -1, 5)
        );
    }

    #[test]
    fn flipped_byte_fails_crc32_and_truncation_is_corrupt() {
        let m = build_message(0, MAGIC_V1, 0, 77, Some(b"k"), Some(b"value"));
        for i in MAGIC_OFFSET + 1..m.len() {
            let mut bad = m.clone();
            bad[i] ^= 0x40;
            assert!(
                matches!(
                    validate_any(&bad, 0, &Default::default()),
                    Err(Error::CorruptRecord { .. })
                ),
                "byte {i}"
            );
        }
        assert!(validate_any(&m[..m.len() - 1], 0, &Default::default()).is_err());
        let mut small = m.clone();
        batch::write_i32(&mut small, 8, 3);
        assert!(validate_any(&small, 0, &Default::default()).is_err());
    }

    #[test]
    fn v1_wrapper_relative_offsets_become_absolute() {
        for codec in [1u8, 2, 3, 4] {
            let w = build_wrapper(52, MAGIC_V1, codec, 2000, &v1_set(3, true)).unwrap();
            let meta = validate_any(&w, 0, &Default::default()).unwrap();
            assert_eq!(
                (meta.base_offset, meta.last_offset, meta.records_count),
                (50, 52, 3)
            );
            assert_eq!(
                (meta.compression, meta.max_timestamp, meta.base_timestamp),
                (codec, 2000, 1000)
            );
            let recs = decode_batch_records(&w).unwrap();
            assert_eq!(
                recs.iter().map(|r| r.offset).collect::<Vec<_>>(),
                vec![50, 51, 52]
            );
            assert_eq!(recs[2].key.as_deref(), Some(&b"k2"[..]));
        }
    }

    #[test]
    fn log_append_time_wrapper_sets_inner_timestamps() {
        let w = build_message(
            2,
            MAGIC_V1,
            1 | 0x08,
            9999,
            None,
            Some(&compression::compress(1, &v1_set(3, true)).unwrap()),
        );
        let recs = decode_batch_records(&w).unwrap();
        assert!(recs.iter().all(|r| r.timestamp == 9999));
    }

    #[test]
    fn corrupt_inner_message_is_caught() {
        let mut inner = v1_set(2, true);
        let last = inner.len() - 1;
        inner[last] ^= 1;
        let w = build_wrapper(1, MAGIC_V1, 1, 0, &inner).unwrap();
        assert!(matches!(
            validate_any(&w, 9, &Default::default()),
            Err(Error::CorruptRecord { position: 9, .. })
        ));
        let w = build_wrapper(
            0,
            MAGIC_V1,
            1,
            0,
            &build_wrapper(0, MAGIC_V1, 1, 0, &v1_set(1, true)).unwrap(),
        )
        .unwrap();
        assert!(
            validate_any(&w, 0, &Default::default()).is_err(),
            "nested compression"
        );
        let w = build_wrapper(
            0,
            MAGIC_V1,
            1,
            0,
            &build_message(0, MAGIC_V0, 0, -1, None, None),
        )
        .unwrap();
        assert!(
            validate_any(&w, 0, &Default::default()).is_err(),
            "magic mismatch"
        );
    }

    #[test]
    fn conversion_keeps_records_and_codecs() {
        let mut set = v1_set(2, false);
        set.extend(build_wrapper(1, MAGIC_V1, 3, 0, &v1_set(2, true)).unwrap());
        set.extend(build_message(9, MAGIC_V1, 0, 5, None, None));
        let v2 = convert_legacy_to_v2(&set).unwrap();
        let mut at = 0;
        let mut batches = Vec::new();
        while at < v2.len() {
            let meta = validate_any(&v2[at..], at as u64, &Default::default()).unwrap();
            batches.push(meta);
            at += meta.size;
        }
        assert_eq!(batches.len(), 3);
        assert_eq!(
            batches.iter().map(|b| b.compression).collect::<Vec<_>>(),
            vec![0, 3, 0]
        );
        assert_eq!(
            batches.iter().map(|b| b.base_offset).collect::<Vec<_>>(),
            vec![0, 0, 0]
        );
        assert!(batches.iter().all(|b| b.magic == 2));
        let recs = decode_batch_records(&v2[batches[1].position as usize..]).unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1].timestamp, 1001);
        assert_eq!(recs[1].key.as_deref(), Some(&b"k1"[..]));

        let v0 = build_message(0, MAGIC_V0, 0, -1, Some(b"a"), Some(b"b"));
        let v2 = convert_legacy_to_v2(&v0).unwrap();
        let recs = decode_batch_records(&v2).unwrap();
        assert_eq!(
            (recs[0].timestamp, recs[0].key.as_deref()),
            (-1, Some(&b"a"[..]))
        );

        let mut bad = v1_set(1, false);
        bad[20] ^= 0xff;
        assert!(matches!(
            convert_legacy_to_v2(&bad),
            Err(Error::CorruptRecord { .. })
        ));
    }
}
