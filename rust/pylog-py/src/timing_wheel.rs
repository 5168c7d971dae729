//! `TimingWheel`: the purgatory's hierarchical timing wheel.
//!
//! Every method is a few dozen nanoseconds of work (an advance is
//! proportional to what it expires), so the GIL is kept throughout. The
//! class is not frozen: methods borrow it mutably, and the GIL serialises
//! callers (a wheel is owned by one purgatory, driven from its event loop).

use pylog_core::timing_wheel as core;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;

/// Hierarchical timing wheel: ids with deadlines in ms, O(1) add and cancel.
#[pyclass(module = "pylog._native", name = "TimingWheel")]
pub struct PyTimingWheel {
    inner: core::TimingWheel,
    tick_ms: i64,
    wheel_size: u32,
    /// Reused by `advance` so an idle tick allocates nothing but the list.
    scratch: Vec<i64>,
}

#[pymethods]
impl PyTimingWheel {
    #[new]
    #[pyo3(signature = (tick_ms = 1, wheel_size = 20, *, start_ms))]
    fn new(tick_ms: i64, wheel_size: u32, start_ms: i64) -> PyResult<Self> {
        let inner = core::TimingWheel::new(tick_ms, wheel_size, start_ms)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyTimingWheel {
            inner,
            tick_ms,
            wheel_size,
            scratch: Vec::new(),
        })
    }

    #[getter]
    fn tick_ms(&self) -> i64 {
        self.tick_ms
    }
    #[getter]
    fn wheel_size(&self) -> u32 {
        self.wheel_size
    }
    #[getter]
    fn current_ms(&self) -> i64 {
        self.inner.current_ms()
    }
    #[getter]
    fn levels(&self) -> usize {
        self.inner.levels()
    }

    fn add(&mut self, id: i64, expiration_ms: i64) -> bool {
        self.inner.add(id, expiration_ms)
    }

    fn cancel(&mut self, id: i64) -> bool {
        self.inner.cancel(id)
    }

    /// `add` for each (id, deadline) pair; returns the ids refused (deadline
    /// already reached), usually an empty list.
    fn add_many<'py>(
        &mut self,
        py: Python<'py>,
        ids: Vec<i64>,
        expirations_ms: Vec<i64>,
    ) -> PyResult<Bound<'py, PyList>> {
        if ids.len() != expirations_ms.len() {
            return Err(PyValueError::new_err(
                "ids and expirations_ms differ in length",
            ));
        }
        self.scratch.clear();
        self.inner
            .add_many(&ids, &expirations_ms, &mut self.scratch);
        PyList::new(py, &self.scratch)
    }

    /// `cancel` for each id; returns how many were pending.
    fn cancel_many(&mut self, ids: Vec<i64>) -> usize {
        self.inner.cancel_many(&ids)
    }

    fn advance<'py>(&mut self, py: Python<'py>, now_ms: i64) -> PyResult<Bound<'py, PyList>> {
        self.scratch.clear();
        self.inner.advance_into(now_ms, &mut self.scratch);
        PyList::new(py, &self.scratch)
    }

    fn next_expiration_ms(&mut self) -> Option<i64> {
        self.inner.next_expiration_ms()
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __contains__(&self, id: i64) -> bool {
        self.inner.contains(id)
    }

    fn __repr__(&self) -> String {
        format!(
            "TimingWheel(tick_ms={}, wheel_size={}, current_ms={}, pending={})",
            self.tick_ms,
            self.wheel_size,
            self.inner.current_ms(),
            self.inner.len()
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTimingWheel>()
}
