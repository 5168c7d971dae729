package io.pylog.streams;

import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;

/**
 * A word count as a Kafka Streams application, run by pylog's integration tests
 * (tests/integration/test_kafka_streams.py) against a pylog broker.
 *
 * <p>Lines from the input topic are split into lower-case words, re-keyed by word
 * (so Streams writes a repartition topic), counted in a persistent key-value store
 * named "counts" (backed by a compacted changelog topic), and every updated count
 * goes to the output topic as word -> count (String, Long). A five-minute windowed
 * count of the same words is kept in the store "windowed-counts" (whose changelog is
 * compacted and deleted). Both internal topics are
 * created by Streams itself through the admin client.
 *
 * <p>Usage: {@code WordCount <bootstrap> <application.id> <input> <output> <state.dir> [key=value ...]},
 * the extra pairs being Streams configs. It prints one JSON object a line on stdout
 * (each state change, and "closed" at the end) and runs until its stdin closes,
 * then closes Streams cleanly, which commits what it processed, and leaves the group.
 */
public final class WordCount {
    private WordCount() {}

    static Topology topology(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        KGroupedStream<String, String> words = builder
                .stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .map((key, word) -> KeyValue.pair(word, word))
                .groupByKey(Grouped.with("words", Serdes.String(), Serdes.String()));
        words.count(Materialized.as("counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        // A windowed count of the same words, kept only in its store: its changelog
        // is the kind Streams creates with cleanup.policy=compact,delete and a retention.
        words.windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMinutes(5)))
                .count(Materialized.as("windowed-counts"));
        return builder.build();
    }

    private static void emit(String json) {
        synchronized (System.out) {
            System.out.println(json);
            System.out.flush();
        }
    }

    public static void main(String[] args) throws IOException, InterruptedException {
        if (args.length < 5) {
            System.err.println("usage: WordCount <bootstrap> <application.id> <input> <output> <state.dir> [key=value ...]");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        for (int i = 5; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }

        Topology topology = topology(args[2], args[3]);
        System.err.println(topology.describe());
        KafkaStreams streams = new KafkaStreams(topology, props);
        streams.setStateListener((now, before) ->
                emit("{\"type\":\"state\",\"new\":\"" + now + "\",\"old\":\"" + before + "\"}"));
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            String msg = String.valueOf(e).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ");
            emit("{\"type\":\"error\",\"message\":\"" + msg + "\"}");
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();

        // Run until the test closes our stdin (or the JVM is signalled).
        InputStream in = System.in;
        byte[] buf = new byte[256];
        while (in.read(buf) >= 0) {
            // nothing is read from stdin but its end
        }
        // Leave the group on the way out (Streams stays in it by default), so the
        // next instance's rebalance need not wait out this member's session.
        boolean closed = streams.close(CloseOptions
                .groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                .withTimeout(Duration.ofSeconds(60)));
        emit("{\"type\":\"closed\",\"clean\":" + closed + "}");
        System.exit(closed ? 0 : 1);
    }
}
