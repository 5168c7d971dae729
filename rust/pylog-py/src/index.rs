//! `OffsetIndex` and `TimeIndex`: the memory-mapped segment indexes.
//!
//! Each Python object owns its core index behind a mutex (the class is
//! `frozen`, so methods take `&self` and threads may share an index). Work
//! that touches the file (open, truncate, resize, flush, sanity check,
//! rename, close) runs with the GIL released and takes the lock inside that
//! section, so no thread ever waits for the GIL while holding an index lock.
//! Lookups and appends are a few dozen nanoseconds and keep the GIL.
//!
//! Both classes wrap the same core `MmapIndex<L>`, so their shared methods
//! are written once, in [`index_class!`]; each class adds its own append and
//! last-entry methods.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use pylog_core::index as core;
use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;

use crate::errors::IntoPyResult;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves the index itself consistent
    // (every mutation is a single bounded write), so keep using it.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn path_str(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The `#[pymethods]` of one index class: the methods every index has, then
/// `$extra` (PyO3 allows one `#[pymethods]` block per class). `$target` names
/// the lookup argument as Python callers pass it, `$entry` is what a lookup
/// answers; `$what` begins the
/// out-of-range message of `entry`.
macro_rules! index_class {
    ($class:ident, $core:ty, $entry:ty, $name:literal, $target:ident, $what:literal, { $($extra:tt)* }) => {
        #[pymethods]
        impl $class {
            #[new]
            #[pyo3(signature = (path, base_offset, max_index_size, writable = true))]
            fn new(
                py: Python<'_>,
                path: PathBuf,
                base_offset: i64,
                max_index_size: u64,
                writable: bool,
            ) -> PyResult<Self> {
                let inner = py
                    .allow_threads(|| <$core>::open(&path, base_offset, max_index_size, writable))
                    .py()?;
                Ok($class {
                    inner: Mutex::new(inner),
                    base_offset,
                })
            }

            #[getter]
            fn path(&self) -> String {
                path_str(lock(&self.inner).path())
            }
            #[getter]
            fn base_offset(&self) -> i64 {
                self.base_offset
            }
            #[getter]
            fn entries(&self) -> usize {
                lock(&self.inner).entries()
            }
            #[getter]
            fn max_entries(&self) -> usize {
                lock(&self.inner).max_entries()
            }
            #[getter]
            fn size_in_bytes(&self) -> u64 {
                lock(&self.inner).size_in_bytes()
            }
            fn is_full(&self) -> bool {
                lock(&self.inner).is_full()
            }
            fn lookup(&self, $target: i64) -> PyResult<$entry> {
                lock(&self.inner).lookup($target).py()
            }
            fn entry(&self, n: i64) -> PyResult<$entry> {
                let found = match usize::try_from(n) {
                    Ok(n) => lock(&self.inner).entry(n).py()?,
                    Err(_) => None,
                };
                found.ok_or_else(|| {
                    PyIndexError::new_err(format!(concat!($what, " entry {} out of range"), n))
                })
            }
            fn truncate_to(&self, py: Python<'_>, offset: i64) -> PyResult<()> {
                py.allow_threads(|| lock(&self.inner).truncate_to(offset))
                    .py()
            }
            fn truncate(&self, py: Python<'_>) -> PyResult<()> {
                py.allow_threads(|| lock(&self.inner).truncate()).py()
            }
            fn resize(&self, py: Python<'_>, new_size: u64) -> PyResult<bool> {
                py.allow_threads(|| lock(&self.inner).resize(new_size)).py()
            }
            fn trim_to_valid_size(&self, py: Python<'_>) -> PyResult<()> {
                py.allow_threads(|| lock(&self.inner).trim_to_valid_size())
                    .py()
            }
            fn flush(&self, py: Python<'_>) -> PyResult<()> {
                py.allow_threads(|| lock(&self.inner).flush()).py()
            }
            fn sanity_check(&self, py: Python<'_>) -> PyResult<()> {
                py.allow_threads(|| lock(&self.inner).sanity_check()).py()
            }
            fn rename_to(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
                py.allow_threads(|| lock(&self.inner).rename_to(&path)).py()
            }
            fn close(&self, py: Python<'_>) -> PyResult<()> {
                py.allow_threads(|| lock(&self.inner).close()).py()
            }
            fn __repr__(&self) -> String {
                let i = lock(&self.inner);
                format!(
                    concat!($name, "(path={:?}, base_offset={}, entries={}, max_entries={})"),
                    path_str(i.path()),
                    self.base_offset,
                    i.entries(),
                    i.max_entries()
                )
            }

            $($extra)*
        }
    };
}

/// A segment's `.index`: 8-byte entries (relative offset u32, position u32), memory-mapped.
#[pyclass(module = "pylog._native", name = "OffsetIndex", frozen)]
pub struct PyOffsetIndex {
    pub(crate) inner: Mutex<core::OffsetIndex>,
    base_offset: i64,
}

index_class!(
    PyOffsetIndex,
    core::OffsetIndex,
    (i64, u32),
    "OffsetIndex",
    target_offset,
    "index",
    {
        #[getter]
        fn last_offset(&self) -> i64 {
            lock(&self.inner).last_offset()
        }
        fn append(&self, offset: i64, position: i64) -> PyResult<()> {
            lock(&self.inner).append(offset, position).py()
        }
    }
);

/// A segment's `.timeindex`: 12-byte entries (timestamp i64, relative offset u32).
#[pyclass(module = "pylog._native", name = "TimeIndex", frozen)]
pub struct PyTimeIndex {
    pub(crate) inner: Mutex<core::TimeIndex>,
    base_offset: i64,
}

index_class!(
    PyTimeIndex,
    core::TimeIndex,
    (i64, i64),
    "TimeIndex",
    target_timestamp,
    "time index",
    {
        fn last_entry(&self) -> (i64, i64) {
            lock(&self.inner).last_entry()
        }
        #[pyo3(signature = (timestamp, offset, skip_full_check = false))]
        fn maybe_append(&self, timestamp: i64, offset: i64, skip_full_check: bool) -> PyResult<()> {
            lock(&self.inner)
                .maybe_append(timestamp, offset, skip_full_check)
                .py()
        }
    }
);

/// The entries of an offset index file, read without mapping it (tools).
#[pyfunction]
fn read_offset_index(py: Python<'_>, path: PathBuf, base_offset: i64) -> PyResult<Vec<(i64, u32)>> {
    py.allow_threads(|| core::read_entries::<core::OffsetLayout>(&path, base_offset))
        .py()
}

/// The entries of a time index file, read without mapping it (tools).
#[pyfunction]
fn read_time_index(py: Python<'_>, path: PathBuf, base_offset: i64) -> PyResult<Vec<(i64, i64)>> {
    py.allow_threads(|| core::read_entries::<core::TimeLayout>(&path, base_offset))
        .py()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyOffsetIndex>()?;
    m.add_class::<PyTimeIndex>()?;
    m.add_function(wrap_pyfunction!(read_offset_index, m)?)?;
    m.add_function(wrap_pyfunction!(read_time_index, m)?)?;
    Ok(())
}
