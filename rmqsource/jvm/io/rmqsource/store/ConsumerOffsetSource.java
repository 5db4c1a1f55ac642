package io.rmqsource.store;

import io.rmqsource.errors.OptionError;
import io.rmqsource.errors.StoreError;
import io.rmqsource.format.FastJson;
import io.rmqsource.format.RocksDbConfig;
import io.rmqsource.io.ReadOnlyRocksDb;
import io.rmqsource.io.RocksDbFiles;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * Where the broker keeps committed consumer offsets, and what they are: the twin of
 * rmqsource/store/offset_source.py (which states the sources and their order). {@code config/rdb/} (config v2),
 * else {@code config/metadata/} or {@code config/consumerOffsets/} (5.2 RocksDB config, merged with a newer
 * consumerOffset.json), else {@code config/consumerOffset.json}; {@code config/lmqConsumerOffset.json} merged
 * into the last two. RocksDB is opened read-only through {@link ReadOnlyRocksDb} (the io layer's one opener, which
 * the RocksDB ConsumeQueues use too): nothing in the broker's folder is written.
 */
public final class ConsumerOffsetSource {
    public static final String CONSUMER_OFFSET_FILE = "consumerOffset.json";
    public static final String LMQ_OFFSET_FILE = "lmqConsumerOffset.json";
    public static final String MESSAGE_REQUEST_MODE_FILE = "messageRequestMode.json";
    static final long MAX_ROCKSDB_ENTRIES = 50_000_000L;

    /** kind: rocksdb-v2 | rocksdb-v1 | json | none; path: the folder or file read. */
    public final String kind;
    public final Path path;
    public final boolean writable;

    private ConsumerOffsetSource(String kind, Path path, boolean writable) {
        this.kind = kind;
        this.path = path;
        this.writable = writable;
    }

    public String description() {
        String rel = "config/" + path.getFileName();
        switch (kind) {
            case "rocksdb-v2": return "RocksDB " + rel + "/ (configManagerVersion=v2)";
            case "rocksdb-v1": return "RocksDB " + rel + "/ (storeType=defaultRocksDB, config v1)";
            case "json": return rel;
            default: return "no config/consumerOffset.json and no RocksDB config";
        }
    }

    /** One committed offset. */
    public static final class Entry {
        public final String group;
        public final String topic;
        public final int queueId;
        public final long offset;

        Entry(String group, String topic, int queueId, long offset) {
            this.group = group;
            this.topic = topic;
            this.queueId = queueId;
            this.offset = offset;
        }
    }

    /** The source the broker would load offsets from. */
    public static ConsumerOffsetSource locate(String storeRoot) {
        Path config = Paths.get(storeRoot).resolve("config");
        if (RocksDbFiles.isRocksDb(config.resolve("rdb"))) return new ConsumerOffsetSource("rocksdb-v2", config.resolve("rdb"), true);
        for (String name : new String[] {"metadata", "consumerOffsets"}) {
            if (RocksDbFiles.isRocksDb(config.resolve(name))) return new ConsumerOffsetSource("rocksdb-v1", config.resolve(name), false);
        }
        Path json = config.resolve(CONSUMER_OFFSET_FILE);
        boolean exists = Files.exists(json) || Files.exists(config.resolve(CONSUMER_OFFSET_FILE + ".bak"));
        return new ConsumerOffsetSource(exists ? "json" : "none", json, true);
    }

    /** OptionError (one line) when the broker keeps this store's offsets where rmqsource does not write (the 5.2
     *  RocksDB config; config/rdb of config v2 is written, ConfigRdb). */
    public static void refuseGroupCommit(String storeRoot) {
        ConsumerOffsetSource src = locate(storeRoot);
        if (!src.writable) {
            throw new OptionError("option consumerGroup: " + storeRoot + " keeps consumer offsets in "
                    + src.description() + ", not in config/" + CONSUMER_OFFSET_FILE + " or config/rdb/; rmqsource "
                    + "does not write into that RocksDB, so it does not commit there (set commitOffsets=false to start "
                    + "from the group's offsets without committing)");
        }
    }

    // ------------------------------------------------------------------ loading

    /** Every committed offset, sorted by group, topic, queue id. */
    public List<Entry> load() {
        List<Entry> out = new ArrayList<>();
        Path config = path.getParent();
        if ("rocksdb-v2".equals(kind)) {
            readV2(out);
        } else {
            Map<String, Map<Integer, Long>> table = new LinkedHashMap<>();
            if ("rocksdb-v1".equals(kind)) {
                long kvCounter = readV1(table);
                ConsumerOffsetsFile.Table json = ConfigFiles.loadWithBak(config.resolve(CONSUMER_OFFSET_FILE),
                        ConsumerOffsetsFile::decode);
                if (json != null && counter(json) > kvCounter) {
                    table.clear();
                    putAll(table, json);
                }
            } else if ("json".equals(kind)) {
                ConsumerOffsetsFile.Table json = ConfigFiles.loadWithBak(path, ConsumerOffsetsFile::decode);
                if (json != null) putAll(table, json);
            }
            ConsumerOffsetsFile.Table lmq = ConfigFiles.loadWithBak(config.resolve(LMQ_OFFSET_FILE), ConsumerOffsetsFile::decode);
            if (lmq != null) {
                Map<String, Map<Integer, Long>> lmqTable = new LinkedHashMap<>();
                putAll(lmqTable, lmq);
                for (Map.Entry<String, Map<Integer, Long>> e : lmqTable.entrySet()) table.putIfAbsent(e.getKey(), e.getValue());
            }
            for (Map.Entry<String, Map<Integer, Long>> e : table.entrySet()) {
                String[] parts = e.getKey().split("@", -1);
                if (parts.length != 2) continue;
                for (Map.Entry<Integer, Long> q : e.getValue().entrySet()) {
                    out.add(new Entry(parts[1], parts[0], q.getKey(), q.getValue()));
                }
            }
        }
        out.sort(Comparator.<Entry, String>comparing(e -> e.group).thenComparing(e -> e.topic)
                .thenComparingInt(e -> e.queueId));
        return out;
    }

    public TreeMap<String, TreeMap<Integer, Long>> offsetsForGroup(String group) {
        TreeMap<String, TreeMap<Integer, Long>> out = new TreeMap<>();
        for (Entry e : load()) {
            if (e.group.equals(group)) out.computeIfAbsent(e.topic, t -> new TreeMap<>()).put(e.queueId, e.offset);
        }
        return out;
    }

    /** load() as JSON lines {group, topic, queueId, offset} (for callers across py4j). */
    public String entriesJson() {
        StringBuilder sb = new StringBuilder();
        for (Entry e : load()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("group", e.group);
            m.put("topic", e.topic);
            m.put("queueId", e.queueId);
            m.put("offset", e.offset);
            try {
                sb.append(new com.fasterxml.jackson.databind.ObjectMapper().writeValueAsString(m)).append('\n');
            } catch (com.fasterxml.jackson.core.JsonProcessingException ex) {
                throw new IllegalStateException(ex);
            }
        }
        return sb.toString();
    }

    private static long counter(ConsumerOffsetsFile.Table t) {
        Object dv = t.otherFields.get("dataVersion");
        if (dv instanceof Map) {
            Object c = ((Map<?, ?>) dv).get("counter");
            if (c instanceof Number) return ((Number) c).longValue();
        }
        return 0;
    }

    private static void putAll(Map<String, Map<Integer, Long>> into, ConsumerOffsetsFile.Table t) {
        for (Map.Entry<String, LinkedHashMap<Long, Long>> e : t.offsetTable.entrySet()) {
            Map<Integer, Long> qs = new TreeMap<>();
            for (Map.Entry<Long, Long> q : e.getValue().entrySet()) qs.put(q.getKey().intValue(), q.getValue());
            into.put(e.getKey(), qs);
        }
    }

    // ------------------------------------------------------------------ RocksDB

    private interface DbReader<T> {
        T read(ReadOnlyRocksDb db) throws org.rocksdb.RocksDBException;
    }

    /** Opens the database read-only through the io layer's one opener (nothing in the broker's folder changes). */
    private <T> T withReadOnly(DbReader<T> reader) {
        String what = "rocksdb-v2".equals(kind) ? "configManagerVersion=v2" : "storeType=defaultRocksDB, config v1";
        if (!RocksDbFiles.available()) {
            throw new StoreError(path + ": the broker keeps consumer offsets in RocksDB (" + what
                    + "), and reading them needs rocksdbjni on the classpath (Spark ships it in its jars/)");
        }
        try (ReadOnlyRocksDb db = ReadOnlyRocksDb.open(path.toString())) {
            return reader.read(db);
        } catch (org.rocksdb.RocksDBException e) {
            throw new StoreError(path + ": cannot open the RocksDB config read-only (" + what + "): " + e.getMessage());
        }
    }

    private void readV2(List<Entry> out) {
        byte[] prefix = RocksDbConfig.tablePrefix(RocksDbConfig.TABLE_CONSUMER_OFFSET, RocksDbConfig.RECORD_DATA);
        String file = path.toString();
        withReadOnly(db -> {
            try (org.rocksdb.RocksIterator it = db.newIterator(ReadOnlyRocksDb.DEFAULT_CF)) {
                long n = 0;
                for (it.seek(prefix); it.isValid(); it.next()) {
                    byte[] key = it.key();
                    if (key.length < prefix.length || !Arrays.equals(key, 0, prefix.length, prefix, 0, prefix.length)) break;
                    if (++n > MAX_ROCKSDB_ENTRIES) {
                        throw new StoreError(file + ": more than " + MAX_ROCKSDB_ENTRIES + " records in a consumer offset table");
                    }
                    RocksDbConfig.OffsetKey k = RocksDbConfig.decodeOffsetKey(key, file);
                    out.add(new Entry(k.group, k.topic, k.queueId, RocksDbConfig.decodeOffsetValue(it.value(), file)));
                }
            }
            return null;
        });
    }

    private long readV1(Map<String, Map<Integer, Long>> table) {
        boolean single = path.getFileName().toString().equals("metadata");
        String file = path.toString();
        return withReadOnly(db -> {
            String data = single ? RocksDbConfig.V1_SINGLE_DB_OFFSET_CF : ReadOnlyRocksDb.DEFAULT_CF;
            String version = single ? RocksDbConfig.V1_SINGLE_DB_VERSION_CF : RocksDbConfig.V1_DATA_VERSION_CF;
            // no version column family: a new DataVersion (counter 0)
            long counter = db.hasColumnFamily(version)
                    ? RocksDbConfig.decodeV1DataVersionCounter(db.get(version, RocksDbConfig.V1_DATA_VERSION_KEY)) : 0;
            if (!db.hasColumnFamily(data)) return counter;
            try (org.rocksdb.RocksIterator it = db.newIterator(data)) {
                long n = 0;
                for (it.seekToFirst(); it.isValid(); it.next()) {
                    if (++n > MAX_ROCKSDB_ENTRIES) {
                        throw new StoreError(file + ": more than " + MAX_ROCKSDB_ENTRIES + " records in a consumer offset table");
                    }
                    byte[] key = it.key();
                    table.put(new String(key, java.nio.charset.StandardCharsets.UTF_8),
                            RocksDbConfig.decodeV1OffsetValue(key, it.value(), file));
                }
            }
            return counter;
        });
    }

    // ------------------------------------------------------------------ POP

    /** "topic\u0000group" of the pairs config/messageRequestMode.json names with mode POP. */
    public static Set<String> popPairs(String storeRoot) {
        Path p = Paths.get(storeRoot).resolve("config").resolve(MESSAGE_REQUEST_MODE_FILE);
        Map<Object, Object> doc = ConfigFiles.loadWithBak(p, FastJson::parse);
        Set<String> out = new HashSet<>();
        if (doc == null || !(doc.get("messageRequestModeMap") instanceof Map)) return out;
        for (Map.Entry<?, ?> t : ((Map<?, ?>) doc.get("messageRequestModeMap")).entrySet()) {
            if (!(t.getValue() instanceof Map)) continue;
            for (Map.Entry<?, ?> g : ((Map<?, ?>) t.getValue()).entrySet()) {
                if (g.getValue() instanceof Map && "POP".equalsIgnoreCase(String.valueOf(((Map<?, ?>) g.getValue()).get("mode")))) {
                    out.add(t.getKey() + "\u0000" + g.getKey());
                }
            }
        }
        return out;
    }
}
