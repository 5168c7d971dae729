//! Columnar reads for analytics (the PySpark data source): segment files and
//! fetched record batches decoded into Arrow-layout buffers, returned as
//! `bytes` that pyarrow wraps without another copy. One call per read window
//! or fetch response, never per record; the GIL is released while decoding.

use std::path::PathBuf;

use pylog_core::columnar as core;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::buffer::{self, Bytes};
use crate::errors::IntoPyResult;

/// Plain old data: types whose every byte is initialised, with no padding,
/// so a slice of them may be read as bytes. Only what `pod_bytes` is given.
///
/// # Safety
/// Implement only for types without padding or uninitialised bytes.
unsafe trait Pod: Copy {}
// SAFETY: a primitive integer is all value bits: no padding, every byte set.
unsafe impl Pod for i32 {}
// SAFETY: as for i32.
unsafe impl Pod for i64 {}

/// The bytes of a plain-old-data slice, in native byte order (Arrow's
/// in-memory order).
fn pod_bytes<'py, T: Pod>(py: Python<'py>, v: &[T]) -> Bound<'py, PyBytes> {
    // SAFETY: `T: Pod` (no padding, every byte initialised), so the
    // `size_of_val(v)` bytes at `v` are readable as u8 (alignment 1); the view
    // lives only for the copy into the new bytes object.
    let raw =
        unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) };
    PyBytes::new(py, raw)
}

/// `(validity, offsets, data, null_count)` of a binary column.
fn binary<'py>(py: Python<'py>, c: &core::BinaryColumn) -> PyResult<Bound<'py, PyTuple>> {
    (
        PyBytes::new(py, &c.validity),
        pod_bytes(py, &c.offsets),
        PyBytes::new(py, &c.data),
        c.null_count,
    )
        .into_pyobject(py)
}

/// `(rows, offsets, timestamps, timestamp_types, key, value, headers)`; key and
/// value are binary column tuples, headers None or
/// `(list_offsets, header_keys, header_values)`.
fn columns<'py>(py: Python<'py>, c: &core::Columns) -> PyResult<Bound<'py, PyTuple>> {
    let headers = if c.include_headers {
        Some((
            pod_bytes(py, &c.header_offsets),
            binary(py, &c.header_keys)?,
            binary(py, &c.header_values)?,
        ))
    } else {
        None
    };
    (
        c.rows(),
        pod_bytes(py, &c.offsets),
        pod_bytes(py, &c.timestamps),
        pod_bytes(py, &c.timestamp_types),
        binary(py, &c.keys)?,
        binary(py, &c.values)?,
        headers,
    )
        .into_pyobject(py)
}

/// Read the records of a segment file in [start_offset, end_offset): returns
/// `(columns, next_position, next_offset, done)`.
#[pyfunction]
#[pyo3(signature = (log_path, start_position, end_position, start_offset, end_offset, *, include_headers = false, max_records = 65536, window = 8388608))]
#[allow(clippy::too_many_arguments)]
fn read_segment_columns<'py>(
    py: Python<'py>,
    log_path: PathBuf,
    start_position: u64,
    end_position: Option<u64>,
    start_offset: i64,
    end_offset: i64,
    include_headers: bool,
    max_records: usize,
    window: usize,
) -> PyResult<(Bound<'py, PyTuple>, u64, i64, bool)> {
    let range = core::ReadRange {
        start_offset,
        end_offset,
        max_records: max_records.max(1),
    };
    let r = py
        .allow_threads(|| {
            core::read_segment(
                &log_path,
                start_position,
                end_position,
                &range,
                include_headers,
                window,
            )
        })
        .py()?;
    Ok((
        columns(py, &r.columns)?,
        r.next_position,
        r.next_offset,
        r.done,
    ))
}

/// Decode the record batches of a buffer (a fetch response's records; its
/// last batch may be partial): returns `(columns, consumed, next_offset,
/// reached_end_offset)`.
#[pyfunction]
#[pyo3(signature = (data, start_offset, end_offset, *, include_headers = false, max_records = usize::MAX))]
fn decode_columns<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    start_offset: i64,
    end_offset: i64,
    include_headers: bool,
    max_records: usize,
) -> PyResult<(Bound<'py, PyTuple>, usize, i64, bool)> {
    let range = core::ReadRange {
        start_offset,
        end_offset,
        max_records: max_records.max(1),
    };
    let d = buffer::with_bytes(py, data, |bytes| {
        core::decode_batches(bytes, 0, &range, include_headers, false)
    })?;
    Ok((
        columns(py, &d.columns)?,
        d.consumed,
        d.next_offset,
        d.stop == core::Stop::EndOffset,
    ))
}

/// The `.log` position to start reading `target_offset` from, by the
/// segment's offset index (0 when the index has no entry at or below it).
#[pyfunction]
fn index_floor_position(
    py: Python<'_>,
    index_path: PathBuf,
    base_offset: i64,
    target_offset: i64,
) -> PyResult<u64> {
    py.allow_threads(|| -> pylog_core::Result<u64> {
        let index = std::fs::read(&index_path)?;
        Ok(core::index_floor_position(
            &index,
            base_offset,
            target_offset,
        ))
    })
    .py()
}

/// The offsets of a segment's offset index entries (each the last offset of
/// a batch), ascending: split points that start at batch boundaries.
#[pyfunction]
fn index_entry_offsets(
    py: Python<'_>,
    index_path: PathBuf,
    base_offset: i64,
) -> PyResult<Vec<i64>> {
    py.allow_threads(|| -> pylog_core::Result<Vec<i64>> {
        let index = std::fs::read(&index_path)?;
        Ok(core::index_offsets(&index, base_offset))
    })
    .py()
}

/// `(error, position)` of the first batch of `data` that does not frame,
/// checksum or decode, or None when every batch is sound.
#[pyfunction]
fn check_batches(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Option<(String, u64)>> {
    let data = Bytes::get(data)?;
    let bytes = data.as_slice();
    Ok(
        buffer::maybe_allow_threads(py, bytes.len(), || core::check_batches(bytes)).map(|e| {
            let position = match &e {
                pylog_core::Error::CorruptRecord { position, .. } => *position,
                _ => 0,
            };
            (e.to_string(), position)
        }),
    )
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(read_segment_columns, m)?)?;
    m.add_function(wrap_pyfunction!(decode_columns, m)?)?;
    m.add_function(wrap_pyfunction!(index_floor_position, m)?)?;
    m.add_function(wrap_pyfunction!(index_entry_offsets, m)?)?;
    m.add_function(wrap_pyfunction!(check_batches, m)?)?;
    Ok(())
}
