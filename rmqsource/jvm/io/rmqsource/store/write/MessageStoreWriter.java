package io.rmqsource.store.write;


import io.rmqsource.errors.StoreError;
import io.rmqsource.errors.UnsupportedLayoutError;
import io.rmqsource.format.Checkpoint;
import io.rmqsource.store.ConfigRdb;
import io.rmqsource.store.Segment;
import io.rmqsource.store.Segments;
import io.rmqsource.store.StoreConfig;
import io.rmqsource.store.StoreLayout;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.function.LongSupplier;

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


    final Path root;
    final StoreConfig config;
    final StoreLayout layout;
    final LongSupplier clockMs;
    final long segmentSize;
    final boolean v5;
    final boolean configRdb;
    final boolean syncFlush;
    final long[] delayLevels;
    final PutChecks checks;
    final StoreLock lock;
    final Object putLock = new Object();
    Path commitLogDir;
    Dispatcher dispatcher;
    IndexWriter index;
    Checkpoint checkpoint;
    CommitLogSegments segments;
    long physicTs;
    long lastStoreTs;
    volatile boolean writable;
    volatile boolean closed;
    volatile Throwable error;
    private boolean abortExisted;
    /** Encodes, writes, acknowledges and dispatches the puts (commitlog_append.py). */
    final CommitLogAppend append;
    /** Flushes, checkpoints, shuts down (flush.py). */
    final Durability durability;

    private MessageStoreWriter(Path root, StoreConfig config, StoreLayout layout, LongSupplier clockMs, StoreLock lock) {
        this.root = root;
        this.config = config;
        this.layout = layout;
        this.clockMs = clockMs;
        this.lock = lock;
        this.segmentSize = config.mappedFileSizeCommitLog();
        this.v5 = config.isV5();
        this.configRdb = ConfigRdb.usesConfigRdb(root, config);      // routes go to config/rdb/ (ConfigRdb)
        if (configRdb) ConfigRdb.requireRocksDb();
        this.syncFlush = config.syncFlush();
        this.delayLevels = config.messageDelayLevelsMs();
        this.checks = new PutChecks(config);
        this.append = new CommitLogAppend(this);
        this.durability = new Durability(this);
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
        layout.refuseRocksDbQueues("written");
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
        if (!w.syncFlush) w.durability.startFlusher();
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
                    durability::onIndexFull);
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
        for (Message m : batch) checks.refuseUnsupported(m);   // a timer message refuses the batch before any write
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
            append.beginBatch(results, null);
            try {
                append.putLocked(batch, results);
            } finally {
                append.endBatch();
            }
            durability.routeAcknowledged(results);
            failed = append.failure;
            cause = append.failureCause;
        }
        if (failed != null) throw new WriteFailedError(failed, results, null, cause);
        return results;
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
            append.beginBatch(results, out);
            try {
                append.putStagedLocked(staged, staged.cursor(), skip, limit);
            } catch (IOException e) {                   // reading the staged messages back
                append.noteFailure("cannot read the staged messages: " + e.getMessage(), e);
            } finally {
                append.endBatch();
            }
            durability.routeAcknowledged(results);
            failed = append.failure;
            cause = append.failureCause;
        }
        if (failed != null) throw new WriteFailedError(failed, null, out, cause);
        return out;
    }

    // ------------------------------------------------------------------ flush / checkpoint

    /**
     * fsyncs the CommitLog segments, ConsumeQueues and IndexFile written so far: what was written
     * before the call is durable when it returns.  The CommitLog fsyncs run outside the put lock.
     */
    public void flush() throws IOException {
        durability.flush();
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

    static String describe(Throwable e) {
        if (e == null) return "unknown error";
        return e.getClass().getSimpleName() + ": " + e.getMessage();
    }

    // ------------------------------------------------------------------ shutdown

    /**
     * Clean shutdown: flush everything, drop the unused pre-allocated segment, write the checkpoint,
     * delete abort (only when all of that worked), release the lock.  When a step fails the rest of the
     * clean shutdown is skipped, every file is still closed, the lock released, abort stays (the next
     * open recovers), and the error is thrown as a StoreError naming the store.
     */
    @Override
    public void close() {
        durability.close();
    }

    /**
     * Lets go of the store as if the process had died here: every file closed without flushing or
     * writing anything (abort stays), the lock released.  The next open recovers.
     */
    public void abandon() {
        durability.abandon();
    }
}
