package io.rmqsource.store;

import io.rmqsource.errors.CorruptRecordError;
import io.rmqsource.errors.UnsupportedLayoutError;
import io.rmqsource.format.RocksDbQueue;
import io.rmqsource.io.ReadOnlyRocksDb;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.rocksdb.ColumnFamilyHandle;
import org.rocksdb.ReadOptions;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksDBException;
import org.rocksdb.RocksIterator;
import org.rocksdb.Slice;

/**
 * The ConsumeQueues of a RocksDB database (storeType=defaultRocksDB), twin of RocksDbQueueStore in
 * rmqsource/store/rocksdb_queue.py: the queues (each (topic, queueId) with a "max" entry in column family
 * "offset") and per queue a {@link QueueUnits} over column family "default", so the reader, planning and
 * streams above never know which they got.  Opened through {@link ReadOnlyRocksDb#shared} (the io layer's one
 * read-only opener: nothing in the broker's folder is written, locked or renamed; one snapshot per folder and
 * process, opened anew when the folder's listing changed).  Local folders only (a database cannot be opened off
 * an object store: StoreLayout refuses that first).  A running broker's newest units are not in the database
 * yet: {@link #at} continues each queue with the units {@link RocksDbTail} dispatches from the CommitLog past
 * the database's checkpoint, as the broker's recovery does.
 */
public final class RocksDbQueues {
    private static final Map<String, RocksDbQueues> OPENED = new java.util.HashMap<>();

    public final String folder;
    private final ReadOnlyRocksDb rocks;
    private final RocksDB db;
    private final ColumnFamilyHandle units;
    private final ColumnFamilyHandle offsets;
    private final Map<QueueKey, long[]> maxEntries;
    private final Map<String, RocksDbTail> tails = new java.util.HashMap<>();   // by delay levels

    private RocksDbQueues(ReadOnlyRocksDb rocks) {
        this.rocks = rocks;
        this.folder = rocks.folder;
        this.db = rocks.db();
        this.units = rocks.columnFamily(ReadOnlyRocksDb.DEFAULT_CF);
        this.offsets = rocks.columnFamily(RocksDbQueue.OFFSET_CF);
        if (offsets == null) {
            throw new UnsupportedLayoutError("cannot open the RocksDB ConsumeQueue database read-only: no column "
                    + "family " + RocksDbQueue.OFFSET_CF, folder, -1);
        }
        this.maxEntries = readMaxEntries();
    }

    /** The process's read-only open of {@code folder}; a new one when its files changed since. */
    public static RocksDbQueues open(String folder) {
        ReadOnlyRocksDb rocks;
        try {
            rocks = ReadOnlyRocksDb.shared(folder);
        } catch (RocksDBException e) {
            throw new UnsupportedLayoutError("cannot open the RocksDB ConsumeQueue database read-only: "
                    + e.getMessage(), new java.io.File(folder).getAbsolutePath(), -1, e);
        }
        synchronized (OPENED) {
            RocksDbQueues q = OPENED.get(rocks.folder);
            if (q == null || q.rocks != rocks) {     // a new snapshot: the old one stays open for queues still using it
                q = new RocksDbQueues(rocks);
                OPENED.put(rocks.folder, q);
            }
            return q;
        }
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

    /** The CommitLog offset the database's units reach (maxPhyOffset); null before the first flush. */
    public Long dispatchCheckpoint() {
        try {
            byte[] v = rocks.get(RocksDbQueue.OFFSET_CF, RocksDbQueue.offsetKey(RocksDbQueue.CHECKPOINT_TOPIC, 0, true));
            return v != null && v.length == 8 ? ByteBuffer.wrap(v).getLong() : null;
        } catch (RocksDBException e) {
            throw new UnsupportedLayoutError("cannot read the RocksDB ConsumeQueue database: " + e.getMessage(),
                    folder, -1, e);
        }
    }

    /** (topic, queueId) -> {CommitLog offset, queue offset} of each queue's last unit in the database, sorted. */
    public Map<QueueKey, long[]> maxEntries() {
        return java.util.Collections.unmodifiableMap(maxEntries);
    }

    /**
     * The database's own units of (topic, queueId) with queue offsets in [start, end), at most
     * {@code offsets.length}, in key order (never the tail): each key's queue offset and its value as stored, of
     * any length (rmq verify checks what is on disk; the readers throw on a malformed value).  A key's queue
     * offset is the 8 bytes after the queue's prefix, so offsets never go down along the keys.  Returns how
     * many were read.  Twin of RocksDbQueueStore.database_units.
     */
    public int databaseUnits(String topic, int queueId, long start, long end, long[] offsets, byte[][] values) {
        byte[] prefix = RocksDbQueue.cqQueuePrefix(topic, queueId);
        int n = 0;
        try (Slice upper = new Slice(RocksDbQueue.cqKey(prefix, end));
             ReadOptions ro = new ReadOptions().setIterateUpperBound(upper);
             RocksIterator it = db.newIterator(units, ro)) {
            for (it.seek(RocksDbQueue.cqKey(prefix, start)); it.isValid() && n < offsets.length; it.next()) {
                offsets[n] = longAt(it.key(), prefix.length);
                values[n] = it.value();
                n++;
            }
        }
        return n;
    }

    /** The 8 bytes of {@code key} from {@code at} as a big-endian long (zeros past its end). */
    private static long longAt(byte[] key, int at) {
        long v = 0;
        for (int i = at; i < at + 8; i++) v = v << 8 | (i < key.length ? key[i] & 0xFF : 0);
        return v;
    }

    /**
     * Where the database's units end in the CommitLog (the readers' tail starts there; verify expects no unit
     * past it): its dispatch checkpoint; without one (a database written before the checkpoint existed) the
     * furthest CommitLog end of a unit there, 0 when it holds none.  Each queue's last unit (its "max" entry) is
     * its furthest: units follow the CommitLog.  Twin of RocksDbQueueStore.dispatch_end in rocksdb_queue.py.
     */
    public long dispatchEnd() {
        Long checkpoint = dispatchCheckpoint();
        if (checkpoint != null) return checkpoint;
        long end = 0;
        long[] offset = new long[1];
        byte[][] value = new byte[1][];
        for (Map.Entry<QueueKey, long[]> e : maxEntries.entrySet()) {
            long queueOffset = e.getValue()[1];
            int n = databaseUnits(e.getKey().topic, e.getKey().queueId, queueOffset, queueOffset + 1, offset, value);
            if (n == 1 && value[0].length == RocksDbQueue.CQ_VALUE_SIZE) {
                end = Math.max(end, RocksDbQueue.phyOffset(value[0]) + RocksDbQueue.size(value[0]));
            } else {
                end = Math.max(end, e.getValue()[0]);     // the entry's unit is missing or malformed: where it starts
            }
        }
        return end;
    }

    /** The tail of this snapshot for {@code delays}, shared by every view of it (it only grows). */
    private RocksDbTail tail(long[] delays) {
        synchronized (tails) {
            return tails.computeIfAbsent(java.util.Arrays.toString(delays), k -> {
                Map<QueueKey, Long> next = new java.util.HashMap<>();
                for (Map.Entry<QueueKey, long[]> e : maxEntries.entrySet()) next.put(e.getKey(), e.getValue()[1] + 1);
                return new RocksDbTail(dispatchEnd(), next, delays);
            });
        }
    }

    /** The queues as they are now: the database's units, then the CommitLog's past them up to its end. */
    public Queues at(StoreLayout layout, long[] delays) {
        RocksDbTail tail = tail(delays);
        tail.extend(new CommitLog(layout));
        return new Queues(tail.view());
    }

    /** One consistent view of the queues (twin of RocksDbQueueStore): the tail as it was when it was taken. */
    public final class Queues {
        private final Map<QueueKey, RocksDbTail.Frozen> tail;
        private final Map<QueueKey, Long> maxOffsets = new TreeMap<>();

        Queues(Map<QueueKey, RocksDbTail.Frozen> tail) {
            this.tail = tail;
            for (Map.Entry<QueueKey, long[]> e : maxEntries.entrySet()) maxOffsets.put(e.getKey(), e.getValue()[1] + 1);
            for (Map.Entry<QueueKey, RocksDbTail.Frozen> e : tail.entrySet()) {
                maxOffsets.merge(e.getKey(), e.getValue().endOffset(), Math::max);
            }
        }

        /** (topic, queueId) of every queue with a unit, sorted. */
        public List<QueueKey> listQueues() {
            return new ArrayList<>(maxOffsets.keySet());
        }

        /** The queue's units, or null when it has none. */
        public QueueUnits queue(String topic, int queueId, int unitsPerFile) {
            QueueKey key = new QueueKey(topic, queueId);
            Long max = maxOffsets.get(key);
            if (max == null) return null;
            long[] last = maxEntries.get(key);
            return new Queue(topic, queueId, max, last == null ? 0 : last[1] + 1, tail.get(key), unitsPerFile);
        }
    }

    /** One queue's units in column family "default" (twin of RocksDbConsumeQueue). */
    final class Queue extends QueueUnits {
        private final long max;
        private final long inDatabase;                // the database holds units below this offset
        private final RocksDbTail.Frozen tail;        // the units past it, from the CommitLog (or null)
        private final int unitsPerFile;
        private final byte[] prefix;
        private long first = -1;
        private long maxPhysic = Long.MIN_VALUE;

        Queue(String topic, int queueId, long max, long inDatabase, RocksDbTail.Frozen tail, int unitsPerFile) {
            super(topic, queueId);
            this.max = max;
            this.inDatabase = inDatabase;
            this.tail = tail;
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
                            ? RocksDbQueue.queueOffsetOfCqKey(it.key()) : tail != null ? tail.firstOffset : max;
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

        /**
         * Units [start, start + count) clipped to [0, max), present without a gap from start.  One iterator pass
         * bounded by the range's end, each value copied into one direct buffer and decoded into the arrays: the
         * keys of one queue have one length, so as many values as units asked for means no gap.  Fewer: the
         * keys are checked to keep the run from start.
         */
        @Override
        public int read(long start, int count, long[] phy, int[] size, long[] code) {
            long s = Math.max(0, start);
            long e = Math.min(max, start + Math.max(0, count));
            if (e <= s) return 0;
            int n = s < inDatabase ? readDatabase(s, Math.min(e, inDatabase), phy, size, code) : 0;
            return tail == null ? n : tail.readAfter(s, e, n, phy, size, code);
        }

        /** The database's units [s, e), present without a gap from s. */
        private int readDatabase(long s, long e, long[] phy, int[] size, long[] code) {
            if (e <= s) return 0;
            int want = (int) (e - s);
            ByteBuffer value = ByteBuffer.allocateDirect(RocksDbQueue.CQ_VALUE_SIZE + 1);
            int n = 0;
            try (Slice upper = new Slice(RocksDbQueue.cqKey(prefix, e));
                 ReadOptions ro = new ReadOptions().setIterateUpperBound(upper);
                 RocksIterator it = db.newIterator(units, ro)) {
                for (it.seek(RocksDbQueue.cqKey(prefix, s)); it.isValid() && n < want; it.next()) {
                    value.clear();
                    int len = it.value(value);
                    if (len != RocksDbQueue.CQ_VALUE_SIZE) throw badValue(s + n, len);
                    phy[n] = value.getLong(0);
                    size[n] = value.getInt(8);
                    code[n] = value.getLong(12);
                    n++;
                }
            }
            return n == want ? n : readChecked(s, e, phy, size, code);
        }

        /** The key-checked read: units from s while their queue offsets follow without a gap. */
        private int readChecked(long s, long e, long[] phy, int[] size, long[] code) {
            int n = 0;
            try (RocksIterator it = db.newIterator(units)) {
                it.seek(RocksDbQueue.cqKey(prefix, s));
                while (s + n < e && it.isValid()) {
                    byte[] k = it.key();
                    if (!RocksDbQueue.isCqKeyOf(k, prefix) || RocksDbQueue.queueOffsetOfCqKey(k) != s + n) break;
                    byte[] v = it.value();
                    if (v.length != RocksDbQueue.CQ_VALUE_SIZE) throw badValue(s + n, v.length);
                    phy[n] = RocksDbQueue.phyOffset(v);
                    size[n] = RocksDbQueue.size(v);
                    code[n] = RocksDbQueue.tagsCode(v);
                    n++;
                    it.next();
                }
            }
            return n;
        }

        private CorruptRecordError badValue(long offset, int length) {
            return new CorruptRecordError("RocksDB ConsumeQueue " + topic + ":" + queueId + " unit " + offset
                    + " has a " + length + "-byte value, expected " + RocksDbQueue.CQ_VALUE_SIZE, folder, 0);
        }
    }
}
