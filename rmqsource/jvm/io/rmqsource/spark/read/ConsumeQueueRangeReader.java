package io.rmqsource.spark.read;

import io.rmqsource.errors.CorruptRecordError;
import io.rmqsource.errors.DataLossError;
import io.rmqsource.format.ConsumeQueue;
import io.rmqsource.format.Record;
import io.rmqsource.format.TagsCode;
import io.rmqsource.spark.RmqOptions;
import io.rmqsource.spark.read.RmqInputPartition.QueueRange;
import io.rmqsource.store.QueueUnits;
import io.rmqsource.store.Segment;
import io.rmqsource.store.Segments;
import java.nio.ByteBuffer;
import java.util.List;
import org.apache.spark.sql.types.StructType;

/**
 * Topic reads: ConsumeQueue offsets [start, end) of queues (twin of read_queue_range in queue_range.py).
 * Units are read a chunk at a time; units whose tagsCode cannot match the tag filter are skipped
 * without touching the CommitLog; each remaining record is read at its offset and must say that
 * offset in its PHYSICALOFFSET.
 *
 * Mapped files: queue by queue, rows in queue order.  Off a mapped file, several queues are read
 * together in CommitLog order, a span of {@link #sliceBytes} at a time (their records interleave,
 * and a queue at a time would fetch the same CommitLog bytes once per queue), and the wanted
 * records go by ranged reads: a read takes in the next wanted record while the gap to it is at
 * most {@link #MERGE_GAP} (below that a gap costs less to fetch than a request, as Parquet's and
 * ORC's readers merge), up to a window.  Where records are so dense that such reads would take
 * more requests than windows over their span, the gap rule gives way to whole windows, as a
 * whole-store read fetches them (the selectivity switch, {@link #mergeDistance}).  Where the file
 * system has vectored reads (Hadoop 3.3.5+), the chunk's ranged reads are started together, up to
 * {@link #FETCH_AHEAD_WINDOWS} windows of bytes ahead of the record decoded: the file system fetches
 * them concurrently (S3A: one bounded GET each, on its thread pool) while earlier ones are decoded.
 *
 * Reusable by a stream: {@link #of} takes a planned store, one queue range, the columns and a tag
 * filter, and defers decoding the costly columns to their first access (Spark prunes no columns
 * of a stream).
 */
public final class ConsumeQueueRangeReader extends RecordBatchReader {
    private static final int LOOKAHEAD = 8;
    /** Wanted records at most this far apart share one ranged read (positioned reads only). */
    static final long MERGE_GAP = 1 << 20;
    /** Units of one CommitLog span held at once (CommitLog order): bounds a task's memory. */
    static final int MAX_SLICE_UNITS = 1 << 18;
    private static final int PEEK_UNITS = 1024;
    /** Bytes of started vectored reads not yet decoded, in windows: bounds a task's memory as the read-ahead does. */
    static final int FETCH_AHEAD_WINDOWS = 2;
    private final List<QueueRange> ranges;
    private final Segments segments;
    private final long lastSegmentEnd;
    private final boolean commitLogOrder;
    /** CommitLog bytes whose units are taken at once in CommitLog order (halved where they hold too many units). */
    private long sliceBytes;
    // per range: its queue, topic, tag hashes (null: exact check only) and next queue offset to read
    private final QueueUnits[] queues;
    private final Topic[] topics;
    private final int[][] rangeTagHashes;
    private final long[] next;
    private int rangeIndex = -1;        // queue order: the range being read
    private QueueRange range;           // the range of the record being read (errors, emit)
    private Topic topic;
    // the current chunk of units: one range's in queue order, or a span's in CommitLog order
    private long[] phy;
    private int[] size;
    private long[] code;
    private int[] owner;                // index into ranges
    private long[] offset;              // queue offset
    private int[] wantedUnits;          // indexes into the chunk of the units whose records are read
    private int wantedLen;
    private int wantedPos;
    private long maxGap;                // merge distance of the chunk's reads
    private final long[] peekPhy = new long[PEEK_UNITS];
    private final int[] peekSize = new int[PEEK_UNITS];
    private final long[] peekCode = new long[PEEK_UNITS];
    private Segment windowSeg;          // the segment of the window records were last read from
    private Segments.Window window;
    private long touchSink;
    // Vectored reads of the chunk's ranged reads: started ones in record order, and the wanted index
    // up to which reads are started; false once the file system answered that it has none.
    private final java.util.ArrayDeque<Fetch> fetches = new java.util.ArrayDeque<>();
    private int fetchedTo;
    private long fetchBytes;
    private boolean vectored;

    /** One started ranged read: [pos, pos + len) of seg's file, beginning with wanted record {@code first}. */
    private record Fetch(int first, Segment seg, long pos, int len, java.util.concurrent.CompletableFuture<ByteBuffer> data) {}

    ConsumeQueueRangeReader(ReadSpec spec, StoreRef store, List<QueueRange> ranges, StructType schema) {
        super(spec, store, schema);
        this.ranges = ranges;
        this.segments = reader.commitLog.segments;
        List<Segment> list = segments.list;
        lastSegmentEnd = list.isEmpty() ? 0 : list.get(list.size() - 1).startOffset
                + segments.lengthOf(list.get(list.size() - 1));
        commitLogOrder = !segments.files.mapped() && ranges.size() > 1;
        vectored = !segments.files.mapped();
        sliceBytes = 8L * segments.files.windowBytes();
        int n = ranges.size();
        queues = new QueueUnits[n];
        topics = new Topic[n];
        rangeTagHashes = new int[n][];
        next = new long[n];
        for (int k = 0; k < n; k++) next[k] = ranges.get(k).start;
        grow(commitLogOrder ? PEEK_UNITS : spec.batchRows);
    }

    /**
     * Batches of the records at ConsumeQueue offsets [start, end) of topic:queueId in {@code store}
     * (its valid end pinned at planning), for the {@code columns} asked and, when {@code tags} is not
     * null, only the records whose TAGS is one of them (units filtered on tagsCode first).
     */
    public static ConsumeQueueRangeReader of(StoreRef store, String topic, int queueId, long start, long end,
                                      StructType columns, java.util.Set<String> tags, RmqOptions options) {
        PushedFilters pushed = new PushedFilters();
        pushed.tags = tags;
        return new ConsumeQueueRangeReader(new ReadSpec(options, pushed, columns, true, end - start), store,
                List.of(new QueueRange(topic, queueId, start, end)), columns);
    }

    private void grow(int units) {
        if (phy != null && phy.length >= units) return;
        int n = Math.max(units, phy == null ? 0 : 2 * phy.length);
        phy = phy == null ? new long[n] : java.util.Arrays.copyOf(phy, n);
        size = size == null ? new int[n] : java.util.Arrays.copyOf(size, n);
        code = code == null ? new long[n] : java.util.Arrays.copyOf(code, n);
        owner = owner == null ? new int[n] : java.util.Arrays.copyOf(owner, n);
        offset = offset == null ? new long[n] : java.util.Arrays.copyOf(offset, n);
        wantedUnits = new int[n];
    }

    /** Makes range k the one whose records are read (opening its queue on first use). */
    private void select(int k) {
        range = ranges.get(k);
        if (queues[k] == null) {
            QueueUnits q = reader.consumeQueue(range.topic, range.queueId);
            if (q == null) {
                throw new DataLossError("queue " + range.topic + ":" + range.queueId + " of " + store.root + " disappeared");
            }
            queues[k] = q;
            topics[k] = new Topic(range.topic);
            boolean codesMeaningful = !TagsCode.SCHEDULE_TOPIC.equals(range.topic) && !store.config.enableConsumeQueueExt();
            rangeTagHashes[k] = codesMeaningful ? spec.tagHashes : null;   // else a deliver time / ext address: exact check only
        }
        if (topic != topics[k]) {
            topic = topics[k];
            record.trustedTopic = Record.topicProblem(ByteBuffer.wrap(topic.utf8), 0, topic.utf8.length) == null
                    ? topic.utf8 : null;
        }
    }

    /** Units [at, at + count) of range k into the peek buffers; fewer than asked is a queue cut short. */
    private int peek(int k, long at, int count) {
        QueueUnits q = queues[k];
        int n = q.read(at, count, peekPhy, peekSize, peekCode);
        if (n < count) {
            QueueRange r = ranges.get(k);
            throw new CorruptRecordError("ConsumeQueue " + r.topic + ":" + r.queueId + " ends at unit " + (at + n)
                    + ", the plan expected " + r.end, q.fileOf(at + n), q.positionOf(at + n));
        }
        return n;
    }

    /** Queue order: the next chunk of the current range; false when every range is read. */
    private boolean readQueueChunk() {
        while (rangeIndex < 0 || next[rangeIndex] >= ranges.get(rangeIndex).end) {
            if (++rangeIndex >= ranges.size()) return false;
            select(rangeIndex);
        }
        long at = next[rangeIndex];
        int count = (int) Math.min(phy.length, ranges.get(rangeIndex).end - at);
        QueueUnits q = queues[rangeIndex];
        int n = q.read(at, count, phy, size, code);
        if (n < count) {
            throw new CorruptRecordError("ConsumeQueue " + range.topic + ":" + range.queueId + " ends at unit " + (at + n)
                    + ", the plan expected " + range.end, q.fileOf(at + n), q.positionOf(at + n));
        }
        for (int i = 0; i < n; i++) {
            owner[i] = rangeIndex;
            offset[i] = at + i;
        }
        next[rangeIndex] += n;
        checkChunk(n);
        return true;
    }

    /**
     * CommitLog order: the units of every range whose records start in [s, s + sliceBytes), s the
     * lowest record offset any range has next (at most {@link #MAX_SLICE_UNITS}), sorted by
     * record offset; false when every range is read.
     */
    private boolean readSlice() {
        long start = Long.MAX_VALUE;
        for (int k = 0; k < ranges.size(); k++) {
            if (next[k] >= ranges.get(k).end) continue;
            select(k);
            peek(k, next[k], 1);
            start = Math.min(start, peekPhy[0]);
        }
        if (start == Long.MAX_VALUE) return false;
        long[] before = next.clone();
        int n;
        while (true) {
            n = takeSlice(start);
            // Cut by the cap, the slice may lack units of the ranges taken last: they would start the next
            // slice back at this one's start and fetch its bytes again. A slice half as long is tried instead.
            if (n < MAX_SLICE_UNITS || sliceBytes <= segments.files.windowBytes()) break;
            System.arraycopy(before, 0, next, 0, next.length);
            sliceBytes = Math.max(segments.files.windowBytes(), sliceBytes / 2);
        }
        sortByRecordOffset(n);
        checkChunk(n);
        return true;
    }

    /** Units of every range whose records start in [start, start + sliceBytes), at most {@link #MAX_SLICE_UNITS}. */
    private int takeSlice(long start) {
        long sliceEnd = start > Long.MAX_VALUE - sliceBytes ? Long.MAX_VALUE : start + sliceBytes;
        int n = 0;
        for (int k = 0; k < ranges.size() && n < MAX_SLICE_UNITS; k++) {
            long end = ranges.get(k).end;
            boolean past = false;
            while (!past && next[k] < end && n < MAX_SLICE_UNITS) {
                int got = peek(k, next[k], (int) Math.min(Math.min(PEEK_UNITS, end - next[k]), MAX_SLICE_UNITS - n));
                grow(n + got);
                int taken = 0;
                while (taken < got && !(past = peekPhy[taken] >= sliceEnd)) {
                    phy[n] = peekPhy[taken];
                    size[n] = peekSize[taken];
                    code[n] = peekCode[taken];
                    owner[n] = k;
                    offset[n] = next[k] + taken;
                    n++;
                    taken++;
                }
                next[k] += taken;
            }
        }
        return n;
    }

    /** Sorts units [0, n) of the chunk by record offset (each range's units are in order already). */
    private void sortByRecordOffset(int n) {
        Integer[] order = new Integer[n];
        for (int i = 0; i < n; i++) order[i] = i;
        final long[] p = phy;
        java.util.Arrays.sort(order, (a, b) -> Long.compare(p[a], p[b]));
        long[] phy2 = new long[phy.length];
        int[] size2 = new int[phy.length];
        long[] code2 = new long[phy.length];
        int[] owner2 = new int[phy.length];
        long[] offset2 = new long[phy.length];
        for (int i = 0; i < n; i++) {
            int j = order[i];
            phy2[i] = phy[j];
            size2[i] = size[j];
            code2[i] = code[j];
            owner2[i] = owner[j];
            offset2[i] = offset[j];
        }
        phy = phy2;
        size = size2;
        code = code2;
        owner = owner2;
        offset = offset2;
    }

    @Override
    public void close() {
        dropFetches();
        super.close();
    }

    /** Applies the data-loss and valid-end checks to units [0, n) of the chunk and picks the wanted ones. */
    private void checkChunk(int n) {
        long clMin = store.commitLogMin;
        int firstLost = -1;
        int lastLost = -1;
        int firstPastEnd = -1;
        for (int i = 0; i < n; i++) {
            if (size[i] == ConsumeQueue.PRE_BLANK_SIZE) continue;
            if (deleted(i, clMin)) {
                if (firstLost < 0) firstLost = i;
                if (owner[i] == owner[firstLost]) lastLost = i;
            } else if (phy[i] + size[i] > store.commitLogMax && firstPastEnd < 0) {
                firstPastEnd = i;
            }
        }
        if (firstLost >= 0 && spec.options.failOnDataLoss) {
            QueueRange r = ranges.get(owner[firstLost]);
            throw new DataLossError(r.topic + ":" + r.queueId + " in " + store.root + ": queue offsets "
                    + offset[firstLost] + ".." + offset[lastLost] + " point at CommitLog offsets " + phy[firstLost] + ".."
                    + phy[lastLost] + ", which were deleted (the CommitLog now starts at " + clMin
                    + "); set failOnDataLoss=false to skip them");
        }
        if (firstPastEnd >= 0) {
            QueueRange r = ranges.get(owner[firstPastEnd]);
            QueueUnits q = queues[owner[firstPastEnd]];
            throw new CorruptRecordError("ConsumeQueue unit " + offset[firstPastEnd] + " of " + r.topic + ":"
                    + r.queueId + " points past the valid CommitLog end " + store.commitLogMax,
                    q.fileOf(offset[firstPastEnd]), q.positionOf(offset[firstPastEnd]));
        }
        // The units whose records are read: live (not pre-blank, not deleted), tagsCode matching, in the pushed range.
        wantedLen = 0;
        long[] phyRange = spec.pushed.phyOffset;
        for (int i = 0; i < n; i++) {
            if (size[i] <= 0 || size[i] == ConsumeQueue.PRE_BLANK_SIZE || deleted(i, clMin)) continue;
            int[] hashes = rangeTagHashes[owner[i]];
            if (hashes != null && !ConsumeQueue.tagMatches(code[i], hashes)) {
                unitsSkipped++;
                continue;
            }
            if (phy[i] >= phyRange[0] && phy[i] < phyRange[1]) wantedUnits[wantedLen++] = i;
        }
        wantedPos = 0;
        maxGap = mergeDistance();
        dropFetches();
    }

    /** Forgets the started reads (a new chunk, or the reader closing): their bytes are not waited for. */
    private void dropFetches() {
        for (Fetch f : fetches) f.data.cancel(false);
        fetches.clear();
        fetchedTo = 0;
        fetchBytes = 0;
    }

    /**
     * Starts the ranged reads of the wanted records from {@link #fetchedTo} on, as {@link #groupEnd}
     * cuts them, while fewer than {@link #FETCH_AHEAD_WINDOWS} windows of bytes are started and not
     * decoded; one vectored read per run of reads in one segment in file order. A record the reads do
     * not cover (no segment, too long, past the file's end) stops the starts: it is read as without them.
     */
    private void startFetches() {
        long budget = (long) FETCH_AHEAD_WINDOWS * segments.files.windowBytes();
        while (vectored && fetchedTo < wantedLen && fetchBytes < budget) {
            Segment batchSeg = null;
            List<long[]> batch = new java.util.ArrayList<>();
            long batchEnd = -1;
            boolean unread = false;
            int k = fetchedTo;
            while (k < wantedLen && fetchBytes < budget) {
                int j = wantedUnits[k];
                Segment seg = segments.find(phy[j]);
                if (seg == null || size[j] <= 0 || size[j] > segments.files.maxRecordBytes()) {
                    unread = true;                   // read as without vectored reads, with their errors
                    break;
                }
                if (batchSeg != null && (seg != batchSeg || phy[j] < batchEnd)) break;   // next vectored read
                int end = groupEnd(k, seg);
                long start = phy[j];
                long stop = Math.min(phy[wantedUnits[end - 1]] + size[wantedUnits[end - 1]], seg.startOffset + seg.sizeBytes);
                if (stop <= start) {
                    unread = true;
                    break;
                }
                batchSeg = seg;
                batch.add(new long[] {start - seg.startOffset, stop - start, k});
                batchEnd = stop;
                fetchBytes += stop - start;
                k = end;
            }
            if (batch.isEmpty()) {
                if (unread) fetchedTo = wantedLen;
                return;
            }
            long[] pos = new long[batch.size()];
            int[] len = new int[batch.size()];
            for (int i = 0; i < pos.length; i++) {
                pos[i] = batch.get(i)[0];
                len[i] = (int) batch.get(i)[1];
            }
            List<java.util.concurrent.CompletableFuture<ByteBuffer>> data = segments.files.readRanges(batchSeg.path, pos, len);
            if (data == null) {
                vectored = false;                 // no vectored reads here: ranged reads one by one
                dropFetches();
                return;
            }
            for (int i = 0; i < pos.length; i++) {
                fetches.add(new Fetch((int) batch.get(i)[2], batchSeg, pos[i], len[i], data.get(i)));
            }
            fetchedTo = unread ? wantedLen : k;
        }
    }

    /**
     * The wanted index after the last record that one ranged read of wanted record k (in {@code seg})
     * takes in: the wanted records after it in this chunk join while each is in the same segment, after
     * the previous one and at most {@link #maxGap} past it; the read stays within the window size.
     */
    private int groupEnd(int k, Segment seg) {
        int first = wantedUnits[k];
        long start = phy[first];
        long end = start + size[first];
        long segEnd = seg.startOffset + segments.lengthOf(seg);
        long limit = start + Math.max(end - start, segments.files.windowBytes());
        int m = k + 1;
        for (; m < wantedLen; m++) {
            int j = wantedUnits[m];
            long nextStart = phy[j];
            long nextEnd = nextStart + size[j];
            if (nextStart < end || nextEnd > segEnd || nextEnd > limit || nextStart - end > maxGap) break;
            end = nextEnd;
        }
        return m;
    }

    /**
     * The window of the started read beginning with the record being read (wanted record wantedPos - 1,
     * at file position {@code pos} of {@code seg}) once fetched, or null (none started there, or it
     * failed: the caller reads the window itself, and reports what is wrong).
     */
    private Segments.Window fetched(Segment seg, long pos) {
        startFetches();
        int current = wantedPos - 1;
        while (!fetches.isEmpty() && fetches.peekFirst().first < current) {
            Fetch f = fetches.removeFirst();     // a read whose records came from another window
            fetchBytes -= f.len;
            f.data.cancel(false);
        }
        Fetch f = fetches.peekFirst();
        if (f == null || f.first != current || f.seg != seg || f.pos != pos) return null;
        fetches.removeFirst();
        fetchBytes -= f.len;
        ByteBuffer b;
        try {
            b = f.data.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        } catch (java.util.concurrent.ExecutionException | java.util.concurrent.CancellationException e) {
            return null;
        }
        ByteBuffer bytes = b.duplicate();
        bytes.position(0);
        if (bytes.limit() < f.len) return null;
        bytes.limit(f.len);
        startFetches();                          // keep the next reads going while this one is decoded
        return segments.windowOf(seg, pos, bytes.slice());
    }

    @Override
    protected boolean fill() {
        while (true) {
            if (wantedPos >= wantedLen) {
                if (!(commitLogOrder ? readSlice() : readQueueChunk())) return false;
                for (int k = 0; k < Math.min(LOOKAHEAD, wantedLen); k++) touch(wantedUnits[k]);
                continue;
            }
            while (wantedPos < wantedLen) {
                if (columns.full()) return true;
                int i = wantedUnits[wantedPos++];
                if (wantedPos + LOOKAHEAD - 1 < wantedLen) touch(wantedUnits[wantedPos + LOOKAHEAD - 1]);
                select(owner[i]);
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
     * The merge distance of the chunk's reads (positioned reads only): {@link #MERGE_GAP}, or a whole
     * window when reads joining records at most MERGE_GAP apart would take more requests than
     * windows laid end to end over the records' span (dense records: fetched as a whole-store read
     * fetches them, fewer requests for more bytes).  Runs are counted per segment, in the order
     * the records are read.
     */
    private long mergeDistance() {
        if (segments.files.mapped() || wantedLen == 0) return 0;
        long windowBytes = segments.files.windowBytes();
        long gapReads = 0;
        long windows = 0;
        long readStart = -1;
        long readEnd = -1;
        long runStart = -1;
        long runEnd = -1;
        long segStart = -1;
        for (int k = 0; k < wantedLen; k++) {
            int j = wantedUnits[k];
            long p = phy[j];
            long e = p + Math.max(0, size[j]);
            long seg = segments.segmentSize > 0 ? p / segments.segmentSize : 0;
            boolean sameRun = runStart >= 0 && seg == segStart && p >= runEnd;
            if (!sameRun) {
                if (runStart >= 0) windows += (runEnd - runStart + windowBytes - 1) / windowBytes;
                runStart = p;
                segStart = seg;
            }
            runEnd = e;
            if (!sameRun || p - readEnd > MERGE_GAP || e - readStart > windowBytes) {
                gapReads++;
                readStart = p;
            }
            readEnd = e;
        }
        windows += (runEnd - runStart + windowBytes - 1) / windowBytes;
        return gapReads > windows ? windowBytes : MERGE_GAP;
    }

    /** The end of the ranged read of the record being read (wanted record wantedPos - 1): see {@link #groupEnd}. */
    private long coalescedEnd(Segment seg) {
        int last = wantedUnits[groupEnd(wantedPos - 1, seg) - 1];
        return phy[last] + size[last];
    }

    private void readRecord(long p, int s, long unitCode) {
        Segment seg = segments.find(p);
        if (seg == null) {
            throw new DataLossError("CommitLog offset " + p + " of " + store.root + " is in no segment (deleted?)");
        }
        long pos = p - seg.startOffset;
        Segments.Window w = seg == windowSeg ? window : null;
        if (s > segments.files.maxRecordBytes()) throw Segments.tooLong(seg, pos, s, segments.files);
        if (w == null || !w.covers(pos, s)) {
            w = segments.files.mapped() ? segments.window(seg, pos, s) : vectored ? fetched(seg, pos) : null;
            if (w == null) w = segments.readWindow(seg, pos, coalescedEnd(seg) - p);
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
