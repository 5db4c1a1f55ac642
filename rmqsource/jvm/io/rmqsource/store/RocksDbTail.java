package io.rmqsource.store;

import io.rmqsource.format.Properties;
import io.rmqsource.format.Record;
import io.rmqsource.format.TagsCode;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Units a RocksDB ConsumeQueue database does not hold yet, dispatched from the CommitLog as the broker does
 * (twin of CommitLogTail in rmqsource/store/rocksdb_tail.py, where the why is told in full).  A broker writes
 * its units without a WAL into memtables that flush rarely (atomically, every column family at once), so the
 * database holds exactly the units before its dispatch checkpoint; the broker's own recovery dispatches the
 * CommitLog again from there, and so does this: NOT/COMMIT records, the tags code of dispatch, LMQ copies
 * from INNER_MULTI_DISPATCH / INNER_MULTI_QUEUE_OFFSET, CRC checked (a record still being written ends the
 * walk).  One tail per database snapshot and delay levels; it only grows, and {@link #view} freezes it.
 */
public final class RocksDbTail {
    static final byte[] INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    static final byte[] INNER_MULTI_QUEUE_OFFSET =
            "INNER_MULTI_QUEUE_OFFSET".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    static final String LMQ_PREFIX = "%LMQ%";
    static final int LMQ_QUEUE_ID = 0;

    /** One queue's units past the database, queue offsets {@code firstOffset} on, frozen at a count. */
    static final class Frozen {
        final long firstOffset;
        final int count;
        final long[] phy;
        final int[] size;
        final long[] code;

        Frozen(long firstOffset, int count, long[] phy, int[] size, long[] code) {
            this.firstOffset = firstOffset;
            this.count = count;
            this.phy = phy;
            this.size = size;
            this.code = code;
        }

        long endOffset() {
            return firstOffset + count;
        }

        /**
         * After {@code n} units of [s, e) read from what precedes the tail (a database, files), the tail's units
         * of the rest, when they follow without a gap; returns the units now in the arrays.
         */
        int readAfter(long s, long e, int n, long[] phy, int[] size, long[] code) {
            if (e <= firstOffset || s + n < firstOffset) return n;
            long lo = Math.max(s, firstOffset);
            int from = (int) (lo - firstOffset);
            int take = (int) Math.min(e - lo, count - from);
            if (take <= 0) return n;
            System.arraycopy(this.phy, from, phy, n, take);
            System.arraycopy(this.size, from, size, n, take);
            System.arraycopy(this.code, from, code, n, take);
            return n + take;
        }
    }

    final long start;
    private long end;
    private final Map<QueueKey, Long> nextOffsets;
    private final long[] delays;
    private final boolean checkCrc;
    private final int unitsPerFile;
    // Each queue's units as they grow (arrays only appended to: a grown array is a new one, so a frozen view
    // of the first count units stays as it was).
    private final Map<QueueKey, RederivedQueue> queues = new HashMap<>();
    private final Record record = new Record();
    private final Properties props = new Properties();
    // The last record walked (its CommitLog offset, size and bytes as decoded), read again by settle.
    private long lastOffset = -1;
    private int lastSize;
    private byte[] lastBytes = new byte[0];

    /** {@code nextOffsets}: each queue's next offset in the database (a record below it is there already). */
    RocksDbTail(long start, Map<QueueKey, Long> nextOffsets, long[] delays) {
        this(start, nextOffsets, delays, true, 0);
    }

    private RocksDbTail(long start, Map<QueueKey, Long> nextOffsets, long[] delays, boolean checkCrc,
                        int unitsPerFile) {
        this.start = start;
        this.end = start;
        this.nextOffsets = nextOffsets;
        this.delays = delays;
        this.checkCrc = checkCrc;
        this.unitsPerFile = unitsPerFile;
    }

    /**
     * Every queue's units dispatched from the CommitLog's first record, as the broker's recovery rebuilds a
     * consumequeue/ that holds nothing (LMQ copies included); twin of _rederived_queues in rmqsource/store/reader.py.
     */
    static Map<QueueKey, RederivedQueue> rederive(CommitLog commitLog, long[] delays, boolean checkCrc,
                                                  int unitsPerFile) {
        RocksDbTail tail = new RocksDbTail(commitLog.minOffset(), new HashMap<>(), delays, checkCrc, unitsPerFile);
        tail.extend(commitLog);
        return new java.util.TreeMap<>(tail.queues);
    }

    /**
     * Each queue's units of the records from {@code start} (the file queues' max physical end) to the
     * CommitLog's valid end, {@code nextOffsets} each file queue's max offset (a record below it is in the
     * files already): the records a writer killed before its dispatch left, as the broker's recovery
     * dispatches them; twin of _undispatched_tail in rmqsource/store/reader.py.
     */
    static Map<QueueKey, Frozen> dispatchPast(CommitLog commitLog, long start, Map<QueueKey, Long> nextOffsets,
                                              long[] delays, boolean checkCrc, int unitsPerFile) {
        RocksDbTail tail = new RocksDbTail(start, nextOffsets, delays, checkCrc, unitsPerFile);
        tail.extend(commitLog);
        return tail.view();
    }

    /** Walks the records written since the last walk (from the checkpoint the first time). */
    synchronized void extend(CommitLog commitLog) {
        if (commitLog.list().isEmpty()) return;
        long[] at = {Math.max(end, commitLog.minOffset())};
        lastOffset = -1;
        commitLog.walk(at[0], checkCrc, (kind, seg, b, pos, offset, size) -> {
            if (kind == Record.MESSAGE) {
                keepLast(b, pos, offset, (int) size);
                dispatch(b, pos, offset, (int) size);
            }
            at[0] = offset + size;
            return true;
        }, null);
        end = Math.max(end, settle(commitLog, at[0]));
    }

    private void keepLast(ByteBuffer b, int pos, long offset, int size) {
        if (lastBytes.length < size) lastBytes = new byte[Math.max(size, 2 * lastBytes.length)];
        b.get(pos, lastBytes, 0, size);
        lastOffset = offset;
        lastSize = size;
    }

    /**
     * The walk's last record read again, after its decoding (twin of CommitLogTail._settle). A record the broker
     * was still copying in when it was read (body whole, so its CRC checked, properties not yet) reads differently
     * now: its units are taken back and the walk ends before it, so the next walk reads it whole.
     */
    private long settle(CommitLog commitLog, long walkEnd) {
        if (lastOffset < 0 || lastOffset + lastSize != walkEnd || commitLog.isDLedger()) return walkEnd;
        byte[] again = commitLog.bytesAt(lastOffset, lastSize);
        if (again != null && java.util.Arrays.equals(again, 0, lastSize, lastBytes, 0, lastSize)) return walkEnd;
        long taken = lastOffset;
        // A queue left empty was made by this record alone (a queue's first unit comes with it).
        queues.values().removeIf(q -> q.dropLastIf(taken) && q.count == 0);
        return taken;
    }

    /** Each queue's tail as walked so far. */
    synchronized Map<QueueKey, Frozen> view() {
        Map<QueueKey, Frozen> out = new HashMap<>();
        for (Map.Entry<QueueKey, RederivedQueue> e : queues.entrySet()) {
            RederivedQueue q = e.getValue();
            out.put(e.getKey(), new Frozen(q.firstFileStartOffset(), q.count, q.phy, q.size, q.code));
        }
        return out;
    }

    private void dispatch(ByteBuffer b, int pos, long offset, int size) {
        Record r = record;
        r.decode(b, pos, size, -1);
        if (r.isPreparedOrRollback()) return;
        String topic = StoreReader.utf8(b, r.topicPos, r.topicLen);
        props.parse(b, r.propsPos, r.propsLen);
        int t = props.find(Properties.TAGS);
        int d = props.find(Properties.DELAY);
        long code = TagsCode.consumeQueueTagsCode(topic, t < 0 ? null : props.valueString(t),
                d < 0 ? null : props.valueString(d), r.storeTimestamp, delays);
        put(new QueueKey(topic, r.queueId), r.queueOffset, offset, size, code);
        int names = props.find(INNER_MULTI_DISPATCH);
        int offsets = props.find(INNER_MULTI_QUEUE_OFFSET);
        if (names >= 0 && offsets >= 0) {
            dispatchLmq(props.valueString(names), props.valueString(offsets), r.queueId, offset, size, code);
        }
    }

    private void dispatchLmq(String names, String offsets, int queueId, long phy, int size, long code) {
        for (Object[] c : multiDispatchCopies(names, offsets, queueId)) {
            put(new QueueKey((String) c[0], (Integer) c[1]), (Long) c[2], phy, size, code);
        }
    }

    /**
     * {queue, queueId, queueOffset} of each copy a record's multi-dispatch writes (RocketMQ's dispatchLMQ): names
     * and offsets paired by position (none when their counts differ: the broker logs a bug and skips), an offset
     * Long.parseLong refuses skipped, LMQ queues ("%LMQ%" names) are queue 0, any other name the record's queue.
     * Twin of multi_dispatch_copies in rmqsource/store/rocksdb_tail.py.
     */
    public static List<Object[]> multiDispatchCopies(String names, String offsets, int queueId) {
        List<Object[]> out = new ArrayList<>();
        if (names == null || offsets == null || names.isEmpty() || offsets.isEmpty()) return out;
        String[] n = names.split(",", -1);
        String[] o = offsets.split(",", -1);
        if (n.length != o.length) return out;
        for (int i = 0; i < n.length; i++) {
            long queueOffset;
            try {
                queueOffset = Long.parseLong(o[i]);
            } catch (NumberFormatException e) {
                continue;
            }
            out.add(new Object[] {n[i], n[i].startsWith(LMQ_PREFIX) ? LMQ_QUEUE_ID : queueId, queueOffset});
        }
        return out;
    }

    private void put(QueueKey key, long queueOffset, long phy, int size, long code) {
        RederivedQueue q = queues.get(key);
        if (q == null) {
            if (queueOffset < nextOffsets.getOrDefault(key, 0L)) return;       // in the database already
            q = new RederivedQueue(key.topic, key.queueId, queueOffset, unitsPerFile);
            queues.put(key, q);
        }
        if (queueOffset == q.maxOffset()) q.add(phy, size, code);
    }
}
