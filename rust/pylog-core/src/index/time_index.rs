//! The `.timeindex` layout, and the append rule of a [`TimeIndex`]: an
//! entry only for a timestamp above the last one, offsets never going back.

use super::{EntryLayout, MmapIndex, NO_TIMESTAMP};
use crate::error::{Error, Result};

#[cfg(doc)]
use super::TimeIndex;

/// `.timeindex`: timestamp i64, relative offset u32 (big-endian). An entry
/// decodes to `(timestamp, absolute offset)`.
pub struct TimeLayout;

impl TimeLayout {
    #[inline(always)]
    fn timestamp(raw: &[u8]) -> i64 {
        i64::from_be_bytes([
            raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
        ])
    }
}

impl EntryLayout for TimeLayout {
    const ENTRY_SIZE: usize = 12;
    const NAME: &'static str = "time index";
    type Entry = (i64, i64);
    #[inline(always)]
    fn relative_offset(raw: &[u8]) -> u32 {
        u32::from_be_bytes([raw[8], raw[9], raw[10], raw[11]])
    }
    #[inline(always)]
    fn decode(raw: &[u8], base_offset: i64) -> (i64, i64) {
        (
            Self::timestamp(raw),
            base_offset + Self::relative_offset(raw) as i64,
        )
    }
    #[inline(always)]
    fn none(base_offset: i64) -> (i64, i64) {
        (NO_TIMESTAMP, base_offset)
    }
    #[inline(always)]
    unsafe fn stored_key_at(p: *const u8) -> i64 {
        // SAFETY: the caller guarantees p..p + 12 is readable; the read is
        // unaligned-tolerant.
        unsafe { i64::from_be(std::ptr::read_unaligned(p as *const i64)) }
    }
    #[inline(always)]
    fn stored_target(target: i64, _base_offset: i64) -> i64 {
        target
    }
    /// Kafka's rule: timestamps grow strictly; an offset may repeat (a larger
    /// timestamp found later in the same batch's offset).
    fn out_of_order(prev: (i64, i64), cur: (i64, i64), n: usize) -> Option<String> {
        let ((pts, poff), (ts, off)) = (prev, cur);
        if off < poff {
            Some(format!(
                "entry {n} offset {off} is below entry {} offset {poff}",
                n - 1
            ))
        } else if ts <= pts {
            Some(format!(
                "entry {n} timestamp {ts} is not above entry {} timestamp {pts}",
                n - 1
            ))
        } else {
            None
        }
    }
}

impl MmapIndex<TimeLayout> {
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
        self.check_writable()?;
        if !skip_full_check && self.is_full() {
            return Err(Error::InvalidOffset(format!(
                "time index {} is full ({} entries)",
                self.path.display(),
                self.entries
            )));
        }
        let (last_ts, last_offset) = self.last_entry();
        if self.entries > 0 {
            if offset < last_offset {
                return Err(Error::InvalidOffset(format!(
                    "attempt to append offset {offset} to {} (below the last offset {last_offset})",
                    self.path.display()
                )));
            }
            if timestamp < last_ts {
                return Err(Error::InvalidOffset(format!(
                    "attempt to append timestamp {timestamp} to {} (below the last timestamp {last_ts})",
                    self.path.display()
                )));
            }
        }
        if timestamp <= last_ts {
            return Ok(());
        }
        let rel = self.relative(offset)?;
        let mut e = [0u8; 12];
        e[..8].copy_from_slice(&timestamp.to_be_bytes());
        e[8..].copy_from_slice(&rel.to_be_bytes());
        self.push(&e)
    }
}
