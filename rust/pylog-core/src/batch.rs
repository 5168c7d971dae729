//! The magic v2 record batch header (Kafka's DefaultRecordBatch) and the
//! framing shared by every on-disk batch: `offset: i64, length: i32, ...`.
//!
//! Layout of the 61-byte v2 header, big-endian:
//! base_offset i64 @0 · batch_length i32 @8 · partition_leader_epoch i32 @12 ·
//! magic i8 @16 · crc u32 @17 (CRC32C of @21..end) · attributes i16 @21 ·
//! last_offset_delta i32 @23 · base_timestamp i64 @27 · max_timestamp i64 @35 ·
//! producer_id i64 @43 · producer_epoch i16 @51 · base_sequence i32 @53 ·
//! records_count i32 @57 · records @61.
//! Legacy magic 0/1 messages share the first 17 bytes' meaning for offset,
//! size and magic (CRC32 sits where v2 keeps the leader epoch).

use crate::error::{Error, Result};

/// offset (8) + size (4): the framing every batch and legacy message starts with.
pub const LOG_OVERHEAD: usize = 12;
pub const HEADER_SIZE: usize = 61;
/// Bytes needed to learn a batch's offset, size and magic.
pub const MAGIC_OFFSET: usize = 16;
pub const HEADER_SIZE_UP_TO_MAGIC: usize = MAGIC_OFFSET + 1;

pub const BASE_OFFSET_OFFSET: usize = 0;
pub const LENGTH_OFFSET: usize = 8;
pub const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
pub const CRC_OFFSET: usize = 17;
pub const ATTRIBUTES_OFFSET: usize = 21;
pub const LAST_OFFSET_DELTA_OFFSET: usize = 23;
pub const BASE_TIMESTAMP_OFFSET: usize = 27;
pub const MAX_TIMESTAMP_OFFSET: usize = 35;
pub const PRODUCER_ID_OFFSET: usize = 43;
pub const PRODUCER_EPOCH_OFFSET: usize = 51;
pub const BASE_SEQUENCE_OFFSET: usize = 53;
pub const RECORDS_COUNT_OFFSET: usize = 57;
pub const RECORDS_OFFSET: usize = 61;

pub const MAGIC_V0: i8 = 0;
pub const MAGIC_V1: i8 = 1;
pub const MAGIC_V2: i8 = 2;

pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_SEQUENCE: i32 = -1;
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;
pub const NO_TIMESTAMP: i64 = -1;

pub const COMPRESSION_CODEC_MASK: i16 = 0x07;
pub const TIMESTAMP_TYPE_MASK: i16 = 0x08;
pub const TRANSACTIONAL_FLAG_MASK: i16 = 0x10;
pub const CONTROL_FLAG_MASK: i16 = 0x20;
pub const DELETE_HORIZON_FLAG_MASK: i16 = 0x40;

#[inline]
pub fn read_i64(buf: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(buf[at..at + 8].try_into().unwrap())
}
#[inline]
pub fn read_i32(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(buf[at..at + 4].try_into().unwrap())
}
#[inline]
pub fn read_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(buf[at..at + 4].try_into().unwrap())
}
#[inline]
pub fn read_i16(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(buf[at..at + 2].try_into().unwrap())
}
#[inline]
pub fn write_i64(buf: &mut [u8], at: usize, v: i64) {
    buf[at..at + 8].copy_from_slice(&v.to_be_bytes());
}
#[inline]
pub fn write_i32(buf: &mut [u8], at: usize, v: i32) {
    buf[at..at + 4].copy_from_slice(&v.to_be_bytes());
}
#[inline]
pub fn write_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// The size of the whole batch (or legacy message) that starts at `buf[0]`,
/// read from its length field, without validating anything else.
#[inline]
pub fn framed_size(buf: &[u8]) -> Option<usize> {
    if buf.len() < LOG_OVERHEAD {
        return None;
    }
    let len = read_i32(buf, LENGTH_OFFSET);
    if len < 0 {
        return None;
    }
    Some(LOG_OVERHEAD + len as usize)
}

/// Every field of a v2 batch header, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Decode the header at the start of `buf` (which must hold at least
    /// `HEADER_SIZE` bytes). `position` only labels errors.
    pub fn parse(buf: &[u8], position: u64) -> Result<BatchHeader> {
        if buf.len() < HEADER_SIZE {
            return Err(Error::corrupt(
                position,
                format!(
                    "{} bytes left, fewer than a {}-byte batch header",
                    buf.len(),
                    HEADER_SIZE
                ),
            ));
        }
        Ok(BatchHeader {
            base_offset: read_i64(buf, BASE_OFFSET_OFFSET),
            batch_length: read_i32(buf, LENGTH_OFFSET),
            partition_leader_epoch: read_i32(buf, PARTITION_LEADER_EPOCH_OFFSET),
            magic: buf[MAGIC_OFFSET] as i8,
            crc: read_u32(buf, CRC_OFFSET),
            attributes: read_i16(buf, ATTRIBUTES_OFFSET),
            last_offset_delta: read_i32(buf, LAST_OFFSET_DELTA_OFFSET),
            base_timestamp: read_i64(buf, BASE_TIMESTAMP_OFFSET),
            max_timestamp: read_i64(buf, MAX_TIMESTAMP_OFFSET),
            producer_id: read_i64(buf, PRODUCER_ID_OFFSET),
            producer_epoch: read_i16(buf, PRODUCER_EPOCH_OFFSET),
            base_sequence: read_i32(buf, BASE_SEQUENCE_OFFSET),
            records_count: read_i32(buf, RECORDS_COUNT_OFFSET),
        })
    }

    #[inline]
    pub fn size_in_bytes(&self) -> usize {
        LOG_OVERHEAD + self.batch_length as usize
    }
    #[inline]
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }
    #[inline]
    pub fn compression_codec(&self) -> u8 {
        (self.attributes & COMPRESSION_CODEC_MASK) as u8
    }
    /// 0 = CreateTime, 1 = LogAppendTime.
    #[inline]
    pub fn timestamp_type(&self) -> u8 {
        u8::from(self.attributes & TIMESTAMP_TYPE_MASK != 0)
    }
    #[inline]
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG_MASK != 0
    }
    #[inline]
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG_MASK != 0
    }
    /// KIP-534's delete horizon: the base timestamp when the attributes say
    /// it holds one, else -1.
    #[inline]
    pub fn delete_horizon_ms(&self) -> i64 {
        if self.attributes & DELETE_HORIZON_FLAG_MASK != 0 {
            self.base_timestamp
        } else {
            NO_TIMESTAMP
        }
    }
    /// The sequence of the batch's last record, wrapping at i32::MAX as Kafka does.
    #[inline]
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence == NO_SEQUENCE {
            NO_SEQUENCE
        } else {
            let s = self.base_sequence as i64 + self.last_offset_delta as i64;
            if s > i32::MAX as i64 {
                (s - i32::MAX as i64 - 1) as i32
            } else {
                s as i32
            }
        }
    }
}

pub use crate::crc::crc32c;

/// What the caller wants checked beyond the header and CRC.
#[derive(Debug, Clone, Copy)]
pub struct ValidationOptions {
    /// Largest batch accepted (bytes, framing included); MESSAGE_TOO_LARGE beyond.
    pub max_batch_size: usize,
    /// Also decompress compressed batches (and legacy wrappers) and check the
    /// framing of their records; uncompressed records are always checked.
    pub deep: bool,
    /// Most bytes one batch's records may decompress to (RecordsTooLarge
    /// beyond); capped by `compression::MAX_DECOMPRESSED_SIZE`.
    pub max_decompressed_size: usize,
}

impl Default for ValidationOptions {
    fn default() -> Self {
        ValidationOptions {
            max_batch_size: i32::MAX as usize,
            deep: false,
            max_decompressed_size: crate::compression::MAX_DECOMPRESSED_SIZE,
        }
    }
}

/// CRC32C of a whole v2 batch's checksummed region (attributes..end).
#[inline]
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c(&batch[ATTRIBUTES_OFFSET..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_sequence_wraps() {
        let mut h = BatchHeader::parse(&[0u8; HEADER_SIZE], 0).unwrap();
        h.base_sequence = i32::MAX - 1;
        h.last_offset_delta = 3;
        assert_eq!(h.last_sequence(), 1);
        h.base_sequence = NO_SEQUENCE;
        assert_eq!(h.last_sequence(), NO_SEQUENCE);
    }

    #[test]
    fn short_header_is_corrupt() {
        assert!(matches!(
            BatchHeader::parse(&[0u8; 10], 7),
            Err(Error::CorruptRecord { position: 7, .. })
        ));
    }
}

/// The facts of one batch (v2, or a legacy message / compressed wrapper) as
/// scans and validation report them; mirrors `pylog._native.BatchInfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMeta {
    pub position: u64,
    pub size: usize,
    pub magic: i8,
    pub base_offset: i64,
    pub last_offset: i64,
    pub partition_leader_epoch: i32,
    pub crc: u32,
    pub compression: u8,
    pub timestamp_type: u8,
    pub is_transactional: bool,
    pub is_control: bool,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub last_sequence: i32,
    pub records_count: i32,
    /// The base timestamp when the attributes' delete-horizon bit is set
    /// (KIP-534: the cleaner drops the batch's tombstones after it), else -1.
    pub delete_horizon_ms: i64,
}

impl BatchMeta {
    pub fn from_header(h: &BatchHeader, position: u64) -> BatchMeta {
        BatchMeta {
            position,
            size: h.size_in_bytes(),
            magic: h.magic,
            base_offset: h.base_offset,
            last_offset: h.last_offset(),
            partition_leader_epoch: h.partition_leader_epoch,
            crc: h.crc,
            compression: h.compression_codec(),
            timestamp_type: h.timestamp_type(),
            is_transactional: h.is_transactional(),
            is_control: h.is_control(),
            base_timestamp: h.base_timestamp,
            max_timestamp: h.max_timestamp,
            producer_id: h.producer_id,
            producer_epoch: h.producer_epoch,
            base_sequence: h.base_sequence,
            last_sequence: h.last_sequence(),
            records_count: h.records_count,
            delete_horizon_ms: h.delete_horizon_ms(),
        }
    }
}
