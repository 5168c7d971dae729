//! The purgatory's timer inside Rust: 1M delayed operations inserted, then
//! expired or cancelled, on the hierarchical TimingWheel and on a binary heap
//! of (deadline, id) with lazy cancellation (the usual alternative), driven
//! by the same schedule in one run. The schedule is the one of
//! bench/test_timing_wheel_bench.py: 1000 arrivals per ms for 1 s, deadlines
//! of 500 ms (70%), 30 s (10%) or 1-100 ms (20%), half cancelled early.
//!
//! `cargo bench -p pylog-core --bench timing_wheel`

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use pylog_core::timing_wheel::TimingWheel;

const OPS: usize = 1_000_000;
const PER_MS: usize = 1000;

struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Default, Clone)]
struct Tick {
    adds: Vec<(i64, i64)>,
    cancels: Vec<i64>,
}

fn schedule() -> Vec<Tick> {
    let mut rng = XorShift(0x5EED);
    let mut ticks = vec![Tick::default(); 31_001];
    for op in 0..OPS {
        let now = (op / PER_MS) as u64;
        let delay = match rng.below(10) {
            0..=6 => 500,
            7 => 30_000,
            _ => 1 + rng.below(100),
        };
        ticks[now as usize]
            .adds
            .push((op as i64, (now + delay) as i64));
        if rng.below(2) == 0 {
            ticks[(now + rng.below(delay)) as usize]
                .cancels
                .push(op as i64);
        }
    }
    ticks
}

fn run_wheel(ticks: &[Tick]) -> usize {
    let mut wheel = TimingWheel::new(1, 20, 0).unwrap();
    let mut out = Vec::new();
    let mut done = 0;
    for (now, tick) in ticks.iter().enumerate() {
        for &(id, deadline) in &tick.adds {
            wheel.add(id, deadline);
        }
        for &id in &tick.cancels {
            done += usize::from(wheel.cancel(id));
        }
        out.clear();
        wheel.advance_into(now as i64, &mut out);
        done += out.len();
    }
    assert!(wheel.is_empty());
    done
}

fn run_heap(ticks: &[Tick]) -> usize {
    let mut heap: BinaryHeap<Reverse<(i64, i64)>> = BinaryHeap::new();
    let mut live: HashSet<i64> = HashSet::new();
    let mut done = 0;
    for (now, tick) in ticks.iter().enumerate() {
        for &(id, deadline) in &tick.adds {
            heap.push(Reverse((deadline, id)));
            live.insert(id);
        }
        for &id in &tick.cancels {
            done += usize::from(live.remove(&id));
        }
        while let Some(&Reverse((deadline, id))) = heap.peek() {
            if deadline > now as i64 {
                break;
            }
            heap.pop();
            done += usize::from(live.remove(&id));
        }
    }
    assert!(live.is_empty());
    done
}

fn bench(c: &mut Criterion) {
    let ticks = schedule();
    assert_eq!(run_wheel(&ticks), OPS);
    assert_eq!(run_heap(&ticks), OPS);
    let mut g = c.benchmark_group("timer 1M delayed ops");
    g.sample_size(10);
    g.throughput(Throughput::Elements(OPS as u64));
    g.bench_function("timing wheel", |b| b.iter(|| black_box(run_wheel(&ticks))));
    g.bench_function("binary heap + lazy cancel", |b| {
        b.iter(|| black_box(run_heap(&ticks)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
