//! The compression codecs of Kafka record batches (attributes bits 0-2).
//!
//! * gzip (1): a gzip stream (several concatenated members are read too).
//! * snappy (2): written with the xerial framing Kafka's Java client uses —
//!   a 16-byte header (`0x82 "SNAPPY" 0x00`, version 1, min compatible 1)
//!   then blocks of a big-endian i32 length and a raw snappy block. Read:
//!   xerial framing, the snappy framing format, or one raw snappy block.
//! * lz4 (3): the LZ4 frame format.
//! * zstd (4): a zstd stream.
//!
//! Decompression failures are `CorruptRecord` at position 0; callers that know
//! the batch position re-label them with [`at_position`].

use std::io::{Read, Write};

use crate::error::{Error, Result};

pub const NONE: u8 = 0;
pub const GZIP: u8 = 1;
pub const SNAPPY: u8 = 2;
pub const LZ4: u8 = 3;
pub const ZSTD: u8 = 4;

/// The 8-byte magic that opens a xerial snappy stream.
pub const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_LEN: usize = 16;
/// Uncompressed bytes per xerial block (snappy-java's default block size).
const XERIAL_BLOCK: usize = 32 * 1024;
/// Stream identifier chunk of the snappy framing format.
const SNAPPY_FRAMED_MAGIC: [u8; 10] = [0xff, 0x06, 0x00, 0x00, b's', b'N', b'a', b'P', b'p', b'Y'];

/// Kafka's name of a codec, for messages.
pub fn codec_name(codec: u8) -> &'static str {
    match codec {
        NONE => "none",
        GZIP => "gzip",
        SNAPPY => "snappy",
        LZ4 => "lz4",
        ZSTD => "zstd",
        _ => "unknown",
    }
}

fn unsupported(codec: u8) -> Error {
    Error::UnsupportedCompression(format!(
        "codec id {codec} is not one of none/gzip/snappy/lz4/zstd"
    ))
}

#[cold]
fn corrupt(codec: u8, what: impl std::fmt::Display) -> Error {
    Error::corrupt(
        0,
        format!("{} decompression failed: {what}", codec_name(codec)),
    )
}

/// Move a `CorruptRecord` error to `position` (a codec does not know where its
/// input sits in a file or request).
pub fn at_position(err: Error, position: u64) -> Error {
    match err {
        Error::CorruptRecord { reason, .. } => Error::CorruptRecord { position, reason },
        other => other,
    }
}

/// Compress `data` with `codec` (0 returns a copy).
pub fn compress(codec: u8, data: &[u8]) -> Result<Vec<u8>> {
    match codec {
        NONE => Ok(data.to_vec()),
        GZIP => {
            let mut enc = flate2::write::GzEncoder::new(
                Vec::with_capacity(data.len() / 2 + 64),
                flate2::Compression::default(),
            );
            enc.write_all(data)?;
            Ok(enc.finish()?)
        }
        SNAPPY => Ok(xerial_compress(data)),
        LZ4 => {
            // 64 KiB blocks, as Kafka's Java client writes: a reader's buffers
            // stay small (a frame declaring 4 MiB blocks makes decoders
            // allocate and clear 4 MiB+ whatever the data size)
            let info =
                lz4_flex::frame::FrameInfo::new().block_size(lz4_flex::frame::BlockSize::Max64KB);
            let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(
                info,
                Vec::with_capacity(data.len() / 2 + 64),
            );
            enc.write_all(data)?;
            enc.finish()
                .map_err(|e| Error::Io(std::io::Error::other(e)))
        }
        ZSTD => Ok(zstd::bulk::compress(data, 3)?),
        other => Err(unsupported(other)),
    }
}

/// Decompress `data` compressed with `codec` (0 returns a copy).
pub fn decompress(codec: u8, data: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(data.len().saturating_mul(3).min(1 << 24));
    match codec {
        NONE => out.extend_from_slice(data),
        GZIP => {
            flate2::read::MultiGzDecoder::new(data)
                .read_to_end(&mut out)
                .map_err(|e| corrupt(codec, e))?;
        }
        SNAPPY => snappy_decompress(data, &mut out)?,
        LZ4 => {
            read_all(lz4_flex::frame::FrameDecoder::new(data), &mut out)
                .map_err(|e| corrupt(codec, e))?;
        }
        ZSTD => {
            zstd::stream::read::Decoder::new(data)
                .and_then(|mut d| d.read_to_end(&mut out))
                .map_err(|e| corrupt(codec, e))?;
        }
        other => return Err(unsupported(other)),
    }
    Ok(out)
}

/// Read `r` to its end into `out`, 64 KiB at a time. (`lz4_flex`'s own
/// `read_to_end` zero-fills far more than it reads: most of its time.)
fn read_all<R: Read>(mut r: R, out: &mut Vec<u8>) -> std::io::Result<()> {
    const CHUNK: usize = 64 * 1024;
    loop {
        let len = out.len();
        out.resize(len + CHUNK, 0);
        match r.read(&mut out[len..]) {
            Ok(0) => {
                out.truncate(len);
                return Ok(());
            }
            Ok(n) => out.truncate(len + n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => out.truncate(len),
            Err(e) => {
                out.truncate(len);
                return Err(e);
            }
        }
    }
}

/// Snappy with Kafka's (snappy-java's) xerial framing.
pub fn xerial_compress(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(XERIAL_HEADER_LEN + data.len() / 2 + 64);
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes()); // version
    out.extend_from_slice(&1i32.to_be_bytes()); // minimum compatible version
    let mut enc = snap::raw::Encoder::new();
    for block in data.chunks(XERIAL_BLOCK) {
        let len_at = out.len();
        out.extend_from_slice(&[0; 4]);
        let max = snap::raw::max_compress_len(block.len());
        out.resize(len_at + 4 + max, 0);
        let n = enc
            .compress(block, &mut out[len_at + 4..])
            .expect("the output was sized by max_compress_len");
        out.truncate(len_at + 4 + n);
        out[len_at..len_at + 4].copy_from_slice(&(n as i32).to_be_bytes());
    }
    out
}

fn snappy_decompress(data: &[u8], out: &mut Vec<u8>) -> Result<()> {
    if data.len() >= XERIAL_HEADER_LEN && data[..8] == XERIAL_MAGIC {
        let mut dec = snap::raw::Decoder::new();
        let mut at = XERIAL_HEADER_LEN;
        while at < data.len() {
            if data.len() - at < 4 {
                return Err(corrupt(SNAPPY, "xerial block length torn"));
            }
            let len = i32::from_be_bytes(data[at..at + 4].try_into().unwrap());
            at += 4;
            if len < 0 || len as usize > data.len() - at {
                return Err(corrupt(
                    SNAPPY,
                    format!("xerial block of {len} bytes overruns the input"),
                ));
            }
            let block = &data[at..at + len as usize];
            at += len as usize;
            let n = snap::raw::decompress_len(block).map_err(|e| corrupt(SNAPPY, e))?;
            let start = out.len();
            out.resize(start + n, 0);
            dec.decompress(block, &mut out[start..])
                .map_err(|e| corrupt(SNAPPY, e))?;
        }
        Ok(())
    } else if data.starts_with(&SNAPPY_FRAMED_MAGIC) {
        snap::read::FrameDecoder::new(data)
            .read_to_end(out)
            .map_err(|e| corrupt(SNAPPY, e))?;
        Ok(())
    } else {
        let n = snap::raw::decompress_len(data).map_err(|e| corrupt(SNAPPY, e))?;
        out.resize(n, 0);
        snap::raw::Decoder::new()
            .decompress(data, out)
            .map_err(|e| corrupt(SNAPPY, e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| ((i * 7) % 251) as u8 ^ (i / 1000) as u8)
            .collect()
    }

    #[test]
    fn every_codec_round_trips() {
        for codec in [NONE, GZIP, SNAPPY, LZ4, ZSTD] {
            for n in [0usize, 1, 100, 70_000, 300_000] {
                let data = sample(n);
                let c = compress(codec, &data).unwrap();
                assert_eq!(
                    decompress(codec, &c).unwrap(),
                    data,
                    "{} of {n} bytes",
                    codec_name(codec)
                );
            }
        }
    }

    #[test]
    fn snappy_writes_xerial_framing() {
        let data = sample(100_000);
        let c = compress(SNAPPY, &data).unwrap();
        assert_eq!(&c[..8], &XERIAL_MAGIC);
        assert_eq!(&c[8..16], &[0, 0, 0, 1, 0, 0, 0, 1]);
        // 100 000 bytes → four blocks of at most 32 KiB each
        let mut at = 16;
        let mut blocks = 0;
        while at < c.len() {
            let len = i32::from_be_bytes(c[at..at + 4].try_into().unwrap()) as usize;
            at += 4 + len;
            blocks += 1;
        }
        assert_eq!(at, c.len());
        assert_eq!(blocks, 4);
    }

    #[test]
    fn snappy_reads_raw_and_framed() {
        let data = sample(50_000);
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(decompress(SNAPPY, &raw).unwrap(), data);
        let mut framed = snap::write::FrameEncoder::new(Vec::new());
        framed.write_all(&data).unwrap();
        let framed = framed.into_inner().unwrap();
        assert_eq!(decompress(SNAPPY, &framed).unwrap(), data);
    }

    #[test]
    fn garbage_is_corrupt_and_unknown_codec_unsupported() {
        let junk = [0x13u8; 64];
        for codec in [GZIP, SNAPPY, LZ4, ZSTD] {
            assert!(
                matches!(decompress(codec, &junk), Err(Error::CorruptRecord { .. })),
                "{}",
                codec_name(codec)
            );
        }
        // a torn xerial stream
        let mut c = compress(SNAPPY, &sample(1000)).unwrap();
        c.truncate(c.len() - 3);
        assert!(matches!(
            decompress(SNAPPY, &c),
            Err(Error::CorruptRecord { .. })
        ));
        assert!(matches!(
            decompress(5, b"x"),
            Err(Error::UnsupportedCompression(_))
        ));
        assert!(matches!(
            compress(7, b"x"),
            Err(Error::UnsupportedCompression(_))
        ));
        assert!(matches!(
            at_position(corrupt(GZIP, "x"), 99),
            Error::CorruptRecord { position: 99, .. }
        ));
    }
}
