//! Broker-side recompression (a topic whose compression.type differs from the
//! producer's codec) of one ~1 MiB request: lz4 from the producer, zstd for the
//! topic, with 1 KiB and 100 B records. `recompress_batches` re-frames the
//! records in place of a decode to owned records and a rebuild (the shape of
//! the former path, without its Python objects). Throughput in records/s.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use pylog_core::compression;
use pylog_core::recompress::recompress_batches;
use pylog_core::records::{build_batch, BuildOptions, BuildRecord};
use pylog_core::validate::{analyze_records, decode_batch_records, ValidationOptions};

fn request(records: usize, value_len: usize) -> Vec<u8> {
    let records: Vec<BuildRecord> = (0..records)
        .map(|i| BuildRecord {
            key: Some(format!("key-{i:06}").into_bytes()),
            value: Some(
                (0..value_len)
                    .map(|j| ((i * 31 + j * 7) % 251) as u8)
                    .collect(),
            ),
            headers: vec![("trace".into(), Some(b"abc".to_vec()))],
            timestamp: 1_700_000_000_000 + i as i64,
        })
        .collect();
    build_batch(
        &records,
        &BuildOptions {
            compression: compression::LZ4,
            producer_id: 7,
            producer_epoch: 0,
            base_sequence: 0,
            ..Default::default()
        },
    )
    .unwrap()
}

fn opts() -> ValidationOptions {
    ValidationOptions {
        max_batch_size: 4 << 20,
        deep: true,
        max_decompressed_size: 4 << 20,
    }
}

/// Decode every record to owned fields and build the batch again.
fn decode_and_build(buf: &[u8], codec: u8) -> Vec<u8> {
    let info = analyze_records(buf, &opts()).unwrap();
    let b = &info.batches[0];
    let records: Vec<BuildRecord> = decode_batch_records(buf)
        .unwrap()
        .into_iter()
        .map(|r| BuildRecord {
            key: r.key,
            value: r.value,
            headers: r.headers,
            timestamp: r.timestamp,
        })
        .collect();
    build_batch(
        &records,
        &BuildOptions {
            compression: codec,
            producer_id: b.producer_id,
            producer_epoch: b.producer_epoch,
            base_sequence: b.base_sequence,
            ..Default::default()
        },
    )
    .unwrap()
}

fn bench(c: &mut Criterion) {
    for (records, value_len) in [(1000, 1024), (10_000, 100)] {
        let buf = request(records, value_len);
        let mut g = c.benchmark_group(format!("recompress_lz4_to_zstd_{value_len}B"));
        g.throughput(Throughput::Elements(records as u64));
        g.sample_size(20);
        g.bench_function("recompress_batches", |b| {
            b.iter(|| {
                black_box(recompress_batches(
                    black_box(&buf),
                    compression::ZSTD,
                    &opts(),
                ))
            })
        });
        g.bench_function("decode_and_build", |b| {
            b.iter(|| black_box(decode_and_build(black_box(&buf), compression::ZSTD)))
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
