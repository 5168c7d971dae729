//! Log compaction: the offset map and the two native passes of a clean
//! (map building, batch filtering), each over a buffer of whole batches.

use std::collections::HashMap;

use pylog_core::cleaner::{self as core_cleaner, CleanOptions};
use pylog_core::compression;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::batch::batch_info_list;
use crate::buffer::with_bytes;

/// Key hash (XXH3-128) → latest offset, in fixed memory.
#[pyclass(module = "pylog._native", name = "OffsetMap")]
pub struct OffsetMap {
    inner: core_cleaner::OffsetMap,
}

#[pymethods]
impl OffsetMap {
    #[new]
    fn new(memory: usize, load_factor: f64) -> Self {
        OffsetMap {
            inner: core_cleaner::OffsetMap::new(memory, load_factor),
        }
    }
    fn put(&mut self, key: &[u8], offset: i64) -> bool {
        self.inner.put(key, offset)
    }
    fn get(&mut self, key: &[u8]) -> i64 {
        self.inner.get(key)
    }
    fn clear(&mut self, py: Python<'_>) {
        let inner = &mut self.inner;
        py.allow_threads(|| inner.clear());
    }
    #[getter]
    fn size(&self) -> usize {
        self.inner.size()
    }
    #[getter]
    fn slots(&self) -> usize {
        self.inner.slots()
    }
    #[getter]
    fn max_entries(&self) -> usize {
        self.inner.max_entries()
    }
    #[getter]
    fn latest_offset(&self) -> i64 {
        self.inner.latest_offset()
    }
    #[getter]
    fn utilization(&self) -> f64 {
        self.inner.utilization()
    }
    #[getter]
    fn collision_rate(&self) -> f64 {
        self.inner.collision_rate()
    }
    #[getter]
    fn memory(&self) -> usize {
        self.inner.memory()
    }
    #[getter]
    fn is_full(&self) -> bool {
        self.inner.is_full()
    }
}

/// Returns (consumed, needed, full, done, records).
#[pyfunction]
#[pyo3(signature = (map, buf, start_offset, end_offset, position = 0, *, max_decompressed_size = None))]
fn build_offset_map(
    py: Python<'_>,
    mut map: PyRefMut<'_, OffsetMap>,
    buf: &Bound<'_, PyAny>,
    start_offset: i64,
    end_offset: i64,
    position: u64,
    max_decompressed_size: Option<usize>,
) -> PyResult<(usize, usize, bool, bool, u64)> {
    let m = &mut map.inner;
    let limit = max_decompressed_size.unwrap_or(compression::MAX_DECOMPRESSED_SIZE);
    let r = with_bytes(py, buf, |data| {
        core_cleaner::build_offset_map(m, data, start_offset, end_offset, position, limit)
    })?;
    Ok((r.consumed, r.needed, r.full, r.done, r.records))
}

/// Returns (consumed, needed, out, batches, records_read, records_retained).
#[pyfunction]
#[pyo3(signature = (
    map, buf, *, now_ms, delete_retention_ms, active_producers, position = 0,
    max_decompressed_size = None
))]
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
fn clean_batches<'py>(
    py: Python<'py>,
    mut map: PyRefMut<'_, OffsetMap>,
    buf: &Bound<'_, PyAny>,
    now_ms: i64,
    delete_retention_ms: i64,
    active_producers: HashMap<i64, i64>,
    position: u64,
    max_decompressed_size: Option<usize>,
) -> PyResult<(
    usize,
    usize,
    Bound<'py, PyBytes>,
    Bound<'py, PyList>,
    u64,
    u64,
)> {
    let opts = CleanOptions {
        now_ms,
        delete_retention_ms,
        active_producers,
        max_decompressed_size: max_decompressed_size.unwrap_or(compression::MAX_DECOMPRESSED_SIZE),
    };
    let m = &mut map.inner;
    let c = with_bytes(py, buf, |data| {
        core_cleaner::clean_batches(m, data, &opts, position)
    })?;
    Ok((
        c.consumed,
        c.needed,
        PyBytes::new(py, &c.out),
        batch_info_list(py, &c.batches)?,
        c.records_read,
        c.records_retained,
    ))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<OffsetMap>()?;
    m.add_function(wrap_pyfunction!(build_offset_map, m)?)?;
    m.add_function(wrap_pyfunction!(clean_batches, m)?)?;
    Ok(())
}
