//! `pylog._native`: the PyO3 face of pylog-core. Each file here mirrors one
//! area of the core and only converts values and maps errors.

use pyo3::prelude::*;

mod batch;
mod errors;
mod index;
mod segment;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    batch::register(m)?;
    index::register(m)?;
    segment::register(m)?;
    Ok(())
}
