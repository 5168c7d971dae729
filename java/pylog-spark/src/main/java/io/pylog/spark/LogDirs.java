package io.pylog.spark;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The partitions found under one or more Kafka-layout log directories and what
 * planning needs of them, as python/pylog/spark/_logdirs.py finds it: each
 * {@code <topic>-<partition>} directory, its earliest offset (first segment, or the
 * {@code log-start-offset-checkpoint}), its latest (the high watermark in
 * {@code replication-offset-checkpoint}, else the end of the last complete batch).
 */
final class LogDirs {
    static final String REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint";
    static final String LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint";
    private static final Pattern PARTITION_DIR = Pattern.compile("^(?<topic>.+)-(?<partition>\\d+)$");

    final List<String> dirs;
    final boolean upToLogEnd;
    final Map<TopicPartition, String> partitions = new TreeMap<>();
    private final Map<TopicPartition, Long> hw = new HashMap<>();
    private final Map<TopicPartition, Long> logStart = new HashMap<>();

    LogDirs(List<String> dirs, boolean upToLogEnd) {
        this.dirs = dirs;
        this.upToLogEnd = upToLogEnd;
        for (String d : dirs) {
            File dir = new File(d);
            String[] names = dir.list();
            if (!dir.isDirectory() || names == null) {
                throw new IllegalArgumentException("log directory '" + d + "' does not exist or is not readable");
            }
            Arrays.sort(names);
            for (String name : names) {
                Matcher m = PARTITION_DIR.matcher(name);
                File full = new File(dir, name);
                // '-delete' / '-future' / '-stray' dirs carry a dot and a suffix
                if (!m.matches() || name.contains(".") || !full.isDirectory()) {
                    continue;
                }
                TopicPartition tp = new TopicPartition(m.group("topic"), Integer.parseInt(m.group("partition")));
                partitions.put(tp, full.getPath());
            }
            readCheckpoint(new File(dir, REPLICATION_OFFSET_CHECKPOINT), hw);
            readCheckpoint(new File(dir, LOG_START_OFFSET_CHECKPOINT), logStart);
        }
    }

    /** Kafka's offset checkpoint: {@code 0}, a count, then {@code topic partition offset} lines. */
    private static void readCheckpoint(File f, Map<TopicPartition, Long> into) {
        if (!f.exists()) {
            return;
        }
        List<String> lines;
        try {
            lines = Files.readAllLines(f.toPath(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read checkpoint " + f, e);
        }
        if (lines.size() < 2 || !lines.get(0).trim().equals("0")) {
            throw new IllegalStateException("malformed offset checkpoint " + f + ": expected version 0");
        }
        int n = Integer.parseInt(lines.get(1).trim());
        for (int i = 0; i < n && i + 2 < lines.size(); i++) {
            String[] parts = lines.get(i + 2).trim().split(" ");
            if (parts.length != 3) {
                throw new IllegalStateException("malformed offset checkpoint " + f + " line " + (i + 3));
            }
            into.put(new TopicPartition(parts[0], Integer.parseInt(parts[1])), Long.parseLong(parts[2]));
        }
    }

    Map<String, List<Integer>> topics() {
        Map<String, List<Integer>> out = new TreeMap<>();
        for (TopicPartition tp : partitions.keySet()) {
            out.computeIfAbsent(tp.topic(), k -> new ArrayList<>()).add(tp.partition());
        }
        return out;
    }

    /** Base offsets of the live segments of a partition directory, ascending. */
    static long[] segmentBases(String path) {
        String[] names = new File(path).list();
        if (names == null) {
            throw new UncheckedIOException(new IOException("cannot list partition directory " + path));
        }
        List<Long> out = new ArrayList<>();
        for (String n : names) {
            if (n.endsWith(".log")) {
                out.add(Long.parseLong(n.substring(0, n.indexOf('.'))));
            }
        }
        long[] bases = out.stream().mapToLong(Long::longValue).toArray();
        Arrays.sort(bases);
        return bases;
    }

    static String fileName(String dir, long base, String suffix) {
        return dir + File.separator + String.format("%020d", base) + suffix;
    }

    /**
     * Where to start reading {@code target} in a segment: the position of the
     * offset index's last entry at or below it (an entry's offset is its batch's
     * last), 0 without an index. Unused (zeroed) trailing entries are left out.
     */
    static long floorPosition(String dir, long base, long target) {
        Path index = Path.of(fileName(dir, base, ".index"));
        if (!Files.exists(index)) {
            return 0;
        }
        byte[] bytes;
        try {
            bytes = Files.readAllBytes(index);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read offset index " + index, e);
        }
        ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.BIG_ENDIAN);
        int used = bytes.length / 8;
        while (used > 1 && b.getLong((used - 1) * 8) == 0) {
            used--;
        }
        int lo = 0, hi = used;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (base + b.getInt(mid * 8) <= target) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo == 0 ? 0 : Integer.toUnsignedLong(b.getInt((lo - 1) * 8 + 4));
    }

    long earliest(TopicPartition tp) {
        long[] bases = segmentBases(partitions.get(tp));
        long first = bases.length > 0 ? bases[0] : 0;
        return Math.max(first, logStart.getOrDefault(tp, first));
    }

    /** The offset after the last complete batch of the partition. */
    long logEnd(TopicPartition tp) {
        String dir = partitions.get(tp);
        long[] bases = segmentBases(dir);
        ByteBuffer head = ByteBuffer.allocate(27).order(ByteOrder.BIG_ENDIAN);
        for (int i = bases.length - 1; i >= 0; i--) {
            long base = bases[i];
            Path log = Path.of(fileName(dir, base, ".log"));
            long last = -1;
            long size;
            try (FileChannel ch = FileChannel.open(log, StandardOpenOption.READ)) {
                size = ch.size();
                long pos = floorPosition(dir, base, Long.MAX_VALUE);
                while (pos + 17 <= size) {
                    head.clear();
                    while (head.hasRemaining() && ch.read(head, pos + head.position()) > 0) {
                        // fill
                    }
                    if (head.position() < 17) {
                        break;
                    }
                    int length = head.getInt(8);
                    if (length < 0 || pos + 12 + length > size) {
                        break;
                    }
                    byte magic = head.get(16);
                    if (magic >= 2) {
                        if (head.position() < 27) {
                            break;
                        }
                        last = head.getLong(0) + head.getInt(23);
                    } else {
                        last = head.getLong(0);
                    }
                    pos += 12 + length;
                }
            } catch (IOException e) {
                throw new UncheckedIOException("cannot read segment " + log, e);
            }
            if (last >= 0) {
                return last + 1;
            }
            if (base > 0 || size == 0) {
                return base;
            }
        }
        return 0;
    }

    long latest(TopicPartition tp) {
        long end = logEnd(tp);
        Long h = hw.get(tp);
        if (upToLogEnd || h == null) {
            return end;
        }
        return Math.min(h, end);
    }
}
