//! Validation of a single magic v2 batch as found in a buffer or a segment file.
//! (Minimal first cut: header, length and CRC. Its owner deepens it to records.)

use crate::batch::{self, BatchHeader, BatchMeta, HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2};
use crate::error::{Error, Result};

/// What the caller wants checked beyond the header and CRC.
#[derive(Debug, Clone, Copy)]
pub struct ValidationOptions {
    /// Largest batch accepted (bytes, framing included); MESSAGE_TOO_LARGE beyond.
    pub max_batch_size: usize,
    /// Also decompress compressed batches (and legacy wrappers) and check the
    /// framing of their records; uncompressed records are always checked.
    pub deep: bool,
}

impl Default for ValidationOptions {
    fn default() -> Self {
        ValidationOptions {
            max_batch_size: i32::MAX as usize,
            deep: false,
        }
    }
}

/// Validate the v2 batch at the start of `buf` (`position` labels errors) and
/// return its decoded header. `buf` may extend past the batch.
pub fn validate_batch(buf: &[u8], position: u64, opts: &ValidationOptions) -> Result<BatchHeader> {
    let header = BatchHeader::parse(buf, position)?;
    if header.magic != MAGIC_V2 {
        return Err(Error::corrupt(position, format!("magic {} where 2 was expected", header.magic)));
    }
    if (header.batch_length as i64) < (HEADER_SIZE - LOG_OVERHEAD) as i64 {
        return Err(Error::corrupt(position, format!("batch length {} is shorter than a header", header.batch_length)));
    }
    let size = header.size_in_bytes();
    if size > opts.max_batch_size {
        return Err(Error::MessageTooLarge { size: size as u64, max: opts.max_batch_size as u64 });
    }
    if size > buf.len() {
        return Err(Error::corrupt(position, format!("batch of {size} bytes but only {} bytes left", buf.len())));
    }
    let crc = batch::compute_crc(&buf[..size]);
    if crc != header.crc {
        return Err(Error::corrupt(position, format!("CRC32C mismatch: stored {:#010x}, computed {crc:#010x}", header.crc)));
    }
    Ok(header)
}

/// Validate the batch at the start of `buf` whatever its magic (v2, or a legacy
/// magic 0/1 message or compressed wrapper) and return its facts. Recovery
/// calls this for every batch of a segment.
pub fn validate_any(buf: &[u8], position: u64, opts: &ValidationOptions) -> Result<BatchMeta> {
    if buf.len() <= batch::MAGIC_OFFSET {
        return Err(Error::corrupt(position, format!("{} bytes left, too few for a batch", buf.len())));
    }
    match buf[batch::MAGIC_OFFSET] as i8 {
        MAGIC_V2 => validate_batch(buf, position, opts).map(|h| BatchMeta::from_header(&h, position)),
        m => Err(Error::corrupt(position, format!("magic {m}: legacy validation not built yet"))),
    }
}
