package io.rmqsource.spark.sink;

import io.rmqsource.spark.errors.StoreError;
import io.rmqsource.spark.errors.StoreLockedError;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * The store's writer lock alone (io/lock.py StoreLock), for the sink log updates that append nothing
 * (a stream's commit, a write forgetting its entries): byte 0 as the broker locks it, byte 1 marking an
 * rmqsource writer. FileChannel locks are POSIX record locks and exclude other JVM holders too.
 */
final class SinkStoreLock implements AutoCloseable {
    private static final long POLL_MS = 50;
    private final FileChannel channel;
    private final FileLock lock;
    private final FileLock mark;

    private SinkStoreLock(FileChannel channel, FileLock lock, FileLock mark) {
        this.channel = channel;
        this.lock = lock;
        this.mark = mark;
    }

    static SinkStoreLock acquire(String root, long timeoutMs) {
        Path path = Path.of(root, "lock");
        long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
        boolean inProcess = false;
        for (long round = 0; round <= timeoutMs / POLL_MS + 1; round++) {
            FileChannel ch = null;
            try {
                ch = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE, StandardOpenOption.CREATE);
                FileLock l;
                try {
                    l = ch.tryLock(0, 1, false);
                    inProcess = false;
                } catch (OverlappingFileLockException e) {
                    l = null;
                    inProcess = true;
                }
                if (l != null) {
                    FileLock m = null;
                    try {
                        m = ch.tryLock(1, 1, false);
                    } catch (IOException | OverlappingFileLockException e) {
                        // only the mark is missing: readers would take us for a broker
                    }
                    ch.write(ByteBuffer.wrap("lock".getBytes(StandardCharsets.US_ASCII)), 0);
                    return new SinkStoreLock(ch, l, m);
                }
                ch.close();
            } catch (IOException e) {
                try {
                    if (ch != null) ch.close();
                } catch (IOException ignored) {
                    // the error below explains
                }
                throw new StoreError("rmq sink: could not lock " + path + ": " + e.getMessage());
            }
            if (System.nanoTime() >= deadline) break;
            try {
                Thread.sleep(POLL_MS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        throw new StoreLockedError("store is locked by " + (inProcess ? "this process" : "another process") + ": "
                + path + " (another writer or a broker is running)");
    }

    @Override
    public void close() {
        try {
            if (mark != null) mark.release();
            lock.release();
        } catch (IOException ignored) {
            // closing the channel releases them too
        } finally {
            try {
                channel.close();
            } catch (IOException ignored) {
                // nothing left to release
            }
        }
    }
}
