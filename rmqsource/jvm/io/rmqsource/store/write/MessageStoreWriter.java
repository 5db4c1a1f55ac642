package io.rmqsource.store.write;

import io.rmqsource.errors.StoreError;
import io.rmqsource.errors.UnsupportedLayoutError;
import io.rmqsource.format.Checkpoint;
import io.rmqsource.format.RecordEncoder;
import io.rmqsource.format.TagsCode;
import io.rmqsource.store.Segment;
import io.rmqsource.store.Segments;
import io.rmqsource.store.StoreConfig;
import io.rmqsource.store.StoreLayout;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.LongSupplier;
import java.util.zip.CRC32;

/**
 * Exclusive writer of one store root: RocketMQ's DefaultMessageStore.putMessage over the file store,
 * byte for byte like the engine generation named by the config's engineVersion (twin of
 * rmqsource/store/writer.py MessageStoreWriter with commitlog_append.py and flush.py).
 *
 * <p>Write path: a batch is checked and encoded ({@link PutChecks}; or was, ahead of the lock:
 * {@link StagedPuts}) into one direct buffer per segment chunk (about {@link #chunkBytes}), written with
 * one positioned write (its first 4 bytes last, so a failure leaves nothing recovery accepts) by a write
 * thread while the put thread encodes the next chunks (up to three in flight, written in order; none is
 * written after one that failed), and a segment's chunks are all acknowledged before the next segment
 * starts.  A written chunk's messages are acknowledged in order and dispatched (ConsumeQueue units and
 * IndexFile keys from the encoded requests, no re-read); after a failure no later chunk is
 * acknowledged.  END_OF_FILE: a blank record when fewer than size + 8 bytes are left; segments are
 * full-size files and the one after the current one is pre-allocated.  SYNC_FLUSH acknowledges after
 * fsync; ASYNC_FLUSH fsyncs every flushIntervalCommitLog ms on a daemon thread, and behind the writes
 * every 32 MiB.  {@code abort} exists while open; {@link #close} flushes, writes the checkpoint and
 * removes it.  Thread-safe (puts are serialized).
 */
public final class MessageStoreWriter implements AutoCloseable {
    /** Bytes of records encoded before a chunk is written (a bigger record gets a chunk of its own). */
    public static volatile int chunkBytes = 1 << 20;


    private final Path root;
    private final StoreConfig config;
    private final StoreLayout layout;
    private final LongSupplier clockMs;
    private final long segmentSize;
    private final boolean v5;
    private final boolean syncFlush;
    private final long[] delayLevels;
    private final PutChecks checks;
    private final StoreLock lock;
    private final Object putLock = new Object();
    private final Object flushLock = new Object();
    private final CRC32 crc = new CRC32();
    private Path commitLogDir;
    private Dispatcher dispatcher;
    private IndexWriter index;
    private Checkpoint checkpoint;
    private CommitLogSegments segments;
    private long physicTs;
    private long lastStoreTs;
    private volatile boolean writable;
    private volatile boolean closed;
    private volatile Throwable error;
    private boolean abortExisted;
    private Thread flusher;
    private volatile boolean stopping;
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
    private volatile IOException flushBehindError;
    /** Why the current batch stopped on an I/O failure (null: it did not). */
    private String failure;
    private Throwable failureCause;

    private MessageStoreWriter(Path root, StoreConfig config, StoreLayout layout, LongSupplier clockMs, StoreLock lock) {
        this.root = root;
        this.config = config;
        this.layout = layout;
        this.clockMs = clockMs;
        this.lock = lock;
        this.segmentSize = config.mappedFileSizeCommitLog();
        this.v5 = config.isV5();
        this.syncFlush = config.syncFlush();
        this.delayLevels = config.messageDelayLevelsMs();
        this.checks = new PutChecks(config);
    }

    /**
     * Takes {root}/lock (waiting up to lockTimeoutMs; StoreLockedError naming the lock file otherwise),
     * refuses a store a broker holds, a DLedger or other unwritable layout, recovers a store that was
     * not shut down cleanly, writes the abort file while open.
     */
    public static MessageStoreWriter open(String root, StoreConfig config, long lockTimeoutMs) {
        return open(root, config, lockTimeoutMs, System::currentTimeMillis);
    }

    /** As {@link #open(String, StoreConfig, long)} with the store clock (ms since the epoch) injected. */
    public static MessageStoreWriter open(String root, StoreConfig config, long lockTimeoutMs, LongSupplier clockMs) {
        StoreConfig c = config != null ? config : StoreConfig.defaults();
        Path r = Path.of(root);
        StoreLayout layout = new StoreLayout(root, c);
        // A store of another layout (or a DLedger store) is written by its own engine: refuse before
        // creating anything.
        layout.checkSupported();
        String dledger = layout.dledgerDir();
        if (dledger != null) {
            throw new UnsupportedLayoutError("a DLedger store (" + Path.of(dledger).getFileName()
                    + ") is written by its Raft group; rmqsource reads it but does not write it", root, -1);
        }
        try {
            Files.createDirectories(r);
        } catch (IOException e) {
            throw new StoreError("cannot create the store root " + root + ": " + e);
        }
        StoreLock lock = StoreLock.acquire(r, lockTimeoutMs);
        MessageStoreWriter w = new MessageStoreWriter(r, c, layout, clockMs, lock);
        try {
            w.openLocked();
        } catch (IOException e) {
            w.abandon();
            throw new StoreError("cannot open the store " + root + " for writing: " + e);
        } catch (RuntimeException | Error e) {
            w.abandon();
            throw e;
        }
        if (!w.syncFlush) {
            w.flusher = new Thread(w::flushLoop, "rmq-flush-commitlog");
            w.flusher.setDaemon(true);
            w.flusher.start();
        }
        return w;
    }

    // ------------------------------------------------------------------ open / recovery

    private void openLocked() throws IOException {
        commitLogDir = Path.of(layout.commitLogDirs.get(0));
        Files.createDirectories(commitLogDir);
        Path ckPath = root.resolve("checkpoint");
        try {
            checkpoint = Checkpoint.decode(readUpTo(ckPath, 40));
        } catch (NoSuchFileException e) {
            checkpoint = new Checkpoint(0, 0, 0);
            WriteFiles.writeFileAtomically(ckPath, checkpoint.encode(v5));
        }
        Path abortPath = root.resolve("abort");
        abortExisted = Files.exists(abortPath);
        if (config.messageIndexEnable()) {
            index = new IndexWriter(root.resolve("index"), config.maxHashSlotNum(), config.maxIndexNum(), clockMs,
                    this::onIndexFull);
        }
        dispatcher = new Dispatcher(root, config.mappedFileSizeConsumeQueue(), index);
        physicTs = checkpoint.physicMsgTimestampMs;
        for (Segment s : Segments.listDirectory(commitLogDir.toString())) {
            if (s.sizeBytes != segmentSize) {
                throw new StoreError("CommitLog segment " + s.path + " is " + s.sizeBytes
                        + " bytes; mappedFileSizeCommitLog is " + segmentSize);
            }
        }
        long end = Recovery.recover(layout, config, dispatcher, checkpoint, abortExisted);
        segments = new CommitLogSegments(commitLogDir, segmentSize);
        segments.open(end);
        dispatcher.loadExisting();
        for (QueueState q : dispatcher.states()) q.nextOffset = q.cq.maxOffset();
        // The store runs: abort marks it not cleanly shut down until close().
        try (FileChannel ch = FileChannel.open(abortPath, StandardOpenOption.WRITE, StandardOpenOption.CREATE)) {
            ch.force(true);
        }
        WriteFiles.fsyncDir(root);
        writable = true;
    }

    private static byte[] readUpTo(Path path, int max) throws IOException {
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ)) {
            ByteBuffer b = ByteBuffer.allocate(max);
            while (b.hasRemaining() && ch.read(b) > 0) {
                // read on
            }
            return java.util.Arrays.copyOf(b.array(), b.position());
        }
    }

    // ------------------------------------------------------------------ puts

    public PutResult put(Message m) {
        return putAll(java.util.Collections.singletonList(m))[0];
    }

    /**
     * Puts in order (encode into one buffer per segment chunk, one write, then dispatch); results[i] for
     * batch.get(i).  Each message is an independent put (a refused one does not stop the others).  A put
     * refused by the checks gets its status and takes no bytes; an I/O failure throws
     * {@link WriteFailedError} (a StoreError naming the file) once the results of what was written are
     * final: never a half-acknowledged message.
     */
    public PutResult[] putAll(List<Message> batch) {
        int n = batch.size();
        PutResult[] results = new PutResult[n];
        String failed;
        Throwable cause;
        synchronized (putLock) {
            if (!writable) {
                String why = closed ? "store is closed" : "store is not writable: " + describe(error);
                for (int i = 0; i < n; i++) {
                    results[i] = PutResult.failed(batch.get(i), PutMessageStatus.SERVICE_NOT_AVAILABLE, null, why);
                }
                return results;
            }
            beginBatch(results, null);
            try {
                putLocked(batch, results);
            } finally {
                endBatch();
            }
            failed = failure;
            cause = failureCause;
        }
        if (failed != null) throw new WriteFailedError(failed, results, null, cause);
        return results;
    }

    /** A batch starts (under putLock): no failure yet; where its results and summary go (either may be null). */
    private void beginBatch(PutResult[] results, PutSummary summary) {
        failure = null;
        failureCause = null;
        chunkResults = results;
        staging = summary;
    }

    /** A batch ends, however it ended: chunks in flight waited for, queue offsets not acknowledged given back. */
    private void endBatch() {
        if (!inflight.isEmpty()) drain();           // (only after an unexpected error)
        resetChunks();
        chunkResults = null;
        staging = null;
        for (QueueState q : chunkQueues) q.inChunk = false;
        chunkQueues.clear();
    }

    private void putLocked(List<Message> batch, PutResult[] results) {
        int n = batch.size();
        CommitLogFile seg = segments.current;
        Chunk c = cur.reset(seg, seg != null ? seg.wrote : 0);
        for (int i = 0; i < n; i++) {
            Message m = batch.get(i);
            Object o;
            try {
                o = checks.prepare(m, i);
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
            long qo = p.entersCq ? nextQueueOffset(p, dispatcher.queue(p.topic, p.queueId)) : 0;
            long ts = p.storeTimestamp != null ? p.storeTimestamp : clockMs.getAsLong();
            encode(c.buf, p, qo, c.seg.start + c.start + c.buf.position(), ts);
            c.items.add(p);
        }
        if ((c.buf.position() > 0 && !submit(c)) || !drain()) failRest(batch, results, stopStatus(), describe(error));
    }

    /** Why room() stopped the batch: the status and reason of the messages it did not put. */
    private PutMessageStatus stoppedWith;
    private String stoppedReason;

    /**
     * The chunk to encode a record of {@code size} bytes into, at its buffer's position: {@code c}, or
     * the next chunk of the segment once {@code c} is full, or the first of the next segment after the
     * END_OF_FILE blank (the segment's chunks all written and acknowledged first).  Null when the batch
     * must stop (the failure noted, {@code next} named as the first message not put).
     */
    private Chunk room(Chunk c, int size, Prepared next) {
        long z = segmentSize;
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
            if ((c.buf.position() > 0 && !submit(c)) || !drain()) return stopped(stopStatus(), describe(error), next);
            CommitLogFile seg = roll(next);
            if (seg == null) return stopped(PutMessageStatus.CREATE_MAPPED_FILE_FAILED, failure, next);
            c = cur.reset(seg, 0);
        } else if (c.buf.position() > 0 && c.buf.remaining() < size + 8) {
            CommitLogFile seg = c.seg;
            if (!submit(c)) return stopped(stopStatus(), describe(error), next);
            c = cur.reset(seg, pos);
        }
        if (c.buf.capacity() < size + 8) c.buf = ByteBuffer.allocateDirect(size + 8);
        return c;
    }

    private Chunk stopped(PutMessageStatus status, String reason, Prepared next) {
        stoppedWith = status;
        stoppedReason = reason;
        if (staging != null) staging.stoppedAt(next);
        noteFailure(reason, error);
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

    /**
     * Puts staged messages in staging order, leaving out those whose index is in {@code skip} (may be
     * null), at most {@code limit} of them (< 0: all): each record image is copied, its position
     * fields filled, and it is dispatched, as {@link #putAll} would have put the messages. The put checks
     * ran when they were staged. {@code results}, when not null, gets the result of staged message i at
     * [i]. An I/O failure throws {@link WriteFailedError} carrying the summary of what was acknowledged.
     */
    public PutSummary putStaged(StagedPuts staged, java.util.BitSet skip, long limit, PutResult[] results) {
        PutSummary out = new PutSummary();
        String failed;
        Throwable cause;
        synchronized (putLock) {
            if (!writable) {
                throw new WriteFailedError(closed ? "store is closed" : "store is not writable: " + describe(error),
                        null, out, error);
            }
            beginBatch(results, out);
            try {
                putStagedLocked(staged, staged.cursor(), skip, limit);
            } catch (IOException e) {                   // reading the staged messages back
                noteFailure("cannot read the staged messages: " + e.getMessage(), e);
            } finally {
                endBatch();
            }
            failed = failure;
            cause = failureCause;
        }
        if (failed != null) throw new WriteFailedError(failed, null, out, cause);
        return out;
    }

    private void putStagedLocked(StagedPuts staged, StagedPuts.Cursor e, java.util.BitSet skip, long limit)
            throws IOException {
        CommitLogFile seg = segments.current;
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
                if (queues[ref] == null) queues[ref] = dispatcher.queue(p.topic, p.queueId);
                qo = nextQueueOffset(p, queues[ref]);
            }
            int at = c.buf.position();
            long phy = c.seg.start + c.start + at;
            long ts = (e.flags() & StagedPuts.PINNED_TIMESTAMP) != 0 ? e.pinnedTimestamp() : clockMs.getAsLong();
            c.buf.put(at, e.buf, e.recordAt(), size);
            RecordEncoder.putPosition(c.buf, at, qo, phy, ts);
            if ((e.flags() & StagedPuts.CRC_PROPERTY) != 0) RecordEncoder.sealCrcProperty(c.buf, at, size, crc);
            c.buf.position(at + size);
            p.phyOffset = phy;
            p.queueOffset = qo;
            p.storeTs = ts;
            c.items.add(p);
        }
        if ((c.buf.position() > 0 && !submit(c)) || !drain()) noteFailure(describe(error), error);
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
            return segments.roll();
        } catch (IOException | StoreError x) {
            if (staging != null) staging.stoppedAt(next);
            noteFailure("cannot create CommitLog segment " + segments.nextPath() + ": " + x.getMessage(), x);
            return null;
        }
    }

    /** A chunk of encoded records: its buffer, its records, where it goes, its write in flight. */
    private static final class Chunk {
        ByteBuffer buf = ByteBuffer.allocateDirect(chunkBytes);
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
            if (!syncFlush) flushBehind(seg, b.limit());
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
                if (ch == null || closed) return;
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
            if (error == null || failure == null) error = failed;
            if (failed instanceof CommitLogSegments.ChunkNotZeroed || !(failed instanceof IOException)) writable = false;
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

    private void noteFailure(String why, Throwable cause) {
        if (failure == null) {
            failure = why;
            failureCause = cause;
        }
    }

    /** Status of the messages a batch did not reach: the write failed, or the writer stopped taking puts. */
    private PutMessageStatus stopStatus() {
        return writable ? PutMessageStatus.UNKNOWN_ERROR : PutMessageStatus.SERVICE_NOT_AVAILABLE;
    }

    /** Every message of the batch without a result yet (not reached, or encoded into a chunk not written) gets one. */
    private void failRest(List<Message> batch, PutResult[] results, PutMessageStatus status, String reason) {
        for (int j = 0; j < batch.size(); j++) {
            if (results[j] == null) results[j] = PutResult.failed(batch.get(j), status, null, reason);
        }
        noteFailure(reason, error);
    }

    /**
     * A written chunk's messages acknowledged and dispatched: the segment's written end, the queue
     * offsets, the results, then ConsumeQueue units and IndexFile keys.  False when the batch must stop
     * (a failed fsync or dispatch: the writer takes no more puts).
     */
    private boolean acknowledge(Chunk c) {
        CommitLogFile seg = c.seg;
        PutMessageStatus status = written(seg, c.endsSegment ? segmentSize : c.start + c.buf.limit());
        List<Prepared> items = c.items;
        for (Prepared p : items) if (p.queue != null) p.queue.nextOffset = p.queueOffset + 1;
        if (!items.isEmpty()) {
            lastStoreTs = items.get(items.size() - 1).storeTs;
            if (status == PutMessageStatus.PUT_OK && syncFlush) physicTs = lastStoreTs;
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
                        ? TagsCode.consumeQueueTagsCode(p.topic, p.tags, p.delay, p.storeTs, delayLevels)
                        : p.staged ? p.tagsCode : (p.tags == null ? 0 : p.tags.hashCode());
                dispatcher.dispatch(p.queue, p.topic, p.queueId, p.phyOffset, p.size, tagsCode, p.storeTs, p.queueOffset,
                        p.sysFlag, p.keys, p.uniqKey);
            }
            dispatcher.writePending();
        } catch (IOException | RuntimeException | InternalError e) {   // the CommitLog holds the data; a reopen re-dispatches it
            // A fault of a mapped write (SIGBUS: the disk under the IndexFile is full) may surface as an
            // InternalError at a later instruction of this thread, after putKeys returned; the IndexFile is the
            // only map this writer writes, so it names that file.
            Throwable cause = e instanceof InternalError && index != null ? index.mappedFault((InternalError) e) : e;
            error = cause;
            writable = false;
            if (staging != null && !items.isEmpty()) staging.stoppedAt(items.get(0));
            noteFailure("dispatch (ConsumeQueue / IndexFile) failed after CommitLog offset " + (seg.start + c.start)
                    + ": " + describe(cause), cause);
        }
        if (status != PutMessageStatus.PUT_OK) {
            noteFailure("CommitLog fsync failed: " + seg.path + ": " + describe(error), error);
        }
        if (staging != null) spare.addAll(items);
        items.clear();
        // After a failed fsync nothing more may be acknowledged: a crash could lose this chunk.
        return writable;
    }

    /** Bytes written up to {@code wrote}; under SYNC_FLUSH acknowledged only once fsynced. */
    private PutMessageStatus written(CommitLogFile seg, long wrote) {
        seg.wrote = wrote;
        seg.dirty = true;
        if (!syncFlush) return PutMessageStatus.PUT_OK;
        try {
            seg.channel.force(true);
            seg.dirty = false;
            return PutMessageStatus.PUT_OK;
        } catch (IOException e) {
            // The bytes are in the CommitLog but not known to be on disk; after a failed fsync the kernel
            // may have dropped those pages and a later fsync would not say so: stop taking puts.
            error = e;
            writable = false;
            return PutMessageStatus.FLUSH_DISK_TIMEOUT;
        }
    }

    // ------------------------------------------------------------------ flush / checkpoint

    private void onIndexFull(long endTs) {
        try {
            writeCheckpoint(endTs);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private void flushLoop() {
        long interval = Math.max(config.flushIntervalCommitLogMs(), 10);
        while (true) {
            synchronized (flushLock) {
                if (stopping) return;
                try {
                    flushLock.wait(interval);
                } catch (InterruptedException e) {
                    return;
                }
                if (stopping) return;
            }
            try {
                flush0();
            } catch (IOException | RuntimeException e) {    // surfaced by the next put as SERVICE_NOT_AVAILABLE
                error = e;
                writable = false;
                return;
            }
        }
    }

    /**
     * fsyncs the CommitLog segments, ConsumeQueues and IndexFile written so far: what was written
     * before the call is durable when it returns.  The CommitLog fsyncs run outside the put lock.
     */
    public void flush() throws IOException {
        flush0();
    }

    private void flush0() throws IOException {
        IOException behind = flushBehindError;
        if (behind != null) {
            throw new IOException("an earlier CommitLog fsync failed: " + behind.getMessage(), behind);
        }
        synchronized (flushLock) {
            List<CommitLogFile> todo = new ArrayList<>();
            long ts;
            synchronized (putLock) {
                if (closed) return;
                for (CommitLogFile s : segments.list) {
                    if (s.dirty && s.channel != null) {
                        s.dirty = false;
                        s.flushing = true;
                        todo.add(s);
                    }
                }
                ts = lastStoreTs;
            }
            try {
                for (CommitLogFile s : todo) s.channel.force(true);
            } catch (IOException e) {
                synchronized (putLock) {
                    for (CommitLogFile s : todo) s.dirty = true;
                }
                throw e;
            } finally {
                synchronized (putLock) {
                    for (CommitLogFile s : todo) s.flushing = false;
                }
            }
            synchronized (putLock) {
                if (closed) return;
                if (ts != 0) physicTs = ts;
                segments.retireOld();
                dispatcher.sync();
            }
        }
    }

    private void writeCheckpoint(Long indexTs) throws IOException {
        Checkpoint old = checkpoint;
        long idx = indexTs != null ? indexTs
                : (index != null && index.indexMsgTimestampMs != 0 ? index.indexMsgTimestampMs : old.indexMsgTimestampMs);
        Checkpoint ck = new Checkpoint(physicTs != 0 ? physicTs : old.physicMsgTimestampMs,
                dispatcher.logicsMsgTimestampMs != 0 ? dispatcher.logicsMsgTimestampMs : old.logicsMsgTimestampMs,
                idx, old.masterFlushedOffset, old.confirmPhyOffset);
        WriteFiles.writeFileAtomically(root.resolve("checkpoint"), ck.encode(v5));
        checkpoint = ck;
    }

    // ------------------------------------------------------------------ state

    /** End of the written CommitLog. */
    public long maxPhyOffset() {
        synchronized (putLock) {
            return segments == null ? 0 : segments.maxPhyOffset();
        }
    }

    /**
     * Records written from CommitLog offset {@code fromOffset} (a record boundary, e.g. an earlier
     * {@link #maxPhyOffset()}) to the end of the written CommitLog that carry at least one of the
     * properties {@code names}, in CommitLog order, each with the values of those it carries (how a sink
     * finds what it appended before a failure, by its own batch / sequence properties).  Reads the
     * bytes the writer wrote (through the page cache; nothing needs to be flushed).
     */
    public List<AppendedRecord> scan(long fromOffset, String... names) {
        synchronized (putLock) {
            return CommitLogScan.scan(layout, fromOffset, maxPhyOffset(), names);
        }
    }

    /** Next queue offset the writer assigns in topic/queueId. */
    public long queueOffset(String topic, int queueId) {
        synchronized (putLock) {
            if (!StoreLayout.isSafeDirName(topic)) return 0;
            return dispatcher.queue(topic, queueId).nextOffset;
        }
    }

    public String root() {
        return root.toString();
    }

    public StoreConfig config() {
        return config;
    }

    /** Whether an abort file was there when the writer opened (the store had not been shut down cleanly). */
    public boolean abortExisted() {
        return abortExisted;
    }

    public boolean isWritable() {
        return writable;
    }

    private static String describe(Throwable e) {
        if (e == null) return "unknown error";
        return e.getClass().getSimpleName() + ": " + e.getMessage();
    }

    // ------------------------------------------------------------------ shutdown

    private void stopFlusher() {
        synchronized (flushLock) {
            stopping = true;
            flushLock.notifyAll();
        }
        if (flusher != null && flusher != Thread.currentThread()) {
            try {
                flusher.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * Clean shutdown: flush everything, drop the unused pre-allocated segment, write the checkpoint,
     * delete abort (only when all of that worked), release the lock.  When a step fails the rest of the
     * clean shutdown is skipped, every file is still closed, the lock released, abort stays (the next
     * open recovers), and the error is thrown as a StoreError naming the store.
     */
    @Override
    public void close() {
        if (closed) return;
        stopFlusher();
        IOException failedWith = null;
        RuntimeException runtime = null;
        synchronized (flushLock) {
            synchronized (putLock) {
                if (closed) return;
                boolean failedBefore = error != null;
                writable = false;
                try {
                    IOException behind = flushBehindError;
                    if (behind != null) throw new IOException("an earlier CommitLog fsync failed: " + behind.getMessage(), behind);
                    segments.forceDirty();
                    if (lastStoreTs != 0) physicTs = lastStoreTs;
                    segments.dropPrealloc();
                    segments.closeChannels();
                    WriteFiles.fsyncDir(commitLogDir);
                    dispatcher.close();
                    writeCheckpoint(null);
                    if (!failedBefore) {
                        Files.delete(root.resolve("abort"));
                        WriteFiles.fsyncDir(root);
                    }
                } catch (IOException e) {
                    failedWith = e;
                    error = e;
                    if (segments != null) segments.closeChannels();
                    dispatcher.release();
                } catch (RuntimeException e) {
                    runtime = e;
                    error = e;
                    if (segments != null) segments.closeChannels();
                    dispatcher.release();
                } finally {
                    closed = true;
                    writeThread.shutdown();
                    flushBehind.shutdown();
                    lock.release();
                }
            }
        }
        if (failedWith != null) {
            throw new StoreError("clean shutdown of " + root + " failed (abort stays; the next open recovers): "
                    + failedWith);
        }
        if (runtime != null) throw runtime;
    }

    /**
     * Lets go of the store as if the process had died here: every file closed without flushing or
     * writing anything (abort stays), the lock released.  The next open recovers.
     */
    public void abandon() {
        if (closed) return;
        stopFlusher();
        synchronized (putLock) {
            if (closed) return;
            writable = false;
            closed = true;
            writeThread.shutdown();
            flushBehind.shutdown();
            if (segments != null) segments.closeChannels();
            if (dispatcher != null) dispatcher.release();
            else if (index != null) index.release();
            lock.release();
        }
    }
}
