package io.pylog.spark;

import java.util.Iterator;
import java.util.Map;
import java.util.TreeMap;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.connector.read.streaming.Offset;

/**
 * A streaming query's position: the next offset of each partition, as JSON in the
 * shape of Spark's Kafka source's offsets ({@code {"events":{"0":12,"1":7}}}, its
 * {@code KafkaSourceOffset}), so the checkpoints read like format("kafka")'s and
 * format("pylog")'s.
 */
final class PartitionOffsets extends Offset {
    final Map<TopicPartition, Long> offsets;

    PartitionOffsets(Map<TopicPartition, Long> offsets) {
        this.offsets = new TreeMap<>(offsets);
    }

    @Override
    public String json() {
        ObjectMapper mapper = new ObjectMapper();
        ObjectNode root = mapper.createObjectNode();
        for (Map.Entry<TopicPartition, Long> e : offsets.entrySet()) {
            ObjectNode topic = root.has(e.getKey().topic())
                ? (ObjectNode) root.get(e.getKey().topic()) : root.putObject(e.getKey().topic());
            topic.put(Integer.toString(e.getKey().partition()), e.getValue());
        }
        return root.toString();
    }

    static PartitionOffsets fromJson(String json) {
        JsonNode root;
        try {
            root = new ObjectMapper().readTree(json);
        } catch (Exception e) {
            throw new IllegalStateException("format('pylog-jvm'): the checkpoint's offsets are not JSON: " + json, e);
        }
        Map<TopicPartition, Long> out = new TreeMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> ts = root.fields(); ts.hasNext();) {
            Map.Entry<String, JsonNode> t = ts.next();
            for (Iterator<Map.Entry<String, JsonNode>> ps = t.getValue().fields(); ps.hasNext();) {
                Map.Entry<String, JsonNode> p = ps.next();
                out.put(new TopicPartition(t.getKey(), Integer.parseInt(p.getKey())), p.getValue().longValue());
            }
        }
        return new PartitionOffsets(out);
    }
}
