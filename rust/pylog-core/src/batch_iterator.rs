//! The batches of a buffer, one after another (Kafka's `ByteBufferLogInputStream`
//! behind `MemoryRecords.batches()`): the one walk over record-batch framing
//! that every reader of a buffer shares, so no caller parses offsets and
//! lengths itself.
//!
//! A buffer is whatever holds batches back to back: a fetch response's
//! records, a read of a segment, a produce request's records. It may end
//! with part of a batch (a fetch cuts the last one short): the walk stops
//! there quietly and [`BatchIterator::position`] says where, so the caller
//! can ask for the rest. A whole batch that cannot be one (a length shorter
//! than its header, an unknown magic) is an error, as in Kafka
//! (CorruptRecordException).

use crate::batch::{
    framed_size, BatchHeader, BatchMeta, HEADER_SIZE, LOG_OVERHEAD, MAGIC_OFFSET, MAGIC_V0,
    MAGIC_V1, MAGIC_V2,
};
use crate::records::Record;
use crate::validate::decode_batch_records;
use crate::{Error, Result};

/// One whole batch of the buffer: its header facts and its bytes (framing
/// included). For a legacy (v0/v1) compressed wrapper the offsets and count
/// are the wrapper's own (its inner messages are only known once decoded).
#[derive(Debug, Clone, Copy)]
pub struct BatchView<'a> {
    pub meta: BatchMeta,
    pub bytes: &'a [u8],
}

/// Walks the whole batches of `buf` from its start. Positions are relative
/// to `buf` plus the `base_position` the iterator was given.
#[derive(Debug, Clone)]
pub struct BatchIterator<'a> {
    buf: &'a [u8],
    pos: usize,
    base_position: u64,
    failed: bool,
}

impl<'a> BatchIterator<'a> {
    pub fn new(buf: &'a [u8]) -> BatchIterator<'a> {
        BatchIterator::at(buf, 0)
    }

    /// A walk whose positions are reported from `base_position` (where `buf`
    /// starts in a file or a larger buffer).
    pub fn at(buf: &'a [u8], base_position: u64) -> BatchIterator<'a> {
        BatchIterator {
            buf,
            pos: 0,
            base_position,
            failed: false,
        }
    }

    /// Bytes of `buf` covered by the whole batches walked so far: after the
    /// walk, where a partial last batch (if any) starts.
    pub fn position(&self) -> usize {
        self.pos
    }

    fn next_batch(&mut self) -> Result<Option<BatchView<'a>>> {
        let rest = &self.buf[self.pos..];
        let at = self.base_position + self.pos as u64;
        let Some(size) = framed_size(rest) else {
            if rest.len() >= LOG_OVERHEAD {
                return Err(Error::corrupt(at, "negative batch length"));
            }
            return Ok(None); // not even a length: a partial batch
        };
        if rest.len() < size {
            return Ok(None); // the batch continues past the buffer
        }
        let bytes = &rest[..size];
        let meta = match bytes.get(MAGIC_OFFSET).map(|&m| m as i8) {
            Some(MAGIC_V2) => {
                if size < HEADER_SIZE {
                    return Err(Error::corrupt(
                        at,
                        format!(
                            "a batch of {size} bytes is shorter than its {HEADER_SIZE}-byte header"
                        ),
                    ));
                }
                BatchMeta::from_header(&BatchHeader::parse(bytes, at)?, at)
            }
            Some(MAGIC_V0 | MAGIC_V1) => crate::segment::legacy_header_meta(bytes, at, size)
                .ok_or_else(|| {
                    Error::corrupt(at, format!("a legacy message of {size} bytes is too short"))
                })?,
            Some(magic) => return Err(Error::corrupt(at, format!("unknown magic {magic}"))),
            None => return Err(Error::corrupt(at, format!("a batch of {size} bytes"))),
        };
        self.pos += size;
        Ok(Some(BatchView { meta, bytes }))
    }
}

impl<'a> Iterator for BatchIterator<'a> {
    type Item = Result<BatchView<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let got = self.next_batch();
        if got.is_err() {
            self.failed = true; // nothing after a corrupt batch can be framed
        }
        got.transpose()
    }
}

/// Bytes of the whole batches at the start of `buf`, by their length fields
/// alone (nothing else is read): where a fetched buffer's partial last batch
/// starts. A negative length ends the prefix too; the validator that reads
/// the prefix next names what is wrong with what follows.
pub fn complete_prefix(buf: &[u8]) -> usize {
    let mut pos = 0;
    while let Some(size) = framed_size(&buf[pos..]) {
        if buf.len() - pos < size {
            break;
        }
        pos += size;
    }
    pos
}

/// One whole batch with its records, as [`decode_batches`] returns them.
pub type DecodedBatch = (BatchMeta, Vec<Record>);

/// Every whole batch of `buf` with its records decoded (decompressed,
/// bounded by `MAX_DECOMPRESSED_SIZE`; each batch's CRC checked), and the
/// bytes they cover. For readers of a whole buffer of a compacted log
/// (`__consumer_offsets` loading) and tools.
pub fn decode_batches(buf: &[u8]) -> Result<(Vec<DecodedBatch>, usize)> {
    let mut it = BatchIterator::new(buf);
    let mut out = Vec::new();
    for batch in it.by_ref() {
        let batch = batch?;
        let records =
            decode_batch_records(batch.bytes).map_err(|e| e.shifted(batch.meta.position))?;
        out.push((batch.meta, records));
    }
    Ok((out, it.position()))
}

/// The header facts of at most `max_batches` whole batches of `buf`, and the
/// bytes they cover.
pub fn batch_metas(buf: &[u8], max_batches: usize) -> Result<(Vec<BatchMeta>, usize)> {
    let mut it = BatchIterator::new(buf);
    let mut out = Vec::new();
    while out.len() < max_batches {
        match it.next() {
            Some(batch) => out.push(batch?.meta),
            None => break,
        }
    }
    Ok((out, it.position()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{CONTROL_FLAG_MASK, TRANSACTIONAL_FLAG_MASK};
    use crate::records::{build_batch, BuildOptions, BuildRecord};

    fn rec(key: &[u8], value: Option<&[u8]>, ts: i64) -> BuildRecord {
        BuildRecord {
            key: Some(key.to_vec()),
            value: value.map(<[u8]>::to_vec),
            headers: vec![("h".to_string(), Some(b"v".to_vec()))],
            timestamp: ts,
        }
    }

    fn batch(base_offset: i64, n: usize, compression: u8) -> Vec<u8> {
        let records: Vec<_> = (0..n)
            .map(|i| rec(format!("k{i}").as_bytes(), Some(b"value"), 1000 + i as i64))
            .collect();
        build_batch(
            &records,
            &BuildOptions {
                base_offset,
                compression,
                partition_leader_epoch: 7,
                producer_id: 42,
                producer_epoch: 3,
                base_sequence: 10,
                is_transactional: true,
                ..Default::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn walks_every_header_field_and_stops_at_a_partial_batch() {
        let mut buf = batch(0, 3, 0);
        let first = buf.len();
        buf.extend(batch(3, 2, 4));
        let whole = buf.len();
        buf.extend(&batch(5, 1, 0)[..30]); // a fetch cut the last one short
        let mut it = BatchIterator::at(&buf, 100);
        let a = it.next().unwrap().unwrap().meta;
        assert_eq!((a.position, a.size, a.magic), (100, first, 2));
        assert_eq!((a.base_offset, a.last_offset, a.records_count), (0, 2, 3));
        assert_eq!(
            (a.partition_leader_epoch, a.producer_id, a.producer_epoch),
            (7, 42, 3)
        );
        assert_eq!((a.base_sequence, a.last_sequence), (10, 12));
        assert!(a.is_transactional && !a.is_control);
        assert_eq!((a.base_timestamp, a.max_timestamp), (1000, 1002));
        assert_eq!(a.crc, crate::batch::compute_crc(&buf[..first]));
        let b = it.next().unwrap().unwrap().meta;
        assert_eq!(
            (b.position, b.base_offset, b.last_offset, b.compression),
            (100 + first as u64, 3, 4, 4)
        );
        assert!(it.next().is_none());
        assert_eq!(it.position(), whole);
        assert_eq!(complete_prefix(&buf), whole);
        assert_eq!(complete_prefix(&buf[..whole - 1]), first);
        assert_eq!(complete_prefix(&buf[..5]), 0);
    }

    #[test]
    fn control_flag_and_records_of_compressed_batches() {
        let mut control = batch(9, 1, 0);
        // Mark it a control batch and fix its CRC, as a transaction marker is.
        let attrs = crate::batch::read_i16(&control, crate::batch::ATTRIBUTES_OFFSET)
            | CONTROL_FLAG_MASK
            | TRANSACTIONAL_FLAG_MASK;
        control[crate::batch::ATTRIBUTES_OFFSET..crate::batch::ATTRIBUTES_OFFSET + 2]
            .copy_from_slice(&attrs.to_be_bytes());
        let crc = crate::batch::compute_crc(&control);
        crate::batch::write_u32(&mut control, crate::batch::CRC_OFFSET, crc);
        let mut buf = batch(0, 4, 2); // snappy
        buf.extend(&control);
        let (batches, covered) = decode_batches(&buf).unwrap();
        assert_eq!(covered, buf.len());
        assert_eq!(batches.len(), 2);
        let (meta, records) = &batches[0];
        assert_eq!((meta.compression, meta.is_control), (2, false));
        let keys: Vec<_> = records.iter().map(|r| r.key.clone().unwrap()).collect();
        assert_eq!(
            keys,
            [
                b"k0".to_vec(),
                b"k1".to_vec(),
                b"k2".to_vec(),
                b"k3".to_vec()
            ]
        );
        assert_eq!(records[3].offset, 3);
        assert_eq!(
            records[0].headers,
            vec![("h".to_string(), Some(b"v".to_vec()))]
        );
        assert!(batches[1].0.is_control && batches[1].0.is_transactional);
        assert_eq!(batches[1].1[0].offset, 9);
        let (metas, covered) = batch_metas(&buf, 1).unwrap();
        assert_eq!((metas.len(), covered), (1, buf.len() - control.len()));
    }

    #[test]
    fn a_whole_batch_that_cannot_be_one_is_corrupt() {
        let good = batch(0, 1, 0);
        // Length 20: whole in the buffer, but shorter than a v2 header.
        let mut short = good[..32].to_vec();
        short[8..12].copy_from_slice(&20i32.to_be_bytes());
        let mut buf = good.clone();
        buf.extend(&short);
        let mut it = BatchIterator::new(&buf);
        assert!(it.next().unwrap().is_ok());
        match it.next() {
            Some(Err(Error::CorruptRecord { position, .. })) => {
                assert_eq!(position, good.len() as u64)
            }
            other => panic!("expected a corrupt batch, got {other:?}"),
        }
        assert!(it.next().is_none());
        assert_eq!(it.position(), good.len());

        let mut magic = good.clone();
        magic[MAGIC_OFFSET] = 9;
        assert!(matches!(
            batch_metas(&magic, 10),
            Err(Error::CorruptRecord { position: 0, .. })
        ));
        let mut negative = good.clone();
        negative[8..12].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(BatchIterator::new(&negative).next().unwrap().is_err());
        assert_eq!(complete_prefix(&negative), 0);
        // A flipped byte in the records: the CRC names the batch.
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0xff;
        let mut two = good.clone();
        two.extend(&flipped);
        assert!(matches!(
            decode_batches(&two),
            Err(Error::CorruptRecord { position, .. }) if position >= good.len() as u64
        ));
    }

    #[test]
    fn legacy_messages_are_walked_too() {
        let v2 = batch(0, 2, 0);
        let legacy = crate::legacy::build_message(5, MAGIC_V1, 0, 77, Some(b"k"), Some(b"v"));
        let mut buf = legacy.clone();
        buf.extend(&v2);
        let (metas, covered) = batch_metas(&buf, 10).unwrap();
        assert_eq!(covered, buf.len());
        assert_eq!(
            (metas[0].magic, metas[0].base_offset, metas[0].max_timestamp),
            (1, 5, 77)
        );
        assert_eq!(metas[1].magic, 2);
        let (batches, _) = decode_batches(&buf).unwrap();
        assert_eq!(batches[0].1[0].value.as_deref(), Some(&b"v"[..]));
    }
}
