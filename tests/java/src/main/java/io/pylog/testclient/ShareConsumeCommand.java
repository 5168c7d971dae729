package io.pylog.testclient;

import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * KafkaShareConsumer (KIP-932) in share group --group on --topic. Prints each record it is
 * delivered ("record": partition, offset, value, delivery_count) and acknowledges it
 * explicitly: RELEASE while its delivery count is below --release-below (default 0: never),
 * REJECT when its value is in --reject, else ACCEPT; the acknowledgements are committed with
 * commitSync after each poll. Stops after --count ACCEPTed records, after --idle-ms without a
 * record once --min-records were seen, or at --timeout-ms. --halt-after N stops the JVM at
 * once (no acknowledgement, no close) on the poll that brings the N-th record: records it
 * holds stay acquired until their lock expires.
 */
final class ShareConsumeCommand {
    private final Args args;

    ShareConsumeCommand(Args args) {
        this.args = args;
    }

    int run() {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args.require("bootstrap"));
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args.require("group"));
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put("share.acknowledgement.mode", "explicit");
        props.putAll(args.pairs("property"));
        String topic = args.require("topic");
        int count = args.getInt("count", Integer.MAX_VALUE);
        int releaseBelow = args.getInt("release-below", 0);
        int haltAfter = args.getInt("halt-after", 0);
        int minRecords = args.getInt("min-records", 1);
        long idleMs = args.getLong("idle-ms", Long.MAX_VALUE);
        List<String> reject = List.of(args.get("reject", "").split(","));
        long deadline = System.currentTimeMillis() + args.getLong("timeout-ms", 60_000);
        int seen = 0;
        int accepted = 0;
        long lastRecord = System.currentTimeMillis();

        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props)) {
            consumer.subscribe(List.of(topic));
            Main.emit(Json.obj("type", "subscribed"));
            while (accepted < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    if (seen >= minRecords && System.currentTimeMillis() - lastRecord > idleMs) {
                        break;
                    }
                    continue;
                }
                lastRecord = System.currentTimeMillis();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    seen++;
                    String value = Json.text(r.value());
                    Optional<Short> dc = r.deliveryCount();
                    int deliveries = dc.isPresent() ? dc.get() : -1;
                    AcknowledgeType type;
                    if (deliveries < releaseBelow) {
                        type = AcknowledgeType.RELEASE;
                    } else if (reject.contains(value)) {
                        type = AcknowledgeType.REJECT;
                    } else {
                        type = AcknowledgeType.ACCEPT;
                    }
                    Main.emit(Json.obj("type", "record", "partition", r.partition(), "offset", r.offset(),
                            "value", value, "delivery_count", deliveries,
                            "ack", haltAfter > 0 && seen >= haltAfter ? "none" : type.toString()));
                    if (haltAfter > 0 && seen >= haltAfter) {
                        continue;
                    }
                    consumer.acknowledge(r, type);
                    if (type == AcknowledgeType.ACCEPT) {
                        accepted++;
                    }
                }
                if (haltAfter > 0 && seen >= haltAfter) {
                    Main.emit(Json.obj("type", "halted", "seen", seen));
                    Runtime.getRuntime().halt(0);
                }
                consumer.commitSync();
            }
        }
        Main.emit(Json.obj("type", "done", "seen", seen, "accepted", accepted));
        return 0;
    }
}
