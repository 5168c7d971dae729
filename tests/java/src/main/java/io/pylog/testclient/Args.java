package io.pylog.testclient;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** `--name value` options; `--property k=v` and `--config k=v` may repeat; `--flag` alone is "true". */
final class Args {
    private final Map<String, String> values = new HashMap<>();
    private final Map<String, List<String>> repeated = new HashMap<>();
    final List<String> positional = new ArrayList<>();

    Args(String[] argv, int from) {
        for (int i = from; i < argv.length; i++) {
            String a = argv[i];
            if (!a.startsWith("--")) {
                positional.add(a);
                continue;
            }
            String name = a.substring(2);
            String value = "true";
            int eq = name.indexOf('=');
            if (eq >= 0 && !name.equals("property") && !name.equals("config")) {
                value = name.substring(eq + 1);
                name = name.substring(0, eq);
            } else if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) {
                value = argv[++i];
            }
            values.put(name, value);
            repeated.computeIfAbsent(name, k -> new ArrayList<>()).add(value);
        }
    }

    String get(String name, String fallback) {
        return values.getOrDefault(name, fallback);
    }

    String require(String name) {
        String v = values.get(name);
        if (v == null) {
            throw new UsageException("missing --" + name);
        }
        return v;
    }

    int getInt(String name, int fallback) {
        String v = values.get(name);
        return v == null ? fallback : Integer.parseInt(v);
    }

    long getLong(String name, long fallback) {
        String v = values.get(name);
        return v == null ? fallback : Long.parseLong(v);
    }

    boolean has(String name) {
        return values.containsKey(name);
    }

    /** Every `--name k=v`, in order. */
    Map<String, String> pairs(String name) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String kv : repeated.getOrDefault(name, List.of())) {
            int eq = kv.indexOf('=');
            if (eq <= 0) {
                throw new UsageException("--" + name + " takes key=value, got " + kv);
            }
            out.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        return out;
    }

    static final class UsageException extends RuntimeException {
        UsageException(String message) {
            super(message);
        }
    }
}
