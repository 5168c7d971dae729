//! Validation of record batches, and the leader's in-place offset assignment.
//!
//! * [`validate_batch`] / [`validate_any`]: one batch as found in a buffer or a
//!   segment file (recovery, scans): header, length, CRC, records count
//!   against the last offset delta, and the varint framing of every record of
//!   an uncompressed batch (of a compressed one too with `deep`).
//! * [`analyze_records`]: every batch of a record set, nothing changed (the
//!   follower's append).
//! * [`validate_and_assign_offsets`]: the leader's append of a client's
//!   records: Kafka's client rules, then offsets, leader epoch and timestamps
//!   written in place and the CRC recomputed — all checks before any write.

use crate::batch::{
    self, BatchHeader, BatchMeta, ATTRIBUTES_OFFSET, HEADER_SIZE, LOG_OVERHEAD, MAGIC_OFFSET,
    MAGIC_V0, MAGIC_V1, MAGIC_V2, RECORDS_OFFSET,
};
use crate::compression;
use crate::crc;
use crate::error::{Error, Result};
use crate::legacy;
use crate::records::{decode_v2_records, walk_records, walk_records_stream, Record};

pub use crate::batch::ValidationOptions;

/// The header of a v2 batch whose framing and CRC32C check out.
#[derive(Debug, Clone, Copy)]
struct CheckedHeader {
    header: BatchHeader,
    size: usize,
    /// CRC32C of the records section alone, so a rewritten header's CRC can be
    /// combined with it instead of reading the records again.
    records_crc: u32,
    /// `crc::shift_for` the records section's length.
    records_shift: u32,
}

/// Header, length against the buffer and `max_batch_size`, magic, CRC32C.
#[inline]
fn check_v2_header(buf: &[u8], position: u64, max_batch_size: usize) -> Result<CheckedHeader> {
    let header = BatchHeader::parse(buf, position)?;
    if header.magic != MAGIC_V2 {
        return Err(Error::corrupt(
            position,
            format!("magic {} where 2 was expected", header.magic),
        ));
    }
    if (header.batch_length as i64) < (HEADER_SIZE - LOG_OVERHEAD) as i64 {
        return Err(Error::corrupt(
            position,
            format!(
                "batch length {} is shorter than the {}-byte header",
                header.batch_length,
                HEADER_SIZE - LOG_OVERHEAD
            ),
        ));
    }
    let size = header.size_in_bytes();
    if size > max_batch_size {
        return Err(Error::MessageTooLarge {
            size: size as u64,
            max: max_batch_size as u64,
        });
    }
    if size > buf.len() {
        return Err(Error::corrupt(
            position,
            format!("batch of {size} bytes but only {} bytes left", buf.len()),
        ));
    }
    let records_crc = crc::crc32c_split(&buf[RECORDS_OFFSET..size]);
    let records_shift = crc::shift_for(size - RECORDS_OFFSET);
    let crc = crc::combine(
        crc32c::crc32c(&buf[ATTRIBUTES_OFFSET..RECORDS_OFFSET]),
        records_crc,
        records_shift,
    );
    if crc != header.crc {
        return Err(Error::corrupt(
            position,
            format!(
                "CRC32C mismatch: stored {:#010x}, computed {crc:#010x}",
                header.crc
            ),
        ));
    }
    if header.records_count < 0 {
        return Err(Error::corrupt(
            position,
            format!("negative records count {}", header.records_count),
        ));
    }
    if header.last_offset_delta < 0 {
        return Err(Error::corrupt(
            position,
            format!("negative last offset delta {}", header.last_offset_delta),
        ));
    }
    Ok(CheckedHeader {
        header,
        size,
        records_crc,
        records_shift,
    })
}

/// The general rule (followers, recovery): compaction may remove records, so
/// a batch holds at most `last_offset_delta + 1` of them.
#[inline]
fn check_count_general(h: &BatchHeader, position: u64) -> Result<()> {
    if h.records_count as i64 > h.last_offset_delta as i64 + 1 {
        return Err(Error::corrupt(
            position,
            format!(
                "records count {} exceeds last offset delta {} + 1",
                h.records_count, h.last_offset_delta
            ),
        ));
    }
    Ok(())
}

/// What one pass over a batch's records learns, with no allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordStats {
    pub count: usize,
    /// Greatest record timestamp, starting from -1 as Kafka does.
    pub max_timestamp: i64,
    /// Index of the first record carrying `max_timestamp` (None if none beat -1).
    pub max_timestamp_index: Option<usize>,
    /// Smallest record timestamp other than -1 (`i64::MAX` if none).
    pub min_timestamp: i64,
    /// Offset deltas are exactly 0, 1, ..., n-1.
    pub sequential_offsets: bool,
    /// Offset deltas strictly increase.
    pub increasing_offsets: bool,
    pub max_offset_delta: i32,
    /// Index of the first record without a key.
    pub first_keyless: Option<usize>,
}

/// Walk the records of a checked v2 batch. Uncompressed records are walked in
/// place; compressed ones only if `decompress`, streaming (at most
/// `max_decompressed` bytes, `scratch` holding the window). An empty batch
/// (count 0) has no records to read whatever its codec bits. `None` when the
/// records were not looked at.
fn record_stats(
    buf: &[u8],
    c: &CheckedHeader,
    position: u64,
    decompress: Option<(usize, &mut Vec<u8>)>,
) -> Result<Option<RecordStats>> {
    let h = &c.header;
    let section = &buf[RECORDS_OFFSET..c.size];
    let codec = h.compression_codec();
    let base_ts = h.base_timestamp;
    let mut st = RecordStats {
        count: h.records_count as usize,
        max_timestamp: batch::NO_TIMESTAMP,
        max_timestamp_index: None,
        min_timestamp: i64::MAX,
        sequential_offsets: true,
        increasing_offsets: true,
        max_offset_delta: -1,
        first_keyless: None,
    };
    let mut prev_delta: i64 = -1;
    let visit = |i: usize, s: crate::records::RecordShape| {
        let ts = base_ts.wrapping_add(s.timestamp_delta);
        if ts > st.max_timestamp {
            st.max_timestamp = ts;
            st.max_timestamp_index = Some(i);
        }
        if ts < st.min_timestamp && ts != batch::NO_TIMESTAMP {
            st.min_timestamp = ts;
        }
        let d = s.offset_delta as i64;
        st.sequential_offsets &= d == i as i64;
        st.increasing_offsets &= d > prev_delta;
        prev_delta = d;
        if s.key_len < 0 && st.first_keyless.is_none() {
            st.first_keyless = Some(i);
        }
        Ok(())
    };
    let count = h.records_count as usize;
    if codec == compression::NONE {
        walk_records(section, count, position, visit)?;
    } else if count == 0 {
        // nothing to decompress
    } else if let Some((limit, scratch)) = decompress {
        let mut dec = compression::Decoder::new(codec, section, limit)
            .map_err(|e| compression::at_position(e, position))?;
        walk_records_stream(&mut dec, count, position, scratch, visit)
            .map_err(|e| compression::at_position(e, position))?;
    } else {
        return Ok(None);
    }
    st.max_offset_delta = prev_delta as i32;
    Ok(Some(st))
}

/// The general record rules: offset deltas increase and stay within the header's.
#[inline]
fn check_stats_general(h: &BatchHeader, st: &RecordStats, position: u64) -> Result<()> {
    if !st.increasing_offsets {
        return Err(Error::corrupt(
            position,
            "record offset deltas do not increase",
        ));
    }
    if st.count > 0 && st.max_offset_delta > h.last_offset_delta {
        return Err(Error::corrupt(
            position,
            format!(
                "record offset delta {} beyond the batch's last offset delta {}",
                st.max_offset_delta, h.last_offset_delta
            ),
        ));
    }
    Ok(())
}

/// Validate the v2 batch at the start of `buf` (`position` labels errors) and
/// return its decoded header. `buf` may extend past the batch.
///
/// Checks the header, batch length against the buffer and the maximum,
/// CRC32C, records count <= last offset delta + 1, and the framing of every
/// record (each length varint covering its fields exactly, the last record
/// ending at the batch end, offset deltas increasing) — for a compressed
/// batch only with `opts.deep`.
pub fn validate_batch(buf: &[u8], position: u64, opts: &ValidationOptions) -> Result<BatchHeader> {
    let c = check_v2_header(buf, position, opts.max_batch_size)?;
    check_count_general(&c.header, position)?;
    let mut scratch = Vec::new();
    let limit = opts
        .max_decompressed_size
        .min(compression::MAX_DECOMPRESSED_SIZE);
    let decompress = opts.deep.then_some((limit, &mut scratch));
    if let Some(st) = record_stats(buf, &c, position, decompress)? {
        check_stats_general(&c.header, &st, position)?;
    }
    Ok(c.header)
}

/// Validate the batch at the start of `buf` whatever its magic (v2, or a legacy
/// magic 0/1 message or compressed wrapper, checked by CRC32 inner messages
/// included) and return its facts. Recovery calls this for every batch.
pub fn validate_any(buf: &[u8], position: u64, opts: &ValidationOptions) -> Result<BatchMeta> {
    if buf.len() <= MAGIC_OFFSET {
        return Err(Error::corrupt(
            position,
            format!("{} bytes left, too few for a batch", buf.len()),
        ));
    }
    match buf[MAGIC_OFFSET] as i8 {
        MAGIC_V2 => {
            validate_batch(buf, position, opts).map(|h| BatchMeta::from_header(&h, position))
        }
        MAGIC_V0 | MAGIC_V1 => legacy::validate_legacy(buf, position, opts),
        m => Err(Error::corrupt(position, format!("unknown magic {m}"))),
    }
}

/// All records of the single batch at the start of `batch` (v2, or a legacy
/// message / compressed wrapper), decompressed, with absolute offsets and
/// timestamps. The batch is validated (CRC included) first.
pub fn decode_batch_records(batch: &[u8]) -> Result<Vec<Record>> {
    if batch.len() <= MAGIC_OFFSET {
        return Err(Error::corrupt(
            0,
            format!("{} bytes are too few for a batch", batch.len()),
        ));
    }
    if batch[MAGIC_OFFSET] as i8 != MAGIC_V2 {
        return legacy::decode_message_set(batch, true);
    }
    let header = validate_batch(batch, 0, &Default::default())?;
    decode_v2_records(batch, &header)
}

/// Everything the broker needs from validating (and assigning) a record set,
/// in one pass; mirrors `pylog._native.AppendInfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    pub num_records: i64,
    pub num_batches: usize,
    pub valid_bytes: usize,
    /// -1 when there is no batch.
    pub source_magic: i8,
    pub source_compression: u8,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub first_sequence: i32,
    pub last_sequence: i32,
    pub is_transactional: bool,
    pub is_control: bool,
    pub batches: Vec<BatchMeta>,
}

impl AppendInfo {
    fn empty() -> AppendInfo {
        AppendInfo {
            first_offset: -1,
            last_offset: -1,
            max_timestamp: batch::NO_TIMESTAMP,
            offset_of_max_timestamp: -1,
            num_records: 0,
            num_batches: 0,
            valid_bytes: 0,
            source_magic: -1,
            source_compression: compression::NONE,
            producer_id: batch::NO_PRODUCER_ID,
            producer_epoch: batch::NO_PRODUCER_EPOCH,
            first_sequence: batch::NO_SEQUENCE,
            last_sequence: batch::NO_SEQUENCE,
            is_transactional: false,
            is_control: false,
            batches: Vec::new(),
        }
    }

    /// Fill the first/last-batch facts from `batches`.
    fn summarize(&mut self) {
        if let (Some(first), Some(last)) = (self.batches.first(), self.batches.last()) {
            self.first_offset = first.base_offset;
            self.last_offset = last.last_offset;
            self.source_magic = first.magic;
            self.source_compression = first.compression;
            self.producer_id = first.producer_id;
            self.producer_epoch = first.producer_epoch;
            self.first_sequence = first.base_sequence;
            self.last_sequence = last.last_sequence;
            self.is_transactional = first.is_transactional;
            self.is_control = first.is_control;
        }
        self.num_batches = self.batches.len();
        self.num_records = self.batches.iter().map(|b| b.records_count as i64).sum();
    }
}

/// Validate every batch of `buf` without changing a byte (a follower's
/// append, or any record set read back). v2 batches as [`validate_batch`];
/// legacy ones by CRC32. A torn batch at the end (fewer bytes left than its
/// length says, as a fetch response may carry) ends the scan quietly:
/// `valid_bytes` tells where. Max timestamp and its offset come from the
/// batch headers (the offset is the last offset of the batch holding it).
pub fn analyze_records(buf: &[u8], opts: &ValidationOptions) -> Result<AppendInfo> {
    let mut info = AppendInfo::empty();
    let mut at = 0usize;
    while at < buf.len() {
        let rest = &buf[at..];
        if rest.len() < LOG_OVERHEAD {
            break;
        }
        let length = batch::read_i32(rest, batch::LENGTH_OFFSET);
        if length < 0 {
            return Err(Error::corrupt(
                at as u64,
                format!("negative batch length {length}"),
            ));
        }
        let size = LOG_OVERHEAD + length as usize;
        if size > opts.max_batch_size {
            return Err(Error::MessageTooLarge {
                size: size as u64,
                max: opts.max_batch_size as u64,
            });
        }
        if size > rest.len() {
            break; // torn tail
        }
        let meta = validate_any(&rest[..size], at as u64, opts)?;
        if meta.max_timestamp > info.max_timestamp {
            info.max_timestamp = meta.max_timestamp;
            info.offset_of_max_timestamp = meta.last_offset;
        }
        info.batches.push(meta);
        at += size;
    }
    info.valid_bytes = at;
    info.summarize();
    Ok(info)
}

/// The leader's parameters for [`validate_and_assign_offsets`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AssignOptions {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub now_ms: i64,
    pub log_append_time: bool,
    pub max_batch_size: usize,
    pub timestamp_before_max_ms: i64,
    pub timestamp_after_max_ms: i64,
    pub require_keys: bool,
    /// Most bytes a compressed batch's records may decompress to
    /// (RecordsTooLarge beyond); capped by `compression::MAX_DECOMPRESSED_SIZE`.
    pub max_decompressed_size: usize,
}

impl Default for AssignOptions {
    fn default() -> Self {
        AssignOptions {
            base_offset: 0,
            partition_leader_epoch: batch::NO_PARTITION_LEADER_EPOCH,
            now_ms: 0,
            log_append_time: false,
            max_batch_size: 1_048_588,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: i64::MAX,
            require_keys: false,
            max_decompressed_size: compression::MAX_DECOMPRESSED_SIZE,
        }
    }
}

/// One batch, validated, waiting for its write.
struct Plan {
    at: usize,
    c: CheckedHeader,
    stats: Option<RecordStats>,
}

/// Apply Kafka's client-origin rules to the batch header.
pub(crate) fn check_client_header(h: &BatchHeader, position: u64) -> Result<()> {
    if h.base_offset != 0 {
        return Err(Error::InvalidRecord(format!(
            "the base offset of a record batch from a client should be 0, but it is {} (batch at {position})",
            h.base_offset
        )));
    }
    if h.records_count <= 0 {
        return Err(Error::InvalidRecord(format!(
            "invalid reported count for record batch: {} (batch at {position})",
            h.records_count
        )));
    }
    if h.records_count as i64 != h.last_offset_delta as i64 + 1 {
        return Err(Error::InvalidRecord(format!(
            "inconsistent batch offset range [{}, {}] and count of records {} (batch at {position})",
            h.base_offset,
            h.last_offset(),
            h.records_count
        )));
    }
    if h.is_control() {
        return Err(Error::InvalidRecord(
            "clients are not allowed to write control records".into(),
        ));
    }
    if h.producer_id >= 0 && h.base_sequence < 0 {
        return Err(Error::InvalidRecord(format!(
            "invalid sequence number {} in record batch with producer id {}",
            h.base_sequence, h.producer_id
        )));
    }
    if h.timestamp_type() == 1 {
        return Err(Error::InvalidTimestamp(
            "a producer must not set the timestamp type to LogAppendTime".into(),
        ));
    }
    Ok(())
}

/// The leader's append of a client's v2 records: validate everything, then
/// rewrite `buf` in place — base offsets consecutive from `opts.base_offset`,
/// the partition leader epoch, under LogAppendTime the max timestamp `now_ms`
/// and the timestamp-type bit, under CreateTime the max timestamp of an
/// uncompressed (or decompressed) batch recomputed from its records — and
/// recompute each CRC by combining the new header's CRC with the records'
/// CRC from the validation pass (the records are read once). Nothing is
/// written if any check fails.
///
/// Kafka's client rules: every batch's base offset 0, records count == last offset
/// delta + 1 (> 0), record offset deltas 0..n-1, no control batch, a producer
/// id needs a base sequence, no LogAppendTime bit from a producer, each batch
/// at most `max_batch_size` bytes (MESSAGE_TOO_LARGE), one batch only when
/// compressed, record timestamps within `[now - before_max, now + after_max]`
/// under CreateTime (INVALID_TIMESTAMP), keys when `require_keys`.
///
/// Every record of a compressed batch is read too (Kafka's LogValidator),
/// streaming: the stream must decode, each record frame, their number match
/// the header's count, and the stream end with the last record — junk with a
/// right CRC is CORRUPT_MESSAGE, not stored; records decompressing past
/// `max_decompressed_size` are RecordsTooLarge (MESSAGE_TOO_LARGE). Under
/// CreateTime the batch's max timestamp is the records'.
///
/// The offset of the max timestamp follows Kafka's LogValidator: the last
/// offset for uncompressed records; for a compressed batch, the first offset
/// under LogAppendTime and the first record holding the max timestamp under
/// CreateTime.
pub fn validate_and_assign_offsets(buf: &mut [u8], opts: &AssignOptions) -> Result<AppendInfo> {
    let plans = plan_assignment(buf, opts)?;
    let mut info = AppendInfo::empty();
    if plans.is_empty() {
        return Ok(info);
    }
    let mut next = opts.base_offset;
    let mut max_ts = batch::NO_TIMESTAMP;
    let mut offset_of_max = -1i64;
    let compressed = plans[0].c.header.compression_codec() != compression::NONE;
    for p in &plans {
        let h = p.c.header;
        let count = h.records_count as i64;
        let base = next;
        let b = &mut buf[p.at..p.at + p.c.size];
        let mut attributes = h.attributes & !batch::TIMESTAMP_TYPE_MASK;
        let batch_max = if opts.log_append_time {
            attributes |= batch::TIMESTAMP_TYPE_MASK;
            opts.now_ms
        } else {
            match &p.stats {
                Some(st) => st.max_timestamp,
                None => h.max_timestamp,
            }
        };
        batch::write_i64(b, batch::BASE_OFFSET_OFFSET, base);
        batch::write_i32(
            b,
            batch::PARTITION_LEADER_EPOCH_OFFSET,
            opts.partition_leader_epoch,
        );
        b[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
        batch::write_i64(b, batch::MAX_TIMESTAMP_OFFSET, batch_max);
        let crc = crc::combine(
            crc32c::crc32c(&b[ATTRIBUTES_OFFSET..RECORDS_OFFSET]),
            p.c.records_crc,
            p.c.records_shift,
        );
        batch::write_u32(b, batch::CRC_OFFSET, crc);
        let new_header = BatchHeader {
            base_offset: base,
            partition_leader_epoch: opts.partition_leader_epoch,
            crc,
            attributes,
            max_timestamp: batch_max,
            ..h
        };
        info.batches
            .push(BatchMeta::from_header(&new_header, p.at as u64));

        if batch_max > max_ts {
            max_ts = batch_max;
            offset_of_max = match (&p.stats, compressed) {
                (Some(st), true) => base + st.max_timestamp_index.unwrap_or(0) as i64,
                _ => base + count - 1,
            };
        }
        next = base + count;
    }
    let last = next - 1;
    if opts.log_append_time {
        max_ts = opts.now_ms;
        offset_of_max = if compressed { opts.base_offset } else { last };
    } else if !compressed {
        offset_of_max = last;
    }
    info.max_timestamp = max_ts;
    info.offset_of_max_timestamp = offset_of_max;
    info.valid_bytes = buf.len();
    info.summarize();
    Ok(info)
}

/// The records of a refused batch, each with why, as Kafka's LogValidator
/// names them (KIP-467): per record, a missing key on a compacted topic, else
/// a CreateTime timestamp outside `[now - before_max, now + after_max]`.
/// Messages name no partition; the caller knows it. Returns the error to raise
/// (or the batch's own error if it fails to decode).
fn refused_records(
    buf: &[u8],
    c: &CheckedHeader,
    position: u64,
    opts: &AssignOptions,
    check_timestamps: bool,
    (limit, scratch): (usize, &mut Vec<u8>),
) -> Result<Error> {
    let h = &c.header;
    let now = opts.now_ms;
    // Kafka's bounds as it prints them (Java's long arithmetic wraps).
    let lower = now.wrapping_sub(opts.timestamp_before_max_ms);
    let upper = now.wrapping_add(opts.timestamp_after_max_ms);
    let mut errors: Vec<(i32, String)> = Vec::new();
    let mut timestamp = false;
    let visit = |i: usize, s: crate::records::RecordShape| {
        if opts.require_keys && s.key_len < 0 {
            errors.push((
                i as i32,
                "Compacted topic cannot accept message without key".to_string(),
            ));
        } else if check_timestamps {
            let ts = h.base_timestamp.wrapping_add(s.timestamp_delta);
            let late = now.saturating_sub(ts) > opts.timestamp_before_max_ms;
            let early = ts.saturating_sub(now) > opts.timestamp_after_max_ms;
            if ts != batch::NO_TIMESTAMP && (late || early) {
                timestamp = true;
                errors.push((
                    i as i32,
                    format!(
                        "Timestamp {ts} of message with offset {} is out of range. \
                         The timestamp should be within [{lower}, {upper}]",
                        h.base_offset.wrapping_add(s.offset_delta as i64)
                    ),
                ));
            }
        }
        Ok(())
    };
    let section = &buf[RECORDS_OFFSET..c.size];
    let count = h.records_count as usize;
    if h.compression_codec() == compression::NONE {
        walk_records(section, count, position, visit)?;
    } else {
        let mut dec = compression::Decoder::new(h.compression_codec(), section, limit)
            .map_err(|e| compression::at_position(e, position))?;
        walk_records_stream(&mut dec, count, position, scratch, visit)
            .map_err(|e| compression::at_position(e, position))?;
    }
    Ok(Error::RecordErrors { timestamp, errors })
}

/// Every check of [`validate_and_assign_offsets`], reading only.
fn plan_assignment(buf: &[u8], opts: &AssignOptions) -> Result<Vec<Plan>> {
    let lower_finite = opts.timestamp_before_max_ms != i64::MAX;
    let upper_finite = opts.timestamp_after_max_ms != i64::MAX;
    let lower = opts.now_ms.saturating_sub(opts.timestamp_before_max_ms);
    let upper = opts.now_ms.saturating_add(opts.timestamp_after_max_ms);
    let check_timestamps = !opts.log_append_time && (lower_finite || upper_finite);

    // every record of a client's compressed batch is read (Kafka's
    // LogValidator): junk with a right CRC is refused, not stored
    let limit = opts
        .max_decompressed_size
        .min(compression::MAX_DECOMPRESSED_SIZE);
    let mut scratch = Vec::new();
    let mut plans: Vec<Plan> = Vec::with_capacity(1);
    let mut at = 0usize;
    while at < buf.len() {
        let rest = &buf[at..];
        let position = at as u64;
        if rest.len() <= MAGIC_OFFSET {
            return Err(Error::corrupt(
                position,
                format!("{} bytes left, too few for a batch", rest.len()),
            ));
        }
        let magic = rest[MAGIC_OFFSET] as i8;
        if magic != MAGIC_V2 {
            return Err(Error::InvalidRecord(format!(
                "batch at {position} has magic {magic}; only magic 2 is assigned in place \
                 (convert legacy message sets with convert_legacy_to_v2)"
            )));
        }
        let c = check_v2_header(rest, position, opts.max_batch_size)?;
        let h = &c.header;
        let codec = h.compression_codec();
        if !plans.is_empty()
            && (codec != compression::NONE
                || plans[0].c.header.compression_codec() != compression::NONE)
        {
            return Err(Error::InvalidRecord(
                "Compressed outer record has more than one batch".into(),
            ));
        }
        check_client_header(h, position)?;
        let stats = record_stats(rest, &c, position, Some((limit, &mut scratch)))?;
        if let Some(st) = &stats {
            if !st.sequential_offsets {
                return Err(Error::InvalidRecord(format!(
                    "record offset deltas of the batch at {position} are not 0..{}",
                    st.count.saturating_sub(1)
                )));
            }
            let keyless = opts.require_keys && st.first_keyless.is_some();
            let out_of_range = check_timestamps
                && st.count > 0
                && ((st.min_timestamp != i64::MAX && st.min_timestamp < lower)
                    || st.max_timestamp > upper);
            if keyless || out_of_range {
                // Only a refused batch is walked a second time, to name
                // each refused record (the client fails those alone).
                return Err(refused_records(
                    rest,
                    &c,
                    position,
                    opts,
                    check_timestamps,
                    (limit, &mut scratch),
                )?);
            }
        }
        at += c.size;
        plans.push(Plan {
            at: at - c.size,
            c,
            stats,
        });
    }
    Ok(plans)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::tests::sample_records;
    use crate::records::{build_batch, encode_record, BuildOptions, BuildRecord};

    fn batch_with(n: usize, codec: u8) -> Vec<u8> {
        build_batch(
            &sample_records(n, 40),
            &BuildOptions {
                compression: codec,
                ..Default::default()
            },
        )
        .unwrap()
    }

    fn opts() -> ValidationOptions {
        ValidationOptions::default()
    }

    fn corrupt_at(r: Result<impl std::fmt::Debug>, pos: u64) -> String {
        match r {
            Err(Error::CorruptRecord { position, reason }) => {
                assert_eq!(position, pos, "{reason}");
                reason
            }
            other => panic!("expected CorruptRecord, got {other:?}"),
        }
    }

    /// Rewrite the CRC so that only the intended corruption is seen.
    fn fix_crc(b: &mut [u8]) {
        let crc = batch::compute_crc(b);
        batch::write_u32(b, batch::CRC_OFFSET, crc);
    }

    /// `b` with the attribute bits of `mask` set, its CRC fixed.
    fn with_attributes(b: &[u8], mask: i16) -> Vec<u8> {
        let mut out = b.to_vec();
        let attrs = batch::read_i16(&out, ATTRIBUTES_OFFSET) | mask;
        out[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attrs.to_be_bytes());
        fix_crc(&mut out);
        out
    }

    #[test]
    fn valid_batches_pass_for_every_codec() {
        for codec in 0..=4u8 {
            let b = batch_with(20, codec);
            let h = validate_batch(
                &b,
                0,
                &ValidationOptions {
                    deep: true,
                    ..opts()
                },
            )
            .unwrap();
            assert_eq!(h.records_count, 20);
            let m = validate_any(&b, 7, &opts()).unwrap();
            assert_eq!((m.position, m.size, m.compression), (7, b.len(), codec));
        }
    }

    #[test]
    fn every_flipped_byte_in_the_checksummed_region_is_a_crc_error() {
        let b = batch_with(5, 0);
        for i in ATTRIBUTES_OFFSET..b.len() {
            let mut bad = b.clone();
            bad[i] ^= 0x10;
            let reason = corrupt_at(validate_batch(&bad, 3, &opts()), 3);
            assert!(reason.contains("CRC32C"), "byte {i}: {reason}");
        }
    }

    #[test]
    fn truncated_and_bad_lengths() {
        let b = batch_with(5, 0);
        corrupt_at(validate_batch(&b[..b.len() - 1], 0, &opts()), 0);
        corrupt_at(validate_batch(&b[..30], 0, &opts()), 0);
        let mut short = b.clone();
        batch::write_i32(&mut short, batch::LENGTH_OFFSET, 10);
        corrupt_at(validate_batch(&short, 0, &opts()), 0);
        let mut long = b.clone();
        batch::write_i32(
            &mut long,
            batch::LENGTH_OFFSET,
            (b.len() - LOG_OVERHEAD + 1) as i32,
        );
        corrupt_at(validate_batch(&long, 0, &opts()), 0);
        assert!(matches!(
            validate_batch(
                &b,
                0,
                &ValidationOptions {
                    max_batch_size: b.len() - 1,
                    ..opts()
                }
            ),
            Err(Error::MessageTooLarge { .. })
        ));
        let mut magic = b.clone();
        magic[MAGIC_OFFSET] = 3;
        corrupt_at(validate_any(&magic, 0, &opts()), 0);
    }

    #[test]
    fn bad_counts() {
        let b = batch_with(5, 0);
        // more records claimed than the offset delta allows
        let mut too_many = b.clone();
        batch::write_i32(&mut too_many, batch::RECORDS_COUNT_OFFSET, 6);
        fix_crc(&mut too_many);
        assert!(corrupt_at(validate_batch(&too_many, 0, &opts()), 0).contains("exceeds"));
        // fewer claimed than present: bytes left after the last record
        let mut too_few = b.clone();
        batch::write_i32(&mut too_few, batch::RECORDS_COUNT_OFFSET, 4);
        fix_crc(&mut too_few);
        assert!(corrupt_at(validate_batch(&too_few, 0, &opts()), 0).contains("batch end"));
        // more claimed than present (delta allows it)
        let mut missing = b.clone();
        batch::write_i32(&mut missing, batch::RECORDS_COUNT_OFFSET, 6);
        batch::write_i32(&mut missing, batch::LAST_OFFSET_DELTA_OFFSET, 5);
        fix_crc(&mut missing);
        corrupt_at(validate_batch(&missing, 0, &opts()), 0);
        let mut negative = b.clone();
        batch::write_i32(&mut negative, batch::RECORDS_COUNT_OFFSET, -1);
        fix_crc(&mut negative);
        corrupt_at(validate_batch(&negative, 0, &opts()), 0);
        // compaction leaves count < delta + 1: fine when the deltas fit
        let mut compacted = b.clone();
        batch::write_i32(&mut compacted, batch::LAST_OFFSET_DELTA_OFFSET, 9);
        fix_crc(&mut compacted);
        validate_batch(&compacted, 0, &opts()).unwrap();
    }

    #[test]
    fn bad_record_framing() {
        let mut b = batch_with(3, 0);
        // first record's length varint (1 byte for small records? use a tiny record set)
        let rec = BuildRecord {
            key: Some(b"k".to_vec()),
            value: Some(b"v".to_vec()),
            headers: vec![],
            timestamp: 0,
        };
        let mut section = Vec::new();
        encode_record(&mut section, 0, 0, &rec).unwrap();
        encode_record(&mut section, 1, 0, &rec).unwrap();
        b.truncate(RECORDS_OFFSET);
        b.extend_from_slice(&section);
        batch::write_i32(&mut b, batch::RECORDS_COUNT_OFFSET, 2);
        batch::write_i32(&mut b, batch::LAST_OFFSET_DELTA_OFFSET, 1);
        let len = (b.len() - LOG_OVERHEAD) as i32;
        batch::write_i32(&mut b, batch::LENGTH_OFFSET, len);
        fix_crc(&mut b);
        validate_batch(&b, 0, &opts()).unwrap();

        // record length one byte longer: the fields no longer fill it
        let mut longer = b.clone();
        longer[RECORDS_OFFSET] += 2;
        fix_crc(&mut longer);
        assert!(corrupt_at(validate_batch(&longer, 0, &opts()), 0).contains("record 0"));
        // a continuation bit on the last byte: varint runs off the end
        let mut varint = b.clone();
        let last = varint.len() - 1;
        varint[last] |= 0x80;
        fix_crc(&mut varint);
        corrupt_at(validate_batch(&varint, 0, &opts()), 0);
        // offset deltas out of order
        let mut order = b.clone();
        let second = RECORDS_OFFSET + section.len() / 2;
        order[second + 3] = 0; // offset delta of the second record → 0
        fix_crc(&mut order);
        assert!(corrupt_at(validate_batch(&order, 0, &opts()), 0).contains("increase"));
    }

    #[test]
    fn compressed_garbage_only_found_when_deep() {
        let mut b = batch_with(10, 1);
        let n = b.len();
        b[n - 12] ^= 0xff; // gzip trailer CRC
        fix_crc(&mut b);
        validate_batch(&b, 0, &opts()).unwrap();
        corrupt_at(
            validate_batch(
                &b,
                4,
                &ValidationOptions {
                    deep: true,
                    ..opts()
                },
            ),
            4,
        );
    }

    #[test]
    fn analyze_reads_every_batch_and_stops_at_a_torn_tail() {
        let mut set = Vec::new();
        let mut b1 = batch_with(3, 0);
        batch::write_i64(&mut b1, 0, 10);
        let mut b2 = batch_with(4, 3);
        batch::write_i64(&mut b2, 0, 13);
        set.extend_from_slice(&b1);
        set.extend_from_slice(&b2);
        let info = analyze_records(&set, &opts()).unwrap();
        assert_eq!(
            (
                info.first_offset,
                info.last_offset,
                info.num_records,
                info.num_batches
            ),
            (10, 16, 7, 2)
        );
        assert_eq!(info.valid_bytes, set.len());
        assert_eq!(info.batches[1].position, b1.len() as u64);
        let mut torn = set.clone();
        torn.extend_from_slice(&b1[..40]);
        let info = analyze_records(&torn, &opts()).unwrap();
        assert_eq!((info.valid_bytes, info.num_batches), (set.len(), 2));
        let mut bad = set.clone();
        bad[b1.len() + 30] ^= 1;
        corrupt_at(analyze_records(&bad, &opts()), b1.len() as u64);
        assert!(matches!(
            analyze_records(
                &set,
                &ValidationOptions {
                    max_batch_size: 100,
                    ..opts()
                }
            ),
            Err(Error::MessageTooLarge { .. })
        ));
        assert_eq!(analyze_records(&[], &opts()).unwrap().num_batches, 0);
    }

    fn leader() -> AssignOptions {
        AssignOptions {
            base_offset: 500,
            partition_leader_epoch: 7,
            now_ms: 1_700_000_000_000,
            max_batch_size: usize::MAX,
            ..Default::default()
        }
    }

    #[test]
    fn assignment_writes_offsets_epoch_and_crc_in_place() {
        for codec in 0..=4u8 {
            let input = sample_records(30, 20);
            let mut b = build_batch(
                &input,
                &BuildOptions {
                    compression: codec,
                    ..Default::default()
                },
            )
            .unwrap();
            let info = validate_and_assign_offsets(&mut b, &leader()).unwrap();
            let h = validate_batch(
                &b,
                0,
                &ValidationOptions {
                    deep: true,
                    ..opts()
                },
            )
            .unwrap();
            assert_eq!(
                (h.base_offset, h.partition_leader_epoch, h.timestamp_type()),
                (500, 7, 0)
            );
            assert_eq!(
                (info.first_offset, info.last_offset, info.num_records),
                (500, 529, 30)
            );
            let max = input.iter().map(|r| r.timestamp).max().unwrap();
            assert_eq!(info.max_timestamp, max);
            let decoded = decode_batch_records(&b).unwrap();
            assert_eq!(decoded[0].offset, 500);
            if codec == 0 {
                assert_eq!(info.offset_of_max_timestamp, 529);
            } else {
                // every compressed batch from a client is read: the first
                // record holding the max timestamp, as Kafka's LogValidator
                let first = input.iter().position(|r| r.timestamp == max).unwrap();
                assert_eq!(info.offset_of_max_timestamp, 500 + first as i64);
            }
            assert_eq!(info.batches[0].crc, h.crc);
        }
    }

    #[test]
    fn log_append_time_sets_max_timestamp_and_bit() {
        for codec in [0u8, 2] {
            let mut b = batch_with(4, codec);
            let o = AssignOptions {
                log_append_time: true,
                ..leader()
            };
            let info = validate_and_assign_offsets(&mut b, &o).unwrap();
            let h = validate_batch(&b, 0, &opts()).unwrap();
            assert_eq!((h.timestamp_type(), h.max_timestamp), (1, o.now_ms));
            assert_eq!(info.max_timestamp, o.now_ms);
            let expected = if codec == 0 { 503 } else { 500 };
            assert_eq!(info.offset_of_max_timestamp, expected);
            assert!(decode_batch_records(&b)
                .unwrap()
                .iter()
                .all(|r| r.timestamp == o.now_ms));
        }
    }

    #[test]
    fn create_time_max_timestamp_is_recomputed_for_uncompressed() {
        let mut b = batch_with(6, 0);
        batch::write_i64(&mut b, batch::MAX_TIMESTAMP_OFFSET, 1);
        fix_crc(&mut b);
        let info = validate_and_assign_offsets(&mut b, &leader()).unwrap();
        let want = sample_records(6, 40)
            .iter()
            .map(|r| r.timestamp)
            .max()
            .unwrap();
        assert_eq!(BatchHeader::parse(&b, 0).unwrap().max_timestamp, want);
        assert_eq!(info.max_timestamp, want);
        validate_batch(&b, 0, &opts()).unwrap();
    }

    #[test]
    fn compressed_with_decompression_reports_the_record_of_max_timestamp() {
        let input = sample_records(10, 5);
        let mut b = build_batch(
            &input,
            &BuildOptions {
                compression: 4,
                ..Default::default()
            },
        )
        .unwrap();
        let o = AssignOptions {
            require_keys: false,
            timestamp_before_max_ms: i64::MAX / 2,
            ..leader()
        };
        let info = validate_and_assign_offsets(&mut b, &o).unwrap();
        let max = input.iter().map(|r| r.timestamp).max().unwrap();
        let idx = input.iter().position(|r| r.timestamp == max).unwrap();
        assert_eq!(info.offset_of_max_timestamp, 500 + idx as i64);
    }

    fn refused(b: &[u8], o: &AssignOptions) -> Error {
        let mut copy = b.to_vec();
        let e = validate_and_assign_offsets(&mut copy, o).unwrap_err();
        assert_eq!(copy, b, "nothing written on failure");
        e
    }

    #[test]
    fn client_rules() {
        let good = batch_with(5, 0);
        let mut two = good.clone();
        two.extend_from_slice(&good);
        // two uncompressed batches are fine
        let mut ok = two.clone();
        let info = validate_and_assign_offsets(&mut ok, &leader()).unwrap();
        assert_eq!((info.num_batches, info.last_offset), (2, 509));
        assert_eq!(
            BatchHeader::parse(&ok[good.len()..], 0)
                .unwrap()
                .base_offset,
            505
        );
        // a torn second batch: refused, first batch untouched
        assert!(matches!(
            refused(&two[..two.len() - 1], &leader()),
            Error::CorruptRecord { .. }
        ));

        let c = batch_with(5, 1);
        let mut cc = c.clone();
        cc.extend_from_slice(&good);
        assert!(
            matches!(refused(&cc, &leader()), Error::InvalidRecord(m) if m.contains("more than one batch"))
        );

        let control = with_attributes(&good, batch::CONTROL_FLAG_MASK);
        assert!(matches!(
            refused(&control, &leader()),
            Error::InvalidRecord(_)
        ));

        let mut seq = good.clone();
        batch::write_i64(&mut seq, batch::PRODUCER_ID_OFFSET, 42);
        fix_crc(&mut seq);
        assert!(
            matches!(refused(&seq, &leader()), Error::InvalidRecord(m) if m.contains("sequence"))
        );

        let mut count = good.clone();
        batch::write_i32(&mut count, batch::LAST_OFFSET_DELTA_OFFSET, 9);
        fix_crc(&mut count);
        assert!(
            matches!(refused(&count, &leader()), Error::InvalidRecord(m) if m.contains("inconsistent"))
        );

        let mut base = good.clone();
        batch::write_i64(&mut base, 0, 3);
        assert!(matches!(refused(&base, &leader()), Error::InvalidRecord(_)));

        assert!(matches!(
            refused(
                &good,
                &AssignOptions {
                    max_batch_size: good.len() - 1,
                    ..leader()
                }
            ),
            Error::MessageTooLarge { .. }
        ));

        let lat = with_attributes(&good, batch::TIMESTAMP_TYPE_MASK);
        assert!(matches!(
            refused(&lat, &leader()),
            Error::InvalidTimestamp(_)
        ));

        let mut flipped = good.clone();
        flipped[70] ^= 4;
        assert!(matches!(
            refused(&flipped, &leader()),
            Error::CorruptRecord { .. }
        ));

        let legacy = crate::legacy::build_message(0, 1, 0, 5, None, Some(b"v"));
        assert!(matches!(
            refused(&legacy, &leader()),
            Error::InvalidRecord(_)
        ));
    }

    #[test]
    fn offset_deltas_must_run_from_zero() {
        let rec = BuildRecord {
            key: Some(b"k".to_vec()),
            value: None,
            headers: vec![],
            timestamp: 5,
        };
        let mut section = Vec::new();
        encode_record(&mut section, 0, 0, &rec).unwrap();
        encode_record(&mut section, 2, 0, &rec).unwrap();
        let mut b = build_batch(&[rec.clone(), rec], &BuildOptions::default()).unwrap();
        b.truncate(RECORDS_OFFSET);
        b.extend_from_slice(&section);
        let len = (b.len() - LOG_OVERHEAD) as i32;
        batch::write_i32(&mut b, batch::LENGTH_OFFSET, len);
        batch::write_i32(&mut b, batch::LAST_OFFSET_DELTA_OFFSET, 1);
        fix_crc(&mut b);
        assert!(matches!(refused(&b, &leader()), Error::InvalidRecord(m) if m.contains("deltas")));
    }

    /// (timestamp?, [(index, message)]) of a batch refused for its records.
    fn record_errors(e: Error) -> (bool, Vec<(i32, String)>) {
        match e {
            Error::RecordErrors { timestamp, errors } => (timestamp, errors),
            other => panic!("expected RecordErrors, got {other:?}"),
        }
    }

    fn indexes(errors: &[(i32, String)]) -> Vec<i32> {
        errors.iter().map(|e| e.0).collect()
    }

    #[test]
    fn keys_and_timestamps() {
        let keys = AssignOptions {
            require_keys: true,
            ..leader()
        };
        for codec in [0u8, 2] {
            // records 2, 5 and 8 have no key: each is named, the others not
            let (ts, errors) = record_errors(refused(&batch_with(9, codec), &keys));
            assert!(!ts);
            assert_eq!(indexes(&errors), vec![2, 5, 8]);
            assert!(errors.iter().all(|e| e.1.contains("without key")));
        }
        // records are 1_700_000_000_000 + [-5, -1, 3, -4, 0, 4, -3, 1, 5]
        let future = AssignOptions {
            now_ms: 1_700_000_000_000,
            timestamp_after_max_ms: 0,
            ..leader()
        };
        for codec in [0u8, 3] {
            let (ts, errors) = record_errors(refused(&batch_with(9, codec), &future));
            assert!(ts);
            assert_eq!(indexes(&errors), vec![2, 5, 7, 8]);
            assert_eq!(
                errors[0].1,
                "Timestamp 1700000000003 of message with offset 2 is out of range. \
                 The timestamp should be within [-9223370336854775807, 1700000000000]"
            );
            // a missing key is the record's error before its timestamp
            let both = AssignOptions {
                require_keys: true,
                ..future
            };
            let (ts, errors) = record_errors(refused(&batch_with(9, codec), &both));
            assert!(ts);
            assert_eq!(indexes(&errors), vec![2, 5, 7, 8]);
            assert!(errors[0].1.contains("without key") && errors[2].1.contains("Timestamp"));
        }
        // nothing is rewritten in a refused batch
        let mut b = batch_with(9, 0);
        let before = b.clone();
        assert!(validate_and_assign_offsets(&mut b, &keys).is_err());
        assert_eq!(b, before);
        let all_keys = build_batch(
            &sample_records(2, 3),
            &BuildOptions {
                compression: 2,
                ..Default::default()
            },
        )
        .unwrap();
        let mut ok = all_keys.clone();
        validate_and_assign_offsets(
            &mut ok,
            &AssignOptions {
                require_keys: true,
                ..leader()
            },
        )
        .unwrap();

        // records are around 1_700_000_000_000 ± 5
        let late = AssignOptions {
            now_ms: 1_600_000_000_000,
            timestamp_after_max_ms: 1000,
            ..leader()
        };
        for codec in [0u8, 3] {
            let (ts, errors) = record_errors(refused(&batch_with(3, codec), &late));
            assert!(ts);
            assert_eq!(indexes(&errors), vec![0, 1, 2]);
        }
        let early = AssignOptions {
            now_ms: 1_800_000_000_000,
            timestamp_before_max_ms: 1000,
            ..leader()
        };
        for codec in [0u8, 3] {
            let (ts, errors) = record_errors(refused(&batch_with(3, codec), &early));
            assert!(ts);
            assert_eq!(indexes(&errors), vec![0, 1, 2]);
        }
        // under LogAppendTime timestamps are not checked
        let mut b = batch_with(3, 0);
        validate_and_assign_offsets(
            &mut b,
            &AssignOptions {
                log_append_time: true,
                ..early
            },
        )
        .unwrap();
        // within bounds
        let mut b = batch_with(3, 1);
        let near = AssignOptions {
            timestamp_before_max_ms: 60_000,
            timestamp_after_max_ms: 60_000,
            ..leader()
        };
        validate_and_assign_offsets(&mut b, &near).unwrap();
    }

    /// `section` as the records of a one-batch client request of `count`
    /// records compressed with `codec`, CRC right.
    fn with_section(codec: u8, section: &[u8], count: i32) -> Vec<u8> {
        let mut b = batch_with(1, 0);
        b.truncate(RECORDS_OFFSET);
        b.extend_from_slice(section);
        let len = (b.len() - LOG_OVERHEAD) as i32;
        batch::write_i32(&mut b, batch::LENGTH_OFFSET, len);
        b[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&(codec as i16).to_be_bytes());
        batch::write_i32(&mut b, batch::LAST_OFFSET_DELTA_OFFSET, count - 1);
        batch::write_i32(&mut b, batch::RECORDS_COUNT_OFFSET, count);
        fix_crc(&mut b);
        b
    }

    fn records_section(n: usize, value_len: usize) -> Vec<u8> {
        let b = build_batch(&sample_records(n, value_len), &BuildOptions::default()).unwrap();
        b[RECORDS_OFFSET..].to_vec()
    }

    #[test]
    fn compressed_junk_with_a_right_crc_is_refused_in_every_codec() {
        let junk: Vec<u8> = (0..300).map(|i| ((i * 37 + 11) % 251) as u8).collect();
        for codec in 1..=4u8 {
            for section in [junk.clone(), compression::compress(codec, &junk).unwrap()] {
                let b = with_section(codec, &section, 3);
                corrupt_at(validate_and_assign_offsets(&mut b.clone(), &leader()), 0);
                corrupt_at(
                    validate_batch(
                        &b,
                        9,
                        &ValidationOptions {
                            deep: true,
                            ..opts()
                        },
                    ),
                    9,
                );
            }
            let good = records_section(3, 10);
            let c = compression::compress(codec, &good).unwrap();
            // the header's count must be the records'
            for wrong in [2, 4] {
                let b = with_section(codec, &c, wrong);
                corrupt_at(validate_and_assign_offsets(&mut b.clone(), &leader()), 0);
            }
            let mut ok = with_section(codec, &c, 3);
            validate_and_assign_offsets(&mut ok, &leader()).unwrap();
            // a record cut by the stream's end, and bytes after the last record
            let c = compression::compress(codec, &good[..good.len() - 1]).unwrap();
            corrupt_at(
                validate_and_assign_offsets(&mut with_section(codec, &c, 3), &leader()),
                0,
            );
            let mut trailing = good.clone();
            trailing.push(0);
            let c = compression::compress(codec, &trailing).unwrap();
            corrupt_at(
                validate_and_assign_offsets(&mut with_section(codec, &c, 3), &leader()),
                0,
            );
        }
    }

    #[test]
    fn streaming_walk_handles_records_larger_than_a_chunk() {
        // records of 150 KiB and of a few bytes: the window grows and slides
        let mut input = sample_records(6, 150 * 1024);
        input.extend(sample_records(2000, 3));
        for codec in 1..=4u8 {
            let mut b = build_batch(
                &input,
                &BuildOptions {
                    compression: codec,
                    ..Default::default()
                },
            )
            .unwrap();
            let info = validate_and_assign_offsets(&mut b, &leader()).unwrap();
            assert_eq!(info.num_records, input.len() as i64);
            assert_eq!(decode_batch_records(&b).unwrap().len(), input.len());
        }
    }

    #[test]
    fn records_decompressing_past_the_limit_are_too_large() {
        // one record of 4 MiB of zeros: well framed, but past a 1 MiB limit
        let rec = BuildRecord {
            key: Some(b"k".to_vec()),
            value: Some(vec![0; 4 << 20]),
            headers: vec![],
            timestamp: 1_700_000_000_000,
        };
        for codec in 1..=4u8 {
            let b = build_batch(
                std::slice::from_ref(&rec),
                &BuildOptions {
                    compression: codec,
                    ..Default::default()
                },
            )
            .unwrap();
            let small = AssignOptions {
                max_decompressed_size: 1 << 20,
                ..leader()
            };
            assert!(matches!(
                refused(&b, &small),
                Error::RecordsTooLarge { max } if max == 1 << 20
            ));
            validate_and_assign_offsets(&mut b.clone(), &leader()).unwrap();
        }
        // a zstd frame of RLE zeros claiming 1 GiB: refused at its first record
        let bomb = crate::compression::tests::zstd_rle_bomb(8192, 0);
        corrupt_at(
            validate_and_assign_offsets(&mut with_section(4, &bomb, 1), &leader()),
            0,
        );
        // the same of 0x02 bytes: records of length 1 that never frame
        let bomb = crate::compression::tests::zstd_rle_bomb(8192, 2);
        corrupt_at(
            validate_and_assign_offsets(&mut with_section(4, &bomb, 1), &leader()),
            0,
        );
    }

    #[test]
    fn an_empty_batch_with_codec_bits_reads_as_empty() {
        for codec in 1..=4u8 {
            let mut b = batch_with(1, 0);
            b.truncate(RECORDS_OFFSET);
            let len = (b.len() - LOG_OVERHEAD) as i32;
            batch::write_i32(&mut b, batch::LENGTH_OFFSET, len);
            b[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2]
                .copy_from_slice(&(codec as i16).to_be_bytes());
            batch::write_i32(&mut b, batch::RECORDS_COUNT_OFFSET, 0);
            fix_crc(&mut b);
            validate_batch(
                &b,
                0,
                &ValidationOptions {
                    deep: true,
                    ..opts()
                },
            )
            .unwrap();
            assert!(decode_batch_records(&b).unwrap().is_empty());
        }
    }
}
