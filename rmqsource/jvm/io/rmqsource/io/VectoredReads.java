package io.rmqsource.io;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.IntFunction;
import org.apache.hadoop.fs.FSDataInputStream;

/**
 * Hadoop's vectored read ({@code PositionedReadable.readVectored(List<FileRange>, IntFunction<ByteBuffer>)},
 * Hadoop 3.3.5 on), called by reflection: the jar also runs on pyspark builds whose Hadoop client is older
 * (pyspark 3.5 ships Hadoop 3.3.4), where {@link #available} is false and callers read range by range.
 * The file system fetches the ranges of one call concurrently and may merge near ones into one request
 * (S3A: its thread pool, HTTP GETs bounded to the merged ranges; the local file system: async channel reads).
 */
final class VectoredReads {
    private static final Method CREATE_RANGE;
    private static final Method READ_VECTORED;
    private static final Method GET_DATA;

    static {
        Method create = null;
        Method read = null;
        Method data = null;
        try {
            Class<?> fileRange = Class.forName("org.apache.hadoop.fs.FileRange");
            create = fileRange.getMethod("createFileRange", long.class, int.class);
            read = FSDataInputStream.class.getMethod("readVectored", List.class, IntFunction.class);
            data = fileRange.getMethod("getData");
        } catch (ReflectiveOperationException | LinkageError e) {
            create = read = data = null;          // an older Hadoop client: positioned reads
        }
        CREATE_RANGE = create;
        READ_VECTORED = read;
        GET_DATA = data;
    }

    private VectoredReads() {}

    /** Whether this Hadoop client has vectored reads. */
    static boolean available() {
        return READ_VECTORED != null;
    }

    /**
     * Starts reading ranges [pos[i], pos[i] + len[i]) of {@code in} (sorted, not overlapping, inside the
     * file); one future per range, each completing with a buffer of that range's bytes.
     */
    @SuppressWarnings("unchecked")
    static List<CompletableFuture<ByteBuffer>> start(FSDataInputStream in, long[] pos, int[] len) throws java.io.IOException {
        if (!available()) throw new UnsupportedOperationException("this Hadoop client has no vectored reads");
        try {
            List<Object> ranges = new ArrayList<>(pos.length);
            for (int i = 0; i < pos.length; i++) ranges.add(CREATE_RANGE.invoke(null, pos[i], len[i]));
            IntFunction<ByteBuffer> allocate = ByteBuffer::allocate;
            READ_VECTORED.invoke(in, ranges, allocate);
            List<CompletableFuture<ByteBuffer>> out = new ArrayList<>(pos.length);
            for (Object r : ranges) out.add((CompletableFuture<ByteBuffer>) GET_DATA.invoke(r));
            return out;
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof java.io.IOException) throw (java.io.IOException) cause;
            if (cause instanceof RuntimeException) throw (RuntimeException) cause;
            throw new java.io.IOException(cause);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }
}
