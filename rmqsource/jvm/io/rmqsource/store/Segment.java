package io.rmqsource.store;

import java.util.Comparator;

import java.io.Serializable;

/**
 * One file of a CommitLog or ConsumeQueue, named by the 20-digit offset of its first byte.  A
 * DLedger data file ({@link #dledger}) holds 48-byte entry headers before its CommitLog records.
 */
public final class Segment implements Serializable {
    private static final long serialVersionUID = 1L;
    public final long startOffset;
    public final String path;
    public final long sizeBytes;
    public final boolean dledger;
    /** Modification time the listing gave (ms; 0: unknown): a file rewritten at the same length differs. */
    public final long modified;

    /** By start offset (a class, not a lambda: no method-handle spinning on a short JVM run's path). */
    public static final Comparator<Segment> BY_START_OFFSET = new Comparator<Segment>() {
        @Override
        public int compare(Segment a, Segment b) {
            return Long.compare(a.startOffset, b.startOffset);
        }
    };

    public Segment(long startOffset, String path, long sizeBytes) {
        this(startOffset, path, sizeBytes, false);
    }

    public Segment(long startOffset, String path, long sizeBytes, boolean dledger) {
        this(startOffset, path, sizeBytes, dledger, 0);
    }

    public Segment(long startOffset, String path, long sizeBytes, boolean dledger, long modified) {
        this.modified = modified;
        this.startOffset = startOffset;
        this.path = path;
        this.sizeBytes = sizeBytes;
        this.dledger = dledger;
    }
}
