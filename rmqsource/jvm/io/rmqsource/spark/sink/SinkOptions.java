package io.rmqsource.spark.sink;

import io.rmqsource.spark.Contract;
import io.rmqsource.spark.RmqOptions;
import io.rmqsource.spark.stream.RmqStreamOptions;
import io.rmqsource.errors.FormatError;
import io.rmqsource.errors.OptionError;
import io.rmqsource.errors.Repr;
import io.rmqsource.format.FastJson;
import io.rmqsource.store.ConfigFiles;
import io.rmqsource.store.StoreConfig;
import java.io.File;
import java.io.Serializable;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The sink's options (sink/options.py parse_sink_options: same names from contract.json, same error texts).
 * Plain values only: Spark ships this to every task.
 */
public final class SinkOptions implements Serializable {
    private static final long serialVersionUID = 1L;
    static final long DEFAULT_LOCK_TIMEOUT_MS = 120_000;
    static final int DEFAULT_QUEUE_NUMS = 4;
    static final int MAX_WRITE_ID_CHARS = 200;
    static final String SQL_TABLE_HINT = "; a SQL table (CREATE TABLE ... USING rmq) passes its path and options "
            + "only with the rmq jar on spark.jars (`rmq jar`)";
    private static final Pattern SCHEME = Pattern.compile("^([A-Za-z][A-Za-z0-9+.-]+):");

    public final String root;
    public final StoreConfig config;
    /** null: topics.json's writeQueueNums, else 4. */
    public final Integer queueNums;
    public final HashMap<String, Integer> topicQueueNums;
    public final long lockTimeoutMs;
    /** Batch sink: names the write across jobs (re-runs append what is missing). */
    public final String writeId;
    /** Store fields as given, properties in their order, no stamps (golden replays). */
    public final boolean preserveStoreFields;

    private SinkOptions(String root, StoreConfig config, Integer queueNums, HashMap<String, Integer> topicQueueNums,
                        long lockTimeoutMs, String writeId, boolean preserveStoreFields) {
        this.root = root;
        this.config = config;
        this.queueNums = queueNums;
        this.topicQueueNums = topicQueueNums;
        this.lockTimeoutMs = lockTimeoutMs;
        this.writeId = writeId;
        this.preserveStoreFields = preserveStoreFields;
    }

    public int queuesOf(String topic) {
        if (queueNums != null) return queueNums;
        return topicQueueNums.getOrDefault(topic, DEFAULT_QUEUE_NUMS);
    }

    /** Python's {@code f"{seconds:g}"} of the lock timeout, for error texts. */
    String lockTimeoutText() {
        if (lockTimeoutMs % 1000 == 0) return Long.toString(lockTimeoutMs / 1000);
        return Double.toString(lockTimeoutMs / 1000.0).replaceAll("0+$", "");
    }

    public static SinkOptions parse(Map<String, String> options) {
        Map<String, String> opts = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : options.entrySet()) {
            opts.put(e.getKey().toLowerCase(Locale.ROOT), e.getValue() == null ? "" : e.getValue());
        }
        Map<String, String> overrides = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : opts.entrySet()) {
            String key = e.getKey();
            if (Contract.SINK_OPTIONS.containsKey(key) || Contract.SPARK_SINK_OPTIONS.containsKey(key)) continue;
            if (Contract.STORE_KEYS.containsKey(key)) {
                overrides.put(Contract.STORE_KEYS.get(key), e.getValue());
                continue;
            }
            List<String> names = new ArrayList<>(Contract.SINK_OPTIONS.values());
            names.sort(null);
            throw new OptionError("unknown option " + Repr.of(key) + " for the rmq sink; options are: "
                    + String.join(", ", names) + ", plus RocketMQ MessageStoreConfig keys");
        }
        String root = opts.getOrDefault("path", "").strip();
        if (root.isEmpty()) {
            throw new OptionError("no store path: use df.write.format('rmq').mode('append').save('/path/to/store')"
                    + SQL_TABLE_HINT);
        }
        if (root.contains(",")) throw new OptionError("the rmq sink writes one store; got " + Repr.of(root));
        root = localStorePath(root);
        String configFile = opts.getOrDefault("config", "");
        StoreConfig config;
        if (!configFile.isEmpty()) {
            if (!new File(configFile).isFile()) throw new OptionError("option config: " + configFile + " is not a file");
            config = StoreConfig.fromPropertiesFile(configFile, overrides.isEmpty() ? null : overrides);
        } else {
            config = StoreConfig.defaults().withOverrides(overrides);
        }
        config = StoreFileSizes.fit(config, root, StoreFileSizes.givenKeys(configFile, overrides.keySet()));
        Integer queueNums = null;
        String qn = opts.getOrDefault("queuenums", "");
        if (!qn.isEmpty()) {
            try {
                queueNums = Integer.parseInt(qn.strip());
            } catch (NumberFormatException e) {
                throw new OptionError("option queueNums must be a positive integer, got " + Repr.of(qn));
            }
            if (queueNums < 1 || queueNums > 65535) {
                throw new OptionError("option queueNums must be in [1, 65535], got " + queueNums);
            }
        }
        long lockTimeoutMs = DEFAULT_LOCK_TIMEOUT_MS;
        String lt = opts.getOrDefault("locktimeout", "");
        if (!lt.isEmpty()) lockTimeoutMs = RmqStreamOptions.parseDurationMs("lockTimeout", lt);
        File rootFile = new File(root);
        if (rootFile.exists() && !rootFile.isDirectory()) {
            throw new OptionError("store path " + root + " exists and is not a directory");
        }
        String writeId = opts.getOrDefault("writeid", "");
        if (writeId.isEmpty()) writeId = null;
        if (writeId != null && (writeId.length() > MAX_WRITE_ID_CHARS || !printable(writeId))) {
            throw new OptionError("option writeId must be at most " + MAX_WRITE_ID_CHARS
                    + " printable characters, got " + Repr.of(writeId.substring(0, Math.min(80, writeId.length()))));
        }
        boolean preserve = false;
        String pf = opts.getOrDefault("preservestorefields", "").strip().toLowerCase(Locale.ROOT);
        if (!pf.isEmpty()) {
            if (!pf.equals("true") && !pf.equals("false")) {
                throw new OptionError("option preserveStoreFields must be true or false, got "
                        + Repr.of(opts.get("preservestorefields")));
            }
            preserve = pf.equals("true");
        }
        return new SinkOptions(root, config, queueNums, topicQueueNums(root), lockTimeoutMs, writeId, preserve);
    }

    /** Python's str.isprintable(), close enough for option values: no control or separator characters. */
    private static boolean printable(String s) {
        for (int i = 0; i < s.length(); i++) {
            int t = Character.getType(s.charAt(i));
            if (Character.isISOControl(s.charAt(i)) || t == Character.LINE_SEPARATOR
                    || t == Character.PARAGRAPH_SEPARATOR || t == Character.FORMAT || t == Character.UNASSIGNED
                    || (t == Character.SPACE_SEPARATOR && s.charAt(i) != ' ')) {
                return false;
            }
        }
        return true;
    }

    /** store_path(write=True): a plain path or a file: URI; stores on other file systems are read-only. */
    static String localStorePath(String text) {
        String p = text.strip();
        Matcher m = SCHEME.matcher(p);
        if (m.find() && !m.group(1).equalsIgnoreCase("file")) {
            throw new OptionError("store path " + Repr.of(p) + ": stores on " + m.group(1).toLowerCase(Locale.ROOT)
                    + ": are read-only: the rmq sink writes records in place into preallocated files under a lock, which "
                    + "object stores and HDFS do not offer (they replace or append whole files); write a local store and "
                    + "copy it there");
        }
        return RmqOptions.storePath(p);     // a plain path or a file: URI, as the read side takes it
    }

    /** read_topic_queue_nums: writeQueueNums of each topic in {root}/config/topics.json (empty when absent). */
    static HashMap<String, Integer> topicQueueNums(String root) {
        HashMap<String, Integer> out = new HashMap<>();
        Map<Object, Object> doc;
        try {
            doc = ConfigFiles.loadWithBak(Path.of(root, "config", "topics.json"), FastJson::parse);
        } catch (FormatError | java.io.UncheckedIOException e) {
            return out;
        }
        Object table = doc == null ? null : doc.get("topicConfigTable");
        if (!(table instanceof Map)) return out;
        for (Map.Entry<?, ?> e : ((Map<?, ?>) table).entrySet()) {
            if (!(e.getValue() instanceof Map)) continue;
            Object n = ((Map<?, ?>) e.getValue()).get("writeQueueNums");
            if ((n instanceof Long || n instanceof Integer) && ((Number) n).longValue() > 0
                    && ((Number) n).longValue() <= Integer.MAX_VALUE) {
                out.put(String.valueOf(e.getKey()), ((Number) n).intValue());
            }
        }
        return out;
    }
}
