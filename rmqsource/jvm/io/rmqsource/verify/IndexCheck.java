package io.rmqsource.verify;

import io.rmqsource.format.IndexFile;
import java.io.File;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * IndexFile structure (twin of rmqsource/store/verify_index.py, spec 5): every chain walkable and
 * ending (an entry's previous-entry pointer is 0 or a lower entry of the same hash slot), slots
 * holding the newest entry of their chain, the header's counts and phyOffset bounds, entries in
 * phyOffset order, timeDiff >= 0.  Whether entries point at record starts is the CommitLog walk's
 * part, through {@link Cursor}.
 */
final class IndexCheck {
    static final int CHAIN_PROBLEMS_PER_FILE = 16;
    static final int BLOCK_ENTRIES = 1 << 20;
    private static final int ENTRY = IndexFile.ENTRY_SIZE;
    private static final int HEADER = IndexFile.HEADER_SIZE;

    /** A file whose entries are usable: path, indexCount, position of entry 0. */
    static final class Usable {
        final String path;
        final int count;
        final long base;

        Usable(String path, int count, long base) {
            this.path = path;
            this.count = count;
            this.base = base;
        }
    }

    private IndexCheck() {
    }

    private record Pending(int rank, long at, String check, String message, String expected, String found) {
    }

    /** Problems of one block of entries, listed in the Python twin's order: hashes, chains, order, timeDiff. */
    private static final class BlockProblems {
        final long base;
        long chainProblems;                 // of the whole file so far (the first CHAIN_PROBLEMS_PER_FILE are listed)
        int hashes;
        int chains;
        int order;
        int diffs;
        final List<Pending> found = new ArrayList<>();

        BlockProblems(long base, long chainProblems) {
            this.base = base;
            this.chainProblems = chainProblems;
        }

        void entry(int no, int keyHash, int prev, long phy, long lastPhy, int diff) {
            long at = base + (long) no * ENTRY;
            if (keyHash < 0 && hashes++ < CHAIN_PROBLEMS_PER_FILE) {
                found.add(new Pending(0, at, "index-hash", "entry " + no + ": keyHash is negative", ">= 0",
                        Integer.toString(keyHash)));
            }
            if ((prev < 0 || prev >= no) && chains++ < CHAIN_PROBLEMS_PER_FILE) {
                if (chainProblems < CHAIN_PROBLEMS_PER_FILE) {
                    found.add(new Pending(1, at, "index-chain", "entry " + no + ": previous-entry pointer does not "
                            + "point to a lower entry", "0.." + (no - 1), Integer.toString(prev)));
                }
                chainProblems++;
            }
            if (lastPhy != Long.MIN_VALUE && phy < lastPhy && order++ < CHAIN_PROBLEMS_PER_FILE) {
                found.add(new Pending(2, at, "index-order", "entry " + no + ": phyOffset is smaller than the "
                        + "previous entry's", "non-decreasing", Long.toString(phy)));
            }
            if (diff < 0 && diffs++ < CHAIN_PROBLEMS_PER_FILE) {
                found.add(new Pending(3, at, "index-timediff", "entry " + no + ": timeDiff is negative", ">= 0",
                        Integer.toString(diff)));
            }
        }

        void report(Report report, String rel) {
            found.sort((a, b) -> Integer.compare(a.rank, b.rank));      // stable: entry order within a check
            for (Pending p : found) report.add("index", p.check, rel, p.at, p.message, p.expected, p.found);
        }
    }

    /** Up to {@code n} entries at {@code position} (read(2): a sparse file's unused pages may be holes, see FileReads). */
    private static ByteBuffer entries(String path, long position, int n) {
        return FileReads.read(path, position, n * ENTRY);
    }

    static List<String> indexFiles(File dir) {
        List<String> out = new ArrayList<>();
        String[] names = dir.list();
        if (names == null) return out;
        Arrays.sort(names);
        for (String n : names) {
            boolean digits = n.length() == 17;
            for (int i = 0; i < n.length() && digits; i++) digits = n.charAt(i) >= '0' && n.charAt(i) <= '9';
            if (digits) out.add(new File(dir, n).getPath());
        }
        return out;
    }

    /** Configured (maxHashSlotNum, maxIndexNum), or inferred from the last file's size when N = 4H (the default ratio). */
    static long[] geometry(List<String> files, long hashSlotNum, long indexNum) {
        if (!files.isEmpty()) {
            long size = new File(files.get(files.size() - 1)).length();
            if (size != IndexFile.fileSize(hashSlotNum, indexNum) && (size - 40) % 84 == 0) {
                long h = (size - 40) / 84;
                return new long[] {h, 4 * h};
            }
        }
        return new long[] {hashSlotNum, indexNum};
    }

    /** Structural checks of one file; its usable entries, or null. {@code stats[0]} adds the entries seen. */
    static Usable check(String path, long hashSlotNum, long indexNum, Report report, long[] stats) {
        String rel = report.rel(path);
        long size = new File(path).length();
        long expected = IndexFile.fileSize(hashSlotNum, indexNum);
        if (size != expected) {
            report.add("index", "index-file-size", rel, 0, "IndexFile size does not match maxHashSlotNum=" + hashSlotNum
                    + " maxIndexNum=" + indexNum + " (give the broker's values with -C)", Long.toString(expected),
                    Long.toString(size));
            return null;
        }
        ByteBuffer file = FileReads.read(path, 0, HEADER);
        long beginPhy = file.getLong(16);
        long endPhy = file.getLong(24);
        int hashSlotCount = file.getInt(32);
        int count = Math.max(1, file.getInt(36));          // a fresh file holds 0: loaded as 1 (spec 5.1)
        if (count > indexNum) {
            report.add("index", "index-header", rel, 36, "indexCount is larger than maxIndexNum", "<= " + indexNum,
                    Integer.toString(count));
            return null;
        }
        int slotsN = (int) hashSlotNum;
        long base = HEADER + hashSlotNum * 4;
        ByteBuffer slotBytes = FileReads.read(path, HEADER, slotsN * 4);      // the size was checked above
        // One pass: each entry's slot, the newest entry of each slot, and links into another slot
        // (a lower entry's slot is known when a link to it is read).
        int[] entrySlot = new int[count];
        int[] newest = new int[slotsN];
        List<int[]> links = new ArrayList<>();              // {entry, linked entry}: the first CHAIN_PROBLEMS_PER_FILE
        long linkProblems = 0;
        entrySlot[0] = -1;
        long chainStarts = 0;
        int[] words = new int[0];
        long chainProblems = 0;
        long firstPhy = Long.MIN_VALUE;
        long lastPhy = Long.MIN_VALUE;
        for (int start = 1; start < count; start += BLOCK_ENTRIES) {
            int n = Math.min(BLOCK_ENTRIES, count - start);
            ByteBuffer e = entries(path, base + (long) start * ENTRY, n);
            int got = e.limit() / ENTRY;
            if (words.length < got * 5) words = new int[got * 5];
            e.asIntBuffer().get(words, 0, got * 5);          // one bulk copy: 5 big-endian ints per entry
            BlockProblems found = new BlockProblems(base, chainProblems);
            // Sequential pass: each entry's slot, and the rare entries with a problem of their own.
            for (int i = 0; i < got; i++) {
                int no = start + i;
                int keyHash = words[5 * i];
                long phy = ((long) words[5 * i + 1] << 32) | (words[5 * i + 2] & 0xFFFFFFFFL);
                int diff = words[5 * i + 3];
                int prev = words[5 * i + 4];
                entrySlot[no] = keyHash < 0 ? -1 : keyHash % slotsN;
                if (prev == 0) chainStarts++;
                if (keyHash < 0 || prev < 0 || prev >= no || phy < lastPhy || diff < 0) {
                    found.entry(no, keyHash, prev, phy, lastPhy, diff);
                }
                lastPhy = phy;
            }
            // Random-access pass, kept tight so the loads overlap: the newest entry of each slot, and
            // links into another slot (a link to the slot's previous newest entry is in the slot).
            for (int i = 0; i < got; i++) {
                int no = start + i;
                int slot = entrySlot[no];
                int prev = words[5 * i + 4];
                int slotHead = -1;
                if (slot >= 0) {
                    slotHead = newest[slot];
                    newest[slot] = no;
                }
                if (prev > 0 && prev < no && prev != slotHead && entrySlot[prev] != slot
                        && linkProblems++ < CHAIN_PROBLEMS_PER_FILE) {
                    links.add(new int[] {no, prev});
                }
            }
            if (got > 0 && firstPhy == Long.MIN_VALUE) firstPhy = ((long) words[1] << 32) | (words[2] & 0xFFFFFFFFL);
            chainProblems = found.chainProblems;
            found.report(report, rel);
        }
        // Each linked entry is in the same slot as the entry pointing at it.
        for (int[] link : links) {
            int no = link[0];
            int p = link[1];
            if (chainProblems < CHAIN_PROBLEMS_PER_FILE) {
                report.add("index", "index-chain", rel, base + (long) no * ENTRY, "entry " + no + " links to entry "
                        + p + " of another hash slot", "slot " + entrySlot[no], "slot " + entrySlot[p]);
            }
            chainProblems++;
        }
        chainProblems += linkProblems - links.size();
        if (chainProblems > CHAIN_PROBLEMS_PER_FILE) {
            report.count(Report.ERROR, "index-chain", chainProblems - CHAIN_PROBLEMS_PER_FILE);
        }
        // Slot heads: the newest entry of each slot (entries of a slot are only reachable from it).
        int headProblems = 0;
        for (int s = 0; s < slotsN && headProblems < CHAIN_PROBLEMS_PER_FILE; s++) {
            int stored = s * 4 + 4 <= slotBytes.limit() ? slotBytes.getInt(s * 4) : 0;
            if (stored != newest[s]) {
                headProblems++;
                report.add("index", "index-slot", rel, HEADER + s * 4L, "hash slot " + s + " does not hold the newest "
                        + "entry of its chain", Integer.toString(newest[s]), Integer.toString(stored));
            }
        }
        if (hashSlotCount != chainStarts) {
            report.add("index", "index-header", rel, 32, "hashSlotCount differs from the number of chains",
                    Long.toString(chainStarts), Integer.toString(hashSlotCount));
        }
        if (count > 1) {
            if (firstPhy != Long.MIN_VALUE && beginPhy != firstPhy) {
                report.add("index", "index-header", rel, 16, "beginPhyOffset differs from entry 1's phyOffset",
                        Long.toString(firstPhy), Long.toString(beginPhy));
            }
            if (lastPhy != Long.MIN_VALUE && endPhy != lastPhy) {
                report.add("index", "index-header", rel, 24, "endPhyOffset differs from the last entry's",
                        Long.toString(lastPhy), Long.toString(endPhy));
            }
        }
        stats[0] += Math.max(0, count - 1);
        return new Usable(path, count, base);
    }

    /** Entries (file, entry number, phyOffset) of the usable files, in phyOffset order within each file. */
    static final class Cursor {
        final List<Usable> files;
        long expired;
        private final long clMin;
        private int fi;
        private int nextEntry = 1;
        private int[] numbers = new int[0];
        private long[] phy = new long[0];
        private int blockLen;
        private int blockPos;
        private int blockFile;
        private int[] words = new int[0];

        Cursor(List<Usable> files, long clMin) {
            this.files = files;
            this.clMin = clMin;
        }

        private boolean readBlock() {
            while (fi < files.size()) {
                Usable f = files.get(fi);
                if (nextEntry >= f.count) {
                    fi++;
                    nextEntry = 1;
                    continue;
                }
                int n = Math.min(BLOCK_ENTRIES, f.count - nextEntry);
                ByteBuffer raw = entries(f.path, f.base + (long) nextEntry * ENTRY, n);
                int got = raw.limit() / ENTRY;
                if (phy.length < got) {
                    phy = new long[got];
                    numbers = new int[got];
                }
                blockLen = 0;
                blockPos = 0;
                blockFile = fi;
                if (words.length < got * 5) words = new int[got * 5];
                raw.asIntBuffer().get(words, 0, got * 5);
                for (int i = 0; i < got; i++) {
                    long p = ((long) words[5 * i + 1] << 32) | (words[5 * i + 2] & 0xFFFFFFFFL);
                    if (p < clMin) {
                        expired++;
                        continue;
                    }
                    numbers[blockLen] = nextEntry + i;
                    phy[blockLen++] = p;
                }
                nextEntry += Math.max(got, n);
                int[] order = PhyOrder.of(phy, blockLen);
                if (order != null) {
                    phy = PhyOrder.apply(phy, order);
                    numbers = PhyOrder.apply(numbers, order);
                }
                if (blockLen > 0) return true;
            }
            blockLen = 0;
            return false;
        }

        /** Hands the entries with phyOffset below {@code end} to {@code sink}, block by block. */
        void takeBelow(long end, Sink sink) {
            while (true) {
                if (blockPos >= blockLen && !readBlock()) return;
                int a = blockPos;
                int stop = a;
                while (stop < blockLen && phy[stop] < end) stop++;
                if (stop == a) return;
                sink.block(files.get(blockFile), numbers, phy, a, stop);
                blockPos = stop;
                if (stop < blockLen) return;
            }
        }
    }

    interface Sink {
        void block(Usable file, int[] numbers, long[] phy, int from, int to);
    }
}
