package io.pylog.spark;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * A batch scan of offset ranges: planned on the driver from the log directories
 * as format("pylog") plans them (python/pylog/spark/_options.py: topic selection,
 * offset resolution with failOnDataLoss, splits at segment bases, by
 * maxRecordsPerPartition and to minPartitions), read by {@link SegmentReader}; with
 * {@code kafka.bootstrap.servers} the latest offsets are the broker's (the last
 * stable offsets under read_committed). A streaming query's micro-batches are
 * {@link SegmentStream}'s.
 */
final class SegmentScan implements Scan, Batch {
    static final class Builder implements ScanBuilder, SupportsPushDownRequiredColumns {
        private final ReadOptions options;
        private StructType required;

        Builder(ReadOptions options) {
            this.options = options;
            this.required = PylogJvmSource.kafkaSchema(options.includeHeaders);
        }

        @Override
        public void pruneColumns(StructType requiredSchema) {
            this.required = requiredSchema;
        }

        @Override
        public Scan build() {
            return new SegmentScan(options, required);
        }
    }

    private final ReadOptions options;
    private final StructType readSchema;
    /** For each column of readSchema, its index in Spark's Kafka schema. */
    private final int[] columns;

    SegmentScan(ReadOptions options, StructType required) {
        this.options = options;
        StructType full = PylogJvmSource.kafkaSchema(options.includeHeaders);
        StructField[] fields = required.fields();
        this.columns = new int[fields.length];
        List<StructField> kept = new ArrayList<>();
        for (int i = 0; i < fields.length; i++) {
            int at = -1;
            String[] names = full.fieldNames();
            for (int j = 0; j < names.length && at < 0; j++) {
                if (names[j].equalsIgnoreCase(fields[i].name())) {
                    at = j;
                }
            }
            if (at < 0) {
                throw new IllegalArgumentException("column '" + fields[i].name() + "' is not in " + full.simpleString());
            }
            columns[i] = at;
            kept.add(full.fields()[at]);
        }
        this.readSchema = new StructType(kept.toArray(new StructField[0]));
    }

    @Override
    public StructType readSchema() {
        return readSchema;
    }

    @Override
    public String description() {
        return PylogJvmSource.NAME + " " + options.paths + " columns " + readSchema.simpleString();
    }

    @Override
    public Batch toBatch() {
        options.checkBatch();
        return this;
    }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
        options.checkStream();
        return new SegmentStream(options, columns);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new SegmentReader.Factory(columns);
    }

    @Override
    public InputPartition[] planInputPartitions() {
        LogDirs dirs = new LogDirs(options.paths, options.upToLogEnd);
        List<TopicPartition> tps = topicPartitions(options, dirs);
        Map<TopicPartition, Long> pinned = null;
        if (options.bootstrap != null) {
            try (ListOffsets broker = new ListOffsets(options.kafkaParams)) {
                pinned = pinnedEnds(options, broker, dirs, tps);
            }
        }
        String starting = options.starting == null && options.startingSpec == null ? "earliest" : options.starting;
        Map<TopicPartition, Long> start = resolve(options, dirs, tps, starting, options.startingSpec, true, pinned);
        Map<TopicPartition, Long> end = resolve(options, dirs, tps, options.ending, options.endingSpec, false,
            pinned);
        for (TopicPartition tp : tps) {
            long s = start.get(tp), e = end.get(tp);
            if (e < s) {
                throw new IllegalArgumentException(tp + ": the ending offset " + e
                    + " is before the starting offset " + s);
            }
        }
        return split(options, dirs, tps, start, end, options.minPartitions);
    }

    /**
     * The tasks reading {@code [start, end)} of each partition: split at segment
     * bases, then by maxRecordsPerPartition, then evenly until there are minPartitions.
     */
    static InputPartition[] split(ReadOptions options, LogDirs dirs, List<TopicPartition> tps,
                                  Map<TopicPartition, Long> start, Map<TopicPartition, Long> end,
                                  Integer minPartitions) {
        List<SegmentPartition> out = new ArrayList<>();
        List<long[]> pieces = new ArrayList<>();
        List<TopicPartition> owners = new ArrayList<>();
        for (TopicPartition tp : tps) {
            long s = start.get(tp), e = end.get(tp);
            if (e <= s) {
                continue;
            }
            // a split never straddles a segment when it need not
            List<Long> points = new ArrayList<>();
            points.add(s);
            for (long c : LogDirs.segmentBases(dirs.partitions.get(tp))) {
                if (s < c && c < e) {
                    points.add(c);
                }
            }
            points.add(e);
            for (int i = 0; i + 1 < points.size(); i++) {
                pieces.add(new long[] {points.get(i), points.get(i + 1)});
                owners.add(tp);
            }
        }
        if (options.maxRecordsPerPartition != null) {
            List<long[]> more = new ArrayList<>();
            List<TopicPartition> moreOwners = new ArrayList<>();
            long max = options.maxRecordsPerPartition;
            for (int i = 0; i < pieces.size(); i++) {
                long size = pieces.get(i)[1] - pieces.get(i)[0];
                for (long[] p : even(pieces.get(i), (size + max - 1) / max)) {
                    more.add(p);
                    moreOwners.add(owners.get(i));
                }
            }
            pieces = more;
            owners = moreOwners;
        }
        if (minPartitions != null && pieces.size() < minPartitions) {
            long total = 0;
            for (long[] p : pieces) {
                total += p[1] - p[0];
            }
            long min = minPartitions;
            List<long[]> more = new ArrayList<>();
            List<TopicPartition> moreOwners = new ArrayList<>();
            for (int i = 0; i < pieces.size(); i++) {
                long size = pieces.get(i)[1] - pieces.get(i)[0];
                long t = Math.max(total, 1);
                long n = Math.max(1, (size * min + t - 1) / t);
                for (long[] p : even(pieces.get(i), n)) {
                    more.add(p);
                    moreOwners.add(owners.get(i));
                }
            }
            pieces = more;
            owners = moreOwners;
        }
        for (int i = 0; i < pieces.size(); i++) {
            TopicPartition tp = owners.get(i);
            out.add(new SegmentPartition(tp.topic(), tp.partition(), pieces.get(i)[0], pieces.get(i)[1],
                dirs.partitions.get(tp), options.failOnDataLoss, options.readCommitted));
        }
        return out.toArray(new InputPartition[0]);
    }

    private static List<long[]> even(long[] r, long parts) {
        long size = r[1] - r[0];
        parts = Math.max(1, Math.min(parts, size));
        List<long[]> out = new ArrayList<>();
        for (long i = 0; i < parts; i++) {
            long a = r[0] + Math.multiplyExact(size, i) / parts;
            long b = r[0] + Math.multiplyExact(size, i + 1) / parts;
            out.add(new long[] {a, b});
        }
        return out;
    }

    /** The partitions the options select. */
    static List<TopicPartition> topicPartitions(ReadOptions options, LogDirs dirs) {
        Map<String, List<Integer>> topics = dirs.topics();
        List<TopicPartition> out = new ArrayList<>();
        if (options.subscribe != null) {
            List<String> missing = new ArrayList<>();
            for (String t : options.subscribe) {
                if (!topics.containsKey(t)) {
                    missing.add(t);
                }
            }
            if (!missing.isEmpty()) {
                throw new IllegalArgumentException("unknown topic(s) " + missing + " in " + options.paths);
            }
            for (String t : options.subscribe) {
                for (int p : topics.get(t)) {
                    out.add(new TopicPartition(t, p));
                }
            }
        } else if (options.pattern != null) {
            Pattern rx = Pattern.compile(options.pattern);
            for (Map.Entry<String, List<Integer>> e : topics.entrySet()) {
                String t = e.getKey();
                // internal topics are left out, as a Kafka consumer's pattern leaves them out
                if (rx.matcher(t).matches() && !t.equals("__consumer_offsets") && !t.equals("__transaction_state")) {
                    for (int p : e.getValue()) {
                        out.add(new TopicPartition(t, p));
                    }
                }
            }
        } else {
            for (Map.Entry<String, List<Integer>> e : options.assign.entrySet()) {
                for (int p : e.getValue()) {
                    if (!topics.getOrDefault(e.getKey(), List.of()).contains(p)) {
                        throw new IllegalArgumentException("assigned partition " + e.getKey() + "-" + p
                            + " does not exist in " + options.paths);
                    }
                    out.add(new TopicPartition(e.getKey(), p));
                }
            }
        }
        return out;
    }

    /**
     * With {@code kafka.bootstrap.servers}, the latest offset of each partition as its
     * leader answers ListOffsets (the last stable offset under read_committed, else
     * the high watermark), pinned for the whole read; null without it (the files'
     * checkpointed high watermark is the latest). The files must reach it: this
     * reader fetches nothing, and under read_committed an aborted transaction whose
     * marker the files lack would otherwise show.
     */
    static Map<TopicPartition, Long> pinnedEnds(ReadOptions options, ListOffsets broker, LogDirs dirs,
                                                List<TopicPartition> tps) {
        Map<TopicPartition, Long> ends = broker.latest(tps, options.readCommitted);
        for (TopicPartition tp : tps) {
            long there = dirs.logEnd(tp);
            long end = ends.get(tp);
            if (there < end) {
                throw new IllegalStateException(tp + ": the files in " + dirs.partitions.get(tp) + " end at offset "
                    + there + ", before the broker's " + (options.readCommitted ? "last stable offset " : "high watermark ")
                    + end + ": format('pylog-jvm') reads files only (a lagging copy or a follower's?); "
                    + "use format('pylog'), which fetches the rest from the broker");
            }
        }
        return ends;
    }

    /** Concrete offsets for the start (or end) of the read, per partition. */
    static Map<TopicPartition, Long> resolve(ReadOptions options, LogDirs dirs, List<TopicPartition> tps,
                                             String kind, Map<TopicPartition, Long> spec, boolean isStart,
                                             Map<TopicPartition, Long> pinned) {
        Map<TopicPartition, Long> out = new LinkedHashMap<>();
        for (TopicPartition tp : tps) {
            long earliest = dirs.earliest(tp);
            long latest = pinned != null ? pinned.get(tp) : dirs.latest(tp);
            long v;
            if ("earliest".equals(kind)) {
                v = earliest;
            } else if ("latest".equals(kind)) {
                v = latest;
            } else {
                long given = spec.getOrDefault(tp, isStart ? ReadOptions.EARLIEST : ReadOptions.LATEST);
                v = given == ReadOptions.EARLIEST ? earliest : given == ReadOptions.LATEST ? latest : given;
                if (isStart && given >= 0 && (given < earliest || given > latest)) {
                    if (options.failOnDataLoss) {
                        throw new IllegalStateException("startingOffsets " + given + " for " + tp
                            + " is out of range [" + earliest + ", " + latest + "] (set failOnDataLoss=false to clamp)");
                    }
                    v = Math.min(Math.max(given, earliest), latest);
                }
                if (!isStart && given > latest) {
                    if (options.failOnDataLoss) {
                        throw new IllegalStateException("endingOffsets " + given + " for " + tp
                            + " is beyond the latest offset " + latest + " (set failOnDataLoss=false to clamp)");
                    }
                    v = latest;
                }
            }
            out.put(tp, v);
        }
        return out;
    }
}
