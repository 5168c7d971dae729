//! Index lookups (single and batched, inside Rust) and segment recovery
//! against plain reads of the same page-cached file, in one run.
//!
//! `cargo bench -p pylog-core --bench index`; the synthetic segment is
//! `PYLOG_BENCH_SEGMENT_MIB` MiB (default 1024), written once to a temp dir.

use std::fs::{self, File};
use std::hint::black_box;
use std::io::{BufWriter, Read, Write};
use std::path::Path;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use pylog_core::batch::{
    compute_crc, read_i32, write_i32, write_i64, write_u32, HEADER_SIZE, LOG_OVERHEAD,
};
use pylog_core::index::{OffsetIndex, TimeIndex};
use pylog_core::segment::{recover_segment, scan_segment};
use tempfile::TempDir;

/// Kafka's default `segment.index.bytes`, the size the broker's indexes take.
const DEFAULT_MAX_INDEX_SIZE: u64 = 10 * 1024 * 1024;

struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// An uncompressed v2 batch of `count` records with `value_size`-byte values.
fn batch(count: usize, value_size: usize, timestamp: i64) -> Vec<u8> {
    let mut b = vec![0u8; HEADER_SIZE];
    let value = vec![b'x'; value_size];
    for i in 0..count {
        let mut body = vec![0u8];
        varint(&mut body, i as i64); // timestamp delta
        varint(&mut body, i as i64); // offset delta
        varint(&mut body, -1); // null key
        varint(&mut body, value_size as i64);
        body.extend_from_slice(&value);
        varint(&mut body, 0); // no headers
        varint(&mut b, body.len() as i64);
        b.extend_from_slice(&body);
    }
    let len = (b.len() - LOG_OVERHEAD) as i32;
    write_i32(&mut b, 8, len);
    write_i32(&mut b, 12, 0);
    b[16] = 2;
    write_i32(&mut b, 23, count as i32 - 1);
    write_i64(&mut b, 27, timestamp);
    write_i64(&mut b, 35, timestamp + count as i64 - 1);
    write_i64(&mut b, 43, -1);
    b[51..53].copy_from_slice(&(-1i16).to_be_bytes());
    write_i32(&mut b, 53, -1);
    write_i32(&mut b, 57, count as i32);
    let crc = compute_crc(&b);
    write_u32(&mut b, 17, crc);
    b
}

/// Cycles of one ~1 MiB batch then 200 small (~1.2 KiB) ones, to `mib` MiB.
/// Base offsets are patched per batch (the CRC does not cover them).
fn write_segment(path: &Path, mib: u64) -> u64 {
    let big = batch(1024, 1000, 1_700_000_000_000);
    let small = batch(10, 100, 1_700_000_000_000);
    let mut out = BufWriter::with_capacity(1 << 22, File::create(path).unwrap());
    let (mut written, mut offset) = (0u64, 0i64);
    let mut put = |b: &[u8], n: i64, out: &mut BufWriter<File>, written: &mut u64| {
        out.write_all(&offset.to_be_bytes()).unwrap();
        out.write_all(&b[8..]).unwrap();
        offset += n;
        *written += b.len() as u64;
    };
    while written < mib << 20 {
        put(&big, 1024, &mut out, &mut written);
        for _ in 0..200 {
            put(&small, 10, &mut out, &mut written);
        }
    }
    out.flush().unwrap();
    written
}

fn full_offset_index(dir: &TempDir) -> OffsetIndex {
    let mut idx =
        OffsetIndex::open(dir.path().join("0.index"), 0, DEFAULT_MAX_INDEX_SIZE, true).unwrap();
    let mut i = 0i64;
    while !idx.is_full() {
        idx.append(3 * i + 1, 3000 * i).unwrap();
        i += 1;
    }
    idx
}

fn index_benches(c: &mut Criterion) {
    let dir = TempDir::new().unwrap();
    let idx = full_offset_index(&dir);
    let n = idx.entries() as u64;
    let max_offset = 3 * n as i64;
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let random: Vec<i64> = (0..1 << 20)
        .map(|_| (rng.next() % max_offset as u64) as i64)
        .collect();
    let warm: Vec<i64> = (0..1 << 20)
        .map(|_| max_offset - (rng.next() % 3000) as i64)
        .collect();

    let mut g = c.benchmark_group(format!("offset_index_{n}_entries"));
    let mut k = 0usize;
    g.bench_function("lookup_warm", |b| {
        b.iter(|| {
            k = (k + 1) & ((1 << 20) - 1);
            black_box(idx.lookup(black_box(warm[k])).unwrap())
        })
    });
    g.bench_function("lookup_random", |b| {
        b.iter(|| {
            k = (k + 1) & ((1 << 20) - 1);
            black_box(idx.lookup(black_box(random[k])).unwrap())
        })
    });
    g.throughput(Throughput::Elements(1 << 20));
    let mut out = Vec::with_capacity(1 << 20);
    g.bench_function("lookup_many_warm_1M", |b| {
        b.iter(|| {
            out.clear();
            idx.lookup_many(&warm, &mut out).unwrap();
            black_box(out.len())
        })
    });
    // Same-run baseline: std's binary search (partition_point) over the same
    // keys decoded into a plain Vec<u32>, for the same warm targets.
    let keys: Vec<u32> = (0..idx.entries())
        .map(|i| idx.entry(i).unwrap().unwrap().0 as u32)
        .collect();
    g.bench_function("std_partition_point_vec_warm_1M (baseline)", |b| {
        b.iter(|| {
            let mut acc = 0usize;
            for &t in &warm {
                acc = acc.wrapping_add(keys.partition_point(|&k| k as i64 <= t));
            }
            black_box(acc)
        })
    });
    g.bench_function("lookup_many_random_1M", |b| {
        b.iter(|| {
            out.clear();
            idx.lookup_many(&random, &mut out).unwrap();
            black_box(out.len())
        })
    });
    g.finish();
}

fn segment_benches(c: &mut Criterion) {
    let mib = std::env::var("PYLOG_BENCH_SEGMENT_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024u64);
    let dir = TempDir::new().unwrap();
    let log = dir.path().join("00000000000000000000.log");
    let len = write_segment(&log, mib);
    let mut chunk = vec![0u8; 1 << 20];
    let cat = |chunk: &mut Vec<u8>| {
        let mut f = File::open(&log).unwrap();
        let mut total = 0u64;
        loop {
            let k = f.read(chunk).unwrap();
            if k == 0 {
                break total;
            }
            total += k as u64;
        }
    };
    cat(&mut chunk); // page cache warm
    let mut oi =
        OffsetIndex::open(dir.path().join("0.index"), 0, DEFAULT_MAX_INDEX_SIZE, true).unwrap();
    let mut ti = TimeIndex::open(
        dir.path().join("0.timeindex"),
        0,
        DEFAULT_MAX_INDEX_SIZE,
        true,
    )
    .unwrap();

    let mut g = c.benchmark_group(format!("segment_{}MiB", len >> 20));
    g.sample_size(10);
    g.throughput(Throughput::Bytes(len));
    g.bench_function("read_1MiB_chunks (cat)", |b| {
        b.iter(|| assert_eq!(cat(&mut chunk), len))
    });
    g.bench_function("std_fs_read", |b| {
        b.iter_batched(
            || (),
            |_| black_box(fs::read(&log).unwrap()),
            BatchSize::PerIteration,
        )
    });
    // The floor of any validating scan: walk the mapped file batch by batch
    // and CRC32C each one, nothing else.
    g.bench_function("mmap_crc32c_walk (floor)", |b| {
        b.iter(|| {
            let f = File::open(&log).unwrap();
            // SAFETY: the bench's own temp file, written once before and
            // never truncated or written while mapped.
            let map = unsafe { memmap2::Mmap::map(&f).unwrap() };
            let (mut pos, mut acc) = (0usize, 0u32);
            while pos < map.len() {
                let size = LOG_OVERHEAD + read_i32(&map[pos..], 8) as usize;
                acc ^= compute_crc(&map[pos..pos + size]);
                pos += size;
            }
            black_box(acc)
        })
    });
    g.bench_function("scan_segment", |b| {
        b.iter(|| {
            let r = scan_segment(&log, 0, None, false, usize::MAX).unwrap();
            assert_eq!(r.valid_bytes, len);
        })
    });
    g.bench_function("recover_segment", |b| {
        b.iter(|| {
            let r = recover_segment(&log, &mut oi, &mut ti, 4096, usize::MAX).unwrap();
            assert_eq!((r.valid_bytes, r.error), (len, None));
        })
    });
    g.finish();
}

criterion_group!(benches, index_benches, segment_benches);
criterion_main!(benches);
