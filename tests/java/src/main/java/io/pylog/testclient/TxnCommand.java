package io.pylog.testclient;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Transactions with the Java client (KafkaProducer with transactional.id):
 *
 * <pre>
 * txn produce   --bootstrap B --topic T --transactional-id ID --commit N --abort M [--per-txn K]
 *               transactions of K records each (values c-I-J committed, a-I-J aborted), the
 *               aborted ones interleaved among the committed ones
 * txn transform --bootstrap B --input T1 --output T2 --group G --transactional-id ID --count N
 *               a consume-transform-produce loop: reads T1 read_committed in group G, writes each
 *               value + "-out" to T2 and commits the group's offsets in the same transaction
 *               (sendOffsetsToTransaction), until N records are processed
 * txn fence     --bootstrap B --topic T --transactional-id ID
 *               a second producer with the same transactional.id fences the first, whose open
 *               transaction is aborted; the first's commit gets ProducerFencedException
 * txn hold      --bootstrap B --topic T --transactional-id ID [--count K]
 *               one transaction: K records sent and acknowledged ({"type":"sent"}), then the
 *               commit once a line arrives on stdin ("abort" aborts instead)
 * </pre>
 */
final class TxnCommand {
    private final Args args;

    TxnCommand(Args args) {
        this.args = args;
    }

    int run() throws Exception {
        if (args.positional.isEmpty()) {
            throw new Args.UsageException("txn produce|transform|fence|hold");
        }
        return switch (args.positional.get(0)) {
            case "produce" -> produce();
            case "transform" -> transform();
            case "fence" -> fence();
            case "hold" -> hold();
            default -> throw new Args.UsageException("unknown txn command " + args.positional.get(0));
        };
    }

    private Properties producerProps(String transactionalId) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args.require("bootstrap"));
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.putAll(args.pairs("property"));
        return props;
    }

    private static ProducerRecord<byte[], byte[]> record(String topic, String value) {
        return new ProducerRecord<>(topic, null, value.getBytes(StandardCharsets.UTF_8));
    }

    private int produce() {
        String topic = args.require("topic");
        int commit = args.getInt("commit", 1);
        int abort = args.getInt("abort", 0);
        int perTxn = args.getInt("per-txn", 10);
        int total = commit + abort;
        int committed = 0;
        int aborted = 0;
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(producerProps(args.require("transactional-id")))) {
            producer.initTransactions();
            for (int i = 0; i < total; i++) {
                // Spread the aborted ones evenly among the committed ones.
                boolean doAbort = aborted < abort
                        && (committed >= commit || (long) aborted * total <= (long) i * abort);
                producer.beginTransaction();
                for (int j = 0; j < perTxn; j++) {
                    producer.send(record(topic, (doAbort ? "a-" : "c-") + i + "-" + j));
                }
                if (doAbort) {
                    producer.flush();
                    producer.abortTransaction();
                    aborted++;
                } else {
                    producer.commitTransaction();
                    committed++;
                }
                Main.emit(Json.obj("type", doAbort ? "aborted" : "committed", "txn", i,
                        "records", perTxn));
            }
        }
        Main.emit(Json.obj("type", "done", "committed", committed, "aborted", aborted));
        return 0;
    }

    private int transform() {
        String input = args.require("input");
        String output = args.require("output");
        int count = Integer.parseInt(args.require("count"));
        long deadline = System.currentTimeMillis() + args.getLong("timeout-ms", 60_000);
        Properties cprops = new Properties();
        cprops.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args.require("bootstrap"));
        cprops.put(ConsumerConfig.GROUP_ID_CONFIG, args.require("group"));
        cprops.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cprops.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cprops.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cprops.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cprops.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
                ByteArrayDeserializer.class.getName());
        int processed = 0;
        int transactions = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cprops);
             KafkaProducer<byte[], byte[]> producer =
                     new KafkaProducer<>(producerProps(args.require("transactional-id")))) {
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            while (processed < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    producer.send(record(output, Json.text(r.value()) + "-out"));
                    offsets.put(new TopicPartition(r.topic(), r.partition()),
                            new OffsetAndMetadata(r.offset() + 1));
                    processed++;
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
                transactions++;
                Main.emit(Json.obj("type", "committed", "records", records.count(),
                        "processed", processed));
            }
        }
        Main.emit(Json.obj("type", "done", "processed", processed, "transactions", transactions));
        return processed >= count ? 0 : 1;
    }

    private int fence() {
        String topic = args.require("topic");
        String id = args.require("transactional-id");
        String fencedBy = null;
        try (KafkaProducer<byte[], byte[]> first = new KafkaProducer<>(producerProps(id))) {
            first.initTransactions();
            first.beginTransaction();
            first.send(record(topic, "first-open"));
            first.flush();
            Main.emit(Json.obj("type", "open", "producer", "first"));
            try (KafkaProducer<byte[], byte[]> second = new KafkaProducer<>(producerProps(id))) {
                // Aborts the first's open transaction and bumps the epoch.
                second.initTransactions();
                Main.emit(Json.obj("type", "initialized", "producer", "second"));
                try {
                    // Its records were acknowledged before the fence; the commit
                    // (EndTxn at the old epoch) is what the coordinator refuses.
                    first.commitTransaction();
                    Main.emit(Json.obj("type", "not-fenced", "producer", "first"));
                } catch (ProducerFencedException e) {
                    fencedBy = e.getClass().getSimpleName();
                    Main.emit(Json.obj("type", "fenced", "producer", "first",
                            "error", fencedBy));
                } catch (Exception e) {
                    var line = Main.error(e);
                    line.put("type", "other-error");
                    Main.emit(line);
                }
                second.beginTransaction();
                second.send(record(topic, "second-committed"));
                second.commitTransaction();
                Main.emit(Json.obj("type", "committed", "producer", "second"));
            }
        } catch (ProducerFencedException e) {
            // close() of a fenced producer may throw again: the outcome is already printed
        }
        Main.emit(Json.obj("type", "done", "fenced", fencedBy != null));
        return fencedBy != null ? 0 : 1;
    }

    private int hold() throws Exception {
        String topic = args.require("topic");
        int count = args.getInt("count", 10);
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(producerProps(args.require("transactional-id")))) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int j = 0; j < count; j++) {
                producer.send(record(topic, "held-" + j));
            }
            producer.flush();
            Main.emit(Json.obj("type", "sent", "records", count));
            BufferedReader in = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line = in.readLine();
            boolean abort = line != null && line.trim().equals("abort");
            long t0 = System.currentTimeMillis();
            if (abort) {
                producer.abortTransaction();
            } else {
                producer.commitTransaction();
            }
            Main.emit(Json.obj("type", abort ? "aborted" : "committed",
                    "ms", System.currentTimeMillis() - t0));
        }
        Main.emit(Json.obj("type", "done"));
        return 0;
    }
}
