//! Compaction's native passes over an in-memory log of 100k records, 10% of
//! them unique keys: building the offset map, then filtering the batches.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use pylog_core::cleaner::{build_offset_map, clean_batches, CleanOptions, OffsetMap};
use pylog_core::records::{build_batch, BuildOptions, BuildRecord};

fn dirty_log() -> Vec<u8> {
    let mut out = Vec::new();
    for b in 0..1000i64 {
        let records: Vec<BuildRecord> = (0..100i64)
            .map(|i| BuildRecord {
                key: Some(format!("key-{}", (b * 100 + i) % 10_000).into_bytes()),
                value: Some(vec![b as u8; 100]),
                headers: vec![],
                timestamp: 1_700_000_000_000 + b,
            })
            .collect();
        let opts = BuildOptions {
            base_offset: b * 100,
            ..Default::default()
        };
        out.extend(build_batch(&records, &opts).unwrap());
    }
    out
}

fn bench(c: &mut Criterion) {
    let log = dirty_log();
    let mut g = c.benchmark_group("cleaner");
    g.throughput(Throughput::Bytes(log.len() as u64));
    let mut map = OffsetMap::new(24 << 16, 0.9);
    g.bench_function("build_offset_map", |b| {
        b.iter(|| {
            map.clear();
            build_offset_map(
                &mut map,
                &log,
                0,
                i64::MAX,
                0,
                pylog_core::compression::MAX_DECOMPRESSED_SIZE,
            )
            .unwrap()
        })
    });
    g.bench_function("clean_batches", |b| {
        b.iter(|| clean_batches(&mut map, &log, &CleanOptions::default(), 0).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
