package io.rmqsource.spark.compat;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.nio.ByteBuffer;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;

/**
 * Bytes of a (mapped) buffer into a column vector's row. Spark 4.2 added
 * {@code WritableColumnVector.putByteArray(int, ByteBuffer, int, int)}, one copy straight from the
 * buffer; Spark 4.0 and 4.1 take a {@code byte[]} only, so there a direct buffer's span goes
 * through a per-thread scratch array (two copies of a short value).
 */
public final class ByteSpans {
    /** Spark's own putByteArray from a ByteBuffer, or null when the running Spark lacks it. */
    private static final MethodHandle PUT_BUFFER = find();
    private static final ThreadLocal<byte[][]> SCRATCH = ThreadLocal.withInitial(() -> new byte[1][256]);

    private ByteSpans() {}

    /** Sets {@code row} of {@code v} to the {@code len} bytes of {@code b} at {@code pos}. */
    public static void put(WritableColumnVector v, int row, ByteBuffer b, int pos, int len) {
        if (PUT_BUFFER != null) {
            try {
                int unused = (int) PUT_BUFFER.invokeExact(v, row, b, pos, len);
            } catch (RuntimeException | Error e) {
                throw e;
            } catch (Throwable e) {
                throw new IllegalStateException(e);   // putByteArray declares no checked exception
            }
        } else if (b.hasArray()) {
            v.putByteArray(row, b.array(), b.arrayOffset() + pos, len);
        } else {
            byte[][] holder = SCRATCH.get();
            byte[] scratch = holder[0];
            if (scratch.length < len) holder[0] = scratch = new byte[Math.max(len, scratch.length * 2)];
            b.get(pos, scratch, 0, len);
            v.putByteArray(row, scratch, 0, len);
        }
    }

    private static MethodHandle find() {
        try {
            return MethodHandles.publicLookup().findVirtual(WritableColumnVector.class, "putByteArray",
                    MethodType.methodType(int.class, int.class, ByteBuffer.class, int.class, int.class));
        } catch (NoSuchMethodException | IllegalAccessException e) {
            return null;
        }
    }
}
