//! Columnar decode of record batches into Arrow-layout buffers, for analytics
//! readers (the PySpark data source) that want whole columns, not records.
//!
//! Walks v2 batches (and legacy magic 0/1 messages) from a segment file or a
//! fetch response, checks each batch's framing and CRC, skips control
//! batches, decompresses with [`crate::compression`], keeps the records whose
//! offsets fall in `[start_offset, end_offset)` and appends them to columns
//! laid out as Arrow arrays: binary columns as validity bitmap + i32 offsets +
//! data, timestamps as i64 microseconds, headers as a list of
//! struct<key: utf8, value: binary>. The caller wraps the buffers without
//! copying them again (pyarrow `Array.from_buffers`).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::batch::{
    self, BatchHeader, HEADER_SIZE, LOG_OVERHEAD, MAGIC_OFFSET, MAGIC_V2, RECORDS_OFFSET,
};
use crate::compression;
use crate::error::{Error, Result};
use crate::index::{self, EntryLayout, OffsetLayout};
use crate::records::{frame_error, FrameError};
use crate::validate::{validate_batch, ValidationOptions};
use crate::varint::{read_varint, read_varlong};

/// A variable-width binary (or utf8) column in Arrow's layout.
#[derive(Debug, Clone)]
pub struct BinaryColumn {
    /// One bit per row, least significant bit first; 1 = present.
    pub validity: Vec<u8>,
    /// `len + 1` offsets into `data`.
    pub offsets: Vec<i32>,
    pub data: Vec<u8>,
    pub null_count: usize,
    len: usize,
}

impl Default for BinaryColumn {
    fn default() -> Self {
        BinaryColumn {
            validity: Vec::new(),
            offsets: vec![0],
            data: Vec::new(),
            null_count: 0,
            len: 0,
        }
    }
}

impl BinaryColumn {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn push(&mut self, v: Option<&[u8]>) -> Result<()> {
        let bit = self.len % 8;
        if bit == 0 {
            self.validity.push(0);
        }
        match v {
            Some(b) => {
                *self.validity.last_mut().expect("pushed above") |= 1 << bit;
                self.data.extend_from_slice(b);
            }
            None => self.null_count += 1,
        }
        // Arrow's binary type has 32-bit offsets: a caller splits reads well
        // below 2 GiB per batch, so this only guards against misuse.
        let end = i32::try_from(self.data.len()).map_err(|_| {
            Error::InvalidRecord("more than 2 GiB of data in one column batch".into())
        })?;
        self.offsets.push(end);
        self.len += 1;
        Ok(())
    }
}

/// The columns of Spark's Kafka schema that vary per record (topic and
/// partition are constants the caller adds).
#[derive(Debug, Clone, Default)]
pub struct Columns {
    pub offsets: Vec<i64>,
    /// Microseconds since the epoch (Spark's TimestampType).
    pub timestamps: Vec<i64>,
    /// 0 = CreateTime, 1 = LogAppendTime.
    pub timestamp_types: Vec<i32>,
    pub keys: BinaryColumn,
    pub values: BinaryColumn,
    pub include_headers: bool,
    /// `rows + 1` offsets into the header entries (when `include_headers`).
    pub header_offsets: Vec<i32>,
    pub header_keys: BinaryColumn,
    pub header_values: BinaryColumn,
}

impl Columns {
    pub fn new(include_headers: bool) -> Columns {
        Columns {
            include_headers,
            header_offsets: if include_headers { vec![0] } else { Vec::new() },
            ..Default::default()
        }
    }

    pub fn rows(&self) -> usize {
        self.offsets.len()
    }

    /// Bytes held, to bound a read's memory.
    pub fn data_bytes(&self) -> usize {
        self.keys.data.len()
            + self.values.data.len()
            + self.header_keys.data.len()
            + self.header_values.data.len()
            + self.rows() * 24
    }

    #[inline]
    fn push_row(&mut self, offset: i64, timestamp_ms: i64, ts_type: i32) {
        self.offsets.push(offset);
        self.timestamps.push(timestamp_ms.saturating_mul(1000));
        self.timestamp_types.push(ts_type);
    }

    fn end_headers(&mut self) -> Result<()> {
        if self.include_headers {
            let n = i32::try_from(self.header_keys.len())
                .map_err(|_| Error::InvalidRecord("too many headers in one batch".into()))?;
            self.header_offsets.push(n);
        }
        Ok(())
    }
}

/// Which records to keep and when to stop.
#[derive(Debug, Clone, Copy)]
pub struct ReadRange {
    pub start_offset: i64,
    /// Exclusive.
    pub end_offset: i64,
    /// Stop after the batch that brings the row count to this (a soft cap:
    /// batches are never split across calls).
    pub max_records: usize,
}

/// Why a decode stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// A batch at or past `end_offset`: the range is complete.
    EndOffset,
    /// `max_records` reached; call again from `consumed`.
    MaxRecords,
    /// Every whole batch of the buffer was read.
    EndOfBuffer,
    /// The buffer ends inside a batch (a fetch response's partial last batch,
    /// a read window's edge, or a segment being appended to).
    Partial,
}

#[derive(Debug, Clone)]
pub struct Decoded {
    pub columns: Columns,
    /// Bytes of whole batches consumed from the start of the buffer.
    pub consumed: usize,
    /// The offset after the last batch consumed (`start_offset` if none).
    pub next_offset: i64,
    pub stop: Stop,
    /// Size of the batch the buffer ends inside, when `stop == Partial` and
    /// its length field could be read.
    pub partial_size: Option<usize>,
}

/// Decode the batches of `buf` (`base_position` labels errors). With
/// `lenient_tail`, a last batch that does not checksum is treated as still
/// being written (`Stop::Partial`) rather than corrupt.
pub fn decode_batches(
    buf: &[u8],
    base_position: u64,
    range: &ReadRange,
    include_headers: bool,
    lenient_tail: bool,
) -> Result<Decoded> {
    let mut out = Decoded {
        columns: Columns::new(include_headers),
        consumed: 0,
        next_offset: range.start_offset,
        stop: Stop::EndOfBuffer,
        partial_size: None,
    };
    let mut pos = 0usize;
    while pos < buf.len() {
        let rest = &buf[pos..];
        let position = base_position + pos as u64;
        if rest.len() < LOG_OVERHEAD {
            out.stop = Stop::Partial;
            break;
        }
        let size = batch::framed_size(rest).ok_or_else(|| {
            Error::corrupt(
                position,
                format!("negative batch length {}", batch::read_i32(rest, 8)),
            )
        })?;
        if size > rest.len() {
            out.stop = Stop::Partial;
            out.partial_size = Some(size);
            break;
        }
        let one = &rest[..size];
        if size <= MAGIC_OFFSET {
            return Err(Error::corrupt(
                position,
                format!("batch of {size} bytes is too short"),
            ));
        }
        let magic = one[MAGIC_OFFSET] as i8;
        if magic == MAGIC_V2 {
            let header = BatchHeader::parse(one, position)?;
            if header.last_offset() < range.start_offset {
                // wholly before the range: skipped unread (not even its CRC)
                pos += size;
                out.consumed = pos;
                continue;
            }
            if header.base_offset >= range.end_offset {
                out.stop = Stop::EndOffset;
                break;
            }
            let last = pos + size == buf.len();
            let header = match validate_batch(one, position, &ValidationOptions::default()) {
                Ok(h) => h,
                // only an open-ended read may find a batch still being written;
                // a bounded range was planned from complete batches, so every
                // batch below its end must be sound
                Err(Error::CorruptRecord { .. })
                    if lenient_tail && last && range.end_offset == i64::MAX =>
                {
                    out.stop = Stop::Partial;
                    break;
                }
                Err(e) => return Err(e),
            };
            if !header.is_control() {
                push_v2(one, &header, position, range, &mut out.columns)?;
            }
            out.next_offset = header.last_offset() + 1;
        } else {
            let records =
                crate::legacy::decode_message_set(one, true).map_err(|e| e.shifted(position))?;
            let mut last_offset = range.start_offset - 1;
            for r in &records {
                last_offset = last_offset.max(r.offset);
                if r.offset >= range.end_offset {
                    break;
                }
                if r.offset < range.start_offset {
                    continue;
                }
                let c = &mut out.columns;
                c.push_row(r.offset, r.timestamp, 0);
                c.keys.push(r.key.as_deref())?;
                c.values.push(r.value.as_deref())?;
                c.end_headers()?;
            }
            out.next_offset = out.next_offset.max(last_offset + 1);
        }
        pos += size;
        out.consumed = pos;
        if out.next_offset >= range.end_offset {
            out.stop = Stop::EndOffset;
            break;
        }
        if out.columns.rows() >= range.max_records {
            out.stop = Stop::MaxRecords;
            break;
        }
    }
    Ok(out)
}

/// Append the in-range records of a checked, non-control v2 batch.
fn push_v2(
    one: &[u8],
    h: &BatchHeader,
    position: u64,
    range: &ReadRange,
    cols: &mut Columns,
) -> Result<()> {
    let section = &one[RECORDS_OFFSET..h.size_in_bytes()];
    let codec = h.compression_codec();
    let decompressed;
    let data = if codec == compression::NONE {
        section
    } else if h.records_count == 0 {
        // an empty batch (a producer's header kept by the cleaner): no
        // records whatever its codec bits say
        &[]
    } else {
        decompressed = compression::decompress(codec, section)
            .map_err(|e| compression::at_position(e, position))?;
        &decompressed[..]
    };
    let ts_type = h.timestamp_type() as i32;
    let log_append = ts_type == 1;
    let count = h.records_count as usize;
    let mut at = 0usize;
    for index in 0..count {
        if at >= data.len() {
            return Err(Error::corrupt(
                position,
                format!("records count is {count} but the records end after {index}"),
            ));
        }
        let fail = |p: usize, e: FrameError| frame_error(position, index, p, e);
        let mut p = at;
        let length = read_varint(data, &mut p)
            .ok_or_else(|| fail(at, FrameError::BadVarint("record length")))?;
        if length < 0 {
            return Err(fail(at, FrameError::NegativeLength(length)));
        }
        let end = p + length as usize;
        if end > data.len() {
            return Err(fail(
                at,
                FrameError::Overrun {
                    length: length as usize,
                    left: data.len() - p,
                },
            ));
        }
        let body = &data[..end];
        p += 1; // attributes
        let ts_delta = read_varlong(body, &mut p)
            .ok_or_else(|| fail(at, FrameError::BadVarint("timestamp delta")))?;
        let off_delta = read_varint(body, &mut p)
            .ok_or_else(|| fail(at, FrameError::BadVarint("offset delta")))?;
        let offset = h.base_offset.wrapping_add(off_delta as i64);
        if offset < range.start_offset || offset >= range.end_offset {
            at = end;
            continue;
        }
        let key = field(body, &mut p, "key").map_err(|e| fail(at, e))?;
        let value = field(body, &mut p, "value").map_err(|e| fail(at, e))?;
        let n = read_varint(body, &mut p)
            .ok_or_else(|| fail(at, FrameError::BadVarint("header count")))?;
        if n < 0 {
            return Err(fail(at, FrameError::NegativeSize("header count", n)));
        }
        let timestamp = if log_append {
            h.max_timestamp
        } else {
            h.base_timestamp.wrapping_add(ts_delta)
        };
        cols.push_row(offset, timestamp, ts_type);
        cols.keys.push(key)?;
        cols.values.push(value)?;
        for _ in 0..n {
            let hk = field(body, &mut p, "header key").map_err(|e| fail(at, e))?;
            let hv = field(body, &mut p, "header value").map_err(|e| fail(at, e))?;
            if cols.include_headers {
                // Spark's Kafka source decodes header keys as UTF-8, replacing bad bytes
                let hk = hk.unwrap_or_default();
                match std::str::from_utf8(hk) {
                    Ok(_) => cols.header_keys.push(Some(hk))?,
                    Err(_) => {
                        let s = String::from_utf8_lossy(hk);
                        cols.header_keys.push(Some(s.as_bytes()))?
                    }
                }
                cols.header_values.push(hv)?;
            }
        }
        cols.end_headers()?;
        if p != end {
            return Err(fail(
                at,
                FrameError::LengthMismatch {
                    length: length as usize,
                    used: p - (end - length as usize),
                },
            ));
        }
        at = end;
    }
    if at != data.len() {
        return Err(Error::corrupt(
            position,
            format!(
                "{} bytes after the last of {count} records",
                data.len() - at
            ),
        ));
    }
    Ok(())
}

/// A length-prefixed (varint, -1 = null) field at `*p` within `body`.
#[inline(always)]
fn field<'a>(
    body: &'a [u8],
    p: &mut usize,
    what: &'static str,
) -> std::result::Result<Option<&'a [u8]>, FrameError> {
    let len = read_varint(body, p).ok_or(FrameError::BadVarint(what))?;
    if len < -1 {
        return Err(FrameError::NegativeSize(what, len));
    }
    if len < 0 {
        return Ok(None);
    }
    let end = *p + len as usize;
    if end > body.len() {
        return Err(FrameError::FieldOverrun(what));
    }
    let v = &body[*p..end];
    *p = end;
    Ok(Some(v))
}

/// The result of one call of [`read_segment`].
#[derive(Debug, Clone)]
pub struct SegmentRead {
    pub columns: Columns,
    /// Where the next call starts.
    pub next_position: u64,
    pub next_offset: i64,
    /// Nothing more to read in this segment for the range: the end offset was
    /// reached, every whole batch up to `end_position` was read, or the file
    /// ends inside a batch still being written.
    pub done: bool,
}

/// Read the records of `log_path` in `range` starting at `start_position` (a
/// batch boundary, e.g. from the offset index) and stopping at `end_position`
/// (default: the file's current size), at most about `window` bytes of the
/// file per call. A segment being appended to is read up to its last
/// complete batch; a torn or not yet checksummed last batch is left for later.
pub fn read_segment(
    log_path: &Path,
    start_position: u64,
    end_position: Option<u64>,
    range: &ReadRange,
    include_headers: bool,
    window: usize,
) -> Result<SegmentRead> {
    let file = File::open(log_path)?;
    let file_len = file.metadata()?.len();
    let end = end_position.map_or(file_len, |e| e.min(file_len));
    let mut want = window.max(HEADER_SIZE);
    loop {
        let avail = end.saturating_sub(start_position);
        let n = (want as u64).min(avail) as usize;
        let mut buf = vec![0u8; n];
        file.read_exact_at(&mut buf, start_position)?;
        let d = decode_batches(&buf, start_position, range, include_headers, true)?;
        let reached_end = n as u64 == avail;
        let next_position = start_position + d.consumed as u64;
        let done = match d.stop {
            Stop::EndOffset => true,
            Stop::MaxRecords => false,
            Stop::EndOfBuffer => reached_end,
            Stop::Partial => {
                if d.consumed > 0 {
                    false
                } else if reached_end {
                    true // a batch still being written: its bytes are not all there
                } else {
                    // one batch larger than the window: read it whole
                    want = d.partial_size.unwrap_or(want * 2).max(want + 1);
                    continue;
                }
            }
        };
        return Ok(SegmentRead {
            columns: d.columns,
            next_position,
            next_offset: d.next_offset,
            done,
        });
    }
}

/// The file position of the greatest offset index entry at or below
/// `target_offset` (0 if none), given the raw `.index` bytes of a segment
/// with `base_offset`. A live index is preallocated with zero entries past
/// its last real one; those end the search ([`index::used_entries`]).
pub fn index_floor_position(index: &[u8], base_offset: i64, target_offset: i64) -> u64 {
    let used = index::used_entries(index, OffsetLayout::ENTRY_SIZE);
    let entry = |n: usize| OffsetLayout::decode(&index[n * 8..n * 8 + 8], base_offset);
    // entries are sorted by offset: count those at or below the target
    let (mut lo, mut hi) = (0usize, used);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if entry(mid).0 <= target_offset {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if lo == 0 {
        0
    } else {
        entry(lo - 1).1 as u64
    }
}

/// Offsets of the index entries (`base_offset + relative`), for planning
/// splits that start where the index points. Entry 0 of a non-empty file is
/// always reported: a lone `(base, 0)` entry and an unused file both mean
/// "the segment starts at its base".
pub fn index_offsets(index: &[u8], base_offset: i64) -> Vec<i64> {
    let used =
        index::used_entries(index, OffsetLayout::ENTRY_SIZE).max(usize::from(index.len() >= 8));
    (0..used)
        .map(|n| OffsetLayout::decode(&index[n * 8..n * 8 + 8], base_offset).0)
        .collect()
}

/// One check of raw bytes holding whole batches: `None` when every batch
/// frames, checksums and decodes (compressed records included), else the
/// error. Meant for segment bytes found outside a broker.
pub fn check_batches(buf: &[u8]) -> Option<Error> {
    let range = ReadRange {
        start_offset: i64::MIN,
        end_offset: i64::MAX,
        max_records: usize::MAX,
    };
    match decode_batches(buf, 0, &range, true, false) {
        Err(e) => Some(e),
        Ok(d) if d.stop == Stop::Partial => Some(Error::corrupt(
            d.consumed as u64,
            format!(
                "truncated batch: {} bytes left, fewer than its size",
                buf.len() - d.consumed
            ),
        )),
        Ok(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{build_batch, BuildOptions, BuildRecord};

    fn rec(i: usize) -> BuildRecord {
        BuildRecord {
            key: if i.is_multiple_of(3) {
                None
            } else {
                Some(format!("k{i}").into_bytes())
            },
            value: Some(format!("value-{i}").into_bytes()),
            headers: vec![("h".into(), Some(vec![i as u8])), ("n".into(), None)],
            timestamp: 1_700_000_000_000 + i as i64,
        }
    }

    fn log(codec: u8, batches: usize, per: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for b in 0..batches {
            let recs: Vec<_> = (0..per).map(|i| rec(b * per + i)).collect();
            let opts = BuildOptions {
                base_offset: (b * per) as i64,
                compression: codec,
                ..Default::default()
            };
            out.extend(build_batch(&recs, &opts).unwrap());
        }
        out
    }

    fn all() -> ReadRange {
        ReadRange {
            start_offset: i64::MIN,
            end_offset: i64::MAX,
            max_records: usize::MAX,
        }
    }

    fn value(c: &BinaryColumn, i: usize) -> Option<&[u8]> {
        if c.validity[i / 8] & (1 << (i % 8)) == 0 {
            None
        } else {
            Some(&c.data[c.offsets[i] as usize..c.offsets[i + 1] as usize])
        }
    }

    #[test]
    fn every_codec_decodes_to_the_same_columns() {
        for codec in 0..=4u8 {
            let buf = log(codec, 3, 5);
            let d = decode_batches(&buf, 0, &all(), true, false).unwrap();
            let c = &d.columns;
            assert_eq!(c.rows(), 15, "codec {codec}");
            assert_eq!(c.offsets, (0..15).collect::<Vec<i64>>());
            assert_eq!(c.timestamps[4], (1_700_000_000_000 + 4) * 1000);
            assert_eq!(value(&c.keys, 0), None);
            assert_eq!(value(&c.keys, 1), Some(&b"k1"[..]));
            assert_eq!(c.keys.null_count, 5);
            assert_eq!(value(&c.values, 14), Some(&b"value-14"[..]));
            assert_eq!(c.header_offsets[15], 30);
            assert_eq!(value(&c.header_keys, 2), Some(&b"h"[..]));
            assert_eq!(value(&c.header_values, 2), Some(&[1u8][..]));
            assert_eq!(value(&c.header_values, 3), None);
            assert_eq!(d.next_offset, 15);
            assert_eq!(d.consumed, buf.len());
        }
    }

    #[test]
    fn an_empty_batch_with_codec_bits_reads_as_no_rows() {
        for codec in 1..=4u8 {
            let mut buf = log(codec, 1, 5);
            let mut empty = build_batch(
                &[],
                &BuildOptions {
                    base_offset: 5,
                    ..Default::default()
                },
            )
            .unwrap();
            batch::write_i32(&mut empty, batch::LAST_OFFSET_DELTA_OFFSET, 2);
            empty[batch::ATTRIBUTES_OFFSET + 1] |= codec;
            let crc = batch::compute_crc(&empty);
            batch::write_u32(&mut empty, batch::CRC_OFFSET, crc);
            buf.extend_from_slice(&empty);
            let d = decode_batches(&buf, 0, &all(), false, false).unwrap();
            assert_eq!((d.columns.rows(), d.consumed), (5, buf.len()));
        }
    }

    #[test]
    fn offset_range_is_exact_and_stops_at_the_end() {
        let buf = log(1, 4, 5);
        let r = ReadRange {
            start_offset: 7,
            end_offset: 13,
            max_records: usize::MAX,
        };
        let d = decode_batches(&buf, 0, &r, false, false).unwrap();
        assert_eq!(d.columns.offsets, (7..13).collect::<Vec<i64>>());
        assert_eq!(d.stop, Stop::EndOffset);
        assert!(d.columns.header_offsets.is_empty());
    }

    #[test]
    fn control_batches_are_skipped() {
        let mut buf = log(0, 1, 3);
        let opts = BuildOptions {
            base_offset: 3,
            is_control: true,
            is_transactional: true,
            producer_id: 1,
            producer_epoch: 0,
            ..Default::default()
        };
        let marker = BuildRecord {
            key: Some(vec![0, 0, 0, 0]),
            value: Some(vec![0, 0, 0, 0, 0, 0]),
            ..Default::default()
        };
        buf.extend(build_batch(&[marker], &opts).unwrap());
        let d = decode_batches(&buf, 0, &all(), false, false).unwrap();
        assert_eq!(d.columns.rows(), 3);
        assert_eq!(d.next_offset, 4);
    }

    #[test]
    fn a_torn_tail_is_partial_and_a_bad_middle_batch_is_corrupt() {
        let buf = log(0, 3, 4);
        let cut = &buf[..buf.len() - 5];
        let d = decode_batches(cut, 0, &all(), false, true).unwrap();
        assert_eq!(d.stop, Stop::Partial);
        // a complete last batch that fails its CRC: being written (open-ended
        // read) or corrupt (a bounded one)
        let mut torn = buf.clone();
        let n = torn.len();
        torn[n - 3] ^= 0xff;
        let d = decode_batches(&torn, 0, &all(), false, true).unwrap();
        assert_eq!(d.stop, Stop::Partial);
        assert_eq!(d.columns.rows(), 8);
        let bounded = ReadRange {
            end_offset: 12,
            ..all()
        };
        assert!(decode_batches(&torn, 0, &bounded, false, true).is_err());
        let d = decode_batches(cut, 0, &all(), false, true).unwrap();
        assert_eq!(d.stop, Stop::Partial);
        assert_eq!(d.columns.rows(), 8);
        let mut bad = buf.clone();
        let second = batch::framed_size(&bad).unwrap();
        bad[second + 70] ^= 0xff;
        let err = decode_batches(&bad, 100, &all(), false, true).unwrap_err();
        match err {
            Error::CorruptRecord { position, reason } => {
                assert_eq!(position, 100 + second as u64);
                assert!(reason.contains("CRC32C"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert!(check_batches(&bad).is_some());
        assert!(check_batches(cut).is_some());
        assert!(check_batches(&buf).is_none());
    }

    #[test]
    fn segment_reads_resume_across_windows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.log");
        let buf = log(3, 10, 7);
        std::fs::write(&path, &buf).unwrap();
        let r = ReadRange {
            start_offset: 5,
            end_offset: 66,
            max_records: 20,
        };
        let (mut pos, mut got, mut calls) = (0u64, Vec::new(), 0);
        loop {
            let s = read_segment(&path, pos, None, &r, false, 100).unwrap();
            got.extend(s.columns.offsets);
            pos = s.next_position;
            calls += 1;
            if s.done {
                break;
            }
        }
        assert_eq!(got, (5..66).collect::<Vec<i64>>());
        assert!(calls > 3);
    }

    #[test]
    fn index_floor_skips_the_preallocated_tail() {
        let mut idx = Vec::new();
        for (rel, pos) in [(0u32, 0u32), (10, 400), (25, 900)] {
            idx.extend(rel.to_be_bytes());
            idx.extend(pos.to_be_bytes());
        }
        idx.extend([0u8; 80]);
        assert_eq!(index_floor_position(&idx, 100, 99), 0);
        assert_eq!(index_floor_position(&idx, 100, 112), 400);
        assert_eq!(index_floor_position(&idx, 100, 500), 900);
        assert_eq!(index_offsets(&idx, 100), vec![100, 110, 125]);
        assert_eq!(index_floor_position(&[0u8; 64], 0, 5), 0);
    }
}
