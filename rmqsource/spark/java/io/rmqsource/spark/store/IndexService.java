package io.rmqsource.spark.store;

import io.rmqsource.spark.errors.CorruptRecordError;
import io.rmqsource.spark.format.IndexFile;
import io.rmqsource.spark.format.JavaHash;
import java.io.File;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * IndexFiles, lookup side (IndexService.queryOffset, spec 5.4), twin of the read part of
 * rmqsource/store/index_service.py.  Files are mapped read-only; chains are walked newest
 * first, only to lower entry numbers and at most MAX_CHAIN_STEPS steps (loops in a damaged
 * file end there).
 */
public final class IndexService {
    public static final int MAX_CHAIN_STEPS = 1_000_000;
    private final List<ByteBuffer> files = new ArrayList<>();
    private final List<String> paths = new ArrayList<>();
    private final long hashSlotNum;
    private final long indexNum;

    /** Geometry as the reader infers it: configured, or from the last file's size when N = 4H. */
    public IndexService(StoreLayout layout, StoreConfig config) {
        long h = config.maxHashSlotNum();
        long n = config.maxIndexNum();
        File dir = layout.indexDir();
        String[] names = dir.isDirectory() ? dir.list() : null;
        List<String> sorted = new ArrayList<>();
        if (names != null) {
            for (String name : names) {
                if (!name.isEmpty() && name.chars().allMatch(Character::isDigit) && new File(dir, name).isFile()) {
                    sorted.add(name);
                }
            }
        }
        sorted.sort(null);
        List<String> seventeen = new ArrayList<>();
        for (String s : sorted) if (s.length() == 17) seventeen.add(s);
        if (!seventeen.isEmpty()) {
            // From the oldest file: the newest is the one a crash may have cut short (it then fails naming itself).
            long size = new File(dir, seventeen.get(0)).length();
            if (size != IndexFile.fileSize(h, n) && (size - 40) % 84 == 0) {
                h = (size - 40) / 84;
                n = 4 * h;
            }
        }
        this.hashSlotNum = h;
        this.indexNum = n;
        long expected = IndexFile.fileSize(h, n);
        for (String name : sorted) {
            String path = new File(dir, name).getPath();
            long size = new File(path).length();
            if (size != expected) {
                throw new CorruptRecordError("IndexFile is " + size + " bytes, expected " + expected
                        + " for maxHashSlotNum=" + h + " maxIndexNum=" + n, path, 0);
            }
            files.add(Segments.mapFile(path));
            paths.add(path);
        }
    }

    private static int indexCount(ByteBuffer f) {
        int count = f.getInt(36);
        return count > 0 ? count : 1;
    }

    /** CommitLog offsets whose entry has the key's hash, newest first (hash collisions included). */
    public long[] queryOffsets(String topic, String key, int maxNum, long beginMs, long endMs) {
        long[] out = new long[16];
        int[] n = {0};
        String fullKey = IndexFile.indexKey(topic, key);
        for (int i = files.size() - 1; i >= 0; i--) {
            ByteBuffer f = files.get(i);
            long b = f.getLong(0);
            long e = f.getLong(8);
            boolean timeMatched = (beginMs < b && endMs > e) || (b <= beginMs && beginMs <= e)
                    || (b <= endMs && endMs <= e);
            if (timeMatched) out = select(f, paths.get(i), out, n, fullKey, maxNum, beginMs, endMs);
            if (b < beginMs || n[0] >= maxNum) break;
        }
        return Arrays.copyOf(out, n[0]);
    }

    private long[] select(ByteBuffer f, String path, long[] out, int[] n, String key, int maxNum, long beginMs,
                          long endMs) {
        int count = indexCount(f);
        if (count > indexNum) {        // entries past the file: a damaged header, not a short chain
            throw new CorruptRecordError("indexCount " + count + " is more than the file's maxIndexNum " + indexNum,
                    path, 36);
        }
        int keyHash = JavaHash.indexKeyHash(key);
        int slotValue = f.getInt((int) IndexFile.slotPosition(keyHash % hashSlotNum));
        if (slotValue <= 0 || slotValue > count || count <= 1) return out;
        long beginTs = f.getLong(0);
        int entryNo = slotValue;
        for (int step = 0; step <= Math.min(count, MAX_CHAIN_STEPS); step++) {
            if (n[0] >= maxNum) return out;
            long pos = IndexFile.entryPosition(hashSlotNum, entryNo);
            if (pos + IndexFile.ENTRY_SIZE > f.capacity()) return out;
            int hash = f.getInt((int) pos);
            long phy = f.getLong((int) pos + 4);
            int diff = f.getInt((int) pos + 12);
            int prev = f.getInt((int) pos + 16);
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
