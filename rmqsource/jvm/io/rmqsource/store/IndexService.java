package io.rmqsource.store;

import io.rmqsource.errors.CorruptRecordError;
import io.rmqsource.format.IndexFile;
import io.rmqsource.format.JavaHash;
import io.rmqsource.io.StoreFiles;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * IndexFiles, lookup side (IndexService.queryOffset, spec 5.4), twin of the read part of
 * rmqsource/store/index_service.py.  Files are read, never whole off a remote store; chains are walked newest
 * first, only to lower entry numbers and at most MAX_CHAIN_STEPS steps (loops in a damaged
 * file end there).
 */
public final class IndexService {
    public static final int MAX_CHAIN_STEPS = 1_000_000;
    private final StoreFiles storeFiles;
    private final List<ByteBuffer> files = new ArrayList<>();     // mapped files (local); else headers only
    private final List<String> paths = new ArrayList<>();
    private final long hashSlotNum;
    private final long indexNum;

    /**
     * Geometry as the reader infers it: configured, or from the last file's size when N = 4H.  Local
     * files are mapped; elsewhere a lookup reads each file's header, the key's slot and the chain's
     * entries by positioned reads, never a whole file.
     */
    public IndexService(StoreLayout layout, StoreConfig config) {
        this.storeFiles = layout.files;
        long h = config.maxHashSlotNum();
        long n = config.maxIndexNum();
        String dir = layout.indexDirPath();
        List<StoreFiles.Entry> entries = storeFiles.list(dir);
        java.util.Map<String, Long> sizes = new java.util.HashMap<>();
        List<String> sorted = new ArrayList<>();
        if (entries != null) {
            for (StoreFiles.Entry e : entries) {
                if (!e.name.isEmpty() && e.name.chars().allMatch(Character::isDigit) && !e.directory) {
                    sorted.add(e.name);
                    sizes.put(e.name, e.size);
                }
            }
        }
        sorted.sort(null);
        List<String> seventeen = new ArrayList<>();
        for (String s : sorted) if (s.length() == 17) seventeen.add(s);
        if (!seventeen.isEmpty()) {
            // From the oldest file: the newest is the one a crash may have cut short (it then fails naming itself).
            long size = sizes.get(seventeen.get(0));
            if (size != IndexFile.fileSize(h, n) && (size - 40) % 84 == 0) {
                h = (size - 40) / 84;
                n = 4 * h;
            }
        }
        this.hashSlotNum = h;
        this.indexNum = n;
        long expected = IndexFile.fileSize(h, n);
        for (String name : sorted) {
            String path = StoreFiles.child(dir, name);
            long size = sizes.get(name);
            if (size != expected) {
                throw new CorruptRecordError("IndexFile is " + size + " bytes, expected " + expected
                        + " for maxHashSlotNum=" + h + " maxIndexNum=" + n, path, 0);
            }
            files.add(storeFiles.mapped() ? Segments.mapFile(path) : null);
            paths.add(path);
        }
    }

    /** Bytes [pos, pos + len) of file i: index 0 of the buffer is {@code pos} (fewer past the file's end). */
    private ByteBuffer bytes(int i, long pos, int len) {
        ByteBuffer map = files.get(i);
        if (map == null) return storeFiles.read(paths.get(i), pos, len);
        int from = (int) Math.min(pos, map.capacity());
        return map.slice(from, (int) Math.min(len, map.capacity() - from));
    }

    private ByteBuffer header(int i) {
        ByteBuffer h = bytes(i, 0, IndexFile.HEADER_SIZE);
        if (h.capacity() < IndexFile.HEADER_SIZE) {
            throw new CorruptRecordError("IndexFile ends inside its header", paths.get(i), h.capacity());
        }
        return h;
    }

    private static int indexCount(ByteBuffer header) {
        int count = header.getInt(36);
        return count > 0 ? count : 1;
    }

    /**
     * The newest IndexFile's endPhyOffset: the CommitLog offset of the last message indexed (0 without an
     * IndexFile).  Read before a lookup's hash walks, it bounds what they see: every entry of a message below it.
     */
    public long endPhyOffset() {
        return paths.isEmpty() ? 0 : header(paths.size() - 1).getLong(24);
    }

    /** IndexFile.isTimeMatched: the file's [begin, end] store times overlap the query's [beginMs, endMs]. */
    private static boolean timeMatched(long begin, long end, long beginMs, long endMs) {
        return (beginMs < begin && endMs > end) || (begin <= beginMs && beginMs <= end)
                || (begin <= endMs && endMs <= end);
    }

    /** CommitLog offsets whose entry has the key's hash, newest first (hash collisions included). */
    public long[] queryOffsets(String topic, String key, int maxNum, long beginMs, long endMs) {
        long[] out = new long[16];
        int[] n = {0};
        String fullKey = IndexFile.indexKey(topic, key);
        for (int i = paths.size() - 1; i >= 0; i--) {
            ByteBuffer f = header(i);
            long b = f.getLong(0);
            long e = f.getLong(8);
            boolean timeMatched = timeMatched(b, e, beginMs, endMs);
            if (timeMatched) out = select(i, f, paths.get(i), out, n, fullKey, maxNum, beginMs, endMs);
            if (b < beginMs || n[0] >= maxNum) break;
        }
        return Arrays.copyOf(out, n[0]);
    }

    /**
     * {@link #queryOffsets} of many keys at once ({@code fullKeys}: topic#key), each IndexFile's header read once for
     * all of them; result i holds key i's offsets, newest first, at most maxNum (a result of maxNum may be cut).
     */
    public long[][] queryOffsets(List<String> fullKeys, int maxNum, long beginMs, long endMs) {
        int k = fullKeys.size();
        long[][] out = new long[k][];
        int[][] n = new int[k][1];
        for (int j = 0; j < k; j++) out[j] = new long[4];
        for (int i = paths.size() - 1; i >= 0; i--) {
            ByteBuffer f = header(i);
            long b = f.getLong(0);
            long e = f.getLong(8);
            boolean timeMatched = timeMatched(b, e, beginMs, endMs);
            if (timeMatched) {
                for (int j = 0; j < k; j++) {
                    if (n[j][0] < maxNum) out[j] = select(i, f, paths.get(i), out[j], n[j], fullKeys.get(j), maxNum, beginMs, endMs);
                }
            }
            if (b < beginMs) break;
        }
        for (int j = 0; j < k; j++) out[j] = Arrays.copyOf(out[j], n[j][0]);
        return out;
    }

    private long[] select(int file, ByteBuffer f, String path, long[] out, int[] n, String key, int maxNum,
                          long beginMs, long endMs) {
        int count = indexCount(f);
        if (count > indexNum) {        // entries past the file: a damaged header, not a short chain
            throw new CorruptRecordError("indexCount " + count + " is more than the file's maxIndexNum " + indexNum,
                    path, 36);
        }
        int keyHash = JavaHash.indexKeyHash(key);
        ByteBuffer slot = bytes(file, IndexFile.slotPosition(keyHash % hashSlotNum), 4);
        if (slot.capacity() < 4) return out;
        int slotValue = slot.getInt(0);
        if (slotValue <= 0 || slotValue > count || count <= 1) return out;
        long beginTs = f.getLong(0);
        int entryNo = slotValue;
        for (int step = 0; step <= Math.min(count, MAX_CHAIN_STEPS); step++) {
            if (n[0] >= maxNum) return out;
            long pos = IndexFile.entryPosition(hashSlotNum, entryNo);
            ByteBuffer entry = bytes(file, pos, IndexFile.ENTRY_SIZE);
            if (entry.capacity() < IndexFile.ENTRY_SIZE) return out;
            int hash = entry.getInt(0);
            long phy = entry.getLong(4);
            int diff = entry.getInt(12);
            int prev = entry.getInt(16);
            if (diff < 0) return out;
            long timeRead = beginTs + diff * 1000L;
            if (hash == keyHash && beginMs <= timeRead && timeRead <= endMs) {
                if (n[0] == out.length) out = Arrays.copyOf(out, out.length * 2);
                out[n[0]++] = phy;
            }
            if (prev <= 0 || prev > count || prev >= entryNo || timeRead < beginMs) return out;
            entryNo = prev;
        }
        return out;
    }
}
