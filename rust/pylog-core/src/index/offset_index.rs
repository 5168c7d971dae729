//! The `.index` layout, and the append rule of an [`OffsetIndex`]: offsets
//! strictly grow, positions never go back.

use super::{EntryLayout, MmapIndex};
use crate::error::{Error, Result};

#[cfg(doc)]
use super::OffsetIndex;

/// `.index`: relative offset u32, position u32 (big-endian). An entry
/// decodes to `(absolute offset, position)`.
pub struct OffsetLayout;

impl OffsetLayout {
    #[inline(always)]
    fn position(raw: &[u8]) -> u32 {
        u32::from_be_bytes([raw[4], raw[5], raw[6], raw[7]])
    }
}

impl EntryLayout for OffsetLayout {
    const ENTRY_SIZE: usize = 8;
    const NAME: &'static str = "offset index";
    type Entry = (i64, u32);
    #[inline(always)]
    fn relative_offset(raw: &[u8]) -> u32 {
        u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]])
    }
    #[inline(always)]
    fn decode(raw: &[u8], base_offset: i64) -> (i64, u32) {
        (
            base_offset + Self::relative_offset(raw) as i64,
            Self::position(raw),
        )
    }
    #[inline(always)]
    fn none(base_offset: i64) -> (i64, u32) {
        (base_offset, 0)
    }
    #[inline(always)]
    unsafe fn stored_key_at(p: *const u8) -> i64 {
        // SAFETY: the caller guarantees p..p + 8 is readable; the read is
        // unaligned-tolerant.
        unsafe { u32::from_be(std::ptr::read_unaligned(p as *const u32)) as i64 }
    }
    #[inline(always)]
    fn stored_target(target: i64, base_offset: i64) -> i64 {
        target.saturating_sub(base_offset)
    }
    fn out_of_order(prev: (i64, u32), cur: (i64, u32), n: usize) -> Option<String> {
        let ((poff, ppos), (off, pos)) = (prev, cur);
        if off <= poff {
            Some(format!(
                "entry {n} offset {off} is not above entry {} offset {poff}",
                n - 1
            ))
        } else if pos < ppos {
            Some(format!(
                "entry {n} position {pos} is before entry {} position {ppos}",
                n - 1
            ))
        } else {
            None
        }
    }
}

impl MmapIndex<OffsetLayout> {
    /// Offset of the last entry, or the base offset when empty.
    pub fn last_offset(&self) -> i64 {
        self.last_entry().0
    }

    /// Add `offset -> position`. The offset must exceed the last entry's, the
    /// position must not go back, and the index must have room.
    pub fn append(&mut self, offset: i64, position: i64) -> Result<()> {
        self.check_writable()?;
        let rel = self.relative(offset)?;
        let Ok(pos) = u32::try_from(position) else {
            return Err(Error::InvalidOffset(format!(
                "position {position} does not fit an offset index entry"
            )));
        };
        if self.entries > 0 {
            let (last, last_pos) = self.last_entry();
            if offset <= last {
                return Err(Error::InvalidOffset(format!(
                    "attempt to append offset {offset} to {} (no larger than the last offset {last})",
                    self.path.display()
                )));
            }
            if pos < last_pos {
                return Err(Error::InvalidOffset(format!(
                    "attempt to append position {pos} for offset {offset} to {} (before the last position {last_pos})",
                    self.path.display()
                )));
            }
        }
        let mut e = [0u8; 8];
        e[..4].copy_from_slice(&rel.to_be_bytes());
        e[4..].copy_from_slice(&pos.to_be_bytes());
        self.push(&e)
    }
}
