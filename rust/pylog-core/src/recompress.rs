//! Broker-side recompression: a topic whose `compression.type` names a codec
//! stores its batches with that codec whatever the producer used (Kafka's
//! LogValidator rebuilds the batch when the source and target codecs differ).
//!
//! One call per request buffer, no per-record allocation: each record's
//! fields are re-framed from the decompressed section into the new one.
//!
//! What a rebuilt batch keeps and what it changes (as Kafka's rebuild does):
//! one batch out per batch in; the producer id, epoch, base sequence,
//! transactional flag and timestamp type kept; every record's absolute
//! timestamp kept — the base timestamp becomes the first record's and the max
//! timestamp the greatest; offset deltas renumbered 0..n-1 (Kafka rewrites
//! inner offsets older clients got wrong rather than refusing them); the base
//! offset 0 and the partition leader epoch unset, for the validator that runs
//! next to assign; record attributes 0; header keys as UTF-8 (an invalid key is
//! decoded lossily, as the JVM's String does).
//!
//! A batch the validator refuses at its header whatever its codec — a control
//! batch, a base offset other than 0, an inconsistent count, a producer id
//! without a sequence, a LogAppendTime bit — and a legacy (magic 0/1) batch
//! are left byte for byte, so the validator refuses them exactly as it does on
//! a topic without a codec of its own (rebuilding would strip the control flag
//! or hide the bad offsets). Kafka never compresses an uncompressed control
//! batch either. Bytes after the last whole batch are kept too.

use crate::batch::{self, BatchHeader, MAGIC_V2, RECORDS_OFFSET};
use crate::compression;
use crate::error::{Error, Result};
use crate::records::{frame_batch, frame_error, walk_record_spans, BuildOptions, FrameError};
use crate::validate::{analyze_records, check_client_header, ValidationOptions};
use crate::varint::{read_varint, read_varlong, write_varint, write_varlong};

/// The batches of `buf` rebuilt with `codec`, or `None` when every batch uses
/// it already (nothing to do: the caller keeps its buffer).
///
/// Everything is checked first as the validator's deep analysis does —
/// header, CRC, batch size at most `opts.max_batch_size` (MessageTooLarge),
/// every record framed, records decompressing to at most
/// `opts.max_decompressed_size` (RecordsTooLarge) — so junk or a bomb fails
/// before anything is built. `opts.deep` is implied.
pub fn recompress_batches(
    buf: &[u8],
    codec: u8,
    opts: &ValidationOptions,
) -> Result<Option<Vec<u8>>> {
    if codec > compression::ZSTD {
        return Err(Error::UnsupportedCompression(format!(
            "unknown compression codec {codec}"
        )));
    }
    let opts = ValidationOptions {
        deep: true,
        ..*opts
    };
    let info = analyze_records(buf, &opts)?;
    if info.batches.iter().all(|b| b.compression == codec) {
        return Ok(None);
    }
    let limit = opts
        .max_decompressed_size
        .min(compression::MAX_DECOMPRESSED_SIZE);
    let mut out = Vec::with_capacity(buf.len() + buf.len() / 8 + 64);
    let mut scratch = Vec::new();
    for meta in &info.batches {
        let start = meta.position as usize;
        let bytes = &buf[start..start + meta.size];
        match rebuildable(bytes, meta.position) {
            Some(h) => rebuild(
                bytes,
                &h,
                meta.position,
                codec,
                limit,
                &mut scratch,
                &mut out,
            )?,
            None => out.extend_from_slice(bytes),
        }
    }
    out.extend_from_slice(&buf[info.valid_bytes..]);
    Ok(Some(out))
}

/// The header of a v2 batch the validator would accept at its header, or None.
fn rebuildable(bytes: &[u8], position: u64) -> Option<BatchHeader> {
    if bytes[batch::MAGIC_OFFSET] as i8 != MAGIC_V2 {
        return None;
    }
    let h = BatchHeader::parse(bytes, position).ok()?;
    check_client_header(&h, position).ok()?;
    Some(h)
}

/// Append to `out` the v2 batch `bytes` (header `h`, checked; at `position`
/// of the request, for errors) rebuilt with `codec`. `scratch` holds one record's fields at a time.
fn rebuild(
    bytes: &[u8],
    h: &BatchHeader,
    position: u64,
    codec: u8,
    limit: usize,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<()> {
    let raw = &bytes[RECORDS_OFFSET..h.size_in_bytes()];
    let owned;
    let data: &[u8] = if h.compression_codec() == compression::NONE {
        raw
    } else {
        owned = compression::decompress_bounded(h.compression_codec(), raw, limit)
            .map_err(|e| compression::at_position(e, position))?;
        &owned
    };
    let count = h.records_count.max(0) as usize;
    let log_append_time = h.timestamp_type() == 1;
    let mut section = Vec::with_capacity(data.len() + count * 4);
    let mut base_timestamp = batch::NO_TIMESTAMP;
    let mut max_timestamp = batch::NO_TIMESTAMP;
    walk_record_spans(data, count, position, |index, shape, at, end| {
        // a record reads its timestamp from the batch under LogAppendTime
        let timestamp = if log_append_time {
            h.max_timestamp
        } else {
            h.base_timestamp.wrapping_add(shape.timestamp_delta)
        };
        if index == 0 {
            base_timestamp = timestamp;
        }
        max_timestamp = max_timestamp.max(timestamp);
        scratch.clear();
        scratch.push(0); // attributes: unused by v2 records
        write_varlong(scratch, timestamp.wrapping_sub(base_timestamp));
        write_varint(scratch, index as i32);
        copy_fields(&data[..end], skip_prefix(data, at), scratch)
            .map_err(|e| frame_error(position, index, at, e))?;
        write_varint(&mut section, scratch.len() as i32);
        section.extend_from_slice(scratch);
        Ok(())
    })?;
    let opts = BuildOptions {
        compression: codec,
        producer_id: h.producer_id,
        producer_epoch: h.producer_epoch,
        base_sequence: h.base_sequence,
        is_transactional: h.is_transactional(),
        timestamp_type: h.timestamp_type(),
        ..Default::default()
    };
    out.extend_from_slice(&frame_batch(
        section,
        count as i32,
        base_timestamp,
        max_timestamp,
        &opts,
    )?);
    Ok(())
}

/// The index of a record's key-length varint: past its length, attributes,
/// timestamp delta and offset delta (framing checked already).
fn skip_prefix(data: &[u8], at: usize) -> usize {
    let mut p = at;
    let _ = read_varint(data, &mut p);
    p += 1;
    let _ = read_varlong(data, &mut p);
    let _ = read_varint(data, &mut p);
    p
}

/// Re-encode key, value and headers from `data[p..]` (one framed record) into
/// `out` with canonical varints, header keys as UTF-8.
fn copy_fields(
    data: &[u8],
    mut p: usize,
    out: &mut Vec<u8>,
) -> std::result::Result<(), FrameError> {
    let field = |p: &mut usize, out: &mut Vec<u8>, what: &'static str| {
        let len = read_varint(data, p).ok_or(FrameError::BadVarint(what))?;
        write_varint(out, len);
        if len > 0 {
            let end = *p + len as usize;
            let bytes = data.get(*p..end).ok_or(FrameError::FieldOverrun(what))?;
            out.extend_from_slice(bytes);
            *p = end;
        }
        Ok::<(), FrameError>(())
    };
    field(&mut p, out, "key length")?;
    field(&mut p, out, "value length")?;
    let headers = read_varint(data, &mut p).ok_or(FrameError::BadVarint("header count"))?;
    write_varint(out, headers);
    for _ in 0..headers {
        let kl = read_varint(data, &mut p).ok_or(FrameError::BadVarint("header key length"))?;
        let end = p + kl.max(0) as usize;
        let key = data
            .get(p..end)
            .ok_or(FrameError::FieldOverrun("header key"))?;
        p = end;
        let key = String::from_utf8_lossy(key);
        write_varint(out, key.len() as i32);
        out.extend_from_slice(key.as_bytes());
        field(&mut p, out, "header value length")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{ATTRIBUTES_OFFSET, BASE_OFFSET_OFFSET, CONTROL_FLAG_MASK, CRC_OFFSET};
    use crate::records::tests::sample_records;
    use crate::records::{build_batch, encode_record, BuildRecord};
    use crate::validate::{decode_batch_records, validate_and_assign_offsets, AssignOptions};

    const CODECS: [u8; 5] = [
        compression::NONE,
        compression::GZIP,
        compression::SNAPPY,
        compression::LZ4,
        compression::ZSTD,
    ];

    fn opts() -> ValidationOptions {
        ValidationOptions {
            max_batch_size: 1 << 20,
            deep: true,
            max_decompressed_size: 1 << 20,
        }
    }

    /// What the broker's former Python path built: every record decoded to
    /// owned fields, each batch built again with its header fields.
    fn reference(buf: &[u8], codec: u8, o: &ValidationOptions) -> Result<Option<Vec<u8>>> {
        let info = analyze_records(buf, o)?;
        if info.batches.iter().all(|b| b.compression == codec) {
            return Ok(None);
        }
        let mut out = Vec::new();
        for b in &info.batches {
            let at = b.position as usize;
            let records: Vec<BuildRecord> = decode_batch_records(&buf[at..at + b.size])?
                .into_iter()
                .map(|r| BuildRecord {
                    key: r.key,
                    value: r.value,
                    headers: r.headers,
                    timestamp: r.timestamp,
                })
                .collect();
            out.extend(build_batch(
                &records,
                &BuildOptions {
                    compression: codec,
                    producer_id: b.producer_id,
                    producer_epoch: b.producer_epoch,
                    base_sequence: b.base_sequence,
                    is_transactional: b.is_transactional,
                    timestamp_type: b.timestamp_type,
                    ..Default::default()
                },
            )?);
        }
        Ok(Some(out))
    }

    fn batch(n: usize, codec: u8, extra: BuildOptions) -> Vec<u8> {
        build_batch(
            &sample_records(n, 40),
            &BuildOptions {
                compression: codec,
                ..extra
            },
        )
        .unwrap()
    }

    fn idempotent() -> BuildOptions {
        BuildOptions {
            producer_id: 4242,
            producer_epoch: 3,
            base_sequence: 17,
            ..Default::default()
        }
    }

    fn transactional() -> BuildOptions {
        BuildOptions {
            is_transactional: true,
            ..idempotent()
        }
    }

    fn fix_crc(b: &mut [u8]) {
        let crc = batch::compute_crc(b);
        batch::write_u32(b, CRC_OFFSET, crc);
    }

    /// The batch as the leader's validator assigns it (what a topic stores).
    fn assigned(mut b: Vec<u8>) -> Vec<u8> {
        let o = AssignOptions {
            base_offset: 100,
            partition_leader_epoch: 5,
            now_ms: 1_700_000_000_000,
            max_batch_size: 1 << 20,
            ..Default::default()
        };
        validate_and_assign_offsets(&mut b, &o).unwrap();
        b
    }

    #[test]
    fn every_codec_pair_matches_the_former_path() {
        for from in CODECS {
            for to in CODECS {
                for extra in [BuildOptions::default(), idempotent(), transactional()] {
                    let src = batch(23, from, extra);
                    let got = recompress_batches(&src, to, &opts()).unwrap();
                    assert_eq!(got, reference(&src, to, &opts()).unwrap(), "{from}->{to}");
                    if from == to {
                        assert!(got.is_none());
                        continue;
                    }
                    let got = got.unwrap();
                    let h = BatchHeader::parse(&got, 0).unwrap();
                    assert_eq!(h.compression_codec(), to);
                    assert_eq!(
                        (h.producer_id, h.producer_epoch, h.base_sequence),
                        (extra.producer_id, extra.producer_epoch, extra.base_sequence)
                    );
                    assert_eq!(h.is_transactional(), extra.is_transactional);
                    assert_eq!(h.records_count, 23);
                    // every field of every record (null keys/values, headers,
                    // timestamps out of order) as sent, offsets 0..n-1
                    let before = decode_batch_records(&src).unwrap();
                    let after = decode_batch_records(&got).unwrap();
                    assert_eq!(before, after);
                    // and the validator takes it, as the topic will store it
                    let stored = assigned(got);
                    assert_eq!(BatchHeader::parse(&stored, 0).unwrap().base_offset, 100);
                }
            }
        }
    }

    #[test]
    fn one_batch_out_per_batch_in() {
        let mut src = batch(3, compression::LZ4, idempotent());
        src.extend(batch(5, compression::ZSTD, BuildOptions::default()));
        src.extend(batch(2, compression::NONE, transactional()));
        for to in CODECS {
            let got = recompress_batches(&src, to, &opts()).unwrap().unwrap();
            assert_eq!(Some(got.clone()), reference(&src, to, &opts()).unwrap());
            let info = analyze_records(&got, &opts()).unwrap();
            let shape: Vec<_> = info
                .batches
                .iter()
                .map(|b| (b.records_count, b.compression, b.producer_id))
                .collect();
            assert_eq!(shape, [(3, to, 4242), (5, to, -1), (2, to, 4242)]);
        }
    }

    #[test]
    fn timestamps_base_and_max_from_the_records() {
        // a base timestamp below the first record's (deltas start at 100)
        let records = sample_records(6, 10);
        let base = 1_700_000_000_000 - 500;
        let mut section = Vec::new();
        for (i, r) in records.iter().enumerate() {
            encode_record(&mut section, i as i32, r.timestamp - base, r).unwrap();
        }
        let max = records.iter().map(|r| r.timestamp).max().unwrap();
        let src = frame_batch(
            section,
            6,
            base,
            max,
            &BuildOptions {
                compression: compression::GZIP,
                ..Default::default()
            },
        )
        .unwrap();
        let got = recompress_batches(&src, compression::ZSTD, &opts())
            .unwrap()
            .unwrap();
        assert_eq!(
            Some(got.clone()),
            reference(&src, compression::ZSTD, &opts()).unwrap()
        );
        let h = BatchHeader::parse(&got, 0).unwrap();
        assert_eq!(h.base_timestamp, records[0].timestamp);
        assert_eq!(h.max_timestamp, max);
        let ts: Vec<_> = decode_batch_records(&got)
            .unwrap()
            .iter()
            .map(|r| r.timestamp)
            .collect();
        assert_eq!(ts, records.iter().map(|r| r.timestamp).collect::<Vec<_>>());
    }

    #[test]
    fn headers_null_fields_and_lossy_header_keys() {
        let records = vec![
            BuildRecord {
                key: None,
                value: None,
                headers: vec![],
                timestamp: 5,
            },
            BuildRecord {
                key: Some(vec![]),
                value: Some(vec![]),
                headers: vec![("".into(), None), ("k".into(), Some(vec![]))],
                timestamp: 4,
            },
            BuildRecord {
                key: Some(vec![0xff; 300]),
                value: Some(vec![7; 70_000]),
                headers: (0..200)
                    .map(|i| (format!("h{i}"), Some(vec![i as u8; i])))
                    .collect(),
                timestamp: 9,
            },
        ];
        let mut src = build_batch(&records, &BuildOptions::default()).unwrap();
        // a header key that is not UTF-8: "h0" -> "\xff0"
        let at = src.windows(3).position(|w| w == [4, b'h', b'0']).unwrap();
        src[at + 1] = 0xff;
        fix_crc(&mut src);
        let got = recompress_batches(&src, compression::SNAPPY, &opts())
            .unwrap()
            .unwrap();
        assert_eq!(
            Some(got.clone()),
            reference(&src, compression::SNAPPY, &opts()).unwrap()
        );
        let after = decode_batch_records(&got).unwrap();
        assert_eq!(after[0].key, None);
        assert_eq!(after[0].value, None);
        assert_eq!(after[1].key, Some(vec![]));
        assert_eq!(after[1].headers, records[1].headers);
        assert_eq!(after[2].headers[0].0, "\u{fffd}0");
        assert_eq!(after[2].headers[1..], records[2].headers[1..]);
        assert_eq!(after[2].value, records[2].value);
    }

    #[test]
    fn batches_the_validator_refuses_are_left_alone() {
        let good = batch(3, compression::GZIP, BuildOptions::default());
        let with_attrs = |mask: i16| {
            let mut b = good.clone();
            let a = batch::read_i16(&b, ATTRIBUTES_OFFSET) | mask;
            b[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&a.to_be_bytes());
            fix_crc(&mut b);
            b
        };
        let control = with_attrs(CONTROL_FLAG_MASK);
        let append_time = with_attrs(batch::TIMESTAMP_TYPE_MASK);
        let mut offset = good.clone();
        offset[BASE_OFFSET_OFFSET..8].copy_from_slice(&7i64.to_be_bytes());
        let no_sequence = batch(
            2,
            compression::GZIP,
            BuildOptions {
                producer_id: 9,
                producer_epoch: 0,
                ..Default::default()
            },
        );
        // an uncompressed control batch stays uncompressed, as in Kafka
        let control_none = {
            let mut b = batch(1, compression::NONE, BuildOptions::default());
            let a = batch::read_i16(&b, ATTRIBUTES_OFFSET) | CONTROL_FLAG_MASK;
            b[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&a.to_be_bytes());
            fix_crc(&mut b);
            b
        };
        let o = AssignOptions {
            max_batch_size: 1 << 20,
            now_ms: 1_700_000_000_000,
            ..Default::default()
        };
        for (name, odd) in [
            ("control", control),
            ("LogAppendTime", append_time),
            ("base offset", offset),
            ("sequence", no_sequence),
            ("control", control_none),
        ] {
            // alone: kept as sent, so the validator refuses it for what it is
            let got = recompress_batches(&odd, compression::LZ4, &opts())
                .unwrap()
                .unwrap();
            assert_eq!(got, odd);
            let e = validate_and_assign_offsets(&mut got.clone(), &o).unwrap_err();
            assert!(e.to_string().contains(name), "{name}: {e}");
            // behind a good batch: that one rebuilt, this one kept
            let mut src = good.clone();
            src.extend(&odd);
            let got = recompress_batches(&src, compression::LZ4, &opts())
                .unwrap()
                .unwrap();
            let first = &reference(&good, compression::LZ4, &opts())
                .unwrap()
                .unwrap();
            assert_eq!(&got[..first.len()], &first[..]);
            assert_eq!(&got[first.len()..], &odd[..]);
        }
    }

    #[test]
    fn nothing_to_do() {
        assert!(recompress_batches(&[], compression::GZIP, &opts())
            .unwrap()
            .is_none());
        let mut src = batch(4, compression::ZSTD, idempotent());
        src.extend(batch(4, compression::ZSTD, BuildOptions::default()));
        assert!(recompress_batches(&src, compression::ZSTD, &opts())
            .unwrap()
            .is_none());
        assert!(matches!(
            recompress_batches(&src, 9, &opts()),
            Err(Error::UnsupportedCompression(_))
        ));
    }

    #[test]
    fn a_torn_tail_is_kept() {
        let src = batch(4, compression::NONE, BuildOptions::default());
        let mut torn = src.clone();
        torn.extend_from_slice(&src[..30]);
        let got = recompress_batches(&torn, compression::GZIP, &opts())
            .unwrap()
            .unwrap();
        assert!(got.ends_with(&src[..30]));
    }

    #[test]
    fn a_bomb_is_refused_before_anything_is_built() {
        let records = vec![BuildRecord {
            key: None,
            value: Some(vec![0; 8 << 20]),
            headers: vec![],
            timestamp: 1,
        }];
        for codec in [
            compression::GZIP,
            compression::SNAPPY,
            compression::LZ4,
            compression::ZSTD,
        ] {
            let src = build_batch(
                &records,
                &BuildOptions {
                    compression: codec,
                    ..Default::default()
                },
            )
            .unwrap();
            assert!(src.len() < 1 << 20, "{codec}: {}", src.len());
            let e = recompress_batches(&src, compression::NONE, &opts()).unwrap_err();
            assert!(
                matches!(e, Error::RecordsTooLarge { max } if max == 1 << 20),
                "{e}"
            );
            // within a limit that holds it, it is rebuilt
            let roomy = ValidationOptions {
                max_decompressed_size: 9 << 20,
                ..opts()
            };
            let got = recompress_batches(&src, compression::NONE, &roomy)
                .unwrap()
                .unwrap();
            assert_eq!(
                decode_batch_records(&got).unwrap()[0].value,
                records[0].value
            );
        }
    }

    #[test]
    fn malformed_input_fails_as_the_validator_does() {
        let good = batch(5, compression::GZIP, idempotent());
        let mut bad_crc = good.clone();
        *bad_crc.last_mut().unwrap() ^= 1;
        // a right CRC over a payload that does not decompress
        let mut junk = good.clone();
        for b in &mut junk[RECORDS_OFFSET + 12..] {
            *b = 0x5a;
        }
        fix_crc(&mut junk);
        // records that do not frame: the count says one more than there is
        let mut short = batch(5, compression::NONE, BuildOptions::default());
        let n = batch::read_i32(&short, batch::RECORDS_COUNT_OFFSET) + 1;
        short[batch::RECORDS_COUNT_OFFSET..RECORDS_OFFSET].copy_from_slice(&n.to_be_bytes());
        short[batch::LAST_OFFSET_DELTA_OFFSET..batch::LAST_OFFSET_DELTA_OFFSET + 4]
            .copy_from_slice(&(n - 1).to_be_bytes());
        fix_crc(&mut short);
        let mut negative = good.clone();
        negative[batch::LENGTH_OFFSET..batch::LENGTH_OFFSET + 4]
            .copy_from_slice(&(-3i32).to_be_bytes());
        for (name, src) in [
            ("crc", bad_crc),
            ("junk", junk),
            ("short", short),
            ("negative", negative),
        ] {
            let e = recompress_batches(&src, compression::LZ4, &opts()).unwrap_err();
            let want = reference(&src, compression::LZ4, &opts()).unwrap_err();
            assert!(matches!(e, Error::CorruptRecord { .. }), "{name}: {e}");
            assert_eq!(e.to_string(), want.to_string(), "{name}");
        }
        let big = batch(200, compression::NONE, BuildOptions::default());
        let small = ValidationOptions {
            max_batch_size: 1000,
            ..opts()
        };
        assert!(matches!(
            recompress_batches(&big, compression::GZIP, &small),
            Err(Error::MessageTooLarge { .. })
        ));
    }
}
