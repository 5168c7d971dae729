package io.pylog.spark;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;

/**
 * {@code spark.readStream.format("pylog-jvm")}: micro-batches of offset ranges
 * ({@link PartitionOffsets}), planned and read as a batch read's. Each trigger's
 * latest offsets are the files' (their checkpointed high watermark, or the log end
 * with upToLogEnd) or, with {@code kafka.bootstrap.servers}, the broker's: the high
 * watermark, or under read_committed the last stable offset (ListOffsets with
 * isolation level 1), so an open transaction holds every micro-batch below its
 * first record, as a read_committed consumer is held.
 *
 * <p>As Spark's Kafka source ({@code KafkaMicroBatchStream}): {@code startingOffsets}
 * defaults to latest; {@code maxOffsetsPerTrigger} spreads its records over the
 * partitions by their backlog; a partition that appears is read from its earliest
 * offset; {@code Trigger.AvailableNow} reads up to the latest offsets found when
 * the query starts. A partition gone or whose offsets went back stops the query
 * with failOnDataLoss (the default), else is logged away.
 */
final class SegmentStream implements MicroBatchStream, SupportsAdmissionControl, SupportsTriggerAvailableNow {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(SegmentStream.class);

    private final ReadOptions options;
    private final int[] columns;
    /** The broker's client, kept across triggers; null without kafka.bootstrap.servers. */
    private final ListOffsets broker;
    private PartitionOffsets initial;
    /** Trigger.AvailableNow: the latest offsets when the query started. */
    private Map<TopicPartition, Long> availableNow;

    SegmentStream(ReadOptions options, int[] columns) {
        this.options = options;
        this.columns = columns;
        this.broker = options.bootstrap == null ? null : new ListOffsets(options.kafkaParams);
    }

    private LogDirs dirs() {
        return new LogDirs(options.paths, options.upToLogEnd);
    }

    /** The latest offset of every selected partition, now. */
    private Map<TopicPartition, Long> latest(LogDirs dirs, List<TopicPartition> tps) {
        if (broker != null) {
            return SegmentScan.pinnedEnds(options, broker, dirs, tps);
        }
        Map<TopicPartition, Long> out = new LinkedHashMap<>();
        for (TopicPartition tp : tps) {
            out.put(tp, dirs.latest(tp));
        }
        return out;
    }

    @Override
    public Offset initialOffset() {
        if (initial == null) {
            LogDirs dirs = dirs();
            List<TopicPartition> tps = SegmentScan.topicPartitions(options, dirs);
            String kind = options.starting == null && options.startingSpec == null ? "latest" : options.starting;
            initial = new PartitionOffsets(SegmentScan.resolve(options, dirs, tps, kind, options.startingSpec, true,
                latest(dirs, tps)));
        }
        return initial;
    }

    @Override
    public Offset deserializeOffset(String json) {
        return PartitionOffsets.fromJson(json);
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        return options.maxOffsetsPerTrigger == null ? ReadLimit.allAvailable()
            : ReadLimit.maxRows(options.maxOffsetsPerTrigger);
    }

    @Override
    public void prepareForTriggerAvailableNow() {
        LogDirs dirs = dirs();
        availableNow = latest(dirs, SegmentScan.topicPartitions(options, dirs));
    }

    @Override
    public Offset latestOffset() {
        LogDirs dirs = dirs();
        return new PartitionOffsets(latest(dirs, SegmentScan.topicPartitions(options, dirs)));
    }

    @Override
    public Offset latestOffset(Offset startOffset, ReadLimit limit) {
        Map<TopicPartition, Long> from = ((PartitionOffsets) startOffset).offsets;
        LogDirs dirs = dirs();
        List<TopicPartition> tps = SegmentScan.topicPartitions(options, dirs);
        Map<TopicPartition, Long> latest = latest(dirs, tps);
        for (TopicPartition tp : from.keySet()) {
            if (!latest.containsKey(tp)) {
                dataLoss(tp + " is gone (its topic deleted?) after offset " + from.get(tp));
            }
        }
        Map<TopicPartition, Long> begin = new TreeMap<>();
        Map<TopicPartition, Long> end = new TreeMap<>();
        for (TopicPartition tp : tps) {
            long b = from.containsKey(tp) ? from.get(tp) : dirs.earliest(tp);
            long e = latest.get(tp);
            if (e < b) {
                dataLoss(tp + "'s offset went back from " + b + " to " + e + " (the topic deleted and recreated, "
                    + "or its log truncated): what was at offsets " + e + " to " + (b - 1) + " is lost");
                b = e;  // read on from the new end
            }
            if (availableNow != null && availableNow.containsKey(tp)) {
                e = Math.max(b, Math.min(e, availableNow.get(tp)));
            }
            begin.put(tp, b);
            end.put(tp, e);
        }
        if (limit instanceof ReadMaxRows max) {
            rateLimit(begin, end, max.maxRows());
        }
        return new PartitionOffsets(end);
    }

    /**
     * At most {@code limit} records, each partition's share in proportion to its
     * backlog (Spark's KafkaMicroBatchStream.rateLimit: a share below one record
     * rounded up, others down).
     */
    private static void rateLimit(Map<TopicPartition, Long> begin, Map<TopicPartition, Long> end, long limit) {
        double total = 0;
        for (TopicPartition tp : end.keySet()) {
            total += end.get(tp) - begin.get(tp);
        }
        if (total <= limit) {
            return;
        }
        for (TopicPartition tp : end.keySet()) {
            long b = begin.get(tp), e = end.get(tp);
            double share = limit * ((e - b) / total);
            long n = (long) (share < 1 ? Math.ceil(share) : Math.floor(share));
            end.put(tp, Math.min(e, b + n));
        }
    }

    private void dataLoss(String message) {
        if (options.failOnDataLoss) {
            throw new IllegalStateException(message + ". Set failOnDataLoss=false to go on without it.");
        }
        LOG.warn("format('pylog-jvm'): {}; going on (failOnDataLoss=false)", message);
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
        Map<TopicPartition, Long> from = ((PartitionOffsets) start).offsets;
        Map<TopicPartition, Long> to = ((PartitionOffsets) end).offsets;
        LogDirs dirs = dirs();
        List<TopicPartition> tps = new ArrayList<>();
        Map<TopicPartition, Long> begin = new TreeMap<>();
        for (Map.Entry<TopicPartition, Long> e : to.entrySet()) {
            TopicPartition tp = e.getKey();
            if (!dirs.partitions.containsKey(tp)) {
                dataLoss(tp + " is gone (its topic deleted?) before offset " + e.getValue() + " was read");
                continue;
            }
            long b = from.containsKey(tp) ? from.get(tp) : dirs.earliest(tp);
            if (b < e.getValue()) {
                tps.add(tp);
                begin.put(tp, b);
            }
        }
        return SegmentScan.split(options, dirs, tps, begin, to, options.minPartitions);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new SegmentReader.Factory(columns);
    }

    @Override
    public void commit(Offset end) {
        // the checkpoint is the query's position: nothing is kept here
    }

    @Override
    public void stop() {
        if (broker != null) {
            broker.close();
        }
    }
}
