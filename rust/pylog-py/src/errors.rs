//! Maps pylog-core errors to the exception classes of `pylog.errors`, which
//! are defined once, in Python, each with the Kafka error code it answers with.

use pylog_core::Error;
use pyo3::prelude::*;

fn raise<'py, A>(py: Python<'py>, class: &str, args: A) -> PyErr
where
    A: pyo3::call::PyCallArgs<'py>,
{
    let made = (|| -> PyResult<PyErr> {
        let module = py.import("pylog.errors")?;
        let cls = module.getattr(class)?;
        let exc = cls.call1(args)?;
        Ok(PyErr::from_value(exc))
    })();
    made.unwrap_or_else(|e| e)
}

/// The Python exception for a core error.
pub fn to_py(err: Error) -> PyErr {
    Python::with_gil(|py| {
        let msg = err.to_string();
        match err {
            Error::CorruptRecord { position, .. } => {
                raise(py, "CorruptRecordError", (msg, position))
            }
            Error::InvalidRecord(_) => raise(py, "InvalidRecordError", (msg,)),
            Error::MessageTooLarge { .. } => raise(py, "MessageTooLargeError", (msg,)),
            Error::InvalidTimestamp(_) => raise(py, "InvalidTimestampError", (msg,)),
            Error::UnsupportedCompression(_) => {
                raise(py, "UnsupportedCompressionTypeError", (msg,))
            }
            Error::InvalidOffset(_) => raise(py, "InvalidOffsetError", (msg,)),
            Error::IndexOffsetOverflow(_) => raise(py, "IndexOffsetOverflowError", (msg,)),
            Error::CorruptIndex(_) => raise(py, "CorruptIndexError", (msg,)),
            Error::Io(e) => raise(py, "KafkaStorageError", (msg, e.raw_os_error())),
        }
    })
}

/// `?`-friendly conversion of core results.
pub trait IntoPyResult<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for pylog_core::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}
