//! Segment scans and searches over `.log` files: recovery, verification,
//! header walks, offset and timestamp search. All file work runs with the
//! GIL released; results come back as small tuples or a `ScanResult`.

use std::fs::File;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::path::PathBuf;

use pylog_core::batch::BatchMeta;
use pylog_core::segment as core;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::errors::IntoPyResult;
use crate::index::{lock, PyOffsetIndex, PyTimeIndex};

/// `BatchInfo` objects for core batch facts.
fn batch_infos<'py>(py: Python<'py>, metas: &[BatchMeta]) -> PyResult<Bound<'py, PyList>> {
    crate::batch::batch_info_list(py, metas)
}

/// What a segment scan or recovery found.
#[pyclass(module = "pylog._native", name = "ScanResult", frozen)]
pub struct PyScanResult {
    inner: core::ScanResult,
}

#[pymethods]
impl PyScanResult {
    #[getter]
    fn valid_bytes(&self) -> u64 {
        self.inner.valid_bytes
    }
    #[getter]
    fn batches(&self) -> u64 {
        self.inner.batches
    }
    #[getter]
    fn last_offset(&self) -> i64 {
        self.inner.last_offset
    }
    #[getter]
    fn max_timestamp(&self) -> i64 {
        self.inner.max_timestamp
    }
    #[getter]
    fn offset_of_max_timestamp(&self) -> i64 {
        self.inner.offset_of_max_timestamp
    }
    #[getter]
    fn error(&self) -> Option<&str> {
        self.inner.error.as_deref()
    }
    #[getter]
    fn error_position(&self) -> Option<u64> {
        self.inner.error_position
    }
    #[getter]
    fn producer_batches<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        batch_infos(py, &self.inner.producer_batches)
    }
    #[getter]
    fn epochs(&self) -> Vec<(i32, i64)> {
        self.inner.epochs.clone()
    }
    fn __repr__(&self) -> String {
        let r = &self.inner;
        format!(
            "ScanResult(valid_bytes={}, batches={}, last_offset={}, max_timestamp={}, error={:?}, error_position={:?})",
            r.valid_bytes, r.batches, r.last_offset, r.max_timestamp, r.error, r.error_position
        )
    }
}

#[pyfunction]
#[pyo3(signature = (log_path, offset_index, time_index, *, index_interval_bytes, max_batch_size))]
fn recover_segment(
    py: Python<'_>,
    log_path: PathBuf,
    offset_index: &Bound<'_, PyOffsetIndex>,
    time_index: &Bound<'_, PyTimeIndex>,
    index_interval_bytes: u64,
    max_batch_size: usize,
) -> PyResult<PyScanResult> {
    let (oi, ti) = (offset_index.get(), time_index.get());
    let inner = py
        .allow_threads(|| {
            let mut oi = lock(&oi.inner);
            let mut ti = lock(&ti.inner);
            core::recover_segment(
                &log_path,
                &mut oi,
                &mut ti,
                index_interval_bytes,
                max_batch_size,
            )
        })
        .py()?;
    Ok(PyScanResult { inner })
}

#[pyfunction]
#[pyo3(signature = (log_path, *, start_position = 0, end_position = None, deep = false, max_batch_size))]
fn scan_segment(
    py: Python<'_>,
    log_path: PathBuf,
    start_position: u64,
    end_position: Option<u64>,
    deep: bool,
    max_batch_size: usize,
) -> PyResult<PyScanResult> {
    let inner = py
        .allow_threads(|| {
            core::scan_segment(
                &log_path,
                start_position,
                end_position,
                deep,
                max_batch_size,
            )
        })
        .py()?;
    Ok(PyScanResult { inner })
}

#[pyfunction]
#[pyo3(signature = (log_path, start_position = 0, max_batches = 1000, end_position = None))]
fn read_batch_infos<'py>(
    py: Python<'py>,
    log_path: PathBuf,
    start_position: u64,
    max_batches: usize,
    end_position: Option<u64>,
) -> PyResult<(Bound<'py, PyList>, u64)> {
    let (metas, next) = py
        .allow_threads(|| {
            core::read_batch_infos(&log_path, start_position, max_batches, end_position)
        })
        .py()?;
    Ok((batch_infos(py, &metas)?, next))
}

#[pyfunction]
fn translate_offset(
    py: Python<'_>,
    log_path: PathBuf,
    target_offset: i64,
    start_position: u64,
    end_position: u64,
) -> PyResult<Option<(i64, u64, usize)>> {
    py.allow_threads(|| {
        core::translate_offset(&log_path, target_offset, start_position, end_position)
    })
    .py()
}

/// `translate_offset` in a segment's open descriptor (no open by path per
/// fetch). The caller keeps `fd` open for the call.
#[pyfunction]
fn translate_offset_fd(
    py: Python<'_>,
    fd: i32,
    target_offset: i64,
    start_position: u64,
    end_position: u64,
) -> PyResult<Option<(i64, u64, usize)>> {
    if fd < 0 {
        return Err(PyValueError::new_err(format!(
            "invalid file descriptor {fd}"
        )));
    }
    // SAFETY: `fd` is an open descriptor the caller owns for this call;
    // ManuallyDrop leaves it open when the borrowed File goes.
    let file = ManuallyDrop::new(unsafe { File::from_raw_fd(fd) });
    let file: &File = &file;
    py.allow_threads(|| {
        core::translate_offset_in(file, target_offset, start_position, end_position)
    })
    .py()
}

#[pyfunction]
fn find_offset_by_timestamp(
    py: Python<'_>,
    log_path: PathBuf,
    target_timestamp: i64,
    start_position: u64,
    end_position: u64,
) -> PyResult<Option<(i64, i64)>> {
    py.allow_threads(|| {
        core::find_offset_by_timestamp(&log_path, target_timestamp, start_position, end_position)
    })
    .py()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyScanResult>()?;
    m.add_function(wrap_pyfunction!(recover_segment, m)?)?;
    m.add_function(wrap_pyfunction!(scan_segment, m)?)?;
    m.add_function(wrap_pyfunction!(read_batch_infos, m)?)?;
    m.add_function(wrap_pyfunction!(translate_offset, m)?)?;
    m.add_function(wrap_pyfunction!(translate_offset_fd, m)?)?;
    m.add_function(wrap_pyfunction!(find_offset_by_timestamp, m)?)?;
    Ok(())
}
