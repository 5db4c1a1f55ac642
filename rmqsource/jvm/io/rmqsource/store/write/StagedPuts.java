package io.rmqsource.store.write;

import io.rmqsource.errors.StoreError;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Objects;

/**
 * Messages checked and encoded before the writer's lock is taken, so that the work under the lock is a
 * copy: {@link #stage} runs the put checks and writes the CommitLog record image with everything but
 * its position (queue offset, CommitLog offset, and the store timestamp unless the message pins it),
 * next to what dispatch needs; {@link MessageStoreWriter#putStaged} copies the images, fills the
 * position fields and dispatches. Many producers (Spark tasks) stage in parallel; one at a time puts.
 *
 * <p>Entries are kept in memory while the {@link MemoryBudget} grants it, then all of them in one spill
 * file under {@code spillDir}, read back in order. One entry:
 * <pre>
 *  0 int entryBytes   4 int flags   8 int queueRef   12 int recordSize   16 long tagsCode
 * 24 long pinned store timestamp   32 keys, uniqKey, tags, delay (int chars, -1 = null; UTF-16 chars)
 *  . the record image (recordSize bytes)
 * </pre>
 * Not thread-safe: one producer per instance.
 */
public final class StagedPuts implements AutoCloseable {
    static final int ENTERS_CQ = 1;
    static final int CRC_PROPERTY = 2;
    static final int PINNED_TIMESTAMP = 4;
    static final int DELAYED = 8;
    private static final int HEAD_BYTES = 32;
    private static final int CHUNK_BYTES = 4 << 20;

    private final PutChecks checks;
    private final MemoryBudget budget;
    private final Path spillDir;
    private final HashMap<QueueKey, Integer> refs = new HashMap<>();
    private final QueueKey probe = new QueueKey(null, 0);
    /** Refs + 1 of the queues below {@link #QUEUE_ARRAY} by topic (0: not seen yet), before the map. */
    private final HashMap<String, int[]> refsByTopic = new HashMap<>();
    private static final int QUEUE_ARRAY = 1024;
    private final List<String> queueTopics = new ArrayList<>();
    private final List<Integer> queueIds = new ArrayList<>();
    private final List<ByteBuffer> chunks = new ArrayList<>();
    private ByteBuffer current;
    private Path spillFile;
    private FileChannel spill;
    private long count;

    /** The memory staging may hold (a Spark sink asks its task's memory manager); a refusal means spilling. */
    public interface MemoryBudget {
        /** Reserves {@code bytes} more: false when they are not available (nothing is reserved then). */
        boolean reserve(long bytes);

        /** Gives back all that was reserved. */
        void releaseAll();
    }

    /** A budget of {@code bytes} in all. */
    public static MemoryBudget fixed(long bytes) {
        return new MemoryBudget() {
            private long held;

            @Override
            public boolean reserve(long n) {
                if (held + n > bytes) return false;
                held += n;
                return true;
            }

            @Override
            public void releaseAll() {
                held = 0;
            }
        };
    }

    /** Staging for a store of {@code config}: in memory within {@code budget}, then in a file in {@code spillDir}. */
    public StagedPuts(io.rmqsource.store.StoreConfig config, MemoryBudget budget, Path spillDir) {
        this.checks = new PutChecks(config != null ? config : io.rmqsource.store.StoreConfig.defaults());
        this.budget = Objects.requireNonNull(budget);
        this.spillDir = Objects.requireNonNull(spillDir);
    }

    /** Staging for a store of {@code config} holding up to {@code memoryBytes} in memory. */
    public StagedPuts(io.rmqsource.store.StoreConfig config, long memoryBytes, Path spillDir) {
        this(config, fixed(memoryBytes), spillDir);
    }

    /** Messages staged so far. */
    public long count() {
        return count;
    }

    /**
     * Checks and encodes {@code m} as the writer's put would: null when it is staged (it is the
     * {@link #count()}-th, from 0), else the result of its refusal, and nothing is staged.
     */
    public PutResult stage(Message m) throws IOException {
        Object o;
        try {
            o = checks.prepare(m);
        } catch (io.rmqsource.errors.UnsupportedMessageError e) {
            throw e;
        } catch (RuntimeException e) {          // a malformed message object: refused, as putAll does
            return PutResult.failed(m, PutMessageStatus.MESSAGE_ILLEGAL, null,
                    e.getClass().getSimpleName() + ": " + e.getMessage());
        }
        if (o instanceof PutResult) return (PutResult) o;
        Prepared p = (Prepared) o;
        boolean delayed = p.delay != null;
        String tags = delayed ? p.tags : null;
        String delay = delayed ? p.delay : null;
        int need = HEAD_BYTES + chars(p.keys) + chars(p.uniqKey) + chars(tags) + chars(delay) + p.size;
        ByteBuffer b = room(need);
        int at = b.position();
        int flags = (p.entersCq ? ENTERS_CQ : 0) | (p.crcProp ? CRC_PROPERTY : 0)
                | (p.storeTimestamp != null ? PINNED_TIMESTAMP : 0) | (delayed ? DELAYED : 0);
        b.putInt(at, need).putInt(at + 4, flags).putInt(at + 8, queueRef(p.topic, p.queueId)).putInt(at + 12, p.size)
                .putLong(at + 16, delayed || p.tags == null ? 0 : p.tags.hashCode())
                .putLong(at + 24, p.storeTimestamp != null ? p.storeTimestamp : 0);
        int pos = putChars(b, at + HEAD_BYTES, p.keys);
        pos = putChars(b, pos, p.uniqKey);
        pos = putChars(b, pos, tags);
        pos = putChars(b, pos, delay);
        CommitLogAppend.encodeRecord(b, pos, p, 0, 0, p.storeTimestamp != null ? p.storeTimestamp : 0, null);
        b.position(at + need);
        count++;
        return null;
    }

    private static int chars(String s) {
        return 4 + (s == null ? 0 : 2 * s.length());
    }

    private static int putChars(ByteBuffer b, int pos, String s) {
        if (s == null) {
            b.putInt(pos, -1);
            return pos + 4;
        }
        int n = s.length();
        b.putInt(pos, n);
        pos += 4;
        for (int i = 0; i < n; i++, pos += 2) b.putChar(pos, s.charAt(i));
        return pos;
    }

    private int queueRef(String topic, int queueId) {
        if (queueId < QUEUE_ARRAY) {
            int[] byQueue = refsByTopic.get(topic);
            if (byQueue != null && queueId < byQueue.length && byQueue[queueId] > 0) return byQueue[queueId] - 1;
            int ref = mappedQueueRef(topic, queueId);
            if (byQueue == null || queueId >= byQueue.length) {
                byQueue = java.util.Arrays.copyOf(byQueue != null ? byQueue : new int[0], Math.max(16, 2 * queueId + 1));
                refsByTopic.put(topic, byQueue);
            }
            byQueue[queueId] = ref + 1;
            return ref;
        }
        return mappedQueueRef(topic, queueId);
    }

    private int mappedQueueRef(String topic, int queueId) {
        probe.topic = topic;
        probe.queueId = queueId;
        Integer ref = refs.get(probe);
        if (ref == null) {
            ref = queueTopics.size();
            queueTopics.add(topic);
            queueIds.add(queueId);
            refs.put(new QueueKey(topic, queueId), ref);
        }
        return ref;
    }

    int queueCount() {
        return queueTopics.size();
    }

    String topic(int ref) {
        return queueTopics.get(ref);
    }

    int queueId(int ref) {
        return queueIds.get(ref);
    }

    /** A buffer with {@code need} bytes free at its position: in memory while it fits, else the spill's. */
    private ByteBuffer room(int need) throws IOException {
        if (current != null && current.remaining() >= need) return current;
        if (current != null) {
            if (spill != null) {
                writeSpill(current);
                if (current.capacity() >= need) return current.clear();
            } else {
                chunks.add(current);
            }
            current = null;
        }
        int size = Math.max(CHUNK_BYTES, need);
        if (spill == null && !budget.reserve(size)) startSpill();
        current = ByteBuffer.allocate(size);
        return current;
    }

    /**
     * Moves what is held in memory to the spill file now (when the memory is wanted elsewhere); later
     * entries go there too. Returns the bytes given back.
     */
    public long spillNow() throws IOException {
        if (spill != null) return 0;
        long held = 0;
        for (ByteBuffer c : chunks) held += c.capacity();
        if (current != null) {
            held += current.capacity();
            chunks.add(current);
            current = null;
        }
        startSpill();
        return held;
    }

    private void startSpill() throws IOException {
        Files.createDirectories(spillDir);
        spillFile = Files.createTempFile(spillDir, "rmq-staged-", ".records");
        spill = FileChannel.open(spillFile, StandardOpenOption.WRITE, StandardOpenOption.READ);
        for (ByteBuffer c : chunks) writeSpill(c);
        chunks.clear();
        budget.releaseAll();
    }

    /** Appends the bytes of {@code b} written so far (up to its position) to the spill file. */
    private void writeSpill(ByteBuffer b) throws IOException {
        ByteBuffer d = b.duplicate().flip();
        while (d.hasRemaining()) spill.write(d);
    }

    /** The entries in staging order (the staged messages must not change while it is used). */
    Cursor cursor() throws IOException {
        if (spill != null && current != null && current.position() > 0) {
            writeSpill(current);
            current.clear();
        }
        return new Cursor();
    }

    /** Reads the entries one after the other: {@link #buf} holds the current one at {@link #at}. */
    final class Cursor {
        ByteBuffer buf;
        int at = -1;
        private int end;
        private int chunk;
        private long fileAt;
        private final List<ByteBuffer> memory = new ArrayList<>();

        private Cursor() {
            if (spill == null) {
                for (ByteBuffer c : chunks) memory.add(c.duplicate().flip());
                if (current != null) memory.add(current.duplicate().flip());
            } else {
                buf = ByteBuffer.allocate(CHUNK_BYTES);
                buf.limit(0);
            }
        }

        /** Moves to the next entry; false after the last. */
        boolean next() throws IOException {
            if (at >= 0) buf.position(end);
            if (spill == null) {
                while (buf == null || !buf.hasRemaining()) {
                    if (chunk == memory.size()) return false;
                    buf = memory.get(chunk++).duplicate();
                }
            } else if (!fill()) {
                return false;
            }
            at = buf.position();
            int n = buf.getInt(at);
            if (n < HEAD_BYTES || n > buf.remaining()) {
                throw new StoreError("staged message entry at " + at + " is corrupt (" + n + " bytes)"
                        + (spillFile != null ? " in " + spillFile : ""));
            }
            end = at + n;
            return true;
        }

        /** Makes the next whole entry readable from the spill file; false at its end. */
        private boolean fill() throws IOException {
            if (buf.remaining() >= 4 && buf.remaining() >= buf.getInt(buf.position())) return true;
            buf.compact();                        // the bytes not read yet first, then more of the file
            long size = spill.size();
            while (true) {
                if (buf.position() >= 4) {
                    int n = buf.getInt(0);
                    if (n > buf.capacity()) buf = ByteBuffer.allocate(n).put(buf.flip());
                    if (buf.position() >= n) break;
                }
                if (fileAt >= size) break;
                int r = spill.read(buf, fileAt);
                if (r <= 0) break;
                fileAt += r;
            }
            buf.flip();
            if (!buf.hasRemaining()) return false;
            if (buf.remaining() < 4 || buf.remaining() < buf.getInt(0)) {
                throw new StoreError("staged messages spill file " + spillFile + " ends inside an entry at "
                        + (fileAt - buf.remaining()));
            }
            return true;
        }

        int flags() {
            return buf.getInt(at + 4);
        }

        int queueRef() {
            return buf.getInt(at + 8);
        }

        int recordSize() {
            return buf.getInt(at + 12);
        }

        long tagsCode() {
            return buf.getLong(at + 16);
        }

        long pinnedTimestamp() {
            return buf.getLong(at + 24);
        }

        /** keys, uniqKey, tags, delay: index 0..3. */
        String text(int which) {
            int pos = at + HEAD_BYTES;
            for (int i = 0; i < which; i++) {
                int n = buf.getInt(pos);
                pos += 4 + Math.max(n, 0) * 2;
            }
            int n = buf.getInt(pos);
            if (n < 0) return null;
            char[] c = new char[n];
            for (int i = 0; i < n; i++) c[i] = buf.getChar(pos + 4 + 2 * i);
            return new String(c);
        }

        /** Where the record image starts. */
        int recordAt() {
            return end - recordSize();
        }
    }

    /** Drops the staged messages (removes the spill file). */
    @Override
    public void close() {
        chunks.clear();
        current = null;
        budget.releaseAll();
        if (spill != null) {
            try {
                spill.close();
            } catch (IOException ignored) {
                // the file goes next
            }
            spill = null;
        }
        if (spillFile != null) {
            try {
                Files.deleteIfExists(spillFile);
            } catch (IOException ignored) {
                // the spill directory is the caller's scratch space
            }
        }
    }
}
