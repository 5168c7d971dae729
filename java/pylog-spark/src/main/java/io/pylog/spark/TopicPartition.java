package io.pylog.spark;

import java.io.Serializable;

/** A topic partition, printed as Kafka prints it: {@code topic-partition}. */
record TopicPartition(String topic, int partition) implements Serializable, Comparable<TopicPartition> {
    @Override
    public String toString() {
        return topic + "-" + partition;
    }

    @Override
    public int compareTo(TopicPartition o) {
        int c = topic.compareTo(o.topic);
        return c != 0 ? c : Integer.compare(partition, o.partition);
    }
}
