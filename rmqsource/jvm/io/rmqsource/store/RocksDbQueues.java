package io.rmqsource.store;

import io.rmqsource.errors.CorruptRecordError;
import io.rmqsource.errors.UnsupportedLayoutError;
import io.rmqsource.format.RocksDbQueue;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.rocksdb.ColumnFamilyDescriptor;
import org.rocksdb.ColumnFamilyHandle;
import org.rocksdb.DBOptions;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksDBException;
import org.rocksdb.RocksIterator;

/**
 * The ConsumeQueues of a RocksDB database (storeType=defaultRocksDB), twin of RocksDbQueueStore in
 * rmqsource/store/rocksdb_queue.py: the queues (each (topic, queueId) with a "max" entry in column family
 * "offset") and per queue a {@link QueueUnits} over column family "default", so the reader, planning and
 * streams above never know which they got.  Opened with {@code RocksDB.openReadOnly} (rocksdbjni, which Spark
 * ships): nothing in the broker's folder is written, locked or renamed.  A read-only open is a snapshot: one
 * per folder and process, opened anew when the folder's listing changed (a broker still writing).  Local
 * folders only (a database cannot be opened off an object store: StoreLayout refuses that first).
 */
public final class RocksDbQueues {
    private static final Map<String, RocksDbQueues> OPENED = new HashMap<>();

    public final String folder;
    private final String signature;
    private final RocksDB db;
    private final ColumnFamilyHandle units;
    private final ColumnFamilyHandle offsets;
    private final Map<QueueKey, long[]> maxEntries;

    private RocksDbQueues(String folder, String signature) {
        this.folder = folder;
        this.signature = signature;
        RocksDB.loadLibrary();
        List<ColumnFamilyDescriptor> cfs = List.of(new ColumnFamilyDescriptor(RocksDB.DEFAULT_COLUMN_FAMILY),
                new ColumnFamilyDescriptor(RocksDbQueue.OFFSET_CF.getBytes(StandardCharsets.UTF_8)));
        List<ColumnFamilyHandle> handles = new ArrayList<>();
        try (DBOptions options = new DBOptions()) {
            options.setCreateIfMissing(false);
            this.db = RocksDB.openReadOnly(options, folder, cfs, handles, false);
        } catch (RocksDBException e) {
            throw new UnsupportedLayoutError("cannot open the RocksDB ConsumeQueue database read-only: "
                    + e.getMessage(), folder, -1, e);
        }
        this.units = handles.get(0);
        this.offsets = handles.get(1);
        this.maxEntries = readMaxEntries();
    }

    /** The process's read-only open of {@code folder}; a new one when its files changed since. */
    public static RocksDbQueues open(String folder) {
        String key = new File(folder).getAbsolutePath();
        String sig = signature(key);
        synchronized (OPENED) {
            RocksDbQueues q = OPENED.get(key);
            if (q == null || !q.signature.equals(sig)) {   // an old snapshot stays open for queues still using it
                q = new RocksDbQueues(key, sig);
                OPENED.put(key, q);
            }
            return q;
        }
    }

    /** Names, sizes and modification times of the folder's files: what changes when the broker writes. */
    private static String signature(String folder) {
        File[] files = new File(folder).listFiles();
        if (files == null) throw new UnsupportedLayoutError("no RocksDB database here", folder, -1);
        Arrays.sort(files);
        StringBuilder sb = new StringBuilder();
        for (File f : files) {
            if (f.isFile()) sb.append(f.getName()).append(':').append(f.length()).append(':').append(f.lastModified()).append(';');
        }
        return sb.toString();
    }

    private Map<QueueKey, long[]> readMaxEntries() {
        Map<QueueKey, long[]> out = new TreeMap<>();
        try (RocksIterator it = db.newIterator(offsets)) {
            for (it.seekToFirst(); it.isValid(); it.next()) {
                RocksDbQueue.OffsetKey k = RocksDbQueue.decodeOffsetKey(it.key());
                long[] v = RocksDbQueue.decodeOffsetValue(it.value());
                if (k == null || v == null || !k.max || k.queueId < 0) continue;
                out.put(new QueueKey(k.topic, k.queueId), v);
            }
        }
        return out;
    }

    /** (topic, queueId) of every queue with a unit, sorted. */
    public List<QueueKey> listQueues() {
        return new ArrayList<>(maxEntries.keySet());
    }

    /** The queue's units, or null when the database holds none for it. */
    public QueueUnits queue(String topic, int queueId, int unitsPerFile) {
        long[] last = maxEntries.get(new QueueKey(topic, queueId));
        return last == null ? null : new Queue(topic, queueId, last[1] + 1, unitsPerFile);
    }

    /** One queue's units in column family "default" (twin of RocksDbConsumeQueue). */
    final class Queue extends QueueUnits {
        private final long max;
        private final int unitsPerFile;
        private final byte[] prefix;
        private long first = -1;
        private long maxPhysic = Long.MIN_VALUE;

        Queue(String topic, int queueId, long max, int unitsPerFile) {
            super(topic, queueId);
            this.max = max;
            this.unitsPerFile = unitsPerFile;
            this.prefix = RocksDbQueue.cqQueuePrefix(topic, queueId);
        }

        @Override
        public long maxOffset() {
            return max;
        }

        @Override
        public long maxPhysicOffset() {
            if (maxPhysic == Long.MIN_VALUE) {
                long[] p = new long[1];
                int[] s = new int[1];
                long[] c = new long[1];
                maxPhysic = max > 0 && read(max - 1, 1, p, s, c) == 1
                        && s[0] != io.rmqsource.format.ConsumeQueue.PRE_BLANK_SIZE ? p[0] + s[0] : -1;
            }
            return maxPhysic;
        }

        /** The lowest queue offset with a unit (units below were compacted away, or never written). */
        @Override
        public long firstFileStartOffset() {
            if (first < 0) {
                try (RocksIterator it = db.newIterator(units)) {
                    it.seek(prefix);
                    first = it.isValid() && RocksDbQueue.isCqKeyOf(it.key(), prefix)
                            ? RocksDbQueue.queueOffsetOfCqKey(it.key()) : max;
                }
            }
            return first;
        }

        @Override
        public int unitsPerFile() {
            return unitsPerFile;
        }

        @Override
        public String where() {
            return folder + " (RocksDB ConsumeQueue " + topic + ":" + queueId + ")";
        }

        @Override
        public long positionOf(long offset) {
            return 0;
        }

        @Override
        public boolean hasFileFor(long offset) {
            return offset >= firstFileStartOffset();
        }

        /** Units [start, start + count) clipped to [0, max), present without a gap from start. */
        @Override
        public int read(long start, int count, long[] phy, int[] size, long[] code) {
            long s = Math.max(0, start);
            long e = Math.min(max, start + Math.max(0, count));
            if (e <= s) return 0;
            int n = 0;
            try (RocksIterator it = db.newIterator(units)) {
                it.seek(RocksDbQueue.cqKey(prefix, s));
                while (s + n < e && it.isValid()) {
                    byte[] k = it.key();
                    if (!RocksDbQueue.isCqKeyOf(k, prefix) || RocksDbQueue.queueOffsetOfCqKey(k) != s + n) break;
                    byte[] v = it.value();
                    if (v.length != RocksDbQueue.CQ_VALUE_SIZE) {
                        throw new CorruptRecordError("RocksDB ConsumeQueue " + topic + ":" + queueId + " unit "
                                + (s + n) + " has a " + v.length + "-byte value, expected "
                                + RocksDbQueue.CQ_VALUE_SIZE, folder, 0);
                    }
                    phy[n] = RocksDbQueue.phyOffset(v);
                    size[n] = RocksDbQueue.size(v);
                    code[n] = RocksDbQueue.tagsCode(v);
                    n++;
                    it.next();
                }
            }
            return n;
        }
    }
}
