//! A segment's sparse indexes, memory-mapped, in Kafka's file formats.
//!
//! * `.index` ([`OffsetIndex`]): 8-byte entries, relative offset `u32` BE then
//!   physical position `u32` BE. Maps "an offset" to "a byte position at or
//!   before the batch holding it".
//! * `.timeindex` ([`TimeIndex`]): 12-byte entries, timestamp `i64` BE then
//!   relative offset `u32` BE. Maps "a time" to "an offset at or before the
//!   first record at that time".
//!
//! Both are the same thing with a different entry layout: a file of fixed-size
//! entries sorted by their search key, appended at the end, looked up by floor.
//! [`MmapIndex`] holds that shared part; [`EntryLayout`] describes an entry.
//!
//! ### Entry count of an existing file
//! A writable index is preallocated (zero-filled) to its maximum size and only
//! trimmed to its real length on roll or close. After an unclean shutdown the
//! file still carries the zero tail, so on open the entries are counted up to
//! the first all-zero entry *after entry 0* (entry 0 may legitimately be all
//! zero: relative offset 0 at position 0, or timestamp 0). An all-zero entry 0
//! is counted only if entry 1 is not all-zero or the file holds exactly one
//! entry; a lone `(base_offset, 0)` entry followed by a zero tail is therefore
//! read as an empty index, which answers every lookup identically. Truncation
//! zeroes the entries it drops so that this rule stays exact for files that are
//! reopened without being trimmed.
//!
//! ### Lookups
//! Lookups use Kafka's cache-friendly binary search: readers almost always ask
//! for recent offsets, so the last 8192 bytes' worth of entries (the "warm"
//! section, a couple of pages that stay resident) are searched first when the
//! target falls inside them, and only otherwise the older ("cold") part.

use std::fs::{self, File, OpenOptions};
use std::hint::select_unpredictable;
use std::io;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use memmap2::{Mmap, MmapMut, MmapOptions};

use crate::error::{Error, Result};

/// Bytes at the end of an index searched first (Kafka's warm section).
pub const WARM_SECTION_BYTES: usize = 8192;
/// Kafka's default `segment.index.bytes`.
pub const DEFAULT_MAX_INDEX_SIZE: u64 = 10 * 1024 * 1024;
/// Timestamp of "no entry" in a time index (Kafka's `RecordBatch.NO_TIMESTAMP`).
pub const NO_TIMESTAMP: i64 = -1;

/// One entry layout: its size, and how to read the two fields every layout has.
pub trait EntryLayout {
    const ENTRY_SIZE: usize;
    /// Human name for messages ("offset index", "time index").
    const NAME: &'static str;
    /// The relative offset stored in `raw` (one entry's bytes).
    fn relative_offset(raw: &[u8]) -> u32;
    /// The key this index is searched by: absolute offset, or timestamp.
    fn key(raw: &[u8], base_offset: i64) -> i64;
    /// The key of the entry at `p` in the index's own terms (relative
    /// offset, or timestamp): what the search loops compare, with no base
    /// offset added. Read without bounds checks.
    ///
    /// # Safety
    /// `p..p + ENTRY_SIZE` must be readable.
    unsafe fn stored_key_at(p: *const u8) -> i64;
    /// A search target (absolute offset, or timestamp) in stored-key terms,
    /// ordered the same way against every stored key.
    fn stored_target(target: i64, base_offset: i64) -> i64;
}

/// `.index`: relative offset u32, position u32.
pub struct OffsetLayout;
/// `.timeindex`: timestamp i64, relative offset u32.
pub struct TimeLayout;

impl EntryLayout for OffsetLayout {
    const ENTRY_SIZE: usize = 8;
    const NAME: &'static str = "offset index";
    #[inline(always)]
    fn relative_offset(raw: &[u8]) -> u32 {
        u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]])
    }
    #[inline(always)]
    fn key(raw: &[u8], base_offset: i64) -> i64 {
        base_offset + Self::relative_offset(raw) as i64
    }
    #[inline(always)]
    unsafe fn stored_key_at(p: *const u8) -> i64 {
        u32::from_be(std::ptr::read_unaligned(p as *const u32)) as i64
    }
    #[inline(always)]
    fn stored_target(target: i64, base_offset: i64) -> i64 {
        target.saturating_sub(base_offset)
    }
}

impl EntryLayout for TimeLayout {
    const ENTRY_SIZE: usize = 12;
    const NAME: &'static str = "time index";
    #[inline(always)]
    fn relative_offset(raw: &[u8]) -> u32 {
        u32::from_be_bytes([raw[8], raw[9], raw[10], raw[11]])
    }
    #[inline(always)]
    fn key(raw: &[u8], _base_offset: i64) -> i64 {
        i64::from_be_bytes([
            raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
        ])
    }
    #[inline(always)]
    unsafe fn stored_key_at(p: *const u8) -> i64 {
        i64::from_be(std::ptr::read_unaligned(p as *const i64))
    }
    #[inline(always)]
    fn stored_target(target: i64, _base_offset: i64) -> i64 {
        target
    }
}

enum Mapping {
    Writable(MmapMut),
    ReadOnly(Mmap),
    /// A zero-length file (nothing to map).
    Empty,
    Closed,
}

/// The layout-independent part of an index: file, mapping, entry count.
pub struct MmapIndex<L: EntryLayout> {
    path: PathBuf,
    base_offset: i64,
    max_index_size: u64,
    writable: bool,
    map: Mapping,
    /// Length of the file (and of the mapping) in bytes.
    length: u64,
    entries: usize,
    max_entries: usize,
    /// Bytes from the start of the file known to have disk blocks behind them
    /// (see `reserve`).
    reserved: u64,
    _layout: PhantomData<L>,
}

/// Disk blocks are reserved for a mapped index this many bytes at a time.
const RESERVE_CHUNK: u64 = 64 * 1024;

/// Give `path`'s byte range `[from, to)` real disk blocks. A preallocated
/// index is a sparse file; storing into a hole of a mapping when the disk is
/// full raises SIGBUS and kills the process, whereas fallocate answers ENOSPC,
/// which surfaces as a storage error.
#[cfg(target_os = "linux")]
fn reserve_blocks(path: &Path, from: u64, to: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let file = OpenOptions::new().write(true).open(path)?;
    // SAFETY: a valid open fd and a non-negative range.
    let rc = unsafe {
        libc::posix_fallocate(
            file.as_raw_fd(),
            from as libc::off_t,
            (to - from) as libc::off_t,
        )
    };
    match rc {
        0 => Ok(()),
        // Filesystems without fallocate keep the sparse behaviour.
        libc::EOPNOTSUPP | libc::EINVAL => Ok(()),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

#[cfg(not(target_os = "linux"))]
fn reserve_blocks(_path: &Path, _from: u64, _to: u64) -> io::Result<()> {
    Ok(())
}

#[inline]
fn round_down(n: u64, multiple: usize) -> u64 {
    n - n % multiple as u64
}

fn map_file(file: &File, length: u64, writable: bool) -> Result<Mapping> {
    if length == 0 {
        return Ok(Mapping::Empty);
    }
    let len = usize::try_from(length)
        .map_err(|_| Error::Io(io::Error::other("index file too large to map")))?;
    // SAFETY: the index file is owned by this process's storage layer; nobody
    // truncates it behind the mapping (resize drops the mapping first).
    unsafe {
        if writable {
            Ok(Mapping::Writable(
                MmapOptions::new().len(len).map_mut(file)?,
            ))
        } else {
            Ok(Mapping::ReadOnly(MmapOptions::new().len(len).map(file)?))
        }
    }
}

impl<L: EntryLayout> MmapIndex<L> {
    /// Open (or, when writable and absent, create and preallocate) an index file.
    pub fn open(
        path: impl AsRef<Path>,
        base_offset: i64,
        max_index_size: u64,
        writable: bool,
    ) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let (file, created) = if writable {
            match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(f) => (f, true),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => (
                    OpenOptions::new().read(true).write(true).open(&path)?,
                    false,
                ),
                Err(e) => return Err(e.into()),
            }
        } else {
            (File::open(&path)?, false)
        };
        if created {
            file.set_len(round_down(max_index_size, L::ENTRY_SIZE))?;
        }
        let length = file.metadata()?.len();
        let map = map_file(&file, length, writable)?;
        let max_entries = (length / L::ENTRY_SIZE as u64) as usize;
        let mut index = MmapIndex {
            path,
            base_offset,
            max_index_size,
            writable,
            map,
            length,
            entries: 0,
            max_entries,
            reserved: 0,
            _layout: PhantomData,
        };
        if !created {
            index.entries = index.count_entries();
            index.reserved = index.size_in_bytes();
        }
        Ok(index)
    }

    /// Entries before the zero-filled preallocated tail (see the module docs).
    fn count_entries(&self) -> usize {
        let data = self.data_unchecked();
        let n = self.max_entries;
        let zero = |i: usize| {
            data[i * L::ENTRY_SIZE..(i + 1) * L::ENTRY_SIZE]
                .iter()
                .all(|&b| b == 0)
        };
        if n == 0 {
            return 0;
        }
        if zero(0) && n > 1 && zero(1) {
            return 0;
        }
        (1..n).find(|&i| zero(i)).unwrap_or(n)
    }

    #[inline]
    fn data_unchecked(&self) -> &[u8] {
        match &self.map {
            Mapping::Writable(m) => m,
            Mapping::ReadOnly(m) => m,
            Mapping::Empty | Mapping::Closed => &[],
        }
    }

    fn closed_error(&self) -> Error {
        Error::Io(io::Error::other(format!(
            "{} {} is closed",
            L::NAME,
            self.path.display()
        )))
    }

    #[inline]
    fn check_open(&self) -> Result<()> {
        if matches!(self.map, Mapping::Closed) {
            Err(self.closed_error())
        } else {
            Ok(())
        }
    }

    fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        if self.writable {
            Ok(())
        } else {
            Err(Error::Io(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{} {} is open read-only", L::NAME, self.path.display()),
            )))
        }
    }

    /// The mapped bytes of the whole file.
    #[inline]
    pub fn data(&self) -> Result<&[u8]> {
        self.check_open()?;
        Ok(self.data_unchecked())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn max_index_size(&self) -> u64 {
        self.max_index_size
    }
    pub fn entries(&self) -> usize {
        self.entries
    }
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }
    pub fn size_in_bytes(&self) -> u64 {
        (self.entries * L::ENTRY_SIZE) as u64
    }
    pub fn file_length(&self) -> u64 {
        self.length
    }
    pub fn is_full(&self) -> bool {
        self.entries >= self.max_entries
    }
    pub fn is_writable(&self) -> bool {
        self.writable
    }
    pub fn is_closed(&self) -> bool {
        matches!(self.map, Mapping::Closed)
    }

    /// The bytes of entry `n` (< entries).
    #[inline(always)]
    fn raw(data: &[u8], n: usize) -> &[u8] {
        &data[n * L::ENTRY_SIZE..(n + 1) * L::ENTRY_SIZE]
    }

    /// Bytes of entry `n`, or None past the last entry.
    pub fn raw_entry(&self, n: usize) -> Result<Option<&[u8]>> {
        let data = self.data()?;
        Ok((n < self.entries).then(|| Self::raw(data, n)))
    }

    /// Convert an absolute offset to the relative one stored in entries.
    pub fn relative(&self, offset: i64) -> Result<u32> {
        let rel = offset.wrapping_sub(self.base_offset);
        if offset < self.base_offset || rel > i32::MAX as i64 {
            return Err(Error::IndexOffsetOverflow(format!(
                "offset {offset} does not fit the {} of {} (base offset {})",
                L::NAME,
                self.path.display(),
                self.base_offset
            )));
        }
        Ok(rel as u32)
    }

    /// Write one encoded entry after the last one.
    fn push(&mut self, entry: &[u8]) -> Result<()> {
        debug_assert_eq!(entry.len(), L::ENTRY_SIZE);
        self.check_writable()?;
        if self.is_full() {
            return Err(Error::InvalidOffset(format!(
                "{} {} is full ({} entries)",
                L::NAME,
                self.path.display(),
                self.entries
            )));
        }
        let at = self.entries * L::ENTRY_SIZE;
        let end = (at + L::ENTRY_SIZE) as u64;
        if end > self.reserved {
            let to = (end.div_ceil(RESERVE_CHUNK) * RESERVE_CHUNK).min(self.length);
            reserve_blocks(&self.path, self.reserved, to)?;
            self.reserved = to;
        }
        match &mut self.map {
            Mapping::Writable(m) => m[at..at + L::ENTRY_SIZE].copy_from_slice(entry),
            _ => unreachable!("a writable index with room has a writable mapping"),
        }
        self.entries += 1;
        Ok(())
    }

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
    fn floor_slot_by(&self, target: i64, key: impl Fn(&[u8], i64) -> i64) -> Option<usize> {
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

    /// Number of leading entries whose offset is < `offset`.
    fn entries_below_offset(&self, offset: i64) -> usize {
        match self.floor_slot_by(offset, |raw, base| base + L::relative_offset(raw) as i64) {
            None => 0,
            Some(slot) => {
                let raw = Self::raw(self.data_unchecked(), slot);
                if self.base_offset + L::relative_offset(raw) as i64 == offset {
                    slot
                } else {
                    slot + 1
                }
            }
        }
    }

    /// Keep the first `n` entries, zeroing the dropped ones.
    fn truncate_to_entries(&mut self, n: usize) -> Result<()> {
        self.check_writable()?;
        if n >= self.entries {
            return Ok(());
        }
        let (from, to) = (n * L::ENTRY_SIZE, self.entries * L::ENTRY_SIZE);
        if let Mapping::Writable(m) = &mut self.map {
            m[from..to].fill(0);
        }
        self.entries = n;
        Ok(())
    }

    /// Drop every entry whose offset is >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> Result<()> {
        self.check_writable()?;
        let keep = self.entries_below_offset(offset);
        self.truncate_to_entries(keep)
    }

    /// Drop every entry.
    pub fn truncate(&mut self) -> Result<()> {
        self.truncate_to_entries(0)
    }

    /// Kafka's `reset`: drop every entry and grow back to the maximum size.
    pub fn reset(&mut self) -> Result<()> {
        self.truncate()?;
        self.resize(self.max_index_size)?;
        Ok(())
    }

    /// Set the file length (rounded down to a whole entry) and remap.
    /// Returns false when the length is already that.
    pub fn resize(&mut self, new_size: u64) -> Result<bool> {
        self.check_writable()?;
        let rounded = round_down(new_size, L::ENTRY_SIZE);
        if rounded == self.length {
            return Ok(false);
        }
        // Unmap before changing the length: touching a mapping past the end
        // of its file is a SIGBUS.
        self.map = Mapping::Empty;
        let file = OpenOptions::new().read(true).write(true).open(&self.path)?;
        file.set_len(rounded)?;
        self.map = map_file(&file, rounded, true)?;
        self.length = rounded;
        self.reserved = self.reserved.min(rounded);
        self.max_entries = (rounded / L::ENTRY_SIZE as u64) as usize;
        self.entries = self.entries.min(self.max_entries);
        Ok(true)
    }

    /// Shrink the file to exactly the bytes of its entries.
    pub fn trim_to_valid_size(&mut self) -> Result<()> {
        self.resize(self.size_in_bytes()).map(|_| ())
    }

    /// Write dirty pages to disk (msync).
    pub fn flush(&self) -> Result<()> {
        self.check_open()?;
        if let Mapping::Writable(m) = &self.map {
            m.flush()?;
        }
        Ok(())
    }

    /// Rename the file, keeping the mapping (valid across a rename).
    pub fn rename_to(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        fs::rename(&self.path, path)?;
        self.path = path.to_path_buf();
        Ok(())
    }

    /// Trim to valid size (when writable) and unmap; later calls fail.
    pub fn close(&mut self) -> Result<()> {
        if self.is_closed() {
            return Ok(());
        }
        let trimmed = if self.writable {
            self.trim_to_valid_size()
        } else {
            Ok(())
        };
        self.map = Mapping::Closed;
        trimmed
    }

    fn corrupt(&self, what: String) -> Error {
        Error::CorruptIndex(format!(
            "{} {} (base offset {}): {what}",
            L::NAME,
            self.path.display(),
            self.base_offset
        ))
    }

    /// The checks shared by both layouts: length, and every relative offset
    /// within the i32 range Kafka allows.
    fn sanity_check_common(&self) -> Result<()> {
        self.check_open()?;
        if round_down(self.length, L::ENTRY_SIZE) != self.length {
            return Err(self.corrupt(format!(
                "file length {} is not a multiple of the {}-byte entry size",
                self.length,
                L::ENTRY_SIZE
            )));
        }
        Ok(())
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

// ------------------------------------------------------------------ OffsetIndex

/// A segment's `.index`.
pub struct OffsetIndex {
    inner: MmapIndex<OffsetLayout>,
}

impl OffsetIndex {
    pub fn open(
        path: impl AsRef<Path>,
        base_offset: i64,
        max_index_size: u64,
        writable: bool,
    ) -> Result<Self> {
        Ok(OffsetIndex {
            inner: MmapIndex::open(path, base_offset, max_index_size, writable)?,
        })
    }

    /// The shared file/mapping part (sizes, truncation, resize, flush...).
    pub fn index(&self) -> &MmapIndex<OffsetLayout> {
        &self.inner
    }
    pub fn index_mut(&mut self) -> &mut MmapIndex<OffsetLayout> {
        &mut self.inner
    }

    #[inline]
    fn decode(&self, raw: &[u8]) -> (i64, u32) {
        (
            self.inner.base_offset + OffsetLayout::relative_offset(raw) as i64,
            u32::from_be_bytes([raw[4], raw[5], raw[6], raw[7]]),
        )
    }

    /// (absolute offset, position) of entry `n`; None past the last entry.
    pub fn entry(&self, n: usize) -> Result<Option<(i64, u32)>> {
        Ok(self.inner.raw_entry(n)?.map(|raw| self.decode(raw)))
    }

    /// Offset of the last entry, or the base offset when empty.
    pub fn last_offset(&self) -> i64 {
        match self.inner.entries {
            0 => self.inner.base_offset,
            n => {
                self.decode(MmapIndex::<OffsetLayout>::raw(
                    self.inner.data_unchecked(),
                    n - 1,
                ))
                .0
            }
        }
    }

    fn last_position(&self) -> u32 {
        match self.inner.entries {
            0 => 0,
            n => {
                self.decode(MmapIndex::<OffsetLayout>::raw(
                    self.inner.data_unchecked(),
                    n - 1,
                ))
                .1
            }
        }
    }

    /// Add `offset -> position`. The offset must exceed the last entry's, the
    /// position must not go back, and the index must have room.
    pub fn append(&mut self, offset: i64, position: i64) -> Result<()> {
        self.inner.check_writable()?;
        let rel = self.inner.relative(offset)?;
        let Ok(pos) = u32::try_from(position) else {
            return Err(Error::InvalidOffset(format!(
                "position {position} does not fit an offset index entry"
            )));
        };
        if self.inner.entries > 0 {
            let (last, last_pos) = (self.last_offset(), self.last_position());
            if offset <= last {
                return Err(Error::InvalidOffset(format!(
                    "attempt to append offset {offset} to {} (no larger than the last offset {last})",
                    self.inner.path.display()
                )));
            }
            if pos < last_pos {
                return Err(Error::InvalidOffset(format!(
                    "attempt to append position {pos} for offset {offset} to {} (before the last position {last_pos})",
                    self.inner.path.display()
                )));
            }
        }
        let mut e = [0u8; 8];
        e[..4].copy_from_slice(&rel.to_be_bytes());
        e[4..].copy_from_slice(&pos.to_be_bytes());
        self.inner.push(&e)
    }

    /// (offset, position) of the greatest entry with offset <= `target`;
    /// (base_offset, 0) when there is none.
    #[inline]
    pub fn lookup(&self, target: i64) -> Result<(i64, u32)> {
        self.inner.check_open()?;
        Ok(self.lookup_unchecked(target))
    }

    #[inline(always)]
    fn lookup_unchecked(&self, target: i64) -> (i64, u32) {
        match self.inner.floor_slot(target) {
            None => (self.inner.base_offset, 0),
            Some(slot) => self.decode(MmapIndex::<OffsetLayout>::raw(
                self.inner.data_unchecked(),
                slot,
            )),
        }
    }

    /// [`lookup`](Self::lookup) for many targets at once, appending to `out`.
    pub fn lookup_many(&self, targets: &[i64], out: &mut Vec<(i64, u32)>) -> Result<()> {
        self.inner.check_open()?;
        let start = out.len();
        let none = (self.inner.base_offset, 0);
        out.resize(start + targets.len(), none);
        let dst = &mut out[start..];
        let data = self.inner.data_unchecked();
        self.inner.for_each_floor_slot(targets, |i, slot| {
            if let Some(s) = slot {
                dst[i] = self.decode(MmapIndex::<OffsetLayout>::raw(data, s));
            }
        });
        Ok(())
    }

    /// CorruptIndex unless the length is whole entries, offsets strictly
    /// increase from >= base offset, and positions never go back.
    pub fn sanity_check(&self) -> Result<()> {
        self.inner.sanity_check_common()?;
        let data = self.inner.data_unchecked();
        let mut prev: Option<(u32, u32)> = None;
        for n in 0..self.inner.entries {
            let raw = MmapIndex::<OffsetLayout>::raw(data, n);
            let rel = OffsetLayout::relative_offset(raw);
            let pos = u32::from_be_bytes([raw[4], raw[5], raw[6], raw[7]]);
            if rel > i32::MAX as u32 {
                return Err(self
                    .inner
                    .corrupt(format!("entry {n} has relative offset {rel}, out of range")));
            }
            if let Some((prel, ppos)) = prev {
                if rel <= prel {
                    return Err(self.inner.corrupt(format!(
                        "entry {n} offset {} is not above entry {} offset {}",
                        self.inner.base_offset + rel as i64,
                        n - 1,
                        self.inner.base_offset + prel as i64
                    )));
                }
                if pos < ppos {
                    return Err(self.inner.corrupt(format!(
                        "entry {n} position {pos} is before entry {} position {ppos}",
                        n - 1
                    )));
                }
            }
            prev = Some((rel, pos));
        }
        Ok(())
    }

    // Shared operations, forwarded.
    pub fn path(&self) -> &Path {
        self.inner.path()
    }
    pub fn base_offset(&self) -> i64 {
        self.inner.base_offset()
    }
    pub fn entries(&self) -> usize {
        self.inner.entries()
    }
    pub fn max_entries(&self) -> usize {
        self.inner.max_entries()
    }
    pub fn size_in_bytes(&self) -> u64 {
        self.inner.size_in_bytes()
    }
    pub fn is_full(&self) -> bool {
        self.inner.is_full()
    }
    pub fn truncate_to(&mut self, offset: i64) -> Result<()> {
        self.inner.truncate_to(offset)
    }
    pub fn truncate(&mut self) -> Result<()> {
        self.inner.truncate()
    }
    pub fn reset(&mut self) -> Result<()> {
        self.inner.reset()
    }
    pub fn resize(&mut self, new_size: u64) -> Result<bool> {
        self.inner.resize(new_size)
    }
    pub fn trim_to_valid_size(&mut self) -> Result<()> {
        self.inner.trim_to_valid_size()
    }
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
    pub fn rename_to(&mut self, path: impl AsRef<Path>) -> Result<()> {
        self.inner.rename_to(path)
    }
    pub fn close(&mut self) -> Result<()> {
        self.inner.close()
    }
}

// ------------------------------------------------------------------ TimeIndex

/// A segment's `.timeindex`.
pub struct TimeIndex {
    inner: MmapIndex<TimeLayout>,
}

impl TimeIndex {
    pub fn open(
        path: impl AsRef<Path>,
        base_offset: i64,
        max_index_size: u64,
        writable: bool,
    ) -> Result<Self> {
        Ok(TimeIndex {
            inner: MmapIndex::open(path, base_offset, max_index_size, writable)?,
        })
    }

    pub fn index(&self) -> &MmapIndex<TimeLayout> {
        &self.inner
    }
    pub fn index_mut(&mut self) -> &mut MmapIndex<TimeLayout> {
        &mut self.inner
    }

    #[inline]
    fn decode(&self, raw: &[u8]) -> (i64, i64) {
        (
            TimeLayout::key(raw, 0),
            self.inner.base_offset + TimeLayout::relative_offset(raw) as i64,
        )
    }

    /// (timestamp, absolute offset) of entry `n`; None past the last entry.
    pub fn entry(&self, n: usize) -> Result<Option<(i64, i64)>> {
        Ok(self.inner.raw_entry(n)?.map(|raw| self.decode(raw)))
    }

    /// (timestamp, offset) of the last entry, or (-1, base_offset) when empty.
    pub fn last_entry(&self) -> (i64, i64) {
        match self.inner.entries {
            0 => (NO_TIMESTAMP, self.inner.base_offset),
            n => self.decode(MmapIndex::<TimeLayout>::raw(
                self.inner.data_unchecked(),
                n - 1,
            )),
        }
    }

    /// Append `(timestamp, offset)` when `timestamp` is above the last entry's
    /// (an equal timestamp is skipped). InvalidOffset when the timestamp or the
    /// offset goes back, when the offset would not grow, or when the index is
    /// full (`skip_full_check` only spares the caller the check when nothing
    /// is to be appended, as at close and after recovery).
    pub fn maybe_append(
        &mut self,
        timestamp: i64,
        offset: i64,
        skip_full_check: bool,
    ) -> Result<()> {
        self.inner.check_writable()?;
        if !skip_full_check && self.inner.is_full() {
            return Err(Error::InvalidOffset(format!(
                "time index {} is full ({} entries)",
                self.inner.path.display(),
                self.inner.entries
            )));
        }
        let (last_ts, last_offset) = self.last_entry();
        if self.inner.entries > 0 {
            if offset < last_offset {
                return Err(Error::InvalidOffset(format!(
                    "attempt to append offset {offset} to {} (below the last offset {last_offset})",
                    self.inner.path.display()
                )));
            }
            if timestamp < last_ts {
                return Err(Error::InvalidOffset(format!(
                    "attempt to append timestamp {timestamp} to {} (below the last timestamp {last_ts})",
                    self.inner.path.display()
                )));
            }
        }
        if timestamp <= last_ts {
            return Ok(());
        }
        let rel = self.inner.relative(offset)?;
        let mut e = [0u8; 12];
        e[..8].copy_from_slice(&timestamp.to_be_bytes());
        e[8..].copy_from_slice(&rel.to_be_bytes());
        self.inner.push(&e)
    }

    /// (timestamp, offset) of the greatest entry with timestamp <= `target`;
    /// (-1, base_offset) when there is none.
    pub fn lookup(&self, target: i64) -> Result<(i64, i64)> {
        self.inner.check_open()?;
        Ok(match self.inner.floor_slot(target) {
            None => (NO_TIMESTAMP, self.inner.base_offset),
            Some(slot) => self.decode(MmapIndex::<TimeLayout>::raw(
                self.inner.data_unchecked(),
                slot,
            )),
        })
    }

    /// CorruptIndex unless the length is whole entries, offsets strictly
    /// increase from >= base offset, and timestamps never go back.
    pub fn sanity_check(&self) -> Result<()> {
        self.inner.sanity_check_common()?;
        let data = self.inner.data_unchecked();
        let mut prev: Option<(i64, u32)> = None;
        for n in 0..self.inner.entries {
            let raw = MmapIndex::<TimeLayout>::raw(data, n);
            let ts = TimeLayout::key(raw, 0);
            let rel = TimeLayout::relative_offset(raw);
            if rel > i32::MAX as u32 {
                return Err(self
                    .inner
                    .corrupt(format!("entry {n} has relative offset {rel}, out of range")));
            }
            // Kafka's rule: timestamps grow strictly; an offset may repeat (a
            // larger timestamp found later in the same batch's offset).
            if let Some((pts, prel)) = prev {
                if rel < prel {
                    return Err(self.inner.corrupt(format!(
                        "entry {n} offset {} is below entry {} offset {}",
                        self.inner.base_offset + rel as i64,
                        n - 1,
                        self.inner.base_offset + prel as i64
                    )));
                }
                if ts <= pts {
                    return Err(self.inner.corrupt(format!(
                        "entry {n} timestamp {ts} is not above entry {} timestamp {pts}",
                        n - 1
                    )));
                }
            }
            prev = Some((ts, rel));
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        self.inner.path()
    }
    pub fn base_offset(&self) -> i64 {
        self.inner.base_offset()
    }
    pub fn entries(&self) -> usize {
        self.inner.entries()
    }
    pub fn max_entries(&self) -> usize {
        self.inner.max_entries()
    }
    pub fn size_in_bytes(&self) -> u64 {
        self.inner.size_in_bytes()
    }
    pub fn is_full(&self) -> bool {
        self.inner.is_full()
    }
    pub fn truncate_to(&mut self, offset: i64) -> Result<()> {
        self.inner.truncate_to(offset)
    }
    pub fn truncate(&mut self) -> Result<()> {
        self.inner.truncate()
    }
    pub fn reset(&mut self) -> Result<()> {
        self.inner.reset()
    }
    pub fn resize(&mut self, new_size: u64) -> Result<bool> {
        self.inner.resize(new_size)
    }
    pub fn trim_to_valid_size(&mut self) -> Result<()> {
        self.inner.trim_to_valid_size()
    }
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
    pub fn rename_to(&mut self, path: impl AsRef<Path>) -> Result<()> {
        self.inner.rename_to(path)
    }
    pub fn close(&mut self) -> Result<()> {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    fn offset_index(dir: &TempDir, base: i64, max: u64) -> OffsetIndex {
        OffsetIndex::open(
            dir.path().join(format!("{base:020}.index")),
            base,
            max,
            true,
        )
        .unwrap()
    }

    fn time_index(dir: &TempDir, base: i64, max: u64) -> TimeIndex {
        TimeIndex::open(
            dir.path().join(format!("{base:020}.timeindex")),
            base,
            max,
            true,
        )
        .unwrap()
    }

    #[test]
    fn new_file_is_preallocated_rounded_down() {
        let dir = TempDir::new().unwrap();
        let idx = offset_index(&dir, 100, 1003);
        assert_eq!(fs::metadata(idx.path()).unwrap().len(), 1000);
        assert_eq!(idx.max_entries(), 125);
        assert_eq!(idx.entries(), 0);
        assert_eq!(idx.last_offset(), 100);
        let t = time_index(&dir, 100, 1003);
        assert_eq!(fs::metadata(t.path()).unwrap().len(), 996);
        assert_eq!(t.max_entries(), 83);
        assert_eq!(t.last_entry(), (-1, 100));
    }

    #[test]
    fn append_writes_kafka_layout() {
        let dir = TempDir::new().unwrap();
        let mut idx = offset_index(&dir, 1000, 80);
        idx.append(1005, 4200).unwrap();
        idx.append(1010, 9000).unwrap();
        let data = idx.index().data().unwrap();
        assert_eq!(
            &data[..16],
            &[0, 0, 0, 5, 0, 0, 0x10, 0x68, 0, 0, 0, 10, 0, 0, 0x23, 0x28]
        );
        assert_eq!(idx.entry(1).unwrap(), Some((1010, 9000)));
        assert_eq!(idx.entry(2).unwrap(), None);
        assert_eq!(idx.size_in_bytes(), 16);

        let mut t = time_index(&dir, 1000, 120);
        t.maybe_append(1_700_000_000_000, 1005, false).unwrap();
        let data = t.index().data().unwrap();
        let mut want = 1_700_000_000_000i64.to_be_bytes().to_vec();
        want.extend_from_slice(&5u32.to_be_bytes());
        assert_eq!(&data[..12], &want[..]);
        assert_eq!(t.entry(0).unwrap(), Some((1_700_000_000_000, 1005)));
    }

    #[test]
    fn append_checks_monotonicity_overflow_and_room() {
        let dir = TempDir::new().unwrap();
        let mut idx = offset_index(&dir, 50, 24);
        assert!(matches!(
            idx.append(49, 0),
            Err(Error::IndexOffsetOverflow(_))
        ));
        assert!(matches!(
            idx.append(50 + i32::MAX as i64 + 1, 0),
            Err(Error::IndexOffsetOverflow(_))
        ));
        idx.append(50, 0).unwrap(); // first entry may be the base offset
        idx.append(60, 100).unwrap();
        assert!(matches!(idx.append(60, 200), Err(Error::InvalidOffset(_))));
        assert!(matches!(idx.append(59, 200), Err(Error::InvalidOffset(_))));
        assert!(matches!(idx.append(70, 99), Err(Error::InvalidOffset(_))));
        assert!(matches!(idx.append(70, -1), Err(Error::InvalidOffset(_))));
        idx.append(70, 100).unwrap(); // same position is fine
        assert!(idx.is_full());
        assert!(matches!(idx.append(80, 300), Err(Error::InvalidOffset(_))));
        assert_eq!(idx.entries(), 3);
    }

    #[test]
    fn lookup_floor_semantics() {
        let dir = TempDir::new().unwrap();
        let mut idx = offset_index(&dir, 0, 1 << 20);
        assert_eq!(idx.lookup(10).unwrap(), (0, 0));
        for i in 1..=5000i64 {
            idx.append(i * 10, i * 100).unwrap();
        }
        assert_eq!(idx.lookup(5).unwrap(), (0, 0));
        assert_eq!(idx.lookup(10).unwrap(), (10, 100));
        assert_eq!(idx.lookup(19).unwrap(), (10, 100));
        assert_eq!(idx.lookup(25_555).unwrap(), (25_550, 255_500));
        assert_eq!(idx.lookup(49_995).unwrap(), (49_990, 499_900));
        assert_eq!(idx.lookup(50_000).unwrap(), (50_000, 500_000));
        assert_eq!(idx.lookup(i64::MAX).unwrap(), (50_000, 500_000));
        assert_eq!(idx.lookup(i64::MIN).unwrap(), (0, 0));
        // Every target, warm and cold, against a linear floor.
        for t in (0..50_020).step_by(7) {
            let k = (t / 10).min(5000);
            let want = if t < 10 {
                (0, 0)
            } else {
                (k * 10, (k * 100) as u32)
            };
            assert_eq!(idx.lookup(t).unwrap(), want, "target {t}");
        }
        let mut out = Vec::new();
        idx.lookup_many(&[5, 19, 50_000], &mut out).unwrap();
        assert_eq!(out, vec![(0, 0), (10, 100), (50_000, 500_000)]);
        // Batched lookups answer exactly as single ones, warm, cold and none mixed.
        let targets: Vec<i64> = (0..3000).map(|i| (i * 7919) % 50_050 - 20).collect();
        out.clear();
        idx.lookup_many(&targets, &mut out).unwrap();
        let single: Vec<_> = targets.iter().map(|&t| idx.lookup(t).unwrap()).collect();
        assert_eq!(out, single);
    }

    #[test]
    fn lookup_small_and_boundary_sizes() {
        // Sizes around the warm-section boundary (1024 entries of 8 bytes).
        for n in [1usize, 2, 3, 1023, 1024, 1025, 1026, 2050] {
            let dir = TempDir::new().unwrap();
            let mut idx = offset_index(&dir, 7, 1 << 16);
            for i in 0..n {
                idx.append(7 + 2 * i as i64 + 1, 3 * i as i64).unwrap();
            }
            for t in 0..(2 * n as i64 + 12) {
                let rel = t - 7;
                let want = if rel < 1 {
                    (7, 0)
                } else {
                    let k = ((rel - 1) / 2).min(n as i64 - 1);
                    (7 + 2 * k + 1, 3 * k as u32)
                };
                assert_eq!(idx.lookup(t).unwrap(), want, "n {n} target {t}");
            }
        }
    }

    #[test]
    fn time_index_takes_a_larger_timestamp_at_the_same_offset() {
        // Kafka appends it: the batch's max timestamp can be found after an
        // entry for the same offset was written (e.g. on roll).
        let dir = tempfile::tempdir().unwrap();
        let mut t = TimeIndex::open(dir.path().join("0.timeindex"), 0, 120, true).unwrap();
        t.maybe_append(1000, 100, false).unwrap();
        t.maybe_append(1500, 100, false).unwrap();
        assert_eq!(t.entries(), 2);
        assert_eq!(t.lookup(1600).unwrap(), (1500, 100));
        t.sanity_check().unwrap();
    }

    #[test]
    fn time_index_maybe_append_and_lookup() {
        let dir = TempDir::new().unwrap();
        let mut t = time_index(&dir, 100, 12 * 4);
        t.maybe_append(-1, 100, false).unwrap(); // not above "no timestamp": skipped
        assert_eq!(t.entries(), 0);
        t.maybe_append(1000, 100, false).unwrap();
        t.maybe_append(1000, 105, false).unwrap(); // equal timestamp: skipped
        assert_eq!(t.entries(), 1);
        assert!(matches!(
            t.maybe_append(999, 110, false),
            Err(Error::InvalidOffset(_))
        ));
        assert!(matches!(
            t.maybe_append(2000, 99, false),
            Err(Error::InvalidOffset(_))
        ));
        t.maybe_append(2000, 110, false).unwrap();
        t.maybe_append(3000, 120, false).unwrap();
        t.maybe_append(4000, 130, false).unwrap();
        assert!(t.is_full());
        assert!(matches!(
            t.maybe_append(4000, 130, false),
            Err(Error::InvalidOffset(_))
        ));
        t.maybe_append(4000, 130, true).unwrap(); // nothing to add: fine when full
        assert!(matches!(
            t.maybe_append(5000, 140, true),
            Err(Error::InvalidOffset(_))
        ));
        assert_eq!(t.lookup(999).unwrap(), (-1, 100));
        assert_eq!(t.lookup(1000).unwrap(), (1000, 100));
        assert_eq!(t.lookup(2500).unwrap(), (2000, 110));
        assert_eq!(t.lookup(10_000).unwrap(), (4000, 130));
        assert_eq!(t.last_entry(), (4000, 130));
    }

    #[test]
    fn time_index_lookup_across_warm_boundary() {
        let dir = TempDir::new().unwrap();
        let mut t = time_index(&dir, 0, 1 << 20);
        for i in 1..3000i64 {
            t.maybe_append(i * 1000, i, false).unwrap();
        }
        for ts in (0..3_001_000).step_by(333) {
            let i = ts / 1000;
            let want = if i == 0 {
                (-1, 0)
            } else {
                (i.min(2999) * 1000, i.min(2999))
            };
            assert_eq!(t.lookup(ts).unwrap(), want);
        }
    }

    #[test]
    fn truncate_to_and_truncate() {
        let dir = TempDir::new().unwrap();
        let mut idx = offset_index(&dir, 0, 800);
        for i in 1..=10 {
            idx.append(i * 10, i * 100).unwrap();
        }
        idx.truncate_to(55).unwrap();
        assert_eq!(idx.entries(), 5);
        assert_eq!(idx.last_offset(), 50);
        idx.truncate_to(50).unwrap(); // drops offset 50 itself
        assert_eq!(idx.entries(), 4);
        idx.truncate_to(1000).unwrap();
        assert_eq!(idx.entries(), 4);
        // Dropped entries are zeroed, so appending again is clean.
        assert!(idx.index().data().unwrap()[32..80].iter().all(|&b| b == 0));
        idx.append(45, 450).unwrap();
        assert_eq!(idx.lookup(47).unwrap(), (45, 450));
        idx.truncate().unwrap();
        assert_eq!(idx.entries(), 0);
        assert_eq!(idx.lookup(47).unwrap(), (0, 0));

        let mut t = time_index(&dir, 0, 240);
        for i in 1..=10 {
            t.maybe_append(i * 1000, i * 10, false).unwrap();
        }
        t.truncate_to(35).unwrap();
        assert_eq!(t.entries(), 3);
        assert_eq!(t.last_entry(), (3000, 30));
        t.truncate_to(0).unwrap();
        assert_eq!(t.entries(), 0);
    }

    #[test]
    fn resize_trim_and_reopen() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("0.index");
        let mut idx = OffsetIndex::open(&path, 0, 8000, true).unwrap();
        for i in 1..=10 {
            idx.append(i, i * 10).unwrap();
        }
        assert!(!idx.resize(8004).unwrap()); // rounds to the same length
        assert!(idx.resize(16_000).unwrap());
        assert_eq!(idx.max_entries(), 2000);
        assert_eq!(idx.lookup(5).unwrap(), (5, 50));
        idx.trim_to_valid_size().unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), 80);
        assert!(idx.is_full());
        assert!(idx.resize(40).unwrap()); // shrinking below the entries drops them
        assert_eq!(idx.entries(), 5);
        idx.resize(8000).unwrap();
        idx.flush().unwrap();
        drop(idx); // unclean: the zero tail stays

        let idx = OffsetIndex::open(&path, 0, 8000, true).unwrap();
        assert_eq!(idx.entries(), 5);
        assert_eq!(idx.max_entries(), 1000);
        assert_eq!(idx.last_offset(), 5);
        drop(idx);

        let mut idx = OffsetIndex::open(&path, 0, 8000, true).unwrap();
        idx.close().unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), 40);
        assert!(matches!(idx.lookup(1), Err(Error::Io(_))));
        assert!(matches!(idx.append(9, 9), Err(Error::Io(_))));
        let ro = OffsetIndex::open(&path, 0, 0, false).unwrap();
        assert_eq!(ro.entries(), 5);
        assert!(ro.is_full());
        assert_eq!(ro.lookup(3).unwrap(), (3, 30));
    }

    #[test]
    fn reopen_counts_zero_entry_zero_correctly() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("0.index");
        let mut idx = OffsetIndex::open(&path, 0, 80, true).unwrap();
        idx.append(0, 0).unwrap();
        idx.append(3, 100).unwrap();
        drop(idx);
        assert_eq!(OffsetIndex::open(&path, 0, 80, true).unwrap().entries(), 2);
        // A fresh, empty preallocated index reopens empty.
        let empty = dir.path().join("1.index");
        drop(OffsetIndex::open(&empty, 0, 80, true).unwrap());
        assert_eq!(OffsetIndex::open(&empty, 0, 80, true).unwrap().entries(), 0);
        // A trimmed index holding just (base, 0) keeps it.
        let one = dir.path().join("2.index");
        let mut idx = OffsetIndex::open(&one, 0, 80, true).unwrap();
        idx.append(0, 0).unwrap();
        idx.close().unwrap();
        assert_eq!(OffsetIndex::open(&one, 0, 80, true).unwrap().entries(), 1);
        // Truncated-then-dropped entries do not come back.
        let mut idx = OffsetIndex::open(&path, 0, 80, true).unwrap();
        idx.append(5, 200).unwrap();
        idx.append(7, 300).unwrap();
        idx.truncate_to(5).unwrap();
        drop(idx);
        assert_eq!(OffsetIndex::open(&path, 0, 80, true).unwrap().entries(), 2);
        // The one ambiguous case: a lone (base, 0) entry before a zero tail
        // reads as empty (every lookup answers the same either way).
        let mut idx = OffsetIndex::open(&path, 0, 80, true).unwrap();
        idx.truncate_to(3).unwrap();
        drop(idx);
        let idx = OffsetIndex::open(&path, 0, 80, true).unwrap();
        assert_eq!(idx.entries(), 0);
        assert_eq!(idx.lookup(2).unwrap(), (0, 0));
    }

    #[test]
    fn zero_length_and_read_only() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("0.index");
        let mut idx = OffsetIndex::open(&path, 0, 0, true).unwrap();
        assert_eq!(idx.max_entries(), 0);
        assert!(matches!(idx.append(1, 1), Err(Error::InvalidOffset(_))));
        idx.sanity_check().unwrap();
        assert!(idx.resize(80).unwrap());
        idx.append(1, 1).unwrap();
        idx.close().unwrap();
        let mut ro = OffsetIndex::open(&path, 0, 0, false).unwrap();
        assert!(matches!(ro.append(2, 2), Err(Error::Io(_))));
        assert!(matches!(ro.resize(800), Err(Error::Io(_))));
        ro.flush().unwrap();
        ro.sanity_check().unwrap();
        ro.close().unwrap();
        assert!(matches!(
            OffsetIndex::open(dir.path().join("missing.index"), 0, 0, false),
            Err(Error::Io(_))
        ));
    }

    #[test]
    fn sanity_check_finds_corruption() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("0.index");
        let mut idx = OffsetIndex::open(&path, 100, 80, true).unwrap();
        idx.append(110, 10).unwrap();
        idx.append(120, 20).unwrap();
        idx.sanity_check().unwrap();
        idx.close().unwrap();

        // Offsets that go back.
        let mut bytes = fs::read(&path).unwrap();
        bytes[8..12].copy_from_slice(&5u32.to_be_bytes());
        fs::write(&path, &bytes).unwrap();
        let idx = OffsetIndex::open(&path, 100, 80, false).unwrap();
        assert!(matches!(idx.sanity_check(), Err(Error::CorruptIndex(_))));

        // Positions that go back.
        bytes[8..12].copy_from_slice(&20u32.to_be_bytes());
        bytes[12..16].copy_from_slice(&5u32.to_be_bytes());
        fs::write(&path, &bytes).unwrap();
        let idx = OffsetIndex::open(&path, 100, 80, false).unwrap();
        assert!(matches!(idx.sanity_check(), Err(Error::CorruptIndex(_))));

        // A length that is not whole entries.
        bytes[12..16].copy_from_slice(&25u32.to_be_bytes());
        bytes.push(1);
        fs::write(&path, &bytes).unwrap();
        let idx = OffsetIndex::open(&path, 100, 80, false).unwrap();
        assert_eq!(idx.entries(), 2);
        assert!(matches!(idx.sanity_check(), Err(Error::CorruptIndex(_))));

        // Time index: timestamps that go back.
        let tpath = dir.path().join("0.timeindex");
        let mut t = TimeIndex::open(&tpath, 0, 120, true).unwrap();
        t.maybe_append(10, 1, false).unwrap();
        t.maybe_append(20, 2, false).unwrap();
        t.sanity_check().unwrap();
        t.close().unwrap();
        let mut bytes = fs::read(&tpath).unwrap();
        bytes[12..20].copy_from_slice(&5i64.to_be_bytes());
        fs::write(&tpath, &bytes).unwrap();
        let t = TimeIndex::open(&tpath, 0, 120, false).unwrap();
        assert!(matches!(t.sanity_check(), Err(Error::CorruptIndex(_))));
    }

    #[test]
    fn rename_keeps_mapping() {
        let dir = TempDir::new().unwrap();
        let mut idx = offset_index(&dir, 0, 80);
        idx.append(1, 1).unwrap();
        let to = dir.path().join("00000000000000000000.index.deleted");
        idx.rename_to(&to).unwrap();
        assert_eq!(idx.path(), to.as_path());
        idx.append(2, 2).unwrap();
        assert_eq!(idx.lookup(2).unwrap(), (2, 2));
        idx.close().unwrap();
        assert_eq!(fs::metadata(&to).unwrap().len(), 16);
    }

    #[test]
    fn reset_grows_back_to_max_size() {
        let dir = TempDir::new().unwrap();
        let mut t = time_index(&dir, 0, 120);
        t.maybe_append(5, 1, false).unwrap();
        t.trim_to_valid_size().unwrap();
        assert!(t.is_full());
        t.reset().unwrap();
        assert_eq!(t.entries(), 0);
        assert_eq!(t.max_entries(), 10);
    }
}
