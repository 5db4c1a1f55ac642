package io.rmqsource.store;

import io.rmqsource.format.ConsumeQueue;
import io.rmqsource.format.Properties;
import io.rmqsource.format.Record;
import java.nio.ByteBuffer;

/**
 * The store walks of the views the store layer chooses rows for (Timers, Transactions; twins of
 * {@code _queue_units}, {@code _record} and {@code _first_at_or_after} in rmqsource/store/timers.py): the live
 * units of a queue, the record at a CommitLog offset decoded into {@link #rec} / {@link #props}, and the first
 * unit of a queue stored at or after a time.
 */
final class RecordWalk {
    /** At most this many units of one queue are walked. */
    static final long MAX_UNITS = 1L << 31;
    static final int CHUNK = 4096;

    final StoreReader reader;
    final Record rec = new Record();
    final Properties props = new Properties();
    private final Segments segments;
    private ByteBuffer buf;

    RecordWalk(StoreReader reader) {
        this.reader = reader;
        this.segments = reader.commitLog.segments;
    }

    /** Decode the record at phy into rec/props; false when none holds together there. */
    boolean load(long phy, int size) {
        Segment seg = segments.find(phy);
        if (seg == null || size < Record.MIN_RECORD_BYTES || size > segments.files.maxRecordBytes()) return false;
        long pos = phy - seg.startOffset;
        Segments.Window w = segments.look(seg, pos, size, Math.max(size, Segments.LOOK_BYTES));
        if (!w.covers(pos, size)) w = segments.readWindow(seg, pos, size);
        if (pos + size > w.fileLength) return false;
        buf = w.buf;
        int at = w.at(pos);
        if (rec.decode(buf, at, Math.min((long) size, (long) buf.capacity() - at), size) != null) return false;
        if (rec.phyOffset != phy) return false;
        props.parse(buf, rec.propsPos, rec.propsLen);
        return true;
    }

    /** The loaded record's topic. */
    String topic() {
        return StoreReader.utf8(buf, rec.topicPos, rec.topicLen);
    }

    /** A property of the loaded record, else null. */
    String prop(byte[] name) {
        int e = props.find(name);
        return e < 0 ? null : props.valueString(e);
    }

    /** The loaded record's body bytes (as stored). */
    byte[] body() {
        byte[] out = new byte[rec.bodyLen];
        for (int i = 0; i < out.length; i++) out[i] = buf.get(rec.bodyPos + i);
        return out;
    }

    /** Units of a queue from start (its min when negative): calls back (queue offset, phy, size, code). */
    interface UnitVisitor {
        boolean visit(long qoff, long phy, int size, long code);
    }

    void units(String topic, int queueId, long start, UnitVisitor v) {
        QueueUnits q = reader.consumeQueue(topic, queueId);
        if (q == null) return;
        long hi = reader.queueMaxOffset(q);
        long lo = reader.queueMinOffset(q, hi);
        long off = start < 0 ? lo : Math.max(lo, start);
        hi = Math.min(hi, off + MAX_UNITS);
        long[] phy = new long[CHUNK];
        int[] size = new int[CHUNK];
        long[] code = new long[CHUNK];
        long clMin = reader.commitLog.minOffset();
        while (off < hi) {
            int n = q.read(off, (int) Math.min(CHUNK, hi - off), phy, size, code);
            if (n <= 0) return;
            for (int i = 0; i < n; i++) {
                if (size[i] > 0 && size[i] != ConsumeQueue.PRE_BLANK_SIZE && phy[i] >= clMin) {
                    if (!v.visit(off + i, phy[i], size[i], code[i])) return;
                }
            }
            off += n;
        }
    }

    /** First queue offset whose record was stored at or after ts (store times ascend along a queue). */
    long firstAtOrAfter(String topic, int queueId, long ts) {
        QueueUnits q = reader.consumeQueue(topic, queueId);
        long hi = reader.queueMaxOffset(q);
        long a = reader.queueMinOffset(q, hi);
        long b = hi;
        long[] p = new long[1];
        int[] s = new int[1];
        long[] c = new long[1];
        long clMin = reader.commitLog.minOffset();
        while (a < b) {
            long mid = (a + b) >>> 1;
            boolean ok = q.unit(mid, p, s, c) && s[0] > 0 && p[0] >= clMin && load(p[0], s[0]);
            if (ok && rec.storeTimestamp >= ts) b = mid;
            else a = mid + 1;
        }
        return a;
    }
}
