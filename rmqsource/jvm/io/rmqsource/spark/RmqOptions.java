package io.rmqsource.spark;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.rmqsource.errors.OptionError;
import io.rmqsource.errors.Repr;
import io.rmqsource.store.StoreConfig;
import java.io.File;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/**
 * Batch read options, parsed once at planning with the Python path's rules and messages
 * (twin of rmqsource/spark/options.py).  Names are case-insensitive; anything that is not one
 * of ours (contract.json) or a MessageStoreConfig key is refused.
 */
public final class RmqOptions implements Serializable {
    private static final long serialVersionUID = 1L;
    public static final String EARLIEST = "earliest";
    public static final String LATEST = "latest";
    /** Ends "no store path": a SQL table's path reaches only a JVM provider (as options.py says). */
    static final String SQL_TABLE_HINT = "; a SQL table (CREATE TABLE ... USING rmq) passes its path and options "
            + "only with the rmq jar on spark.jars (`rmq jar`)";
    public static final long DEFAULT_MAX_RECORDS_PER_PARTITION = 1_000_000;
    /** CommitLog bytes per partition when not given: as Spark's maxPartitionBytes, at least. */
    public static final long MIN_AUTO_BYTES_PER_PARTITION = 128L * 1024 * 1024;
    /** ... and at most, when one partition per core would be larger. */
    public static final long MAX_AUTO_BYTES_PER_PARTITION = 1024L * 1024 * 1024;
    public static final int DEFAULT_BATCH_SIZE = 32768;
    public static final long DEFAULT_MAX_INFLATED_BODY_BYTES = 64L * 1024 * 1024;
    private static final Pattern TOPIC_CHARS = Pattern.compile("[%|a-zA-Z0-9_-]+");

    public List<String> paths;
    public List<String> brokers;
    public StoreConfig storeConfig;
    public List<String> topics;
    public String topicPattern;
    public List<String[]> queues;               // {topic, queueId}
    /** "earliest", "latest" or {topic: {queueId: offset}}. */
    public Object startingOffsets = EARLIEST;
    public Object endingOffsets = LATEST;
    public Long startingTimestamp;
    public Long endingTimestamp;
    /** Kafka's startingOffsetsByTimestamp: {topic: {queueId: epoch ms}}, else null. */
    public Map<String, Map<Integer, Long>> startingByTimestamp;
    /** Kafka's endingOffsetsByTimestamp, else null. */
    public Map<String, Map<Integer, Long>> endingByTimestamp;
    /** startingOffsetsByTimestampStrategy: a listed queue with no message at or after its timestamp (error | latest). */
    public String byTimestampStrategy = "error";
    public boolean failOnDataLoss = true;
    public boolean decompress;
    public long maxInflatedBodyBytes = DEFAULT_MAX_INFLATED_BODY_BYTES;
    public long maxInflatedBatchBytes = 256L * 1024 * 1024;
    public long maxInflatedTaskBytes = 32L * 1024 * 1024 * 1024;
    public boolean includeTransactional;
    public boolean excludeInternalTopics = true;
    public long maxRecordsPerPartition = DEFAULT_MAX_RECORDS_PER_PARTITION;
    public int minPartitions;
    /** 0: chosen by {@link #commitLogBytesPerPartition}. */
    public long maxBytesPerPartition;
    public int batchSize = DEFAULT_BATCH_SIZE;
    public boolean indexLookups = true;
    /**
     * "messages" (default), or a view (batch only, docs/views.md): "timers" (one row per timer / delay
     * message), "transactions" (one row per transactional message), "dlq", "retry", "trace" (RmqViewScan).
     */
    public String view = "messages";
    /**
     * Option metadata: one of {@link #METADATA_TABLES}, the store's structure instead of its messages
     * (docs/metadata.md, spark/read/RmqMetadataScan), else null.
     */
    public String metadata;
    /**
     * The view (dlq, retry, trace) chose the topics, none were given: a store without them reads no rows (a
     * store with no dead letters has none) instead of failing as a topic or topicPattern matching nothing.
     */
    public boolean topicsByView;
    /**
     * Options keys / keysFile (docs/reading.md, Lookups by key): only messages whose keys (KEYS split on spaces)
     * hold one of these, in the order given, without repeats; null when neither option is given.  Empty: no row.
     */
    public List<String> keys;
    /** Where the keys came from, as the scan's description names them ("keys" or "keysFile"), else null. */
    public String keysOption;

    /** Reads through the ConsumeQueues (a topic, pattern or queue list was given). */
    /**
     * CommitLog bytes per partition: the option when given, else one partition per core of the
     * session (each task costs Spark tens of milliseconds), kept within 128 MiB..1 GiB.
     */
    public long commitLogBytesPerPartition(long totalBytes, int parallelism) {
        if (maxBytesPerPartition > 0) return maxBytesPerPartition;
        long perCore = (totalBytes + Math.max(1, parallelism) - 1) / Math.max(1, parallelism);
        return Math.min(MAX_AUTO_BYTES_PER_PARTITION, Math.max(MIN_AUTO_BYTES_PER_PARTITION, perCore));
    }

    public boolean topicMode() {
        return topics != null || topicPattern != null || queues != null;
    }

    /**
     * RocketMQ's own topics (format/SystemTopics.java) are left out: excludeInternalTopics, and no topic
     * or queue named (a named one is always read; a topicPattern follows the option).
     */
    public boolean internalTopicsExcluded() {
        return excludeInternalTopics && topics == null && queues == null;
    }

    public static RmqOptions parse(Map<String, String> options) {
        return parse(options, "batch");
    }

    /** {@code mode} "stream": what a stream leaves after taking its own options (parse_options(mode=STREAM)). */
    public static RmqOptions parse(Map<String, String> options, String mode) {
        Map<String, String> opts = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : options.entrySet()) {
            opts.put(e.getKey().toLowerCase(java.util.Locale.ROOT), e.getValue() == null ? "" : e.getValue());
        }
        opts = KafkaNames.apply(opts, mode);
        boolean stream = mode.equals("stream");
        Map<String, String> storeOverrides = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : opts.entrySet()) {
            String key = e.getKey();
            if (stream && KEY_OPTIONS.contains(key)) {
                throw new OptionError("option " + Contract.OPTIONS.get(key) + " is for batch reads (spark.read): a lookup "
                        + "by key reads the messages stored so far; filter a stream with array_contains(keys, 'k') instead");
            }
            boolean batchOnly = BATCH_ONLY_OPTIONS.contains(key);
            if (Contract.OPTIONS.containsKey(key) && !(stream && batchOnly)) continue;
            if (Contract.STORE_KEYS.containsKey(key)) {
                storeOverrides.put(Contract.STORE_KEYS.get(key), e.getValue());
                continue;
            }
            TreeSet<String> accepted = new TreeSet<>(Contract.OPTIONS.values());
            if (stream) {
                for (String b : BATCH_ONLY_OPTIONS) accepted.remove(Contract.OPTIONS.get(b));
                for (String b : KEY_OPTIONS) accepted.remove(Contract.OPTIONS.get(b));
                accepted.addAll(Contract.STREAM_OPTIONS.values());
            }
            List<String> names = new ArrayList<>(accepted);
            names.sort(String.CASE_INSENSITIVE_ORDER);
            String valid = "rmq " + mode + " read options are: " + String.join(", ", names)
                    + ", plus RocketMQ MessageStoreConfig keys (e.g. maxHashSlotNum)";
            if (!stream && Contract.STREAM_OPTIONS.containsKey(key)) {
                throw new OptionError("option " + Contract.STREAM_OPTIONS.get(key)
                        + " is for streaming reads (spark.readStream); " + valid);
            }
            if (stream && batchOnly) {
                throw new OptionError("option " + Contract.OPTIONS.get(key) + " is for batch reads (a stream has no end); "
                        + valid);
            }
            throw new OptionError("unknown option " + Repr.of(key) + "; " + valid);
        }
        RmqOptions o = new RmqOptions();
        o.paths = paths(opts);
        String configPath = opts.get("config");
        if (configPath != null && !configPath.isEmpty()) {
            if (!new File(configPath).isFile()) throw new OptionError("option config: " + configPath + " is not a file");
            o.storeConfig = StoreConfig.fromPropertiesFile(configPath, storeOverrides);
        } else {
            o.storeConfig = StoreConfig.defaults().withOverrides(storeOverrides);
        }
        String brokerName = opts.get("brokername");
        if (brokerName != null && !brokerName.isEmpty()) {
            List<String> brokers = new ArrayList<>();
            for (String b : brokerName.split(",", -1)) brokers.add(b.strip());
            if (brokers.size() == 1 && o.paths.size() > 1) {
                String b = brokers.get(0);
                for (int i = 1; i < o.paths.size(); i++) brokers.add(b);
            }
            if (brokers.size() != o.paths.size()) {
                throw new OptionError("option brokerName lists " + brokers.size() + " names for " + o.paths.size()
                        + " store paths");
            }
            o.brokers = brokers;
        } else {
            o.brokers = new ArrayList<>();
            for (String p : o.paths) {
                String name = io.rmqsource.io.StoreFiles.name(p);
                o.brokers.add(name.isEmpty() ? p : name);
            }
        }
        if (nonEmpty(opts, "topics")) {
            LinkedHashSet<String> ts = new LinkedHashSet<>();
            for (String t : opts.get("topics").split(",")) if (!t.strip().isEmpty()) ts.add(t.strip());
            if (ts.isEmpty()) throw new OptionError("option topics is empty");
            o.topics = new ArrayList<>(ts);
        }
        if (nonEmpty(opts, "topicpattern")) {
            o.topicPattern = opts.get("topicpattern");
            try {
                Pattern.compile(o.topicPattern);
            } catch (PatternSyntaxException e) {
                throw new OptionError("option topicPattern is not a valid regular expression: " + e.getDescription());
            }
        }
        if (nonEmpty(opts, "queues")) o.queues = queues(opts.get("queues"));
        int modes = (o.topics != null ? 1 : 0) + (o.topicPattern != null ? 1 : 0) + (o.queues != null ? 1 : 0);
        if (modes > 1) throw new OptionError("use only one of the options topics, topicPattern and queues");

        boolean hasStart = opts.containsKey("startingoffsets");
        boolean hasEnd = opts.containsKey("endingoffsets");
        if (hasStart) o.startingOffsets = parseOffsets("startingOffsets", opts.get("startingoffsets"));
        if (hasEnd) o.endingOffsets = parseOffsets("endingOffsets", opts.get("endingoffsets"));
        if (hasStart && LATEST.equals(o.startingOffsets)) {
            throw new OptionError("startingOffsets=latest is not meaningful for a batch read (it would read nothing)");
        }
        if (hasEnd && EARLIEST.equals(o.endingOffsets)) {
            throw new OptionError("endingOffsets=earliest is not meaningful for a batch read (it would read nothing)");
        }
        if (opts.containsKey("startingtimestamp")) {
            o.startingTimestamp = parseInt("startingTimestamp", opts.get("startingtimestamp"), 0, Long.MAX_VALUE);
        }
        if (opts.containsKey("endingtimestamp")) {
            o.endingTimestamp = parseInt("endingTimestamp", opts.get("endingtimestamp"), 0, Long.MAX_VALUE);
        }
        if (opts.containsKey("startingoffsetsbytimestamp")) {
            o.startingByTimestamp = parseTimestamps("startingOffsetsByTimestamp", opts.get("startingoffsetsbytimestamp"));
        }
        if (opts.containsKey("endingoffsetsbytimestamp")) {
            o.endingByTimestamp = parseTimestamps("endingOffsetsByTimestamp", opts.get("endingoffsetsbytimestamp"));
        }
        if (opts.containsKey("startingoffsetsbytimestampstrategy")) {
            o.byTimestampStrategy = parseByTimestampStrategy(opts.get("startingoffsetsbytimestampstrategy"));
        }
        if (o.startingByTimestamp != null && o.startingTimestamp != null) {
            throw new OptionError("use either startingOffsetsByTimestamp or startingTimestamp, not both");
        }
        if (o.endingByTimestamp != null && o.endingTimestamp != null) {
            throw new OptionError("use either endingOffsetsByTimestamp or endingTimestamp, not both");
        }
        if ((hasStart || hasEnd || o.startingTimestamp != null || o.endingTimestamp != null
                || o.startingByTimestamp != null || o.endingByTimestamp != null) && !o.topicMode()) {
            throw new OptionError("startingOffsets/endingOffsets/startingTimestamp/endingTimestamp and their ByTimestamp "
                    + "forms need one of the options topics, topicPattern or queues");
        }
        if (o.startingTimestamp != null && hasStart) {
            throw new OptionError("use either startingOffsets or startingTimestamp, not both");
        }
        if (o.endingTimestamp != null && hasEnd) {
            throw new OptionError("use either endingOffsets or endingTimestamp, not both");
        }
        if (opts.containsKey("failondataloss")) o.failOnDataLoss = parseBool("failOnDataLoss", opts.get("failondataloss"));
        if (opts.containsKey("decompress")) o.decompress = parseBool("decompress", opts.get("decompress"));
        if (opts.containsKey("maxinflatedbodybytes")) {
            o.maxInflatedBodyBytes = parseInt("maxInflatedBodyBytes", opts.get("maxinflatedbodybytes"), 1,
                    Integer.MAX_VALUE);
        }
        if (opts.containsKey("maxinflatedbatchbytes")) {
            o.maxInflatedBatchBytes = parseInt("maxInflatedBatchBytes", opts.get("maxinflatedbatchbytes"), 1,
                    Integer.MAX_VALUE);
        }
        if (opts.containsKey("maxinflatedtaskbytes")) {
            o.maxInflatedTaskBytes = parseInt("maxInflatedTaskBytes", opts.get("maxinflatedtaskbytes"), 1, Long.MAX_VALUE);
        }
        if (opts.containsKey("includetransactional")) {
            o.includeTransactional = parseBool("includeTransactional", opts.get("includetransactional"));
        }
        if (opts.containsKey("excludeinternaltopics")) {
            o.excludeInternalTopics = parseBool("excludeInternalTopics", opts.get("excludeinternaltopics"));
        }
        if (opts.containsKey("maxrecordsperpartition")) {
            o.maxRecordsPerPartition = parseInt("maxRecordsPerPartition", opts.get("maxrecordsperpartition"), 1,
                    Long.MAX_VALUE);
        }
        if (opts.containsKey("minpartitions")) {
            o.minPartitions = (int) parseInt("minPartitions", opts.get("minpartitions"), 0, 100_000);
        }
        if (opts.containsKey("maxbytesperpartition")) {
            o.maxBytesPerPartition = parseInt("maxBytesPerPartition", opts.get("maxbytesperpartition"), 4096,
                    Long.MAX_VALUE);
        }
        if (opts.containsKey("batchsize")) o.batchSize = (int) parseInt("batchSize", opts.get("batchsize"), 1, 10_000_000);
        if (opts.containsKey("indexlookups")) o.indexLookups = parseBool("indexLookups", opts.get("indexlookups"));
        if (opts.containsKey("view")) {
            o.view = parseView(opts.get("view"), stream, o.queues != null || opts.containsKey("startingoffsets")
                    || opts.containsKey("endingoffsets") || opts.containsKey("startingtimestamp")
                    || opts.containsKey("endingtimestamp"));
        }
        if (opts.containsKey("metadata")) {
            List<String> others = new ArrayList<>();
            for (String k : List.of("topics", "topicpattern", "queues", "startingoffsets", "endingoffsets",
                    "startingtimestamp", "endingtimestamp", "view", "keys", "keysfile")) {
                if (opts.containsKey(k)) others.add(Contract.OPTIONS.get(k));
            }
            others.sort(null);
            o.metadata = parseMetadata(opts.get("metadata"), stream, others);
        }
        if (opts.containsKey("keys") || opts.containsKey("keysfile")) parseKeys(o, opts);
        o.applyView();
        return o;
    }

    /** Options keys / keysFile: batch reads only, refused by a stream (KEY_OPTIONS in options.py). */
    static final List<String> KEY_OPTIONS = List.of("keys", "keysfile");
    static final String KEYS_EXAMPLE = "[\"order-17\", \"order-18\"]";

    /** Options keys / keysFile (twin of parse_keys_option in options.py): one of them, messages reads only. */
    private static void parseKeys(RmqOptions o, Map<String, String> opts) {
        if (opts.containsKey("keys") && opts.containsKey("keysfile")) {
            throw new OptionError("use only one of the options keys and keysFile");
        }
        String name = opts.containsKey("keys") ? "keys" : "keysFile";
        List<String> others = new ArrayList<>();
        for (String k : List.of("view", "metadata")) {
            String v = opts.get(k);
            if (v != null && !v.strip().isEmpty() && !v.strip().toLowerCase(java.util.Locale.ROOT).equals("messages")) {
                others.add(Contract.OPTIONS.get(k) + "=" + v);
            }
        }
        if (!others.isEmpty()) {
            throw new OptionError("option " + name + " looks messages up by key; it does not apply to "
                    + String.join(" or ", others));
        }
        List<String> raw = name.equals("keys") ? keysFromJson(opts.get("keys")) : keysFromFile(opts.get("keysfile"));
        LinkedHashSet<String> out = new LinkedHashSet<>();
        for (String k : raw) {       // check_lookup_keys
            if (k.isEmpty()) {
                throw new OptionError("option " + name + ": an empty key can never match (RocketMQ drops the empty "
                        + "pieces of KEYS)");
            }
            if (k.indexOf(' ') >= 0) {
                throw new OptionError("option " + name + ": key " + Repr.of(k) + " contains a space and can never match: "
                        + "RocketMQ splits a message's KEYS on spaces, so each key is one piece; give its pieces as "
                        + "separate keys");
            }
            out.add(k);
        }
        o.keys = new ArrayList<>(out);
        o.keysOption = name;
    }

    private static List<String> keysFromJson(String value) {
        String text = value == null ? "" : value.strip();
        JsonNode doc;
        try {
            doc = new ObjectMapper().readTree(text);
        } catch (JsonProcessingException e) {
            throw new OptionError("option keys must be a JSON array of strings like " + KEYS_EXAMPLE + "; cannot parse "
                    + Repr.of(text) + ": " + e.getOriginalMessage());
        }
        boolean strings = doc != null && doc.isArray();
        if (strings) for (JsonNode k : doc) strings &= k.isTextual();
        if (!strings) {
            throw new OptionError("option keys must be a JSON array of strings like " + KEYS_EXAMPLE + ", got "
                    + Repr.of(text));
        }
        List<String> out = new ArrayList<>();
        for (JsonNode k : doc) out.add(k.asText());
        return out;
    }

    /** One key a line (blank lines ignored), read on the driver through Hadoop's FileSystem (a local path or a URI). */
    private static List<String> keysFromFile(String value) {
        String text = value == null ? "" : value.strip();
        if (text.isEmpty()) throw new OptionError("option keysFile is empty; expected a file of keys, one a line");
        boolean uri = Pattern.compile("^([A-Za-z][A-Za-z0-9+.-]+):").matcher(text).find();
        String where = uri ? text : storePath(text);
        org.apache.hadoop.fs.Path path;
        try {
            path = uri ? new org.apache.hadoop.fs.Path(text) : new org.apache.hadoop.fs.Path(new File(where).toURI());
        } catch (IllegalArgumentException e) {
            throw new OptionError("option keysFile: " + Repr.of(text) + " is not a path or URI: " + e.getMessage());
        }
        org.apache.spark.sql.SparkSession session = org.apache.spark.sql.SparkSession.getActiveSession().isDefined()
                ? org.apache.spark.sql.SparkSession.getActiveSession().get() : null;
        org.apache.hadoop.conf.Configuration conf = session != null ? session.sessionState().newHadoopConf()
                : new org.apache.hadoop.conf.Configuration();
        List<String> out = new ArrayList<>();
        try {
            org.apache.hadoop.fs.FileSystem fs = path.getFileSystem(conf);
            if (fs.getFileStatus(path).isDirectory()) {
                throw new OptionError("option keysFile: " + where + " is a directory, not a file of keys");
            }
            try (java.io.BufferedReader r = new java.io.BufferedReader(new java.io.InputStreamReader(fs.open(path),
                    StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    String k = line.strip();
                    if (!k.isEmpty()) out.add(k);
                }
            }
        } catch (java.io.FileNotFoundException e) {
            throw new OptionError("option keysFile: no such file " + where);
        } catch (java.io.IOException e) {
            throw new OptionError("option keysFile: cannot read " + text + ": " + e.getMessage());
        }
        return out;
    }

    /** Batch-only options (a stream has no end): BATCH_ONLY_OPTIONS in options.py. */
    static final List<String> BATCH_ONLY_OPTIONS = List.of("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp");
    public static final List<String> BY_TIMESTAMP_STRATEGIES = List.of("error", "latest");

    /** Kafka's startingOffsetsByTimestamp / endingOffsetsByTimestamp: JSON {topic: {queueId: epoch ms}} (parse_timestamps). */
    public static Map<String, Map<Integer, Long>> parseTimestamps(String name, String value) {
        String text = value.strip();
        JsonNode doc;
        try {
            doc = new ObjectMapper().readTree(text);
        } catch (JsonProcessingException e) {
            throw new OptionError("option " + name + " must be JSON like {\"TopicTest\": {\"0\": 1700000000000}}; "
                    + "cannot parse " + Repr.of(text) + ": " + e.getOriginalMessage());
        }
        if (doc == null || doc.isMissingNode() || !doc.isObject() || doc.isEmpty()) {
            throw new OptionError("option " + name + ": JSON must be a non-empty object of topic -> {queueId: timestamp}, "
                    + "got " + Repr.of(text));
        }
        Map<String, Map<Integer, Long>> out = new LinkedHashMap<>();
        for (Map.Entry<String, JsonNode> e : doc.properties()) {
            String topic = e.getKey();
            JsonNode perQueue = e.getValue();
            if (!perQueue.isObject() || perQueue.isEmpty()) {
                throw new OptionError("option " + name + ": topic " + Repr.of(topic) + " must map to a non-empty object "
                        + "of queueId -> timestamp, got " + pyRepr(perQueue));
            }
            Map<Integer, Long> q = new LinkedHashMap<>();
            for (Map.Entry<String, JsonNode> qe : perQueue.properties()) {
                int id;
                try {
                    id = queueId(qe.getKey());
                } catch (OptionError err) {
                    throw new OptionError("option " + name + ": topic " + Repr.of(topic) + ": " + err.getMessage());
                }
                JsonNode ts = qe.getValue();
                if (!ts.isIntegralNumber() || !ts.canConvertToLong() || ts.asLong() < 0) {
                    throw new OptionError("option " + name + ": " + topic + "/" + qe.getKey() + ": the timestamp must be "
                            + "epoch milliseconds >= 0, got " + pyRepr(ts));
                }
                q.put(id, ts.asLong());
            }
            out.put(topic, q);
        }
        return out;
    }

    /** Option startingOffsetsByTimestampStrategy (parse_by_timestamp_strategy). */
    public static String parseByTimestampStrategy(String value) {
        String v = value.strip().toLowerCase(java.util.Locale.ROOT);
        if (!BY_TIMESTAMP_STRATEGIES.contains(v)) {
            throw new OptionError("option startingOffsetsByTimestampStrategy must be error or latest, got " + Repr.of(value));
        }
        return v;
    }

    /** startingOffsetsByTimestampStrategy=error: a queue with no message stored at or after its timestamp. */
    public static OptionError noOffsetForTimestamp(String where, long ts) {
        return new OptionError("startingOffsetsByTimestamp: " + where + " has no message stored at or after " + ts
                + "; startingOffsetsByTimestampStrategy=latest starts such a queue at its end");
    }

    /** The timestamp a startingOffsetsByTimestamp / endingOffsetsByTimestamp spec gives a queue, else null. */
    public static Long timestampFor(Map<String, Map<Integer, Long>> spec, String topic, int qid) {
        if (spec == null) return null;
        Map<Integer, Long> q = spec.get(topic);
        return q == null ? null : q.get(qid);
    }

    /** Python's repr() of a parsed JSON value, as the Python path's errors print it. */
    static String pyRepr(JsonNode n) {
        if (n == null || n.isNull()) return "None";
        if (n.isTextual()) return Repr.of(n.asText());
        if (n.isBoolean()) return n.asBoolean() ? "True" : "False";
        if (n.isObject()) {
            List<String> items = new ArrayList<>();
            for (Map.Entry<String, JsonNode> e : n.properties()) items.add(Repr.of(e.getKey()) + ": " + pyRepr(e.getValue()));
            return "{" + String.join(", ", items) + "}";
        }
        if (n.isArray()) {
            List<String> items = new ArrayList<>();
            for (JsonNode x : n) items.add(pyRepr(x));
            return "[" + String.join(", ", items) + "]";
        }
        return n.toString();
    }

    /** The tables of option metadata, in the order errors list them (METADATA_TABLES in options.py). */
    public static final List<String> METADATA_TABLES = List.of("queues", "topics", "groups", "segments", "indexes");

    /** The table option metadata names (checked, lower-case), before the other options are parsed. */
    public static String metadataTable(String value) {
        String v = value == null ? "" : value.strip().toLowerCase(java.util.Locale.ROOT);
        if (!METADATA_TABLES.contains(v)) {
            throw new OptionError("option metadata must be one of " + String.join(", ", METADATA_TABLES) + ", got "
                    + Repr.of(value == null ? "" : value));
        }
        return v;
    }

    /** Option metadata: batch only, and alone (twin of parse_metadata in options.py). */
    static String parseMetadata(String value, boolean stream, List<String> others) {
        String v = metadataTable(value);
        if (stream) throw new OptionError("option metadata=" + v + " is for batch reads (spark.read)");
        if (!others.isEmpty()) {
            throw new OptionError("option metadata=" + v + " lists the whole store: filter its rows instead of giving "
                    + String.join(", ", others));
        }
        return v;
    }

    /** The views read here, in the order errors list them (twin of VIEWS in options.py). */
    public static final List<String> VIEWS = List.of("messages", "timers", "dlq", "retry", "trace", "transactions");
    public static final String DLQ_PREFIX = "%DLQ%";
    public static final String RETRY_PREFIX = "%RETRY%";
    /** TopicValidator.RMQ_SYS_TRACE_TOPIC: where clients send trace messages unless told otherwise. */
    public static final String TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC";

    /** The prefix of the topics of view dlq or retry, else null. */
    public static String groupTopicPrefix(String view) {
        return view.equals("dlq") ? DLQ_PREFIX : view.equals("retry") ? RETRY_PREFIX : null;
    }

    /**
     * Views dlq, retry and trace are messages reads of some of RocketMQ's own topics (spark/read/RmqViewScan):
     * here they choose those topics, as parse_options does (options.py, _group_topic_selection).
     */
    private void applyView() {
        String prefix = groupTopicPrefix(view);
        if ((prefix != null || view.equals("trace")) && !topicMode()) topicsByView = true;
        if (prefix != null) {
            String what = view.equals("dlq") ? "dead-letter topics (%DLQ%<group>)" : "retry topics (%RETRY%<group>...)";
            List<String> named = new ArrayList<>();
            if (topics != null) named.addAll(topics);
            if (queues != null) for (String[] q : queues) named.add(q[0]);
            for (String t : named) {
                if (!t.startsWith(prefix)) {
                    throw new OptionError("option view=" + view + " reads " + what + "; topic " + Repr.of(t)
                            + " is not one");
                }
            }
            if (topics == null && queues == null) {
                // the prefixes hold no regex metacharacter; a lookahead keeps the pattern's own full-match meaning
                topicPattern = topicPattern == null ? prefix + ".*" : "(?=" + prefix + ")(?:" + topicPattern + ")";
            }
        }
        if (prefix != null || view.equals("trace")) excludeInternalTopics = false;   // these topics are RocketMQ's own
        if (view.equals("trace")) {
            decompress = true;                 // the client sends trace bodies over 4 KiB compressed
            if (!topicMode()) topics = new ArrayList<>(List.of(TRACE_TOPIC));
        }
    }

    /** Option view (twin of parse_view in options.py). */
    static String parseView(String value, boolean stream, boolean byOffset) {
        String v = value.strip().toLowerCase(java.util.Locale.ROOT);
        if (!VIEWS.contains(v)) {
            throw new OptionError("option view must be one of " + String.join(", ", VIEWS) + ", got " + Repr.of(value));
        }
        boolean chosen = v.equals("timers") || v.equals("transactions");     // rows the store layer chooses
        if (chosen && stream) {
            throw new OptionError("option view=" + v + " is for batch reads (spark.read): " + v + " change state in "
                    + "place, a stream cannot follow them");
        }
        if (groupTopicPrefix(v) != null && stream) {
            throw new OptionError("option view=" + v + " is for batch reads (spark.read); a stream of dead-letter or retry "
                    + "topics is a messages read: option(\"topicPattern\", \"" + groupTopicPrefix(v) + ".*\")");
        }
        if (v.equals("trace") && stream) {
            throw new OptionError("option view=trace is for batch reads (spark.read); a stream of trace messages is a "
                    + "messages read of topic " + TRACE_TOPIC);
        }
        if (chosen && byOffset) {
            throw new OptionError("option view=" + v + " takes topics or topicPattern (real topics), not queues, "
                    + "startingOffsets, endingOffsets, startingTimestamp or endingTimestamp");
        }
        return v;
    }

    public boolean timersView() {
        return "timers".equals(view);
    }

    private static boolean nonEmpty(Map<String, String> opts, String key) {
        String v = opts.get(key);
        return v != null && !v.isEmpty();
    }

    public static boolean parseBool(String name, String value) {
        String v = value.strip().toLowerCase(java.util.Locale.ROOT);
        if (v.equals("true") || v.equals("1") || v.equals("yes")) return true;
        if (v.equals("false") || v.equals("0") || v.equals("no")) return false;
        throw new OptionError("option " + name + " must be true or false, got " + Repr.of(value));
    }

    public static long parseInt(String name, String value, long minimum, long maximum) {
        long v;
        try {
            String t = value.strip();
            v = Long.parseLong(t.startsWith("+") ? t.substring(1) : t);
        } catch (NumberFormatException e) {
            throw new OptionError("option " + name + " must be an integer, got " + Repr.of(value));
        }
        if (v < minimum || v > maximum) {
            throw new OptionError("option " + name + " must be in [" + minimum + ", " + maximum + "], got " + v);
        }
        return v;
    }

    /** names.validate_queue_id */
    static int queueId(String text) {
        long v;
        try {
            String t = text.strip();
            v = Long.parseLong(t.startsWith("+") ? t.substring(1) : t);
        } catch (NumberFormatException e) {
            throw new OptionError("queueId must be an integer, got " + Repr.of(text));
        }
        if (v < 0 || v > 0x7FFFFFFFL) throw new OptionError("queueId " + v + " out of range");
        return (int) v;
    }

    /** names.topic_problem(topic, allow_long_retry=True), or null. */
    static String topicProblem(String topic) {
        if (topic.isEmpty()) return "topic is empty";
        if (!TOPIC_CHARS.matcher(topic).matches()) {
            return "topic " + Repr.of(topic) + " has characters outside [%|a-zA-Z0-9_-]";
        }
        int size = topic.getBytes(StandardCharsets.UTF_8).length;
        int limit = topic.startsWith("%RETRY%") ? 255 : 127;
        return size > limit ? "topic is " + size + " bytes, more than " + limit : null;
    }

    public static Object parseOffsets(String name, String value) {
        String text = value.strip();
        String lower = text.toLowerCase(java.util.Locale.ROOT);
        if (lower.equals(EARLIEST) || lower.equals(LATEST)) return lower;
        JsonNode doc;
        try {
            doc = new ObjectMapper().readTree(text);
        } catch (JsonProcessingException e) {
            throw new OptionError("option " + name + " must be 'earliest', 'latest' or JSON like "
                    + "{\"TopicTest\": {\"0\": 12}}; cannot parse " + Repr.of(text) + ": " + e.getOriginalMessage());
        }
        if (doc == null || !doc.isObject() || doc.isEmpty()) {
            throw new OptionError("option " + name + ": JSON must be a non-empty object of topic -> {queueId: offset}, got "
                    + Repr.of(text));
        }
        Map<String, Map<Integer, Long>> out = new LinkedHashMap<>();
        for (Map.Entry<String, JsonNode> e : doc.properties()) {
            String topic = e.getKey();
            if (topic.getBytes(StandardCharsets.UTF_8).length <= 127) {
                String problem = topicProblem(topic);
                if (problem != null) throw new OptionError("option " + name + ": " + problem);
            }
            JsonNode perQueue = e.getValue();
            if (!perQueue.isObject() || perQueue.isEmpty()) {
                throw new OptionError("option " + name + ": topic " + Repr.of(topic) + " must map to a non-empty object "
                        + "of queueId -> offset, got " + perQueue);
            }
            Map<Integer, Long> q = new LinkedHashMap<>();
            for (Map.Entry<String, JsonNode> qe : perQueue.properties()) {
                int id;
                try {
                    id = queueId(qe.getKey());
                } catch (OptionError err) {
                    throw new OptionError("option " + name + ": topic " + Repr.of(topic) + ": " + err.getMessage());
                }
                JsonNode off = qe.getValue();
                if (!off.isIntegralNumber() || !off.canConvertToLong() || off.asLong() < -2) {
                    throw new OptionError("option " + name + ": " + topic + "/" + qe.getKey() + ": offset must be an "
                            + "integer >= 0 (or -2 = earliest, -1 = latest), got " + off);
                }
                q.put(id, off.asLong());
            }
            out.put(topic, q);
        }
        return out;
    }

    private static List<String[]> queues(String value) {
        LinkedHashMap<String, String[]> out = new LinkedHashMap<>();
        for (String raw : value.split(",")) {
            String item = raw.strip();
            if (item.isEmpty()) continue;
            int colon = item.lastIndexOf(':');
            if (colon <= 0) {
                throw new OptionError("option queues: " + Repr.of(item) + " is not topic:queueId (e.g. TopicTest:0)");
            }
            String topic = item.substring(0, colon);
            int id;
            try {
                id = queueId(item.substring(colon + 1));
            } catch (OptionError e) {
                throw new OptionError("option queues: " + Repr.of(item) + ": " + e.getMessage());
            }
            out.putIfAbsent(topic + "\u0000" + id, new String[] {topic, Integer.toString(id)});
        }
        if (out.isEmpty()) throw new OptionError("option queues is empty; expected e.g. TopicTest:0,TopicTest:1");
        return new ArrayList<>(out.values());
    }

    private static List<String> paths(Map<String, String> opts) {
        List<String> paths = new ArrayList<>();
        String raw = opts.get("paths");
        if (raw != null && !raw.isEmpty()) {
            JsonNode doc = null;
            try {
                doc = new ObjectMapper().readTree(raw);
            } catch (JsonProcessingException e) {
                doc = null;
            }
            if (doc != null && doc.isArray()) {
                for (JsonNode p : doc) splitInto(p.isTextual() ? p.asText() : p.toString(), paths);
            } else {
                splitInto(raw, paths);
            }
        }
        String path = opts.get("path");
        if (path != null && !path.isEmpty()) splitInto(path, paths);
        LinkedHashSet<String> unique = new LinkedHashSet<>(paths);
        if (unique.isEmpty()) {
            throw new OptionError("no store path: use spark.read.format('rmq').load('/path/to/store') "
                    + "(several stores: comma-separated or a list)" + SQL_TABLE_HINT);
        }
        LinkedHashSet<String> out = new LinkedHashSet<>();
        for (String p : unique) out.add(storePath(p));
        return new ArrayList<>(out);
    }

    /**
     * A store path from an option: a plain path or a file: URI (a local path, as store_path gives),
     * or the URI of a store on another Hadoop file system (s3a://, hdfs://, abfss://, gs://, dbfs:/ ...),
     * read there by positioned reads (StoreAccess); the Python path refuses those.
     */
    public static String storePath(String text) {
        String p = text.strip();
        java.util.regex.Matcher m = Pattern.compile("^([A-Za-z][A-Za-z0-9+.-]+):").matcher(p);
        if (!m.find()) {
            if (p.equals("~") || p.startsWith("~/")) p = System.getProperty("user.home") + p.substring(1);
            return new File(p).toPath().toAbsolutePath().normalize().toString();
        }
        String scheme = m.group(1).toLowerCase(java.util.Locale.ROOT);
        if (!scheme.equals("file")) {
            org.apache.hadoop.fs.Path hp;
            try {
                hp = new org.apache.hadoop.fs.Path(p);
            } catch (IllegalArgumentException e) {
                throw new OptionError("store path " + Repr.of(p) + " is not a URI: " + e.getMessage());
            }
            String uri = hp.toString();
            return uri.length() > 1 && uri.endsWith("/") ? uri.substring(0, uri.length() - 1) : uri;
        }
        java.net.URI u;
        try {
            u = new java.net.URI(p);
        } catch (java.net.URISyntaxException e) {
            throw new OptionError("store path " + Repr.of(p) + " is not a file URI: " + e.getReason());
        }
        String host = u.getRawAuthority() == null ? "" : u.getRawAuthority();
        if (!host.isEmpty() && !host.equals("localhost")) {
            throw new OptionError("store path " + Repr.of(p) + " names host " + Repr.of(host)
                    + "; file URIs must be file:///path (or file:/path) on this machine");
        }
        String path = u.getPath() == null ? "" : u.getPath();
        return new File(path).toPath().toAbsolutePath().normalize().toString();
    }

    private static void splitInto(String s, List<String> out) {
        for (String x : s.split(",")) if (!x.strip().isEmpty()) out.add(x.strip());
    }
}
