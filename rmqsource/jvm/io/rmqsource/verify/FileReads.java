package io.rmqsource.verify;

import io.rmqsource.errors.FormatError;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * Positional reads of store files, for the parts that may be holes of a sparse file: a mapped
 * page without a disk block behind it is allocated when touched, and on a full file system (tmpfs)
 * that access dies with SIGBUS (java.lang.InternalError); read(2) of a hole returns zeros.
 */
final class FileReads {
    static final int PAGE = 4096;                 // holes are whole pages (a larger page size is a multiple)
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

    /**
     * Whether {@code len} bytes at {@code p} may lie in a page no byte before {@code p} was read from
     * (a page that may be a hole): {@code p} starts a page, or the bytes cross into the next one.
     */
    static boolean reachesNewPage(long p, int len) {
        return p % PAGE == 0 || (p + len - 1) / PAGE != p / PAGE;
    }
}
