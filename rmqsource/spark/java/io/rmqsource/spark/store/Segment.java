package io.rmqsource.spark.store;

import java.io.Serializable;

/** One file of a CommitLog or ConsumeQueue, named by the 20-digit offset of its first byte. */
public final class Segment implements Serializable {
    private static final long serialVersionUID = 1L;
    public final long startOffset;
    public final String path;
    public final long sizeBytes;

    public Segment(long startOffset, String path, long sizeBytes) {
        this.startOffset = startOffset;
        this.path = path;
        this.sizeBytes = sizeBytes;
    }
}
