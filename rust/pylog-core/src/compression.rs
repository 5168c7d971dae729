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

/// The most bytes any batch's records may decompress to, whatever the
/// caller's limit: a safety ceiling of the decoders (not a Kafka setting), so
/// that no input makes a reader hold more than this. Callers that know the
/// log's `max.message.bytes` pass a smaller limit (see
/// [`decompress_bounded`]).
pub const MAX_DECOMPRESSED_SIZE: usize = 256 << 20;

/// Snappy's densest element (a 2- or 3-byte copy op) yields at most 64 bytes
/// per 3 bytes of input: a block claiming more than this many bytes per input
/// byte cannot be valid, and is refused before any allocation.
const SNAPPY_MAX_RATIO: u64 = 22;

/// Read granularity of the streaming decoders.
pub const CHUNK: usize = 64 * 1024;

#[cold]
fn too_large(limit: usize) -> Error {
    Error::RecordsTooLarge { max: limit as u64 }
}

/// A streaming decoder of one compressed records section: [`Decoder::read`]
/// hands out the decompressed bytes a chunk at a time, never allocating from
/// a length the input claims, and fails with `RecordsTooLarge` as soon as
/// more than `limit` bytes come out (`CorruptRecord` at position 0 when the
/// input does not decode).
pub struct Decoder<'a> {
    codec: u8,
    inner: Inner<'a>,
    limit: usize,
    produced: usize,
    /// Bytes a stream decoder produced beyond what the caller took:
    /// `stage[stage_at..stage_end]`. Stream decoders are always asked for
    /// exactly [`CHUNK`] bytes (into the caller's buffer when it has room,
    /// else into this one), so that what they accept does not depend on how
    /// the caller reads: zstd, for one, checks a frame against its declared
    /// size differently when the output has room for the whole frame.
    stage: Vec<u8>,
    stage_at: usize,
    stage_end: usize,
}

enum Inner<'a> {
    Plain(&'a [u8]),
    Gzip(Box<flate2::bufread::MultiGzDecoder<&'a [u8]>>),
    SnappyBlocks(SnappyBlocks<'a>),
    SnappyFramed(Box<snap::read::FrameDecoder<&'a [u8]>>),
    Lz4(Box<lz4_flex::frame::FrameDecoder<&'a [u8]>>),
    Zstd(Box<zstd::stream::read::Decoder<'static, &'a [u8]>>),
}

impl<'a> Decoder<'a> {
    /// A decoder of `data` compressed with `codec` (0: the bytes as they are),
    /// producing at most `limit` bytes.
    pub fn new(codec: u8, data: &'a [u8], limit: usize) -> Result<Decoder<'a>> {
        let inner = match codec {
            NONE => Inner::Plain(data),
            GZIP => Inner::Gzip(Box::new(flate2::bufread::MultiGzDecoder::new(data))),
            SNAPPY => {
                if data.len() >= XERIAL_HEADER_LEN && data[..8] == XERIAL_MAGIC {
                    Inner::SnappyBlocks(SnappyBlocks::new(&data[XERIAL_HEADER_LEN..], true))
                } else if data.starts_with(&SNAPPY_FRAMED_MAGIC) {
                    Inner::SnappyFramed(Box::new(snap::read::FrameDecoder::new(data)))
                } else {
                    Inner::SnappyBlocks(SnappyBlocks::new(data, false))
                }
            }
            LZ4 => Inner::Lz4(Box::new(lz4_flex::frame::FrameDecoder::new(data))),
            ZSTD => Inner::Zstd(Box::new(
                zstd::stream::read::Decoder::with_buffer(data).map_err(|e| corrupt(codec, e))?,
            )),
            other => return Err(unsupported(other)),
        };
        Ok(Decoder {
            codec,
            inner,
            limit,
            produced: 0,
            stage: Vec::new(),
            stage_at: 0,
            stage_end: 0,
        })
    }

    /// Bytes handed out so far.
    pub fn produced(&self) -> usize {
        self.produced
    }

    /// Fill `buf` with the next decompressed bytes; 0 at the end of the stream.
    pub fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let limit = self.limit;
        match &mut self.inner {
            Inner::Plain(data) => {
                let n = data.len().min(buf.len());
                buf[..n].copy_from_slice(&data[..n]);
                *data = &data[n..];
                return self.count(n);
            }
            Inner::SnappyBlocks(s) => {
                let n = s.read(buf, limit - self.produced).map_err(|e| match e {
                    Error::RecordsTooLarge { .. } => too_large(limit),
                    other => other,
                })?;
                return self.count(n);
            }
            _ => {}
        }
        if self.stage_at < self.stage_end {
            let n = (self.stage_end - self.stage_at).min(buf.len());
            buf[..n].copy_from_slice(&self.stage[self.stage_at..self.stage_at + n]);
            self.stage_at += n;
            return self.count(n);
        }
        if buf.len() >= CHUNK {
            let n = self.stream_read(Some(buf))?;
            return self.count(n);
        }
        if self.stage.len() < CHUNK {
            self.stage.resize(CHUNK, 0);
        }
        let got = self.stream_read(None)?;
        self.stage_at = 0;
        self.stage_end = got;
        let n = got.min(buf.len());
        buf[..n].copy_from_slice(&self.stage[..n]);
        self.stage_at = n;
        self.count(n)
    }

    /// One read of exactly [`CHUNK`] bytes from a stream decoder, into
    /// `buf` (at least that long) or the stage.
    fn stream_read(&mut self, buf: Option<&mut [u8]>) -> Result<usize> {
        let codec = self.codec;
        let out = match buf {
            Some(b) => &mut b[..CHUNK],
            None => &mut self.stage[..CHUNK],
        };
        loop {
            let r = match &mut self.inner {
                Inner::Gzip(d) => d.read(out),
                Inner::SnappyFramed(d) => d.read(out),
                Inner::Lz4(d) => d.read(out),
                Inner::Zstd(d) => d.read(out),
                Inner::Plain(_) | Inner::SnappyBlocks(_) => unreachable!("read in place"),
            };
            match r {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(corrupt(codec, e)),
            }
        }
    }

    #[inline]
    fn count(&mut self, n: usize) -> Result<usize> {
        self.produced += n;
        if self.produced > self.limit {
            return Err(too_large(self.limit));
        }
        Ok(n)
    }
}

/// Snappy blocks: xerial's (a big-endian i32 length, then a raw block) or a
/// single raw block. Each block's claimed length is checked against what its
/// input could possibly encode and against the room left before it is
/// decoded into a reused buffer.
struct SnappyBlocks<'a> {
    data: &'a [u8],
    xerial: bool,
    block: Vec<u8>,
    at: usize,
    dec: snap::raw::Decoder,
}

impl<'a> SnappyBlocks<'a> {
    fn new(data: &'a [u8], xerial: bool) -> SnappyBlocks<'a> {
        SnappyBlocks {
            data,
            xerial,
            block: Vec::new(),
            at: 0,
            dec: snap::raw::Decoder::new(),
        }
    }

    fn read(&mut self, buf: &mut [u8], room: usize) -> Result<usize> {
        while self.at == self.block.len() {
            if self.data.is_empty() {
                return Ok(0);
            }
            let raw = if self.xerial {
                if self.data.len() < 4 {
                    return Err(corrupt(SNAPPY, "xerial block length torn"));
                }
                let len = i32::from_be_bytes(self.data[..4].try_into().unwrap());
                let rest = &self.data[4..];
                if len < 0 || len as usize > rest.len() {
                    return Err(corrupt(
                        SNAPPY,
                        format!("xerial block of {len} bytes overruns the input"),
                    ));
                }
                self.data = &rest[len as usize..];
                &rest[..len as usize]
            } else {
                std::mem::take(&mut self.data)
            };
            let n = snap::raw::decompress_len(raw).map_err(|e| corrupt(SNAPPY, e))?;
            if n as u64 > raw.len() as u64 * SNAPPY_MAX_RATIO {
                return Err(corrupt(
                    SNAPPY,
                    format!(
                        "a block of {} bytes claims {n} bytes, more than snappy can encode",
                        raw.len()
                    ),
                ));
            }
            if n > room {
                return Err(too_large(room));
            }
            self.block.clear();
            self.block.resize(n, 0);
            self.dec
                .decompress(raw, &mut self.block)
                .map_err(|e| corrupt(SNAPPY, e))?;
            self.at = 0;
        }
        let n = (self.block.len() - self.at).min(buf.len());
        buf[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Decompress `data` compressed with `codec` (0 returns a copy), at most
/// [`MAX_DECOMPRESSED_SIZE`] bytes.
pub fn decompress(codec: u8, data: &[u8]) -> Result<Vec<u8>> {
    decompress_bounded(codec, data, MAX_DECOMPRESSED_SIZE)
}

/// Decompress `data` compressed with `codec` into memory, failing with
/// `RecordsTooLarge` past `limit` bytes (never more than
/// [`MAX_DECOMPRESSED_SIZE`]). The output grows with what is decoded, never
/// with a length the input claims.
pub fn decompress_bounded(codec: u8, data: &[u8], limit: usize) -> Result<Vec<u8>> {
    let limit = limit.min(MAX_DECOMPRESSED_SIZE);
    let mut dec = Decoder::new(codec, data, limit)?;
    let mut out = Vec::with_capacity(
        data.len()
            .saturating_mul(3)
            .clamp(CHUNK, 1 << 22)
            .min(limit + 1),
    );
    loop {
        let len = out.len();
        if out.capacity() - len < CHUNK / 4 {
            out.reserve(CHUNK.max(len / 2));
        }
        let window = (out.capacity() - len).min(CHUNK);
        out.resize(len + window, 0);
        match dec.read(&mut out[len..]) {
            Ok(0) => {
                out.truncate(len);
                return Ok(out);
            }
            Ok(n) => out.truncate(len + n),
            Err(e) => return Err(e),
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

#[cfg(test)]
pub(crate) mod tests {
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

    /// A varint as snappy's preamble writes it.
    fn uvarint(mut n: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(b);
                return out;
            }
            out.push(b | 0x80);
        }
    }

    /// A zstd frame of `blocks` RLE blocks of 128 KiB of `byte`.
    pub(crate) fn zstd_rle_bomb(blocks: usize, byte: u8) -> Vec<u8> {
        let mut f = 0xFD2F_B528u32.to_le_bytes().to_vec();
        f.extend_from_slice(&[0x00, 0x38]); // no content size, 2 MiB window
        for i in 0..blocks {
            let last = u32::from(i + 1 == blocks);
            let h = last | (1 << 1) | ((128 * 1024) << 3);
            f.extend_from_slice(&h.to_le_bytes()[..3]);
            f.push(byte);
        }
        f
    }

    #[test]
    fn bombs_are_refused_without_allocating_what_they_claim() {
        // xerial: one block claiming 4 GiB - 1
        let mut block = uvarint(u32::MAX as u64);
        block.extend_from_slice(&[0; 8]);
        let mut x = XERIAL_MAGIC.to_vec();
        x.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
        x.extend_from_slice(&(block.len() as i32).to_be_bytes());
        x.extend_from_slice(&block);
        assert!(matches!(
            decompress(SNAPPY, &x),
            Err(Error::CorruptRecord { .. })
        ));
        // a raw block claiming 4 GiB - 1
        assert!(matches!(
            decompress(SNAPPY, &block),
            Err(Error::CorruptRecord { .. })
        ));
        // zstd: 32 KB of RLE blocks → 1 GiB
        let z = zstd_rle_bomb(8192, 0);
        assert!(matches!(
            decompress_bounded(ZSTD, &z, 1 << 20),
            Err(Error::RecordsTooLarge { max }) if max == 1 << 20
        ));
        // gzip of 8 MiB of zeros, limit 1 MiB; and the ceiling whatever asked
        let zeros = compress(GZIP, &vec![0u8; 8 << 20]).unwrap();
        assert!(matches!(
            decompress_bounded(GZIP, &zeros, 1 << 20),
            Err(Error::RecordsTooLarge { .. })
        ));
        let huge = zstd_rle_bomb(2100, 0); // 262.5 MiB
        assert!(matches!(
            decompress_bounded(ZSTD, &huge, usize::MAX),
            Err(Error::RecordsTooLarge { max }) if max == MAX_DECOMPRESSED_SIZE as u64
        ));
    }

    #[test]
    fn bounded_decompression_keeps_exact_limits_in_every_codec() {
        let data = sample(200_000);
        for codec in [NONE, GZIP, SNAPPY, LZ4, ZSTD] {
            let c = compress(codec, &data).unwrap();
            assert_eq!(decompress_bounded(codec, &c, data.len()).unwrap(), data);
            assert!(
                matches!(
                    decompress_bounded(codec, &c, data.len() - 1),
                    Err(Error::RecordsTooLarge { .. })
                ),
                "{}",
                codec_name(codec)
            );
            // the streaming decoder hands out the same bytes in small reads
            let mut d = Decoder::new(codec, &c, data.len()).unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 1000];
            loop {
                let n = d.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, data);
            assert_eq!(d.produced(), data.len());
        }
    }

    /// Found by the fuzzer: a zstd frame declaring a 35 675-byte content size
    /// that streams out 32 bytes when read in small pieces but is corrupt when
    /// the output has room for the whole frame. The decoder asks zstd for the
    /// same 64 KiB whatever the caller reads, so the answer does not change.
    #[test]
    fn a_stream_decoder_answers_the_same_whatever_the_read_size() {
        let frame: &[u8] = &[
            40, 181, 47, 253, 96, 91, 138, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 4, 40, 181, 47, 253, 96, 91, 138, 0, 0,
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            1, 0, 0,
        ];
        let whole = decompress_bounded(ZSTD, frame, 1 << 20);
        for size in [1usize, 7, 4096, CHUNK, 2 * CHUNK] {
            let mut d = Decoder::new(ZSTD, frame, 1 << 20).unwrap();
            let mut buf = vec![0u8; size];
            let r = loop {
                match d.read(&mut buf) {
                    Ok(0) => break Ok(()),
                    Ok(_) => {}
                    Err(e) => break Err(e),
                }
            };
            assert_eq!(r.is_ok(), whole.is_ok(), "read size {size}");
        }
    }
}
