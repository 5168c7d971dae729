//! Floor searches over an index's entries: Kafka's cache-friendly binary
//! search, which looks in the warm section (the last [`WARM_SECTION_BYTES`],
//! where readers almost always land) before the cold part, one target at a
//! time or [`LANES`] targets in lockstep.

use std::hint::select_unpredictable;

use super::{EntryLayout, MmapIndex};

/// Bytes at the end of an index searched first (Kafka's warm section).
pub const WARM_SECTION_BYTES: usize = 8192;

impl<L: EntryLayout> MmapIndex<L> {
    /// A reader of stored keys for the hot search loops: no slice bounds
    /// checks; an index past the last entry is clamped to it (a conditional
    /// move; the searches never ask for one) so the reader is memory-safe for
    /// any input. Requires entries > 0.
    #[inline(always)]
    fn key_reader(&self) -> impl Fn(usize) -> i64 + Copy + '_ {
        let data = self.data_unchecked();
        let n = self.entries;
        // entries <= max_entries = mapped length / ENTRY_SIZE.
        assert!(n > 0 && n * L::ENTRY_SIZE <= data.len());
        let ptr = data.as_ptr();
        move |i: usize| {
            let i = select_unpredictable(i < n, i, n - 1);
            // SAFETY: i < n and n entries lie within the mapping (asserted above).
            unsafe { L::stored_key_at(ptr.add(i * L::ENTRY_SIZE)) }
        }
    }

    /// Slot of the greatest entry whose key is <= `target`, warm section first.
    #[inline]
    pub fn floor_slot(&self, target: i64) -> Option<usize> {
        let n = self.entries;
        if n == 0 {
            return None;
        }
        let k = self.key_reader();
        let target = L::stored_target(target, self.base_offset);
        let first_warm = n.saturating_sub(1 + WARM_SECTION_BYTES / L::ENTRY_SIZE);
        if k(first_warm) <= target {
            return Some(floor_between(first_warm, n - 1, target, k));
        }
        if k(0) > target {
            return None;
        }
        Some(floor_between(0, first_warm, target, k))
    }

    /// [`floor_slot`](Self::floor_slot) with a caller-chosen key (entries must
    /// be sorted by it); for the rare searches by another field.
    pub(super) fn floor_slot_by(
        &self,
        target: i64,
        key: impl Fn(&[u8], i64) -> i64,
    ) -> Option<usize> {
        let n = self.entries;
        if n == 0 {
            return None;
        }
        let data = self.data_unchecked();
        let k = |i: usize| key(Self::raw(data, i), self.base_offset);
        if k(0) > target {
            return None;
        }
        Some(floor_between(0, n - 1, target, k))
    }

    /// [`floor_slot`](Self::floor_slot) of every target, passed to `emit` as
    /// `(index in targets, slot)` — not in order. Same answers and the same
    /// warm/cold split, but targets of each section are queued and searched
    /// [`LANES`] at a time in lockstep, so independent searches overlap their
    /// memory latency and share one loop.
    pub fn for_each_floor_slot(&self, targets: &[i64], mut emit: impl FnMut(usize, Option<usize>)) {
        let n = self.entries;
        if n == 0 {
            (0..targets.len()).for_each(|i| emit(i, None));
            return;
        }
        let k = self.key_reader();
        let first_warm = n.saturating_sub(1 + WARM_SECTION_BYTES / L::ENTRY_SIZE);
        let (warm_key, first_key) = (k(first_warm), k(0));
        let mut warm = Lanes::new(first_warm, n - 1);
        let mut cold = Lanes::new(0, first_warm);
        for (i, &t) in targets.iter().enumerate() {
            let t = L::stored_target(t, self.base_offset);
            if warm_key <= t {
                warm.push(i, t, k, &mut emit);
            } else if first_key <= t {
                cold.push(i, t, k, &mut emit);
            } else {
                emit(i, None);
            }
        }
        warm.run(k, &mut emit);
        cold.run(k, &mut emit);
    }
}

/// Searches advanced together by [`MmapIndex::for_each_floor_slot`].
pub const LANES: usize = 16;

/// Up to [`LANES`] queued floor searches over one section `[lo, hi]`.
struct Lanes {
    lo: usize,
    hi: usize,
    len: usize,
    index: [usize; LANES],
    target: [i64; LANES],
}

impl Lanes {
    fn new(lo: usize, hi: usize) -> Lanes {
        Lanes {
            lo,
            hi,
            len: 0,
            index: [0; LANES],
            target: [i64::MIN; LANES],
        }
    }

    #[inline(always)]
    fn push(
        &mut self,
        i: usize,
        t: i64,
        key: impl Fn(usize) -> i64 + Copy,
        emit: &mut impl FnMut(usize, Option<usize>),
    ) {
        self.index[self.len] = i;
        self.target[self.len] = t;
        self.len += 1;
        if self.len == LANES {
            self.run(key, emit);
        }
    }

    /// Search every queued target (each has key(lo) <= target): all lanes
    /// step once per halving; unused lanes search for i64::MIN and stay put.
    #[inline(always)]
    fn run(&mut self, key: impl Fn(usize) -> i64, emit: &mut impl FnMut(usize, Option<usize>)) {
        if self.len == 0 {
            return;
        }
        self.target[self.len..].fill(i64::MIN);
        let mut pos = [self.lo; LANES];
        let mut len = self.hi - self.lo + 1;
        while len > 1 {
            let half = len / 2;
            for (p, &t) in pos.iter_mut().zip(&self.target) {
                let probe = *p + half;
                *p = select_unpredictable(key(probe) <= t, probe, *p);
            }
            len -= half;
        }
        for (&i, &p) in self.index[..self.len].iter().zip(&pos) {
            emit(i, Some(p));
        }
        self.len = 0;
    }
}

/// Largest `i` in `[lo, hi]` with `key(i) <= target`, given `key(lo) <= target`.
/// Branch-free halving: `select_unpredictable` keeps the step a conditional
/// move (LLVM otherwise turns it into a branch, which mispredicts on half the
/// probes of a random target and costs several times the search itself).
#[inline(always)]
fn floor_between(lo: usize, hi: usize, target: i64, key: impl Fn(usize) -> i64) -> usize {
    let mut base = lo;
    let mut len = hi - lo + 1;
    while len > 1 {
        let half = len / 2;
        let probe = base + half;
        base = select_unpredictable(key(probe) <= target, probe, base);
        len -= half;
    }
    base
}
