package io.rmqsource.store;

import io.rmqsource.errors.OptionError;
import io.rmqsource.errors.StoreError;
import io.rmqsource.format.RocksDbConfig;
import io.rmqsource.io.RocksDbFiles;
import io.rmqsource.io.WritableRocksDb;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.LongSupplier;
import org.rocksdb.RocksDBException;

/**
 * What a config-v2 broker needs in {@code {root}/config/rdb/} to serve a store it did not write: the Java twin of
 * rmqsource/store/config_rdb.py (whose docstring states the rules). Topics routed (table TOPIC, queue numbers only
 * growing), and with a consumerGroup commit the group (table SUBSCRIPTION_GROUP) and its offsets (table
 * CONSUMER_OFFSET, never moved back unless asked); records as the broker writes them, each table's data version
 * one up per record written, in the same batch. The caller holds the store's writer lock or the consumer-offset
 * lock; a running broker holds the database's LOCK too.
 */
public final class ConfigRdb {
    public static final String RDB_DIR = "rdb";
    static final int MAX_RECORDS = 10_000_000;

    private ConfigRdb() {
    }

    public static Path rdbPath(Path storeRoot) {
        return storeRoot.resolve("config").resolve(RDB_DIR);
    }

    /**
     * The settings say configManagerVersion=v2, or they do not say and a v2 broker left config/rdb/ there.
     * configManagerVersion=v1 on a store that has config/rdb/ is refused (OptionError, one line): the readers go by
     * what the store holds and read config/rdb/, so the store alone decides (config_rdb.uses_config_rdb).
     */
    public static boolean usesConfigRdb(Path storeRoot, StoreConfig config) {
        String v = config.configManagerVersion();
        Path folder = rdbPath(storeRoot);
        if (v == null) return RocksDbFiles.isRocksDb(folder);
        if (!v.equals("v2") && RocksDbFiles.isRocksDb(folder)) {
            throw new OptionError("configManagerVersion=" + v + ", but " + folder + " holds the topics, groups and "
                    + "offsets of a config-v2 broker, and readers of this store read them there; leave the setting out "
                    + "(or say v2) to write there too, or move config/rdb/ away first if the next broker runs with "
                    + "configManagerVersion=v1 (it reads only the JSON files)");
        }
        return v.equals("v2");
    }

    /** OptionError (one line) when rocksdbjni is missing: checked before anything is written. */
    public static void requireRocksDb() {
        if (!RocksDbFiles.available()) {
            throw new OptionError("this store's broker keeps topics and groups in RocksDB config/rdb/ "
                    + "(configManagerVersion=v2), and writing them needs rocksdbjni on the classpath (Spark ships it)");
        }
    }

    private interface Work<T> {
        T run(WritableRocksDb db) throws RocksDBException;
    }

    private static <T> T withDb(Path storeRoot, Work<T> work) {
        return Open.withDb(rdbPath(storeRoot).toString(), work);
    }

    /**
     * The open, a class of its own: every writer loads ConfigRdb (usesConfigRdb), with or without rocksdbjni on the
     * classpath, and a method catching RocksDBException makes the JVM's verifier load that class with its own.
     */
    private static final class Open {
        static <T> T withDb(String folder, Work<T> work) {
            try (WritableRocksDb db = new WritableRocksDb(folder, true)) {
                return work.run(db);
            } catch (RocksDBException e) {
                String status = e.getMessage() != null ? e.getMessage().split("\n")[0] : e.toString();
                throw new StoreError(folder + ": cannot open the broker's RocksDB config to record topics and "
                        + "groups: " + status);
            }
        }
    }

    private static Map.Entry<byte[], byte[]> stamp(WritableRocksDb db, short table, long records, long nowMs)
            throws RocksDBException {
        byte[] key = RocksDbConfig.dataVersionKey(table);
        return Map.entry(key, RocksDbConfig.nextDataVersion(db.get(key), records, nowMs));
    }

    /** Routes every topic of queues in config/rdb/; true when something was written. */
    public static boolean recordTopicQueues(Path storeRoot, Iterable<Map.Entry<String, Integer>> queues,
                                            LongSupplier clockMs) {
        TreeMap<String, Integer> nums = BrokerConfigs.queueNums(queues);
        if (nums.isEmpty()) return false;
        return withDb(storeRoot, db -> {
            List<Map.Entry<byte[], byte[]>> puts = new ArrayList<>();
            for (Map.Entry<String, Integer> t : nums.entrySet()) {
                byte[] key = RocksDbConfig.encodeNameKey(RocksDbConfig.TABLE_TOPIC, t.getKey());
                byte[] raw = db.get(key);
                long n = t.getValue();
                if (raw == null) {
                    puts.add(Map.entry(key, RocksDbConfig.encodeConfigValue(BrokerConfigs.topicConfig(t.getKey(), n, true))));
                    continue;
                }
                Map<Object, Object> entry = new LinkedHashMap<>(RocksDbConfig.decodeConfigValue(raw, db.folder));
                boolean grown = false;
                for (String k : new String[] {"readQueueNums", "writeQueueNums"}) {
                    Object v = entry.get(k);
                    if (!(v instanceof Long) || (Long) v < n) {
                        entry.put(k, n);
                        grown = true;
                    }
                }
                if (grown) puts.add(Map.entry(key, RocksDbConfig.encodeConfigValue(entry)));
            }
            if (puts.isEmpty()) return false;
            puts.add(stamp(db, RocksDbConfig.TABLE_TOPIC, puts.size(), clockMs.getAsLong()));
            db.write(puts);
            return true;
        });
    }

    /**
     * Commits {topic: {queueId: nextOffset}} of group into config/rdb/ (and the group when it is new); returns the
     * offsets in effect for the queues given, as ConsumerOffsetsFile.commit does.
     */
    public static Map<String, Map<Integer, Long>> commitGroupOffsets(Path storeRoot, String group,
                                                                     Map<String, Map<Integer, Long>> offsets,
                                                                     boolean allowRewind, LongSupplier clockMs) {
        return withDb(storeRoot, db -> {
            byte[] prefix = RocksDbConfig.offsetGroupPrefix(group, RocksDbConfig.TABLE_CONSUMER_OFFSET);
            Map<String, Long> stored = new LinkedHashMap<>();
            for (byte[][] kv : db.prefixed(prefix, MAX_RECORDS)) {
                RocksDbConfig.OffsetKey k = RocksDbConfig.decodeOffsetKey(kv[0], db.folder);
                stored.put(k.topic + "\u0000" + k.queueId, RocksDbConfig.decodeOffsetValue(kv[1], db.folder));
            }
            Map<String, Map<Integer, Long>> effective = new TreeMap<>();
            List<Map.Entry<byte[], byte[]>> puts = new ArrayList<>();
            for (Map.Entry<String, Map<Integer, Long>> t : new TreeMap<>(offsets).entrySet()) {
                for (Map.Entry<Integer, Long> q : new TreeMap<>(t.getValue()).entrySet()) {
                    long offset = q.getValue();
                    Long old = stored.get(t.getKey() + "\u0000" + q.getKey());
                    if (old == null || offset > old || (allowRewind && offset != old)) {
                        puts.add(Map.entry(RocksDbConfig.encodeOffsetKey(group, t.getKey(), q.getKey(),
                                RocksDbConfig.TABLE_CONSUMER_OFFSET), RocksDbConfig.encodeOffsetValue(offset)));
                        old = offset;
                    }
                    effective.computeIfAbsent(t.getKey(), k -> new TreeMap<>()).put(q.getKey(), old);
                }
            }
            long now = clockMs.getAsLong();
            if (!puts.isEmpty()) puts.add(stamp(db, RocksDbConfig.TABLE_CONSUMER_OFFSET, puts.size(), now));
            byte[] groupKey = RocksDbConfig.encodeNameKey(RocksDbConfig.TABLE_SUBSCRIPTION_GROUP, group);
            if (db.get(groupKey) == null) {
                puts.add(Map.entry(groupKey, RocksDbConfig.encodeConfigValue(BrokerConfigs.groupConfig(group, true))));
                puts.add(stamp(db, RocksDbConfig.TABLE_SUBSCRIPTION_GROUP, 1, now));
            }
            if (!puts.isEmpty()) db.write(puts);
            return effective;
        });
    }
}
