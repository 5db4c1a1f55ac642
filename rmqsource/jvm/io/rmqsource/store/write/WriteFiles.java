package io.rmqsource.store.write;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The writer's file operations in one place (twin of rmqsource/io/files.py's ops and io/durable.py):
 * positioned writes, fsyncs, directory fsyncs, crash-safe replace.  {@link #faults} is the seam
 * tests use to make writes fail as a full disk does (a failure is an IOException, as ENOSPC is).
 */
public final class WriteFiles {
    /** Injected failures (tests): called before each write of {@code len} bytes to {@code path}. */
    public interface Faults {
        void beforeWrite(Path path, long position, int len) throws IOException;
    }

    static volatile Faults faults;

    private WriteFiles() {
    }

    /** Installs (or with null removes) the fault seam for this JVM. */
    public static void setFaults(Faults f) {
        faults = f;
    }

    /** A fault seam failing every write once {@code budgetBytes} bytes were written (ENOSPC), for tests. */
    public static Faults diskFullAfter(long budgetBytes) {
        long[] left = {budgetBytes};
        return (path, position, len) -> {
            synchronized (left) {
                if (len > left[0]) {
                    left[0] = 0;
                    throw new IOException("No space left on device (injected): " + path);
                }
                left[0] -= len;
            }
        };
    }

    /**
     * Writes all of {@code b} (position to limit) at {@code position}; returns the bytes written.  On an
     * error the exception's suppressed {@link Partial} says how many bytes reached the file.
     */
    static int writeFully(FileChannel ch, Path path, ByteBuffer b, long position) throws IOException {
        int len = b.remaining();
        Faults f = faults;
        int done = 0;
        try {
            if (f != null) f.beforeWrite(path, position, len);
            // Bounded: each round writes at least one byte or throws.
            for (int round = 0; round <= len && b.hasRemaining(); round++) {
                int n = ch.write(b, position + done);
                if (n <= 0 && b.hasRemaining()) throw new IOException("write wrote " + n + " bytes: " + path);
                done += n;
            }
            return done;
        } catch (IOException e) {
            e.addSuppressed(new Partial(done));
            throw e;
        }
    }

    /** How many bytes of a failed write reached the file. */
    static final class Partial extends Exception {
        private static final long serialVersionUID = 1L;
        final int written;

        Partial(int written) {
            super("bytes written before the failure: " + written, null, false, false);
            this.written = written;
        }

        static int of(IOException e) {
            for (Throwable t : e.getSuppressed()) if (t instanceof Partial) return ((Partial) t).written;
            return 0;
        }
    }

    static void fsyncDir(Path dir) throws IOException {
        try (FileChannel ch = FileChannel.open(dir, StandardOpenOption.READ)) {
            ch.force(true);
        } catch (AccessDeniedException e) {
            // some file systems refuse to open directories; the rename is still atomic
        }
    }

    /** write_file_atomically: a unique temp file beside {@code path}, fsynced, renamed over it, directory fsynced. */
    static void writeFileAtomically(Path path, byte[] data) throws IOException {
        Path parent = path.toAbsolutePath().getParent();
        Files.createDirectories(parent);
        Path tmp = parent.resolve("." + path.getFileName() + "." + ProcessHandle.current().pid() + "."
                + Integer.toHexString(ThreadLocalRandom.current().nextInt()) + ".tmp");
        try {
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.WRITE, StandardOpenOption.CREATE,
                    StandardOpenOption.TRUNCATE_EXISTING)) {
                writeFully(ch, tmp, ByteBuffer.wrap(data), 0);
                ch.force(true);
            }
            Files.move(tmp, path, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException | RuntimeException e) {
            Files.deleteIfExists(tmp);
            throw e;
        }
        fsyncDir(parent);
    }

    static void closeQuietly(AutoCloseable c) {
        if (c == null) return;
        try {
            c.close();
        } catch (Exception e) {
            // closing after a failure: the first error is the one reported
        }
    }

    /** {@code %020d} of an offset: segment and ConsumeQueue file names. */
    static String offsetName(long offset) {
        String s = Long.toString(offset);
        return "00000000000000000000".substring(s.length()) + s;
    }
}
