package io.rmqsource.verify;

import io.rmqsource.format.Record;
import java.nio.ByteBuffer;

/**
 * The totalSize chain through one window of a segment (twin of walk_chain in
 * rmqsource/format/columnar_headers.py): record positions, and why and where the walk stopped.
 */
final class Chain {
    static final int LIMIT = 0;       // reached the window's end exactly
    static final int BLANK = 1;       // end-of-segment blank record at the stop position
    static final int END = 2;         // zeros / unknown magic: no record starts here
    static final int SHORT = 3;       // the next record runs past the window (read more)
    static final int CORRUPT = 4;     // a record magic with an impossible totalSize

    int count;                         // records found
    int reason;
    int stop;                          // stop position, relative to the window start
    String detail = "";
    long totalSize;

    /** Called with each record as the walk finds it (while its bytes are in cache). */
    interface Visitor {
        void record(int pos, int totalSize);
    }

    /**
     * Walk [start, start + n) of {@code b}, the mapped file {@code path}; {@code segRemaining} bytes of the
     * segment remain from {@code start}.  Every record whose totalSize fits goes to {@code visitor}.  A
     * header in a page no earlier record reached is read with read(2), not from the map: past the data
     * that page may be a hole of a sparse file, which a full file system cannot back (SIGBUS).
     */
    static Chain walk(ByteBuffer b, String path, int start, int n, long segRemaining, Visitor visitor) {
        Chain c = new Chain();
        long bufEnd = (long) start + n;
        long segEnd = start + segRemaining;
        int p = start;
        while (p < bufEnd) {
            if (p + 8L > bufEnd) {
                return p + 8L > segEnd ? c.stop(p - start, END, "fewer than 8 bytes left in the segment", 0)
                        : c.stop(p - start, SHORT, "", 0);
            }
            int total;
            int magic;
            if (FileReads.reachesNewPage(p, 8)) {
                ByteBuffer h = FileReads.read(path, p, 8);
                total = h.limit() >= 4 ? h.getInt(0) : 0;
                magic = h.limit() >= 8 ? h.getInt(4) : 0;
            } else {
                total = b.getInt(p);
                magic = b.getInt(p + 4);
            }
            if (magic != Record.MAGIC_V1 && magic != Record.MAGIC_V2) {
                if (magic == Record.BLANK_MAGIC) return c.stop(p - start, BLANK, "", 0);
                return c.stop(p - start, END, total == 0 && magic == 0 ? "zero bytes"
                        : String.format("unknown magic code 0x%08X", magic), 0);
            }
            if (total < Record.MIN_RECORD_BYTES || p + (long) total > segEnd || total > Record.MAX_RECORD_BYTES_READ) {
                return c.stop(p - start, CORRUPT, "totalSize " + total + " outside [" + Record.MIN_RECORD_BYTES + ", "
                        + Math.min(segEnd - p, Record.MAX_RECORD_BYTES_READ) + "]", total);
            }
            if (p + (long) total > bufEnd) return c.stop(p - start, SHORT, "", total);
            c.count++;
            visitor.record(p, total);
            p += total;
        }
        return c.stop(p - start, LIMIT, "", 0);
    }

    private Chain stop(int at, int why, String text, long size) {
        stop = at;
        reason = why;
        detail = text;
        totalSize = size;
        return this;
    }
}
