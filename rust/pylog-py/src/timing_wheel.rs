//! `TimingWheel`: the purgatory's hierarchical timing wheel.
//!
//! Every method is a few dozen nanoseconds of work (an advance is
//! proportional to what it expires), so the GIL is kept throughout. A wheel
//! is owned by one purgatory, driven from its event loop.
//!
//! `add` and `cancel` are called once per delayed operation, so their cost
//! per call is mostly the binding's: PyO3's argument parsing, type check of
//! `self` and borrow took about as long as the wheel's own work (perf on
//! `bench/test_timing_wheel_bench.py`). They are therefore method
//! descriptors of their own (`add_fast`, `cancel_fast`, put on the type by
//! `register`): positional exact ints in range are converted with one C call
//! each and the result is `True` or `False`; anything else (keywords, int
//! subclasses, values out of range, wrong types, a re-entrant call) is
//! passed to the PyO3 method they replace, which gives the same result or
//! error as before. For that borrow without PyO3 the class is frozen and its
//! state sits in a `RefCell` under the GIL: a re-entrant call (a finalizer
//! run by the garbage collector while `advance` builds its list) finds the
//! cell borrowed and raises instead of aliasing the state.

use std::cell::RefCell;
use std::ffi::CStr;
use std::{panic, ptr};

use pylog_core::timing_wheel as core;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::panic::PanicException;
use pyo3::prelude::*;
use pyo3::sync::{GILOnceCell, GILProtected};
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::{ffi, intern};

struct State {
    inner: core::TimingWheel,
    /// Reused by `advance` so an idle tick allocates nothing but the list.
    scratch: Vec<i64>,
}

/// Hierarchical timing wheel: ids with deadlines in ms, O(1) add and cancel.
#[pyclass(module = "pylog._native", name = "TimingWheel", frozen)]
pub struct PyTimingWheel {
    state: GILProtected<RefCell<State>>,
    tick_ms: i64,
    wheel_size: u32,
}

fn busy() -> PyErr {
    PyRuntimeError::new_err("TimingWheel used re-entrantly")
}

impl PyTimingWheel {
    /// Runs `f` on the state, which no other call holds (the GIL is held and
    /// a re-entrant call gets an error).
    #[inline(always)]
    fn with<R>(&self, py: Python<'_>, f: impl FnOnce(&mut State) -> R) -> PyResult<R> {
        let mut state = self.state.get(py).try_borrow_mut().map_err(|_| busy())?;
        Ok(f(&mut state))
    }

    #[inline(always)]
    fn read<R>(&self, py: Python<'_>, f: impl FnOnce(&State) -> R) -> PyResult<R> {
        let state = self.state.get(py).try_borrow().map_err(|_| busy())?;
        Ok(f(&state))
    }
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
                inner,
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
    fn current_ms(&self, py: Python<'_>) -> PyResult<i64> {
        self.read(py, |s| s.inner.current_ms())
    }
    #[getter]
    fn levels(&self, py: Python<'_>) -> PyResult<usize> {
        self.read(py, |s| s.inner.levels())
    }

    fn add(&self, py: Python<'_>, id: i64, expiration_ms: i64) -> PyResult<bool> {
        self.with(py, |s| s.inner.add(id, expiration_ms))
    }

    fn cancel(&self, py: Python<'_>, id: i64) -> PyResult<bool> {
        self.with(py, |s| s.inner.cancel(id))
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
        let mut state = self.state.get(py).try_borrow_mut().map_err(|_| busy())?;
        let State { inner, scratch } = &mut *state;
        scratch.clear();
        inner.add_many(&ids, &expirations_ms, scratch);
        PyList::new(py, scratch.iter())
    }

    /// `cancel` for each id; returns how many were pending.
    fn cancel_many(&self, py: Python<'_>, ids: Vec<i64>) -> PyResult<usize> {
        self.with(py, |s| s.inner.cancel_many(&ids))
    }

    fn advance<'py>(&self, py: Python<'py>, now_ms: i64) -> PyResult<Bound<'py, PyList>> {
        let mut state = self.state.get(py).try_borrow_mut().map_err(|_| busy())?;
        let State { inner, scratch } = &mut *state;
        scratch.clear();
        inner.advance_into(now_ms, scratch);
        PyList::new(py, scratch.iter())
    }

    fn next_expiration_ms(&self, py: Python<'_>) -> PyResult<Option<i64>> {
        self.with(py, |s| s.inner.next_expiration_ms())
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.read(py, |s| s.inner.len())
    }

    fn __contains__(&self, py: Python<'_>, id: i64) -> PyResult<bool> {
        self.read(py, |s| s.inner.contains(id))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        self.read(py, |s| {
            format!(
                "TimingWheel(tick_ms={}, wheel_size={}, current_ms={}, pending={})",
                self.tick_ms,
                self.wheel_size,
                s.inner.current_ms(),
                s.inner.len()
            )
        })
    }
}

/// The pyo3 descriptors of `add` and `cancel`, which the fast entry points
/// replace on the type and call for anything but the plain case.
static SLOW: GILOnceCell<[Py<PyAny>; 2]> = GILOnceCell::new();
const ADD: usize = 0;
const CANCEL: usize = 1;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyTimingWheel>()?;
    let ty = py.get_type::<PyTimingWheel>();
    let fast: [(&'static CStr, &'static CStr, ffi::PyCFunctionFastWithKeywords); 2] = [
        (
            c"add",
            c"add($self, id, expiration_ms)\n--\n\nSchedules id at expiration_ms; False if that is already reached.",
            add_fast,
        ),
        (
            c"cancel",
            c"cancel($self, id)\n--\n\nDrops id's deadline; False if it is not pending.",
            cancel_fast,
        ),
    ];
    let slow = [
        ty.getattr(intern!(py, "add"))?.unbind(),
        ty.getattr(intern!(py, "cancel"))?.unbind(),
    ];
    if SLOW.set(py, slow).is_err() {
        return Ok(()); // already registered (the module initialised again)
    }
    for (name, doc, meth) in fast {
        // CPython keeps a pointer to the definition for as long as the
        // descriptor lives: it is leaked, once per process.
        let def = Box::leak(Box::new(ffi::PyMethodDef {
            ml_name: name.as_ptr(),
            ml_meth: ffi::PyMethodDefPointer {
                PyCFunctionFastWithKeywords: meth,
            },
            ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
            ml_doc: doc.as_ptr(),
        }));
        // SAFETY: the type object is alive (held by `ty`) and `def` is a
        // valid definition that outlives the descriptor; a null result is
        // turned into the pending Python error.
        let descr = unsafe {
            Bound::from_owned_ptr_or_err(py, ffi::PyDescr_NewMethod(ty.as_type_ptr(), def))
        }?;
        ty.setattr(name.to_str().expect("ASCII name"), descr)?;
    }
    Ok(())
}

/// `add(id, expiration_ms)` with two exact ints in range: converts them,
/// borrows the wheel and returns a bool without PyO3's argument parsing.
/// Anything else (keywords, other arities, int subclasses, out-of-range
/// values, a re-entrant call) goes to PyO3's method, which gives the same
/// result or error as before.
unsafe extern "C" fn add_fast(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    if nargs == 2 && kwnames.is_null() {
        // SAFETY: CPython passes `nargs` valid argument pointers, and `slf`
        // is a TimingWheel: the method descriptor checks its type before the
        // call (the class cannot be subclassed). The GIL is held.
        unsafe {
            if let (Some(id), Some(expiration)) = (exact_i64(*args), exact_i64(*args.add(1))) {
                let py = Python::assume_gil_acquired();
                if let Some(out) = wheel_call(py, slf, |s| s.inner.add(id, expiration)) {
                    return out;
                }
            }
        }
    }
    // SAFETY: the arguments are CPython's, passed on unchanged.
    unsafe { slow(ADD, slf, args, nargs, kwnames) }
}

/// `cancel(id)`, as `add_fast`.
unsafe extern "C" fn cancel_fast(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    if nargs == 1 && kwnames.is_null() {
        // SAFETY: as in `add_fast`.
        unsafe {
            if let Some(id) = exact_i64(*args) {
                let py = Python::assume_gil_acquired();
                if let Some(out) = wheel_call(py, slf, |s| s.inner.cancel(id)) {
                    return out;
                }
            }
        }
    }
    // SAFETY: the arguments are CPython's, passed on unchanged.
    unsafe { slow(CANCEL, slf, args, nargs, kwnames) }
}

/// The value of an exact int that fits in i64; None (no error pending) for
/// anything else.
///
/// # Safety
/// `obj` is a valid object and the GIL is held.
#[inline(always)]
unsafe fn exact_i64(obj: *mut ffi::PyObject) -> Option<i64> {
    // SAFETY: per the contract above.
    unsafe {
        if ffi::PyLong_CheckExact(obj) == 0 {
            return None;
        }
        // PyLong_AsLong where a C long is 64 bits (not Windows): CPython's PyLong_AsLongLong
        // converts an int of more than one digit (any ms timestamp) through
        // a byte array, PyLong_AsLong adds up its digits.
        #[cfg(all(target_pointer_width = "64", not(windows)))]
        let v: i64 = ffi::PyLong_AsLong(obj);
        #[cfg(not(all(target_pointer_width = "64", not(windows))))]
        let v: i64 = ffi::PyLong_AsLongLong(obj);
        if v == -1 && !ffi::PyErr_Occurred().is_null() {
            ffi::PyErr_Clear(); // out of range: PyO3's path raises it again
            return None;
        }
        Some(v)
    }
}

/// Runs `f` on the wheel `slf` and returns the new reference to the bool;
/// None when the state is borrowed (a re-entrant call), left to the slow
/// path. A panic becomes a `PanicException`, as PyO3 raises it.
///
/// # Safety
/// `slf` is a live TimingWheel and the GIL is held.
#[inline(always)]
unsafe fn wheel_call(
    py: Python<'_>,
    slf: *mut ffi::PyObject,
    f: impl FnOnce(&mut State) -> bool,
) -> Option<*mut ffi::PyObject> {
    // SAFETY: per the contract above; the borrowed reference lives as long
    // as CPython's call, which outlasts this function.
    let any = unsafe { Borrowed::from_ptr(py, slf) };
    // SAFETY: `slf`'s type is TimingWheel (see `add_fast`).
    let wheel: &Bound<'_, PyTimingWheel> = unsafe { any.downcast_unchecked() };
    let mut state = wheel.get().state.get(py).try_borrow_mut().ok()?;
    let out = match panic::catch_unwind(panic::AssertUnwindSafe(|| f(&mut state))) {
        Ok(true) => py_bool(true),
        Ok(false) => py_bool(false),
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic in TimingWheel".to_owned());
            PanicException::new_err(msg).restore(py);
            ptr::null_mut()
        }
    };
    Some(out)
}

#[inline(always)]
fn py_bool(v: bool) -> *mut ffi::PyObject {
    // SAFETY: True and False are static objects; the caller gets a new
    // reference, as CPython expects of a method's result.
    unsafe { ffi::Py_NewRef(if v { ffi::Py_True() } else { ffi::Py_False() }) }
}

/// Calls PyO3's method `which` with CPython's vectorcall arguments.
///
/// # Safety
/// The arguments are those CPython passed to the fast entry point.
#[cold]
#[inline(never)]
unsafe fn slow(
    which: usize,
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    Python::with_gil(|py| {
        let call = || -> PyResult<Py<PyAny>> {
            let nargs = usize::try_from(nargs).expect("non-negative nargs");
            let descr = SLOW.get(py).expect("registered")[which].bind(py);
            // SAFETY: CPython passes `nargs` positional argument pointers
            // followed by one per keyword name, all valid for the call.
            let arg = |i: usize| unsafe { Borrowed::from_ptr(py, *args.add(i)) };
            let mut positional = Vec::with_capacity(nargs + 1);
            // SAFETY: `slf` is valid for the call.
            positional.push(unsafe { Borrowed::from_ptr(py, slf) });
            positional.extend((0..nargs).map(arg));
            let kwargs = if kwnames.is_null() {
                None
            } else {
                // SAFETY: a non-null `kwnames` is a tuple of str.
                let names = unsafe { Borrowed::from_ptr(py, kwnames) };
                let kwargs = PyDict::new(py);
                for (j, name) in names.try_iter()?.enumerate() {
                    kwargs.set_item(name?, arg(nargs + j))?;
                }
                Some(kwargs)
            };
            Ok(descr
                .call(PyTuple::new(py, positional)?, kwargs.as_ref())?
                .unbind())
        };
        match call() {
            Ok(out) => out.into_ptr(),
            Err(err) => {
                err.restore(py);
                ptr::null_mut()
            }
        }
    })
}
