//! pylog-core: the native storage core of pylog, free of Python.
//!
//! Given bytes, files, offsets and limits, it validates Kafka record batches,
//! assigns offsets, maintains Kafka's offset and time indexes, and scans,
//! recovers and slices log segments. Policy lives in Python (`pylog.log`).

pub mod batch;
pub mod batch_iterator;
pub mod cleaner;
pub mod columnar;
pub mod compression;
pub mod crc;
pub mod error;
#[doc(hidden)]
pub mod harness;
pub mod index;
pub mod legacy;
pub mod recompress;
pub mod records;
pub mod segment;
pub mod timing_wheel;
pub mod validate;
pub mod varint;

pub use error::{Error, Result};
