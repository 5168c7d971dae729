//! A hierarchical timing wheel for the broker's delayed operations (the
//! purgatory's DelayedProduce, DelayedFetch, joins and heartbeats).
//!
//! The shape is Kafka's hierarchical timing wheel (`TimingWheel` under
//! `SystemTimer`, in `org.apache.kafka.server.util.timer`, after Varghese and
//! Lauck's hashed and hierarchical wheels): level 0 has `wheel_size`
//! buckets of `tick_ms` each; a deadline beyond a level's span goes to the next
//! level up, whose tick is the span of the level below (created the first time
//! it is needed). Every non-empty bucket sits once in a min-heap keyed by its
//! expiration (the start of the time range it holds), so advancing the clock
//! pops buckets in time order: a level-0 bucket's entries expire, a higher
//! bucket's entries are re-placed into the lower levels, where they land in
//! buckets that the same advance pops later if they are due.
//!
//! Memory layout, chosen for cache misses rather than pointer hops:
//!
//! * A bucket is an array of (id, deadline) items, appended at the end. A
//!   flush reads it front to back (the prefetcher streams it) instead of
//!   chasing a linked list through a slab.
//! * An id's item is found through a ring indexed by the id itself (4 bytes
//!   a slot, no hash, no probe) over the window of ids where the pending ones
//!   mostly are: callers number operations from a counter, so that window
//!   slides up with it. Ids the window left behind (a long-lived operation)
//!   or that are not a counter's go to a side table (linear probing in Robin
//!   Hood order, at most half full), so one old id never makes the ring
//!   grow. Consecutive ids sit in neighbouring slots: the ids of one bucket,
//!   which mostly arrived together, share cache lines when a flush updates
//!   them.
//! * Cancel only drops the id's table slot and counts the item out of its
//!   bucket: it does not write the item, whose cache line a random cancel
//!   would otherwise miss a second time. An item is live while the table
//!   slot of its id points at it (same bucket, same position); a flush skips
//!   the others (its table look-ups follow the bucket's ids, which mostly
//!   arrived together). A bucket whose live items all went is cleared at
//!   once, and one whose dead items outnumber twice the live ones (plus a
//!   slack) is compacted, so dead items cost amortised O(1) and never hold
//!   more than a constant factor of memory.
//!
//! Insert and cancel are O(1) (amortised over the ring's moves; expected,
//! for the side table); advancing costs
//! O(expired + re-placed + dead items + log(buckets in the heap)) per bucket
//! flushed.
//!
//! The wheel has no clock of its own: the caller passes times in ms.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt;

/// A bucket that holds nothing and is in no heap.
const UNSET: i64 = i64::MIN;
/// A table slot with no id.
const EMPTY: u32 = u32::MAX;
/// How many items ahead a flush prefetches table slots.
const FLUSH_AHEAD: usize = 8;
/// Dead items a bucket may keep beyond twice its live ones before compaction.
const DEAD_SLACK: usize = 64;
const MIN_TABLE: usize = 64;

#[derive(Clone, Copy)]
struct Item {
    id: i64,
    expiration: i64,
}

struct Bucket {
    items: Vec<Item>,
    /// Items not cancelled.
    live: usize,
    /// Start of the time range this bucket holds; `UNSET` when not in the heap.
    expiration: i64,
}

/// Where an id's item is: `bucket` is `EMPTY` for a free slot.
#[derive(Clone, Copy)]
struct Slot {
    id: i64,
    bucket: u32,
    pos: u32,
}

const FREE: Slot = Slot {
    id: 0,
    bucket: EMPTY,
    pos: 0,
};

/// Home of an id before masking: bit i is the xor of the id's bits i, i+6,
/// i+12, ... A block of 64 consecutive ids lands, permuted, in one block of
/// 64 slots (locality for counter ids), and ids that differ only in high bits
/// (strides of powers of two) still spread over the low bits.
#[inline]
fn fold(id: i64) -> usize {
    let mut x = id as u64;
    x ^= x >> 6;
    x ^= x >> 12;
    x ^= x >> 24;
    x ^= x >> 48;
    x as usize
}

/// id -> (bucket, position): linear probing kept in Robin Hood order (the
/// ids of a run of occupied slots sorted by home slot), with backward-shift
/// deletion. Counter ids fill whole runs of slots at their homes; plain
/// linear probing would then scan to the end of the run for every delete and
/// every miss, while here both stop at the first slot whose id sits nearer
/// its home than the probe has come.
struct IdTable {
    slots: Vec<Slot>,
    mask: usize,
    len: usize,
}

impl IdTable {
    fn new() -> IdTable {
        IdTable {
            slots: vec![FREE; MIN_TABLE],
            mask: MIN_TABLE - 1,
            len: 0,
        }
    }

    /// How far the id in slot `i` is from its home slot.
    #[inline]
    fn distance(&self, i: usize, id: i64) -> usize {
        i.wrapping_sub(fold(id)) & self.mask
    }

    /// The slot holding `id`, or Err(the slot where it would go: free, or
    /// held by an id that `fill` moves up).
    #[inline]
    fn probe(&self, id: i64) -> Result<usize, usize> {
        let mut i = fold(id) & self.mask;
        let mut d = 0;
        loop {
            let s = &self.slots[i];
            if s.bucket == EMPTY {
                return Err(i);
            }
            if s.id == id {
                return Ok(i);
            }
            if self.distance(i, s.id) < d {
                return Err(i);
            }
            i = (i + 1) & self.mask;
            d += 1;
        }
    }

    #[inline]
    fn find(&self, id: i64) -> Option<usize> {
        self.probe(id).ok()
    }

    /// Room for one more id (call before `probe` when inserting).
    #[inline]
    fn reserve_one(&mut self) {
        if (self.len + 1) * 2 > self.slots.len() {
            self.resize(self.slots.len() * 2);
        }
    }

    /// Puts an id in slot `at` (from `probe`'s Err, after `reserve_one`),
    /// moving the rest of its run up one slot to keep the order.
    #[inline]
    fn fill(&mut self, at: usize, id: i64, bucket: u32, pos: u32) {
        self.shift_in(at, Slot { id, bucket, pos });
        self.len += 1;
    }

    /// Adds an id not present.
    fn insert(&mut self, id: i64, bucket: u32, pos: u32) {
        self.reserve_one();
        let at = self.probe(id).expect_err("id twice in the table");
        self.fill(at, id, bucket, pos);
    }

    #[inline]
    fn shift_in(&mut self, at: usize, slot: Slot) {
        let mut carry = slot;
        let mut i = at;
        loop {
            carry = std::mem::replace(&mut self.slots[i], carry);
            if carry.bucket == EMPTY {
                break;
            }
            i = (i + 1) & self.mask;
        }
    }

    #[inline]
    fn set(&mut self, at: usize, bucket: u32, pos: u32) {
        let s = &mut self.slots[at];
        s.bucket = bucket;
        s.pos = pos;
    }

    fn remove_at(&mut self, at: usize) {
        let mut hole = at;
        loop {
            let j = (hole + 1) & self.mask;
            let s = self.slots[j];
            if s.bucket == EMPTY || self.distance(j, s.id) == 0 {
                break;
            }
            self.slots[hole] = s;
            hole = j;
        }
        self.slots[hole] = FREE;
        self.len -= 1;
        if self.len * 8 < self.slots.len() && self.slots.len() > MIN_TABLE {
            self.resize(self.slots.len() / 2);
        }
    }

    fn resize(&mut self, size: usize) {
        let old = std::mem::replace(&mut self.slots, free_slots(size, FREE));
        self.mask = size - 1;
        for s in old.into_iter().filter(|s| s.bucket != EMPTY) {
            let at = self.probe(s.id).expect_err("id twice in the table");
            self.shift_in(at, s);
        }
    }
}

/// Bits of a ring slot that hold the position; the bucket is above them.
const POS_BITS: u32 = 23;
const POS_MASK: u32 = (1 << POS_BITS) - 1;

/// Where an id's item is, in the ring, in 4 bytes: bucket + 1 in the top
/// 9 bits, position in the low 23, so that a free slot is 0 and a new ring
/// is zeroed memory (pages the kernel maps on first touch, no filling pass).
/// A location that does not fit (bucket 510 or above: a wheel of more than
/// about 30 buckets a level; position 2^23 - 1 or above: a bucket of 8M
/// items) is `WIDE`, and the id's location sits in `Ids::wide`.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Loc(u32);

const NO_LOC: Loc = Loc(0);
const WIDE: Loc = Loc(u32::MAX);

impl Loc {
    /// The slot for (bucket, pos); None when it does not fit.
    #[inline]
    fn pack(bucket: u32, pos: u32) -> Option<Loc> {
        // bucket + 1 < 511 and pos < POS_MASK keep every packed slot below
        // WIDE and above NO_LOC.
        (bucket < (u32::MAX >> POS_BITS) - 1 && pos < POS_MASK)
            .then(|| Loc(((bucket + 1) << POS_BITS) | pos))
    }
    #[inline]
    fn is_free(self) -> bool {
        self == NO_LOC
    }
    #[inline]
    fn is_wide(self) -> bool {
        self == WIDE
    }
    /// For a packed slot (neither free nor wide).
    #[inline]
    fn bucket(self) -> u32 {
        (self.0 >> POS_BITS) - 1
    }
    #[inline]
    fn pos(self) -> u32 {
        self.0 & POS_MASK
    }
}

const MIN_RING: usize = 64;
/// Ring ids a far id may push out to the side table when it moves the window.
const FAR_EVICT: usize = MIN_RING / 2;

/// A found id: its slot in the ring or in the side table.
#[derive(Clone, Copy)]
enum At {
    Ring(usize),
    Side(usize),
    Far(i64),
}

/// id -> (bucket, position). Callers number operations from a counter, so
/// the pending ids mostly lie in a window [lo, lo + ring.len()) that slides
/// up as the counter does: that window is a ring indexed by the id itself
/// (slot = id mod size, 4 bytes a slot, no hashing, no probing, no stored
/// id: inside the window each slot has one id). Ids below the window (a
/// long-lived operation the window slid past, or ids that are not a
/// counter's) live in the side table. Adding an id above the window moves the
/// window up to it, unless the id is far above (twice the ring's size) while
/// the ring holds more than a few ids: such a stray id (another id space)
/// goes to a small ordered map of ids above the window instead of pushing
/// every pending id out to the side table; when the window reaches it, it
/// moves into the ring.
///
/// Moving up: when the ring is at least half full and doubling it reaches the
/// new id, it doubles (`lo` kept); otherwise the window slides, and the ids
/// it leaves behind go to the side table. A ring an eighth full halves,
/// keeping its top. So the ring has at most 8 slots per id it holds (or
/// `MIN_RING`), and one old id among many new ones costs a side-table entry,
/// never a larger ring. `lo` never moves down, so an id once below the
/// window stays below it.
struct Ids {
    /// `Loc`s.
    ring: Vec<u32>,
    mask: usize,
    /// The lowest id of the window.
    lo: i64,
    /// The highest id put in the ring so far (i64::MIN before any): no ring
    /// id is above it, so a shrinking ring keeps the window's part up to it.
    top: i64,
    ring_len: usize,
    side: IdTable,
    /// The locations of the ring ids whose slot is `WIDE` (counted in
    /// `ring_len`, not in `len` on their own): empty unless a location
    /// does not fit in a ring slot.
    wide: IdTable,
    /// Ids above the window, by id.
    far: BTreeMap<i64, (u32, u32)>,
}

impl Ids {
    fn new() -> Ids {
        Ids {
            ring: free_ring(MIN_RING),
            mask: MIN_RING - 1,
            lo: i64::MIN,
            top: i64::MIN,
            ring_len: 0,
            side: IdTable::new(),
            wide: IdTable::new(),
            far: BTreeMap::new(),
        }
    }

    #[inline]
    fn len(&self) -> usize {
        self.ring_len + self.side.len + self.far.len()
    }

    /// One past the window's last id (above i64::MAX near the top).
    #[inline]
    fn end(&self) -> i128 {
        i128::from(self.lo) + self.ring.len() as i128
    }

    /// The ring slot of `id` if the window holds it.
    #[inline]
    fn in_window(&self, id: i64) -> Option<usize> {
        // id - lo as u64 is exact for id >= lo (at most 2^64 - 1).
        (id >= self.lo && (id.wrapping_sub(self.lo) as u64) <= self.mask as u64)
            .then_some(id as usize & self.mask)
    }

    #[inline]
    fn find(&self, id: i64) -> Option<At> {
        if let Some(i) = self.in_window(id) {
            return (!Loc(self.ring[i]).is_free()).then_some(At::Ring(i));
        }
        if id < self.lo {
            if self.side.len != 0 {
                return self.side.find(id).map(At::Side);
            }
            return None;
        }
        if !self.far.is_empty() && self.far.contains_key(&id) {
            return Some(At::Far(id));
        }
        None
    }

    /// A hint to bring in the slot `find(id)` will read.
    #[inline(always)]
    fn prefetch(&self, id: i64) {
        if let Some(i) = self.in_window(id) {
            prefetch(&self.ring[i]);
        } else if self.side.len != 0 {
            prefetch(&self.side.slots[fold(id) & self.side.mask]);
        }
    }

    #[inline]
    fn get(&self, at: At) -> (u32, u32) {
        match at {
            At::Ring(i) => {
                let loc = Loc(self.ring[i]);
                if loc.is_wide() {
                    return self.wide_loc(ring_id(self.lo, self.mask, i));
                }
                (loc.bucket(), loc.pos())
            }
            At::Side(i) => (self.side.slots[i].bucket, self.side.slots[i].pos),
            At::Far(id) => self.far[&id],
        }
    }

    #[inline]
    fn set(&mut self, at: At, bucket: u32, pos: u32) {
        match at {
            At::Ring(i) => self.put(i, ring_id(self.lo, self.mask, i), bucket, pos),
            At::Side(i) => self.side.set(i, bucket, pos),
            At::Far(id) => {
                self.far.insert(id, (bucket, pos));
            }
        }
    }

    /// Adds an id not present.
    #[inline]
    fn insert(&mut self, id: i64, bucket: u32, pos: u32) {
        if id < self.lo {
            self.side.insert(id, bucket, pos);
            return;
        }
        let i = match self.in_window(id) {
            Some(i) => i,
            None => match self.make_room(id) {
                Some(i) => i,
                None => {
                    self.far.insert(id, (bucket, pos));
                    return;
                }
            },
        };
        debug_assert!(Loc(self.ring[i]).is_free());
        self.put(i, id, bucket, pos);
        self.ring_len += 1;
        self.top = self.top.max(id);
    }

    #[inline]
    fn remove(&mut self, at: At) {
        match at {
            At::Ring(i) => {
                let loc = Loc(std::mem::replace(&mut self.ring[i], NO_LOC.0));
                if loc.is_wide() {
                    self.unwide(ring_id(self.lo, self.mask, i));
                }
                self.ring_len -= 1;
                while self.ring_len * 8 < self.ring.len() && self.ring.len() > MIN_RING {
                    self.shrink();
                }
            }
            At::Side(i) => self.side.remove_at(i),
            At::Far(id) => {
                self.far.remove(&id);
            }
        }
    }

    /// Writes the location of `id` into its ring slot `i` (free, or holding
    /// `id`).
    #[inline]
    fn put(&mut self, i: usize, id: i64, bucket: u32, pos: u32) {
        match Loc::pack(bucket, pos) {
            Some(loc) if !Loc(self.ring[i]).is_wide() => self.ring[i] = loc.0,
            _ => self.put_wide(i, id, bucket, pos),
        }
    }

    #[cold]
    fn put_wide(&mut self, i: usize, id: i64, bucket: u32, pos: u32) {
        if Loc(self.ring[i]).is_wide() {
            self.unwide(id);
        }
        match Loc::pack(bucket, pos) {
            Some(loc) => self.ring[i] = loc.0,
            None => {
                self.wide.insert(id, bucket, pos);
                self.ring[i] = WIDE.0;
            }
        }
    }

    /// The location of ring id `id` whose slot was `loc` (taken out of
    /// the ring), its wide entry dropped.
    #[inline]
    fn take_loc(&mut self, loc: Loc, id: i64) -> (u32, u32) {
        if loc.is_wide() {
            self.unwide(id)
        } else {
            (loc.bucket(), loc.pos())
        }
    }

    #[cold]
    fn wide_loc(&self, id: i64) -> (u32, u32) {
        let s = &self.wide.slots[self.wide.find(id).expect("a wide slot's id")];
        (s.bucket, s.pos)
    }

    /// Drops the wide entry of `id`, returning its location.
    #[cold]
    fn unwide(&mut self, id: i64) -> (u32, u32) {
        let at = self.wide.find(id).expect("a wide slot's id");
        let s = self.wide.slots[at];
        self.wide.remove_at(at);
        (s.bucket, s.pos)
    }

    /// Moves the window up to hold `id` (above it) and returns id's slot;
    /// None, the window kept, when `id` is far above and the ring holds more
    /// than a few ids.
    #[cold]
    fn make_room(&mut self, id: i64) -> Option<usize> {
        let size = self.ring.len();
        let old_end = self.end();
        let far = (id.wrapping_sub(self.lo) as u64) >= 2 * size as u64;
        if far && self.ring_len > FAR_EVICT {
            return None;
        }
        if self.ring_len * 2 >= size && !far {
            self.resize(2 * size, self.lo);
        } else {
            if self.ring_len != 0 {
                self.slide(id - (size as i64 - 1));
            }
            // What the slide left may be few: the ring shrinks to it, keeping
            // the new id in the window.
            self.top = self.top.max(id);
            while self.ring_len * 8 < self.ring.len() && self.ring.len() > MIN_RING {
                self.shrink();
            }
            if self.in_window(id).is_none() {
                // Nothing left to keep: the window starts at the new id.
                debug_assert_eq!(self.ring_len, 0);
                self.lo = id;
            }
        }
        self.settle_far(old_end);
        Some(self.in_window(id).expect("the window holds the new id"))
    }

    /// After the window moved up from ending at `old_end`: the far ids it
    /// reached move into the ring, or to the side table if it passed them.
    fn settle_far(&mut self, old_end: i128) {
        let end = self.end();
        if self.far.is_empty() || end <= old_end || old_end > i128::from(i64::MAX) {
            return;
        }
        let reached: Vec<i64> = self
            .far
            .range(old_end as i64..)
            .map(|(&id, _)| id)
            .take_while(|&id| i128::from(id) < end)
            .collect();
        for id in reached {
            let (bucket, pos) = self.far.remove(&id).expect("listed just now");
            match self.in_window(id) {
                Some(i) => {
                    self.put(i, id, bucket, pos);
                    self.ring_len += 1;
                    self.top = self.top.max(id);
                }
                None => self.side.insert(id, bucket, pos),
            }
        }
    }

    /// Moves `lo` up to `new_lo` (the size kept), sending the ids left below
    /// to the side table.
    fn slide(&mut self, new_lo: i64) {
        let leaving = (new_lo.wrapping_sub(self.lo) as u64).min(self.ring.len() as u64);
        let mut id = self.lo;
        for _ in 0..leaving {
            if self.ring_len == 0 {
                break;
            }
            let i = id as usize & self.mask;
            let loc = Loc(std::mem::replace(&mut self.ring[i], NO_LOC.0));
            if !loc.is_free() {
                self.ring_len -= 1;
                let (bucket, pos) = self.take_loc(loc, id);
                self.side.insert(id, bucket, pos);
            }
            id = id.wrapping_add(1);
        }
        self.lo = new_lo;
    }

    /// A ring of `size` slots whose window starts at `new_lo` (>= `lo`); the
    /// caller makes sure that every ring id at or above `new_lo` fits in it.
    fn resize(&mut self, size: usize, new_lo: i64) {
        let old = std::mem::replace(&mut self.ring, free_ring(size));
        let old_mask = std::mem::replace(&mut self.mask, size - 1);
        let old_lo = std::mem::replace(&mut self.lo, new_lo);
        for (i, &loc) in old.iter().enumerate() {
            let loc = Loc(loc);
            if loc.is_free() {
                continue;
            }
            let id = ring_id(old_lo, old_mask, i);
            if id < new_lo {
                self.ring_len -= 1;
                let (bucket, pos) = self.take_loc(loc, id);
                self.side.insert(id, bucket, pos);
            } else {
                // A wide slot stays wide: `wide` is keyed by id.
                self.ring[id as usize & self.mask] = loc.0;
            }
        }
    }

    /// Halves the ring (to `MIN_RING` at once when it holds nothing), keeping
    /// the window's top part up to `top`.
    #[cold]
    fn shrink(&mut self) {
        if self.ring_len == 0 {
            debug_assert_eq!(self.wide.len, 0, "a wide entry outside the ring");
            self.ring = free_ring(MIN_RING);
            self.mask = MIN_RING - 1;
            return;
        }
        let size = self.ring.len() / 2;
        let new_lo = self.lo.max(self.top.saturating_sub(size as i64 - 1));
        self.resize(size, new_lo);
    }
}

/// The id of slot `i` of a ring of `mask` + 1 slots whose window starts at
/// `lo` (the one id of the window it holds).
#[inline]
fn ring_id(lo: i64, mask: usize, i: usize) -> i64 {
    lo.wrapping_add((i.wrapping_sub(lo as usize) & mask) as i64)
}

/// `size` free slots.
fn free_slots(size: usize, free: Slot) -> Vec<Slot> {
    let mut slots = Vec::with_capacity(size);
    huge_pages(&slots);
    slots.resize(size, free);
    slots
}

/// `size` free ring slots, zeroed by the allocator.
fn free_ring(size: usize) -> Vec<u32> {
    let zeroed = vec![0u32; size];
    huge_pages(&zeroed);
    zeroed
}

/// A table or ring of megabytes asks for huge pages before its memory is
/// first touched: its look-ups land all over it, and with 4 KiB pages nearly
/// each one also misses the TLB.
fn huge_pages<T>(v: &Vec<T>) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = v.capacity() * std::mem::size_of::<T>();
        if bytes >= 2 * HUGE {
            let start = v.as_ptr() as usize;
            let from = start.next_multiple_of(HUGE);
            let to = (start + bytes) / HUGE * HUGE;
            if to > from {
                // SAFETY: [from, to) lies inside the allocation owned by `v`;
                // MADV_HUGEPAGE only changes how the kernel backs those
                // pages, not their contents or validity.
                unsafe {
                    libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
                }
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

/// A hint to bring `value`'s cache line in; no effect on the program's
/// meaning.
#[inline(always)]
fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE is part of the x86_64 baseline, and a prefetch only
        // hints the cache: it reads nothing and cannot fault.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

#[derive(Clone, Copy)]
struct Level {
    tick: i64,
    /// tick * wheel_size, in i128: the top level's span may pass i64::MAX
    /// (it then holds every deadline).
    interval: i128,
    /// The start of the current tick (a multiple of `tick`).
    current: i64,
    /// The bucket (0..wheel_size) of the current tick, so that placing an
    /// entry needs no remainder: its bucket is this one plus its distance in
    /// ticks, wrapped once.
    current_bucket: i64,
}

impl Level {
    /// Whether `time_ms` falls in the current tick or before it (no overflow
    /// at the ends of the i64 range).
    #[inline]
    fn reached(&self, time_ms: i64) -> bool {
        i128::from(time_ms) < i128::from(self.current) + i128::from(self.tick)
    }

    fn new(tick: i64, wheel_size: i64, start: i64) -> Level {
        let mut level = Level {
            tick,
            interval: i128::from(tick) * i128::from(wheel_size),
            current: 0,
            current_bucket: 0,
        };
        level.set_current(start, wheel_size);
        level
    }

    fn set_current(&mut self, time_ms: i64, wheel_size: i64) {
        self.current = time_ms - time_ms.rem_euclid(self.tick);
        self.current_bucket = (self.current / self.tick).rem_euclid(wheel_size);
    }
}

/// Invalid construction parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub &'static str);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for ConfigError {}

/// The wheel. Ids are the caller's (unique among pending entries).
pub struct TimingWheel {
    wheel_size: i64,
    levels: Vec<Level>,
    /// `levels.len() * wheel_size` buckets, level by level.
    buckets: Vec<Bucket>,
    ids: Ids,
    /// (expiration, bucket index) of every bucket whose expiration is set.
    heap: BinaryHeap<Reverse<(i64, u32)>>,
    /// (deadline, id) of what an advance expires, reused between advances.
    expired: Vec<(i64, i64)>,
}

impl TimingWheel {
    /// `tick_ms` >= 1, `wheel_size` >= 2, `start_ms` >= 0.
    pub fn new(tick_ms: i64, wheel_size: u32, start_ms: i64) -> Result<Self, ConfigError> {
        if tick_ms < 1 {
            return Err(ConfigError("tick_ms must be at least 1"));
        }
        if wheel_size < 2 {
            return Err(ConfigError("wheel_size must be at least 2"));
        }
        if start_ms < 0 {
            return Err(ConfigError("start_ms must not be negative"));
        }
        let wheel_size = i64::from(wheel_size);
        let mut wheel = TimingWheel {
            wheel_size,
            levels: Vec::new(),
            buckets: Vec::new(),
            ids: Ids::new(),
            heap: BinaryHeap::new(),
            expired: Vec::new(),
        };
        wheel.push_level(Level::new(tick_ms, wheel_size, start_ms));
        Ok(wheel)
    }

    fn push_level(&mut self, level: Level) {
        self.levels.push(level);
        for _ in 0..self.wheel_size {
            self.buckets.push(Bucket {
                items: Vec::new(),
                live: 0,
                expiration: UNSET,
            });
        }
    }

    /// Pending entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ids.len() == 0
    }

    #[inline]
    pub fn contains(&self, id: i64) -> bool {
        self.ids.find(id).is_some()
    }

    /// The start of the current level-0 tick.
    #[inline]
    pub fn current_ms(&self) -> i64 {
        self.levels[0].current
    }

    /// Levels created so far (1 + overflow wheels).
    pub fn levels(&self) -> usize {
        self.levels.len()
    }

    /// Schedules `id` to expire at `expiration_ms`. An id already pending is
    /// rescheduled (its old deadline dropped). Returns false, and keeps
    /// nothing, when the deadline falls in the current tick or earlier: the
    /// caller completes the operation now.
    #[inline]
    pub fn add(&mut self, id: i64, expiration_ms: i64) -> bool {
        let reached = self.levels[0].reached(expiration_ms);
        match self.ids.find(id) {
            Some(at) => {
                let (old, _) = self.ids.get(at);
                if reached {
                    self.ids.remove(at);
                    self.release(old);
                    return false;
                }
                // Point the slot at the new item before the old bucket may
                // compact: the old item is then dead to it.
                let (bucket, pos) = self.place(id, expiration_ms);
                self.ids.set(at, bucket, pos);
                self.release(old);
                true
            }
            None if reached => false,
            None => {
                let (bucket, pos) = self.place(id, expiration_ms);
                self.ids.insert(id, bucket, pos);
                true
            }
        }
    }

    /// Drops `id`'s deadline; false when it is not pending.
    #[inline]
    pub fn cancel(&mut self, id: i64) -> bool {
        match self.ids.find(id) {
            Some(at) => {
                let (bucket, _) = self.ids.get(at);
                self.ids.remove(at);
                self.release(bucket);
                true
            }
            None => false,
        }
    }

    /// `add` for each (id, deadline) pair, in order; the ids refused (their
    /// deadline already reached: the caller completes them now) are appended
    /// to `refused`. Panics unless the slices have the same length.
    pub fn add_many(&mut self, ids: &[i64], expirations_ms: &[i64], refused: &mut Vec<i64>) {
        assert_eq!(
            ids.len(),
            expirations_ms.len(),
            "ids and deadlines differ in length"
        );
        for (&id, &expiration) in ids.iter().zip(expirations_ms) {
            if !self.add(id, expiration) {
                refused.push(id);
            }
        }
    }

    /// `cancel` for each id, in order; returns how many were pending. The
    /// table slots of the ids a few places ahead are prefetched, so the cache
    /// misses of successive cancels overlap instead of following one another.
    pub fn cancel_many(&mut self, ids: &[i64]) -> usize {
        const AHEAD: usize = 8;
        let mut cancelled = 0;
        for (i, &id) in ids.iter().enumerate() {
            if let Some(&ahead) = ids.get(i + AHEAD) {
                self.ids.prefetch(ahead);
            }
            cancelled += usize::from(self.cancel(id));
        }
        cancelled
    }

    /// Moves the clock to `now_ms` and appends the ids whose deadlines it
    /// reached to `out`, in deadline order (ties in no set order). A time
    /// before the current tick changes nothing.
    pub fn advance_into(&mut self, now_ms: i64, out: &mut Vec<i64>) {
        let mut expired = std::mem::take(&mut self.expired);
        while let Some(&Reverse((expiration, bucket))) = self.heap.peek() {
            if expiration > now_ms {
                break;
            }
            self.heap.pop();
            if self.buckets[bucket as usize].expiration != expiration {
                continue; // defensive: a bucket is only ever pushed once per expiration
            }
            self.advance_clock(expiration);
            self.flush(bucket, &mut expired);
        }
        self.advance_clock(now_ms);
        // Entries of one level-0 bucket span one tick; with tick > 1 (or
        // entries re-placed from a higher level into an already popped range)
        // put them in deadline order.
        if !expired.is_sorted_by_key(|e| e.0) {
            expired.sort_by_key(|e| e.0);
        }
        out.extend(expired.iter().map(|e| e.1));
        expired.clear();
        self.expired = expired;
    }

    /// `advance_into` with a fresh vector.
    pub fn advance(&mut self, now_ms: i64) -> Vec<i64> {
        let mut out = Vec::new();
        self.advance_into(now_ms, &mut out);
        out
    }

    /// When the next bucket is due: no entry expires before it, so a reaper
    /// may sleep until then (for a bucket above level 0 the advance at that
    /// time re-places entries and may expire none). None when nothing is
    /// pending. Buckets emptied by cancels are dropped from the heap here.
    pub fn next_expiration_ms(&mut self) -> Option<i64> {
        while let Some(&Reverse((expiration, bucket))) = self.heap.peek() {
            let b = &mut self.buckets[bucket as usize];
            if b.expiration == expiration && b.live > 0 {
                return Some(expiration);
            }
            if b.expiration == expiration {
                b.expiration = UNSET;
                b.items.clear();
            }
            self.heap.pop();
        }
        None
    }

    fn advance_clock(&mut self, time_ms: i64) {
        let wheel_size = self.wheel_size;
        for level in &mut self.levels {
            if !level.reached(time_ms) {
                level.set_current(time_ms, wheel_size);
            }
        }
    }

    /// Counts one item of `bucket` out (cancelled or rescheduled); the caller
    /// has already dropped or re-pointed its id's table slot, which is what
    /// makes the item dead.
    #[inline]
    fn release(&mut self, bucket: u32) {
        let b = &mut self.buckets[bucket as usize];
        b.live -= 1;
        if b.live == 0 {
            b.items.clear();
        } else if b.items.len() - b.live > 2 * b.live + DEAD_SLACK {
            self.compact(bucket);
        }
    }

    /// The table slot of the item at (`bucket`, `pos`) if the item is live.
    #[inline]
    fn live_slot(&self, id: i64, bucket: u32, pos: usize) -> Option<At> {
        let at = self.ids.find(id)?;
        let (b, p) = self.ids.get(at);
        (b == bucket && p as usize == pos).then_some(at)
    }

    /// Drops a bucket's dead items, pointing the table at the moved ones.
    #[cold]
    fn compact(&mut self, bucket: u32) {
        let mut items = std::mem::take(&mut self.buckets[bucket as usize].items);
        let mut kept = 0;
        for pos in 0..items.len() {
            let item = items[pos];
            if let Some(at) = self.live_slot(item.id, bucket, pos) {
                items[kept] = item;
                self.ids.set(at, bucket, kept as u32);
                kept += 1;
            }
        }
        items.truncate(kept);
        let b = &mut self.buckets[bucket as usize];
        debug_assert_eq!(kept, b.live, "live count out of step with the table");
        b.items = items;
    }

    /// Appends a pending item (not expired at level 0) to the lowest level
    /// whose span holds its deadline, creating levels on demand. Returns its
    /// (bucket, position).
    #[inline]
    fn place(&mut self, id: i64, expiration: i64) -> (u32, u32) {
        let mut lvl = 0usize;
        loop {
            let level = self.levels[lvl];
            if i128::from(expiration) < i128::from(level.current) + level.interval {
                // current <= expiration < current + tick * wheel_size (the
                // entry is not reached at level 0, and a level's current is at
                // or before level 0's), so `ticks` is in 0..wheel_size; tick 1
                // (level 0 by default) skips the division.
                let offset = expiration - level.current;
                let ticks = if level.tick == 1 {
                    offset
                } else {
                    offset / level.tick
                };
                debug_assert!((0..self.wheel_size).contains(&ticks));
                let mut slot = level.current_bucket + ticks;
                if slot >= self.wheel_size {
                    slot -= self.wheel_size;
                }
                let bucket = (lvl as i64 * self.wheel_size + slot) as u32;
                let start = level.current + ticks * level.tick;
                let b = &mut self.buckets[bucket as usize];
                let pos = u32::try_from(b.items.len()).expect("more than 4G items in a bucket");
                b.items.push(Item { id, expiration });
                b.live += 1;
                if b.expiration != start {
                    debug_assert!(
                        b.expiration == UNSET,
                        "bucket reused while holding another range"
                    );
                    b.expiration = start;
                    self.heap.push(Reverse((start, bucket)));
                }
                return (bucket, pos);
            }
            lvl += 1;
            if lvl == self.levels.len() {
                // The new level's tick is the span of the one below; it starts
                // at the lower level's current time. The deadline did not fit
                // below, so that span is under expiration - current <= i64::MAX.
                let tick = i64::try_from(level.interval).expect("span below i64::MAX");
                let next = Level::new(tick, self.wheel_size, level.current);
                self.push_level(next);
            }
        }
    }

    /// Empties a due bucket: each live item either expires (pushed to
    /// `expired` as (deadline, id)) or is re-placed into a lower level.
    fn flush(&mut self, bucket: u32, expired: &mut Vec<(i64, i64)>) {
        let b = &mut self.buckets[bucket as usize];
        let mut items = std::mem::take(&mut b.items);
        b.live = 0;
        b.expiration = UNSET;
        let level0 = self.levels[0];
        for (pos, &Item { id, expiration }) in items.iter().enumerate() {
            // The table slots of the items a few places ahead are prefetched:
            // their cache misses overlap with this item's work.
            if let Some(ahead) = items.get(pos + FLUSH_AHEAD) {
                self.ids.prefetch(ahead.id);
            }
            let Some(at) = self.live_slot(id, bucket, pos) else {
                continue; // cancelled or rescheduled
            };
            if level0.reached(expiration) {
                self.ids.remove(at);
                expired.push((expiration, id));
            } else {
                let (to, pos) = self.place(id, expiration);
                self.ids.set(at, to, pos);
            }
        }
        // Keep the allocation for the bucket's next range.
        items.clear();
        let b = &mut self.buckets[bucket as usize];
        if b.items.capacity() == 0 {
            b.items = items;
        }
    }
}

impl fmt::Debug for TimingWheel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimingWheel")
            .field("tick_ms", &self.levels[0].tick)
            .field("wheel_size", &self.wheel_size)
            .field("current_ms", &self.levels[0].current)
            .field("levels", &self.levels.len())
            .field("pending", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

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

    /// The model: a map id -> deadline and a clock at tick granularity.
    struct Model {
        tick: i64,
        current: i64,
        pending: BTreeMap<i64, i64>,
    }

    impl Model {
        fn add(&mut self, id: i64, exp: i64) -> bool {
            self.pending.remove(&id);
            if exp < self.current + self.tick {
                return false;
            }
            self.pending.insert(id, exp);
            true
        }
        fn advance(&mut self, now: i64) -> Vec<(i64, i64)> {
            if now >= self.current + self.tick {
                self.current = now - now.rem_euclid(self.tick);
            }
            let limit = self.current + self.tick;
            let mut due: Vec<(i64, i64)> = self
                .pending
                .iter()
                .filter(|(_, &e)| e < limit)
                .map(|(&id, &e)| (e, id))
                .collect();
            due.sort();
            for (_, id) in &due {
                self.pending.remove(id);
            }
            due
        }
    }

    fn run_model(seed: u64, tick: i64, wheel_size: u32, max_delay: u64, steps: usize) {
        let mut rng = XorShift(seed);
        let start = (rng.below(1_000_000)) as i64;
        let mut wheel = TimingWheel::new(tick, wheel_size, start).unwrap();
        let mut model = Model {
            tick,
            current: start - start.rem_euclid(tick),
            pending: BTreeMap::new(),
        };
        let mut now = start;
        let mut next_id = 0i64;
        for _ in 0..steps {
            match rng.below(10) {
                0..=4 => {
                    let id = if rng.below(8) == 0 && next_id > 0 {
                        rng.below(next_id as u64) as i64 // reschedule an old id
                    } else {
                        next_id += 1;
                        next_id
                    };
                    let exp = now + rng.below(max_delay) as i64 - 3;
                    assert_eq!(wheel.add(id, exp), model.add(id, exp), "add {id} {exp}");
                }
                5 | 6 => {
                    let id = rng.below(next_id as u64 + 1) as i64;
                    assert_eq!(wheel.cancel(id), model.pending.remove(&id).is_some());
                }
                7 => {
                    let next = wheel.next_expiration_ms();
                    match model.pending.values().min() {
                        None => assert_eq!(next, None),
                        Some(&earliest) => {
                            let n = next.expect("pending entries but no next expiration");
                            assert!(n <= earliest, "next {n} after earliest {earliest}");
                            assert!(n > wheel.current_ms());
                        }
                    }
                }
                _ => {
                    let jump = match rng.below(20) {
                        0 => rng.below(max_delay * 2),
                        1..=3 => 0,
                        _ => rng.below(tick as u64 * 4 + 1),
                    };
                    now += jump as i64;
                    let want = model.advance(now);
                    let got = wheel.advance(now);
                    // Ties may come out in any order: compare deadlines in
                    // order and the sets of ids.
                    assert_eq!(got.len(), want.len(), "advance to {now}");
                    let mut got_sorted = got.clone();
                    got_sorted.sort();
                    let mut want_ids: Vec<i64> = want.iter().map(|w| w.1).collect();
                    want_ids.sort();
                    assert_eq!(got_sorted, want_ids);
                    let exps: Vec<i64> = want.iter().map(|w| w.0).collect();
                    let mut prev = i64::MIN;
                    for id in &got {
                        let exp = want.iter().find(|w| w.1 == *id).unwrap().0;
                        assert!(exp >= prev, "out of order: {exps:?} vs {got:?}");
                        prev = exp;
                    }
                }
            }
            assert_eq!(wheel.len(), model.pending.len());
        }
        // Drain: everything expires once the clock passes the last deadline.
        let last = model.pending.values().max().copied().unwrap_or(now);
        let want = model.advance(last + tick);
        assert_eq!(wheel.advance(last + tick).len(), want.len());
        assert!(wheel.is_empty());
        assert_eq!(wheel.next_expiration_ms(), None);
    }

    #[test]
    fn random_ops_match_model_tick_1() {
        for seed in 1..40 {
            run_model(seed * 7919, 1, 20, 10_000, 4000);
        }
    }

    #[test]
    fn random_ops_match_model_short_delays() {
        for seed in 1..40 {
            run_model(seed * 104_729, 1, 20, 50, 4000);
        }
    }

    #[test]
    fn random_ops_match_model_other_shapes() {
        for seed in 1..20 {
            run_model(seed * 31, 3, 4, 5_000, 3000);
            run_model(seed * 37, 10, 2, 100_000, 3000);
            run_model(seed * 41, 1, 20, 40_000_000, 3000);
        }
    }

    #[test]
    fn seed_example_levels() {
        // Tasks at +90 ms, +610 ms and +1610 ms land on three levels and
        // expire exactly at their deadlines.
        let mut w = TimingWheel::new(1, 20, 0).unwrap();
        assert!(w.add(1, 90));
        assert!(w.add(2, 610));
        assert!(w.add(3, 1610));
        assert_eq!(w.levels(), 3);
        assert!(w.advance(89).is_empty());
        assert_eq!(w.advance(90), vec![1]);
        assert!(w.advance(609).is_empty());
        assert_eq!(w.advance(610), vec![2]);
        assert!(w.advance(1609).is_empty());
        assert_eq!(w.advance(1610), vec![3]);
        assert!(w.is_empty());
    }

    #[test]
    fn expired_on_add_and_reschedule() {
        let mut w = TimingWheel::new(1, 20, 100).unwrap();
        assert!(!w.add(1, 100));
        assert!(!w.add(1, 5));
        assert!(w.add(1, 101));
        assert!(w.add(1, 500)); // rescheduled
        assert_eq!(w.len(), 1);
        assert!(w.advance(101).is_empty());
        assert!(!w.add(1, 50)); // rescheduled into the past: dropped
        assert!(w.is_empty());
        assert!(!w.cancel(1));
    }

    #[test]
    fn order_within_a_jump() {
        let mut w = TimingWheel::new(1, 20, 0).unwrap();
        let exps = [5_000i64, 3, 700, 19, 20, 21, 399, 400, 401, 8000, 8001, 1];
        for (i, e) in exps.iter().enumerate() {
            assert!(w.add(i as i64, *e));
        }
        let got = w.advance(100_000);
        let mut want: Vec<(i64, i64)> = exps
            .iter()
            .enumerate()
            .map(|(i, e)| (*e, i as i64))
            .collect();
        want.sort();
        assert_eq!(got, want.iter().map(|w| w.1).collect::<Vec<_>>());
    }

    #[test]
    fn far_deadlines_and_limits() {
        let mut w = TimingWheel::new(1, 20, 0).unwrap();
        assert!(w.add(1, i64::MAX));
        assert!(w.add(2, i64::MAX - 1));
        assert!(w.add(3, 1 << 62));
        assert_eq!(w.next_expiration_ms().map(|n| n <= 1 << 62), Some(true));
        assert_eq!(w.advance(1 << 62), vec![3]);
        assert_eq!(w.advance(i64::MAX), vec![2, 1]);
        assert!(TimingWheel::new(0, 20, 0).is_err());
        assert!(TimingWheel::new(1, 1, 0).is_err());
        assert!(TimingWheel::new(1, 20, -1).is_err());
    }

    #[test]
    fn next_expiration_skips_cancelled_buckets() {
        let mut w = TimingWheel::new(1, 20, 0).unwrap();
        w.add(1, 5);
        w.add(2, 9);
        assert_eq!(w.next_expiration_ms(), Some(5));
        w.cancel(1);
        assert_eq!(w.next_expiration_ms(), Some(9));
        w.add(3, 5); // the bucket dropped from the heap is reusable
        assert_eq!(w.next_expiration_ms(), Some(5));
        assert_eq!(w.advance(9), vec![3, 2]);
        assert_eq!(w.next_expiration_ms(), None);
    }

    #[test]
    fn slots_are_reused() {
        let mut w = TimingWheel::new(1, 20, 0).unwrap();
        for round in 0..10i64 {
            for i in 0..1000 {
                assert!(w.add(i, round * 100 + 50 + i % 40));
            }
            assert_eq!(w.advance(round * 100 + 99).len(), 1000);
        }
        assert!(w.buckets.iter().all(|b| b.items.capacity() <= 1000));
        assert_eq!(w.ids.ring.len(), MIN_RING);
        assert_eq!(w.ids.side.slots.len(), MIN_TABLE);
    }

    #[test]
    fn dead_items_are_bounded() {
        // One id rescheduled within one far bucket's range over and over (a
        // session's heartbeat): the bucket is compacted instead of keeping
        // every old deadline.
        let mut w = TimingWheel::new(1, 20, 0).unwrap();
        for id in 0..10i64 {
            assert!(w.add(id, 1_000_000));
        }
        for round in 0..10_000i64 {
            assert!(w.add(round % 10, 1_000_000 + round % 7));
        }
        let held: usize = w.buckets.iter().map(|b| b.items.len()).sum();
        assert!(held <= 3 * 10 + DEAD_SLACK + 1, "{held} items held");
        assert_eq!(w.len(), 10);
        let got = w.advance(2_000_000);
        assert_eq!(got.len(), 10);
    }

    #[test]
    fn batched_add_and_cancel_match_single_calls() {
        let mut rng = XorShift(99);
        let mut a = TimingWheel::new(1, 20, 1000).unwrap();
        let mut b = TimingWheel::new(1, 20, 1000).unwrap();
        let mut now = 1000i64;
        for _ in 0..200 {
            let ids: Vec<i64> = (0..100).map(|_| rng.below(3000) as i64).collect();
            let exps: Vec<i64> = (0..100).map(|_| now + rng.below(5000) as i64 - 3).collect();
            let mut refused = Vec::new();
            b.add_many(&ids, &exps, &mut refused);
            let mut want = Vec::new();
            for (&id, &e) in ids.iter().zip(&exps) {
                if !a.add(id, e) {
                    want.push(id);
                }
            }
            assert_eq!(refused, want);
            let cancels: Vec<i64> = (0..60).map(|_| rng.below(3000) as i64).collect();
            let n = cancels.iter().filter(|&&id| a.cancel(id)).count();
            assert_eq!(b.cancel_many(&cancels), n);
            now += rng.below(40) as i64;
            let (mut x, mut y) = (a.advance(now), b.advance(now));
            x.sort();
            y.sort();
            assert_eq!(x, y);
            assert_eq!(a.len(), b.len());
        }
    }

    #[test]
    fn id_table_keeps_robin_hood_order() {
        // Counter ids (whole runs at home) mixed with sparse ones, inserted
        // and deleted at random: every id stays findable, and along each run
        // of slots an id is at most one slot further from home than the one
        // before it (a run starts at its first id's home).
        let mut rng = XorShift(5);
        let mut t = IdTable::new();
        let mut present = std::collections::HashSet::new();
        for step in 0..200_000u32 {
            let id = if rng.below(4) == 0 {
                (rng.next() >> 1) as i64
            } else {
                rng.below(50_000) as i64
            };
            match t.probe(id) {
                Ok(at) => {
                    t.remove_at(at);
                    assert!(present.remove(&id));
                }
                Err(_) => {
                    t.reserve_one();
                    let at = t.probe(id).unwrap_err();
                    t.fill(at, id, 0, step);
                    assert!(present.insert(id));
                }
            }
            if step % 20_000 == 0 || step == 199_999 {
                assert_eq!(t.len, present.len());
                for &id in &present {
                    assert!(t.find(id).is_some(), "{id} lost");
                }
                let n = t.slots.len();
                for i in 0..n {
                    let s = t.slots[i];
                    if s.bucket == EMPTY {
                        continue;
                    }
                    let prev = t.slots[(i + n - 1) & t.mask];
                    let d = t.distance(i, s.id);
                    if prev.bucket == EMPTY {
                        assert_eq!(d, 0, "run starts away from home");
                    } else {
                        assert!(d <= t.distance((i + n - 1) & t.mask, prev.id) + 1);
                    }
                }
            }
        }
    }

    #[test]
    fn strided_and_negative_ids() {
        let mut w = TimingWheel::new(1, 20, 0).unwrap();
        let ids: Vec<i64> = (0..5000i64)
            .map(|i| i << 20)
            .chain((0..5000).map(|i| -i - 1))
            .chain((0..5000).map(|i| i * 64 + 3))
            .collect();
        for (k, &id) in ids.iter().enumerate() {
            assert!(w.add(id, 10 + (k as i64 % 50)));
        }
        assert_eq!(w.len(), ids.len());
        for &id in ids.iter().step_by(3) {
            assert!(w.cancel(id));
        }
        for &id in ids.iter().step_by(3) {
            assert!(!w.contains(id));
        }
        let mut got = w.advance(100);
        got.sort();
        let mut want: Vec<i64> = ids
            .iter()
            .enumerate()
            .filter(|(k, _)| k % 3 != 0)
            .map(|(_, &id)| id)
            .collect();
        want.sort();
        assert_eq!(got, want);
        assert_eq!(w.ids.ring.len(), MIN_RING);
        assert_eq!(w.ids.side.slots.len(), MIN_TABLE);
    }

    /// Checks the id index against its invariants: every id of the model is
    /// found where it should be (ring inside the window, side below it), and
    /// the ring is at most 8 slots per ring id (or the minimum).
    fn check_ids(ids: &Ids, model: &std::collections::HashMap<i64, (u32, u32)>) {
        assert_eq!(ids.len(), model.len());
        for (&id, &loc) in model {
            let at = ids.find(id).unwrap_or_else(|| panic!("{id} lost"));
            assert_eq!(ids.get(at), loc);
            match at {
                At::Ring(_) => assert!(ids.in_window(id).is_some()),
                At::Side(_) => assert!(id < ids.lo, "{id} in the side table at or above lo"),
                At::Far(_) => assert!(i128::from(id) >= ids.end(), "far id {id} not above"),
            }
        }
        let in_ring = ids.ring.iter().filter(|&&l| !Loc(l).is_free()).count();
        assert_eq!(in_ring, ids.ring_len);
        let wide = ids.ring.iter().filter(|&&l| Loc(l).is_wide()).count();
        assert_eq!(wide, ids.wide.len, "wide slots and wide entries differ");
        assert!(
            ids.ring.len() <= MIN_RING.max(8 * ids.ring_len),
            "ring of {} for {} ids",
            ids.ring.len(),
            ids.ring_len
        );
    }

    #[test]
    fn id_ring_matches_a_map() {
        // Counters (the usual caller), counters with gaps, random ids, far
        // jumps (the far map) and ids near both ends of i64, inserted and
        // removed at random.
        for seed in 1..6u64 {
            let mut rng = XorShift(seed * 7777);
            let mut ids = Ids::new();
            let mut model = std::collections::HashMap::new();
            let mut counter = match seed {
                1 => i64::MAX - 20_000,
                2 => i64::MIN,
                _ => rng.below(1 << 40) as i64 - (1 << 39),
            };
            for step in 0..60_000u32 {
                let id = match rng.below(200) {
                    0..=119 => {
                        counter = counter.wrapping_add(1 + (rng.below(64) == 0) as i64 * 20);
                        counter
                    }
                    120..=179 => counter.wrapping_sub(rng.below(5_000) as i64),
                    180 => rng.next() as i64,
                    181 => counter.wrapping_add(rng.below(1 << 20) as i64),
                    _ => match model.keys().next() {
                        Some(&k) => k,
                        None => continue,
                    },
                };
                match ids.find(id) {
                    Some(at) => {
                        if rng.below(3) == 0 {
                            ids.set(at, 1, step);
                            model.insert(id, (1, step));
                        } else {
                            ids.remove(at);
                            model.remove(&id);
                        }
                    }
                    None => {
                        assert!(!model.contains_key(&id));
                        ids.insert(id, 0, step);
                        model.insert(id, (0, step));
                    }
                }
                if step % 5_000 == 0 {
                    check_ids(&ids, &model);
                }
            }
            check_ids(&ids, &model);
            let all: Vec<i64> = model.keys().copied().collect();
            for id in all {
                let at = ids.find(id).unwrap();
                ids.remove(at);
                model.remove(&id);
            }
            check_ids(&ids, &model);
            assert_eq!(ids.ring.len(), MIN_RING);
        }
    }

    #[test]
    fn id_ring_grows_for_a_window_of_counter_ids() {
        // 100k pending counter ids (each live 50k ids): the ring grows to hold
        // them; the window wraps the ring many times over.
        let mut ids = Ids::new();
        for id in 0..1_000_000i64 {
            ids.insert(id, 0, id as u32);
            if id >= 50_000 {
                let at = ids.find(id - 50_000).unwrap();
                ids.remove(at);
            }
        }
        assert_eq!(ids.len(), 50_000);
        assert_eq!(ids.side.len, 0, "no counter id went to the side table");
        assert!(ids.ring.len() <= 4 * 65_536, "ring of {}", ids.ring.len());
        for id in 950_000..1_000_000i64 {
            assert_eq!(ids.get(ids.find(id).unwrap()), (0, id as u32));
        }
        assert!(ids.find(949_999).is_none());
    }

    #[test]
    fn long_lived_id_among_short_ones() {
        // One operation pending throughout (a session's far deadline) while
        // 1M short ones come and go, 1000 at a time: the ring stays the size
        // of the short ones' window, the long one moves to the side table.
        let mut w = TimingWheel::new(1, 20, 0).unwrap();
        assert!(w.add(0, 1 << 40));
        let mut largest = 0;
        for ms in 0..1000i64 {
            for k in 0..1000 {
                let id = 1 + ms * 1000 + k;
                assert!(w.add(id, ms + 1 + k % 10));
                if k % 2 == 0 {
                    assert!(w.cancel(id));
                }
            }
            w.advance(ms);
            largest = largest.max(w.ids.ring.len());
        }
        w.advance(1000 + 20);
        assert!(largest <= 8_192, "ring of {largest} slots");
        assert_eq!(w.len(), 1);
        assert_eq!(w.ids.side.len, 1);
        assert_eq!(w.ids.ring.len(), MIN_RING);
        assert!(w.contains(0));
        assert!(w.cancel(0));
        assert!(w.is_empty());
    }

    #[test]
    fn far_stray_id_keeps_the_ring() {
        // 10k pending counter ids, then one id 1M ahead (another id space):
        // it waits in the far map instead of pushing the 10k out to the side
        // table, and moves into the ring when the counter gets there.
        let mut ids = Ids::new();
        for id in 0..10_000i64 {
            ids.insert(id, 0, id as u32);
        }
        ids.insert(1_000_000, 7, 7);
        assert_eq!((ids.side.len, ids.far.len(), ids.ring_len), (0, 1, 10_000));
        assert_eq!(ids.get(ids.find(1_000_000).unwrap()), (7, 7));
        for id in 10_000..1_000_100i64 {
            if id != 1_000_000 {
                ids.insert(id, 0, id as u32);
            }
            let old = ids.find(id - 10_000).unwrap();
            ids.remove(old);
        }
        assert!(ids.far.is_empty());
        assert_eq!(ids.side.len, 0);
        assert!(matches!(ids.find(1_000_000), Some(At::Ring(_))));
        assert_eq!(ids.get(ids.find(1_000_000).unwrap()), (7, 7));
        assert_eq!(ids.len(), 10_000);
    }

    #[test]
    fn ring_slot_packing() {
        for (bucket, pos) in [
            (0, 0),
            (0, POS_MASK - 1),
            (509, 0),
            (509, POS_MASK - 1),
            (7, 12345),
        ] {
            let loc = Loc::pack(bucket, pos).expect("fits");
            assert!(!loc.is_free() && !loc.is_wide());
            assert_eq!((loc.bucket(), loc.pos()), (bucket, pos));
        }
        for (bucket, pos) in [(510, 0), (0, POS_MASK), (u32::MAX, u32::MAX), (3, u32::MAX)] {
            assert!(Loc::pack(bucket, pos).is_none(), "({bucket}, {pos}) packed");
        }
    }

    #[test]
    fn id_ring_with_wide_locations_matches_a_map() {
        // Locations that do not fit in a ring slot (bucket 510 or above,
        // position 2^23 - 1 or above) mixed with ones that do, set, moved
        // between the two kinds, and carried by the window's slides, growth
        // and shrinking into the side table.
        for seed in 1..5u64 {
            let mut rng = XorShift(seed * 4242);
            let mut ids = Ids::new();
            let mut model = std::collections::HashMap::new();
            let mut counter = rng.below(1 << 30) as i64;
            let loc = |rng: &mut XorShift| -> (u32, u32) {
                match rng.below(4) {
                    0 => (510 + rng.below(1 << 20) as u32, rng.below(1000) as u32),
                    1 => (rng.below(20) as u32, POS_MASK + rng.below(1000) as u32),
                    _ => (rng.below(510) as u32, rng.below(u64::from(POS_MASK)) as u32),
                }
            };
            for step in 0..40_000u32 {
                let id = match rng.below(100) {
                    0..=59 => {
                        counter += 1 + (rng.below(64) == 0) as i64 * 5_000;
                        counter
                    }
                    60..=89 => counter - rng.below(3_000) as i64,
                    _ => match model.keys().next() {
                        Some(&k) => k,
                        None => continue,
                    },
                };
                match ids.find(id) {
                    Some(at) => {
                        assert_eq!(ids.get(at), model[&id]);
                        if rng.below(2) == 0 {
                            let l = loc(&mut rng);
                            ids.set(at, l.0, l.1);
                            model.insert(id, l);
                        } else {
                            ids.remove(at);
                            model.remove(&id);
                        }
                    }
                    None => {
                        assert!(!model.contains_key(&id));
                        let l = loc(&mut rng);
                        ids.insert(id, l.0, l.1);
                        model.insert(id, l);
                    }
                }
                if step % 4_000 == 0 {
                    check_ids(&ids, &model);
                }
            }
            check_ids(&ids, &model);
            let all: Vec<i64> = model.keys().copied().collect();
            for id in all {
                let at = ids.find(id).unwrap();
                ids.remove(at);
                model.remove(&id);
            }
            check_ids(&ids, &model);
            assert_eq!(ids.wide.len, 0);
            assert_eq!(ids.ring.len(), MIN_RING);
        }
    }

    #[test]
    fn random_ops_match_model_wide_wheel() {
        // 600 buckets a level: every bucket above level 0 is past what a
        // ring slot holds, so those ids' locations are wide.
        run_model(31, 1, 600, 2_000_000, 20_000);
        run_model(32, 3, 1024, 50_000_000, 20_000);
        let mut w = TimingWheel::new(1, 600, 0).unwrap();
        for id in 0..1000 {
            assert!(w.add(id, 1000 + id));
        }
        assert_eq!(w.levels(), 2);
        assert_eq!(w.ids.wide.len, 1000, "level-1 buckets are 600 and above");
        assert!(w.cancel(500));
        assert!(w.add(501, 2500)); // rescheduled, still wide
        assert_eq!(w.advance(1499), (0..500).collect::<Vec<i64>>());
        // The rest were re-placed into level 0: wide where the bucket is 510+.
        assert!(w.ids.wide.len < 499);
        assert_eq!(w.advance(2000), (502..1000).collect::<Vec<i64>>());
        assert_eq!(w.advance(2500), [501]);
        assert!(w.is_empty());
        assert_eq!(w.ids.wide.len, 0);
    }
}
