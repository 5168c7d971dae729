package io.pylog.spark;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The aborted transactions of a partition directory, read from its segments'
 * {@code .txnindex} files as Kafka's log reads them for a read_committed fetch
 * (Kafka's {@code TransactionIndex} and {@code AbortedTxn}, KIP-98).
 *
 * <p>Each file holds fixed 34-byte big-endian entries, one per ABORT marker in its
 * segment, in marker order: version (int16, 0), producer id (int64), the
 * transaction's first offset (int64, maybe in an older segment), its last offset
 * (int64, the marker's) and the last stable offset after the marker (int64).
 * pylog's broker writes them the same way (python/pylog/log/transaction_index.py).
 *
 * <p>An entry overlaps {@code [start, end)} when its last offset is at or after
 * {@code start} and its first offset before {@code end} (Kafka's
 * {@code collectAbortedTxns}). Kafka walks the segments from the one holding the
 * start until an entry's last stable offset passes the end; a partition has few
 * entries, so every file of the directory is read instead, which finds the same
 * overlapping ones. A batch is aborted when it is transactional and its producer
 * has an overlapping aborted transaction whose {@code [first, last]} holds the
 * batch's base offset: a producer's batches of one transaction lie between its
 * first offset and its marker.
 */
final class TransactionIndex {
    static final String SUFFIX = ".txnindex";
    static final int ENTRY_SIZE = 34;
    static final short CURRENT_VERSION = 0;

    /** One aborted transaction (Kafka's AbortedTxn). */
    record AbortedTxn(long producerId, long firstOffset, long lastOffset, long lastStableOffset) {}

    /** producer id -> [first, last] of its aborted transactions overlapping the range. */
    private final Map<Long, List<long[]>> byProducer = new HashMap<>();
    private final int count;

    private TransactionIndex(List<AbortedTxn> txns) {
        for (AbortedTxn t : txns) {
            byProducer.computeIfAbsent(t.producerId(), k -> new ArrayList<>())
                .add(new long[] {t.firstOffset(), t.lastOffset()});
        }
        this.count = txns.size();
    }

    /** The aborted transactions of {@code dir} overlapping {@code [start, end)}. */
    static TransactionIndex collect(String dir, long start, long end) {
        String[] names = new File(dir).list();
        if (names == null) {
            throw new UncheckedIOException(new IOException("cannot list partition directory " + dir));
        }
        List<AbortedTxn> out = new ArrayList<>();
        for (String name : names) {
            // a live segment's index only ("....txnindex.deleted" and the like end otherwise)
            if (!name.endsWith(SUFFIX)) {
                continue;
            }
            for (AbortedTxn t : read(new File(dir, name))) {
                if (t.lastOffset() >= start && t.firstOffset() < end) {
                    out.add(t);
                }
            }
        }
        return new TransactionIndex(out);
    }

    /**
     * Every whole entry of one file. A trailing partial entry (an append under
     * way) is left out, as Kafka's iterator leaves it; a newer version fails.
     */
    static List<AbortedTxn> read(File f) {
        byte[] bytes;
        try {
            bytes = Files.readAllBytes(f.toPath());
        } catch (NoSuchFileException e) {
            return List.of();  // its segment deleted by retention since the listing
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read transaction index " + f, e);
        }
        ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.BIG_ENDIAN);
        List<AbortedTxn> out = new ArrayList<>();
        for (int at = 0; at + ENTRY_SIZE <= bytes.length; at += ENTRY_SIZE) {
            short version = b.getShort(at);
            if (version != CURRENT_VERSION) {
                throw new IllegalStateException("transaction index " + f + ": entry at position " + at
                    + " has version " + version + ", not " + CURRENT_VERSION);
            }
            out.add(new AbortedTxn(b.getLong(at + 2), b.getLong(at + 10), b.getLong(at + 18), b.getLong(at + 26)));
        }
        return out;
    }

    boolean isEmpty() {
        return count == 0;
    }

    /** Whether a transactional batch of {@code producerId} based at {@code baseOffset} was aborted. */
    boolean aborted(long producerId, long baseOffset) {
        List<long[]> ranges = byProducer.get(producerId);
        if (ranges == null) {
            return false;
        }
        for (long[] r : ranges) {
            if (r[0] <= baseOffset && baseOffset <= r[1]) {
                return true;
            }
        }
        return false;
    }
}
