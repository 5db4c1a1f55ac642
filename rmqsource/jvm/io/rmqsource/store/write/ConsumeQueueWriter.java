package io.rmqsource.store.write;

import io.rmqsource.errors.CorruptRecordError;
import io.rmqsource.format.ConsumeQueue;
import io.rmqsource.store.ConsumeQueueFiles;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Set;
import java.util.TreeMap;

/**
 * The write side of one {@code consumequeue/{topic}/{queueId}} (ConsumeQueue.putMessagePositionInfo),
 * twin of ConsumeQueueWriter in rmqsource/store/dispatch.py: units only for new records (duplicates
 * ignored: {@code phyOffset + size <= maxPhysicOffset} or an index below the queue's end), a queue's
 * first file created at a non-zero offset pre-blank filled up to it.  Units are buffered and written
 * with one positioned write per file per batch; files are full-size (sparse) when created.
 */
final class ConsumeQueueWriter {
    private static final byte[] PRE_BLANK = new byte[ConsumeQueue.UNIT_SIZE];

    static {
        ByteBuffer.wrap(PRE_BLANK).putInt(8, ConsumeQueue.PRE_BLANK_SIZE);
    }

    final Path directory;
    final String topic;
    final int queueId;
    private final long fileSize;
    private final long unitsPerFile;
    long writeOffset;
    /** Listed in the dispatcher's touched queues. */
    boolean touched;
    long maxPhysicOffset;
    private long firstStart = -1;               // -1: the queue has no file yet
    private boolean hasFiles;
    private ByteBuffer pending = ByteBuffer.allocate(ConsumeQueue.UNIT_SIZE * 64);
    private long pendingStart;
    private final TreeMap<Long, FileChannel> channels = new TreeMap<>();
    private final Set<Long> dirty = new HashSet<>();

    ConsumeQueueWriter(Path directory, String topic, int queueId, long fileSize) {
        if (fileSize % ConsumeQueue.UNIT_SIZE != 0) {
            throw new CorruptRecordError("ConsumeQueue file size " + fileSize + " is not a multiple of 20",
                    directory.toString(), 0);
        }
        this.directory = directory;
        this.topic = topic;
        this.queueId = queueId;
        this.fileSize = fileSize;
        this.unitsPerFile = fileSize / ConsumeQueue.UNIT_SIZE;
        load();
    }

    private void load() {
        ConsumeQueueFiles cq = new ConsumeQueueFiles(directory.toString(), topic, queueId);
        if (Files.isDirectory(directory) && cq.hasFileFor(cq.firstFileStartOffset())) {
            writeOffset = cq.maxOffset();
            maxPhysicOffset = Math.max(cq.maxPhysicOffset(), 0);
            firstStart = cq.firstFileStartOffset();
            hasFiles = true;
        } else {
            writeOffset = 0;
            maxPhysicOffset = 0;
            firstStart = -1;
            hasFiles = false;
        }
        pendingStart = writeOffset;
    }

    long maxOffset() {
        return writeOffset;
    }

    private void append(byte[] unit) {
        ensure(ConsumeQueue.UNIT_SIZE);
        pending.put(unit);
    }

    private void ensure(int more) {
        if (pending.remaining() < more) {
            ByteBuffer bigger = ByteBuffer.allocate(Math.max(pending.capacity() * 2, pending.position() + more));
            pending.flip();
            bigger.put(pending);
            pending = bigger;
        }
    }

    /** Append one unit; false when it was a duplicate and was ignored. */
    boolean put(long phyOffset, int size, long tagsCode, long cqOffset) {
        if (phyOffset + size <= maxPhysicOffset) return false;
        if (firstStart < 0) {
            // First unit of a queue without files: its first file is the one holding cqOffset, and the
            // slots before it in that file are pre-blank (fillPreBlank).
            long start = cqOffset - cqOffset % unitsPerFile;
            firstStart = pendingStart = writeOffset = start;
            for (long k = start; k < cqOffset; k++) append(PRE_BLANK);
            if (cqOffset > start) writeOffset = cqOffset;
        } else if (cqOffset != 0 && cqOffset < writeOffset) {
            return false;
        }
        // (A gap, expected > current, is appended at the current end like RocketMQ does.)
        ensure(ConsumeQueue.UNIT_SIZE);
        ConsumeQueue.putUnit(pending, pending.position(), phyOffset, size, tagsCode);
        pending.position(pending.position() + ConsumeQueue.UNIT_SIZE);
        writeOffset++;
        maxPhysicOffset = phyOffset + size;
        return true;
    }

    private Path fileOf(long fileStartUnit) {
        return directory.resolve(WriteFiles.offsetName(fileStartUnit * ConsumeQueue.UNIT_SIZE));
    }

    private FileChannel channelFor(long fileStartUnit) throws IOException {
        FileChannel ch = channels.get(fileStartUnit);
        if (ch == null) {
            Files.createDirectories(directory);
            Path path = fileOf(fileStartUnit);
            ch = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE, StandardOpenOption.CREATE);
            try {
                if (ch.size() < fileSize) {
                    try (RandomAccessFile raf = new RandomAccessFile(path.toFile(), "rw")) {
                        raf.setLength(fileSize);          // full size (sparse), as the engine's mapped files
                    }
                }
            } catch (IOException e) {
                ch.close();
                throw e;
            }
            channels.put(fileStartUnit, ch);
            hasFiles = true;
        }
        return ch;
    }

    /** Writes the buffered units into their files (creating full-size files as needed). */
    void writePending() throws IOException {
        int n = pending.position();
        if (n == 0) return;
        long unit = pendingStart;
        int pos = 0;
        ByteBuffer data = pending.duplicate();
        // One round per ConsumeQueue file touched.
        for (long round = 0; round <= n / Math.max(1, fileSize) + 2 && pos < n; round++) {
            long fileStart = unit - unit % unitsPerFile;
            int inFile = (int) Math.min(n - pos, (fileStart + unitsPerFile - unit) * ConsumeQueue.UNIT_SIZE);
            syncFilesBefore(fileStart);
            FileChannel ch = channelFor(fileStart);
            data.limit(pos + inFile).position(pos);
            long at = (unit - fileStart) * ConsumeQueue.UNIT_SIZE;
            try {
                WriteFiles.writeFully(ch, fileOf(fileStart), data, at);
            } catch (IOException e) {
                throw new IOException("ConsumeQueue " + fileOf(fileStart) + " at offset " + at + ": " + e.getMessage(), e);
            }
            dirty.add(fileStart);
            pos += inFile;
            unit += inFile / ConsumeQueue.UNIT_SIZE;
        }
        pending.clear();
        pendingStart = writeOffset;
        // Keep at most the newest two files open.
        while (channels.size() > 2) {
            long start = channels.firstKey();
            FileChannel ch = channels.remove(start);
            if (dirty.remove(start)) ch.force(true);
            ch.close();
        }
    }

    /** fsync this queue's earlier files before a later one is written: after a crash the units are a prefix. */
    private void syncFilesBefore(long fileStart) throws IOException {
        for (Long start : new ArrayList<>(dirty)) {
            if (start < fileStart) {
                channels.get(start).force(true);
                dirty.remove(start);
            }
        }
    }

    void sync() throws IOException {
        writePending();
        for (Long start : new ArrayList<>(dirty)) {
            channels.get(start).force(true);
            dirty.remove(start);
        }
    }

    /** Drops units whose record ends past the CommitLog's valid end (zeroed on disk). */
    void truncateFromPhy(long commitLogEnd) throws IOException {
        writePending();
        if (!hasFiles) return;
        ConsumeQueueFiles cq = new ConsumeQueueFiles(directory.toString(), topic, queueId);
        long first = cq.firstFileStartOffset();
        long end = cq.maxOffset();
        long newEnd = end;
        long[] p = new long[1];
        int[] s = new int[1];
        long[] c = new long[1];
        // Units are in phyOffset order: walk back from the end (bounded by the queue length).
        for (long k = 0; k < end - first && newEnd > first; k++) {
            int got = cq.read(newEnd - 1, 1, p, s, c);
            if (got == 0 || (s[0] != ConsumeQueue.PRE_BLANK_SIZE && p[0] + s[0] > commitLogEnd)) newEnd--;
            else break;
        }
        long lastEnd = 0;
        if (newEnd > first && cq.read(newEnd - 1, 1, p, s, c) == 1 && s[0] != ConsumeQueue.PRE_BLANK_SIZE) {
            lastEnd = p[0] + s[0];
        }
        if (newEnd < end) {
            byte[] zeros = new byte[ConsumeQueue.UNIT_SIZE];
            for (long off = newEnd; off < end; off++) {
                long fs = off - off % unitsPerFile;
                WriteFiles.writeFully(channelFor(fs), fileOf(fs), ByteBuffer.wrap(zeros),
                        (off - fs) * ConsumeQueue.UNIT_SIZE);
                dirty.add(fs);
            }
        }
        writeOffset = newEnd;
        pendingStart = newEnd;
        maxPhysicOffset = lastEnd;
    }

    void close() throws IOException {
        try {
            sync();
        } finally {
            for (FileChannel ch : channels.values()) WriteFiles.closeQuietly(ch);
            channels.clear();
        }
    }

    /** Closes the files without writing what is buffered (the writer let go as if it had died). */
    void release() {
        pending.clear();
        for (FileChannel ch : channels.values()) WriteFiles.closeQuietly(ch);
        channels.clear();
        dirty.clear();
    }
}
