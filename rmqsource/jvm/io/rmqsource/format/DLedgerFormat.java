package io.rmqsource.format;

import java.nio.ByteBuffer;

/**
 * DLedger CommitLog structures (openmessaging DLedger 0.3.x as RocketMQ 4.9.7 uses it), twin of
 * rmqsource/format/dledger.py.
 *
 * <pre>
 * entry header, 48 bytes before every CommitLog record in dledger-&lt;id&gt;/data/:
 *   0 magic int32 (1)   4 size int32 (48 + bodyLen)   8 index int64   16 term int64
 *  24 pos int64 (absolute offset of the entry)       32 channel int32 36 chainCrc int32
 *  40 bodyCrc int32    44 bodyLen int32, then bodyLen bytes: one CommitLog record
 * DLedger blank: int32 -1, int32 remaining (the rest of the file); 8 zero bytes end the data.
 * index entry, 32 bytes at k * 32 of dledger-&lt;id&gt;/index/: magic int32, pos int64, size int32,
 *   index int64, term int64.
 * </pre>
 *
 * The record's offset everywhere (ConsumeQueue, IndexFile, msgId) is {@code pos + 48}.
 */
public final class DLedgerFormat {
    public static final int ENTRY_HEADER_BYTES = 48;
    public static final int ENTRY_MAGIC = 1;          // DLedgerMmapFileStore.CURRENT_MAGIC
    public static final int BLANK_MAGIC = -1;         // MmapFileList.BLANK_MAGIC_CODE
    public static final int INDEX_ENTRY_BYTES = 32;

    // Kinds of what starts at a position of a data file.
    public static final int ENTRY = 0;
    public static final int BLANK = 1;
    public static final int END = 2;

    private DLedgerFormat() {
    }

    /** A reusable decoded entry header (fields past the file's end read as zero). */
    public static final class Header {
        public int kind;
        public int magic;
        public int size;
        public long index;
        public long term;
        public long pos;
        public int bodyLen;
        public int blankBytes;
    }

    /** What starts at {@code pos} of {@code b}; {@code limit} = end of the file's bytes in {@code b}. */
    public static Header decodeEntry(ByteBuffer b, long pos, long limit, Header out) {
        long left = limit - pos;
        if (left < 8) {
            out.kind = END;
            return out;
        }
        int p = (int) pos;
        out.magic = b.getInt(p);
        out.size = b.getInt(p + 4);
        if (out.magic == 0 && out.size == 0) {
            out.kind = END;
            return out;
        }
        if (out.magic == BLANK_MAGIC) {
            out.kind = BLANK;
            out.blankBytes = out.size;
            return out;
        }
        out.kind = ENTRY;
        out.index = left >= 16 ? b.getLong(p + 8) : 0;
        out.term = left >= 24 ? b.getLong(p + 16) : 0;
        out.pos = left >= 32 ? b.getLong(p + 24) : 0;
        out.bodyLen = left >= 48 ? b.getInt(p + 44) : 0;
        return out;
    }

    /**
     * The index and term the next entry of a walk must follow (none before the first entry walked).
     * Primitive fields: a walk over millions of entries must not box two longs per entry.
     */
    public static final class Chain {
        private boolean started;
        private long index;
        private long term;

        /** The walk accepted {@code h}: the next entry must follow it. */
        public void follow(Header h) {
            started = true;
            index = h.index;
            term = h.term;
        }
    }

    /**
     * {field, reason} of the first DLedger recovery check the header fails at absolute offset
     * {@code entryPos}, else null: DLedgerMmapFileStore.recover's checks in its order (magic, pos,
     * size, index, term).  {@code chain} null: the checks of the header alone (no index/term order).
     */
    public static String[] headerProblem(Header h, long entryPos, Chain chain) {
        if (h.magic != ENTRY_MAGIC) return new String[] {"magic", "entry magic " + h.magic + " is not " + ENTRY_MAGIC};
        if (h.pos != entryPos) return new String[] {"pos", "entry pos " + h.pos + " is not its offset " + entryPos};
        if (h.size != h.bodyLen + ENTRY_HEADER_BYTES || h.size <= ENTRY_HEADER_BYTES - 4) {
            return new String[] {"size", "entry size " + h.size + " is not bodyLen " + h.bodyLen + " + " + ENTRY_HEADER_BYTES};
        }
        if (chain != null && chain.started && h.index != chain.index + 1) {
            return new String[] {"index", "entry index " + h.index + " does not follow " + chain.index};
        }
        if (chain != null && chain.started && h.term < chain.term) {
            return new String[] {"term", "entry term " + h.term + " is below the previous term " + chain.term};
        }
        return null;
    }

    /**
     * {field, data header's value, index entry's value} of the first field (magic, pos, size, index, term) in
     * which the 32-byte index entry at {@code pos} disagrees with the data entry it indexes, else null.
     */
    public static String[] indexEntryProblem(ByteBuffer idx, int pos, Header h, long entryPos) {
        String[] names = {"magic", "pos", "size", "index", "term"};
        long[] got = {idx.getInt(pos), idx.getLong(pos + 4), idx.getInt(pos + 12), idx.getLong(pos + 16),
            idx.getLong(pos + 24)};
        long[] want = {h.magic, entryPos, h.size, h.index, h.term};
        for (int i = 0; i < names.length; i++) {
            if (got[i] != want[i]) return new String[] {names[i], Long.toString(want[i]), Long.toString(got[i])};
        }
        return null;
    }
}
