//! A bounded random-mutation run over the entry points the fuzz targets
//! drive (`pylog_core::harness`), so that `cargo test` keeps them covered:
//! valid batches of every codec (and their uncompressed records) with bytes
//! flipped, inserted, removed, duplicated and cut, checksums fixed up or not.
//! Deterministic (a fixed xorshift seed); `PYLOG_MUTATION_ROUNDS` raises the
//! number of rounds.

use pylog_core::harness;
use pylog_core::records::{build_batch, BuildOptions, BuildRecord};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn seeds() -> Vec<Vec<u8>> {
    let rec = |i: usize, value: usize| BuildRecord {
        key: if i % 4 == 3 {
            None
        } else {
            Some(format!("k{}", i % 3).into_bytes())
        },
        value: if i % 5 == 4 {
            None
        } else {
            Some(vec![b'v'; value])
        },
        headers: if i.is_multiple_of(2) {
            vec![("h".into(), Some(b"x".to_vec()))]
        } else {
            vec![]
        },
        timestamp: 1_700_000_000_000 + i as i64,
    };
    let mut out = Vec::new();
    for codec in 0..=4u8 {
        for (n, value) in [(1usize, 3usize), (7, 20), (3, 70_000)] {
            let records: Vec<_> = (0..n).map(|i| rec(i, value)).collect();
            let opts = BuildOptions {
                compression: codec,
                producer_id: if n == 7 { 5 } else { -1 },
                producer_epoch: 0,
                base_sequence: if n == 7 { 0 } else { -1 },
                ..Default::default()
            };
            let b = build_batch(&records, &opts).unwrap();
            // the records section alone, as the mode byte of harness::batch wants it
            let section = build_batch(&records, &BuildOptions::default()).unwrap()[61..].to_vec();
            let mut framed = vec![0x80 | codec, 0, n as u8];
            framed.extend_from_slice(&section);
            out.push(framed);
            out.push(b);
        }
    }
    // legacy messages and a compressed wrapper
    let m = pylog_core::legacy::build_message(0, 1, 0, 5, Some(b"k"), Some(b"v"));
    let mut set = m.clone();
    set.extend_from_slice(&pylog_core::legacy::build_message(
        1,
        1,
        0,
        6,
        None,
        Some(b"w"),
    ));
    out.push(m);
    for codec in 1..=4u8 {
        out.push(pylog_core::legacy::build_wrapper(1, 1, codec, 7, &set).unwrap());
    }
    out
}

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(b.len());
        match rng.below(6) {
            0 if !b.is_empty() => b[at] ^= 1 << rng.below(8),
            1 if !b.is_empty() => b[at] = rng.next() as u8,
            2 => b.insert(at.min(b.len()), rng.next() as u8),
            3 if !b.is_empty() => {
                let n = rng.below(16).min(b.len() - at);
                b.drain(at..at + n);
            }
            4 if !b.is_empty() => {
                let n = rng.below(32).min(b.len() - at);
                let piece = b[at..at + n].to_vec();
                let to = rng.below(b.len());
                b.splice(to..to, piece);
            }
            _ => b.truncate(at),
        }
    }
    b
}

#[test]
fn mutated_batches_break_no_invariant() {
    let rounds: usize = std::env::var("PYLOG_MUTATION_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1500);
    let seeds = seeds();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for seed in &seeds {
        harness::batch(seed);
    }
    for _ in 0..rounds {
        let seed = &seeds[rng.below(seeds.len())];
        let m = mutate(&mut rng, seed);
        harness::batch(&m);
        harness::records(&m);
        harness::decompress(&m);
    }
}
