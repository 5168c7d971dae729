//! `pylog._native`: the PyO3 face of pylog-core. Each file here mirrors one
//! area of the core and only converts values and maps errors.

use pyo3::prelude::*;

mod batch;
mod buffer;
mod cleaner;
mod columnar;
mod errors;
mod index;
mod segment;
mod timing_wheel;

/// CRC32C (Castagnoli) of a buffer, for Python-side file formats that carry one
/// (the producer-state snapshot).
#[pyfunction]
fn crc32c(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<u32> {
    let data = buffer::Bytes::get(data)?;
    let bytes = data.as_slice();
    Ok(buffer::maybe_allow_threads(py, bytes.len(), || {
        pylog_core::batch::crc32c(bytes)
    }))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::init(m.py())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(crc32c, m)?)?;
    batch::register(m)?;
    cleaner::register(m)?;
    columnar::register(m)?;
    index::register(m)?;
    segment::register(m)?;
    timing_wheel::register(m)?;
    Ok(())
}
