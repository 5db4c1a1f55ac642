package io.rmqsource.store.write;

import io.rmqsource.errors.StoreError;
import io.rmqsource.errors.StoreLockedError;
import io.rmqsource.store.StoreLockState;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.HashSet;
import java.util.Set;

/**
 * The writer lock on {@code {root}/lock} (twin of rmqsource/io/lock.py, spec 7.2): an exclusive POSIX
 * record lock on byte 0 (what a broker takes with FileChannel.tryLock(0, 1, false)) and on byte 1
 * (the rmqsource writer mark), then the 4 bytes "lock" at offset 0.  On Linux FileChannel.tryLock is
 * an fcntl record lock, so Python writers, JVM writers and brokers exclude each other.  Record locks
 * belong to the process, so a JVM-wide registry of held paths keeps two writers of one JVM apart.
 * The lock file is never opened elsewhere in the writer (closing any descriptor of it would drop
 * the process's locks), nor by anything else in this JVM: whoever needs the lock without a writer
 * (the Spark sink's log updates) takes this one.
 */
public final class StoreLock implements AutoCloseable {
    static final String LOCK_FILE_NAME = "lock";
    private static final long POLL_MS = 50;
    private static final Set<String> HELD = new HashSet<>();

    final Path path;
    private final String key;
    private FileChannel channel;
    private FileLock lock0;
    private FileLock lock1;

    private StoreLock(Path path, String key) {
        this.path = path;
        this.key = key;
    }

    /** Takes the lock, waiting up to {@code timeoutMs}; StoreLockedError naming the lock file otherwise. */
    public static StoreLock acquire(Path root, long timeoutMs) {
        Path path = root.resolve(LOCK_FILE_NAME);
        String key;
        try {
            key = root.toRealPath().resolve(LOCK_FILE_NAME).toString();
        } catch (IOException e) {
            throw new StoreError("cannot resolve the store root " + root + ": " + e);
        }
        long deadline = System.nanoTime() + Math.max(0, timeoutMs) * 1_000_000L;
        boolean inProcess = false;
        // Bounded: each round sleeps POLL_MS until the deadline passes.
        for (long round = 0; round <= Math.max(0, timeoutMs) / POLL_MS + 1; round++) {
            synchronized (HELD) {
                inProcess = HELD.contains(key);
                if (!inProcess) {
                    StoreLock l = new StoreLock(path, key);
                    if (l.tryOsLock()) {
                        HELD.add(key);
                        return l;
                    }
                }
            }
            if (System.nanoTime() >= deadline) break;
            try {
                Thread.sleep(POLL_MS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        String who = inProcess ? "this process" : "another process";
        if (!inProcess) {
            StoreLockState state = StoreLockState.of(path);
            if (state.held) who = state.describeHolder() + (state.rmqsource ? " (an rmqsource writer)" : "");
        }
        throw new StoreLockedError("store is locked by " + who + ": " + path
                + " (another writer or a broker is running)");
    }

    private boolean tryOsLock() {
        try {
            channel = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE, StandardOpenOption.CREATE);
            try {
                lock0 = channel.tryLock(StoreLockState.BROKER_LOCK_BYTE, 1, false);
            } catch (OverlappingFileLockException e) {
                lock0 = null;
            }
            if (lock0 == null) {
                channel.close();
                channel = null;
                return false;
            }
            try {
                lock1 = channel.tryLock(StoreLockState.RMQSOURCE_MARK_BYTE, 1, false);
            } catch (IOException | OverlappingFileLockException e) {
                lock1 = null;       // only the mark is missing: readers would take us for a broker
            }
            channel.write(ByteBuffer.wrap("lock".getBytes(StandardCharsets.US_ASCII)), 0);
            return true;
        } catch (IOException e) {
            WriteFiles.closeQuietly(channel);
            channel = null;
            throw new StoreError("cannot lock " + path + ": " + e);
        }
    }

    @Override
    public void close() {
        release();
    }

    public void release() {
        synchronized (HELD) {
            if (channel == null) return;
            try {
                if (lock1 != null) lock1.release();
                lock0.release();
            } catch (IOException e) {
                // closing the channel below drops the locks anyway
            } finally {
                WriteFiles.closeQuietly(channel);
                channel = null;
                HELD.remove(key);
            }
        }
    }
}
