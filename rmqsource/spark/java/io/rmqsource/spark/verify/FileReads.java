package io.rmqsource.spark.verify;

import java.nio.ByteBuffer;

/** Scans of mapped store files (Segments.mapFile): bytes past a file's length count as zero. */
final class FileReads {
    private FileReads() {
    }

    /** Position of the first non-zero byte of a mapped file from {@code start} on, or -1. */
    static long firstNonZero(ByteBuffer file, long start) {
        int n = file.capacity();
        int i = (int) Math.min(start, n);
        for (; i + 8 <= n; i += 8) {
            if (file.getLong(i) != 0) break;
        }
        for (; i < n; i++) {
            if (file.get(i) != 0) return i;
        }
        return -1;
    }
}
