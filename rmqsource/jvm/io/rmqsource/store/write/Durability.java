package io.rmqsource.store.write;

import io.rmqsource.errors.FormatError;
import io.rmqsource.errors.StoreError;
import io.rmqsource.format.Checkpoint;
import io.rmqsource.store.BrokerConfigs;
import io.rmqsource.store.ConfigRdb;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Flush and durability of a {@link MessageStoreWriter} (twin of rmqsource/store/flush.py's Durability): when
 * written CommitLog bytes become durable (SYNC_FLUSH: before a put is acknowledged; ASYNC_FLUSH: the flush
 * thread every flushIntervalCommitLog ms, the CommitLog fsyncs outside the put lock), the checkpoint, the
 * clean shutdown (abort deleted only when every step worked) and letting go of the store as a crash would.
 * Whatever makes messages durable (a flush; under SYNC_FLUSH the put call that acknowledges them) first
 * routes in config/topics.json the topics and queues written since the last time, as the broker persists a
 * topic it creates before acknowledging the message: a writer killed before its close leaves a store a
 * broker serves.  The store's state is the writer's.
 */
final class Durability {
    private final MessageStoreWriter w;
    private final Object flushLock = new Object();
    private Thread flusher;
    private volatile boolean stopping;
    /** Queues counted when topics.json was last routed (under putLock). */
    private int routedQueueCount;

    Durability(MessageStoreWriter w) {
        this.w = w;
    }

    /** ASYNC_FLUSH: the daemon thread that fsyncs every flushIntervalCommitLog ms. */
    void startFlusher() {
        flusher = new Thread(this::flushLoop, "rmq-flush-commitlog");
        flusher.setDaemon(true);
        flusher.start();
    }

    /** Bytes written up to {@code wrote}; under SYNC_FLUSH acknowledged only once fsynced. */
    PutMessageStatus written(CommitLogFile seg, long wrote) {
        seg.wrote = wrote;
        seg.dirty = true;
        if (!w.syncFlush) return PutMessageStatus.PUT_OK;
        try {
            seg.channel.force(true);
            seg.dirty = false;
            return PutMessageStatus.PUT_OK;
        } catch (IOException e) {
            // The bytes are in the CommitLog but not known to be on disk; after a failed fsync the kernel
            // may have dropped those pages and a later fsync would not say so: stop taking puts.
            w.error = e;
            w.writable = false;
            return PutMessageStatus.FLUSH_DISK_TIMEOUT;
        }
    }

    void onIndexFull(long endTs) {
        try {
            writeCheckpoint(endTs);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private void flushLoop() {
        long interval = Math.max(w.config.flushIntervalCommitLogMs(), 10);
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
                flush();
            } catch (IOException | RuntimeException e) {    // surfaced by the next put as SERVICE_NOT_AVAILABLE
                w.error = e;
                w.writable = false;
                return;
            }
        }
    }

    /**
     * fsyncs the CommitLog segments, ConsumeQueues and IndexFile written so far: what was written
     * before the call is durable when it returns.  The CommitLog fsyncs run outside the put lock.
     */
    void flush() throws IOException {
        IOException behind = w.append.flushBehindError;
        if (behind != null) {
            throw new IOException("an earlier CommitLog fsync failed: " + behind.getMessage(), behind);
        }
        synchronized (flushLock) {
            List<CommitLogFile> todo = new ArrayList<>();
            long ts;
            synchronized (w.putLock) {
                if (w.closed) return;
                for (CommitLogFile s : w.segments.list) {
                    if (s.dirty && s.channel != null) {
                        s.dirty = false;
                        s.flushing = true;
                        todo.add(s);
                    }
                }
                ts = w.lastStoreTs;
            }
            try {
                for (CommitLogFile s : todo) s.channel.force(true);
            } catch (IOException e) {
                synchronized (w.putLock) {
                    for (CommitLogFile s : todo) s.dirty = true;
                }
                throw e;
            } finally {
                synchronized (w.putLock) {
                    for (CommitLogFile s : todo) s.flushing = false;
                }
            }
            synchronized (w.putLock) {
                if (w.closed) return;
                if (ts != 0) w.physicTs = ts;
                w.segments.retireOld();
                w.dispatcher.sync();
                try {
                    routeNewQueues();
                } catch (UncheckedIOException e) {
                    throw e.getCause();
                }
            }
        }
    }

    /** (topic, queueId) of every queue written, parked delayed messages under their real ones. */
    private List<Map.Entry<String, Integer>> writtenQueues() {
        List<Map.Entry<String, Integer>> queues = new ArrayList<>();
        for (QueueState q : w.dispatcher.states()) queues.add(Map.entry(q.topic, q.queueId));
        queues.addAll(w.checks.parkedQueues);
        return queues;
    }

    /** Routes in config/topics.json the topics and queues written since the last call (putLock held). */
    private void routeNewQueues() {
        int count = w.dispatcher.queueCount() + w.checks.parkedQueues.size();
        if (count == routedQueueCount) return;      // queues are only ever added: the same count, nothing new
        recordRoutes(writtenQueues());
        routedQueueCount = count;
    }

    /** config/topics.json, or config/rdb/ for a config-v2 broker's store (ConfigRdb). */
    private void recordRoutes(List<Map.Entry<String, Integer>> queues) {
        if (w.configRdb) ConfigRdb.recordTopicQueues(w.root, queues, w.clockMs);
        else BrokerConfigs.recordTopicQueues(w.root, queues, w.v5, w.clockMs);
    }

    /**
     * SYNC_FLUSH: a put call acknowledges its messages as durable, so it routes them before it returns (putLock
     * held).  When topics.json cannot be written its PUT_OK messages are stored but would not be served:
     * FLUSH_DISK_TIMEOUT, and the call fails (the next put call or flush tries the routes again).
     */
    void routeAcknowledged(PutResult[] results) {
        if (!w.syncFlush) return;
        try {
            routeNewQueues();
        } catch (UncheckedIOException | FormatError | StoreError e) {
            Throwable cause = e instanceof UncheckedIOException ? e.getCause() : e;
            String where = w.configRdb ? ConfigRdb.RDB_DIR + "/" : BrokerConfigs.TOPICS_FILE_NAME;
            String why = "stored, but config/" + where + " could not be written: "
                    + MessageStoreWriter.describe(cause);
            for (int i = 0; results != null && i < results.length; i++) {
                if (results[i] != null && results[i].ok()) {
                    results[i] = results[i].withStatus(PutMessageStatus.FLUSH_DISK_TIMEOUT, why);
                }
            }
            w.append.noteFailure(why, cause);
        }
    }

    private void writeCheckpoint(Long indexTs) throws IOException {
        Checkpoint old = w.checkpoint;
        long idx = indexTs != null ? indexTs
                : (w.index != null && w.index.indexMsgTimestampMs != 0 ? w.index.indexMsgTimestampMs : old.indexMsgTimestampMs);
        Checkpoint ck = new Checkpoint(w.physicTs != 0 ? w.physicTs : old.physicMsgTimestampMs,
                w.dispatcher.logicsMsgTimestampMs != 0 ? w.dispatcher.logicsMsgTimestampMs : old.logicsMsgTimestampMs,
                idx, old.masterFlushedOffset, old.confirmPhyOffset);
        WriteFiles.writeFileAtomically(w.root.resolve("checkpoint"), ck.encode(w.v5));
        w.checkpoint = ck;
    }

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
    void close() {
        if (w.closed) return;
        stopFlusher();
        IOException failedWith = null;
        RuntimeException runtime = null;
        synchronized (flushLock) {
            synchronized (w.putLock) {
                if (w.closed) return;
                boolean failedBefore = w.error != null;
                w.writable = false;
                try {
                    IOException behind = w.append.flushBehindError;
                    if (behind != null) throw new IOException("an earlier CommitLog fsync failed: " + behind.getMessage(), behind);
                    w.segments.forceDirty();
                    if (w.lastStoreTs != 0) w.physicTs = w.lastStoreTs;
                    w.segments.dropPrealloc();
                    w.segments.closeChannels();
                    WriteFiles.fsyncDir(w.commitLogDir);
                    List<Map.Entry<String, Integer>> queues = writtenQueues();
                    w.dispatcher.close();
                    writeCheckpoint(null);
                    if (!failedBefore) {
                        Files.delete(w.root.resolve("abort"));
                        WriteFiles.fsyncDir(w.root);
                        // What a broker started on this store needs to route its topics (BrokerConfigs).
                        recordRoutes(queues);
                    }
                } catch (IOException e) {
                    failedWith = e;
                    w.error = e;
                    if (w.segments != null) w.segments.closeChannels();
                    w.dispatcher.release();
                } catch (RuntimeException e) {
                    runtime = e;
                    w.error = e;
                    if (w.segments != null) w.segments.closeChannels();
                    w.dispatcher.release();
                } finally {
                    w.closed = true;
                    w.append.shutdown();
                    w.lock.release();
                }
            }
        }
        if (failedWith != null) {
            throw new StoreError("clean shutdown of " + w.root + " failed (abort stays; the next open recovers): "
                    + failedWith);
        }
        if (runtime != null) throw runtime;
    }

    /**
     * Lets go of the store as if the process had died here: every file closed without flushing or
     * writing anything (abort stays), the lock released.  The next open recovers.
     */
    void abandon() {
        if (w.closed) return;
        stopFlusher();
        synchronized (w.putLock) {
            if (w.closed) return;
            w.writable = false;
            w.closed = true;
            w.append.shutdown();
            if (w.segments != null) w.segments.closeChannels();
            if (w.dispatcher != null) w.dispatcher.release();
            else if (w.index != null) w.index.release();
            w.lock.release();
        }
    }
}
