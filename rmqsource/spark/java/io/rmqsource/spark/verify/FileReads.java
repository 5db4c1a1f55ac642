package io.rmqsource.spark.verify;

import io.rmqsource.spark.errors.FormatError;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/** Positional reads of store files, opened read-only for each read (a store may hold many thousand files). */
final class FileReads {
    private static final int ZERO_SCAN_CHUNK = 1 << 20;

    private FileReads() {
    }

    /** Up to {@code size} bytes at {@code position} (fewer at the end of the file), big-endian, flipped for reading. */
    static ByteBuffer read(String path, long position, int size) {
        ByteBuffer buf = ByteBuffer.allocate(size);
        try (FileChannel ch = FileChannel.open(Path.of(path), StandardOpenOption.READ)) {
            while (buf.hasRemaining()) {
                int k = ch.read(buf, position + buf.position());
                if (k <= 0) break;
            }
        } catch (IOException e) {
            throw new FormatError("cannot read: " + e.getMessage(), path, position);
        }
        return buf.flip();
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

    /** Position of the first non-zero byte in [start, end) of the file (bytes past its length count as zero), or -1. */
    static long firstNonZero(String path, long start, long end) {
        for (long pos = start; pos < end; ) {
            ByteBuffer chunk = read(path, pos, (int) Math.min(ZERO_SCAN_CHUNK, end - pos));
            int n = chunk.limit();
            if (n == 0) return -1;
            int i = 0;
            for (; i + 8 <= n; i += 8) {
                if (chunk.getLong(i) != 0) break;
            }
            for (; i < n; i++) {
                if (chunk.get(i) != 0) return pos + i;
            }
            pos += n;
        }
        return -1;
    }
}
