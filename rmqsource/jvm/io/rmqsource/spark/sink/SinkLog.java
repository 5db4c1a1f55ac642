package io.rmqsource.spark.sink;

import io.rmqsource.errors.FormatError;
import io.rmqsource.errors.Repr;
import io.rmqsource.format.FastJson;
import io.rmqsource.format.JsonText;
import io.rmqsource.store.ConfigFiles;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@code {root}/config/rmqsourceSinkLog.json}, the document sink/log.py's SinkLog reads and writes; read and
 * written only while holding the store lock, replaced by the crash-safe string2file protocol.
 *
 * <p>{@code {"queries": {queryId: {"committedBatch": N, "tasks": {"batch:partition": {"start": offset,
 * "done": bool, "rows": n}}}}, "writes": {"write:<id>" | "job:<uuid>": {"startedMs": ms, "tasks":
 * {"partition": {"start": offset, "below": n, "done": bool, "rows": n}}}}}}
 */
final class SinkLog {
    static final String NAME = "rmqsourceSinkLog.json";
    final Path path;

    SinkLog(String root) {
        this.path = Path.of(root, "config", NAME);
    }

    Map<String, Object> load() {
        Map<String, Object> doc = ConfigFiles.loadWithBak(path, SinkLog::parse);
        if (doc != null) return doc;
        Map<String, Object> empty = new LinkedHashMap<>();
        empty.put("queries", new LinkedHashMap<String, Object>());
        return empty;
    }

    void save(Map<String, Object> doc) {
        byte[] text = PythonJson.dumps(doc).getBytes(StandardCharsets.UTF_8);
        ConfigFiles.string2File(path, text, old -> {
            try {
                parse(old, path.toString());
                return true;
            } catch (FormatError e) {
                return false;
            }
        });
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> map(Map<String, Object> parent, String key) {
        return (Map<String, Object>) parent.computeIfAbsent(key, k -> new LinkedHashMap<String, Object>());
    }

    static long longOf(Map<String, Object> m, String key, long dflt) {
        Object v = m.get(key);
        return v instanceof Number ? ((Number) v).longValue() : dflt;
    }

    /** parse_sink_log: the document, shape-checked; FormatError naming the file for anything else. */
    @SuppressWarnings("unchecked")
    static Map<String, Object> parse(byte[] data, String file) {
        Map<Object, Object> raw = FastJson.parse(data, file);
        Object queries = raw.getOrDefault("queries", Map.of());
        Object writes = raw.getOrDefault("writes", Map.of());
        if (!(queries instanceof Map) || !(writes instanceof Map)) bad(file, "expected {\"queries\": {...}, \"writes\": {...}}");
        for (Map.Entry<Object, Object> e : ((Map<Object, Object>) writes).entrySet()) {
            String wid = Repr.of(cut(String.valueOf(e.getKey())));
            Object w = e.getValue();
            if (!(w instanceof Map) || !(((Map<?, ?>) w).get("tasks") instanceof Map)
                    || !isInt(((Map<?, ?>) w).containsKey("startedMs") ? ((Map<?, ?>) w).get("startedMs") : 0L)) {
                bad(file, "write " + wid + ": expected {\"tasks\": {...}}");
            }
            for (Map.Entry<?, ?> t : ((Map<?, ?>) ((Map<?, ?>) w).get("tasks")).entrySet()) {
                String key = String.valueOf(t.getKey());
                if (!asciiDigits(key)) bad(file, "write " + wid + ": task key " + Repr.of(cut(key)) + " is not a partition id");
                Object task = t.getValue();
                if (!(task instanceof Map) || !isInt(((Map<?, ?>) task).get("start")) || !isInt(((Map<?, ?>) task).get("below"))
                        || !isInt(((Map<?, ?>) task).get("rows")) || !(((Map<?, ?>) task).get("done") instanceof Boolean)) {
                    bad(file, "write " + wid + ": task " + Repr.of(cut(key)) + " needs int start, below, rows and a bool done");
                }
            }
        }
        for (Map.Entry<Object, Object> e : ((Map<Object, Object>) queries).entrySet()) {
            String qid = Repr.of(cut(String.valueOf(e.getKey())));
            Object q = e.getValue();
            Object tasks = q instanceof Map ? ((Map<?, ?>) q).get("tasks") : null;
            if (tasks == null) tasks = Map.of();
            if (!(q instanceof Map) || !isInt(((Map<?, ?>) q).containsKey("committedBatch") ? ((Map<?, ?>) q).get("committedBatch") : -1L)
                    || !(tasks instanceof Map)) {
                bad(file, "query " + qid + ": expected {\"committedBatch\": int, \"tasks\": {...}}");
            }
            for (Map.Entry<?, ?> t : ((Map<?, ?>) tasks).entrySet()) {
                String key = String.valueOf(t.getKey());
                int colon = key.indexOf(':');
                String batch = colon < 0 ? "" : key.substring(0, colon);
                String part = colon < 0 ? "" : key.substring(colon + 1);
                if (colon < 0 || !asciiDigits(batch.startsWith("-") ? batch.replaceFirst("^-+", "") : batch)
                        || !asciiDigits(part)) {
                    bad(file, "query " + qid + ": task key " + Repr.of(cut(key)) + " is not batch:partition");
                }
                Object task = t.getValue();
                if (!(task instanceof Map) || !isInt(((Map<?, ?>) task).get("start"))
                        || !(((Map<?, ?>) task).get("done") instanceof Boolean)) {
                    bad(file, "query " + qid + ": task " + Repr.of(cut(key)) + " needs an int start and a bool done");
                }
            }
        }
        return (Map<String, Object>) (Map<?, ?>) raw;
    }

    private static String cut(String s) {
        return s.length() > 80 ? s.substring(0, 80) : s;
    }

    private static boolean isInt(Object v) {
        return v instanceof Long || v instanceof Integer || v instanceof java.math.BigInteger;
    }

    private static boolean asciiDigits(String s) {
        if (s.isEmpty()) return false;
        for (int i = 0; i < s.length(); i++) if (s.charAt(i) < '0' || s.charAt(i) > '9') return false;
        return true;
    }

    private static void bad(String file, String what) {
        throw new FormatError("sink log: " + what, file, 0);
    }

    /** Python's json.dumps(doc, indent=1, sort_keys=True), so both sinks write the same bytes. */
    static final class PythonJson {
        private PythonJson() {
        }

        static String dumps(Object value) {
            StringBuilder sb = new StringBuilder();
            emit(sb, value, 0);
            return sb.toString();
        }

        private static void emit(StringBuilder sb, Object v, int level) {
            if (v == null) {
                sb.append("null");
            } else if (v instanceof Boolean || v instanceof Long || v instanceof Integer || v instanceof java.math.BigInteger) {
                sb.append(v);
            } else if (v instanceof Number) {
                sb.append(((Number) v).doubleValue());
            } else if (v instanceof Map) {
                Map<?, ?> m = (Map<?, ?>) v;
                if (m.isEmpty()) {
                    sb.append("{}");
                    return;
                }
                List<String> keys = new ArrayList<>();
                for (Object k : m.keySet()) keys.add(String.valueOf(k));
                keys.sort(PythonJson::codePointOrder);
                sb.append("{\n");
                for (int i = 0; i < keys.size(); i++) {
                    indent(sb, level + 1);
                    JsonText.quote(sb, keys.get(i));
                    sb.append(": ");
                    emit(sb, m.get(keys.get(i)), level + 1);
                    sb.append(i + 1 < keys.size() ? ",\n" : "\n");
                }
                indent(sb, level);
                sb.append('}');
            } else if (v instanceof List) {
                List<?> l = (List<?>) v;
                if (l.isEmpty()) {
                    sb.append("[]");
                    return;
                }
                sb.append("[\n");
                for (int i = 0; i < l.size(); i++) {
                    indent(sb, level + 1);
                    emit(sb, l.get(i), level + 1);
                    sb.append(i + 1 < l.size() ? ",\n" : "\n");
                }
                indent(sb, level);
                sb.append(']');
            } else {
                JsonText.quote(sb, v.toString());
            }
        }

        private static int codePointOrder(String a, String b) {
            int i = 0;
            int j = 0;
            while (i < a.length() && j < b.length()) {
                int ca = a.codePointAt(i);
                int cb = b.codePointAt(j);
                if (ca != cb) return Integer.compare(ca, cb);
                i += Character.charCount(ca);
                j += Character.charCount(cb);
            }
            return Integer.compare(a.length() - i, b.length() - j);
        }

        private static void indent(StringBuilder sb, int level) {
            for (int i = 0; i < level; i++) sb.append(' ');
        }
    }
}
