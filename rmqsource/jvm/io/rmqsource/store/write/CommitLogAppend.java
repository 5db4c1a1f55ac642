package io.rmqsource.store.write;

import io.rmqsource.errors.StoreError;
import io.rmqsource.format.RecordEncoder;
import io.rmqsource.format.TagsCode;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.zip.CRC32;

/**
 * The CommitLog appender of a {@link MessageStoreWriter} (twin of rmqsource/store/commitlog_append.py): a
 * batch encoded into chunks of a segment, the chunks written in order by the write thread while the next
 * ones are encoded, each written chunk acknowledged (results, queue offsets) and dispatched (ConsumeQueue
 * units, IndexFile keys); END_OF_FILE blanks and the roll to the next segment.  Runs under the writer's
 * putLock; the store's state (segments, dispatcher, writable, error ...) is the writer's.
 */
final class CommitLogAppend {
    private final MessageStoreWriter w;
    private final CRC32 crc = new CRC32();
    // Chunks: one encoded while the other is written by the write thread.
    private final Chunk[] ring = {new Chunk(), new Chunk(), new Chunk(), new Chunk()};
    private int curIndex;
    private Chunk cur = ring[0];
    /** Chunks handed to the write thread and not acknowledged yet, oldest first (fewer than the ring's). */
    private final java.util.ArrayDeque<Chunk> inflight = new java.util.ArrayDeque<>();
    /** A chunk write of this batch failed: the write thread writes no later chunk. */
    private volatile boolean writeFailed;
    private PutResult[] chunkResults;
    /** Queues whose offsets the current batch handed out. */
    private final List<QueueState> chunkQueues = new ArrayList<>();
    private final ExecutorService writeThread = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "rmq-commitlog-write");
        t.setDaemon(true);
        return t;
    });
    /** Staged requests acknowledged, for the next ones (their fields are all set again). */
    private final List<Prepared> spare = new ArrayList<>();
    /** The summary putStaged fills (null during putAll). */
    private PutSummary staging;
    /**
     * ASYNC_FLUSH: once {@link #FLUSH_BEHIND_BYTES} more are written, a segment is fsynced on this thread
     * while the puts go on, so that the flush that makes them durable (a clean close, a sink's commit)
     * finds little left to write.  Its failure is kept: the next flush reports it (a failed fsync is
     * reported once per open file).
     */
    private final ExecutorService flushBehind = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "rmq-commitlog-flush-behind");
        t.setDaemon(true);
        return t;
    });
    static final long FLUSH_BEHIND_BYTES = 32L << 20;
    private final java.util.concurrent.atomic.AtomicLong writtenSinceFlush = new java.util.concurrent.atomic.AtomicLong();
    private final java.util.concurrent.atomic.AtomicBoolean flushBehindQueued = new java.util.concurrent.atomic.AtomicBoolean();
    volatile IOException flushBehindError;
    /** Why the current batch stopped on an I/O failure (null: it did not). */
    String failure;
    Throwable failureCause;
    /** Why room() stopped the batch: the status and reason of the messages it did not put. */
    private PutMessageStatus stoppedWith;
    private String stoppedReason;

    CommitLogAppend(MessageStoreWriter w) {
        this.w = w;
    }

    /** A batch starts (under putLock): no failure yet; where its results and summary go (either may be null). */
    void beginBatch(PutResult[] results, PutSummary summary) {
        failure = null;
        failureCause = null;
        chunkResults = results;
        staging = summary;
    }

    /** A batch ends, however it ended: chunks in flight waited for, queue offsets not acknowledged given back. */
    void endBatch() {
        if (!inflight.isEmpty()) drain();           // (only after an unexpected error)
        resetChunks();
        chunkResults = null;
        staging = null;
        for (QueueState q : chunkQueues) q.inChunk = false;
        chunkQueues.clear();
    }

    void putLocked(List<Message> batch, PutResult[] results) {
        int n = batch.size();
        CommitLogFile seg = w.segments.current;
        Chunk c = cur.reset(seg, seg != null ? seg.wrote : 0);
        for (int i = 0; i < n; i++) {
            Message m = batch.get(i);
            Object o;
            try {
                o = w.checks.prepare(m, i);
            } catch (io.rmqsource.errors.UnsupportedMessageError e) {
            throw e;
        } catch (RuntimeException e) {      // a malformed message object: refuse it, never half-write
                results[i] = PutResult.failed(m, PutMessageStatus.MESSAGE_ILLEGAL, null,
                        e.getClass().getSimpleName() + ": " + e.getMessage());
                continue;
            }
            if (o instanceof PutResult) {
                results[i] = (PutResult) o;
                continue;
            }
            Prepared p = (Prepared) o;
            p.index = i;
            c = room(c, p.size, p);
            if (c == null) {
                failRest(batch, results, stoppedWith, stoppedReason);
                return;
            }
            long qo = p.entersCq ? nextQueueOffset(p, w.dispatcher.queue(p.topic, p.queueId)) : 0;
            long ts = p.storeTimestamp != null ? p.storeTimestamp : w.clockMs.getAsLong();
            encode(c.buf, p, qo, c.seg.start + c.start + c.buf.position(), ts);
            c.items.add(p);
        }
        if ((c.buf.position() > 0 && !submit(c)) || !drain()) failRest(batch, results, stopStatus(), describe(w.error));
    }

    /**
     * The chunk to encode a record of {@code size} bytes into, at its buffer's position: {@code c}, or
     * the next chunk of the segment once {@code c} is full, or the first of the next segment after the
     * END_OF_FILE blank (the segment's chunks all written and acknowledged first).  Null when the batch
     * must stop (the failure noted, {@code next} named as the first message not put).
     */
    private Chunk room(Chunk c, int size, Prepared next) {
        long z = w.segmentSize;
        if (c.seg == null) {
            CommitLogFile seg = roll(next);
            if (seg == null) return stopped(PutMessageStatus.CREATE_MAPPED_FILE_FAILED, failure, next);
            c.reset(seg, 0);
        }
        long pos = c.start + c.buf.position();
        if (size + 8 > z - pos) {
            // END_OF_FILE: blank record, write this segment's chunk, continue in the next one.
            // (pos == z: the blank is there already -- an earlier roll failed after writing it.)
            if (pos < z) {
                RecordEncoder.putBlank(c.buf, c.buf.position(), (int) (z - pos));
                c.buf.position(c.buf.position() + RecordEncoder.BLANK_HEADER_BYTES);
            }
            c.endsSegment = true;
            if ((c.buf.position() > 0 && !submit(c)) || !drain()) return stopped(stopStatus(), describe(w.error), next);
            CommitLogFile seg = roll(next);
            if (seg == null) return stopped(PutMessageStatus.CREATE_MAPPED_FILE_FAILED, failure, next);
            c = cur.reset(seg, 0);
        } else if (c.buf.position() > 0 && c.buf.remaining() < size + 8) {
            CommitLogFile seg = c.seg;
            if (!submit(c)) return stopped(stopStatus(), describe(w.error), next);
            c = cur.reset(seg, pos);
        }
        if (c.buf.capacity() < size + 8) c.buf = ByteBuffer.allocateDirect(size + 8);
        return c;
    }

    private Chunk stopped(PutMessageStatus status, String reason, Prepared next) {
        stoppedWith = status;
        stoppedReason = reason;
        if (staging != null) staging.stoppedAt(next);
        noteFailure(reason, w.error);
        return null;
    }

    /** The queue offset of {@code p} in {@code q}, handed out in this batch (given back unless acknowledged). */
    private long nextQueueOffset(Prepared p, QueueState q) {
        p.queue = q;
        if (!q.inChunk) {
            q.inChunk = true;
            q.pendingOffset = q.nextOffset;
            chunkQueues.add(q);
        }
        return q.pendingOffset++;
    }

    void putStagedLocked(StagedPuts staged, StagedPuts.Cursor e, java.util.BitSet skip, long limit)
            throws IOException {
        CommitLogFile seg = w.segments.current;
        Chunk c = cur.reset(seg, seg != null ? seg.wrote : 0);
        QueueState[] queues = new QueueState[staged.queueCount()];
        long taken = 0;
        for (long i = 0; e.next(); i++) {
            if (skip != null && i <= Integer.MAX_VALUE && skip.get((int) i)) continue;
            if (limit >= 0 && taken >= limit) break;
            taken++;
            Prepared p = stagedRequest(staged, e, chunkResults != null);
            p.index = (int) i;          // (results are asked for batches an array can hold)
            int size = p.size;
            c = room(c, size, p);
            if (c == null) return;
            long qo = 0;
            if ((e.flags() & StagedPuts.ENTERS_CQ) != 0) {
                int ref = e.queueRef();
                if (queues[ref] == null) queues[ref] = w.dispatcher.queue(p.topic, p.queueId);
                qo = nextQueueOffset(p, queues[ref]);
            }
            int at = c.buf.position();
            long phy = c.seg.start + c.start + at;
            long ts = (e.flags() & StagedPuts.PINNED_TIMESTAMP) != 0 ? e.pinnedTimestamp() : w.clockMs.getAsLong();
            c.buf.put(at, e.buf, e.recordAt(), size);
            RecordEncoder.putPosition(c.buf, at, qo, phy, ts);
            if ((e.flags() & StagedPuts.CRC_PROPERTY) != 0) RecordEncoder.sealCrcProperty(c.buf, at, size, crc);
            c.buf.position(at + size);
            p.phyOffset = phy;
            p.queueOffset = qo;
            p.storeTs = ts;
            c.items.add(p);
        }
        if ((c.buf.position() > 0 && !submit(c)) || !drain()) noteFailure(describe(w.error), w.error);
    }

    /** What acknowledge and dispatch need of a staged message. */
    private Prepared stagedRequest(StagedPuts staged, StagedPuts.Cursor e, boolean forResult) {
        Prepared p = spare.isEmpty() ? new Prepared() : spare.remove(spare.size() - 1);
        int ref = e.queueRef();
        p.topic = staged.topic(ref);
        p.queueId = staged.queueId(ref);
        p.size = e.recordSize();
        int at = e.recordAt();
        p.sysFlag = e.buf.getInt(at + 36);
        if (forResult) {             // the store host, for the result's msgId
            int host = at + 48 + ((p.sysFlag & io.rmqsource.format.Record.BORNHOST_V6_FLAG) != 0 ? 20 : 8) + 8;
            p.storeAddr = new byte[(p.sysFlag & io.rmqsource.format.Record.STOREHOST_V6_FLAG) != 0 ? 16 : 4];
            e.buf.get(host, p.storeAddr);
            p.storePort = e.buf.getInt(host + p.storeAddr.length);
        }
        p.keys = e.text(0);
        p.uniqKey = e.text(1);
        p.queue = null;
        if ((e.flags() & StagedPuts.DELAYED) != 0) {
            p.staged = false;
            p.tags = e.text(2);
            p.delay = e.text(3);
        } else {
            p.staged = true;
            p.tagsCode = e.tagsCode();
            p.tags = null;
            p.delay = null;
        }
        return p;
    }

    /** The next CommitLog segment, or null with the failure noted ({@code next}: the message waiting for it). */
    private CommitLogFile roll(Prepared next) {
        try {
            return w.segments.roll();
        } catch (IOException | StoreError x) {
            if (staging != null) staging.stoppedAt(next);
            noteFailure("cannot create CommitLog segment " + w.segments.nextPath() + ": " + x.getMessage(), x);
            return null;
        }
    }

    /** A chunk of encoded records: its buffer, its records, where it goes, its write in flight. */
    private static final class Chunk {
        ByteBuffer buf = ByteBuffer.allocateDirect(MessageStoreWriter.chunkBytes);
        final List<Prepared> items = new ArrayList<>();
        CommitLogFile seg;
        long start;
        boolean endsSegment;
        Future<?> write;

        Chunk reset(CommitLogFile seg, long start) {
            buf.clear();
            items.clear();
            this.seg = seg;
            this.start = start;
            endsSegment = false;
            write = null;
            return this;
        }
    }

    private void resetChunks() {
        for (Chunk c : ring) c.reset(null, 0);
        curIndex = 0;
        cur = ring[0];
        writeFailed = false;
    }

    /**
     * Hands {@code c} to the write thread (the oldest chunk in flight acknowledged first when the ring
     * is full), so that the next chunks are encoded while it is written; the next chunk of the ring
     * becomes {@link #cur}.  The write thread writes the chunks in order and none after one that failed,
     * so nothing is written after a failure.  False when the batch must stop.
     */
    private boolean submit(Chunk c) {
        if (inflight.size() >= ring.length - 1 && !drainOldest()) {
            drain();
            return false;
        }
        c.buf.flip();
        CommitLogFile seg = c.seg;
        ByteBuffer b = c.buf;
        long at = c.start;
        c.write = writeThread.submit(() -> {
            if (writeFailed) throw new IOException("not written: an earlier CommitLog write of this batch failed");
            try {
                CommitLogSegments.writeChunk(seg, b, at);
            } catch (IOException | RuntimeException | Error e) {
                writeFailed = true;
                throw e;
            }
            if (!w.syncFlush) flushBehind(seg, b.limit());
            return null;
        });
        inflight.addLast(c);
        curIndex = (curIndex + 1) % ring.length;
        cur = ring[curIndex];
        return true;
    }

    private void flushBehind(CommitLogFile seg, long wrote) {
        if (writtenSinceFlush.addAndGet(wrote) < FLUSH_BEHIND_BYTES || !flushBehindQueued.compareAndSet(false, true)) return;
        writtenSinceFlush.set(0);
        try {
            flushBehind.execute(() -> {
                flushBehindQueued.set(false);
                java.nio.channels.FileChannel ch = seg.channel;
                if (ch == null || w.closed) return;
                try {
                    ch.force(false);
                } catch (java.nio.channels.ClosedChannelException e) {
                    // closed or let go meanwhile: its own flush decides
                } catch (IOException e) {
                    if (flushBehindError == null) flushBehindError = e;
                }
            });
        } catch (java.util.concurrent.RejectedExecutionException e) {
            flushBehindQueued.set(false);             // shut down: the writer is closing
        }
    }

    /** Waits for every chunk in flight and acknowledges them in order; false when the batch must stop. */
    private boolean drain() {
        boolean ok = true;
        while (!inflight.isEmpty()) ok &= drainOldest();
        return ok;
    }

    /**
     * Waits for the oldest chunk in flight and acknowledges it; false when the batch must stop (its
     * messages and those of every later chunk are then not acknowledged).
     */
    private boolean drainOldest() {
        Chunk c = inflight.pollFirst();
        if (c == null) return true;
        Throwable failed = null;
        try {
            c.write.get();
        } catch (ExecutionException | InterruptedException x) {
            if (x instanceof InterruptedException) Thread.currentThread().interrupt();
            failed = x instanceof ExecutionException ? x.getCause() : x;
        }
        if (failed == null && failure == null) return acknowledge(c);
        String why;
        if (failed != null) {
            if (w.error == null || failure == null) w.error = failed;
            if (failed instanceof CommitLogSegments.ChunkNotZeroed || !(failed instanceof IOException)) w.writable = false;
            why = "CommitLog write failed: " + c.seg.path + " at offset " + (c.seg.start + c.start) + ": "
                    + failed.getMessage();
        } else {
            why = "not acknowledged: " + failure;     // written after a chunk that failed to be acknowledged
        }
        for (Prepared p : c.items) {
            if (chunkResults == null) break;
            chunkResults[p.index] = new PutResult(PutMessageStatus.UNKNOWN_ERROR, AppendMessageStatus.UNKNOWN_ERROR,
                    -1, -1, 0, 0, p.topic, p.queueId, p.sysFlag, why, null, 0);
        }
        if (staging != null && !c.items.isEmpty()) staging.stoppedAt(c.items.get(0));
        noteFailure(why, failed);
        return false;
    }

    private void encode(ByteBuffer b, Prepared p, long qo, long phy, long ts) {
        int pos = b.position();
        b.position(encodeRecord(b, pos, p, qo, phy, ts, crc));
        p.phyOffset = phy;
        p.queueOffset = qo;
        p.storeTs = ts;
    }

    /**
     * The record of {@code p} at {@code pos} of {@code b} with its position fields; returns its end.
     * {@code crc} null: the CRC property (when there is one) keeps its placeholder, sealed later.
     */
    static int encodeRecord(ByteBuffer b, int pos, Prepared p, long qo, long phy, long ts, CRC32 crc) {
        int bodyPos = RecordEncoder.putHead(b, pos, p.size,
                p.magicV2 ? io.rmqsource.format.Record.MAGIC_V2 : io.rmqsource.format.Record.MAGIC_V1,
                p.bodyCrc, p.queueId, p.flag, qo, phy, p.sysFlag, p.bornTimestamp, p.bornAddr, p.bornPort, ts,
                p.storeAddr, p.storePort, p.reconsumeTimes, p.preparedTransactionOffset, p.body.length);
        b.put(bodyPos, p.body);
        int end = RecordEncoder.putTail(b, bodyPos + p.body.length, p.magicV2, p.topicBytes, p.props, p.propsLen);
        if (p.crcProp && crc != null) RecordEncoder.sealCrcProperty(b, pos, p.size, crc);
        return end;
    }

    void noteFailure(String why, Throwable cause) {
        if (failure == null) {
            failure = why;
            failureCause = cause;
        }
    }

    /** Status of the messages a batch did not reach: the write failed, or the writer stopped taking puts. */
    private PutMessageStatus stopStatus() {
        return w.writable ? PutMessageStatus.UNKNOWN_ERROR : PutMessageStatus.SERVICE_NOT_AVAILABLE;
    }

    /** Every message of the batch without a result yet (not reached, or encoded into a chunk not written) gets one. */
    private void failRest(List<Message> batch, PutResult[] results, PutMessageStatus status, String reason) {
        for (int j = 0; j < batch.size(); j++) {
            if (results[j] == null) results[j] = PutResult.failed(batch.get(j), status, null, reason);
        }
        noteFailure(reason, w.error);
    }

    /**
     * A written chunk's messages acknowledged and dispatched: the segment's written end, the queue
     * offsets, the results, then ConsumeQueue units and IndexFile keys.  False when the batch must stop
     * (a failed fsync or dispatch: the writer takes no more puts).
     */
    private boolean acknowledge(Chunk c) {
        CommitLogFile seg = c.seg;
        PutMessageStatus status = w.durability.written(seg, c.endsSegment ? w.segmentSize : c.start + c.buf.limit());
        List<Prepared> items = c.items;
        for (Prepared p : items) if (p.queue != null) p.queue.nextOffset = p.queueOffset + 1;
        if (!items.isEmpty()) {
            w.lastStoreTs = items.get(items.size() - 1).storeTs;
            if (status == PutMessageStatus.PUT_OK && w.syncFlush) w.physicTs = w.lastStoreTs;
        }
        // Results first: the bytes are in the CommitLog whatever dispatch does next.
        PutResult[] results = chunkResults;
        for (Prepared p : items) {
            if (results != null) {
                results[p.index] = new PutResult(status, AppendMessageStatus.PUT_OK, p.phyOffset, p.queueOffset, p.size,
                        p.storeTs, p.topic, p.queueId, p.sysFlag, "", p.storeAddr, p.storePort);
            }
            if (staging != null) staging.acknowledged(p.phyOffset, p.size);
        }
        try {
            for (Prepared p : items) {
                long tagsCode = p.delay != null
                        ? TagsCode.consumeQueueTagsCode(p.topic, p.tags, p.delay, p.storeTs, w.delayLevels)
                        : p.staged ? p.tagsCode : (p.tags == null ? 0 : p.tags.hashCode());
                w.dispatcher.dispatch(p.queue, p.topic, p.queueId, p.phyOffset, p.size, tagsCode, p.storeTs, p.queueOffset,
                        p.sysFlag, p.keys, p.uniqKey);
            }
            w.dispatcher.writePending();
        } catch (IOException | RuntimeException | InternalError e) {   // the CommitLog holds the data; a reopen re-dispatches it
            // A fault of a mapped write (SIGBUS: the disk under the IndexFile is full) may surface as an
            // InternalError at a later instruction of this thread, after putKeys returned; the IndexFile is the
            // only map this writer writes, so it names that file.
            Throwable cause = e instanceof InternalError && w.index != null ? w.index.mappedFault((InternalError) e) : e;
            w.error = cause;
            w.writable = false;
            if (staging != null && !items.isEmpty()) staging.stoppedAt(items.get(0));
            noteFailure("dispatch (ConsumeQueue / IndexFile) failed after CommitLog offset " + (seg.start + c.start)
                    + ": " + describe(cause), cause);
        }
        if (status != PutMessageStatus.PUT_OK) {
            noteFailure("CommitLog fsync failed: " + seg.path + ": " + describe(w.error), w.error);
        }
        if (staging != null) spare.addAll(items);
        items.clear();
        // After a failed fsync nothing more may be acknowledged: a crash could lose this chunk.
        return w.writable;
    }

    /** No more chunk writes or flush-behind fsyncs are taken (the writer is closing or letting go). */
    void shutdown() {
        writeThread.shutdown();
        flushBehind.shutdown();
    }

    private static String describe(Throwable e) {
        return MessageStoreWriter.describe(e);
    }
}
