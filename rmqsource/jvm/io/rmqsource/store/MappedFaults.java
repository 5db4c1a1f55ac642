package io.rmqsource.store;

import io.rmqsource.errors.StoreError;
import java.util.function.Supplier;

/**
 * A mapped page without a disk block behind it (a hole of a sparse file) is allocated when touched;
 * on a full file system (tmpfs) that access dies with SIGBUS, which the JVM raises in the reading
 * thread as java.lang.InternalError.  Spark takes that for a fatal VirtualMachineError (the thread
 * dies and the query never answers), so the readers' entry points turn it into a StoreError naming
 * the file this thread last mapped.
 */
public final class MappedFaults {
    private static final ThreadLocal<String> LAST_MAPPED = new ThreadLocal<>();

    private MappedFaults() {
    }

    static void mapped(String path) {
        LAST_MAPPED.set(path);
    }

    /** {@code body}'s result, a page fault of a mapped store file turned into a StoreError. */
    public static <T> T guard(Supplier<T> body) {
        try {
            return body.get();
        } catch (InternalError e) {
            throw convert(e);
        }
    }

    /** The StoreError for a page fault of a mapped file; any other InternalError as it was. */
    public static StoreError convert(InternalError e) {
        String m = String.valueOf(e.getMessage());
        if (!m.contains("unsafe memory access")) throw e;
        String path = LAST_MAPPED.get();
        StoreError err = new StoreError("cannot read a page of the mapped file " + (path == null ? "(unknown)" : path)
                + " (a hole of a sparse file on a full file system?): " + m);
        err.initCause(e);
        return err;
    }
}
