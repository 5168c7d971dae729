package io.pylog.spark;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.zip.CRC32C;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Reads the records of {@code [start, end)} of one partition directory segment by
 * segment into {@link ColumnarBatch}es of on-heap column vectors, filling only the
 * columns the scan asked for.
 *
 * <p>What it reads matches pylog's native reader (rust/pylog-core/src/columnar.rs)
 * behind format("pylog"): v2 batches are framed and CRC-32C checked, control
 * batches skipped, aborted transactional records kept under read_uncommitted and
 * their batches skipped under read_committed ({@link TransactionIndex}: the
 * partition's {@code .txnindex} entries, as Kafka's log finds them for a
 * read_committed fetch), LogAppendTime batches give every record
 * the batch's max timestamp, header keys are decoded as UTF-8 with bad bytes
 * replaced. Legacy magic 0/1 message sets are refused with an error naming the
 * file and position (format("pylog") reads them).
 */
final class SegmentReader implements PartitionReader<ColumnarBatch> {
    /** Rows per columnar batch, and the bytes of keys, values and headers after which a batch ends early. */
    static final int BATCH_ROWS = 4096;
    static final int BATCH_BYTES = 32 << 20;
    /** Bytes of segment read per read call (a larger batch gets a larger window). */
    static final int WINDOW_BYTES = 8 << 20;

    static final int KEY = 0, VALUE = 1, TOPIC = 2, PARTITION = 3, OFFSET = 4, TIMESTAMP = 5, TS_TYPE = 6,
        HEADERS = 7;

    // v2 batch layout (Kafka's DefaultRecordBatch)
    static final int LOG_OVERHEAD = 12, MAGIC_OFFSET = 16, CRC_OFFSET = 17, ATTRIBUTES_OFFSET = 21,
        LAST_OFFSET_DELTA_OFFSET = 23, BASE_TIMESTAMP_OFFSET = 27, MAX_TIMESTAMP_OFFSET = 35,
        PRODUCER_ID_OFFSET = 43, RECORDS_COUNT_OFFSET = 57, RECORDS_OFFSET = 61;
    // attributes bits
    static final int TRANSACTIONAL = 0x10, CONTROL = 0x20;

    static final class Factory implements PartitionReaderFactory {
        private static final long serialVersionUID = 1L;
        private final int[] columns;

        Factory(int[] columns) {
            this.columns = columns;
        }

        @Override
        public boolean supportColumnarReads(InputPartition partition) {
            return true;
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            throw new UnsupportedOperationException("format('pylog-jvm') reads columnar batches only");
        }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            return new SegmentReader((SegmentPartition) partition, columns);
        }
    }

    private final SegmentPartition p;
    private final int[] columns;
    private final ColumnVector[] vectors;
    private final ColumnarBatch batch;
    // the writable vector of each Kafka column the scan asked for (null if not)
    private final WritableColumnVector[] by = new WritableColumnVector[8];
    private final boolean wantHeaders;
    private final boolean wantKeyOrValueOrHeaders;

    // the segments and where the read is
    private final long[] bases;
    private int segment = -1;
    private String logPath;
    private FileChannel channel;
    private long fileSize;
    /** The next offset to read; the read is done when it reaches end. */
    private long cur;
    private boolean done;

    // window of segment bytes: win[0, winLen) holds the file's bytes from winPos
    private byte[] win = new byte[1 << 16];
    private int winLen;
    private long winPos;
    /** File position of the next batch. */
    private long pos;

    // the records of the current batch still to read
    private byte[] recs;
    private int recAt, recEnd, recIndex, recCount;
    private long recBatchPos, baseOffset, baseTimestamp, maxTimestamp;
    private int tsType;
    private final Codecs.Out decompressed = new Codecs.Out();
    /** read_committed: the aborted transactions overlapping the range (null: read_uncommitted, or none). */
    private final TransactionIndex aborted;
    private final CRC32C crc = new CRC32C();
    private int bytesInBatch;

    SegmentReader(SegmentPartition p, int[] columns) {
        this.p = p;
        this.columns = columns;
        this.vectors = new ColumnVector[columns.length];
        boolean headers = false, bytes = false;
        for (int i = 0; i < columns.length; i++) {
            DataType type = PylogJvmSource.kafkaSchema(true).fields()[columns[i]].dataType();
            if (columns[i] == TOPIC) {
                ConstantColumnVector c = new ConstantColumnVector(BATCH_ROWS, type);
                c.setUtf8String(UTF8String.fromString(p.topic()));
                vectors[i] = c;
            } else if (columns[i] == PARTITION) {
                ConstantColumnVector c = new ConstantColumnVector(BATCH_ROWS, type);
                c.setInt(p.partition());
                vectors[i] = c;
            } else if (by[columns[i]] == null) {
                OnHeapColumnVector v = new OnHeapColumnVector(BATCH_ROWS, type);
                by[columns[i]] = v;
                vectors[i] = v;
            } else {
                vectors[i] = by[columns[i]];  // a column asked for twice
            }
            headers |= columns[i] == HEADERS;
            bytes |= columns[i] == KEY || columns[i] == VALUE || columns[i] == HEADERS;
        }
        this.wantHeaders = headers;
        this.wantKeyOrValueOrHeaders = bytes;
        this.batch = new ColumnarBatch(vectors);
        this.cur = p.start();
        long[] b = LogDirs.segmentBases(p.dir());
        if (b.length == 0 || p.start() < b[0]) {
            if (p.failOnDataLoss()) {
                throw new IllegalStateException(p.topic() + "-" + p.partition() + ": offsets from " + p.start()
                    + " were requested but the log " + (b.length == 0 ? "is empty" : "starts at " + b[0])
                    + " in " + p.dir() + " (records deleted by retention?); set failOnDataLoss=false to skip them");
            }
            if (b.length > 0) {
                cur = Math.max(cur, b[0]);
            }
        }
        this.bases = b;
        this.done = b.length == 0 || cur >= p.end();
        TransactionIndex txns = p.readCommitted() && !done ? TransactionIndex.collect(p.dir(), cur, p.end()) : null;
        this.aborted = txns == null || txns.isEmpty() ? null : txns;
    }

    @Override
    public ColumnarBatch get() {
        return batch;
    }

    @Override
    public void close() throws IOException {
        closeSegment();
        batch.close();
    }

    private void closeSegment() throws IOException {
        if (channel != null) {
            channel.close();
            channel = null;
        }
    }

    /** Open the next segment that holds offsets at or after cur; false when none does. */
    private boolean nextSegment() throws IOException {
        closeSegment();
        while (++segment < bases.length) {
            long base = bases[segment];
            if (segment + 1 < bases.length && bases[segment + 1] <= cur) {
                continue;
            }
            if (base >= p.end() || cur >= p.end()) {
                return false;
            }
            logPath = LogDirs.fileName(p.dir(), base, ".log");
            try {
                channel = FileChannel.open(Path.of(logPath), StandardOpenOption.READ);
            } catch (NoSuchFileException e) {
                // deleted by retention since planning
                if (p.failOnDataLoss()) {
                    throw new IllegalStateException(p.topic() + "-" + p.partition() + ": segment " + logPath
                        + " was deleted while it was read; set failOnDataLoss=false to skip it", e);
                }
                continue;
            }
            fileSize = channel.size();
            pos = LogDirs.floorPosition(p.dir(), base, cur);
            winPos = pos;
            winLen = 0;
            return true;
        }
        return false;
    }

    /** Make win hold the file's bytes [at, at + n); false if the file ends first. */
    private boolean fill(long at, int n) throws IOException {
        if (at >= winPos && at + n <= winPos + winLen) {
            return true;
        }
        if (at + n > fileSize) {
            return false;
        }
        int keep = 0;
        if (at >= winPos && at < winPos + winLen) {
            keep = (int) (winPos + winLen - at);
            System.arraycopy(win, (int) (at - winPos), win, 0, keep);
        }
        int want = (int) Math.min(Math.max((long) n, WINDOW_BYTES), fileSize - at);
        if (want > win.length) {
            win = Arrays.copyOf(win, Math.max(want, Math.min(WINDOW_BYTES, 2 * win.length)));
        }
        winPos = at;
        winLen = keep;
        ByteBuffer buf = ByteBuffer.wrap(win, keep, want - keep);
        while (buf.hasRemaining()) {
            int r = channel.read(buf, at + buf.position());
            if (r < 0) {
                break;
            }
        }
        winLen = buf.position();
        return winLen >= n;
    }

    private static int i32(byte[] b, int at) {
        return ((b[at] & 0xff) << 24) | ((b[at + 1] & 0xff) << 16) | ((b[at + 2] & 0xff) << 8) | (b[at + 3] & 0xff);
    }

    private static long i64(byte[] b, int at) {
        return ((long) i32(b, at) << 32) | (i32(b, at + 4) & 0xffffffffL);
    }

    private IllegalStateException corrupt(long position, String why) {
        return new IllegalStateException("corrupt record batch at position " + position + " of " + logPath + ": "
            + why);
    }

    /**
     * Find the next batch with records to keep and make it the current one; false
     * when the range (or the log) ends.
     */
    private boolean nextBatch() throws IOException {
        while (!done) {
            if (cur >= p.end()) {
                done = true;
                return false;
            }
            if (channel == null && !nextSegment()) {
                done = true;
                return false;
            }
            // a batch's length field; the segment ends (or ends inside a batch still being written)
            if (!fill(pos, LOG_OVERHEAD + 5)) {
                if (!nextSegment()) {
                    done = true;
                }
                continue;
            }
            int at = (int) (pos - winPos);
            int length = i32(win, at + 8);
            if (length < 0) {
                throw corrupt(pos, "negative batch length " + length);
            }
            int size = LOG_OVERHEAD + length;
            if (size <= MAGIC_OFFSET) {
                throw corrupt(pos, "batch of " + size + " bytes is too short");
            }
            byte magic = win[at + MAGIC_OFFSET];
            if (magic != 2) {
                long last = i64(win, at);
                if (last < cur) {
                    pos += size;
                    continue;
                }
                throw new UnsupportedOperationException("a magic v" + magic + " message set at position " + pos
                    + " of " + logPath + ": format('pylog-jvm') reads magic v2 record batches only; "
                    + "use format('pylog') for logs with older messages");
            }
            if (size < RECORDS_OFFSET) {
                throw corrupt(pos, "batch of " + size + " bytes is too short for a v2 header");
            }
            if (!fill(pos, RECORDS_OFFSET)) {
                if (!nextSegment()) {
                    done = true;
                }
                continue;
            }
            at = (int) (pos - winPos);
            long base = i64(win, at);
            long last = base + i32(win, at + LAST_OFFSET_DELTA_OFFSET);
            if (last < cur) {
                // wholly before the range: skipped unread (not even its CRC)
                pos += size;
                continue;
            }
            if (base >= p.end()) {
                done = true;
                return false;
            }
            if (!fill(pos, size)) {
                // a batch still being written: the log ends here
                if (!nextSegment()) {
                    done = true;
                }
                continue;
            }
            at = (int) (pos - winPos);
            long batchPos = pos;
            pos += size;
            crc.reset();
            crc.update(win, at + ATTRIBUTES_OFFSET, size - ATTRIBUTES_OFFSET);
            long stored = i32(win, at + CRC_OFFSET) & 0xffffffffL;
            if (crc.getValue() != stored) {
                throw corrupt(batchPos, "CRC-32C " + Long.toHexString(crc.getValue()) + " of the batch is not the "
                    + "stored " + Long.toHexString(stored));
            }
            int attributes = ((win[at + ATTRIBUTES_OFFSET] & 0xff) << 8) | (win[at + ATTRIBUTES_OFFSET + 1] & 0xff);
            int count = i32(win, at + RECORDS_COUNT_OFFSET);
            if (count < 0) {
                throw corrupt(batchPos, "negative records count " + count);
            }
            long next = last + 1;
            boolean abortedTxn = aborted != null && (attributes & TRANSACTIONAL) != 0
                && aborted.aborted(i64(win, at + PRODUCER_ID_OFFSET), base);
            if ((attributes & CONTROL) != 0 || count == 0 || abortedTxn) {
                // a control batch (transaction marker), an empty one the cleaner kept, or
                // (read_committed) a batch of an aborted transaction: no rows, not decompressed
                cur = Math.max(cur, next);
                if (cur >= p.end()) {
                    done = true;
                }
                continue;
            }
            int codec = attributes & 0x07;
            if (codec == Codecs.NONE) {
                recs = win;
                recAt = at + RECORDS_OFFSET;
                recEnd = at + size;
            } else {
                try {
                    Codecs.decompress(codec, win, at + RECORDS_OFFSET, size - RECORDS_OFFSET, decompressed);
                } catch (IOException | RuntimeException e) {
                    throw corrupt(batchPos, "cannot decompress " + Codecs.name(codec) + ": " + e);
                }
                recs = decompressed.buf;
                recAt = 0;
                recEnd = decompressed.len;
            }
            recIndex = 0;
            recCount = count;
            recBatchPos = batchPos;
            baseOffset = base;
            baseTimestamp = i64(win, at + BASE_TIMESTAMP_OFFSET);
            maxTimestamp = i64(win, at + MAX_TIMESTAMP_OFFSET);
            tsType = (attributes & 0x08) != 0 ? 1 : 0;
            cur = Math.max(cur, next);
            return true;
        }
        return false;
    }

    // varints: zig-zag, as Kafka's ByteUtils reads them; the position is in varAt
    private int varAt;

    private int varint(byte[] b, int at, int end, String what) {
        int value = 0;
        int shift = 0;
        while (true) {
            if (at >= end || shift > 28) {
                throw recordError("bad varint (" + what + ")");
            }
            int x = b[at++];
            value |= (x & 0x7f) << shift;
            if ((x & 0x80) == 0) {
                break;
            }
            shift += 7;
        }
        varAt = at;
        return (value >>> 1) ^ -(value & 1);
    }

    private long varlong(byte[] b, int at, int end, String what) {
        long value = 0;
        int shift = 0;
        while (true) {
            if (at >= end || shift > 63) {
                throw recordError("bad varint (" + what + ")");
            }
            long x = b[at++];
            value |= (x & 0x7f) << shift;
            if ((x & 0x80) == 0) {
                break;
            }
            shift += 7;
        }
        varAt = at;
        return (value >>> 1) ^ -(value & 1);
    }

    private IllegalStateException recordError(String why) {
        return corrupt(recBatchPos, "record " + recIndex + ": " + why);
    }

    private static final int NULL = -1;
    // a field's bytes are recs[fieldAt, fieldAt + fieldLen), or null when fieldLen == NULL
    private int fieldAt, fieldLen;

    private void field(int end, String what) {
        int n = varint(recs, varAt, end, what + " length");
        if (n < -1) {
            throw recordError("negative " + what + " length " + n);
        }
        if (n == -1) {
            fieldAt = varAt;
            fieldLen = NULL;
            return;
        }
        if (varAt + n > end) {
            throw recordError(what + " of " + n + " bytes overruns the record");
        }
        fieldAt = varAt;
        fieldLen = n;
        varAt += n;
    }

    private static void put(WritableColumnVector v, int row, byte[] b, int at, int len) {
        if (len == NULL) {
            v.putNull(row);
        } else {
            v.putByteArray(row, b, at, len);
        }
    }

    private static long micros(long ms) {
        if (ms > Long.MAX_VALUE / 1000) {
            return Long.MAX_VALUE;
        }
        if (ms < Long.MIN_VALUE / 1000) {
            return Long.MIN_VALUE;
        }
        return ms * 1000;
    }

    @Override
    public boolean next() throws IOException {
        for (WritableColumnVector v : by) {
            if (v != null) {
                v.reset();
            }
        }
        int rows = 0;
        bytesInBatch = 0;
        while (rows < BATCH_ROWS && bytesInBatch < BATCH_BYTES) {
            if (recs == null || recIndex >= recCount) {
                if (recs != null && recAt != recEnd) {
                    throw corrupt(recBatchPos, (recEnd - recAt) + " bytes after the last of " + recCount + " records");
                }
                recs = null;
                if (!nextBatch()) {
                    break;
                }
            }
            if (decodeRecord(rows)) {
                rows++;
            }
        }
        batch.setNumRows(rows);
        return rows > 0;
    }

    /** Decode the current batch's next record into row {@code row}; false if its offset is out of the range. */
    private boolean decodeRecord(int row) {
        if (recAt >= recEnd) {
            throw corrupt(recBatchPos, "records count is " + recCount + " but the records end after " + recIndex);
        }
        int length = varint(recs, recAt, recEnd, "record length");
        if (length < 0) {
            throw recordError("negative record length " + length);
        }
        int end = varAt + length;
        if (end > recEnd || end < varAt) {
            throw recordError("record of " + length + " bytes overruns the batch (" + (recEnd - varAt) + " left)");
        }
        int bodyStart = varAt;
        if (varAt + 1 > end) {
            throw recordError("record of " + length + " bytes has no attributes");
        }
        long tsDelta = varlong(recs, varAt + 1, end, "timestamp delta");  // after the attributes byte
        int offDelta = varint(recs, varAt, end, "offset delta");
        long offset = baseOffset + offDelta;
        if (offset < p.start() || offset >= p.end()) {
            recAt = end;
            recIndex++;
            return false;
        }
        field(end, "key");
        int keyAt = fieldAt, keyLen = fieldLen;
        field(end, "value");
        int valueAt = fieldAt, valueLen = fieldLen;
        int n = varint(recs, varAt, end, "header count");
        if (n < 0) {
            throw recordError("negative header count " + n);
        }
        if (by[KEY] != null) {
            put(by[KEY], row, recs, keyAt, keyLen);
        }
        if (by[VALUE] != null) {
            put(by[VALUE], row, recs, valueAt, valueLen);
        }
        if (by[OFFSET] != null) {
            by[OFFSET].putLong(row, offset);
        }
        if (by[TIMESTAMP] != null) {
            by[TIMESTAMP].putLong(row, micros(tsType == 1 ? maxTimestamp : baseTimestamp + tsDelta));
        }
        if (by[TS_TYPE] != null) {
            by[TS_TYPE].putInt(row, tsType);
        }
        WritableColumnVector entries = wantHeaders ? by[HEADERS].arrayData() : null;
        int first = entries == null ? 0 : entries.getElementsAppended();
        for (int h = 0; h < n; h++) {
            field(end, "header key");
            int hkAt = fieldAt, hkLen = fieldLen;
            field(end, "header value");
            if (entries != null) {
                WritableColumnVector k = entries.getChild(0), v = entries.getChild(1);
                appendUtf8(k, hkAt, hkLen == NULL ? 0 : hkLen);
                if (fieldLen == NULL) {
                    v.appendNull();
                } else {
                    v.appendByteArray(recs, fieldAt, fieldLen);
                }
                entries.appendStruct(false);
                bytesInBatch += Math.max(fieldLen, 0) + Math.max(hkLen, 0);
            }
        }
        if (entries != null) {
            by[HEADERS].putArray(row, first, n);
        }
        if (varAt != end) {
            throw recordError("record length " + length + " but its fields use " + (varAt - bodyStart) + " bytes");
        }
        if (wantKeyOrValueOrHeaders) {
            bytesInBatch += Math.max(keyLen, 0) + Math.max(valueLen, 0);
        }
        recAt = end;
        recIndex++;
        return true;
    }

    /** Header keys as Spark's Kafka source reads them: UTF-8, bad bytes replaced. */
    private void appendUtf8(WritableColumnVector k, int at, int len) {
        boolean ascii = true;
        for (int i = at; i < at + len && ascii; i++) {
            ascii = recs[i] >= 0;
        }
        if (!ascii) {
            try {
                StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(recs, at, len));
            } catch (CharacterCodingException e) {
                byte[] fixed = new String(recs, at, len, StandardCharsets.UTF_8).getBytes(StandardCharsets.UTF_8);
                k.appendByteArray(fixed, 0, fixed.length);
                return;
            }
        }
        k.appendByteArray(recs, at, len);
    }
}
