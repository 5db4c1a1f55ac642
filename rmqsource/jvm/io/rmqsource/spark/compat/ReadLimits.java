package io.rmqsource.spark.compat;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;

/**
 * A byte budget per micro-batch. Spark 4.0 added {@code ReadLimit.maxBytes(long)} and its
 * {@code ReadMaxBytes}; Spark 3.5 has neither, so there the stream's default limit is an unbounded row
 * limit (not "all available": admission control stays on) and the stream applies its own
 * maxBytesPerTrigger, as it does on every Spark.
 */
public final class ReadLimits {
    private static final MethodHandle MAX_BYTES = staticFactory();
    private static final Class<?> READ_MAX_BYTES = find("org.apache.spark.sql.connector.read.streaming.ReadMaxBytes");
    private static final MethodHandle MAX_BYTES_OF = READ_MAX_BYTES == null ? null : getter(READ_MAX_BYTES);

    private ReadLimits() {}

    /** Spark's maxBytes limit, or on a Spark without one a row limit that bounds nothing. */
    public static ReadLimit maxBytes(long bytes) {
        if (MAX_BYTES == null) return ReadLimit.maxRows(Long.MAX_VALUE);
        try {
            return (ReadLimit) MAX_BYTES.invokeExact(bytes);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable e) {
            throw new IllegalStateException(e);
        }
    }

    /** The byte budget of {@code limit} when it is Spark's ReadMaxBytes, else null. */
    public static Long maxBytesOf(ReadLimit limit) {
        if (MAX_BYTES_OF == null || !READ_MAX_BYTES.isInstance(limit)) return null;
        try {
            return (long) MAX_BYTES_OF.invoke(limit);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable e) {
            throw new IllegalStateException(e);
        }
    }

    private static MethodHandle staticFactory() {
        try {
            return MethodHandles.publicLookup().findStatic(ReadLimit.class, "maxBytes",
                    MethodType.methodType(ReadLimit.class, long.class));
        } catch (NoSuchMethodException | IllegalAccessException e) {
            return null;
        }
    }

    private static MethodHandle getter(Class<?> owner) {
        try {
            return MethodHandles.publicLookup().findVirtual(owner, "maxBytes", MethodType.methodType(long.class));
        } catch (NoSuchMethodException | IllegalAccessException e) {
            return null;
        }
    }

    private static Class<?> find(String name) {
        try {
            return Class.forName(name, false, ReadLimits.class.getClassLoader());
        } catch (ClassNotFoundException | LinkageError e) {
            return null;
        }
    }
}
