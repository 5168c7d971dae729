//! Record-batch hot paths on a 1 MiB uncompressed batch (~1000 records of ~1 KB):
//! the leader's validate + assign offsets in place, the follower's analyze, and
//! the CRC32C alone as the floor; then the same records compressed with each
//! codec through the leader's path (every record read) beside the decoder
//! alone. Throughput in bytes (uncompressed) per second.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use pylog_core::compression;
use pylog_core::records::{build_batch, BuildOptions, BuildRecord};
use pylog_core::validate::{
    analyze_records, validate_and_assign_offsets, AssignOptions, ValidationOptions,
};

fn one_mib_batch(codec: u8) -> Vec<u8> {
    let records: Vec<BuildRecord> = (0..1000)
        .map(|i| BuildRecord {
            key: Some(format!("key-{i:06}").into_bytes()),
            value: Some((0..1024).map(|j| ((i * 31 + j * 7) % 251) as u8).collect()),
            headers: vec![("trace".into(), Some(b"abc".to_vec()))],
            timestamp: 1_700_000_000_000 + i as i64,
        })
        .collect();
    build_batch(
        &records,
        &BuildOptions {
            compression: codec,
            ..Default::default()
        },
    )
    .unwrap()
}

fn leader_opts() -> AssignOptions {
    AssignOptions {
        // the first batch of a client request has base offset 0; assigning 0
        // keeps it so, so the same buffer can be assigned again each iteration
        base_offset: 0,
        partition_leader_epoch: 3,
        now_ms: 1_700_000_000_500,
        max_batch_size: 2 << 20,
        ..Default::default()
    }
}

fn bench(c: &mut Criterion) {
    let mut buf = one_mib_batch(0);
    let mut g = c.benchmark_group("batch_1MiB_uncompressed");
    g.throughput(Throughput::Bytes(buf.len() as u64));

    g.bench_function("validate_and_assign_offsets", |b| {
        let o = leader_opts();
        b.iter(|| black_box(validate_and_assign_offsets(black_box(&mut buf), &o).unwrap()))
    });
    g.bench_function("validate_and_assign_offsets_log_append_time", |b| {
        let o = AssignOptions {
            log_append_time: true,
            ..leader_opts()
        };
        let mut own = buf.clone();
        let header: Vec<u8> = own[..61].to_vec();
        b.iter(|| {
            // undo the previous iteration's LogAppendTime bit (a client may not
            // send it): 61 bytes, negligible next to the 1 MiB
            own[..61].copy_from_slice(&header);
            black_box(validate_and_assign_offsets(black_box(&mut own), &o).unwrap())
        })
    });
    g.bench_function(
        "validate_and_assign_offsets_timestamp_bounds_require_keys",
        |b| {
            let o = AssignOptions {
                timestamp_before_max_ms: 3_600_000,
                timestamp_after_max_ms: 3_600_000,
                require_keys: true,
                ..leader_opts()
            };
            b.iter(|| black_box(validate_and_assign_offsets(black_box(&mut buf), &o).unwrap()))
        },
    );
    g.bench_function("analyze_records", |b| {
        let o = ValidationOptions::default();
        b.iter(|| black_box(analyze_records(black_box(&buf), &o).unwrap()))
    });
    g.bench_function("crc32c_only", |b| {
        b.iter(|| black_box(crc32c::crc32c(black_box(&buf[21..]))))
    });
    g.finish();

    // Compressed batches of 1 KiB records: every record is read on the
    // leader's path (streamed through a 64 KiB window), as Kafka's
    // LogValidator; `require_keys` adds the key check on the same pass;
    // `decompress_only` is the decoder alone into one buffer.
    for (name, codec) in [("gzip", 1u8), ("snappy", 2), ("lz4", 3), ("zstd", 4)] {
        let mut batch = one_mib_batch(codec);
        // throughput counts the uncompressed 1 MiB of records
        let mut g = c.benchmark_group(format!("batch_1MiB_{name}"));
        g.throughput(Throughput::Bytes(buf.len() as u64));
        g.bench_function("validate_and_assign_offsets", |b| {
            let o = leader_opts();
            b.iter(|| black_box(validate_and_assign_offsets(black_box(&mut batch), &o).unwrap()))
        });
        g.bench_function("validate_and_assign_offsets_require_keys", |b| {
            let o = AssignOptions {
                require_keys: true,
                ..leader_opts()
            };
            b.iter(|| black_box(validate_and_assign_offsets(black_box(&mut batch), &o).unwrap()))
        });
        g.bench_function("decompress_only", |b| {
            let section = &batch[61..];
            b.iter(|| black_box(compression::decompress(codec, black_box(section)).unwrap()))
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
