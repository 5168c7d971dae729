package io.pylog.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The options of a {@code format("pylog-jvm")} read, parsed and checked when the
 * DataFrame is loaded: the names, defaults and refusals of Spark's Kafka source as
 * {@code format("pylog")} (python/pylog/spark/_options.py) takes them for segment
 * files, minus what this reader does not do, which it refuses by name.
 */
final class ReadOptions implements Serializable {
    private static final long serialVersionUID = 1L;

    static final long EARLIEST = -2, LATEST = -1;

    /** Kafka consumer settings Spark's Kafka source refuses, with why. */
    private static final Map<String, String> REFUSED = new LinkedHashMap<>();

    static {
        REFUSED.put("kafka.auto.offset.reset",
            "set the source option 'startingOffsets' to 'earliest' or 'latest'");
        REFUSED.put("kafka.key.deserializer", "keys are always read as bytes; use DataFrame operations");
        REFUSED.put("kafka.value.deserializer",
            "values are always read as bytes; use DataFrame operations");
        REFUSED.put("kafka.enable.auto.commit", "pylog.spark commits no offsets; Spark tracks them");
        REFUSED.put("kafka.interceptor.classes", "consumer interceptors are not supported");
        REFUSED.put("kafka.group.id", "pylog.spark reads without a consumer group (no broker-side state)");
        REFUSED.put("groupidprefix", "pylog.spark reads without a consumer group (no broker-side state)");
    }

    /** Options format("pylog") takes that this reader does not implement. */
    private static final String[] NOT_HERE = {
        "startingTimestamp", "endingTimestamp",
        "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
        "startingOffsetsByTimestampStrategy", "minOffsetsPerTrigger", "maxTriggerDelay",
    };

    final List<String> paths = new ArrayList<>();
    List<String> subscribe;
    String pattern;
    /** topic -> partitions, in the order given. */
    LinkedHashMap<String, List<Integer>> assign;
    /** "earliest", "latest", or per-partition offsets (-2 earliest, -1 latest); null: the query's default. */
    String starting;
    Map<TopicPartition, Long> startingSpec;
    String ending = "latest";
    Map<TopicPartition, Long> endingSpec;
    boolean includeHeaders;
    /** The broker's ListOffsets pins the ends (null: the files' high watermark checkpoint does). */
    String bootstrap;
    /** Kafka's isolation level: read_committed ends at the last stable offset and drops aborted transactions. */
    boolean readCommitted;
    /** The kafka.* options without the prefix, for the admin client (keys lower-cased, as Kafka spells them). */
    final Map<String, String> kafkaParams = new LinkedHashMap<>();
    boolean failOnDataLoss = true;
    boolean upToLogEnd;
    Integer minPartitions;
    Integer maxRecordsPerPartition;
    /** Streaming: records per micro-batch at most, spread over the partitions by backlog. */
    Integer maxOffsetsPerTrigger;
    boolean endingGiven;

    static final class OptionError extends IllegalArgumentException {
        private static final long serialVersionUID = 1L;

        OptionError(String message) {
            super(message);
        }
    }

    /** Parse {@code raw} (keys in any case). */
    static ReadOptions parse(Map<String, String> raw) {
        Map<String, String> opts = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : raw.entrySet()) {
            opts.put(e.getKey().toLowerCase(Locale.ROOT), e.getValue());
        }
        for (Map.Entry<String, String> e : REFUSED.entrySet()) {
            if (opts.containsKey(e.getKey())) {
                throw new OptionError("option '" + e.getKey() + "' is not supported: " + e.getValue());
            }
        }
        for (String name : NOT_HERE) {
            if (opts.containsKey(name.toLowerCase(Locale.ROOT))) {
                throw new OptionError("option '" + name + "' is not supported by format('pylog-jvm'); "
                    + "use format('pylog') for it");
            }
        }
        ReadOptions o = new ReadOptions();
        for (String p : opts.getOrDefault("path", "").split(",")) {
            if (!p.trim().isEmpty()) {
                o.paths.add(p.trim());
            }
        }
        for (Map.Entry<String, String> kv : opts.entrySet()) {
            if (kv.getKey().startsWith("kafka.")) {
                o.kafkaParams.put(kv.getKey().substring("kafka.".length()), kv.getValue());
            }
        }
        String servers = opts.get("kafka.bootstrap.servers");
        if (servers != null && !servers.trim().isEmpty()) {
            o.bootstrap = servers.trim();
        }
        String iso = opts.getOrDefault("kafka.isolation.level", "read_uncommitted").trim().toLowerCase(Locale.ROOT);
        if (!iso.equals("read_uncommitted") && !iso.equals("read_committed")) {
            throw new OptionError("option 'kafka.isolation.level' must be read_uncommitted or read_committed, not '"
                + opts.get("kafka.isolation.level") + "'");
        }
        o.readCommitted = iso.equals("read_committed");
        if (o.readCommitted && o.bootstrap == null) {
            throw new OptionError("option 'kafka.isolation.level' read_committed needs 'kafka.bootstrap.servers': "
                + "the last stable offset is the broker's (the segment files do not record it)");
        }
        if (o.paths.isEmpty()) {
            throw new OptionError("option 'path' (log directories the executors can read) must be given "
                + "to format('pylog-jvm')");
        }
        List<String> chosen = new ArrayList<>();
        for (String k : new String[] {"subscribe", "subscribepattern", "assign"}) {
            if (opts.containsKey(k)) {
                chosen.add(k);
            }
        }
        if (chosen.size() != 1) {
            String names = "subscribe, subscribePattern, assign";
            if (chosen.isEmpty()) {
                throw new OptionError("one of the options " + names + " must be specified");
            }
            throw new OptionError("only one of the options " + names + " can be specified, got " + chosen);
        }
        if (opts.containsKey("subscribe")) {
            o.subscribe = new ArrayList<>();
            for (String t : opts.get("subscribe").split(",")) {
                if (!t.trim().isEmpty()) {
                    o.subscribe.add(t.trim());
                }
            }
            if (o.subscribe.isEmpty()) {
                throw new OptionError("no topics to subscribe to in '" + opts.get("subscribe") + "'");
            }
        } else if (opts.containsKey("subscribepattern")) {
            String p = opts.get("subscribepattern");
            if (p.trim().isEmpty()) {
                throw new OptionError("pattern to subscribe is empty");
            }
            try {
                Pattern.compile(p);
            } catch (PatternSyntaxException e) {
                throw new OptionError("bad subscribePattern: " + e.getMessage());
            }
            o.pattern = p;
        } else {
            o.assign = parseAssign(opts.get("assign"));
        }
        String s = opts.get("startingoffsets");
        if (s != null) {
            o.starting = offsetsKind("startingOffsets", s);
            if (o.starting == null) {
                o.startingSpec = offsetsSpec("startingOffsets", s);
            }
        }
        String e = opts.get("endingoffsets");
        if (e != null) {
            o.ending = offsetsKind("endingOffsets", e);
            if (o.ending == null) {
                o.endingSpec = offsetsSpec("endingOffsets", e);
            }
        }
        o.includeHeaders = bool(opts, "includeheaders", false);
        o.failOnDataLoss = bool(opts, "failondataloss", true);
        o.upToLogEnd = bool(opts, "uptologend", false) || bool(opts, "readuncommitted", false);
        if (o.upToLogEnd && o.bootstrap != null) {
            throw new OptionError("option 'upToLogEnd' reads the files past the high watermark; with "
                + "'kafka.bootstrap.servers' the broker pins the end offsets: give one or the other");
        }
        o.minPartitions = positive(opts, "minpartitions");
        o.maxRecordsPerPartition = positive(opts, "maxrecordsperpartition");
        o.endingGiven = e != null;
        o.maxOffsetsPerTrigger = positive(opts, "maxoffsetspertrigger");
        return o;
    }

    /** What a batch query refuses, as Spark's Kafka source refuses it; checked when the scan is planned. */
    void checkBatch() {
        if ("latest".equals(starting)) {
            throw new OptionError("starting offset can't be latest for batch queries on Kafka");
        }
        if ("earliest".equals(ending)) {
            throw new OptionError("ending offset can't be earliest for batch queries on Kafka");
        }
        if (startingSpec != null && startingSpec.containsValue(LATEST)) {
            throw new OptionError("startingOffsets for " + having(startingSpec, LATEST)
                + " can't be latest for batch queries");
        }
        if (endingSpec != null && endingSpec.containsValue(EARLIEST)) {
            throw new OptionError("endingOffsets for " + having(endingSpec, EARLIEST)
                + " can't be earliest for batch queries");
        }
    }

    /** What a streaming query refuses; checked when its stream is made. */
    void checkStream() {
        if (endingGiven) {
            throw new OptionError("ending offset not valid in streaming queries");
        }
    }

    private static List<TopicPartition> having(Map<TopicPartition, Long> spec, long v) {
        List<TopicPartition> out = new ArrayList<>();
        for (Map.Entry<TopicPartition, Long> e : spec.entrySet()) {
            if (e.getValue() == v) {
                out.add(e.getKey());
            }
        }
        return out;
    }

    private static boolean bool(Map<String, String> opts, String key, boolean dflt) {
        String v = opts.get(key);
        if (v == null) {
            return dflt;
        }
        String s = v.trim().toLowerCase(Locale.ROOT);
        if (!s.equals("true") && !s.equals("false")) {
            throw new OptionError("option '" + key + "' must be 'true' or 'false', not '" + v + "'");
        }
        return s.equals("true");
    }

    private static Integer positive(Map<String, String> opts, String key) {
        String v = opts.get(key);
        if (v == null) {
            return null;
        }
        int n;
        try {
            n = Integer.parseInt(v.trim());
        } catch (NumberFormatException e) {
            throw new OptionError("option '" + key + "' must be a positive integer, not '" + v + "'");
        }
        if (n <= 0) {
            throw new OptionError("option '" + key + "' must be a positive integer, not '" + v + "'");
        }
        return n;
    }

    private static JsonNode json(String key, String value) {
        try {
            return new ObjectMapper().readTree(value);
        } catch (Exception e) {
            throw new OptionError("option '" + key + "' is not valid JSON (" + e.getMessage().split("\n")[0]
                + "): '" + value + "'");
        }
    }

    private static LinkedHashMap<String, List<Integer>> parseAssign(String value) {
        JsonNode spec = json("assign", value);
        String shape = "option 'assign' must be JSON like {\"topicA\":[0,1]}, not '" + value + "'";
        if (!spec.isObject()) {
            throw new OptionError(shape);
        }
        LinkedHashMap<String, List<Integer>> out = new LinkedHashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = spec.fields(); it.hasNext();) {
            Map.Entry<String, JsonNode> e = it.next();
            if (!e.getValue().isArray()) {
                throw new OptionError(shape);
            }
            List<Integer> parts = new ArrayList<>();
            for (JsonNode p : e.getValue()) {
                if (!p.isInt()) {
                    throw new OptionError(shape);
                }
                parts.add(p.intValue());
            }
            out.put(e.getKey(), parts);
        }
        return out;
    }

    /** "earliest" or "latest", or null for a JSON spec. */
    private static String offsetsKind(String key, String value) {
        String s = value.trim().toLowerCase(Locale.ROOT);
        return s.equals("earliest") || s.equals("latest") ? s : null;
    }

    private static Map<TopicPartition, Long> offsetsSpec(String key, String value) {
        JsonNode spec = json(key, value.trim());
        String shape = "option '" + key + "' must be 'earliest', 'latest' or JSON like "
            + "{\"topic\":{\"0\":23,\"1\":-2}}, not '" + value + "'";
        if (!spec.isObject()) {
            throw new OptionError(shape);
        }
        Map<TopicPartition, Long> out = new LinkedHashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = spec.fields(); it.hasNext();) {
            Map.Entry<String, JsonNode> t = it.next();
            if (!t.getValue().isObject()) {
                throw new OptionError(shape);
            }
            for (Iterator<Map.Entry<String, JsonNode>> ps = t.getValue().fields(); ps.hasNext();) {
                Map.Entry<String, JsonNode> p = ps.next();
                JsonNode off = p.getValue();
                int partition;
                try {
                    partition = Integer.parseInt(p.getKey().trim());
                } catch (NumberFormatException e) {
                    throw new OptionError("option '" + key + "': bad partition '" + p.getKey() + "' of "
                        + t.getKey());
                }
                if (!off.isIntegralNumber() || off.longValue() < -2) {
                    throw new OptionError("option '" + key + "': bad offset " + off + " for " + t.getKey()
                        + "-" + p.getKey());
                }
                out.put(new TopicPartition(t.getKey(), partition), off.longValue());
            }
        }
        return out;
    }
}
