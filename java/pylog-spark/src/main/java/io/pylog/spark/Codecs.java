package io.pylog.spark;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.Arrays;
import java.util.zip.GZIPInputStream;

import com.github.luben.zstd.ZstdInputStreamNoFinalizer;
import net.jpountz.lz4.LZ4FrameInputStream;
import org.xerial.snappy.Snappy;
import org.xerial.snappy.SnappyFramedInputStream;

/**
 * Decompression of a v2 batch's records section with the codec libraries Spark
 * itself ships (java.util.zip, snappy-java, lz4-java, zstd-jni), as Kafka frames
 * them: gzip streams; snappy in xerial's framing (what Kafka's Java client
 * writes), the snappy framing format, or one raw block (librdkafka); LZ4 frames
 * (KIP-57, magic v1 and up); zstd frames (KIP-110).
 */
final class Codecs {
    static final int NONE = 0, GZIP = 1, SNAPPY = 2, LZ4 = 3, ZSTD = 4;
    /** No batch decompresses to more than this (a guard against corrupt or hostile input). */
    static final int MAX_DECOMPRESSED = 1 << 30;
    private static final byte[] XERIAL_MAGIC = {(byte) 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
    private static final byte[] FRAMED_MAGIC = {(byte) 0xff, 0x06, 0x00, 0x00, 's', 'N', 'a', 'P', 'p', 'Y'};

    /** A reusable output buffer: {@code buf[0, len)} holds the last result. */
    static final class Out {
        byte[] buf = new byte[1 << 16];
        int len;

        void ensure(int more) throws IOException {
            long need = (long) len + more;
            if (need > MAX_DECOMPRESSED) {
                throw new IOException("a batch decompresses to more than " + MAX_DECOMPRESSED + " bytes");
            }
            if (need > buf.length) {
                buf = Arrays.copyOf(buf, (int) Math.min(MAX_DECOMPRESSED, Math.max(need, 2L * buf.length)));
            }
        }
    }

    private Codecs() {}

    static String name(int codec) {
        switch (codec) {
            case NONE: return "none";
            case GZIP: return "gzip";
            case SNAPPY: return "snappy";
            case LZ4: return "lz4";
            case ZSTD: return "zstd";
            default: return "codec " + codec;
        }
    }

    /** Decompress {@code src[off, off + len)} into {@code out}. */
    static void decompress(int codec, byte[] src, int off, int len, Out out) throws IOException {
        out.len = 0;
        switch (codec) {
            case GZIP:
                drain(new GZIPInputStream(new ByteArrayInputStream(src, off, len), 1 << 16), out);
                break;
            case SNAPPY:
                snappy(src, off, len, out);
                break;
            case LZ4:
                drain(new LZ4FrameInputStream(new ByteArrayInputStream(src, off, len)), out);
                break;
            case ZSTD:
                drain(new ZstdInputStreamNoFinalizer(new ByteArrayInputStream(src, off, len)), out);
                break;
            default:
                throw new IOException("compression codec id " + codec + " is not one of none/gzip/snappy/lz4/zstd");
        }
    }

    private static void drain(InputStream in, Out out) throws IOException {
        try (InputStream s = in) {
            while (true) {
                out.ensure(1 << 16);
                int n = s.read(out.buf, out.len, out.buf.length - out.len);
                if (n < 0) {
                    return;
                }
                out.len += n;
            }
        }
    }

    private static boolean startsWith(byte[] src, int off, int len, byte[] magic) {
        if (len < magic.length) {
            return false;
        }
        for (int i = 0; i < magic.length; i++) {
            if (src[off + i] != magic[i]) {
                return false;
            }
        }
        return true;
    }

    private static void snappy(byte[] src, int off, int len, Out out) throws IOException {
        if (startsWith(src, off, len, XERIAL_MAGIC)) {
            // a 16-byte header (magic, version, min compatible version), then
            // blocks: a big-endian i32 length and one raw snappy block
            int p = off + 16, end = off + len;
            while (p < end) {
                if (p + 4 > end) {
                    throw new IOException("truncated xerial snappy block length");
                }
                int n = ((src[p] & 0xff) << 24) | ((src[p + 1] & 0xff) << 16) | ((src[p + 2] & 0xff) << 8)
                    | (src[p + 3] & 0xff);
                p += 4;
                if (n < 0 || p + n > end) {
                    throw new IOException("xerial snappy block of " + n + " bytes overruns the data");
                }
                int raw = Snappy.uncompressedLength(src, p, n);
                out.ensure(raw);
                out.len += Snappy.uncompress(src, p, n, out.buf, out.len);
                p += n;
            }
        } else if (startsWith(src, off, len, FRAMED_MAGIC)) {
            drain(new SnappyFramedInputStream(new ByteArrayInputStream(src, off, len)), out);
        } else {
            int raw = Snappy.uncompressedLength(src, off, len);
            out.ensure(raw);
            out.len = Snappy.uncompress(src, off, len, out.buf, 0);
        }
    }
}
