package io.rmqsource.spark;

import io.rmqsource.spark.RmqInputPartition.QueueRange;
import io.rmqsource.spark.errors.CorruptRecordError;
import io.rmqsource.spark.errors.DataLossError;
import io.rmqsource.spark.format.ConsumeQueue;
import io.rmqsource.spark.format.Record;
import io.rmqsource.spark.format.TagsCode;
import io.rmqsource.spark.store.QueueUnits;
import io.rmqsource.spark.store.Segment;
import io.rmqsource.spark.store.Segments;
import java.nio.ByteBuffer;
import java.util.List;
import org.apache.spark.sql.types.StructType;

/**
 * Topic reads: ConsumeQueue offsets [start, end) of queues, rows in queue order (twin of
 * _read_queue_range in batch.py).  Units are read a batch at a time; units whose tagsCode cannot
 * match the tag filter are skipped without touching the CommitLog; each remaining record is read
 * at its offset through the mapped segment and must say that offset in its PHYSICALOFFSET.
 *
 * Reusable by a stream: {@link #of} takes a planned store, one queue range, the columns and a tag
 * filter, and defers decoding the costly columns to their first access (Spark prunes no columns
 * of a stream).
 */
final class ConsumeQueueRangeReader extends RecordBatchReader {
    private static final int LOOKAHEAD = 8;
    private final List<QueueRange> ranges;
    private final Segments segments;
    private final long lastSegmentEnd;
    private int rangeIndex = -1;
    private QueueRange range;
    private QueueUnits queue;
    private Topic topic;
    private int[] tagHashes;
    private long off;
    // the current chunk of units
    private final long[] phy;
    private final int[] size;
    private final long[] code;
    private int chunkLen;
    private int chunkPos;
    private long chunkStart;
    // look-ahead: units [chunkPos, ahead) of the chunk were examined, `inFlight` of them touched
    private int ahead;
    private int inFlight;
    private long touchSink;

    ConsumeQueueRangeReader(ReadSpec spec, StoreRef store, List<QueueRange> ranges, StructType schema) {
        super(spec, store, schema);
        this.ranges = ranges;
        this.segments = reader.commitLog.segments;
        List<Segment> list = segments.list;
        lastSegmentEnd = list.isEmpty() ? 0 : list.get(list.size() - 1).startOffset
                + segments.lengthOf(list.get(list.size() - 1));
        int n = spec.batchRows;
        phy = new long[n];
        size = new int[n];
        code = new long[n];
    }

    /**
     * Batches of the records at ConsumeQueue offsets [start, end) of topic:queueId in {@code store}
     * (its valid end pinned at planning), for the {@code columns} asked and, when {@code tags} is not
     * null, only the records whose TAGS is one of them (units filtered on tagsCode first).
     */
    static ConsumeQueueRangeReader of(StoreRef store, String topic, int queueId, long start, long end,
                                      StructType columns, java.util.Set<String> tags, RmqOptions options) {
        PushedFilters pushed = new PushedFilters();
        pushed.tags = tags;
        return new ConsumeQueueRangeReader(new ReadSpec(options, pushed, columns, true, end - start), store,
                List.of(new QueueRange(topic, queueId, start, end)), columns);
    }

    private boolean nextRange() {
        rangeIndex++;
        if (rangeIndex >= ranges.size()) return false;
        range = ranges.get(rangeIndex);
        queue = reader.consumeQueue(range.topic, range.queueId);
        if (queue == null) {
            throw new DataLossError("queue " + range.topic + ":" + range.queueId + " of " + store.root + " disappeared");
        }
        topic = new Topic(range.topic);
        record.trustedTopic = Record.topicProblem(ByteBuffer.wrap(topic.utf8), 0, topic.utf8.length) == null
                ? topic.utf8 : null;
        boolean codesMeaningful = !TagsCode.SCHEDULE_TOPIC.equals(range.topic) && !store.config.enableConsumeQueueExt();
        tagHashes = codesMeaningful ? spec.tagHashes : null;   // else a deliver time / ext address: exact check only
        off = range.start;
        chunkLen = chunkPos = 0;
        return true;
    }

    /** Reads the next chunk of units and applies the data-loss and valid-end checks to all of it. */
    private void readChunk() {
        int count = (int) Math.min(phy.length, range.end - off);
        int n = queue.read(off, count, phy, size, code);
        if (n < count) {
            throw new CorruptRecordError("ConsumeQueue " + range.topic + ":" + range.queueId + " ends at unit " + (off + n)
                    + ", the plan expected " + range.end, queue.where(), (off + n) * ConsumeQueue.UNIT_SIZE);
        }
        long clMin = store.commitLogMin;
        int firstLost = -1;
        int lastLost = -1;
        for (int i = 0; i < n; i++) {
            if (size[i] != ConsumeQueue.PRE_BLANK_SIZE && (phy[i] < clMin || phy[i] + size[i] > lastSegmentEnd)) {
                if (firstLost < 0) firstLost = i;
                lastLost = i;
            }
        }
        if (firstLost >= 0 && spec.options.failOnDataLoss) {
            throw new DataLossError(range.topic + ":" + range.queueId + " in " + store.root + ": queue offsets "
                    + (off + firstLost) + ".." + (off + lastLost) + " point at CommitLog offsets " + phy[firstLost] + ".."
                    + phy[lastLost] + ", which were deleted (the CommitLog now starts at " + clMin
                    + "); set failOnDataLoss=false to skip them");
        }
        for (int i = 0; i < n; i++) {
            boolean live = size[i] != ConsumeQueue.PRE_BLANK_SIZE;
            boolean lost = live && (phy[i] < clMin || phy[i] + size[i] > lastSegmentEnd);
            if (lost) {
                size[i] = 0;                          // skipped below
            } else if (live && phy[i] + size[i] > store.commitLogMax) {
                throw new CorruptRecordError("ConsumeQueue unit " + (off + i) + " of " + range.topic + ":" + range.queueId
                        + " points past the valid CommitLog end " + store.commitLogMax, queue.where(),
                        (off + i) * ConsumeQueue.UNIT_SIZE);
            }
        }
        chunkStart = off;
        chunkLen = n;
        chunkPos = 0;
        ahead = 0;
        inFlight = 0;
        off += n;
    }

    @Override
    protected boolean fill() {
        while (true) {
            if (range == null || (chunkPos >= chunkLen && off >= range.end)) {
                if (!nextRange()) return false;
                continue;
            }
            if (chunkPos >= chunkLen) readChunk();
            while (chunkPos < chunkLen) {
                if (columns.full()) return true;
                int i = chunkPos++;
                if (!wanted(i)) {
                    if (live(i) && tagHashes != null && !ConsumeQueue.tagMatches(code[i], tagHashes)) unitsSkipped++;
                    continue;
                }
                if (i < ahead) inFlight--;
                touchAhead(i);
                readRecord(phy[i], size[i], code[i]);
            }
        }
    }

    /** Not a pre-blank unit, nor one whose record was deleted (size cleared by readChunk). */
    private boolean live(int i) {
        return size[i] != ConsumeQueue.PRE_BLANK_SIZE && size[i] > 0;
    }

    /** Whether unit i of the chunk names a record to read (live, tagsCode matching, in the pushed range). */
    private boolean wanted(int i) {
        if (!live(i)) return false;
        if (tagHashes != null && !ConsumeQueue.tagMatches(code[i], tagHashes)) return false;
        long p = phy[i];
        return p >= spec.pushed.phyOffset[0] && p < spec.pushed.phyOffset[1];
    }

    /**
     * Touches the records of the next {@link #LOOKAHEAD} wanted units, one load per cache line.
     * Records of a queue lie far apart in the CommitLog, so the hardware prefetcher cannot help and
     * each decode would wait for its own misses one after the other (every field's position depends
     * on the previous one); independent loads issued ahead overlap those misses.
     */
    private void touchAhead(int current) {
        if (ahead <= current) {
            ahead = current + 1;
            inFlight = 0;
        }
        while (inFlight < LOOKAHEAD && ahead < chunkLen) {
            int j = ahead++;
            if (!wanted(j)) continue;
            inFlight++;
            Segment seg = segments.find(phy[j]);
            if (seg == null) continue;
            ByteBuffer b = segments.map(seg);
            long pos = phy[j] - seg.startOffset;
            int s = size[j];
            if (pos < 0 || pos + s > b.capacity()) continue;       // readRecord reports it
            long x = 0;
            for (int k = 0; k < s; k += 64) x += b.get((int) pos + k);
            touchSink += x + b.get((int) pos + s - 1);
        }
    }

    private void readRecord(long p, int s, long unitCode) {
        Segment seg = segments.find(p);
        if (seg == null) {
            throw new DataLossError("CommitLog offset " + p + " of " + store.root + " is in no segment (deleted?)");
        }
        ByteBuffer b = segments.map(seg);
        long pos = p - seg.startOffset;
        if (pos + s > b.capacity()) {
            long got = Math.max(0, b.capacity() - pos);
            throw new CorruptRecordError("file ends before the record at CommitLog offset " + (p + got), seg.path, pos + got);
        }
        decode(b, (int) pos, s, s, seg.path);
        if (record.phyOffset != p) {
            throw new CorruptRecordError("ConsumeQueue " + range.topic + ":" + range.queueId + " unit points at CommitLog "
                    + "offset " + p + " but the record there says " + record.phyOffset, seg.path, pos);
        }
        if (!rowMask(false)) return;
        emit(b, record.trustedTopicMatched || record.topicEquals(b, topic.utf8) ? topic : null,
                unitCode, true, seg.path);
    }
}
