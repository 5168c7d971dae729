//! Maps pylog-core errors to the exception classes of `pylog.errors`, which
//! are defined once, in Python, each with the Kafka error code it answers with.
//! The classes are resolved once, when the module is initialised ([`init`]),
//! not looked up by name each time an error is raised.

use pylog_core::Error;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::PyType;

/// A class of `pylog.errors` a core error maps to; the discriminant indexes
/// [`NAMES`] and the resolved classes.
#[derive(Clone, Copy)]
enum Class {
    CorruptRecord,
    InvalidRecord,
    MessageTooLarge,
    InvalidTimestamp,
    UnsupportedCompression,
    InvalidOffset,
    IndexOffsetOverflow,
    CorruptIndex,
    Storage,
}

/// The Python names of the classes, in [`Class`] order.
const NAMES: [&str; 9] = [
    "CorruptRecordError",
    "InvalidRecordError",
    "MessageTooLargeError",
    "InvalidTimestampError",
    "UnsupportedCompressionTypeError",
    "InvalidOffsetError",
    "IndexOffsetOverflowError",
    "CorruptIndexError",
    "KafkaStorageError",
];

static CLASSES: GILOnceCell<Vec<Py<PyType>>> = GILOnceCell::new();

fn classes(py: Python<'_>) -> PyResult<&[Py<PyType>]> {
    CLASSES
        .get_or_try_init(py, || {
            let module = py.import("pylog.errors")?;
            NAMES
                .iter()
                .map(|name| Ok(module.getattr(*name)?.downcast_into::<PyType>()?.unbind()))
                .collect()
        })
        .map(Vec::as_slice)
}

/// Resolve the exception classes; called once from the module's init, so a
/// missing class fails the import rather than the first error.
pub fn init(py: Python<'_>) -> PyResult<()> {
    classes(py).map(|_| ())
}

fn raise<'py, A>(py: Python<'py>, class: Class, args: A) -> PyErr
where
    A: pyo3::call::PyCallArgs<'py>,
{
    let made = (|| -> PyResult<PyErr> {
        let cls = classes(py)?[class as usize].bind(py);
        Ok(PyErr::from_value(cls.call1(args)?))
    })();
    made.unwrap_or_else(|e| e)
}

/// The Python exception for a core error.
pub fn to_py(err: Error) -> PyErr {
    Python::with_gil(|py| {
        let msg = err.to_string();
        match err {
            Error::CorruptRecord { position, .. } => {
                raise(py, Class::CorruptRecord, (msg, position))
            }
            Error::InvalidRecord(_) => raise(py, Class::InvalidRecord, (msg,)),
            Error::MessageTooLarge { .. } | Error::RecordsTooLarge { .. } => {
                raise(py, Class::MessageTooLarge, (msg,))
            }
            Error::InvalidTimestamp(_) => raise(py, Class::InvalidTimestamp, (msg,)),
            // (message, [(batch index, why)]): the Produce response names them
            Error::RecordErrors { timestamp, errors } => {
                let class = if timestamp {
                    Class::InvalidTimestamp
                } else {
                    Class::InvalidRecord
                };
                raise(py, class, (msg, errors))
            }
            Error::UnsupportedCompression(_) => raise(py, Class::UnsupportedCompression, (msg,)),
            Error::InvalidOffset(_) => raise(py, Class::InvalidOffset, (msg,)),
            Error::IndexOffsetOverflow(_) => raise(py, Class::IndexOffsetOverflow, (msg,)),
            Error::CorruptIndex(_) => raise(py, Class::CorruptIndex, (msg,)),
            Error::Io(e) => raise(py, Class::Storage, (msg, e.raw_os_error())),
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
