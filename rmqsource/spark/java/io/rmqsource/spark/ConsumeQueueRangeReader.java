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
 * at its offset through the mapped segment and must say that offset in its PHYSICALOFFSET.  Off a
 * mapped file, the records of a chunk are read by ranged reads that take in the wanted neighbours
 * (no request per record where records lie close, at most 3x the bytes of the records read).
 *
 * Reusable by a stream: {@link #of} takes a planned store, one queue range, the columns and a tag
 * filter, and defers decoding the costly columns to their first access (Spark prunes no columns
 * of a stream).
 */
final class ConsumeQueueRangeReader extends RecordBatchReader {
    private static final int LOOKAHEAD = 8;
    /** Records this close always share one ranged read (positioned reads only) ... */
    static final long SMALL_GAP = 4 << 10;
    /** ... and records up to this far apart when the read stays within 3x the bytes of its records. */
    static final long COALESCE_GAP = 256 << 10;
    static final int MAX_READ_PER_RECORD_BYTE = 3;
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
    private final int[] wantedUnits;   // indexes into the chunk of the units whose records are read
    private int wantedLen;
    private int wantedPos;
    private boolean chunkLoaded;
    private Segment windowSeg;          // the segment of the window records were last read from
    private Segments.Window window;
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
        wantedUnits = new int[n];
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
        wantedLen = wantedPos = 0;
        return true;
    }

    /** Reads the next chunk of units and applies the data-loss and valid-end checks to all of it. */
    private void readChunk() {
        int count = (int) Math.min(phy.length, range.end - off);
        int n = queue.read(off, count, phy, size, code);
        if (n < count) {
            throw new CorruptRecordError("ConsumeQueue " + range.topic + ":" + range.queueId + " ends at unit " + (off + n)
                    + ", the plan expected " + range.end, queue.fileOf(off + n), queue.positionOf(off + n));
        }
        long clMin = store.commitLogMin;
        int firstLost = -1;
        int lastLost = -1;
        int firstPastEnd = -1;
        for (int i = 0; i < n; i++) {
            if (size[i] == ConsumeQueue.PRE_BLANK_SIZE) continue;
            if (deleted(i, clMin)) {
                if (firstLost < 0) firstLost = i;
                lastLost = i;
            } else if (phy[i] + size[i] > store.commitLogMax && firstPastEnd < 0) {
                firstPastEnd = i;
            }
        }
        if (firstLost >= 0 && spec.options.failOnDataLoss) {
            throw new DataLossError(range.topic + ":" + range.queueId + " in " + store.root + ": queue offsets "
                    + (off + firstLost) + ".." + (off + lastLost) + " point at CommitLog offsets " + phy[firstLost] + ".."
                    + phy[lastLost] + ", which were deleted (the CommitLog now starts at " + clMin
                    + "); set failOnDataLoss=false to skip them");
        }
        if (firstPastEnd >= 0) {
            throw new CorruptRecordError("ConsumeQueue unit " + (off + firstPastEnd) + " of " + range.topic + ":"
                    + range.queueId + " points past the valid CommitLog end " + store.commitLogMax,
                    queue.fileOf(off + firstPastEnd), queue.positionOf(off + firstPastEnd));
        }
        // The units whose records are read: live (not pre-blank, not deleted), tagsCode matching, in the pushed range.
        wantedLen = 0;
        long[] phyRange = spec.pushed.phyOffset;
        for (int i = 0; i < n; i++) {
            if (size[i] <= 0 || size[i] == ConsumeQueue.PRE_BLANK_SIZE || deleted(i, clMin)) continue;
            if (tagHashes != null && !ConsumeQueue.tagMatches(code[i], tagHashes)) {
                unitsSkipped++;
                continue;
            }
            if (phy[i] >= phyRange[0] && phy[i] < phyRange[1]) wantedUnits[wantedLen++] = i;
        }
        wantedPos = 0;
        off += n;
    }

    @Override
    protected boolean fill() {
        while (true) {
            if (range == null || (wantedPos >= wantedLen && off >= range.end)) {
                if (!nextRange()) return false;
                continue;
            }
            if (wantedPos >= wantedLen) {
                readChunk();
                for (int k = 0; k < Math.min(LOOKAHEAD, wantedLen); k++) touch(wantedUnits[k]);
            }
            while (wantedPos < wantedLen) {
                if (columns.full()) return true;
                int i = wantedUnits[wantedPos++];
                if (wantedPos + LOOKAHEAD - 1 < wantedLen) touch(wantedUnits[wantedPos + LOOKAHEAD - 1]);
                readRecord(phy[i], size[i], code[i]);
            }
        }
    }

    /** Whether unit i of the chunk points at CommitLog bytes that are gone (retention) or not there. */
    private boolean deleted(int i, long commitLogMin) {
        return phy[i] < commitLogMin || phy[i] + size[i] > lastSegmentEnd;
    }

    /**
     * Touches the record of unit j, one load per cache line, {@link #LOOKAHEAD} wanted units ahead
     * of the one decoded.  Records of a queue lie far apart in the CommitLog, so the hardware
     * prefetcher cannot help and each decode would wait for its own misses one after the other
     * (every field's position depends on the previous one); independent loads issued ahead overlap
     * those misses.
     */
    private void touch(int j) {
        if (!segments.files.mapped()) return;         // a positioned read brings whole groups at once
        Segment seg = segments.find(phy[j]);
        if (seg == null) return;
        ByteBuffer b = segments.map(seg);
        long pos = phy[j] - seg.startOffset;
        int s = size[j];
        if (pos < 0 || pos + s > b.capacity()) return;       // readRecord reports it
        long x = 0;
        for (int k = 0; k < s; k += 64) x += b.get((int) pos + k);
        touchSink += x + b.get((int) pos + s - 1);
    }

    /**
     * The end of one ranged read of the record [start, end): the wanted records after it in this
     * chunk join while each is in the same segment, after the previous one, and either within
     * {@link #SMALL_GAP} of it or within {@link #COALESCE_GAP} with the read still at most
     * {@link #MAX_READ_PER_RECORD_BYTE} times the bytes of its records; the read stays within the
     * window size.
     */
    private long coalescedEnd(Segment seg, long start, long end) {
        long segEnd = seg.startOffset + segments.lengthOf(seg);
        long limit = start + Math.max(end - start, segments.files.windowBytes());
        long useful = end - start;
        for (int k = wantedPos; k < wantedLen; k++) {
            int j = wantedUnits[k];
            long next = phy[j];
            long nextEnd = next + size[j];
            if (next < end || nextEnd > segEnd || nextEnd > limit) break;
            long gap = next - end;
            boolean dense = (nextEnd - start) <= MAX_READ_PER_RECORD_BYTE * (useful + size[j]);
            if (gap > SMALL_GAP && !(gap <= COALESCE_GAP && dense)) break;
            useful += size[j];
            end = nextEnd;
        }
        return end;
    }

    private void readRecord(long p, int s, long unitCode) {
        Segment seg = segments.find(p);
        if (seg == null) {
            throw new DataLossError("CommitLog offset " + p + " of " + store.root + " is in no segment (deleted?)");
        }
        long pos = p - seg.startOffset;
        Segments.Window w = seg == windowSeg ? window : null;
        if (w == null || !w.covers(pos, s)) {
            w = segments.files.mapped() ? segments.window(seg, pos, s)
                    : segments.readWindow(seg, pos, coalescedEnd(seg, p, p + s) - p);
            window = w;
            windowSeg = seg;
        }
        ByteBuffer b = w.buf;
        if (pos + s > w.fileLength) {
            long got = Math.max(0, w.fileLength - pos);
            throw new CorruptRecordError("file ends before the record at CommitLog offset " + (p + got), seg.path, pos + got);
        }
        base = w.base;
        decode(b, w.at(pos), s, s, seg.path);
        if (record.phyOffset != p) {
            throw new CorruptRecordError("ConsumeQueue " + range.topic + ":" + range.queueId + " unit points at CommitLog "
                    + "offset " + p + " but the record there says " + record.phyOffset, seg.path, pos);
        }
        if (!rowMask(false)) return;
        emit(b, record.trustedTopicMatched || record.topicEquals(b, topic.utf8) ? topic : null,
                unitCode, true, seg.path);
    }
}
