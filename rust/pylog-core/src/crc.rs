//! CRC32C (Castagnoli), the checksum of magic v2 batches: the plain CRC of
//! any bytes, and the combination of two CRCs into the CRC of the
//! concatenation, which lets a rewritten header's CRC reuse the records'.
//!
//! Combination: CRCs are linear over GF(2): the CRC of `A ‖ B` is
//! the CRC of `A` multiplied by x^(8·|B|) modulo the (reflected) Castagnoli
//! polynomial, xor the CRC of `B`. The multiplier depends only on |B|, so
//! one batch computes it once and reuses it for the check and for the CRC of
//! the rewritten header (the `crc32c` crate's combine redoes a slow matrix
//! method on every call, costing more than the CRC of a 1 MiB batch).

/// CRC32C (Castagnoli) of any bytes.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    ::crc32c::crc32c(data)
}

const POLY: u32 = 0x82F6_3B78; // Castagnoli, bit-reflected
const ONE: u32 = 1 << 31; // x^0 in the reflected representation

/// a·b mod P.
const fn mul(a: u32, mut b: u32) -> u32 {
    let mut m = ONE;
    let mut p = 0u32;
    while m != 0 {
        if a & m != 0 {
            p ^= b;
        }
        m >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
    p
}

/// POW2[k] = x^(2^k) mod P.
const POW2: [u32; 64] = {
    let mut t = [0u32; 64];
    t[0] = ONE >> 1; // x^1
    let mut k = 1;
    while k < 64 {
        t[k] = mul(t[k - 1], t[k - 1]);
        k += 1;
    }
    t
};

/// x^(8·len) mod P: the operator that appends `len` bytes' worth of shift.
pub fn shift_for(len: usize) -> u32 {
    let mut n = len as u64;
    let mut k = 3; // 8 = 2^3 bits per byte
    let mut p = ONE;
    while n != 0 {
        if n & 1 != 0 {
            p = mul(POW2[k], p);
        }
        n >>= 1;
        k += 1;
    }
    p
}

/// CRC of `A ‖ B` from crc(A), crc(B) and `shift_for(|B|)`.
#[inline]
pub fn combine(crc_a: u32, crc_b: u32, shift: u32) -> u32 {
    mul(shift, crc_a) ^ crc_b
}

/// Below this, a second thread costs more than it saves.
pub const PARALLEL_MIN_BYTES: usize = 512 * 1024;

/// CRC32C of `data`; a large buffer's second half is checksummed on a
/// scoped thread while this one does the first, and the two combined.
/// A large batch is memory-bound on one core. Scoped threads rather than
/// a pool because a pool does not survive a fork of the Python process.
pub fn crc32c_split(data: &[u8]) -> u32 {
    if data.len() < PARALLEL_MIN_BYTES {
        return ::crc32c::crc32c(data);
    }
    let (a, b) = data.split_at(data.len() / 2);
    let (crc_a, crc_b) = std::thread::scope(|s| {
        let second = s.spawn(|| ::crc32c::crc32c(b));
        let first = ::crc32c::crc32c(a);
        (first, second.join())
    });
    // A failed spawn/join only loses the speed-up.
    let crc_b = crc_b.unwrap_or_else(|_| ::crc32c::crc32c(b));
    combine(crc_a, crc_b, shift_for(b.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_a_full_crc() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 131 % 257) as u8).collect();
        for split in [0usize, 1, 7, 40, 61, 1000, 4999, 5000] {
            let (a, b) = data.split_at(split);
            let got = combine(::crc32c::crc32c(a), ::crc32c::crc32c(b), shift_for(b.len()));
            assert_eq!(got, ::crc32c::crc32c(&data), "split at {split}");
            let big: Vec<u8> = (0..PARALLEL_MIN_BYTES + split)
                .map(|i| (i * 31) as u8)
                .collect();
            assert_eq!(crc32c_split(&big), ::crc32c::crc32c(&big));
        }
    }
}
