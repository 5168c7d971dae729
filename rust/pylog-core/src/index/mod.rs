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
//! [`MmapIndex`] is that thing (this module: file, mapping, entry count,
//! truncation, lookups, sanity checks), generic over an [`EntryLayout`];
//! [`OffsetIndex`] and [`TimeIndex`] are its two instances, and only what
//! differs — the layout and the append rules — lives in `offset_index` and
//! `time_index`. The searches are in `search`.
//!
//! ### Entry count of an existing file ([`used_entries`])
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
//! target falls inside them, and only otherwise the older ("cold") part
//! (see `search`).

use std::fs::{self, File, OpenOptions};
use std::io;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use memmap2::{Mmap, MmapMut, MmapOptions};

use crate::error::{Error, Result};

mod offset_index;
mod search;
#[cfg(test)]
mod tests;
mod time_index;

pub use offset_index::OffsetLayout;
pub use search::{LANES, WARM_SECTION_BYTES};
pub use time_index::TimeLayout;

/// A segment's `.index`.
pub type OffsetIndex = MmapIndex<OffsetLayout>;
/// A segment's `.timeindex`.
pub type TimeIndex = MmapIndex<TimeLayout>;

/// Timestamp of "no entry" in a time index (Kafka's `RecordBatch.NO_TIMESTAMP`).
pub const NO_TIMESTAMP: i64 = -1;

/// One entry layout: its size, how to read its fields, and what sorts it.
pub trait EntryLayout {
    const ENTRY_SIZE: usize;
    /// Human name for messages ("offset index", "time index").
    const NAME: &'static str;
    /// A decoded entry, as lookups answer it.
    type Entry: Copy;
    /// The relative offset stored in `raw` (one entry's bytes).
    fn relative_offset(raw: &[u8]) -> u32;
    /// The entry in `raw`, its relative offset made absolute.
    fn decode(raw: &[u8], base_offset: i64) -> Self::Entry;
    /// What a lookup answers when no entry is at or below the target, and
    /// the last entry of an empty index.
    fn none(base_offset: i64) -> Self::Entry;
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
    /// Why entry `n` may not follow entry `n - 1` (both decoded), if it may not.
    fn out_of_order(prev: Self::Entry, cur: Self::Entry, n: usize) -> Option<String>;
}

/// Walk the first `entries` entries of `data` as a sanity check does (each
/// relative offset within i32, each entry in order after the one before),
/// handing each decoded entry to `each`; why not, if they are not.
fn check_entries<L: EntryLayout>(
    data: &[u8],
    entries: usize,
    base_offset: i64,
    mut each: impl FnMut(L::Entry),
) -> std::result::Result<(), String> {
    let mut prev = None;
    for n in 0..entries {
        let raw = &data[n * L::ENTRY_SIZE..(n + 1) * L::ENTRY_SIZE];
        let rel = L::relative_offset(raw);
        if rel > i32::MAX as u32 {
            return Err(format!("entry {n} has relative offset {rel}, out of range"));
        }
        let cur = L::decode(raw, base_offset);
        if let Some(why) = prev.and_then(|p| L::out_of_order(p, cur, n)) {
            return Err(why);
        }
        each(cur);
        prev = Some(cur);
    }
    Ok(())
}

/// The entries of the index file at `path`, read (`read(2)`), never mapped:
/// for tools run against a live broker's files, which it may trim or
/// truncate meanwhile (a mapping cut under its reader is SIGBUS). Entries
/// are counted as [`MmapIndex`] counts them ([`used_entries`]) and checked as
/// its `sanity_check` does; CorruptIndex says why not.
pub fn read_entries<L: EntryLayout>(path: &Path, base_offset: i64) -> Result<Vec<L::Entry>> {
    let data = fs::read(path)?; // at most segment.index.bytes (10 MiB by default)
    let corrupt = |what: String| {
        Error::CorruptIndex(format!(
            "{} {} (base offset {base_offset}): {what}",
            L::NAME,
            path.display()
        ))
    };
    if data.len() % L::ENTRY_SIZE != 0 {
        return Err(corrupt(format!(
            "file length {} is not a multiple of the {}-byte entry size",
            data.len(),
            L::ENTRY_SIZE
        )));
    }
    let used = used_entries(&data, L::ENTRY_SIZE);
    let mut out = Vec::with_capacity(used);
    check_entries::<L>(&data, used, base_offset, |e| out.push(e)).map_err(corrupt)?;
    Ok(out)
}

/// Entries in use at the start of `data`, the bytes of a (possibly
/// preallocated) index file of `entry_size`-byte entries: every entry before
/// the first all-zero one after entry 0, where an all-zero entry 0 counts only
/// if entry 1 is not all-zero or is absent (see the module docs). The one
/// statement of the zero-tail rule, for mapped indexes and raw index bytes.
pub fn used_entries(data: &[u8], entry_size: usize) -> usize {
    let n = data.len() / entry_size;
    let zero = |i: usize| {
        data[i * entry_size..(i + 1) * entry_size]
            .iter()
            .all(|&b| b == 0)
    };
    if n == 0 || (zero(0) && n > 1 && zero(1)) {
        return 0;
    }
    (1..n).find(|&i| zero(i)).unwrap_or(n)
}

enum Mapping {
    Writable(MmapMut),
    ReadOnly(Mmap),
    /// A zero-length file (nothing to map).
    Empty,
    Closed,
}

/// A memory-mapped index of `L` entries: the file, its mapping and entry
/// count, and everything both indexes do alike.
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
    // SAFETY: posix_fallocate only reads its arguments: the fd is open (for
    // writing, as it requires) until `file` drops after the call, and the
    // range is non-negative (callers pass from <= to, both within off_t).
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
        used_entries(self.data_unchecked(), L::ENTRY_SIZE)
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

    /// Entry `n` decoded; None past the last entry.
    pub fn entry(&self, n: usize) -> Result<Option<L::Entry>> {
        Ok(self
            .raw_entry(n)?
            .map(|raw| L::decode(raw, self.base_offset)))
    }

    /// The last entry, or [`EntryLayout::none`] when empty.
    pub fn last_entry(&self) -> L::Entry {
        match self.entries {
            0 => L::none(self.base_offset),
            n => L::decode(Self::raw(self.data_unchecked(), n - 1), self.base_offset),
        }
    }

    /// The greatest entry whose key (offset, or timestamp) is <= `target`;
    /// [`EntryLayout::none`] when there is none.
    #[inline]
    pub fn lookup(&self, target: i64) -> Result<L::Entry> {
        self.check_open()?;
        Ok(match self.floor_slot(target) {
            None => L::none(self.base_offset),
            Some(slot) => L::decode(Self::raw(self.data_unchecked(), slot), self.base_offset),
        })
    }

    /// [`lookup`](Self::lookup) for many targets at once, appending to `out`.
    pub fn lookup_many(&self, targets: &[i64], out: &mut Vec<L::Entry>) -> Result<()> {
        self.check_open()?;
        let start = out.len();
        out.resize(start + targets.len(), L::none(self.base_offset));
        let dst = &mut out[start..];
        let data = self.data_unchecked();
        self.for_each_floor_slot(targets, |i, slot| {
            if let Some(s) = slot {
                dst[i] = L::decode(Self::raw(data, s), self.base_offset);
            }
        });
        Ok(())
    }

    /// CorruptIndex unless the length is whole entries, every relative
    /// offset is within the i32 range Kafka allows, and each entry may
    /// follow the one before ([`EntryLayout::out_of_order`]).
    pub fn sanity_check(&self) -> Result<()> {
        self.check_open()?;
        if round_down(self.length, L::ENTRY_SIZE) != self.length {
            return Err(self.corrupt(format!(
                "file length {} is not a multiple of the {}-byte entry size",
                self.length,
                L::ENTRY_SIZE
            )));
        }
        check_entries::<L>(
            self.data_unchecked(),
            self.entries,
            self.base_offset,
            |_| {},
        )
        .map_err(|why| self.corrupt(why))
    }
}
