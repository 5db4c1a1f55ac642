package io.rmqsource.store;

import io.rmqsource.errors.FormatError;
import io.rmqsource.errors.OptionError;
import io.rmqsource.errors.Repr;
import io.rmqsource.errors.StoreLockedError;
import io.rmqsource.format.FastJson;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;

/**
 * Consumer-group offsets in {@code {root}/config/consumerOffset.json}, the Java twin of
 * rmqsource/store/consumer_offsets.py: the same format (RocketMQ ConsumerOffsetManager's
 * {@code offsetTable}, "topic@group" -> {queueId: next offset}, 4.9 and 5.x shapes, other
 * fields and odd keys kept), the same merge (other groups untouched, never backwards), the same
 * durable replace ({@link ConfigFiles}) and the same lock: a POSIX record lock on
 * {@code consumerOffset.json.lock} (what both implementations take, so a Python and a JVM
 * committer never lose each other's updates), plus a JVM-wide lock (record locks belong to the
 * process).  A store a running broker holds (its {@code lock} taken by a process that is not an
 * rmqsource writer; the broker rewrites the file from memory) is never committed into.
 */
public final class ConsumerOffsetsFile {
    public static final String FILE_NAME = "consumerOffset.json";
    public static final String SEPARATOR = "@";
    public static final long DEFAULT_LOCK_TIMEOUT_MS = 30_000;
    private static final long JAVA_INT_MAX = Integer.MAX_VALUE;
    private static final Map<String, ReentrantLock> IN_PROCESS = new ConcurrentHashMap<>();

    private final Path root;
    private final boolean v5;
    private final long lockTimeoutMs;
    private StoreConfig storeConfig = StoreConfig.defaults();     // configManagerVersion: commits into config/rdb/
    private LongSupplier clockMs = System::currentTimeMillis;

    public ConsumerOffsetsFile(String storeRoot, StoreConfig config) {
        this(storeRoot, config != null && config.isV5(), DEFAULT_LOCK_TIMEOUT_MS);
        if (config != null) storeConfig = config;
    }

    public ConsumerOffsetsFile(String storeRoot, boolean engineV5, long lockTimeoutMs) {
        if (lockTimeoutMs < 0) throw new OptionError("lock_timeout_ms must be >= 0");
        this.root = Path.of(storeRoot);
        this.v5 = engineV5;
        this.lockTimeoutMs = lockTimeoutMs;
    }

    /** A fixed clock (dataVersion timestamps), for tests. */
    public ConsumerOffsetsFile withClockMs(long fixedMs) {
        clockMs = () -> fixedMs;
        return this;
    }

    public Path path() {
        return root.resolve("config").resolve(FILE_NAME);
    }

    public Path lockPath() {
        return Path.of(path() + ".lock");
    }

    // ------------------------------------------------------------------ the document

    /** A decoded file: offsetTable plus every other top-level field, and where it was read from. */
    public static final class Table {
        public final LinkedHashMap<String, LinkedHashMap<Long, Long>> offsetTable;
        public final LinkedHashMap<Object, Object> otherFields;
        public final String sourceFile;

        Table(LinkedHashMap<String, LinkedHashMap<Long, Long>> offsetTable, LinkedHashMap<Object, Object> otherFields,
              String sourceFile) {
            this.offsetTable = offsetTable;
            this.otherFields = otherFields;
            this.sourceFile = sourceFile;
        }

        /** {topic: {queueId: offset}} of one group (keys exactly "topic@group"), sorted. */
        public TreeMap<String, TreeMap<Integer, Long>> offsetsForGroup(String group) {
            checkName("group", group);
            TreeMap<String, TreeMap<Integer, Long>> out = new TreeMap<>();
            for (Map.Entry<String, LinkedHashMap<Long, Long>> e : offsetTable.entrySet()) {
                String[] parts = e.getKey().split(SEPARATOR, -1);
                if (parts.length == 2 && parts[1].equals(group)) {
                    TreeMap<Integer, Long> q = new TreeMap<>();
                    for (Map.Entry<Long, Long> x : e.getValue().entrySet()) q.put(x.getKey().intValue(), x.getValue());
                    out.put(parts[0], q);
                }
            }
            return out;
        }

        /** Every "topic@group" entry as {group, topic, queueId, offset} strings, sorted by group, topic, queue. */
        public List<Object[]> entries() {
            List<Object[]> out = new ArrayList<>();
            for (Map.Entry<String, LinkedHashMap<Long, Long>> e : offsetTable.entrySet()) {
                String[] parts = e.getKey().split(SEPARATOR, -1);
                if (parts.length != 2) continue;
                for (Map.Entry<Long, Long> q : e.getValue().entrySet()) {
                    out.add(new Object[] {parts[1], parts[0], q.getKey().intValue(), q.getValue()});
                }
            }
            out.sort((a, b) -> {
                int c = ((String) a[0]).compareTo((String) b[0]);
                if (c == 0) c = ((String) a[1]).compareTo((String) b[1]);
                return c != 0 ? c : Integer.compare((Integer) a[2], (Integer) b[2]);
            });
            return out;
        }
    }

    static void checkName(String kind, Object name) {
        if (!(name instanceof String) || ((String) name).isEmpty()) {
            throw new OptionError(kind + " must be a non-empty string, got " + reprValue(name));
        }
        if (((String) name).contains(SEPARATOR)) {
            throw new OptionError(kind + " " + Repr.of((String) name)
                    + " contains '@', the topic@group separator of consumerOffset.json");
        }
    }

    private static String reprValue(Object v) {
        if (v == null) return "None";
        if (v instanceof String) return Repr.of((String) v);
        if (v instanceof Boolean) return ((Boolean) v) ? "True" : "False";
        return String.valueOf(v);
    }

    /** fastjson reads a JSON int or a numeric string into Integer/Long (_as_int); null otherwise. */
    private static BigInteger asInt(Object value) {
        if (value instanceof Long) return BigInteger.valueOf((Long) value);
        if (value instanceof BigInteger) return (BigInteger) value;
        if (value instanceof String) {
            String text = ((String) value).strip();
            String digits = text.startsWith("+") || text.startsWith("-") ? text.substring(1) : text;
            if (!digits.isEmpty() && text.length() <= 20 && digits.chars().allMatch(c -> c >= '0' && c <= '9')) {
                return new BigInteger(text.startsWith("+") ? digits : text);
            }
        }
        return null;
    }

    private static boolean fitsLong(BigInteger v) {
        return v.bitLength() < 64;
    }

    /** Parses and validates a document (decode_consumer_offsets); FormatError names {@code file}. */
    public static Table decode(byte[] data, String file) {
        Map<Object, Object> doc = FastJson.parse(data, file);
        Object raw = doc.get("offsetTable");
        LinkedHashMap<String, LinkedHashMap<Long, Long>> table = new LinkedHashMap<>();
        if (raw != null) {
            if (!(raw instanceof Map)) {
                throw new FormatError("offsetTable is a " + FastJson.pythonType(raw) + ", expected an object", file, -1);
            }
            for (Map.Entry<?, ?> e : ((Map<?, ?>) raw).entrySet()) {
                Object key = e.getKey();
                Object queues = e.getValue();
                if (queues == null) continue;
                if (!(key instanceof String) || !(queues instanceof Map)) {
                    throw new FormatError("offsetTable entry " + reprValue(key) + " is not \"topic@group\":{queueId:offset}",
                            file, -1);
                }
                LinkedHashMap<Long, Long> parsed = new LinkedHashMap<>();
                for (Map.Entry<?, ?> q : ((Map<?, ?>) queues).entrySet()) {
                    BigInteger qid = asInt(q.getKey());
                    BigInteger off = asInt(q.getValue());
                    if (qid == null || qid.signum() < 0 || qid.compareTo(BigInteger.valueOf(JAVA_INT_MAX)) > 0) {
                        throw new FormatError("offsetTable[" + reprValue(key) + "]: queue id " + reprValue(q.getKey())
                                + " is not a Java int >= 0", file, -1);
                    }
                    if (off == null || !fitsLong(off)) {
                        throw new FormatError("offsetTable[" + reprValue(key) + "][" + qid + "]: offset "
                                + reprValue(q.getValue()) + " is not a Java long", file, -1);
                    }
                    parsed.put(qid.longValue(), off.longValue());
                }
                table.put((String) key, parsed);
            }
        }
        LinkedHashMap<Object, Object> others = new LinkedHashMap<>();
        for (Map.Entry<Object, Object> e : doc.entrySet()) if (!"offsetTable".equals(e.getKey())) others.put(e.getKey(), e.getValue());
        return new Table(table, others, file);
    }

    /** fastjson pretty form, fields sorted (encode_consumer_offsets). */
    public static String encode(Table table) {
        LinkedHashMap<Object, Object> doc = new LinkedHashMap<>(table.otherFields);
        doc.put("offsetTable", table.offsetTable);
        return FastJson.write(doc);
    }

    // ------------------------------------------------------------------ reads

    /** The current table (NAME, else NAME.bak); empty when neither exists.  Never creates anything. */
    public Table load() {
        Table t = ConfigFiles.loadWithBak(path(), ConsumerOffsetsFile::decode);
        return t != null ? t : new Table(new LinkedHashMap<>(), new LinkedHashMap<>(), null);
    }

    public TreeMap<String, TreeMap<Integer, Long>> offsetsForGroup(String group) {
        return load().offsetsForGroup(group);
    }

    /** offsets_for_group as JSON {"topic": {"queueId": offset}} (for callers across py4j). */
    public String offsetsForGroupJson(String group) {
        try {
            return new com.fasterxml.jackson.databind.ObjectMapper().writeValueAsString(offsetsForGroup(group));
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    // ------------------------------------------------------------------ commit

    /**
     * Merges {topic: {queueId: nextOffset}} of {@code group} into the file (commit): other groups,
     * queue ids and fields are kept; an offset below the stored one is ignored unless
     * {@code allowRewind}.  Returns the offsets in effect for the queues given.  Arguments are
     * checked as the Python path checks them (Map values of any integral Number type).
     */
    public Map<String, Map<Integer, Long>> commit(String group, Map<?, ?> offsets, boolean allowRewind) {
        checkName("group", group);
        if (offsets == null) throw new OptionError("offsets must be a mapping {topic: {queueId: offset}}");
        LinkedHashMap<String, LinkedHashMap<Long, Long>> wanted = new LinkedHashMap<>();
        for (Map.Entry<?, ?> t : offsets.entrySet()) {
            checkName("topic", t.getKey());
            String topic = (String) t.getKey();
            if (!(t.getValue() instanceof Map)) {
                throw new OptionError("offsets[" + Repr.of(topic) + "] must be a mapping {queueId: offset}");
            }
            for (Map.Entry<?, ?> q : ((Map<?, ?>) t.getValue()).entrySet()) {
                Long qid = integral(q.getKey());
                Long off = integral(q.getValue());
                if (qid == null || qid < 0 || qid > JAVA_INT_MAX) {
                    throw new OptionError("topic " + Repr.of(topic) + ": queue id " + reprValue(q.getKey())
                            + " is not an int in [0, 2^31-1]");
                }
                if (off == null || off < 0) {
                    throw new OptionError("topic " + Repr.of(topic) + " queue " + qid + ": offset " + reprValue(q.getValue())
                            + " is not an int in [0, 2^63-1]");
                }
                wanted.computeIfAbsent(topic, x -> new LinkedHashMap<>()).put(qid, off);
            }
        }
        checkWritable();
        Map<String, Map<Integer, Long>> effective = new LinkedHashMap<>();
        locked(() -> {
            if (ConfigRdb.usesConfigRdb(root, storeConfig)) {      // a config-v2 broker's store (ConfigRdb)
                Map<String, Map<Integer, Long>> asked = new LinkedHashMap<>();
                for (Map.Entry<String, LinkedHashMap<Long, Long>> t : wanted.entrySet()) {
                    for (Map.Entry<Long, Long> q : t.getValue().entrySet()) {
                        asked.computeIfAbsent(t.getKey(), x -> new LinkedHashMap<>()).put(q.getKey().intValue(), q.getValue());
                    }
                }
                effective.putAll(ConfigRdb.commitGroupOffsets(root, group, asked, allowRewind, clockMs));
                return;
            }
            Table current = load();
            LinkedHashMap<String, LinkedHashMap<Long, Long>> table = new LinkedHashMap<>();
            for (Map.Entry<String, LinkedHashMap<Long, Long>> e : current.offsetTable.entrySet()) {
                table.put(e.getKey(), new LinkedHashMap<>(e.getValue()));
            }
            boolean changed = false;
            for (Map.Entry<String, LinkedHashMap<Long, Long>> t : wanted.entrySet()) {
                LinkedHashMap<Long, Long> stored = table.computeIfAbsent(t.getKey() + SEPARATOR + group,
                        x -> new LinkedHashMap<>());
                for (Map.Entry<Long, Long> q : t.getValue().entrySet()) {
                    Long old = stored.get(q.getKey());
                    long off = q.getValue();
                    if (old == null || off > old || (allowRewind && off != old)) {
                        stored.put(q.getKey(), off);
                        changed = true;
                    }
                    effective.computeIfAbsent(t.getKey(), x -> new LinkedHashMap<>())
                            .put(q.getKey().intValue(), stored.get(q.getKey()));
                }
            }
            LinkedHashMap<Object, Object> others;
            if (current.sourceFile == null && current.otherFields.isEmpty() && v5) {
                others = new LinkedHashMap<>();
                LinkedHashMap<Object, Object> dv = new LinkedHashMap<>();
                dv.put("counter", 0L);
                dv.put("stateVersion", 0L);
                dv.put("timestamp", clockMs.getAsLong());
                others.put("dataVersion", dv);
                others.put("groupTopicMap", new LinkedHashMap<>());
            } else {
                others = new LinkedHashMap<>(current.otherFields);
            }
            boolean restore = current.sourceFile != null && !current.sourceFile.equals(path().toString());
            if (changed || restore) write(table, others);   // restore: NAME was missing/corrupt, .bak was used
            // The group a broker started on this store would serve (BrokerConfigs; a no-op once it is there).
            BrokerConfigs.recordSubscriptionGroup(root, group, v5, clockMs);
        });
        return effective;
    }

    /** A Java integral number (not a Boolean) as a long, else null. */
    private static Long integral(Object v) {
        if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) {
            return ((Number) v).longValue();
        }
        if (v instanceof BigInteger && fitsLong((BigInteger) v)) return ((BigInteger) v).longValue();
        return null;
    }

    private void write(LinkedHashMap<String, LinkedHashMap<Long, Long>> table, LinkedHashMap<Object, Object> others) {
        Object dv = others.get("dataVersion");
        if (dv instanceof Map) {
            LinkedHashMap<Object, Object> bumped = new LinkedHashMap<>((Map<?, ?>) dv);
            Object counter = bumped.get("counter");
            bumped.put("counter", counter instanceof Long ? (Long) counter + 1
                    : counter instanceof BigInteger ? ((BigInteger) counter).add(BigInteger.ONE) : (Object) 1L);
            bumped.put("timestamp", clockMs.getAsLong());
            others.put("dataVersion", bumped);
        }
        if (others.containsKey("groupTopicMap")) {
            LinkedHashMap<Object, Object> map = new LinkedHashMap<>();
            for (String key : table.keySet()) {
                String[] parts = key.split(SEPARATOR, -1);
                if (parts.length != 2) continue;
                @SuppressWarnings("unchecked")
                TreeSet<String> topics = (TreeSet<String>) map.computeIfAbsent(parts[1], x -> new TreeSet<String>());
                topics.add(parts[0]);
            }
            others.put("groupTopicMap", map);
        }
        String text = encode(new Table(table, others, null));
        ConfigFiles.string2File(path(), text.getBytes(StandardCharsets.UTF_8), old -> {
            try {
                decode(old, path().toString());
                return true;
            } catch (FormatError e) {
                return false;
            }
        });
    }

    // ------------------------------------------------------------------ locks

    /** StoreLockedError when a running broker holds the store: its config/ is not ours to write (check_writable). */
    public void checkWritable() {
        StoreLockState state = StoreLockState.of(root.resolve("lock"));
        if (state.byBroker()) {
            throw new StoreLockedError(root + " is in use by a running broker (" + state.describeHolder() + "): the "
                    + "broker keeps consumer offsets in memory and rewrites config/" + FILE_NAME + " every few seconds, "
                    + "so rmqsource does not commit there. Commit through the broker instead (a RocketMQ consumer of "
                    + "the group, or mqadmin resetOffsetByTime), or read without consumerGroup (a Spark checkpoint "
                    + "keeps the stream's offsets)");
        }
    }

    /** Runs {@code body} holding the JVM-wide lock and the POSIX record lock of the lock file. */
    private void locked(Runnable body) {
        Path lockFile = lockPath();
        ReentrantLock jvm = IN_PROCESS.computeIfAbsent(lockFile.toAbsolutePath().normalize().toString(),
                x -> new ReentrantLock());
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(lockTimeoutMs);
        try {
            if (!jvm.tryLock(lockTimeoutMs, TimeUnit.MILLISECONDS)) throw timedOut(lockFile);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new StoreLockedError(lockFile + ": interrupted while waiting for the consumer-offset lock");
        }
        try {
            java.nio.file.Files.createDirectories(lockFile.getParent());
            try (FileChannel ch = FileChannel.open(lockFile, StandardOpenOption.READ, StandardOpenOption.WRITE,
                    StandardOpenOption.CREATE)) {
                FileLock held = null;
                long delayMs = 1;
                while (held == null) {
                    held = ch.tryLock();
                    if (held != null) break;
                    if (System.nanoTime() >= deadline) throw timedOut(lockFile);
                    Thread.sleep(delayMs);
                    delayMs = Math.min(delayMs * 2, 50);
                }
                body.run();
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new StoreLockedError(lockFile + ": interrupted while waiting for the consumer-offset lock");
        } finally {
            jvm.unlock();
        }
    }

    private StoreLockedError timedOut(Path lockFile) {
        return new StoreLockedError(lockFile + ": another process held the consumer-offset lock for more than "
                + lockTimeoutMs + " ms");
    }
}
