package io.rmqsource.store.write;

import io.rmqsource.errors.CorruptRecordError;
import io.rmqsource.errors.StoreError;
import io.rmqsource.format.IndexFile;
import io.rmqsource.format.JavaHash;
import io.rmqsource.format.Record;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.time.ZoneId;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.function.LongConsumer;
import java.util.function.LongSupplier;
import java.util.stream.Stream;

/**
 * IndexFiles, write side: RocketMQ's IndexService.buildIndex and IndexFile.putKey (spec 5), twin of
 * rmqsource/store/index_service.py.  The last file is fetched (or created, inheriting the previous
 * file's end phyOffset/timestamp) for every dispatched record; keys are UNIQ_KEY then each non-empty
 * KEYS piece; ROLLBACK records are skipped; entries chain newest-first through the hash slots.  Only
 * the newest file is written, through a read-write map (slots are updated at random positions).  A
 * fault while touching the map (SIGBUS on a full disk) is raised as a StoreError naming the file.
 */
final class IndexWriter {
    private static final DateTimeFormatter NAME = DateTimeFormatter.ofPattern("yyyyMMddHHmmssSSS");

    /** One IndexFile with its header in memory; the writable one is mapped. */
    static final class Idx {
        final Path path;
        long beginTimestamp;
        long endTimestamp;
        long beginPhyOffset;
        long endPhyOffset;
        int hashSlotCount;
        int indexCount = 1;
        MappedByteBuffer map;

        Idx(Path path) {
            this.path = path;
        }
    }

    private final Path dir;
    private final int hashSlotNum;
    private final int indexNum;
    private final long fileSize;
    private final int entriesBase;
    private final LongSupplier clockMs;
    private final LongConsumer onFullFileFlushed;
    final List<Idx> files = new ArrayList<>();
    long indexMsgTimestampMs;

    IndexWriter(Path dir, long hashSlotNum, long indexNum, LongSupplier clockMs, LongConsumer onFullFileFlushed) {
        this.dir = dir;
        this.hashSlotNum = (int) hashSlotNum;
        this.indexNum = (int) indexNum;
        this.fileSize = IndexFile.fileSize(hashSlotNum, indexNum);
        this.entriesBase = (int) (IndexFile.HEADER_SIZE + hashSlotNum * IndexFile.HASH_SLOT_SIZE);
        this.clockMs = clockMs;
        this.onFullFileFlushed = onFullFileFlushed;
        load();
    }

    private void load() {
        if (!Files.isDirectory(dir)) return;
        List<Path> names = new ArrayList<>();
        try (Stream<Path> s = Files.list(dir)) {
            s.filter(p -> isDigits(p.getFileName().toString()) && Files.isRegularFile(p)).sorted().forEach(names::add);
        } catch (IOException e) {
            throw new StoreError("cannot list " + dir + ": " + e);
        }
        for (int i = 0; i < names.size(); i++) files.add(open(names.get(i), i == names.size() - 1));
    }

    private static boolean isDigits(String s) {
        if (s.isEmpty()) return false;
        for (int i = 0; i < s.length(); i++) if (!Character.isDigit(s.charAt(i))) return false;
        return true;
    }

    private Idx open(Path path, boolean writable) {
        Idx f = new Idx(path);
        try (FileChannel ch = FileChannel.open(path, writable
                ? new StandardOpenOption[] {StandardOpenOption.READ, StandardOpenOption.WRITE}
                : new StandardOpenOption[] {StandardOpenOption.READ})) {
            long size = ch.size();
            if (size != fileSize) {
                throw new CorruptRecordError("IndexFile is " + size + " bytes, expected " + fileSize
                        + " for maxHashSlotNum=" + hashSlotNum + " maxIndexNum=" + indexNum, path.toString(), 0);
            }
            ByteBuffer h = ByteBuffer.allocate(IndexFile.HEADER_SIZE);
            ch.read(h, 0);
            f.beginTimestamp = h.getLong(0);
            f.endTimestamp = h.getLong(8);
            f.beginPhyOffset = h.getLong(16);
            f.endPhyOffset = h.getLong(24);
            f.hashSlotCount = h.getInt(32);
            int count = h.getInt(36);
            f.indexCount = count > 0 ? count : 1;     // a fresh file holds 0 on disk; the loader reads 1
            if (writable) f.map = ch.map(FileChannel.MapMode.READ_WRITE, 0, fileSize);
        } catch (IOException e) {
            throw new StoreError("cannot open IndexFile " + path + ": " + e);
        }
        return f;
    }

    /** Abnormal-start rule (spec 5.6): drop files whose endTimestamp is past the checkpoint's. */
    void deleteFilesAfter(long indexMsgTimestampMs) throws IOException {
        List<Idx> keep = new ArrayList<>();
        for (Idx f : files) {
            if (f.endTimestamp > indexMsgTimestampMs) {
                f.map = null;
                Files.delete(f.path);
            } else {
                keep.add(f);
            }
        }
        files.clear();
        files.addAll(keep);
        if (!files.isEmpty() && files.get(files.size() - 1).map == null) {
            Idx last = files.remove(files.size() - 1);
            files.add(open(last.path, true));
        }
    }

    void deleteAll() throws IOException {
        for (Idx f : files) {
            f.map = null;
            Files.delete(f.path);
        }
        files.clear();
    }

    Idx last() {
        return files.isEmpty() ? null : files.get(files.size() - 1);
    }

    private boolean full(Idx f) {
        return f.indexCount >= indexNum;
    }

    private String newFileName() {
        String name = NAME.format(Instant.ofEpochMilli(clockMs.getAsLong()).atZone(ZoneId.systemDefault()));
        Idx last = last();
        if (last != null) {
            String lastName = last.path.getFileName().toString();
            long prev = isDigits(lastName) && lastName.length() < 19 ? Long.parseLong(lastName) : 0;
            // Same millisecond (or a clock step back): the next free number keeps names increasing.
            if (Long.parseLong(name) <= prev) {
                String s = Long.toString(prev + 1);
                name = s.length() >= 17 ? s : "00000000000000000".substring(s.length()) + s;
            }
        }
        return name;
    }

    /** getAndCreateLastIndexFile: the last file if not full, else a new one inheriting its end. */
    Idx lastFile() {
        Idx prev = last();
        if (prev != null && !full(prev)) return prev;
        long endPhy = prev != null ? prev.endPhyOffset : 0;
        long endTs = prev != null ? prev.endTimestamp : 0;
        Idx f;
        try {
            Files.createDirectories(dir);
            f = new Idx(dir.resolve(newFileName()));
            try (FileChannel ch = FileChannel.open(f.path, StandardOpenOption.READ, StandardOpenOption.WRITE,
                    StandardOpenOption.CREATE_NEW)) {
                try (RandomAccessFile raf = new RandomAccessFile(f.path.toFile(), "rw")) {
                    raf.setLength(fileSize);
                }
                f.map = ch.map(FileChannel.MapMode.READ_WRITE, 0, fileSize);
            } catch (IOException | RuntimeException e) {
                Files.deleteIfExists(f.path);
                throw e;
            }
        } catch (IOException e) {
            throw new StoreError("cannot create an IndexFile in " + dir + ": " + e);
        }
        // IndexFile constructor: the setters write inherited values straight into the buffer.
        if (endPhy > 0) {
            f.beginPhyOffset = f.endPhyOffset = endPhy;
            f.map.putLong(16, endPhy);
            f.map.putLong(24, endPhy);
        }
        if (endTs > 0) {
            f.beginTimestamp = f.endTimestamp = endTs;
            f.map.putLong(0, endTs);
            f.map.putLong(8, endTs);
        }
        files.add(f);
        if (prev != null) flushFull(prev);
        return f;
    }

    /** IndexService.flush(f): a full file's endTimestamp becomes indexMsgTimestamp. */
    private void flushFull(Idx f) {
        long ts = full(f) ? f.endTimestamp : 0;
        flush(f);
        f.map = null;                         // only the newest file is written
        if (ts > 0) {
            indexMsgTimestampMs = ts;
            if (onFullFileFlushed != null) onFullFileFlushed.accept(ts);
        }
    }

    /** IndexFile.flush: the whole in-memory header, then force to disk. */
    private void flush(Idx f) {
        if (f.map == null) return;
        try {
            writeHeader(f);
            f.map.force();
        } catch (InternalError e) {
            throw fault(f, e);
        }
    }

    private static void writeHeader(Idx f) {
        f.map.putLong(0, f.beginTimestamp).putLong(8, f.endTimestamp).putLong(16, f.beginPhyOffset)
                .putLong(24, f.endPhyOffset).putInt(32, f.hashSlotCount).putInt(36, f.indexCount);
    }

    /** A mapped write's fault that surfaced outside this class (the JVM raises it where it next checks). */
    StoreError mappedFault(InternalError e) {
        return fault(last(), e);
    }

    private StoreError fault(Idx f, Throwable e) {
        return new StoreError("IndexFile " + (f != null ? f.path : dir) + ": the mapped write failed (" + e.getMessage()
                + "); a full disk?");
    }

    /**
     * buildIndex for one dispatched record.  Records already indexed are skipped: phyOffset below the
     * file's endPhyOffset (RocketMQ's rule), and the record at endPhyOffset when the file already holds
     * it, so dispatching twice changes nothing.
     */
    void putKeys(String topic, long phyOffset, long storeTimestamp, int sysFlag, String uniqKey, String keys) {
        try {
            putKeys0(topic, phyOffset, storeTimestamp, sysFlag, uniqKey, keys);
        } catch (InternalError e) {
            throw fault(last(), e);
        }
    }

    private void putKeys0(String topic, long phyOffset, long storeTimestamp, int sysFlag, String uniqKey, String keys) {
        Idx f = lastFile();
        long end = f.endPhyOffset;
        if (phyOffset < end || (phyOffset == end && (f.indexCount > 1 || end > 0))) return;
        if ((sysFlag & Record.TRANSACTION_MASK) == Record.TRANSACTION_ROLLBACK_TYPE) return;
        if (uniqKey == null && (keys == null || keys.isEmpty())) return;
        int prefix = JavaHash.topicPrefixHash(topic);
        if (uniqKey != null) f = putKey(f, JavaHash.indexKeyHash(prefix, uniqKey, 0, uniqKey.length()), phyOffset,
                storeTimestamp);
        if (keys != null && keys.indexOf(' ') < 0) {
            if (!keys.isEmpty()) f = putKey(f, JavaHash.indexKeyHash(prefix, keys, 0, keys.length()), phyOffset, storeTimestamp);
        } else if (keys != null) {
            int n = keys.length();
            int start = 0;
            // KEYS split like Java split(" ") with empty pieces skipped.
            for (int i = 0; i <= n; i++) {
                if (i == n || keys.charAt(i) == ' ') {
                    if (i > start) f = putKey(f, JavaHash.indexKeyHash(prefix, keys, start, i), phyOffset, storeTimestamp);
                    start = i + 1;
                }
            }
        }
    }

    private Idx putKey(Idx f, int keyHash, long phy, long ts) {
        // At most one new file per key: a fresh file always has room.
        for (int round = 0; round < 2; round++) {
            if (putKey1(f, keyHash, phy, ts)) return f;
            f = lastFile();
        }
        throw new CorruptRecordError("a fresh IndexFile refused a key (maxIndexNum < 2?)", f.path.toString(), 0);
    }

    /** IndexFile.putKey; false when the file is full. */
    private boolean putKey1(Idx f, int keyHash, long phy, long ts) {
        int count = f.indexCount;
        if (count >= indexNum) return false;
        MappedByteBuffer mm = f.map;
        int slotPos = IndexFile.HEADER_SIZE + (keyHash % hashSlotNum) * IndexFile.HASH_SLOT_SIZE;
        int slotValue = mm.getInt(slotPos);
        if (slotValue <= 0 || slotValue > count) slotValue = 0;
        int timeDiff = timeDiffSeconds(ts, f.beginTimestamp);
        int e = entriesBase + count * IndexFile.ENTRY_SIZE;
        mm.putInt(e, keyHash);
        mm.putLong(e + 4, phy);
        mm.putInt(e + 12, timeDiff);
        mm.putInt(e + 16, slotValue);
        mm.putInt(slotPos, count);
        if (count <= 1) {
            f.beginPhyOffset = phy;
            f.beginTimestamp = ts;
            mm.putLong(16, phy);
            mm.putLong(0, ts);
        }
        if (slotValue == 0) {
            f.hashSlotCount++;
            mm.putInt(32, f.hashSlotCount);
        }
        f.indexCount = count + 1;
        f.endPhyOffset = phy;
        f.endTimestamp = ts;
        mm.putInt(36, f.indexCount);
        mm.putLong(24, phy);
        mm.putLong(8, ts);
        return true;
    }

    /** timeDiff as IndexFile.putKey computes it: Java integer division, clamped to [0, Integer.MAX_VALUE]. */
    static int timeDiffSeconds(long storeTimestamp, long beginTimestamp) {
        if (beginTimestamp <= 0) return 0;
        long seconds = (storeTimestamp - beginTimestamp) / 1000;
        if (seconds > Integer.MAX_VALUE) return Integer.MAX_VALUE;
        return seconds < 0 ? 0 : (int) seconds;
    }

    /** Makes the newest file's written pages durable. */
    void sync() {
        Idx f = last();
        if (f != null && f.map != null) {
            try {
                f.map.force();
            } catch (InternalError e) {
                throw fault(f, e);
            }
        }
    }

    /** Shutdown: flush the file being written; let go of the maps. */
    void close() {
        Idx f = last();
        try {
            if (f != null) flush(f);
        } finally {
            for (Idx x : files) x.map = null;
            files.clear();
        }
    }

    /** Let go of the maps without flushing anything. */
    void release() {
        for (Idx x : files) x.map = null;
        files.clear();
    }
}
