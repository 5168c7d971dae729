package io.pylog.testclient;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * KafkaConsumer in a group (--group: subscribe, offsets committed at the end) or on
 * assigned partitions (--assign: from --offset, else the beginning). Stops after --count
 * records, or with --to-end once every assigned partition is read up to the end offset it
 * had at the start, or at --timeout-ms. Prints each record, then what was committed.
 */
final class ConsumeCommand {
    private final Args args;

    ConsumeCommand(Args args) {
        this.args = args;
    }

    int run() {
        String group = args.get("group", null);
        String assign = args.get("assign", null);
        if ((group == null) == (assign == null)) {
            throw new Args.UsageException("consume takes one of --group and --assign");
        }
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args.require("bootstrap"));
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        if (group != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        props.putAll(args.pairs("property"));
        String topic = args.require("topic");
        int count = args.getInt("count", Integer.MAX_VALUE);
        boolean toEnd = args.has("to-end");
        long deadline = System.currentTimeMillis() + args.getLong("timeout-ms", 30_000);
        int seen = 0;

        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            Map<TopicPartition, Long> ends = new HashMap<>();
            if (group != null) {
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                        List<Integer> ps = new ArrayList<>();
                        partitions.forEach(tp -> ps.add(tp.partition()));
                        Main.emit(Json.obj("type", "assigned", "partitions", ps));
                    }
                });
            } else {
                List<TopicPartition> tps = new ArrayList<>();
                for (String p : assign.split(",")) {
                    tps.add(new TopicPartition(topic, Integer.parseInt(p.trim())));
                }
                consumer.assign(tps);
                if (args.has("offset")) {
                    long offset = args.getLong("offset", 0);
                    tps.forEach(tp -> consumer.seek(tp, offset));
                } else {
                    consumer.seekToBeginning(tps);
                }
                if (toEnd) {
                    ends.putAll(consumer.endOffsets(tps, Duration.ofSeconds(30)));
                }
            }
            while (seen < count && System.currentTimeMillis() < deadline) {
                if (toEnd && !ends.isEmpty() && reachedEnd(consumer, ends)) {
                    break;
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    Main.emit(record(r));
                    seen++;
                }
            }
            if (group != null && !consumer.assignment().isEmpty()) {
                consumer.commitSync(Duration.ofSeconds(30));
                Map<TopicPartition, OffsetAndMetadata> committed =
                        consumer.committed(consumer.assignment(), Duration.ofSeconds(30));
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : committed.entrySet()) {
                    if (e.getValue() != null) {
                        Main.emit(Json.obj("type", "committed", "partition", e.getKey().partition(),
                                "offset", e.getValue().offset()));
                    }
                }
            }
            boolean complete = toEnd ? reachedEnd(consumer, ends) || seen >= count : seen >= count;
            Main.emit(Json.obj("type", "done", "count", seen, "complete", complete));
            return complete ? 0 : 1;
        }
    }

    private static boolean reachedEnd(KafkaConsumer<byte[], byte[]> consumer,
                                      Map<TopicPartition, Long> ends) {
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            if (consumer.position(e.getKey()) < e.getValue()) {
                return false;
            }
        }
        return true;
    }

    private static Map<String, Object> record(ConsumerRecord<byte[], byte[]> r) {
        Map<String, Object> headers = new LinkedHashMap<>();
        for (Header h : r.headers()) {
            headers.put(h.key(), h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8));
        }
        return Json.obj("type", "record", "topic", r.topic(), "partition", r.partition(),
                "offset", r.offset(), "timestamp", r.timestamp(),
                "leaderEpoch", r.leaderEpoch().orElse(null),
                "key", Json.text(r.key()), "value", Json.text(r.value()), "headers", headers);
    }
}
