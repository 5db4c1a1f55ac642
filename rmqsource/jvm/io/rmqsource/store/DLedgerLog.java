package io.rmqsource.store;

import io.rmqsource.errors.CorruptRecordError;
import io.rmqsource.format.DLedgerFormat;
import io.rmqsource.format.Record;
import java.nio.ByteBuffer;
import java.io.File;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The DLedger data files of a CommitLog (dledger-&lt;id&gt;/data/), read side: the entry walk
 * (48-byte header, then one CommitLog record) and the end DLedger recovery finds.  Twin of the DLedger
 * part of rmqsource/store/commitlog.py.
 *
 * <p>A header failing a recovery check ends the valid data, as DLedgerMmapFileStore.recover does; a
 * record failing its checks inside a valid header is a CorruptRecordError (the engine would serve
 * it as garbage; a message is never made of garbage here).
 */
public final class DLedgerLog {
    private DLedgerLog() {
    }

    /**
     * The CommitLog max offset of a DLedger store (the offset reads and streams admit up to): the
     * end of the last entry whose header passes the recovery checks, walking from the 3rd-from-last
     * data file as the engine does; the first data file's start when none passes.  The checkpoint's
     * committedIndex does not lower it: the leader re-commits its own tail.
     */
    public static long validEnd(CommitLog commitLog) {
        return walkEnd(commitLog.segments, walkStart(commitLog));
    }

    /** Ends already walked, by the walked files' paths, lengths and modification times (a few stores). */
    private static final Map<String, Long> WALKED = Collections.synchronizedMap(
            new LinkedHashMap<String, Long>(16, 0.75f, true) {
                @Override
                protected boolean removeEldestEntry(Map.Entry<String, Long> eldest) {
                    return size() > 32;
                }
            });

    /**
     * {@link #validEnd} of a store no writer holds, walked once per state of its last data files: every
     * query plans with the end, and the walk reads a header per entry of up to three data files.  A
     * file grown, cut or rewritten has another length or modification time, so it is walked again.
     */
    public static long validEndOfSettledFiles(CommitLog commitLog) {
        Segments segs = commitLog.segments;
        StringBuilder key = new StringBuilder();
        for (int i = walkStart(commitLog); i < segs.list.size(); i++) {
            Segment seg = segs.list.get(i);
            long modified = seg.modified != 0 ? seg.modified : new File(seg.path).lastModified();
            key.append(seg.path).append('\0').append(seg.sizeBytes).append('\0').append(modified).append('\n');
        }
        String k = key.toString();
        Long known = WALKED.get(k);
        if (known != null) return known;
        long end = validEnd(commitLog);
        WALKED.put(k, end);
        return end;
    }

    /** Where DLedger recovery starts walking: the 3rd-from-last data file. */
    private static int walkStart(CommitLog commitLog) {
        return Math.max(commitLog.firstDLedgerSegment, commitLog.segments.list.size() - 3);
    }

    /** End of the last entry passing the checks, walking from the start of segment {@code from}. */
    private static long walkEnd(Segments segs, int from) {
        List<Segment> list = segs.list;
        long end = list.get(from).startOffset;
        DLedgerFormat.Header h = new DLedgerFormat.Header();
        DLedgerFormat.Chain chain = new DLedgerFormat.Chain();
        for (int i = from; i < list.size(); i++) {
            Segment seg = list.get(i);
            ByteBuffer b = segs.map(seg);
            long limit = Math.min(segs.lengthOf(seg), b.capacity());
            long e = 0;
            while (true) {
                DLedgerFormat.decodeEntry(b, e, limit, h);
                if (h.kind == DLedgerFormat.END) return end;
                if (h.kind == DLedgerFormat.BLANK) break;
                if (DLedgerFormat.headerProblem(h, seg.startOffset + e, chain) != null
                        || e + h.size > limit) {
                    return end;
                }
                chain.follow(h);
                e += h.size;
                end = seg.startOffset + e;
            }
        }
        return end;
    }

    /**
     * Why the record of a valid entry (at file position {@code rec}, {@code bodyLen} bytes, file
     * bytes up to {@code limit}) is not a CommitLog record at that offset, else null; {@code c} then
     * holds its size and store timestamp.
     */
    private static String recordProblem(Segment seg, ByteBuffer b, long rec, int bodyLen, long limit, boolean checkCrc,
                                       Record.Check c) {
        if (rec + bodyLen > limit) {
            return "the entry's record of " + bodyLen + " bytes runs past the file end " + limit;
        }
        Record.check(b, (int) rec, rec + bodyLen, checkCrc, c);
        if (c.kind != Record.MESSAGE) return c.kind == Record.BLANK ? "a CommitLog blank inside a DLedger entry" : c.reason;
        if (c.size != bodyLen) return "record totalSize " + c.size + " is not the entry's bodyLen " + bodyLen;
        long phy = b.getLong((int) rec + 28);
        if (phy != seg.startOffset + rec) {
            return "record PHYSICALOFFSET " + phy + " is not its offset " + (seg.startOffset + rec);
        }
        return null;
    }

    /**
     * Whether a valid entry header (magic, pos, size, bodyLen) precedes the {@code size}-byte record at
     * file position {@code rec} of a DLedger data file starting at {@code fileStart}: a ConsumeQueue unit
     * pointing there names a record DLedger wrote.
     */
    public static boolean entryHoldsRecord(ByteBuffer b, long rec, long fileStart, int size) {
        long e = rec - DLedgerFormat.ENTRY_HEADER_BYTES;
        if (e < 0 || rec > b.capacity()) return false;
        DLedgerFormat.Header h = DLedgerFormat.decodeEntry(b, e, rec, new DLedgerFormat.Header());
        return h.kind == DLedgerFormat.ENTRY && DLedgerFormat.headerProblem(h, fileStart + e, null) == null
                && h.bodyLen == size;
    }

    /** The CorruptRecordError for a record failing inside a valid DLedger entry header. */
    private static CorruptRecordError corruptRecord(Segment seg, long rec, String reason) {
        return new CorruptRecordError("no valid record in the DLedger entry at CommitLog offset "
                + (seg.startOffset + rec - DLedgerFormat.ENTRY_HEADER_BYTES) + " (record offset "
                + (seg.startOffset + rec) + "): " + reason, seg.path, rec);
    }

    /** One sequential walk over DLedger data files (CommitLog.walk's DLedger part): index/term carry over. */
    static final class Walk {
        private final Segments segs;
        private final boolean checkCrc;
        private final DLedgerFormat.Header h = new DLedgerFormat.Header();
        private final DLedgerFormat.Chain chain = new DLedgerFormat.Chain();

        Walk(Segments segs, boolean checkCrc) {
            this.segs = segs;
            this.checkCrc = checkCrc;
        }

        /**
         * Where a walk from {@code pos} starts: the entry header 48 bytes before it when one is there (pos is
         * a record's offset), else the file's start, the records before {@code pos} walked but not visited (pos
         * is an entry's start, e.g. the end of the last record a queue holds).  Twin of
         * CommitLog._dledger_walk_start in rmqsource/store/commitlog.py.
         */
        private long walkStart(Segment seg, ByteBuffer b, long pos, long limit) {
            if (pos < DLedgerFormat.ENTRY_HEADER_BYTES) return 0;
            long e = pos - DLedgerFormat.ENTRY_HEADER_BYTES;
            DLedgerFormat.decodeEntry(b, e, limit, h);
            boolean entry = h.kind != DLedgerFormat.END && h.kind != DLedgerFormat.BLANK
                    && DLedgerFormat.headerProblem(h, seg.startOffset + e, null) == null;
            return entry ? e : 0;
        }

        /**
         * Visits the records of one data file from {@code pos} (its start, or a record's position);
         * returns -1 when the walk goes on in the next file, else the CommitLog offset where it stopped
         * ({@code c.kind} END at the end of the valid data).
         */
        long segment(Segment seg, ByteBuffer b, long pos, long limit, CommitLog.Visitor visitor, Record.Check c) {
            long e = walkStart(seg, b, pos, limit);
            while (true) {
                DLedgerFormat.decodeEntry(b, e, limit, h);
                if (h.kind == DLedgerFormat.END) {
                    c.kind = Record.END;
                    c.reason = "end of the DLedger data";
                    return seg.startOffset + e;
                }
                if (h.kind == DLedgerFormat.BLANK) {
                    c.kind = Record.BLANK;
                    c.size = segs.lengthOf(seg) - e;
                    return visitor.visit(Record.BLANK, seg, b, (int) e, seg.startOffset + e, c.size) ? -1 : seg.startOffset + e;
                }
                String[] problem = DLedgerFormat.headerProblem(h, seg.startOffset + e, chain);
                if (problem != null) {
                    c.kind = Record.END;
                    c.reason = problem[1];
                    return seg.startOffset + e;
                }
                chain.follow(h);
                long rec = e + DLedgerFormat.ENTRY_HEADER_BYTES;
                if (rec >= pos) {           // a record before the walk's start is passed over unread
                    String bad = recordProblem(seg, b, rec, h.bodyLen, limit, checkCrc, c);
                    if (bad != null) throw corruptRecord(seg, rec, bad);
                    if (!visitor.visit(Record.MESSAGE, seg, b, (int) rec, seg.startOffset + rec, c.size)) {
                        return seg.startOffset + rec;
                    }
                }
                e = rec + h.bodyLen;
            }
        }
    }
}
