package io.pylog.spark;

import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.common.IsolationLevel;

/**
 * The end offsets a read is bounded by, asked of the partitions' leaders on the
 * driver with Kafka's own admin client ({@code Admin.listOffsets} with
 * {@code OffsetSpec.latest()}): the high watermark under read_uncommitted, the
 * last stable offset under read_committed (ListOffsets with isolation level 1,
 * as Kafka's consumer asks for its end offsets; KIP-98). The client finds each
 * partition's leader and retries on leadership changes itself, for up to its
 * {@code default.api.timeout.ms} (60 s, Spark's Kafka source's default too).
 *
 * <p>The {@code kafka.*} options, without the prefix, are the client's configs, as
 * Spark's Kafka source passes them to its consumer: {@code bootstrap.servers},
 * {@code security.protocol}, {@code sasl.*}, {@code ssl.*} and the rest the admin
 * client knows; consumer-only ones (isolation.level, group.id) are not its.
 *
 * <p>The client is relocated inside pylog-spark.jar (pom.xml), so a JAAS line naming
 * Kafka's login modules ({@code org.apache.kafka.common.security.plain.PlainLoginModule})
 * is rewritten to the relocated names before the client reads it.
 */
final class ListOffsets implements AutoCloseable {
    /** The package of Kafka's classes as this jar holds them (relocated, or not when run unshaded). */
    private static final String KAFKA_ROOT;
    /** Kafka's own package, spelled so that relocation does not rewrite it. */
    private static final String KAFKA = String.join(".", "org", "apache", "kafka");

    static {
        String admin = Admin.class.getPackageName();
        KAFKA_ROOT = admin.substring(0, admin.length() - ".clients.admin".length());
    }

    /** Kafka's class names in a config value, made the relocated ones. */
    static String relocated(String value) {
        if (KAFKA_ROOT.equals(KAFKA) || value == null) {
            return value;
        }
        Pattern p = Pattern.compile("(?<![\\w.$])" + Pattern.quote(KAFKA + "."));
        return p.matcher(value).replaceAll(Matcher.quoteReplacement(KAFKA_ROOT + "."));
    }

    /** The admin client's configs from a read's {@code kafka.*} options (keys without the prefix). */
    static Properties adminConfig(Map<String, String> kafkaParams) {
        Properties props = new Properties();
        for (Map.Entry<String, String> e : kafkaParams.entrySet()) {
            String key = e.getKey();
            if (!AdminClientConfig.configNames().contains(key)) {
                continue;
            }
            boolean names = key.equals("sasl.jaas.config") || key.endsWith(".class") || key.endsWith(".classes");
            props.put(key, names ? relocated(e.getValue()) : e.getValue());
        }
        props.putIfAbsent(AdminClientConfig.CLIENT_ID_CONFIG, "pylog-jvm");
        return props;
    }

    private final Map<String, String> kafkaParams;
    private Admin admin;

    /** A client for the broker the {@code kafka.*} options name (keys without the prefix); made on first use. */
    ListOffsets(Map<String, String> kafkaParams) {
        this.kafkaParams = kafkaParams;
    }

    /** The latest offset of each partition: high watermark or, {@code readCommitted}, last stable offset. */
    Map<TopicPartition, Long> latest(Collection<TopicPartition> tps, boolean readCommitted) {
        Map<org.apache.kafka.common.TopicPartition, OffsetSpec> request = new LinkedHashMap<>();
        for (TopicPartition tp : tps) {
            request.put(new org.apache.kafka.common.TopicPartition(tp.topic(), tp.partition()), OffsetSpec.latest());
        }
        Map<TopicPartition, Long> out = new HashMap<>();
        if (request.isEmpty()) {
            return out;
        }
        IsolationLevel level = readCommitted ? IsolationLevel.READ_COMMITTED : IsolationLevel.READ_UNCOMMITTED;
        // JAAS loads the login module through the thread's context class loader: make
        // it the one holding this jar (Spark's, for a jar added with ADD JAR)
        Thread thread = Thread.currentThread();
        ClassLoader before = thread.getContextClassLoader();
        thread.setContextClassLoader(ListOffsets.class.getClassLoader());
        try {
            if (admin == null) {
                admin = Admin.create(adminConfig(kafkaParams));
            }
            ListOffsetsResult result = admin.listOffsets(request, new ListOffsetsOptions(level));
            for (Map.Entry<org.apache.kafka.common.TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e
                : result.all().get().entrySet()) {
                out.put(new TopicPartition(e.getKey().topic(), e.getKey().partition()), e.getValue().offset());
            }
        } catch (ExecutionException e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            throw new IllegalStateException("format('pylog-jvm'): ListOffsets (" + level.toString()
                .toLowerCase(Locale.ROOT) + ") from " + kafkaParams.get("bootstrap.servers") + " failed: "
                + cause.getClass().getSimpleName() + ": " + cause.getMessage(), cause);
        } catch (InterruptedException e) {
            thread.interrupt();
            throw new IllegalStateException("format('pylog-jvm'): interrupted while asking "
                + kafkaParams.get("bootstrap.servers") + " for offsets", e);
        } finally {
            thread.setContextClassLoader(before);
        }
        return out;
    }

    @Override
    public void close() {
        if (admin != null) {
            admin.close(Duration.ofSeconds(10));
            admin = null;
        }
    }
}
