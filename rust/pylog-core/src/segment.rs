//! File-level work over a segment's `.log`: recovery (validate every batch,
//! rebuild both indexes, find the valid prefix), verification scans, header
//! walks, and the two searches a read starts with (offset → batch position,
//! timestamp → first record at or after it).
//!
//! Recovery (the broker's own, before it serves the log) maps the file
//! read-only and walks it in place (CRC32C runs on the mapped pages, no
//! copy). Verification scans and header walks — what tools run against the
//! segments of a live broker, which may truncate a file meanwhile — use
//! positioned reads (`pread`) into a window buffer: a file that shrinks under
//! them ends the walk where it now ends, never with SIGBUS as a mapping
//! would. Nothing here writes to the `.log` but one repair in
//! recovery (an empty batch written with codec bits by older cleaners loses
//! them, see [`recover_segment`]); the caller truncates it to `valid_bytes`
//! after a recovery.
//!
//! A scan stops at the first batch that does not validate — torn (the file
//! ends inside it), corrupt (bad framing, CRC, magic), too large, or whose
//! base offset does not exceed the previous batch's last offset (a flipped
//! base offset, which no checksum covers). It reports why and where.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use memmap2::{Advice, Mmap, MmapOptions};

use crate::batch::{
    self, BatchMeta, HEADER_SIZE, LOG_OVERHEAD, MAGIC_OFFSET, MAGIC_V0, MAGIC_V1, MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP,
};
use crate::batch_iterator::complete_prefix;
use crate::error::{Error, Result};
use crate::index::{OffsetIndex, TimeIndex};
use crate::validate::{self, ValidationOptions};

/// What a segment scan or recovery found (mirrors `pylog._native.ScanResult`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanResult {
    /// Bytes of valid batches from the start position; the caller truncates there.
    pub valid_bytes: u64,
    pub batches: u64,
    /// Last offset of the last valid batch; -1 when none.
    pub last_offset: i64,
    /// Greatest batch max timestamp; -1 when none.
    pub max_timestamp: i64,
    /// Last offset of the batch holding `max_timestamp`; -1 when none.
    pub offset_of_max_timestamp: i64,
    /// Why the batch at `error_position` is invalid; None when the scan was clean.
    pub error: Option<String>,
    pub error_position: Option<u64>,
    /// Batches with a producer id, in file order.
    pub producer_batches: Vec<BatchMeta>,
    /// (partition leader epoch, base offset) at each change of epoch (v2 batches).
    pub epochs: Vec<(i32, i64)>,
}

impl Default for ScanResult {
    fn default() -> Self {
        ScanResult {
            valid_bytes: 0,
            batches: 0,
            last_offset: -1,
            max_timestamp: NO_TIMESTAMP,
            offset_of_max_timestamp: -1,
            error: None,
            error_position: None,
            producer_batches: Vec::new(),
            epochs: Vec::new(),
        }
    }
}

/// A read-only view of a whole `.log` file.
enum LogView {
    Mapped(Mmap),
    Empty,
}

impl LogView {
    fn open(path: &Path) -> Result<LogView> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        if len == 0 {
            return Ok(LogView::Empty);
        }
        let len = usize::try_from(len)
            .map_err(|_| Error::Io(io::Error::other("segment too large to map")))?;
        // SAFETY: segments are only appended to or truncated by the storage
        // layer, which does not truncate a file while it is being scanned.
        let map = unsafe { MmapOptions::new().len(len).map(&file)? };
        // Sequential read-ahead; failure to advise is harmless.
        let _ = map.advise(Advice::Sequential);
        Ok(LogView::Mapped(map))
    }

    fn bytes(&self) -> &[u8] {
        match self {
            LogView::Mapped(m) => m,
            LogView::Empty => &[],
        }
    }
}

/// Validate batches of `data[start..end]`, updating `result` and calling
/// `on_batch` after each valid one. Stops at the first invalid batch
/// (recorded in `result`); storage errors and errors of `on_batch` abort the
/// scan. `base` is where `data` starts in the file (positions reported are
/// `base` + position in `data`); `result` may carry an earlier window's walk.
fn walk_valid<F>(
    data: &[u8],
    base: u64,
    start: usize,
    end: usize,
    opts: &ValidationOptions,
    result: &mut ScanResult,
    mut on_batch: F,
) -> Result<()>
where
    F: FnMut(&BatchMeta, &ScanResult) -> Result<()>,
{
    let mut pos = start;
    let mut last_epoch: Option<i32> = result.epochs.last().map(|e| e.0);
    while pos < end {
        let at = base + pos as u64;
        let meta = match validate::validate_any(&data[pos..end], at, opts) {
            Ok(meta) => meta,
            Err(Error::Io(e)) => return Err(Error::Io(e)),
            Err(e) => {
                result.error = Some(e.to_string());
                result.error_position = Some(at);
                break;
            }
        };
        if result.batches > 0 && meta.base_offset <= result.last_offset {
            result.error = Some(format!(
                "batch offsets {}..{} do not follow the previous last offset {}",
                meta.base_offset, meta.last_offset, result.last_offset
            ));
            result.error_position = Some(at);
            break;
        }
        result.batches += 1;
        result.last_offset = meta.last_offset;
        if meta.max_timestamp > result.max_timestamp {
            result.max_timestamp = meta.max_timestamp;
            result.offset_of_max_timestamp = meta.last_offset;
        }
        if meta.magic >= MAGIC_V2 {
            if meta.producer_id >= 0 {
                result.producer_batches.push(meta);
            }
            let epoch = meta.partition_leader_epoch;
            if epoch >= 0 && last_epoch != Some(epoch) {
                result.epochs.push((epoch, meta.base_offset));
                last_epoch = Some(epoch);
            }
        }
        on_batch(&meta, result)?;
        pos += meta.size;
    }
    result.valid_bytes = (pos - start) as u64;
    Ok(())
}

/// Kafka's `LogSegment.recover`: reset both indexes (empty, back to their
/// maximum size), validate every batch from position 0, add an offset-index
/// entry (batch last offset → batch position) and a time-index entry (max
/// timestamp so far and its offset) whenever more than `index_interval_bytes`
/// of batches accumulated since the last entry, and stop at the first invalid
/// batch. At the end the time index receives the segment's max timestamp (as a
/// clean close does) and both indexes are trimmed to their entries; the caller
/// resizes the active segment's indexes back up and truncates the `.log` to
/// `valid_bytes`.
///
/// An empty v2 batch (no records) whose attributes name a codec — what older
/// cleaners kept of a producer's superseded last batch, which no consumer
/// can decompress — is rewritten in place uncompressed (codec bits cleared,
/// CRC32C recomputed; same size).
///
/// IndexOffsetOverflow when a valid batch's last offset does not fit the
/// segment's 32-bit relative offsets (the caller splits the segment, as Kafka).
pub fn recover_segment(
    log_path: impl AsRef<Path>,
    offset_index: &mut OffsetIndex,
    time_index: &mut TimeIndex,
    index_interval_bytes: u64,
    max_batch_size: usize,
) -> Result<ScanResult> {
    offset_index.reset()?;
    time_index.reset()?;
    let view = LogView::open(log_path.as_ref())?;
    let data = view.bytes();
    let opts = ValidationOptions {
        max_batch_size,
        ..Default::default()
    };
    let mut result = ScanResult::default();
    let mut last_index_entry = 0u64;
    let mut compressed_empty: Vec<u64> = Vec::new();
    walk_valid(
        data,
        0,
        0,
        data.len(),
        &opts,
        &mut result,
        |meta, so_far| {
            if is_compressed_empty(meta) {
                compressed_empty.push(meta.position);
            }
            offset_index.relative(meta.last_offset)?;
            if meta.position - last_index_entry > index_interval_bytes {
                offset_index.append(meta.last_offset, meta.position as i64)?;
                time_index.maybe_append(
                    so_far.max_timestamp,
                    so_far.offset_of_max_timestamp,
                    false,
                )?;
                last_index_entry = meta.position;
            }
            Ok(())
        },
    )?;
    if !compressed_empty.is_empty() {
        uncompress_empty_batches(log_path.as_ref(), data, &compressed_empty)?;
    }
    time_index.maybe_append(result.max_timestamp, result.offset_of_max_timestamp, true)?;
    offset_index.trim_to_valid_size()?;
    time_index.trim_to_valid_size()?;
    Ok(result)
}

/// A v2 batch with no records whose attributes name a codec: what older
/// cleaners wrote for a producer's last batch. Consumers fail to decompress
/// its 0-byte payload.
fn is_compressed_empty(meta: &BatchMeta) -> bool {
    meta.magic == MAGIC_V2
        && meta.records_count == 0
        && meta.compression != 0
        && meta.size == HEADER_SIZE
}

/// Rewrite each empty batch at `positions` of the `.log` (whose bytes are
/// `data`) uncompressed: codec bits cleared, CRC32C recomputed, in place
/// (same size), synced.
fn uncompress_empty_batches(path: &Path, data: &[u8], positions: &[u64]) -> Result<()> {
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    for &pos in positions {
        let mut header = [0u8; HEADER_SIZE];
        header.copy_from_slice(&data[pos as usize..pos as usize + HEADER_SIZE]);
        let attributes =
            batch::read_i16(&header, batch::ATTRIBUTES_OFFSET) & !batch::COMPRESSION_CODEC_MASK;
        header[batch::ATTRIBUTES_OFFSET..batch::ATTRIBUTES_OFFSET + 2]
            .copy_from_slice(&attributes.to_be_bytes());
        let crc = batch::compute_crc(&header);
        batch::write_u32(&mut header, batch::CRC_OFFSET, crc);
        file.write_all_at(
            &header[batch::CRC_OFFSET..batch::RECORDS_OFFSET],
            pos + batch::CRC_OFFSET as u64,
        )?;
    }
    file.sync_data()?;
    Ok(())
}

/// Validate the batches of `[start_position, end_position)` (end defaults to,
/// and is capped at, the file length) without touching any index.
pub fn scan_segment(
    log_path: impl AsRef<Path>,
    start_position: u64,
    end_position: Option<u64>,
    deep: bool,
    max_batch_size: usize,
) -> Result<ScanResult> {
    scan_windowed(
        log_path.as_ref(),
        start_position,
        end_position,
        deep,
        max_batch_size,
        SCAN_WINDOW,
    )
}

fn scan_windowed(
    log_path: &Path,
    start_position: u64,
    end_position: Option<u64>,
    deep: bool,
    max_batch_size: usize,
    window: usize,
) -> Result<ScanResult> {
    let file = File::open(log_path)?;
    let len = file.metadata()?.len();
    let mut end = end_position.map_or(len, |e| e.min(len));
    let start = start_position.min(end);
    let opts = ValidationOptions {
        max_batch_size,
        deep,
        ..Default::default()
    };
    let mut result = ScanResult::default();
    let mut buf = Vec::new();
    let mut pos = start;
    let mut valid = 0u64;
    while pos < end {
        let want = (end - pos).min(window.max(LOG_OVERHEAD) as u64) as usize;
        read_at_most(&file, &mut buf, pos, want)?;
        if buf.len() < want {
            end = pos + buf.len() as u64; // the file shrank since: it ends here now
        }
        let mut whole = complete_prefix(&buf);
        if whole == 0 {
            // One batch larger than the window: read it whole if it may be
            // one (else the validator below names what is wrong with it).
            match batch::framed_size(&buf) {
                Some(size) if size <= max_batch_size && pos + size as u64 <= end => {
                    read_at_most(&file, &mut buf, pos, size)?;
                    if buf.len() < size {
                        end = pos + buf.len() as u64;
                    }
                    whole = complete_prefix(&buf);
                }
                _ => {}
            }
        }
        // A torn or corrupt batch: hand the validator what there is, so it
        // reports the error at its position.
        let n = if whole == 0 { buf.len() } else { whole };
        walk_valid(&buf[..n], pos, 0, n, &opts, &mut result, |_, _| Ok(()))?;
        valid += result.valid_bytes;
        if result.error.is_some() || n == 0 {
            break;
        }
        pos += n as u64;
    }
    result.valid_bytes = valid;
    Ok(result)
}

/// Bytes a verification scan reads per positioned read (whole batches of it
/// are validated at a time; a larger batch is read on its own).
const SCAN_WINDOW: usize = 4 * 1024 * 1024;

/// `buf` filled with up to `want` bytes of `file` from `pos`: fewer only where
/// the file ends (it may have been truncated since its length was read).
fn read_at_most(file: &File, buf: &mut Vec<u8>, pos: u64, want: usize) -> io::Result<()> {
    buf.resize(want, 0);
    let mut filled = 0;
    while filled < want {
        match file.read_at(&mut buf[filled..], pos + filled as u64) {
            Ok(0) => break,
            Ok(k) => filled += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    Ok(())
}

// ------------------------------------------------------------------ header walks

/// Bytes read per positioned read in header walks.
const WINDOW: usize = 16 * 1024;

/// Positioned reads through a small window, for walks that only look at
/// batch headers (and the occasional whole batch).
struct HeaderReader<'a> {
    file: &'a File,
    /// Exclusive end of the region walked (capped at the file length).
    end: u64,
    buf: Vec<u8>,
    buf_start: u64,
}

impl<'a> HeaderReader<'a> {
    fn new(file: &'a File, end: Option<u64>) -> Result<HeaderReader<'a>> {
        let len = file.metadata()?.len();
        Ok(HeaderReader {
            file,
            end: end.map_or(len, |e| e.min(len)),
            buf: Vec::with_capacity(WINDOW),
            buf_start: 0,
        })
    }

    /// Up to `want` bytes at `pos` (fewer only where the region ends).
    fn get(&mut self, pos: u64, want: usize) -> io::Result<&[u8]> {
        if pos >= self.end {
            return Ok(&[]);
        }
        let avail = ((self.end - pos) as usize).min(want);
        let buf_end = self.buf_start + self.buf.len() as u64;
        if pos < self.buf_start || pos + avail as u64 > buf_end {
            let n = ((self.end - pos) as usize).min(WINDOW.max(want));
            self.buf.resize(n, 0);
            let mut filled = 0;
            while filled < n {
                match self
                    .file
                    .read_at(&mut self.buf[filled..], pos + filled as u64)
                {
                    Ok(0) => break,
                    Ok(k) => filled += k,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            self.buf.truncate(filled);
            self.buf_start = pos;
        }
        let at = (pos - self.buf_start) as usize;
        let till = (at + avail).min(self.buf.len());
        Ok(&self.buf[at..till])
    }
}

/// The facts of a legacy (magic 0/1) message from its header alone. For a
/// compressed wrapper the base offset and count need decompression, so they
/// are reported here as the wrapper's (last) offset and 1; `read_batch_infos`
/// decompresses wrappers to fill them in.
pub(crate) fn legacy_header_meta(h: &[u8], position: u64, size: usize) -> Option<BatchMeta> {
    let magic = h[MAGIC_OFFSET] as i8;
    let (need, min_size) = if magic == MAGIC_V1 {
        (26, LOG_OVERHEAD + crate::legacy::MIN_SIZE_V1)
    } else {
        (18, LOG_OVERHEAD + crate::legacy::MIN_SIZE_V0)
    };
    if h.len() < need || size < min_size {
        return None;
    }
    let offset = batch::read_i64(h, 0);
    let attributes = h[17] as i16;
    let timestamp = if magic == MAGIC_V1 {
        batch::read_i64(h, 18)
    } else {
        NO_TIMESTAMP
    };
    Some(BatchMeta {
        position,
        size,
        magic,
        base_offset: offset,
        last_offset: offset,
        partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
        crc: batch::read_u32(h, 12),
        compression: (attributes & batch::COMPRESSION_CODEC_MASK) as u8,
        timestamp_type: u8::from(magic == MAGIC_V1 && attributes & batch::TIMESTAMP_TYPE_MASK != 0),
        is_transactional: false,
        is_control: false,
        base_timestamp: timestamp,
        max_timestamp: timestamp,
        producer_id: NO_PRODUCER_ID,
        producer_epoch: NO_PRODUCER_EPOCH,
        base_sequence: NO_SEQUENCE,
        last_sequence: NO_SEQUENCE,
        records_count: 1,
        delete_horizon_ms: NO_TIMESTAMP,
    })
}

/// The header facts of the batch at `pos`, or None at a torn or unreadable
/// tail (fewer bytes than its header or its length, unknown magic, nonsense length).
fn header_at(reader: &mut HeaderReader, pos: u64) -> Result<Option<BatchMeta>> {
    let end = reader.end;
    let h = reader.get(pos, HEADER_SIZE)?;
    if h.len() < LOG_OVERHEAD + 5 {
        return Ok(None);
    }
    let Some(size) = batch::framed_size(h) else {
        return Ok(None);
    };
    if pos + size as u64 > end {
        return Ok(None);
    }
    match h[MAGIC_OFFSET] as i8 {
        MAGIC_V2 => {
            if h.len() < HEADER_SIZE || size < HEADER_SIZE {
                return Ok(None);
            }
            let header = batch::BatchHeader::parse(h, pos)?;
            Ok(Some(BatchMeta::from_header(&header, pos)))
        }
        MAGIC_V0 | MAGIC_V1 => Ok(legacy_header_meta(h, pos, size)),
        _ => Ok(None),
    }
}

/// Up to `max_batches` batch headers from `start_position` (no CRC check),
/// stopping quietly at a torn or unreadable tail; returns them and the
/// position after the last one.
pub fn read_batch_infos(
    log_path: impl AsRef<Path>,
    start_position: u64,
    max_batches: usize,
    end_position: Option<u64>,
) -> Result<(Vec<BatchMeta>, u64)> {
    let file = File::open(log_path.as_ref())?;
    let mut reader = HeaderReader::new(&file, end_position)?;
    let mut out = Vec::new();
    let mut pos = start_position;
    while out.len() < max_batches {
        let Some(mut meta) = header_at(&mut reader, pos)? else {
            break;
        };
        if meta.magic < MAGIC_V2 && meta.compression != 0 {
            // A legacy wrapper's first offset and count are inside its
            // compressed value: read it whole (legacy data is rare).
            let bytes = reader.get(pos, meta.size)?;
            if let Ok(full) =
                crate::legacy::validate_legacy(bytes, pos, &ValidationOptions::default())
            {
                meta = full;
            }
        }
        pos += meta.size as u64;
        out.push(meta);
    }
    Ok((out, pos))
}

/// Kafka's `searchForOffsetWithSize`: the first batch in
/// `[start_position, end_position)` whose last offset is >= `target_offset`,
/// as (last offset, position, size).
pub fn translate_offset(
    log_path: impl AsRef<Path>,
    target_offset: i64,
    start_position: u64,
    end_position: u64,
) -> Result<Option<(i64, u64, usize)>> {
    let file = File::open(log_path.as_ref())?;
    translate_offset_in(&file, target_offset, start_position, end_position)
}

/// [`translate_offset`] in a segment file already open (a fetch reads the
/// segment's own descriptor rather than opening the file by path each time).
pub fn translate_offset_in(
    file: &File,
    target_offset: i64,
    start_position: u64,
    end_position: u64,
) -> Result<Option<(i64, u64, usize)>> {
    let mut reader = HeaderReader::new(file, Some(end_position))?;
    let mut pos = start_position;
    while let Some(meta) = header_at(&mut reader, pos)? {
        if meta.last_offset >= target_offset {
            return Ok(Some((meta.last_offset, pos, meta.size)));
        }
        pos += meta.size as u64;
    }
    Ok(None)
}

/// Kafka's `searchForTimestamp`: the first record at or after
/// `start_position` (before `end_position`) whose timestamp is >= `target`,
/// as (timestamp, offset). Batches are skipped by their max timestamp; the
/// first candidate batch is read whole and its records decoded.
pub fn find_offset_by_timestamp(
    log_path: impl AsRef<Path>,
    target_timestamp: i64,
    start_position: u64,
    end_position: u64,
) -> Result<Option<(i64, i64)>> {
    let file = File::open(log_path.as_ref())?;
    let mut reader = HeaderReader::new(&file, Some(end_position))?;
    let mut pos = start_position;
    while let Some(meta) = header_at(&mut reader, pos)? {
        if meta.max_timestamp >= target_timestamp {
            let bytes = reader.get(pos, meta.size)?;
            let records =
                crate::validate::decode_batch_records(bytes).map_err(|e| e.shifted(pos))?;
            if let Some(r) = records.iter().find(|r| r.timestamp >= target_timestamp) {
                return Ok(Some((r.timestamp, r.offset)));
            }
        }
        pos += meta.size as u64;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{write_i32, write_i64, write_u32};
    use std::fs;
    use tempfile::TempDir;

    fn zigzag(out: &mut Vec<u8>, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        while z >= 0x80 {
            out.push((z as u8) | 0x80);
            z >>= 7;
        }
        out.push(z as u8);
    }

    /// An uncompressed v2 batch of `timestamps.len()` records with values of
    /// `value_size` bytes, CRC set.
    pub(crate) struct Spec {
        base_offset: i64,
        timestamps: Vec<i64>,
        value_size: usize,
        epoch: i32,
        producer_id: i64,
    }

    fn spec(base_offset: i64, timestamps: Vec<i64>) -> Spec {
        Spec {
            base_offset,
            timestamps,
            value_size: 10,
            epoch: 0,
            producer_id: -1,
        }
    }

    fn build(s: &Spec) -> Vec<u8> {
        let base_ts = s.timestamps[0];
        let mut records = Vec::new();
        for (i, ts) in s.timestamps.iter().enumerate() {
            let mut body = vec![0u8];
            zigzag(&mut body, ts - base_ts);
            zigzag(&mut body, i as i64);
            zigzag(&mut body, -1);
            zigzag(&mut body, s.value_size as i64);
            body.extend(std::iter::repeat_n(b'v', s.value_size));
            zigzag(&mut body, 0);
            zigzag(&mut records, body.len() as i64);
            records.extend_from_slice(&body);
        }
        let mut b = vec![0u8; HEADER_SIZE];
        b.extend_from_slice(&records);
        let n = s.timestamps.len() as i32;
        write_i64(&mut b, 0, s.base_offset);
        let len = (b.len() - LOG_OVERHEAD) as i32;
        write_i32(&mut b, 8, len);
        write_i32(&mut b, 12, s.epoch);
        b[16] = 2;
        write_i32(&mut b, 23, n - 1);
        write_i64(&mut b, 27, base_ts);
        write_i64(&mut b, 35, *s.timestamps.iter().max().unwrap());
        write_i64(&mut b, 43, s.producer_id);
        b[51..53].copy_from_slice(&(if s.producer_id >= 0 { 3i16 } else { -1 }).to_be_bytes());
        write_i32(&mut b, 53, if s.producer_id >= 0 { 0 } else { -1 });
        write_i32(&mut b, 57, n);
        let crc = batch::compute_crc(&b);
        write_u32(&mut b, 17, crc);
        b
    }

    type Metas = Vec<(u64, usize, i64, i64)>;
    type Entries = (Vec<(i64, u32)>, Vec<(i64, i64)>);

    /// 100 batches of 5 records (offsets 1000..1499), timestamps rising by
    /// 10 per record except batch 50 which jumps ahead, epoch 1 then 2 from
    /// offset 1300, a producer id on every 10th batch.
    fn sample() -> (Vec<u8>, Metas) {
        let mut log = Vec::new();
        let mut metas = Vec::new();
        for b in 0..100i64 {
            let base = 1000 + b * 5;
            let mut ts: Vec<i64> = (0..5).map(|i| 1_000_000 + (base + i) * 10).collect();
            if b == 50 {
                ts[2] = 9_000_000;
            }
            let s = Spec {
                base_offset: base,
                timestamps: ts.clone(),
                value_size: 40 + (b as usize % 7) * 30,
                epoch: if base >= 1300 { 2 } else { 1 },
                producer_id: if b % 10 == 0 { 77 } else { -1 },
            };
            let bytes = build(&s);
            metas.push((
                log.len() as u64,
                bytes.len(),
                base + 4,
                *ts.iter().max().unwrap(),
            ));
            log.extend_from_slice(&bytes);
        }
        (log, metas)
    }

    fn indexes(dir: &TempDir, base: i64) -> (OffsetIndex, TimeIndex) {
        (
            OffsetIndex::open(dir.path().join("i.index"), base, 1 << 16, true).unwrap(),
            TimeIndex::open(dir.path().join("i.timeindex"), base, 1 << 16, true).unwrap(),
        )
    }

    /// The index entries Kafka's LogSegment.append would have written.
    fn expected_entries(metas: &[(u64, usize, i64, i64)], interval: u64) -> Entries {
        let (mut off, mut time) = (Vec::new(), Vec::new());
        let mut since = 0u64;
        let (mut max_ts, mut max_off) = (-1i64, -1i64);
        for &(pos, size, last, ts) in metas {
            if ts > max_ts {
                max_ts = ts;
                max_off = last;
            }
            if since > interval {
                off.push((last, pos as u32));
                if time.last().is_none_or(|&(t, _)| max_ts > t) {
                    time.push((max_ts, max_off));
                }
                since = 0;
            }
            since += size as u64;
        }
        if time.last().is_none_or(|&(t, _)| max_ts > t) {
            time.push((max_ts, max_off));
        }
        (off, time)
    }

    #[test]
    fn recover_clean_segment_rebuilds_indexes() {
        let dir = TempDir::new().unwrap();
        let (log, metas) = sample();
        let path = dir.path().join("0.log");
        fs::write(&path, &log).unwrap();
        let (mut oi, mut ti) = indexes(&dir, 1000);
        oi.append(1001, 0).unwrap(); // stale content is discarded
        let r = recover_segment(&path, &mut oi, &mut ti, 1024, usize::MAX).unwrap();
        assert_eq!(r.valid_bytes, log.len() as u64);
        assert_eq!(r.batches, 100);
        assert_eq!(r.last_offset, 1499);
        assert_eq!(r.max_timestamp, 9_000_000);
        assert_eq!(r.offset_of_max_timestamp, 1254);
        assert_eq!(r.error, None);
        assert_eq!(r.epochs, vec![(1, 1000), (2, 1300)]);
        assert_eq!(r.producer_batches.len(), 10);
        assert_eq!(r.producer_batches[3].base_offset, 1150);
        assert_eq!(r.producer_batches[3].producer_id, 77);

        let (want_off, want_time) = expected_entries(&metas, 1024);
        assert!(want_off.len() > 10);
        let got_off: Vec<_> = (0..oi.entries())
            .map(|n| oi.entry(n).unwrap().unwrap())
            .collect();
        let got_time: Vec<_> = (0..ti.entries())
            .map(|n| ti.entry(n).unwrap().unwrap())
            .collect();
        assert_eq!(got_off, want_off);
        assert_eq!(got_time, want_time);
        // Trimmed like a cleanly closed segment.
        assert_eq!(fs::metadata(oi.path()).unwrap().len(), oi.size_in_bytes());
        assert_eq!(fs::metadata(ti.path()).unwrap().len(), ti.size_in_bytes());
        oi.sanity_check().unwrap();
        ti.sanity_check().unwrap();

        // Every offset translates through index + log to the batch holding it,
        // by path and in the file already open alike.
        let open = fs::File::open(&path).unwrap();
        for target in 1000..1500 {
            let (_, start) = oi.lookup(target).unwrap();
            let (last, pos, size) = translate_offset(&path, target, start as u64, log.len() as u64)
                .unwrap()
                .unwrap();
            let m = metas.iter().find(|m| m.2 >= target).unwrap();
            assert_eq!((last, pos, size), (m.2, m.0, m.1));
            let found = translate_offset_in(&open, target, start as u64, log.len() as u64);
            assert_eq!(found.unwrap(), Some((last, pos, size)));
        }
        assert_eq!(
            translate_offset(&path, 1500, 0, log.len() as u64).unwrap(),
            None
        );
    }

    #[test]
    fn recover_stops_at_torn_tail_flipped_byte_and_garbage() {
        let dir = TempDir::new().unwrap();
        let (log, metas) = sample();
        let path = dir.path().join("0.log");
        let cut_batch = 60;
        let (pos, size, ..) = metas[cut_batch];

        // Torn in the middle of a batch.
        fs::write(&path, &log[..pos as usize + size / 2]).unwrap();
        let (mut oi, mut ti) = indexes(&dir, 1000);
        let r = recover_segment(&path, &mut oi, &mut ti, 1024, usize::MAX).unwrap();
        assert_eq!(r.valid_bytes, pos);
        assert_eq!(r.batches, cut_batch as u64);
        assert_eq!(r.error_position, Some(pos));
        assert!(r.error.is_some());
        assert!(oi.last_offset() < metas[cut_batch].2);

        // Torn inside the header.
        fs::write(&path, &log[..pos as usize + 7]).unwrap();
        let r = recover_segment(&path, &mut oi, &mut ti, 1024, usize::MAX).unwrap();
        assert_eq!(r.valid_bytes, pos);

        // A flipped byte in the records (CRC mismatch).
        let mut bad = log.clone();
        bad[pos as usize + size - 3] ^= 0x40;
        fs::write(&path, &bad).unwrap();
        let r = recover_segment(&path, &mut oi, &mut ti, 1024, usize::MAX).unwrap();
        assert_eq!((r.valid_bytes, r.error_position), (pos, Some(pos)));
        assert!(r.error.unwrap().contains("CRC"));

        // A flipped base offset (not covered by the CRC) going backwards.
        let mut bad = log.clone();
        bad[pos as usize + 4] ^= 0x10;
        bad[pos as usize] = 0;
        write_i64(&mut bad, pos as usize, 1001);
        fs::write(&path, &bad).unwrap();
        let r = recover_segment(&path, &mut oi, &mut ti, 1024, usize::MAX).unwrap();
        assert_eq!((r.valid_bytes, r.error_position), (pos, Some(pos)));

        // Garbage (and zeros) after the last batch.
        for tail in [
            vec![0u8; 4096],
            vec![0xAB; 100],
            b"not a batch at all".to_vec(),
        ] {
            let mut bad = log.clone();
            bad.extend_from_slice(&tail);
            fs::write(&path, &bad).unwrap();
            let r = recover_segment(&path, &mut oi, &mut ti, 1024, usize::MAX).unwrap();
            assert_eq!(r.valid_bytes, log.len() as u64);
            assert_eq!(r.batches, 100);
            assert_eq!(r.error_position, Some(log.len() as u64));
        }

        // Too large for max_batch_size.
        fs::write(&path, &log).unwrap();
        let r = recover_segment(&path, &mut oi, &mut ti, 1024, 200).unwrap();
        assert!(r.valid_bytes < log.len() as u64);
        assert!(r.error.is_some());
    }

    #[test]
    fn recover_empty_segment() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("0.log");
        fs::write(&path, b"").unwrap();
        let (mut oi, mut ti) = indexes(&dir, 0);
        let r = recover_segment(&path, &mut oi, &mut ti, 4096, usize::MAX).unwrap();
        assert_eq!(r, ScanResult::default());
        assert_eq!((oi.entries(), ti.entries()), (0, 0));
        assert_eq!(fs::metadata(oi.path()).unwrap().len(), 0);
    }

    #[test]
    fn recover_rejects_offsets_beyond_the_segment_range() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("0.log");
        fs::write(&path, build(&spec(i32::MAX as i64 + 10, vec![1, 2]))).unwrap();
        let (mut oi, mut ti) = indexes(&dir, 0);
        assert!(matches!(
            recover_segment(&path, &mut oi, &mut ti, 4096, usize::MAX),
            Err(Error::IndexOffsetOverflow(_))
        ));
    }

    #[test]
    fn scan_in_small_windows_matches_one_window() {
        let dir = TempDir::new().unwrap();
        let (mut log, metas) = sample();
        let path = dir.path().join("0.log");
        fs::write(&path, &log).unwrap();
        let whole = scan_windowed(&path, 0, None, true, usize::MAX, usize::MAX).unwrap();
        // Windows smaller than one batch, of a few batches, and odd sizes.
        for window in [1, 100, 777, 4096] {
            let r = scan_windowed(&path, 0, None, true, usize::MAX, window).unwrap();
            assert_eq!(r, whole, "window {window}");
        }
        assert_eq!((whole.batches, whole.valid_bytes), (100, log.len() as u64));
        assert_eq!(whole.epochs, vec![(1, 1000), (2, 1300)]);
        // A flipped byte is reported at its batch whatever the window.
        let at = metas[37].0 as usize + 70;
        log[at] ^= 0x55;
        fs::write(&path, &log).unwrap();
        for window in [100, 4096, usize::MAX] {
            let r = scan_windowed(&path, 0, None, false, usize::MAX, window).unwrap();
            assert_eq!(
                (r.batches, r.error_position),
                (37, Some(metas[37].0)),
                "window {window}"
            );
            assert_eq!(r.valid_bytes, metas[37].0);
        }
    }

    #[test]
    fn scan_of_a_file_truncated_meanwhile_ends_where_it_now_ends() {
        let dir = TempDir::new().unwrap();
        let (log, metas) = sample();
        let path = dir.path().join("0.log");
        fs::write(&path, &log).unwrap();
        // The region was asked for up to the old end; the file has been cut at a
        // batch boundary (a truncation) and mid-batch (a torn tail) since.
        let old_end = Some(log.len() as u64);
        fs::write(&path, &log[..metas[60].0 as usize]).unwrap();
        let r = scan_windowed(&path, 0, old_end, false, usize::MAX, 1000).unwrap();
        assert_eq!((r.batches, r.valid_bytes, r.error), (60, metas[60].0, None));
        fs::write(&path, &log[..metas[60].0 as usize + 9]).unwrap();
        let r = scan_windowed(&path, 0, old_end, false, usize::MAX, 1000).unwrap();
        assert_eq!((r.batches, r.error_position), (60, Some(metas[60].0)));
    }

    #[test]
    fn scan_segment_ranges() {
        let dir = TempDir::new().unwrap();
        let (log, metas) = sample();
        let path = dir.path().join("0.log");
        fs::write(&path, &log).unwrap();
        let r = scan_segment(&path, 0, None, false, usize::MAX).unwrap();
        assert_eq!(
            (r.batches, r.valid_bytes, r.error.clone()),
            (100, log.len() as u64, None)
        );
        let (p10, p20) = (metas[10].0, metas[20].0);
        let r = scan_segment(&path, p10, Some(p20), true, usize::MAX).unwrap();
        assert_eq!((r.batches, r.valid_bytes), (10, p20 - p10));
        assert_eq!(r.last_offset, metas[19].2);
        // An end inside a batch reports it as torn.
        let r = scan_segment(&path, p10, Some(p20 + 5), false, usize::MAX).unwrap();
        assert_eq!((r.batches, r.error_position), (10, Some(p20)));
        // Positions past the end are an empty, clean scan.
        let r = scan_segment(&path, 1 << 40, None, false, usize::MAX).unwrap();
        assert_eq!((r.batches, r.error), (0, None));
        assert!(matches!(
            scan_segment(dir.path().join("nope.log"), 0, None, false, 1),
            Err(Error::Io(_))
        ));
    }

    #[test]
    fn read_batch_infos_chunks_and_stops_quietly() {
        let dir = TempDir::new().unwrap();
        let (log, metas) = sample();
        let path = dir.path().join("0.log");
        fs::write(&path, &log[..log.len() - 10]).unwrap();
        let mut pos = 0;
        let mut all = Vec::new();
        loop {
            let (infos, next) = read_batch_infos(&path, pos, 7, None).unwrap();
            if infos.is_empty() {
                assert_eq!(next, pos);
                break;
            }
            pos = next;
            all.extend(infos);
        }
        assert_eq!(all.len(), 99); // the last batch is torn
        for (info, m) in all.iter().zip(&metas) {
            assert_eq!(
                (info.position, info.size, info.last_offset),
                (m.0, m.1, m.2)
            );
            assert_eq!(info.max_timestamp, m.3);
        }
        let (infos, next) = read_batch_infos(&path, 0, 1000, Some(metas[3].0)).unwrap();
        assert_eq!((infos.len(), next), (3, metas[3].0));
        let (infos, _) = read_batch_infos(&path, 1, 10, None).unwrap();
        assert!(infos.is_empty() || infos[0].position == 1);
    }

    #[test]
    fn find_offset_by_timestamp_finds_first_record() {
        let dir = TempDir::new().unwrap();
        let (log, metas) = sample();
        let path = dir.path().join("0.log");
        fs::write(&path, &log).unwrap();
        let end = log.len() as u64;
        // Record at offset o has timestamp 1_000_000 + 10*o (except 1252).
        assert_eq!(
            find_offset_by_timestamp(&path, 0, 0, end).unwrap(),
            Some((1_010_000, 1000))
        );
        assert_eq!(
            find_offset_by_timestamp(&path, 1_010_055, 0, end).unwrap(),
            Some((1_010_060, 1006))
        );
        // Batch 50 holds a jump to 9_000_000 at offset 1252.
        assert_eq!(
            find_offset_by_timestamp(&path, 1_012_521, 0, end).unwrap(),
            Some((9_000_000, 1252))
        );
        assert_eq!(
            find_offset_by_timestamp(&path, 1_012_521, metas[51].0, end).unwrap(),
            Some((1_012_550, 1255))
        );
        assert_eq!(
            find_offset_by_timestamp(&path, 9_000_001, 0, end).unwrap(),
            None
        );
        assert_eq!(
            find_offset_by_timestamp(&path, 1_014_990, 0, end).unwrap(),
            Some((9_000_000, 1252))
        );
        assert_eq!(
            find_offset_by_timestamp(&path, 1_014_990, metas[51].0, end).unwrap(),
            Some((1_014_990, 1499))
        );
        assert_eq!(
            find_offset_by_timestamp(&path, 1_014_990, metas[51].0, metas[99].0).unwrap(),
            None
        );
    }

    /// An uncompressed legacy message (magic 0 or 1) with a 3-byte value.
    fn legacy_message(offset: i64, magic: i8, timestamp: i64) -> Vec<u8> {
        let mut body = vec![magic as u8, 0];
        if magic == 1 {
            body.extend_from_slice(&timestamp.to_be_bytes());
        }
        body.extend_from_slice(&(-1i32).to_be_bytes());
        body.extend_from_slice(&3i32.to_be_bytes());
        body.extend_from_slice(b"abc");
        let mut m = offset.to_be_bytes().to_vec();
        m.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
        m.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
        m.extend_from_slice(&body);
        m
    }

    #[test]
    fn legacy_messages_recover_and_walk() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("0.log");
        let mut log = Vec::new();
        for o in 0..3 {
            log.extend(legacy_message(o, 0, -1));
        }
        for o in 3..6 {
            log.extend(legacy_message(o, 1, 1_000 + o));
        }
        let valid = log.len();
        log.extend_from_slice(&[0u8; 40]); // zeros: no message (size below the minimum)
        fs::write(&path, &log).unwrap();
        let (mut oi, mut ti) = indexes(&dir, 0);
        let r = recover_segment(&path, &mut oi, &mut ti, 10, usize::MAX).unwrap();
        assert_eq!(
            (r.batches, r.valid_bytes, r.last_offset),
            (6, valid as u64, 5)
        );
        assert_eq!((r.max_timestamp, r.offset_of_max_timestamp), (1_005, 5));
        assert_eq!(r.error_position, Some(valid as u64));
        assert!(r.epochs.is_empty() && r.producer_batches.is_empty());
        let (infos, next) = read_batch_infos(&path, 0, 100, None).unwrap();
        assert_eq!((infos.len(), next), (6, valid as u64));
        assert_eq!(infos[4].magic, 1);
        assert_eq!(infos[4].max_timestamp, 1_004);
        assert_eq!(infos[1].max_timestamp, -1);
        assert_eq!(
            translate_offset(&path, 4, 0, valid as u64)
                .unwrap()
                .unwrap()
                .0,
            4
        );
        assert_eq!(
            find_offset_by_timestamp(&path, 1_004, 0, valid as u64).unwrap(),
            Some((1_004, 4))
        );
    }

    #[test]
    fn recovery_rewrites_empty_batches_with_codec_bits_uncompressed() {
        use crate::records::{build_batch, BuildOptions, BuildRecord};
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("0.log");
        let rec = BuildRecord {
            key: Some(b"k".to_vec()),
            value: Some(b"v".to_vec()),
            headers: vec![],
            timestamp: 5,
        };
        let first = build_batch(
            &[rec.clone(), rec.clone()],
            &BuildOptions {
                base_offset: 1000,
                compression: 3,
                ..Default::default()
            },
        )
        .unwrap();
        // an empty header with the lz4 bit, as older cleaners kept a
        // producer's superseded last batch
        let mut empty = build_batch(
            &[],
            &BuildOptions {
                base_offset: 1002,
                producer_id: 9,
                producer_epoch: 0,
                base_sequence: 0,
                ..Default::default()
            },
        )
        .unwrap();
        batch::write_i32(&mut empty, batch::LAST_OFFSET_DELTA_OFFSET, 3);
        empty[batch::ATTRIBUTES_OFFSET + 1] |= 3;
        let crc = batch::compute_crc(&empty);
        batch::write_u32(&mut empty, batch::CRC_OFFSET, crc);
        let last = build_batch(
            &[rec],
            &BuildOptions {
                base_offset: 1006,
                compression: 3,
                ..Default::default()
            },
        )
        .unwrap();
        let mut log = first.clone();
        log.extend_from_slice(&empty);
        log.extend_from_slice(&last);
        fs::write(&path, &log).unwrap();
        let (mut oi, mut ti) = indexes(&dir, 1000);
        let r = recover_segment(&path, &mut oi, &mut ti, 1024, usize::MAX).unwrap();
        assert_eq!(
            (r.batches, r.valid_bytes, r.error),
            (3, log.len() as u64, None)
        );
        let after = fs::read(&path).unwrap();
        assert_eq!(after.len(), log.len());
        assert_eq!(&after[..first.len()], &first[..]);
        assert_eq!(&after[first.len() + HEADER_SIZE..], &last[..]);
        let h = validate::validate_batch(&after[first.len()..], 0, &Default::default()).unwrap();
        assert_eq!((h.compression_codec(), h.records_count), (0, 0));
        assert_eq!((h.producer_id, h.last_offset()), (9, 1005));
        // a second recovery has nothing to repair
        let r = recover_segment(&path, &mut oi, &mut ti, 1024, usize::MAX).unwrap();
        assert_eq!(r.batches, 3);
        assert_eq!(fs::read(&path).unwrap(), after);
    }
}
