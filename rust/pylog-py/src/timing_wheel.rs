//! `TimingWheel`: the purgatory's hierarchical timing wheel.
//!
//! Every method is a few dozen nanoseconds of work (an advance is
//! proportional to what it expires), so the GIL is kept throughout. The
//! class is frozen and its state sits in a `RefCell` under `GILProtected`:
//! a call then checks a plain borrow flag instead of the atomic one of a
//! mutable pyclass (an atomic compare-exchange per call, a few ns of the
//! ~30 ns a call costs). The GIL serialises callers (a wheel is owned by one
//! purgatory, driven from its event loop), and no method runs Python code
//! while it holds the borrow.

use std::cell::RefCell;

use pylog_core::timing_wheel as core;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::GILProtected;
use pyo3::types::PyList;

struct State {
    wheel: core::TimingWheel,
    /// Reused by `advance` and `add_many` so an idle tick allocates nothing
    /// but the list.
    scratch: Vec<i64>,
}

/// Hierarchical timing wheel: ids with deadlines in ms, O(1) add and cancel.
#[pyclass(module = "pylog._native", name = "TimingWheel", frozen)]
pub struct PyTimingWheel {
    state: GILProtected<RefCell<State>>,
    tick_ms: i64,
    wheel_size: u32,
}

#[pymethods]
impl PyTimingWheel {
    #[new]
    #[pyo3(signature = (tick_ms = 1, wheel_size = 20, *, start_ms))]
    fn new(tick_ms: i64, wheel_size: u32, start_ms: i64) -> PyResult<Self> {
        let inner = core::TimingWheel::new(tick_ms, wheel_size, start_ms)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyTimingWheel {
            state: GILProtected::new(RefCell::new(State {
                wheel: inner,
                scratch: Vec::new(),
            })),
            tick_ms,
            wheel_size,
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
    fn current_ms(&self, py: Python<'_>) -> i64 {
        self.state(py).borrow().wheel.current_ms()
    }
    #[getter]
    fn levels(&self, py: Python<'_>) -> usize {
        self.state(py).borrow().wheel.levels()
    }

    fn add(&self, py: Python<'_>, id: i64, expiration_ms: i64) -> bool {
        self.state(py).borrow_mut().wheel.add(id, expiration_ms)
    }

    fn cancel(&self, py: Python<'_>, id: i64) -> bool {
        self.state(py).borrow_mut().wheel.cancel(id)
    }

    /// `add` for each (id, deadline) pair; returns the ids refused (deadline
    /// already reached), usually an empty list.
    fn add_many<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<i64>,
        expirations_ms: Vec<i64>,
    ) -> PyResult<Bound<'py, PyList>> {
        if ids.len() != expirations_ms.len() {
            return Err(PyValueError::new_err(
                "ids and expirations_ms differ in length",
            ));
        }
        let refused = {
            let mut state = self.state(py).borrow_mut();
            let mut refused = std::mem::take(&mut state.scratch);
            refused.clear();
            state.wheel.add_many(&ids, &expirations_ms, &mut refused);
            refused
        };
        self.to_list(py, refused)
    }

    /// `cancel` for each id; returns how many were pending.
    fn cancel_many(&self, py: Python<'_>, ids: Vec<i64>) -> usize {
        self.state(py).borrow_mut().wheel.cancel_many(&ids)
    }

    fn advance<'py>(&self, py: Python<'py>, now_ms: i64) -> PyResult<Bound<'py, PyList>> {
        let expired = {
            let mut state = self.state(py).borrow_mut();
            let mut expired = std::mem::take(&mut state.scratch);
            expired.clear();
            state.wheel.advance_into(now_ms, &mut expired);
            expired
        };
        self.to_list(py, expired)
    }

    fn next_expiration_ms(&self, py: Python<'_>) -> Option<i64> {
        self.state(py).borrow_mut().wheel.next_expiration_ms()
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.state(py).borrow().wheel.len()
    }

    fn __contains__(&self, py: Python<'_>, id: i64) -> bool {
        self.state(py).borrow().wheel.contains(id)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let state = self.state(py).borrow();
        format!(
            "TimingWheel(tick_ms={}, wheel_size={}, current_ms={}, pending={})",
            self.tick_ms,
            self.wheel_size,
            state.wheel.current_ms(),
            state.wheel.len()
        )
    }
}

impl PyTimingWheel {
    #[inline]
    fn state<'py>(&'py self, py: Python<'py>) -> &'py RefCell<State> {
        self.state.get(py)
    }

    /// A list of `ids`, made after the borrow is released (making it may run
    /// the garbage collector, and with it Python code that could call the
    /// wheel); the vector goes back for reuse.
    fn to_list<'py>(&self, py: Python<'py>, ids: Vec<i64>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::new(py, &ids);
        self.state(py).borrow_mut().scratch = ids;
        list
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTimingWheel>()
}
