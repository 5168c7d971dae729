package io.pylog.testclient;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * KafkaProducer: --count N records valued value-prefix + index, or one record per line of
 * stdin (--stdin, until it closes). Each acknowledgement is printed as it arrives
 * ({"type":"ack",...} or {"type":"error",...} with the record's index), so a test reading
 * stdout sees when every record was acknowledged.
 */
final class ProduceCommand {
    private final Args args;
    private final AtomicInteger acked = new AtomicInteger();
    private final AtomicInteger failed = new AtomicInteger();

    ProduceCommand(Args args) {
        this.args = args;
    }

    int run() throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args.require("bootstrap"));
        props.put(ProducerConfig.ACKS_CONFIG, args.get("acks", "all"));
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, args.get("idempotence", "true"));
        props.put(ProducerConfig.LINGER_MS_CONFIG, args.get("linger-ms", "5"));
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.putAll(args.pairs("property"));
        String topic = args.require("topic");
        Integer partition = args.has("partition") ? Integer.valueOf(args.require("partition")) : null;
        String keyPrefix = args.get("key-prefix", null);
        String valuePrefix = args.get("value-prefix", "value-");
        boolean headers = args.has("headers");
        boolean sync = args.has("sync");

        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            if (args.has("stdin")) {
                BufferedReader in = new BufferedReader(
                        new InputStreamReader(System.in, StandardCharsets.UTF_8));
                String line;
                int index = 0;
                while ((line = in.readLine()) != null) {
                    send(producer, topic, partition, index, null, line, headers, sync);
                    index++;
                }
            } else {
                int count = Integer.parseInt(args.require("count"));
                for (int i = 0; i < count; i++) {
                    String key = keyPrefix == null ? null : keyPrefix + i;
                    send(producer, topic, partition, i, key, valuePrefix + i, headers, sync);
                }
            }
            producer.flush();
            producer.close(Duration.ofSeconds(args.getLong("close-timeout-s", 30)));
        }
        Main.emit(Json.obj("type", "done", "acked", acked.get(), "failed", failed.get()));
        return failed.get() == 0 ? 0 : 1;
    }

    private void send(KafkaProducer<byte[], byte[]> producer, String topic, Integer partition,
                      int index, String key, String value, boolean headers, boolean sync)
            throws Exception {
        RecordHeaders h = new RecordHeaders();
        if (headers) {
            h.add("index", Integer.toString(index).getBytes(StandardCharsets.UTF_8));
        }
        ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(topic, partition, null,
                key == null ? null : key.getBytes(StandardCharsets.UTF_8),
                value.getBytes(StandardCharsets.UTF_8), h);
        Future<RecordMetadata> f = producer.send(record, (md, e) -> {
            if (e == null) {
                acked.incrementAndGet();
                Main.emit(Json.obj("type", "ack", "index", index, "topic", md.topic(),
                        "partition", md.partition(), "offset", md.offset(),
                        "timestamp", md.timestamp(), "key", key, "value", value));
            } else {
                failed.incrementAndGet();
                var line = Main.error(e);
                line.put("type", "failed");
                line.put("index", index);
                line.put("value", value);
                Main.emit(line);
            }
        });
        if (sync) {
            try {
                f.get();
            } catch (java.util.concurrent.ExecutionException e) {
                // already printed by the callback
            }
        }
    }
}
