package io.rmqsource.store;

import io.rmqsource.format.Checkpoint;
import io.rmqsource.format.ConsumeQueue;
import io.rmqsource.io.StoreFiles;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Read-only view of one store (twin of MessageStoreReader in rmqsource/store/reader.py).
 *
 * Opening never writes.  The CommitLog's valid end is computed the way recovery would: from the
 * ConsumeQueues' last unit after a clean shutdown, by the abnormal scan when an abort file says
 * the last run crashed, and capped at what dispatch has seen while a writer holds the lock.
 * A store whose consumequeue/ holds no queue is served from units re-derived from the CommitLog, and a
 * stopped store whose CommitLog runs past its ConsumeQueues (a writer killed between its CommitLog write and
 * its dispatch) has those records dispatched as the broker's recovery does: each queue is its file units
 * followed by its tail units ({@link #undispatchedTail}).
 */
public final class StoreReader implements AutoCloseable {
    public final StoreLayout layout;
    public final StoreConfig config;
    public final CommitLog commitLog;
    private final Long pinnedEnd;
    private List<QueueKey> keysOnDisk;
    private Map<QueueKey, RederivedQueue> rederived;
    private boolean rederivedDone;
    private RocksDbQueues.Queues rocksQueueView;
    private final Map<QueueKey, QueueUnits> queues = new HashMap<>();
    private final Map<QueueKey, QueueUnits> diskQueues = new HashMap<>();
    private java.util.Set<QueueKey> keySetOnDisk;
    private Map<QueueKey, RocksDbTail.Frozen> undispatched;
    private long[] lastUnits;
    private Long maxOffset;
    private Boolean abort;
    private Boolean live;

    public StoreReader(String root, StoreConfig config, Long commitLogEnd) {
        this(StoreFiles.LOCAL, root, config, commitLogEnd);
    }

    /** The store at {@code root} read through {@code files} (local maps or a Hadoop FileSystem). */
    public StoreReader(StoreFiles files, String root, StoreConfig config, Long commitLogEnd) {
        this.config = config;
        this.pinnedEnd = commitLogEnd;
        this.layout = new StoreLayout(files, root, config);
        // A task of a remote store trusts the plan's check (each folder checked costs a request there).
        if (commitLogEnd == null || files.mapped()) layout.checkIsStore();
        this.commitLog = new CommitLog(layout);
    }

    @Override
    public void close() {
        commitLog.segments.close();
    }

    public boolean abortFileExisted() {
        if (abort == null) abort = layout.abortExists();
        return abort;
    }

    /** Whether a writer (or broker) holds the store's lock right now: then the tail is moving. */
    public boolean live() {
        if (live == null) live = abortFileExisted() && isLocked();
        return live;
    }

    /**
     * Whether a process holds a POSIX lock on byte 0 of {root}/lock (the broker's and the writer's),
     * tested without opening, creating or locking the file: the kernel's lock table (/proc/locks)
     * is matched by the file's device and inode, as F_GETLK would answer.  Where that table cannot
     * be read (or the store is not on this machine), nobody visible holds the lock.
     */
    private boolean isLocked() {
        java.nio.file.Path lock = layout.files.localPath(layout.pathOf("lock"));
        return lock != null && StoreLockState.holder(lock, StoreLockState.BROKER_LOCK_BYTE) != 0;
    }

    private Checkpoint checkpoint() {
        byte[] data;
        try {
            data = layout.files.readSmall(layout.pathOf("checkpoint"), 1 << 20);
        } catch (RuntimeException e) {
            data = null;
        }
        return data == null ? new Checkpoint(0, 0, 0) : Checkpoint.decode(data);
    }

    // ------------------------------------------------------------------ queues

    private List<QueueKey> keysOnDisk() {
        if (keysOnDisk == null) keysOnDisk = layout.rocksDbQueues() ? rocksQueueView().listQueues() : layout.listQueues();
        return keysOnDisk;
    }

    /** The RocksDB ConsumeQueues as this reader saw them first (one view: the same queues and ends throughout). */
    private RocksDbQueues.Queues rocksQueueView() {
        if (rocksQueueView == null) rocksQueueView = layout.rocksDbQueueStore(config.messageDelayLevelsMs());
        return rocksQueueView;
    }

    public boolean hasConsumeQueueFiles() {
        return !keysOnDisk().isEmpty();
    }

    private Map<QueueKey, RederivedQueue> rederived() {
        if (rederivedDone) return rederived;
        rederivedDone = true;
        if (!keysOnDisk().isEmpty() || commitLog.list().isEmpty()) return null;
        rederived = RocksDbTail.rederive(commitLog, config.messageDelayLevelsMs(), config.checkCrcOnRecover(),
                config.consumeQueueUnitsPerFile());
        return rederived;
    }

    /**
     * Units of the records past every ConsumeQueue, up to the CommitLog's valid end, for a stopped store with
     * file queues (empty otherwise): the broker's recovery dispatches them (spec 7.3, 7.5), each exactly once;
     * a live store shows only what was dispatched.  Twin of _undispatched_tail in rmqsource/store/reader.py.
     */
    private Map<QueueKey, RocksDbTail.Frozen> undispatchedTail() {
        if (undispatched != null) return undispatched;
        Map<QueueKey, RocksDbTail.Frozen> out = new HashMap<>();
        if (tailPossible() && !live()) {
            long end = commitLogMaxOffset();
            long start = Math.max(lastUnits()[1], commitLog.minOffset());
            if (end > start) {
                Map<QueueKey, Long> next = new HashMap<>();
                for (QueueKey k : keysOnDisk()) next.put(k, queueOnDisk(k).maxOffset());
                Map<QueueKey, RocksDbTail.Frozen> tail = RocksDbTail.dispatchPast(commitLog, start, next,
                        config.messageDelayLevelsMs(), config.checkCrcOnRecover(), config.consumeQueueUnitsPerFile());
                for (Map.Entry<QueueKey, RocksDbTail.Frozen> e : tail.entrySet()) {
                    RocksDbTail.Frozen t = e.getValue();
                    int n = 0;          // units of records at or past the valid end (a pinned end) are not served
                    while (n < t.count && t.phy[n] < end) n++;
                    if (n > 0) out.put(e.getKey(), new RocksDbTail.Frozen(t.firstOffset, n, t.phy, t.size, t.code));
                }
            }
        }
        undispatched = out;
        return out;
    }

    /**
     * Whether the store may have an undispatched tail: file queues and a CommitLog (cheap to tell: whether a
     * writer holds it, and the tail itself, are found only when a question reaches past a queue's files).
     */
    private boolean tailPossible() {
        return !layout.rocksDbQueues() && !keysOnDisk().isEmpty() && !commitLog.list().isEmpty();
    }

    public List<QueueKey> queueKeys() {
        Map<QueueKey, RederivedQueue> re = rederived();
        if (re != null) return new ArrayList<>(re.keySet());
        Map<QueueKey, RocksDbTail.Frozen> tail = undispatchedTail();
        if (!tail.isEmpty()) {
            java.util.TreeSet<QueueKey> all = new java.util.TreeSet<>(keysOnDisk());
            all.addAll(tail.keySet());
            return new ArrayList<>(all);
        }
        return keysOnDisk();
    }

    public List<String> topics() {
        java.util.TreeSet<String> s = new java.util.TreeSet<>();
        for (QueueKey k : queueKeys()) s.add(k.topic);
        return new ArrayList<>(s);
    }

    /** The queue as its files (or the RocksDB database) hold it; null when there is none. */
    private QueueUnits queueOnDisk(QueueKey key) {
        QueueUnits q = diskQueues.get(key);
        if (q == null) {
            if (layout.rocksDbQueues()) {
                q = rocksQueueView().queue(key.topic, key.queueId, config.consumeQueueUnitsPerFile());
            } else {
                if (keySetOnDisk == null) keySetOnDisk = new java.util.HashSet<>(keysOnDisk());
                if (keySetOnDisk.contains(key)) {
                    String dir = layout.queueDirPath(key.topic, key.queueId);
                    q = new ConsumeQueueFiles(layout.files, dir, layout.listConsumeQueueDir(dir), key.topic, key.queueId);
                }
            }
            if (q == null) return null;
            diskQueues.put(key, q);
        }
        return q;
    }

    public QueueUnits consumeQueue(String topic, int queueId) {
        QueueKey key = new QueueKey(topic, queueId);
        QueueUnits q = queues.get(key);
        if (q == null) {
            Map<QueueKey, RederivedQueue> re = rederived();
            if (re != null) {
                q = re.get(key);
            } else {
                q = queueOnDisk(key);
                if (q != null && tailPossible()) {
                    q = new TailedQueue(topic, queueId, q, () -> undispatchedTail().get(key),
                            config.consumeQueueUnitsPerFile());
                } else if (q == null && tailPossible() && undispatchedTail().containsKey(key)) {
                    RocksDbTail.Frozen t = undispatchedTail().get(key);
                    q = new TailedQueue(topic, queueId, null, () -> t, config.consumeQueueUnitsPerFile());
                }
            }
            if (q == null) return null;
            queues.put(key, q);
        }
        return q;
    }

    // ------------------------------------------------------------------ CommitLog end

    /** Valid end of the CommitLog as recovery would find it (commit_log_max_offset). */
    public long commitLogMaxOffset() {
        if (maxOffset == null) maxOffset = pinnedEnd != null ? pinnedEnd : computeMaxOffset();
        return maxOffset;
    }

    private long computeMaxOffset() {
        if (commitLog.list().isEmpty()) return 0;
        boolean crc = config.checkCrcOnRecover();
        if (commitLog.isDLedger()) return dledgerMaxOffset();
        if (abortFileExisted() && !live()) {
            Checkpoint cp = checkpoint();
            long minTs = config.messageIndexEnable() && config.messageIndexSafe() ? cp.minTimestampIndexMs()
                    : cp.minTimestampMs();
            return commitLog.findValidEnd(commitLog.abnormalRecoveryStartIndex(minTs), crc);
        }
        long[] last = lastUnits();
        long lastStart = last[0];
        long maxCqEnd = last[1];
        long end = -1;
        if (lastStart >= commitLog.minOffset() && commitLog.segments.find(lastStart) != null) {
            end = commitLog.findValidEndFrom(lastStart, crc);
            if (end == lastStart) end = -1;
        }
        if (end < 0) {
            List<Segment> segs = commitLog.list();
            int startIndex = Math.max(0, segs.size() - 3);
            if (maxCqEnd >= 0) {
                startIndex = 0;
                for (int i = 0; i < segs.size(); i++) if (segs.get(i).startOffset <= maxCqEnd) startIndex = i;
            }
            end = commitLog.findValidEnd(startIndex, crc);
        }
        if (live()) end = Math.min(end, Math.max(maxCqEnd, commitLog.minOffset()));
        return end;
    }

    /**
     * A DLedger store's end: DLedger recovery's (the same after a crash or a clean shutdown), capped at
     * what dispatch has seen while a writer holds the lock.
     */
    private long dledgerMaxOffset() {
        if (!live()) return DLedgerLog.validEndOfSettledFiles(commitLog);
        return Math.min(DLedgerLog.validEnd(commitLog), Math.max(lastUnits()[1], commitLog.minOffset()));
    }

    /**
     * {start of the latest record a queue's last unit points at, end of the furthest such record}
     * over every queue on disk, -1 each when no queue has a unit.
     */
    private long[] lastUnits() {
        if (lastUnits == null) lastUnits = computeLastUnits();
        return lastUnits;
    }

    private long[] computeLastUnits() {
        long lastStart = -1;
        long maxCqEnd = -1;
        long[] p = new long[1];
        int[] s = new int[1];
        long[] c = new long[1];
        for (QueueKey key : keysOnDisk()) {
            QueueUnits q = queueOnDisk(key);
            if (q.maxOffset() > q.firstFileStartOffset() && q.unit(q.maxOffset() - 1, p, s, c)
                    && s[0] != ConsumeQueue.PRE_BLANK_SIZE) {
                lastStart = Math.max(lastStart, p[0]);
                maxCqEnd = Math.max(maxCqEnd, p[0] + s[0]);
            }
        }
        return new long[] {lastStart, maxCqEnd};
    }

    public long queueMaxOffset(QueueUnits q) {
        return q.cappedMaxOffset(commitLogMaxOffset());
    }

    public long queueMinOffset(QueueUnits q, long maxOffset) {
        return q.minOffset(commitLog.minOffset(), config.isV5(), maxOffset);
    }

    static String utf8(ByteBuffer b, int pos, int len) {
        byte[] out = new byte[len];
        b.get(pos, out, 0, len);
        return new String(out, StandardCharsets.UTF_8);
    }
}
