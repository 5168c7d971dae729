//! The records inside a magic v2 batch (Kafka's DefaultRecord): framing walk,
//! decoding, and a batch builder for tests and tools.
//!
//! Each record is `length: varint` followed by exactly `length` bytes:
//! `attributes: i8 · timestampDelta: varlong · offsetDelta: varint ·
//! keyLength: varint (-1 = null) · key · valueLength: varint (-1 = null) · value ·
//! headerCount: varint · [headerKeyLength: varint · key (UTF-8) ·
//! headerValueLength: varint (-1 = null) · value]*`.

use std::fmt;

use crate::batch::{self, BatchHeader, HEADER_SIZE, MAGIC_V2, RECORDS_OFFSET};
use crate::compression;
use crate::error::{Error, Result};
use crate::varint::{
    read_varint, read_varlong, varint_size, varlong_size, write_varint, write_varlong,
};

/// One record, decoded, with absolute offset and timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// -1 when the batch has no producer id / sequence.
    pub sequence: i32,
}

/// What the framing walk learns of one record without copying anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordShape {
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    /// -1 for a null key.
    pub key_len: i32,
}

/// Why a record does not frame. Turned into a `CorruptRecord` by [`frame_error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    BadVarint(&'static str),
    NegativeLength(i32),
    Overrun { length: usize, left: usize },
    NegativeSize(&'static str, i32),
    FieldOverrun(&'static str),
    LengthMismatch { length: usize, used: usize },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            FrameError::BadVarint(field) => {
                write!(f, "{field} is not a valid varint within the record")
            }
            FrameError::NegativeLength(n) => write!(f, "negative record length {n}"),
            FrameError::Overrun { length, left } => {
                write!(
                    f,
                    "record length {length} runs past the batch end ({left} bytes left)"
                )
            }
            FrameError::NegativeSize(field, n) => write!(f, "invalid {field} {n}"),
            FrameError::FieldOverrun(field) => write!(f, "{field} runs past the record's length"),
            FrameError::LengthMismatch { length, used } => {
                write!(f, "record length {length} but its fields take {used} bytes")
            }
        }
    }
}

/// A `CorruptRecord` at `position` (the batch's) naming the record at fault.
#[cold]
pub fn frame_error(position: u64, index: usize, at: usize, e: FrameError) -> Error {
    Error::corrupt(
        position,
        format!("record {index} (byte {at} of the records): {e}"),
    )
}

#[inline(always)]
fn skip_bytes(
    end: usize,
    p: &mut usize,
    len: i32,
    field: &'static str,
) -> std::result::Result<(), FrameError> {
    if len > 0 {
        let next = *p + len as usize;
        if next > end {
            return Err(FrameError::FieldOverrun(field));
        }
        *p = next;
    }
    Ok(())
}

/// Check the framing of the record starting at `data[at]` (its length varint
/// must cover its fields exactly) and return its shape and end. `data` is the
/// records section: nothing is read past its end.
#[inline(always)]
pub fn frame_record(
    data: &[u8],
    at: usize,
) -> std::result::Result<(RecordShape, usize), FrameError> {
    let mut p = at;
    let length = read_varint(data, &mut p).ok_or(FrameError::BadVarint("record length"))?;
    if length < 0 {
        return Err(FrameError::NegativeLength(length));
    }
    let length = length as usize;
    let end = p + length;
    if end > data.len() {
        return Err(FrameError::Overrun {
            length,
            left: data.len() - p,
        });
    }
    let body_start = p;
    let body = &data[..end];
    if p >= end {
        return Err(FrameError::FieldOverrun("attributes"));
    }
    p += 1; // attributes: unused by v2 records
    let timestamp_delta =
        read_varlong(body, &mut p).ok_or(FrameError::BadVarint("timestamp delta"))?;
    let offset_delta = read_varint(body, &mut p).ok_or(FrameError::BadVarint("offset delta"))?;
    let key_len = read_varint(body, &mut p).ok_or(FrameError::BadVarint("key length"))?;
    if key_len < -1 {
        return Err(FrameError::NegativeSize("key length", key_len));
    }
    skip_bytes(end, &mut p, key_len, "key")?;
    let value_len = read_varint(body, &mut p).ok_or(FrameError::BadVarint("value length"))?;
    if value_len < -1 {
        return Err(FrameError::NegativeSize("value length", value_len));
    }
    skip_bytes(end, &mut p, value_len, "value")?;
    let headers = read_varint(body, &mut p).ok_or(FrameError::BadVarint("header count"))?;
    if headers < 0 {
        return Err(FrameError::NegativeSize("header count", headers));
    }
    for _ in 0..headers {
        let hk = read_varint(body, &mut p).ok_or(FrameError::BadVarint("header key length"))?;
        if hk < 0 {
            return Err(FrameError::NegativeSize("header key length", hk));
        }
        skip_bytes(end, &mut p, hk, "header key")?;
        let hv = read_varint(body, &mut p).ok_or(FrameError::BadVarint("header value length"))?;
        if hv < -1 {
            return Err(FrameError::NegativeSize("header value length", hv));
        }
        skip_bytes(end, &mut p, hv, "header value")?;
    }
    if p != end {
        return Err(FrameError::LengthMismatch {
            length,
            used: p - body_start,
        });
    }
    Ok((
        RecordShape {
            timestamp_delta,
            offset_delta,
            key_len,
        },
        end,
    ))
}

/// Walk exactly `count` records filling `data` to its end, calling `f(index,
/// shape)` for each. Errors are `CorruptRecord` at `position`.
#[inline]
pub fn walk_records<F>(data: &[u8], count: usize, position: u64, mut f: F) -> Result<()>
where
    F: FnMut(usize, RecordShape) -> Result<()>,
{
    walk_record_spans(data, count, position, |index, shape, _, _| f(index, shape))
}

/// [`walk_records`], also giving each record's span in `data` (`start..end`,
/// its length prefix included) to whoever copies its bytes.
#[inline]
pub fn walk_record_spans<F>(data: &[u8], count: usize, position: u64, mut f: F) -> Result<()>
where
    F: FnMut(usize, RecordShape, usize, usize) -> Result<()>,
{
    let mut at = 0usize;
    for index in 0..count {
        if at >= data.len() {
            return Err(Error::corrupt(
                position,
                format!("records count is {count} but the records end after {index}"),
            ));
        }
        let (shape, end) =
            frame_record(data, at).map_err(|e| frame_error(position, index, at, e))?;
        f(index, shape, at, end)?;
        at = end;
    }
    if at != data.len() {
        return Err(Error::corrupt(
            position,
            format!(
                "{} bytes after the last of {count} records; the last record must end at the batch end",
                data.len() - at
            ),
        ));
    }
    Ok(())
}

/// [`walk_records`] over a compressed records section, decompressed as it is
/// walked: a window of the stream (one chunk, or one record when a record is
/// larger) is held at a time, never the whole section. Checks the same
/// framing, the count against the header's, and that the stream ends with
/// the last record. `scratch` is reused between calls; its length is the
/// window's (64 KiB when empty; tests pass small ones, at least 16 bytes).
pub fn walk_records_stream<F>(
    dec: &mut compression::Decoder<'_>,
    count: usize,
    position: u64,
    scratch: &mut Vec<u8>,
    mut f: F,
) -> Result<()>
where
    F: FnMut(usize, RecordShape) -> Result<()>,
{
    let mut w = Window {
        buf: scratch,
        start: 0,
        end: 0,
        base: 0,
        eof: false,
    };
    if w.buf.is_empty() {
        w.buf.resize(compression::CHUNK, 0);
    }
    for index in 0..count {
        w.fill(dec, 5)?;
        if w.start == w.end {
            return Err(Error::corrupt(
                position,
                format!("records count is {count} but the records end after {index}"),
            ));
        }
        let at = w.base + w.start;
        let mut p = w.start;
        let length = read_varint(&w.buf[..w.end], &mut p).ok_or_else(|| {
            frame_error(position, index, at, FrameError::BadVarint("record length"))
        })?;
        if length < 0 {
            return Err(frame_error(
                position,
                index,
                at,
                FrameError::NegativeLength(length),
            ));
        }
        let length_size = p - w.start;
        let need = length_size + length as usize;
        let shape = if need <= w.buf.len() {
            // the whole record fits the window: framed in place (the fill may
            // slide the window: `p` is stale after it)
            w.fill(dec, need)?;
            if w.end - w.start < need {
                return Err(frame_error(
                    position,
                    index,
                    at,
                    FrameError::Overrun {
                        length: length as usize,
                        left: w.end - w.start - length_size,
                    },
                ));
            }
            let (shape, _) = frame_record(&w.buf[w.start..w.start + need], 0)
                .map_err(|e| frame_error(position, index, at, e))?;
            w.start += need;
            shape
        } else {
            // a record larger than the window: its fields are read as they
            // stream by and its keys and values skipped, never held
            w.start = p;
            w.large_record(dec, length as usize)?
                .map_err(|e| frame_error(position, index, at, e))?
        };
        f(index, shape)?;
    }
    w.fill(dec, 1)?;
    if w.start != w.end {
        return Err(Error::corrupt(
            position,
            format!(
                "bytes after the last of {count} records (at byte {}); the last record must end at the batch end",
                w.base + w.start
            ),
        ));
    }
    Ok(())
}

/// The part of a decompressed stream being walked: `buf[start..end]`, which
/// starts at byte `base + start` of the stream.
struct Window<'s> {
    buf: &'s mut Vec<u8>,
    start: usize,
    end: usize,
    base: usize,
    eof: bool,
}

/// A frame check's outcome beneath the stream's own errors.
type Framed<T> = Result<std::result::Result<T, FrameError>>;

impl Window<'_> {
    /// Frame the record whose body (`length` bytes) starts at `start`,
    /// reading its fields as they stream by and skipping its key, value and
    /// headers' bytes: [`frame_record`]'s checks for records larger than the
    /// window.
    fn large_record(
        &mut self,
        dec: &mut compression::Decoder<'_>,
        length: usize,
    ) -> Framed<RecordShape> {
        macro_rules! tri {
            ($e:expr) => {
                match $e? {
                    Ok(v) => v,
                    Err(fe) => return Ok(Err(fe)),
                }
            };
        }
        let mut rem = length;
        if rem == 0 {
            return Ok(Err(FrameError::FieldOverrun("attributes")));
        }
        tri!(self.skip(dec, &mut rem, 1, "attributes"));
        let timestamp_delta = tri!(self.varint(dec, &mut rem, true, "timestamp delta"));
        let offset_delta = tri!(self.varint(dec, &mut rem, false, "offset delta")) as i32;
        let key_len = tri!(self.varint(dec, &mut rem, false, "key length")) as i32;
        if key_len < -1 {
            return Ok(Err(FrameError::NegativeSize("key length", key_len)));
        }
        if key_len > 0 {
            tri!(self.skip(dec, &mut rem, key_len as usize, "key"));
        }
        let value_len = tri!(self.varint(dec, &mut rem, false, "value length")) as i32;
        if value_len < -1 {
            return Ok(Err(FrameError::NegativeSize("value length", value_len)));
        }
        if value_len > 0 {
            tri!(self.skip(dec, &mut rem, value_len as usize, "value"));
        }
        let headers = tri!(self.varint(dec, &mut rem, false, "header count")) as i32;
        if headers < 0 {
            return Ok(Err(FrameError::NegativeSize("header count", headers)));
        }
        for _ in 0..headers {
            let hk = tri!(self.varint(dec, &mut rem, false, "header key length")) as i32;
            if hk < 0 {
                return Ok(Err(FrameError::NegativeSize("header key length", hk)));
            }
            tri!(self.skip(dec, &mut rem, hk as usize, "header key"));
            let hv = tri!(self.varint(dec, &mut rem, false, "header value length")) as i32;
            if hv < -1 {
                return Ok(Err(FrameError::NegativeSize("header value length", hv)));
            }
            if hv > 0 {
                tri!(self.skip(dec, &mut rem, hv as usize, "header value"));
            }
        }
        if rem != 0 {
            return Ok(Err(FrameError::LengthMismatch {
                length,
                used: length - rem,
            }));
        }
        Ok(Ok(RecordShape {
            timestamp_delta,
            offset_delta,
            key_len,
        }))
    }

    /// The varint (varlong if `long`) at `start`, within the `rem` bytes left
    /// of the record.
    fn varint(
        &mut self,
        dec: &mut compression::Decoder<'_>,
        rem: &mut usize,
        long: bool,
        what: &'static str,
    ) -> Framed<i64> {
        self.fill(dec, (*rem).min(if long { 10 } else { 5 }))?;
        let avail = (self.end - self.start).min(*rem);
        let field = &self.buf[..self.start + avail];
        let mut p = self.start;
        let v = if long {
            read_varlong(field, &mut p)
        } else {
            read_varint(field, &mut p).map(i64::from)
        };
        match v {
            Some(v) => {
                *rem -= p - self.start;
                self.start = p;
                Ok(Ok(v))
            }
            None => Ok(Err(FrameError::BadVarint(what))),
        }
    }

    /// Pass over `n` bytes of the record (`rem` left of it).
    fn skip(
        &mut self,
        dec: &mut compression::Decoder<'_>,
        rem: &mut usize,
        n: usize,
        what: &'static str,
    ) -> Framed<()> {
        if n > *rem {
            return Ok(Err(FrameError::FieldOverrun(what)));
        }
        let mut left = n;
        loop {
            let have = (self.end - self.start).min(left);
            self.start += have;
            left -= have;
            if left == 0 {
                break;
            }
            // the window is drained: read on from the decoder into it
            self.base += self.end;
            self.start = 0;
            self.end = 0;
            if self.eof {
                return Ok(Err(FrameError::FieldOverrun(what)));
            }
            let k = dec.read(&mut self.buf[..])?;
            if k == 0 {
                self.eof = true;
                return Ok(Err(FrameError::FieldOverrun(what)));
            }
            self.end = k;
        }
        *rem -= n;
        Ok(Ok(()))
    }

    /// Read until `want` bytes are held from `start`, or the stream ends.
    /// The buffer grows (doubling) only as bytes arrive.
    #[inline]
    fn fill(&mut self, dec: &mut compression::Decoder<'_>, want: usize) -> Result<()> {
        while self.end - self.start < want && !self.eof {
            if self.end == self.buf.len() {
                if self.start > 0 {
                    self.buf.copy_within(self.start..self.end, 0);
                    self.base += self.start;
                    self.end -= self.start;
                    self.start = 0;
                } else {
                    let grown = (self.buf.len() * 2).max(compression::CHUNK);
                    self.buf.resize(grown, 0);
                }
            }
            let n = dec.read(&mut self.buf[self.end..])?;
            if n == 0 {
                self.eof = true;
            }
            self.end += n;
        }
        Ok(())
    }
}

/// Kafka's sequence arithmetic: wraps from i32::MAX to 0 (Java's int
/// arithmetic, so a corrupt negative increment wraps instead of panicking).
#[inline]
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX.wrapping_sub(increment) {
        increment
            .wrapping_sub(i32::MAX.wrapping_sub(sequence))
            .wrapping_sub(1)
    } else {
        sequence.wrapping_add(increment)
    }
}

struct Reader<'a> {
    data: &'a [u8],
    p: usize,
    position: u64,
    index: usize,
}

impl Reader<'_> {
    fn fail(&self, e: FrameError) -> Error {
        frame_error(self.position, self.index, self.p, e)
    }
    fn varint(&mut self, what: &'static str) -> Result<i32> {
        read_varint(self.data, &mut self.p).ok_or_else(|| self.fail(FrameError::BadVarint(what)))
    }
    fn varlong(&mut self, what: &'static str) -> Result<i64> {
        read_varlong(self.data, &mut self.p).ok_or_else(|| self.fail(FrameError::BadVarint(what)))
    }
    fn bytes(&mut self, len: i32, what: &'static str) -> Result<Option<Vec<u8>>> {
        if len < 0 {
            return Ok(None);
        }
        let end = self.p + len as usize;
        if end > self.data.len() {
            return Err(self.fail(FrameError::FieldOverrun(what)));
        }
        let v = self.data[self.p..end].to_vec();
        self.p = end;
        Ok(Some(v))
    }
}

/// Decode `count` records from a (decompressed) records section, checking
/// the same framing as [`walk_records`].
pub fn decode_records_section(
    data: &[u8],
    count: usize,
    header: &BatchHeader,
    position: u64,
) -> Result<Vec<Record>> {
    let log_append_time = header.timestamp_type() == 1;
    let has_sequence = header.producer_id >= 0 && header.base_sequence >= 0;
    let mut out = Vec::with_capacity(count.min(data.len() / 7 + 1));
    let mut at = 0usize;
    for index in 0..count {
        if at >= data.len() {
            return Err(Error::corrupt(
                position,
                format!("records count is {count} but the records end after {index}"),
            ));
        }
        // The walk checks the framing; then the fields are read knowing they fit.
        let (shape, end) =
            frame_record(data, at).map_err(|e| frame_error(position, index, at, e))?;
        let mut r = Reader {
            data: &data[..end],
            p: at,
            position,
            index,
        };
        r.varint("record length")?;
        r.p += 1;
        r.varlong("timestamp delta")?;
        r.varint("offset delta")?;
        let kl = r.varint("key length")?;
        let key = r.bytes(kl, "key")?;
        let vl = r.varint("value length")?;
        let value = r.bytes(vl, "value")?;
        let n = r.varint("header count")?;
        let mut headers = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let hk = r.varint("header key length")?;
            let k = r.bytes(hk, "header key")?.unwrap_or_default();
            let hv = r.varint("header value length")?;
            let v = r.bytes(hv, "header value")?;
            headers.push((String::from_utf8_lossy(&k).into_owned(), v));
        }
        let timestamp = if log_append_time {
            header.max_timestamp
        } else {
            header.base_timestamp.wrapping_add(shape.timestamp_delta)
        };
        out.push(Record {
            offset: header.base_offset.wrapping_add(shape.offset_delta as i64),
            timestamp,
            key,
            value,
            headers,
            sequence: if has_sequence {
                increment_sequence(header.base_sequence, shape.offset_delta)
            } else {
                -1
            },
        });
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
    Ok(out)
}

/// All records of the v2 batch at the start of `batch`, whose `header` was
/// parsed (and, by the caller, checked) already: the records section
/// decompressed and decoded, with absolute offsets and timestamps.
pub fn decode_v2_records(batch: &[u8], header: &BatchHeader) -> Result<Vec<Record>> {
    let size = header.size_in_bytes();
    let count = header.records_count.max(0) as usize;
    let section = &batch[RECORDS_OFFSET..size];
    if count == 0 {
        // an empty batch (a producer's header kept by the cleaner) has no
        // records whatever its codec bits say: older cleaners kept the bits
        // over an empty payload
        return Ok(Vec::new());
    }
    if header.compression_codec() == compression::NONE {
        decode_records_section(section, count, header, 0)
    } else {
        let data = compression::decompress(header.compression_codec(), section)
            .map_err(|e| compression::at_position(e, 0))?;
        decode_records_section(&data, count, header, 0)
    }
}

/// One record to put in a batch built by [`build_batch`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildRecord {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp: i64,
}

/// The header fields of a batch built by [`build_batch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildOptions {
    pub base_offset: i64,
    pub compression: u8,
    pub partition_leader_epoch: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub is_transactional: bool,
    pub is_control: bool,
    /// 0 = CreateTime, 1 = LogAppendTime.
    pub timestamp_type: u8,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            base_offset: 0,
            compression: compression::NONE,
            partition_leader_epoch: batch::NO_PARTITION_LEADER_EPOCH,
            producer_id: batch::NO_PRODUCER_ID,
            producer_epoch: batch::NO_PRODUCER_EPOCH,
            base_sequence: batch::NO_SEQUENCE,
            is_transactional: false,
            is_control: false,
            timestamp_type: 0,
        }
    }
}

fn opt_len(v: &Option<Vec<u8>>) -> Result<i32> {
    match v {
        None => Ok(-1),
        Some(b) => i32::try_from(b.len())
            .map_err(|_| Error::InvalidRecord(format!("field of {} bytes", b.len()))),
    }
}

/// Append one record (length varint and fields) to `out`.
pub fn encode_record(
    out: &mut Vec<u8>,
    offset_delta: i32,
    timestamp_delta: i64,
    r: &BuildRecord,
) -> Result<()> {
    let key_len = opt_len(&r.key)?;
    let value_len = opt_len(&r.value)?;
    let mut body = 1 + varlong_size(timestamp_delta) + varint_size(offset_delta);
    body += varint_size(key_len) + key_len.max(0) as usize;
    body += varint_size(value_len) + value_len.max(0) as usize;
    body += varint_size(r.headers.len() as i32);
    for (k, v) in &r.headers {
        let vl = opt_len(v)?;
        body += varint_size(k.len() as i32) + k.len() + varint_size(vl) + vl.max(0) as usize;
    }
    let body =
        i32::try_from(body).map_err(|_| Error::InvalidRecord(format!("record of {body} bytes")))?;
    out.reserve(body as usize + 5);
    write_varint(out, body);
    out.push(0);
    write_varlong(out, timestamp_delta);
    write_varint(out, offset_delta);
    write_varint(out, key_len);
    if let Some(k) = &r.key {
        out.extend_from_slice(k);
    }
    write_varint(out, value_len);
    if let Some(v) = &r.value {
        out.extend_from_slice(v);
    }
    write_varint(out, r.headers.len() as i32);
    for (k, v) in &r.headers {
        write_varint(out, k.len() as i32);
        out.extend_from_slice(k.as_bytes());
        write_varint(out, opt_len(v)?);
        if let Some(v) = v {
            out.extend_from_slice(v);
        }
    }
    Ok(())
}

/// Build one v2 batch: offset deltas 0..n-1, base timestamp the first
/// record's, max timestamp the greatest, records compressed with
/// `opts.compression`, CRC32C set.
pub fn build_batch(records: &[BuildRecord], opts: &BuildOptions) -> Result<Vec<u8>> {
    let base_timestamp = records.first().map_or(batch::NO_TIMESTAMP, |r| r.timestamp);
    let max_timestamp = records
        .iter()
        .map(|r| r.timestamp)
        .max()
        .unwrap_or(batch::NO_TIMESTAMP);
    let mut section = Vec::with_capacity(
        records
            .iter()
            .map(|r| 24 + r.key.as_ref().map_or(0, Vec::len) + r.value.as_ref().map_or(0, Vec::len))
            .sum(),
    );
    for (i, r) in records.iter().enumerate() {
        let delta =
            i32::try_from(i).map_err(|_| Error::InvalidRecord("too many records".into()))?;
        encode_record(
            &mut section,
            delta,
            r.timestamp.wrapping_sub(base_timestamp),
            r,
        )?;
    }
    frame_batch(
        section,
        records.len() as i32,
        base_timestamp,
        max_timestamp,
        opts,
    )
}

/// Wrap an uncompressed records `section` of `count` records (offset deltas
/// 0..count-1) in a v2 batch header: compressed with `opts.compression`,
/// CRC32C set. Shared by [`build_batch`] and the broker's recompression so
/// both frame batches identically.
pub fn frame_batch(
    section: Vec<u8>,
    count: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    opts: &BuildOptions,
) -> Result<Vec<u8>> {
    let section = if opts.compression == compression::NONE {
        section
    } else {
        compression::compress(opts.compression, &section)?
    };
    let mut attributes = (opts.compression as i16) & batch::COMPRESSION_CODEC_MASK;
    if opts.timestamp_type == 1 {
        attributes |= batch::TIMESTAMP_TYPE_MASK;
    }
    if opts.is_transactional {
        attributes |= batch::TRANSACTIONAL_FLAG_MASK;
    }
    if opts.is_control {
        attributes |= batch::CONTROL_FLAG_MASK;
    }
    let total = HEADER_SIZE + section.len();
    let length = i32::try_from(total - batch::LOG_OVERHEAD)
        .map_err(|_| Error::InvalidRecord(format!("batch of {total} bytes")))?;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&opts.base_offset.to_be_bytes());
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(&opts.partition_leader_epoch.to_be_bytes());
    out.push(MAGIC_V2 as u8);
    out.extend_from_slice(&[0; 4]); // CRC, set last
    out.extend_from_slice(&attributes.to_be_bytes());
    out.extend_from_slice(&(count - 1).max(0).to_be_bytes());
    out.extend_from_slice(&base_timestamp.to_be_bytes());
    out.extend_from_slice(&max_timestamp.to_be_bytes());
    out.extend_from_slice(&opts.producer_id.to_be_bytes());
    out.extend_from_slice(&opts.producer_epoch.to_be_bytes());
    out.extend_from_slice(&opts.base_sequence.to_be_bytes());
    out.extend_from_slice(&count.to_be_bytes());
    debug_assert_eq!(out.len(), HEADER_SIZE);
    out.extend_from_slice(&section);
    let crc = batch::compute_crc(&out);
    batch::write_u32(&mut out, batch::CRC_OFFSET, crc);
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The records of a v2 batch built here (its checks are validate's).
    fn decode_batch_records(b: &[u8]) -> Result<Vec<Record>> {
        decode_v2_records(b, &BatchHeader::parse(b, 0)?)
    }

    pub(crate) fn sample_records(n: usize, value_len: usize) -> Vec<BuildRecord> {
        (0..n)
            .map(|i| BuildRecord {
                key: if i % 3 == 2 {
                    None
                } else {
                    Some(format!("key-{i}").into_bytes())
                },
                value: if i % 5 == 4 {
                    None
                } else {
                    Some((0..value_len).map(|j| (i + j) as u8).collect())
                },
                headers: if i % 2 == 0 {
                    vec![
                        ("h".to_string(), Some(b"v".to_vec())),
                        ("nil".to_string(), None),
                    ]
                } else {
                    vec![]
                },
                timestamp: 1_700_000_000_000 + (i as i64 * 37) % 11 - 5,
            })
            .collect()
    }

    #[test]
    fn build_then_decode_round_trips_every_codec() {
        let input = sample_records(50, 100);
        for codec in [0u8, 1, 2, 3, 4] {
            let opts = BuildOptions {
                base_offset: 1000,
                compression: codec,
                producer_id: 7,
                producer_epoch: 2,
                base_sequence: i32::MAX - 10,
                ..Default::default()
            };
            let b = build_batch(&input, &opts).unwrap();
            let h = BatchHeader::parse(&b, 0).unwrap();
            assert_eq!(h.records_count, 50);
            assert_eq!(h.last_offset_delta, 49);
            assert_eq!(h.compression_codec(), codec);
            assert_eq!(
                h.max_timestamp,
                input.iter().map(|r| r.timestamp).max().unwrap()
            );
            let out = decode_batch_records(&b).unwrap();
            assert_eq!(out.len(), 50);
            for (i, (a, r)) in input.iter().zip(&out).enumerate() {
                assert_eq!(r.offset, 1000 + i as i64);
                assert_eq!(r.timestamp, a.timestamp);
                assert_eq!(r.key, a.key);
                assert_eq!(r.value, a.value);
                assert_eq!(r.headers, a.headers);
                assert_eq!(r.sequence, increment_sequence(i32::MAX - 10, i as i32));
            }
            assert_eq!(out[11].sequence, 0, "sequence wraps past i32::MAX");
        }
    }

    #[test]
    fn log_append_time_records_take_the_batch_max_timestamp() {
        let input = sample_records(3, 4);
        let b = build_batch(
            &input,
            &BuildOptions {
                timestamp_type: 1,
                ..Default::default()
            },
        )
        .unwrap();
        let max = input.iter().map(|r| r.timestamp).max().unwrap();
        assert!(decode_batch_records(&b)
            .unwrap()
            .iter()
            .all(|r| r.timestamp == max && r.sequence == -1));
    }

    #[test]
    fn empty_batch_builds_and_decodes() {
        let b = build_batch(&[], &BuildOptions::default()).unwrap();
        assert_eq!(b.len(), HEADER_SIZE);
        assert!(decode_batch_records(&b).unwrap().is_empty());
    }

    fn one_record(r: &BuildRecord) -> Vec<u8> {
        let mut v = Vec::new();
        encode_record(&mut v, 0, 0, r).unwrap();
        v
    }

    #[test]
    fn framing_errors_are_named() {
        let r = BuildRecord {
            key: Some(b"k".to_vec()),
            value: Some(b"value".to_vec()),
            headers: vec![("a".into(), Some(b"b".to_vec()))],
            timestamp: 0,
        };
        let good = one_record(&r);
        let (shape, end) = frame_record(&good, 0).unwrap();
        assert_eq!((shape.key_len, end), (1, good.len()));

        // length one too long: runs past the data
        let mut long = good.clone();
        long[0] += 2; // zigzag: +1 in value
        assert!(matches!(
            frame_record(&long, 0),
            Err(FrameError::Overrun { .. })
        ));
        // length one too short, with a spare byte after: fields overrun the record
        let mut short = good.clone();
        short[0] -= 2;
        assert!(frame_record(&short, 0).is_err());
        // length covering one byte of padding: mismatch
        let mut padded = good.clone();
        padded[0] += 2;
        padded.push(0);
        assert!(matches!(
            frame_record(&padded, 0),
            Err(FrameError::LengthMismatch { .. })
        ));
        // negative length
        assert!(matches!(
            frame_record(&[0x01], 0),
            Err(FrameError::NegativeLength(-1))
        ));
        // a truncated varint
        assert!(matches!(
            frame_record(&[0x80], 0),
            Err(FrameError::BadVarint(_))
        ));
        // key length -2
        let mut bad_key = good.clone();
        bad_key[4] = 0x03; // length @0, attributes @1, ts @2, offset delta @3, key length @4 → -2
        assert!(frame_record(&bad_key, 0).is_err());
        // a negative header count
        let nh = BuildRecord {
            key: None,
            value: None,
            headers: vec![],
            timestamp: 0,
        };
        let mut v = one_record(&nh);
        let last = v.len() - 1;
        v[last] = 0x01; // header count -1
        assert!(matches!(
            frame_record(&v, 0),
            Err(FrameError::NegativeSize(..))
        ));
    }

    #[test]
    fn walk_checks_count_and_trailing_bytes() {
        let b = build_batch(&sample_records(4, 10), &BuildOptions::default()).unwrap();
        let section = &b[RECORDS_OFFSET..];
        let mut seen = 0;
        walk_records(section, 4, 5, |i, s| {
            assert_eq!(s.offset_delta as usize, i);
            seen += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, 4);
        assert!(matches!(
            walk_records(section, 5, 5, |_, _| Ok(())),
            Err(Error::CorruptRecord { position: 5, .. })
        ));
        assert!(walk_records(section, 3, 5, |_, _| Ok(())).is_err());
    }

    /// Found by the fuzzer: a record cut by the stream's end after the window
    /// slid while filling (its error message used a stale position).
    #[test]
    fn a_record_cut_after_the_window_slides_is_corrupt() {
        let input: &[u8] = &[
            2, 150, 150, 128, 0, 0, 128, 128, 0, 0, 128, 128, 128, 0, 0, 0, 150, 128, 128, 0, 0,
            128, 128, 0, 0, 128, 128, 128, 0, 0, 0, 150, 128, 128, 0, 0, 128, 128, 0, 0, 128, 128,
            128, 0, 0, 0, 150, 128, 128, 0, 255, 255, 0, 0, 61, 12, 0, 0, 120,
        ];
        let count = usize::from(u16::from_be_bytes([input[0], input[1]]) % 4096);
        let section = &input[2..];
        let in_place = walk_records(section, count, 0, |_, _| Ok(()));
        for window in [0usize, 16 + input.len() % 48] {
            let mut scratch = vec![0u8; window];
            let mut dec = compression::Decoder::new(compression::NONE, section, 1 << 20).unwrap();
            let streamed = walk_records_stream(&mut dec, count, 0, &mut scratch, |_, _| Ok(()));
            assert_eq!(streamed.is_ok(), in_place.is_ok(), "window {window}");
        }
    }
}
