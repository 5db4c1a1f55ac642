package io.rmqsource.store;

import io.rmqsource.errors.FormatError;
import io.rmqsource.format.Record;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * CommitLog, read side (twin of rmqsource/store/commitlog.py): segments of every CommitLog
 * directory, records at offsets, and the valid end by RocketMQ's recovery walk (spec 7.3).
 * A DLedger store adds its data files ({@code dledger-<id>/data/}) to the same offset space: they
 * hold the offsets from the first of them on (dividedCommitlogOffset), each record behind a
 * 48-byte entry header (see {@link DLedgerLog}).
 */
public final class CommitLog {
    public final Segments segments;
    /** Index of the first DLedger data file in the segment list, or -1 for a store without one. */
    public final int firstDLedgerSegment;

    public CommitLog(StoreLayout layout) {
        List<Segment> all = listFiles(layout);
        int first = -1;
        for (int i = all.size() - 1; i >= 0 && all.get(i).dledger; i--) first = i;
        this.firstDLedgerSegment = first;
        this.segments = new Segments(layout.files, all, 0);
    }

    /**
     * The files of the CommitLog's offset space, sorted: the CommitLog directories' and, in a DLedger
     * store, the DLedger data files, which hold the offsets from the first of them on
     * (dividedCommitlogOffset).
     */
    public static List<Segment> listFiles(StoreLayout layout) {
        List<Segment> all = new ArrayList<>();
        for (String d : layout.commitLogDirs) all.addAll(Segments.listDirectory(layout.files, d));
        all.sort(Segment.BY_START_OFFSET);
        String dledgerData = layout.dledgerDataDir();
        List<Segment> dledger = dledgerData == null ? List.of() : Segments.listDirectory(layout.files, dledgerData, true);
        if (!dledger.isEmpty()) {
            Segment first = dledger.get(0);
            for (Segment seg : all) {
                if (seg.startOffset >= first.startOffset) {
                    throw new FormatError("CommitLog file starts at " + seg.startOffset + ", not below the first DLedger "
                            + "data file " + first.path + " (offsets at and past it are DLedger's)", seg.path, -1);
                }
            }
            all.addAll(dledger);
        }
        return all;
    }

    public boolean isDLedger() {
        return firstDLedgerSegment >= 0;
    }

    public long minOffset() {
        return segments.minOffset();
    }

    public long segmentSize() {
        return segments.segmentSize;
    }

    public List<Segment> list() {
        return segments.list;
    }

    /**
     * Called by {@link #walk} for every MESSAGE and BLANK entry, which starts at CommitLog offset
     * {@code offset}, at index {@code pos} of {@code b}; return false to stop.
     */
    public interface Visitor {
        boolean visit(int kind, Segment seg, ByteBuffer b, int pos, long offset, long size);
    }

    /**
     * Every entry from {@code start} in CommitLog order (CommitLog.walk): MESSAGE steps; a BLANK
     * step at each segment end, then the next segment; stops at the first END or CORRUPT entry,
     * whose CommitLog offset it returns (or the offset where the walk stopped).
     */
    public long walk(long start, boolean checkCrc, Visitor visitor, Record.Check lastStep) {
        Segment seg = segments.find(start);
        if (seg == null) return start;
        int idx = segments.indexOf(seg);
        long pos = start - seg.startOffset;
        Record.Check c = lastStep != null ? lastStep : new Record.Check();
        DLedgerLog.Walk entries = isDLedger() ? new DLedgerLog.Walk(segments, checkCrc) : null;
        // Off a remote file system the walk's reads start small and grow: a walk from the last unit to
        // the valid end crosses a few records, a recovery walk whole segments.
        long[] readBytes = {WALK_FIRST_READ_BYTES};
        while (idx >= 0 && idx < segments.list.size()) {
            seg = segments.list.get(idx);
            if (seg.dledger) {
                // DLedger data files are read whole (mapped, or one read off a remote file system).
                ByteBuffer b = segments.map(seg);
                long stop = entries.segment(seg, b, pos, Math.min(segments.lengthOf(seg), b.capacity()), visitor, c);
                if (stop >= 0) return stop;
                idx++;
                pos = 0;
                continue;
            }
            Segments.Window w = walkWindow(seg, pos, 8, readBytes);
            long limit = Math.min(segments.lengthOf(seg), w.fileLength);
            while (true) {
                if (pos + 8 > limit) {
                    c.kind = Record.END;
                    return seg.startOffset + pos;
                }
                w = wholeRecord(seg, w, pos, limit, readBytes);
                Record.check(w.buf, w.at(pos), limit - w.base, checkCrc, c);
                if (c.kind == Record.MESSAGE) {
                    if (!visitor.visit(Record.MESSAGE, seg, w.buf, w.at(pos), seg.startOffset + pos, c.size)) {
                        return seg.startOffset + pos;
                    }
                    pos += c.size;
                    continue;
                }
                if (c.kind == Record.BLANK) {
                    c.size = segments.lengthOf(seg) - pos;
                    if (!visitor.visit(Record.BLANK, seg, w.buf, w.at(pos), seg.startOffset + pos, c.size)) {
                        return seg.startOffset + pos;
                    }
                    break;
                }
                return seg.startOffset + pos;
            }
            idx++;
            pos = 0;
        }
        c.kind = Record.END;
        return -1;
    }

    /**
     * A window of {@code seg} holding the entry at {@code pos} whole (its header's totalSize, up to
     * {@code limit}), so the checks of a record see all of it; a mapped file's window holds everything.
     */
    private Segments.Window wholeRecord(Segment seg, Segments.Window w, long pos, long limit, long[] readBytes) {
        if (!w.covers(pos, 8)) w = walkWindow(seg, pos, 8, readBytes);
        int total = w.buf.getInt(w.at(pos));
        if (total > segments.files.maxRecordBytes() && total <= limit - pos && total <= Record.MAX_RECORD_BYTES_READ) {
            throw Segments.tooLong(seg, pos, total, segments.files);
        }
        if (total > 8 && total <= limit - pos && total <= Record.MAX_RECORD_BYTES_READ && !w.covers(pos, total)) {
            w = walkWindow(seg, pos, total, readBytes);
        }
        return w;
    }

    /** First read of a walk off a remote file system; each further read is 4x the last, up to a window. */
    static final long WALK_FIRST_READ_BYTES = 64 << 10;

    private Segments.Window walkWindow(Segment seg, long pos, long need, long[] readBytes) {
        Segments.Window w = segments.look(seg, pos, need, readBytes[0]);
        readBytes[0] = Math.min(readBytes[0] * 4, Math.max(readBytes[0], segments.files.windowBytes()));
        return w;
    }

    /** Valid end scanning from a known record boundary (find_valid_end_from). */
    public long findValidEndFrom(long start, boolean checkCrc) {
        final long[] end = {start};
        final Segment last = segments.list.isEmpty() ? null : segments.list.get(segments.list.size() - 1);
        Record.Check stop = new Record.Check();
        long at = walk(start, checkCrc, (kind, seg, b, pos, offset, size) -> {
            if (kind == Record.MESSAGE) {
                end[0] = offset + size;
            } else {
                end[0] = seg == last ? offset : seg.startOffset + segments.lengthOf(seg);
            }
            return true;
        }, stop);
        if (at >= 0 && segments.find(start) != null) end[0] = at;
        return end[0];
    }

    public long findValidEnd(int startSegmentIndex, boolean checkCrc) {
        if (segments.list.isEmpty()) return 0;
        int i = Math.max(0, Math.min(startSegmentIndex, segments.list.size() - 1));
        return findValidEndFrom(segments.list.get(i).startOffset, checkCrc);
    }

    /** storeTimestamp of the message at {@code phy} (decode_at without CRC), or null when there is none. */
    public Long storeTimestampAt(long phy) {
        Record.Check c = decodeAt(phy);
        return c != null && c.kind == Record.MESSAGE ? c.storeTimestamp : null;
    }

    /** The {@code size} bytes at {@code phy} as the file holds them now; null when no segment holds them all. */
    public byte[] bytesAt(long phy, int size) {
        Segment seg = segments.find(phy);
        if (seg == null) return null;
        long pos = phy - seg.startOffset;
        Segments.Window w = segments.readWindow(seg, pos, size);
        if (!w.covers(pos, size)) return null;
        byte[] out = new byte[size];
        w.buf.get(w.at(pos), out, 0, size);
        return out;
    }

    /** decode_at: what is at {@code phy} (kind MESSAGE/BLANK/END/CORRUPT), null when no segment holds it. */
    public Record.Check decodeAt(long phy) {
        Segment seg = segments.find(phy);
        if (seg == null) return null;
        long pos = phy - seg.startOffset;
        // One small read off a remote file system; a longer record is read again whole.
        Segments.Window w = segments.look(seg, pos, 8, Segments.LOOK_BYTES);
        long remaining = segments.lengthOf(seg) - pos;
        long inFile = w.fileLength - pos;
        Record.Check c = new Record.Check();
        if (inFile < 8 || remaining < 8) {
            c.kind = Record.END;
            return c;
        }
        int total = w.buf.getInt(w.at(pos));
        long readable = 8 <= total && total <= Math.min(remaining, segments.files.maxRecordBytes()) ? total : 8;
        if (!w.covers(pos, Math.min(readable, inFile))) w = segments.readWindow(seg, pos, Math.min(readable, inFile));
        Record.check(w.buf, w.at(pos), pos + Math.min(readable, inFile) - w.base, false, c);
        return c;
    }

    /** Abnormal recovery start: last segment whose first record is older than the checkpoint. */
    public int abnormalRecoveryStartIndex(long minTimestampMs) {
        for (int i = segments.list.size() - 1; i >= 0; i--) {
            Record.Check c = decodeAt(segments.list.get(i).startOffset);
            if (c != null && c.kind == Record.MESSAGE && c.storeTimestamp != 0 && c.storeTimestamp <= minTimestampMs) {
                return i;
            }
        }
        return 0;
    }

    public long rollNextFile(long offset) {
        long z = Math.max(1, segments.segmentSize);
        return offset + z - offset % z;
    }
}
