package io.rmqsource.store;

import io.rmqsource.format.ConsumeQueue;
import io.rmqsource.format.DLedgerFormat;
import io.rmqsource.format.Record;
import java.nio.ByteBuffer;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Whether a store's ConsumeQueues account for every record of its CommitLog, exactly once, and
 * so can answer a whole-store count without reading a record.
 *
 * They do when the live units of all queues, taken in CommitLog order, tile the CommitLog's valid
 * range [min offset, valid end): each unit starts where the previous one ended, except where a
 * segment ends in its BLANK record and where a prepared or rolled-back transaction half (no row of
 * a whole-store read, no unit either) lies between two units: those entries are checked in place.
 * Any other record with no unit (a tail dispatch has not reached, a ConsumeQueue cut short), two
 * units for one record (multi-dispatch) or units out of order break the tiling, and the count is
 * then read from the CommitLog as before.
 *
 * In a DLedger data file each record follows its 48-byte entry header, and a DLedger blank ends the file.
 *
 * One pass over the units, merged across queues through a small table keyed by each queue's next
 * unit's offset: the unit that continues the tiling is found by a lookup, not a sort.
 */
public final class QueueTiling {
    private static final int CHUNK = 2048;

    private QueueTiling() {
    }

    /**
     * Live units per queue when the ConsumeQueues tile the CommitLog of {@code reader}; else null
     * (also when the queues hold more than {@code maxUnits} units: too long a walk for one thread).
     */
    public static Map<QueueKey, Long> countsIfTiled(StoreReader reader, long maxUnits) {
        if (!reader.hasConsumeQueueFiles()) return null;      // units re-derived: dispatch may have skipped records
        List<QueueKey> keys = reader.queueKeys();
        long start = reader.commitLog.minOffset();
        long end = reader.commitLogMaxOffset();
        Cursor[] cursors = new Cursor[keys.size()];
        HeadTable heads = new HeadTable(keys.size());
        Map<QueueKey, Long> counts = new LinkedHashMap<>();
        long units = 0;
        for (int i = 0; i < keys.size(); i++) {
            QueueKey k = keys.get(i);
            if (k.topic.startsWith("%LMQ%")) return null;       // light message queues hold second units of records
            QueueUnits q = reader.consumeQueue(k.topic, k.queueId);
            long max = reader.queueMaxOffset(q);
            cursors[i] = new Cursor(q, reader.queueMinOffset(q, max), max);
            units += max - cursors[i].off;
            if (units > maxUnits) return null;
        }
        for (int i = 0; i < keys.size(); i++) {
            if (!cursors[i].advance(start) || (cursors[i].live() && !heads.put(cursors[i].phy(), i))) return null;
        }
        Record record = new Record();
        Segments segments = reader.commitLog.segments;
        DLedgerEntry entry = reader.commitLog.isDLedger() ? new DLedgerEntry() : null;
        long pos = start;
        while (heads.size > 0) {
            long rec = entry == null ? pos : entry.recordAt(segments, pos);
            int i = heads.take(rec);
            if (i < 0) {
                pos = skipEntryWithoutUnit(segments, pos, record, entry);
                if (pos < 0) return null;
                continue;
            }
            Cursor c = cursors[i];
            if (rec != pos && c.size() != entry.header.bodyLen) return null;
            pos = rec + c.size();
            c.count++;
            if (!c.next() || (c.live() && !heads.put(c.phy(), i))) return null;
        }
        while (pos < end) {
            pos = skipEntryWithoutUnit(segments, pos, record, entry);
            if (pos < 0) return null;
        }
        if (pos != end) return null;
        for (int i = 0; i < keys.size(); i++) counts.put(keys.get(i), cursors[i].count);
        return counts;
    }

    /**
     * Where the next unit must start when the entry at {@code pos} is no row of a whole-store read
     * and has no unit: a BLANK record ending its segment (then the next segment's start) or a
     * prepared / rolled-back transaction half (then the record's end); -1 for anything else.
     */
    private static long skipEntryWithoutUnit(Segments segments, long pos, Record record, DLedgerEntry entry) {
        Segment seg = segments.find(pos);
        if (seg == null) return -1;
        long segEnd = seg.startOffset + segments.lengthOf(seg);
        long at = pos - seg.startOffset;
        Segments.Window w = seg.dledger ? segments.whole(seg) : segments.look(seg, at, 8, Segments.LOOK_BYTES);
        long available = Math.min(segEnd - seg.startOffset, w.fileLength) - at;
        if (available < 8) return -1;
        if (seg.dledger) {
            DLedgerFormat.decodeEntry(w.buf, at, at + available, entry.header);
            if (entry.header.kind == DLedgerFormat.BLANK) return entry.header.blankBytes == segEnd - pos ? segEnd : -1;
            long rec = entry.recordAt(segments, pos);
            if (rec == pos) return -1;
            pos = rec;
            at = rec - seg.startOffset;
            available = entry.header.bodyLen;
        }
        ByteBuffer b = w.buf;
        if (b.getInt(w.at(at) + 4) == Record.BLANK_MAGIC) return b.getInt(w.at(at)) == segEnd - pos ? segEnd : -1;
        int total = b.getInt(w.at(at));
        if (total < 8 || total > available || total > segments.files.maxRecordBytes()) return -1;
        if (!w.covers(at, total)) w = segments.look(seg, at, total, total);
        if (record.decode(w.buf, w.at(at), total, -1) != null || record.phyOffset != pos) return -1;
        return record.isPreparedOrRollback() ? pos + record.totalSize : -1;
    }

    /** The entry header before each record of a DLedger data file (the tiling steps over it). */
    private static final class DLedgerEntry {
        final DLedgerFormat.Header header = new DLedgerFormat.Header();

        /**
         * The record offset of the entry at {@code pos} when a DLedger data file holds a valid entry header
         * there (magic, pos, size), else {@code pos} (a CommitLog position, or no entry).
         */
        long recordAt(Segments segments, long pos) {
            Segment seg = segments.find(pos);
            if (seg == null || !seg.dledger) return pos;
            ByteBuffer b = segments.map(seg);
            long at = pos - seg.startOffset;
            DLedgerFormat.decodeEntry(b, at, Math.min(segments.lengthOf(seg), b.capacity()), header);
            if (header.kind != DLedgerFormat.ENTRY || DLedgerFormat.headerProblem(header, pos, null) != null) return pos;
            return pos + DLedgerFormat.ENTRY_HEADER_BYTES;
        }
    }

    /** One queue's live units [from, to), read a chunk at a time; pre-blank units are passed over. */
    private static final class Cursor {
        final QueueUnits queue;
        final long to;
        long off;
        long count;
        final long[] phy = new long[CHUNK];
        final int[] size = new int[CHUNK];
        final long[] code = new long[CHUNK];
        int len;
        int at;

        Cursor(QueueUnits queue, long from, long to) {
            this.queue = queue;
            this.off = from;
            this.to = to;
        }

        boolean live() {
            return at < len;
        }

        long phy() {
            return phy[at];
        }

        int size() {
            return size[at];
        }

        /** Moves to the first unit at or after the current one that is not pre-blank; false on a bad unit. */
        boolean advance(long commitLogStart) {
            while (true) {
                if (at >= len) {
                    if (off >= to) return true;
                    int want = (int) Math.min(CHUNK, to - off);
                    len = queue.read(off, want, phy, size, code);
                    at = 0;
                    if (len < want) return false;
                    off += len;
                }
                if (size[at] != ConsumeQueue.PRE_BLANK_SIZE) return size[at] > 0 && phy[at] >= commitLogStart;
                at++;
            }
        }

        boolean next() {
            at++;
            return advance(Long.MIN_VALUE);
        }
    }

    /** Open-addressing table from a queue's next unit offset to the queue (at most one entry per queue). */
    private static final class HeadTable {
        final long[] key;
        final int[] value;
        final int mask;
        int size;

        HeadTable(int queues) {
            int cap = Integer.highestOneBit(Math.max(4, queues) * 4 - 1) << 1;
            key = new long[cap];
            value = new int[cap];
            java.util.Arrays.fill(value, -1);
            mask = cap - 1;
        }

        private int slot(long k) {
            return (int) ((k * 0x9E3779B97F4A7C15L) >>> 40) & mask;
        }

        /** Adds k; false when another queue's next unit already starts there (two units, one record). */
        boolean put(long k, int v) {
            int s = slot(k);
            while (value[s] >= 0) {
                if (key[s] == k) return false;
                s = (s + 1) & mask;
            }
            key[s] = k;
            value[s] = v;
            size++;
            return true;
        }

        /** Removes and returns the queue whose next unit starts at k, or -1. */
        int take(long k) {
            int s = slot(k);
            while (value[s] >= 0) {
                if (key[s] == k) {
                    int v = value[s];
                    value[s] = -1;
                    size--;
                    // re-insert the rest of the probe run so lookups past the hole still find their keys
                    for (int t = (s + 1) & mask; value[t] >= 0; t = (t + 1) & mask) {
                        long rk = key[t];
                        int rv = value[t];
                        value[t] = -1;
                        size--;
                        put(rk, rv);
                    }
                    return v;
                }
                s = (s + 1) & mask;
            }
            return -1;
        }
    }
}
