package io.rmqsource.spark.read;

import io.rmqsource.spark.read.RmqInputPartition.Lookup;
import io.rmqsource.errors.CorruptRecordError;
import io.rmqsource.format.Record;
import io.rmqsource.store.Segment;
import io.rmqsource.store.Segments;
import java.nio.ByteBuffer;
import org.apache.spark.sql.types.StructType;

/**
 * msgId / uniqKey point reads: the records at planned CommitLog offsets (twin of read_lookup in
 * queue_range.py).  An offset that holds no record start is skipped (a msgId can name any offset); a
 * record that starts but does not hold together is an error naming file and offset.
 */
final class LookupReader extends RecordBatchReader {
    /** Bytes of the one read that finds a record off a mapped file (most records are shorter). */
    static final int LOOKUP_READ_BYTES = 8192;
    private final Lookup part;
    private final Segments segments;
    private int next;

    LookupReader(ReadSpec spec, Lookup part, StructType schema) {
        super(spec, part.store, schema);
        this.part = part;
        this.segments = reader.commitLog.segments;
    }

    @Override
    protected boolean fill() {
        while (next < part.offsets.length) {
            if (columns.full()) return true;
            readAt(part.offsets[next++]);
        }
        return false;
    }

    private void readAt(long phy) {
        Segment seg = segments.find(phy);
        if (seg == null || phy - seg.startOffset + 8 > seg.sizeBytes) return;
        long pos = phy - seg.startOffset;
        // Off a mapped file: one small read, and a second one only for a record longer than it.
        Segments.Window w = segments.look(seg, pos, 8, LOOKUP_READ_BYTES);
        if (pos + 8 > w.fileLength) return;
        int total = w.buf.getInt(w.at(pos));
        int magic = w.buf.getInt(w.at(pos) + 4);
        if ((magic != Record.MAGIC_V1 && magic != Record.MAGIC_V2) || total < Record.MIN_RECORD_BYTES) return;
        if (phy + total > store.commitLogMax) return;
        if (pos + total > w.fileLength) {
            long got = w.fileLength - pos;
            throw new CorruptRecordError("file ends before the record at CommitLog offset " + (phy + got), seg.path,
                    pos + got);
        }
        if (total > segments.files.maxRecordBytes()) throw Segments.tooLong(seg, pos, total, segments.files);
        if (!w.covers(pos, total)) w = segments.readWindow(seg, pos, total);
        ByteBuffer b = w.buf;
        base = w.base;
        decode(b, w.at(pos), total, -1, seg.path);
        if (record.phyOffset != phy || !rowMask(true)) return;
        Topic topic = topic(b, record);
        if (part.queues == null && dropInternalTopics && topic.internal) return;
        boolean valid = unitTagsCode(topic, record);
        long code = valid ? lastUnitTagsCode() : 0;
        if (part.queues != null) {
            long[] range = part.queues.get(topic.name + "\0" + record.queueId);
            if (range == null || record.queueOffset < range[0] || record.queueOffset >= range[1] || !valid) return;
        }
        emit(b, topic, code, valid, seg.path);
    }
}
