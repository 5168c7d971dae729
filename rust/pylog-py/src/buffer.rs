//! Python buffers on the Rust side: any contiguous bytes-like object borrowed
//! without a copy, and the rule for when a call releases the GIL.

use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::prelude::*;

use crate::errors::IntoPyResult;

/// Above this many bytes a call releases the GIL.
pub const GIL_RELEASE_BYTES: usize = 4096;

/// Run `f` with the GIL released when `len` is worth it.
pub fn maybe_allow_threads<T, F>(py: Python<'_>, len: usize, f: F) -> T
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    if len > GIL_RELEASE_BYTES {
        py.allow_threads(f)
    } else {
        f()
    }
}

/// `f` over the bytes of `obj` (any contiguous bytes-like object), with the
/// GIL released when they are many, a core error raised as its exception:
/// the whole of most buffer-taking calls.
pub fn with_bytes<T, F>(py: Python<'_>, obj: &Bound<'_, PyAny>, f: F) -> PyResult<T>
where
    F: FnOnce(&[u8]) -> pylog_core::Result<T> + Send,
    T: Send,
{
    let b = Bytes::get(obj)?;
    let data = b.as_slice();
    maybe_allow_threads(py, data.len(), || f(data)).py()
}

/// The buffer protocol. pyo3 hides it under `abi3-py310` because it joined the
/// limited API only in 3.11, but `PyObject_GetBuffer`/`PyBuffer_Release` and
/// the `Py_buffer` layout have been exported and unchanged since Python 3.3,
/// so a 3.10 interpreter provides them too.
mod ffi_buffer {
    use pyo3::ffi::{PyObject, Py_ssize_t};
    use std::os::raw::{c_char, c_int, c_void};

    #[repr(C)]
    pub struct PyBufferView {
        pub buf: *mut c_void,
        pub obj: *mut PyObject,
        pub len: Py_ssize_t,
        pub itemsize: Py_ssize_t,
        pub readonly: c_int,
        pub ndim: c_int,
        pub format: *mut c_char,
        pub shape: *mut Py_ssize_t,
        pub strides: *mut Py_ssize_t,
        pub suboffsets: *mut Py_ssize_t,
        pub internal: *mut c_void,
    }

    /// Contiguous bytes, no format/shape requested.
    pub const PYBUF_SIMPLE: c_int = 0;

    extern "C" {
        pub fn PyObject_GetBuffer(
            obj: *mut PyObject,
            view: *mut PyBufferView,
            flags: c_int,
        ) -> c_int;
        pub fn PyBuffer_Release(view: *mut PyBufferView);
    }
}

/// A contiguous byte buffer (bytes, bytearray, memoryview, ...) exported by a
/// Python object for as long as this lives. Not `Send`: it is released with
/// the GIL held, by the call that took it.
pub struct Bytes {
    view: Box<ffi_buffer::PyBufferView>,
}

impl Bytes {
    pub fn get(obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
        let mut view = Box::new(ffi_buffer::PyBufferView {
            buf: std::ptr::null_mut(),
            obj: std::ptr::null_mut(),
            len: 0,
            itemsize: 0,
            readonly: 0,
            ndim: 0,
            format: std::ptr::null_mut(),
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            suboffsets: std::ptr::null_mut(),
            internal: std::ptr::null_mut(),
        });
        // SAFETY: a live object and a zeroed view; on success the view holds a
        // reference to the exporter until PyBuffer_Release in Drop.
        let rc = unsafe {
            ffi_buffer::PyObject_GetBuffer(obj.as_ptr(), &mut *view, ffi_buffer::PYBUF_SIMPLE)
        };
        if rc != 0 {
            let err = PyErr::take(obj.py()).unwrap_or_else(|| PyBufferError::new_err("no buffer"));
            if err.is_instance_of::<PyBufferError>(obj.py())
                || err.is_instance_of::<PyTypeError>(obj.py())
            {
                return Err(PyTypeError::new_err(format!(
                    "a contiguous bytes-like object (bytes, bytearray, memoryview) is required, not {}",
                    obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                )));
            }
            return Err(err);
        }
        Ok(Bytes { view })
    }

    pub fn len(&self) -> usize {
        self.view.len.max(0) as usize
    }

    /// The bytes. The exporter keeps them alive (and a bytearray unresizable)
    /// while `self` holds the buffer.
    pub fn as_slice(&self) -> &[u8] {
        if self.len() == 0 || self.view.buf.is_null() {
            return &[];
        }
        // SAFETY: a PyBUF_SIMPLE export is `len` contiguous bytes at `buf`, kept
        // (neither freed nor resized) until the view is released.
        unsafe { std::slice::from_raw_parts(self.view.buf as *const u8, self.len()) }
    }

    /// The bytes, writable; TypeError for a read-only buffer.
    pub fn as_mut_slice(&mut self) -> PyResult<&mut [u8]> {
        if self.view.readonly != 0 {
            return Err(PyTypeError::new_err(
                "records must be a writable buffer (bytearray or writable memoryview), not read-only",
            ));
        }
        if self.len() == 0 || self.view.buf.is_null() {
            return Ok(&mut []);
        }
        // SAFETY: as `as_slice`, and the exporter declared the memory writable;
        // `&mut self` makes this the only view handed out.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.view.buf as *mut u8, self.len()) })
    }
}

impl Drop for Bytes {
    fn drop(&mut self) {
        // SAFETY: the view was filled by a successful PyObject_GetBuffer, and a
        // `Bytes` only lives inside a #[pyfunction] call, with the GIL held.
        unsafe { ffi_buffer::PyBuffer_Release(&mut *self.view) };
    }
}
