package io.pylog.spark;

import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One task's work: the offsets {@code [start, end)} of one topic partition, read from its
 * directory; {@code readCommitted} leaves out the batches of aborted transactions.
 */
record SegmentPartition(String topic, int partition, long start, long end, String dir, boolean failOnDataLoss,
                        boolean readCommitted)
    implements InputPartition {
    private static final long serialVersionUID = 1L;
}
