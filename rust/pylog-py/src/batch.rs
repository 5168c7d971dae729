//! Record batches: validation, the leader's in-place offset assignment, legacy
//! conversion, codecs, decoding and building. Buffers cross the boundary once
//! per call; work on more than a few KB runs with the GIL released.

use pylog_core::batch::BatchMeta;
use pylog_core::records::{self as core_records, BuildOptions, BuildRecord};
use pylog_core::validate::{self as core_validate, AssignOptions, ValidationOptions};
use pylog_core::{batch_iterator, compression, legacy, recompress};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyTuple};

use crate::buffer::{maybe_allow_threads, with_bytes, Bytes};
use crate::errors::IntoPyResult;

/// Defines `BatchInfo`, the Python mirror of the core's `BatchMeta` field for
/// field: the struct and its conversion come from one field list.
macro_rules! batch_info {
    ($($field:ident: $ty:ty),* $(,)?) => {
        /// The header facts of one batch (v2, or a legacy v0/v1 message/wrapper).
        #[pyclass(module = "pylog._native", name = "BatchInfo", frozen, eq, get_all)]
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct BatchInfo {
            $(pub $field: $ty,)*
        }

        impl From<BatchMeta> for BatchInfo {
            fn from(m: BatchMeta) -> BatchInfo {
                BatchInfo { $($field: m.$field,)* }
            }
        }
    };
}

batch_info!(
    position: u64,
    size: usize,
    magic: i8,
    base_offset: i64,
    last_offset: i64,
    partition_leader_epoch: i32,
    crc: u32,
    compression: u8,
    timestamp_type: u8,
    is_transactional: bool,
    is_control: bool,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    last_sequence: i32,
    records_count: i32,
    delete_horizon_ms: i64,
);

impl From<&BatchMeta> for BatchInfo {
    fn from(m: &BatchMeta) -> BatchInfo {
        BatchInfo::from(*m)
    }
}

/// A Python list of `BatchInfo` for core batch facts (used by segment scans too).
pub fn batch_info_list<'py>(py: Python<'py>, metas: &[BatchMeta]) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, metas.iter().map(BatchInfo::from))
}

#[pymethods]
impl BatchInfo {
    fn __repr__(&self) -> String {
        format!(
            "BatchInfo(position={}, size={}, magic={}, base_offset={}, last_offset={}, \
             partition_leader_epoch={}, crc={:#010x}, compression={}, timestamp_type={}, \
             is_transactional={}, is_control={}, base_timestamp={}, max_timestamp={}, \
             producer_id={}, producer_epoch={}, base_sequence={}, last_sequence={}, records_count={}, \
             delete_horizon_ms={})",
            self.position,
            self.size,
            self.magic,
            self.base_offset,
            self.last_offset,
            self.partition_leader_epoch,
            self.crc,
            self.compression,
            self.timestamp_type,
            py_bool(self.is_transactional),
            py_bool(self.is_control),
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.last_sequence,
            self.records_count,
            self.delete_horizon_ms
        )
    }
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// Everything the broker needs from validating (and assigning) a record set.
#[pyclass(module = "pylog._native", name = "AppendInfo", frozen)]
pub struct AppendInfo {
    inner: core_validate::AppendInfo,
}

#[pymethods]
impl AppendInfo {
    #[getter]
    fn first_offset(&self) -> i64 {
        self.inner.first_offset
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
    fn num_records(&self) -> i64 {
        self.inner.num_records
    }
    #[getter]
    fn num_batches(&self) -> usize {
        self.inner.num_batches
    }
    #[getter]
    fn valid_bytes(&self) -> usize {
        self.inner.valid_bytes
    }
    #[getter]
    fn source_magic(&self) -> i8 {
        self.inner.source_magic
    }
    #[getter]
    fn source_compression(&self) -> u8 {
        self.inner.source_compression
    }
    #[getter]
    fn producer_id(&self) -> i64 {
        self.inner.producer_id
    }
    #[getter]
    fn producer_epoch(&self) -> i16 {
        self.inner.producer_epoch
    }
    #[getter]
    fn first_sequence(&self) -> i32 {
        self.inner.first_sequence
    }
    #[getter]
    fn last_sequence(&self) -> i32 {
        self.inner.last_sequence
    }
    #[getter]
    fn is_transactional(&self) -> bool {
        self.inner.is_transactional
    }
    #[getter]
    fn is_control(&self) -> bool {
        self.inner.is_control
    }
    #[getter]
    fn batches<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        batch_info_list(py, &self.inner.batches)
    }
    fn __repr__(&self) -> String {
        let i = &self.inner;
        format!(
            "AppendInfo(first_offset={}, last_offset={}, max_timestamp={}, offset_of_max_timestamp={}, \
             num_records={}, num_batches={}, valid_bytes={}, source_magic={}, source_compression={}, \
             producer_id={}, producer_epoch={}, first_sequence={}, last_sequence={}, \
             is_transactional={}, is_control={})",
            i.first_offset,
            i.last_offset,
            i.max_timestamp,
            i.offset_of_max_timestamp,
            i.num_records,
            i.num_batches,
            i.valid_bytes,
            i.source_magic,
            i.source_compression,
            i.producer_id,
            i.producer_epoch,
            i.first_sequence,
            i.last_sequence,
            py_bool(i.is_transactional),
            py_bool(i.is_control)
        )
    }
}

/// One decoded record.
#[pyclass(module = "pylog._native", name = "Record", frozen)]
pub struct Record {
    inner: core_records::Record,
}

fn opt_bytes<'py>(py: Python<'py>, v: &Option<Vec<u8>>) -> Option<Bound<'py, PyBytes>> {
    v.as_ref().map(|b| PyBytes::new(py, b))
}

#[pymethods]
impl Record {
    #[getter]
    fn offset(&self) -> i64 {
        self.inner.offset
    }
    #[getter]
    fn timestamp(&self) -> i64 {
        self.inner.timestamp
    }
    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        opt_bytes(py, &self.inner.key)
    }
    #[getter]
    fn value<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        opt_bytes(py, &self.inner.value)
    }
    #[getter]
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .inner
            .headers
            .iter()
            .map(|(k, v)| {
                PyTuple::new(
                    py,
                    [
                        k.into_pyobject(py)?.into_any(),
                        opt_bytes(py, v).into_pyobject(py)?,
                    ],
                )
            })
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }
    #[getter]
    fn sequence(&self) -> i32 {
        self.inner.sequence
    }
    fn __repr__(&self) -> String {
        let r = &self.inner;
        let show = |v: &Option<Vec<u8>>| match v {
            None => "None".to_string(),
            Some(b) if b.len() > 32 => format!("<{} bytes>", b.len()),
            Some(b) => format!("b{:?}", String::from_utf8_lossy(b)),
        };
        format!(
            "Record(offset={}, timestamp={}, key={}, value={}, headers={}, sequence={})",
            r.offset,
            r.timestamp,
            show(&r.key),
            show(&r.value),
            r.headers.len(),
            r.sequence
        )
    }
}

#[pyfunction]
#[pyo3(signature = (records, *, max_batch_size, deep = false, max_decompressed_size = None))]
fn analyze_records(
    py: Python<'_>,
    records: &Bound<'_, PyAny>,
    max_batch_size: usize,
    deep: bool,
    max_decompressed_size: Option<usize>,
) -> PyResult<AppendInfo> {
    let opts = ValidationOptions {
        max_batch_size,
        deep,
        max_decompressed_size: max_decompressed_size.unwrap_or(compression::MAX_DECOMPRESSED_SIZE),
    };
    let inner = with_bytes(py, records, |data| {
        core_validate::analyze_records(data, &opts)
    })?;
    Ok(AppendInfo { inner })
}

#[pyfunction]
#[pyo3(signature = (
    records, *, base_offset, partition_leader_epoch, now_ms, log_append_time,
    max_batch_size, timestamp_before_max_ms, timestamp_after_max_ms, require_keys,
    max_decompressed_size = None
))]
#[allow(clippy::too_many_arguments)]
fn validate_and_assign_offsets(
    py: Python<'_>,
    records: &Bound<'_, PyAny>,
    base_offset: i64,
    partition_leader_epoch: i32,
    now_ms: i64,
    log_append_time: bool,
    max_batch_size: usize,
    timestamp_before_max_ms: i64,
    timestamp_after_max_ms: i64,
    require_keys: bool,
    max_decompressed_size: Option<usize>,
) -> PyResult<AppendInfo> {
    let mut b = Bytes::get(records)?;
    let data = b.as_mut_slice()?;
    let opts = AssignOptions {
        base_offset,
        partition_leader_epoch,
        now_ms,
        log_append_time,
        max_batch_size,
        timestamp_before_max_ms,
        timestamp_after_max_ms,
        require_keys,
        max_decompressed_size: max_decompressed_size.unwrap_or(compression::MAX_DECOMPRESSED_SIZE),
    };
    let len = data.len();
    let inner = maybe_allow_threads(py, len, || {
        core_validate::validate_and_assign_offsets(data, &opts)
    })
    .py()?;
    Ok(AppendInfo { inner })
}

#[pyfunction]
#[pyo3(signature = (records, *, max_decompressed_size = None))]
fn convert_legacy_to_v2<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    max_decompressed_size: Option<usize>,
) -> PyResult<Bound<'py, PyByteArray>> {
    let limit = max_decompressed_size.unwrap_or(compression::MAX_DECOMPRESSED_SIZE);
    let out = with_bytes(py, records, |data| {
        legacy::convert_legacy_to_v2_bounded(data, limit)
    })?;
    Ok(PyByteArray::new(py, &out))
}

/// The batches of `records` rebuilt with `codec` (a topic's compression.type),
/// or None when every batch uses it already; checked first as
/// `analyze_records(deep=True)` does. The work runs with the GIL released.
#[pyfunction]
#[pyo3(signature = (records, codec, *, max_batch_size, max_decompressed_size = None))]
fn recompress_batches<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    codec: u8,
    max_batch_size: usize,
    max_decompressed_size: Option<usize>,
) -> PyResult<Option<Bound<'py, PyByteArray>>> {
    let opts = ValidationOptions {
        max_batch_size,
        deep: true,
        max_decompressed_size: max_decompressed_size.unwrap_or(compression::MAX_DECOMPRESSED_SIZE),
    };
    let out = with_bytes(py, records, |data| {
        recompress::recompress_batches(data, codec, &opts)
    })?;
    Ok(out.map(|b| PyByteArray::new(py, &b)))
}

#[pyfunction]
fn compress<'py>(
    py: Python<'py>,
    codec: u8,
    data: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let out = with_bytes(py, data, |data| compression::compress(codec, data))?;
    Ok(PyBytes::new(py, &out))
}

#[pyfunction]
#[pyo3(signature = (codec, data, *, max_size = None))]
fn decompress<'py>(
    py: Python<'py>,
    codec: u8,
    data: &Bound<'py, PyAny>,
    max_size: Option<usize>,
) -> PyResult<Bound<'py, PyBytes>> {
    let limit = max_size.unwrap_or(compression::MAX_DECOMPRESSED_SIZE);
    let out = with_bytes(py, data, |data| {
        compression::decompress_bounded(codec, data, limit)
    })?;
    Ok(PyBytes::new(py, &out))
}

#[pyfunction]
fn decode_records(py: Python<'_>, batch: &Bound<'_, PyAny>) -> PyResult<Vec<Record>> {
    let records = with_bytes(py, batch, core_validate::decode_batch_records)?;
    Ok(records.into_iter().map(|inner| Record { inner }).collect())
}

/// The header facts of the whole batches at the start of `data` (at most
/// `max_batches`), and the bytes they cover: one crossing per buffer.
#[pyfunction]
#[pyo3(signature = (data, max_batches = usize::MAX))]
fn batch_infos<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    max_batches: usize,
) -> PyResult<(Bound<'py, PyList>, usize)> {
    // Headers only: the work is per batch, not per byte, so the GIL is kept.
    let data = Bytes::get(data)?;
    let (metas, covered) = batch_iterator::batch_metas(data.as_slice(), max_batches).py()?;
    Ok((batch_info_list(py, &metas)?, covered))
}

/// Bytes of the whole batches at the start of `data`, by their length fields.
#[pyfunction]
fn complete_batches_size(data: &Bound<'_, PyAny>) -> PyResult<usize> {
    Ok(batch_iterator::complete_prefix(
        Bytes::get(data)?.as_slice(),
    ))
}

/// One batch's header facts and records, as `decode_batches` returns them.
type DecodedBatch = (BatchInfo, Vec<Record>);

/// Every whole batch of `data` with its records decoded, and the bytes they
/// cover: one crossing per buffer, the GIL released while decoding.
#[pyfunction]
fn decode_batches<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
) -> PyResult<(Vec<DecodedBatch>, usize)> {
    let (batches, covered) = with_bytes(py, data, batch_iterator::decode_batches)?;
    let out = batches
        .into_iter()
        .map(|(meta, records)| {
            let records = records.into_iter().map(|inner| Record { inner }).collect();
            (BatchInfo::from(meta), records)
        })
        .collect();
    Ok((out, covered))
}

/// `bytes | bytearray | memoryview | None` as owned bytes.
fn extract_opt_bytes(obj: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u8>>> {
    if obj.is_none() {
        return Ok(None);
    }
    if let Ok(b) = obj.downcast::<PyBytes>() {
        return Ok(Some(b.as_bytes().to_vec()));
    }
    if obj.is_instance_of::<pyo3::types::PyString>() {
        return Err(PyTypeError::new_err(
            "record keys and values must be bytes or None, not str",
        ));
    }
    Ok(Some(Bytes::get(obj)?.as_slice().to_vec()))
}

fn extract_record(item: &Bound<'_, PyAny>) -> PyResult<BuildRecord> {
    let t = item.downcast::<PyTuple>().map_err(|_| {
        PyTypeError::new_err("each record must be a tuple (key, value, headers, timestamp_ms)")
    })?;
    if t.len() != 4 {
        return Err(PyTypeError::new_err(format!(
            "each record must be a 4-tuple (key, value, headers, timestamp_ms), got {} items",
            t.len()
        )));
    }
    let mut headers = Vec::new();
    for h in t.get_item(2)?.try_iter()? {
        let h = h?;
        let (k, v): (String, Bound<'_, PyAny>) = h.extract()?;
        headers.push((k, extract_opt_bytes(&v)?));
    }
    Ok(BuildRecord {
        key: extract_opt_bytes(&t.get_item(0)?)?,
        value: extract_opt_bytes(&t.get_item(1)?)?,
        headers,
        timestamp: t.get_item(3)?.extract()?,
    })
}

#[pyfunction]
#[pyo3(signature = (
    records, *, base_offset = 0, compression = 0, partition_leader_epoch = -1,
    producer_id = -1, producer_epoch = -1, base_sequence = -1,
    is_transactional = false, is_control = false, timestamp_type = 0
))]
#[pyo3(
    text_signature = "(records, *, base_offset=0, compression=0, partition_leader_epoch=-1, \
    producer_id=-1, producer_epoch=-1, base_sequence=-1, is_transactional=False, is_control=False, \
    timestamp_type=0)"
)]
#[allow(clippy::too_many_arguments)]
fn build_batch<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    base_offset: i64,
    compression: u8,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    is_transactional: bool,
    is_control: bool,
    timestamp_type: u8,
) -> PyResult<Bound<'py, PyBytes>> {
    let recs = records
        .try_iter()?
        .map(|item| extract_record(&item?))
        .collect::<PyResult<Vec<_>>>()?;
    if timestamp_type > 1 {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "timestamp_type must be 0 or 1",
        ));
    }
    let opts = BuildOptions {
        base_offset,
        compression,
        partition_leader_epoch,
        producer_id,
        producer_epoch,
        base_sequence,
        is_transactional,
        is_control,
        timestamp_type,
    };
    let size: usize = recs
        .iter()
        .map(|r| r.key.as_ref().map_or(0, Vec::len) + r.value.as_ref().map_or(0, Vec::len))
        .sum();
    let out = maybe_allow_threads(py, size, || core_records::build_batch(&recs, &opts)).py()?;
    Ok(PyBytes::new(py, &out))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("COMPRESSION_NONE", compression::NONE)?;
    m.add("COMPRESSION_GZIP", compression::GZIP)?;
    m.add("COMPRESSION_SNAPPY", compression::SNAPPY)?;
    m.add("COMPRESSION_LZ4", compression::LZ4)?;
    m.add("COMPRESSION_ZSTD", compression::ZSTD)?;
    m.add("MAX_DECOMPRESSED_SIZE", compression::MAX_DECOMPRESSED_SIZE)?;
    m.add("TIMESTAMP_TYPE_CREATE_TIME", 0u8)?;
    m.add("TIMESTAMP_TYPE_LOG_APPEND_TIME", 1u8)?;
    m.add_class::<BatchInfo>()?;
    m.add_class::<AppendInfo>()?;
    m.add_class::<Record>()?;
    m.add_function(wrap_pyfunction!(analyze_records, m)?)?;
    m.add_function(wrap_pyfunction!(validate_and_assign_offsets, m)?)?;
    m.add_function(wrap_pyfunction!(convert_legacy_to_v2, m)?)?;
    m.add_function(wrap_pyfunction!(recompress_batches, m)?)?;
    m.add_function(wrap_pyfunction!(compress, m)?)?;
    m.add_function(wrap_pyfunction!(decompress, m)?)?;
    m.add_function(wrap_pyfunction!(decode_records, m)?)?;
    m.add_function(wrap_pyfunction!(batch_infos, m)?)?;
    m.add_function(wrap_pyfunction!(complete_batches_size, m)?)?;
    m.add_function(wrap_pyfunction!(decode_batches, m)?)?;
    m.add_function(wrap_pyfunction!(build_batch, m)?)?;
    Ok(())
}
