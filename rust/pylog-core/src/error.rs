//! Every failure of the native core, each tied to the Kafka error it answers with.
//! The binding crate maps each variant to a named exception in `pylog.errors`.

use thiserror::Error;

pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, Error)]
pub enum Error {
    /// CORRUPT_MESSAGE (2): bytes that do not frame or checksum as a batch.
    #[error("corrupt record at position {position}: {reason}")]
    CorruptRecord { position: u64, reason: String },
    /// INVALID_RECORD (87): a well-formed batch the broker refuses (bad offsets, missing key...).
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    /// MESSAGE_TOO_LARGE (10)
    #[error("batch of {size} bytes exceeds the maximum of {max} bytes")]
    MessageTooLarge { size: u64, max: u64 },
    /// MESSAGE_TOO_LARGE (10): a batch whose records decompress to more than
    /// the caller's limit (Kafka's RecordTooLargeException answers with 10 too).
    #[error("records decompress to more than the maximum of {max} bytes")]
    RecordsTooLarge { max: u64 },
    /// INVALID_TIMESTAMP (32)
    #[error("invalid timestamp: {0}")]
    InvalidTimestamp(String),
    /// A batch refused for some of its records (Kafka's
    /// RecordValidationException, KIP-467): each refused record's index in
    /// its batch and why. INVALID_TIMESTAMP (32) when any is refused for its
    /// timestamp, else INVALID_RECORD (87).
    #[error("{} record(s) refused, the first (index {}): {}", .errors.len(),
            .errors.first().map_or(-1, |e| e.0), .errors.first().map_or("", |e| e.1.as_str()))]
    RecordErrors {
        timestamp: bool,
        errors: Vec<(i32, String)>,
    },
    /// UNSUPPORTED_COMPRESSION_TYPE (76)
    #[error("unsupported compression: {0}")]
    UnsupportedCompression(String),
    /// An index entry that would break monotonicity (Kafka's InvalidOffsetException).
    #[error("invalid offset: {0}")]
    InvalidOffset(String),
    /// An offset that does not fit the 32-bit relative offset of a segment's index.
    #[error("index offset overflow: {0}")]
    IndexOffsetOverflow(String),
    /// An index file that fails its sanity check; the caller rebuilds it.
    #[error("corrupt index: {0}")]
    CorruptIndex(String),
    /// KAFKA_STORAGE_ERROR (56): the disk said no (full, gone, permission).
    #[error("storage error: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    #[cold]
    pub fn corrupt(position: u64, reason: impl Into<String>) -> Self {
        Error::CorruptRecord {
            position,
            reason: reason.into(),
        }
    }

    /// The error of a batch decoded on its own, its position (relative to
    /// the batch) made absolute by the batch's `position`.
    pub fn shifted(self, position: u64) -> Self {
        match self {
            Error::CorruptRecord {
                position: p,
                reason,
            } => Error::CorruptRecord {
                position: position + p,
                reason,
            },
            other => other,
        }
    }
}
