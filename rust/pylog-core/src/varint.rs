//! Zigzag varints and varlongs, the integer encoding of Kafka's v2 record
//! framing (the same scheme as protobuf's `sint32` / `sint64`).
//!
//! Readers take the buffer and a cursor and return `None` when the bytes run
//! out or the encoding is longer than the type allows; callers turn that into
//! a `CorruptRecord` error carrying the position they know.

/// Most bytes a zigzag varint (i32) may use.
pub const MAX_VARINT_LEN: usize = 5;
/// Most bytes a zigzag varlong (i64) may use.
pub const MAX_VARLONG_LEN: usize = 10;

#[inline]
fn zigzag_decode32(n: u32) -> i32 {
    ((n >> 1) as i32) ^ -((n & 1) as i32)
}

#[inline]
fn zigzag_decode64(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

#[inline]
fn zigzag_encode32(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}

#[inline]
fn zigzag_encode64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Read a zigzag varint at `*pos`, advancing it. `None` if truncated or if
/// the encoding runs past five bytes. Like Kafka, bits of the fifth byte
/// beyond 32 are ignored.
#[inline(always)]
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Option<i32> {
    let mut i = *pos;
    let b = *buf.get(i)?;
    i += 1;
    if b < 0x80 {
        *pos = i;
        return Some(zigzag_decode32(b as u32));
    }
    let mut value = (b & 0x7f) as u32;
    let mut shift = 7;
    loop {
        let b = *buf.get(i)?;
        i += 1;
        value |= ((b & 0x7f) as u32).wrapping_shl(shift);
        if b < 0x80 {
            *pos = i;
            return Some(zigzag_decode32(value));
        }
        shift += 7;
        if shift > 28 {
            return None;
        }
    }
}

/// Read a zigzag varlong at `*pos`, advancing it. `None` if truncated or if
/// the encoding runs past ten bytes.
#[inline(always)]
pub fn read_varlong(buf: &[u8], pos: &mut usize) -> Option<i64> {
    let mut i = *pos;
    let b = *buf.get(i)?;
    i += 1;
    if b < 0x80 {
        *pos = i;
        return Some(zigzag_decode64(b as u64));
    }
    let mut value = (b & 0x7f) as u64;
    let mut shift = 7;
    loop {
        let b = *buf.get(i)?;
        i += 1;
        value |= ((b & 0x7f) as u64).wrapping_shl(shift);
        if b < 0x80 {
            *pos = i;
            return Some(zigzag_decode64(value));
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

/// Append the zigzag varint encoding of `v`.
#[inline]
pub fn write_varint(out: &mut Vec<u8>, v: i32) {
    let mut n = zigzag_encode32(v);
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Append the zigzag varlong encoding of `v`.
#[inline]
pub fn write_varlong(out: &mut Vec<u8>, v: i64) {
    let mut n = zigzag_encode64(v);
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Bytes `write_varint(v)` produces.
#[inline]
pub fn varint_size(v: i32) -> usize {
    let n = zigzag_encode32(v);
    // 1 byte per started group of 7 significant bits, at least one.
    let bits = 32 - (n | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Bytes `write_varlong(v)` produces.
#[inline]
pub fn varlong_size(v: i64) -> usize {
    let n = zigzag_encode64(v);
    let bits = 64 - (n | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_encodings() {
        // zigzag: 0 → 0, -1 → 1, 1 → 2, -2 → 3, 63 → 126, -64 → 127, 64 → 128 (two bytes)
        let cases: &[(i32, &[u8])] = &[
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (-2, &[0x03]),
            (63, &[0x7e]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
            (300, &[0xd8, 0x04]),
            (i32::MAX, &[0xfe, 0xff, 0xff, 0xff, 0x0f]),
            (i32::MIN, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ];
        for &(v, bytes) in cases {
            let mut out = Vec::new();
            write_varint(&mut out, v);
            assert_eq!(out, bytes, "encoding {v}");
            assert_eq!(varint_size(v), bytes.len());
            let mut pos = 0;
            assert_eq!(read_varint(bytes, &mut pos), Some(v));
            assert_eq!(pos, bytes.len());
        }
    }

    #[test]
    fn round_trips() {
        let mut samples: Vec<i64> = vec![
            0,
            1,
            -1,
            i64::MAX,
            i64::MIN,
            i32::MAX as i64,
            i32::MIN as i64,
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            samples.push((x as i64) >> (x % 64));
        }
        for &v in &samples {
            let mut out = Vec::new();
            write_varlong(&mut out, v);
            assert_eq!(out.len(), varlong_size(v));
            let mut pos = 0;
            assert_eq!(read_varlong(&out, &mut pos), Some(v));
            assert_eq!(pos, out.len());

            let v32 = v as i32;
            let mut out = Vec::new();
            write_varint(&mut out, v32);
            assert_eq!(out.len(), varint_size(v32));
            let mut pos = 0;
            assert_eq!(read_varint(&out, &mut pos), Some(v32));
        }
    }

    #[test]
    fn truncated_and_overlong() {
        let mut pos = 0;
        assert_eq!(read_varint(&[], &mut pos), None);
        assert_eq!(read_varint(&[0x80], &mut pos), None);
        assert_eq!(
            read_varint(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00], &mut pos),
            None
        );
        assert_eq!(pos, 0, "cursor untouched on failure");
        assert_eq!(read_varlong(&[0xff; 10], &mut pos), None);
        let mut eleven = vec![0x80u8; 10];
        eleven.push(0);
        assert_eq!(read_varlong(&eleven, &mut pos), None);
        // ten bytes is the most a varlong may take
        let mut ten = vec![0x80u8; 9];
        ten.push(0x01);
        assert!(read_varlong(&ten, &mut pos).is_some());
    }
}
