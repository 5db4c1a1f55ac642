package io.rmqsource.spark.bodies;

import org.apache.spark.sql.catalyst.InternalRow;

/** Decodes one body into a row of its schema's fields (one decoder per task and schema; not thread-safe). */
interface BodyDecoder {
    /**
     * The body {@code b[off, off + len)} as a row of the schema (valid until the next call), or null when all
     * its fields are null (an empty JSON body); throws {@link Bad} for a body that cannot be decoded.
     */
    InternalRow decode(byte[] b, int off, int len);

    /**
     * Decodes the body straight into {@code out} (per field of the schema: its decoded column's vector, null when
     * not asked for) at {@code row}, every field written (null when absent); false when it cannot, then the caller
     * uses {@link #decode}.  Throws {@link Bad} as decode does.
     */
    default boolean decodeInto(byte[] b, int off, int len, org.apache.spark.sql.execution.vectorized.WritableColumnVector[] out,
                               int row) {
        return false;
    }

    /** A bad record: the message says why. */
    final class Bad extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Bad(String reason) {
            super(reason, null, false, false);
        }

        /** A bad record for the failure {@code e} of the format's own decoder: the first line of its innermost message. */
        static Bad of(Throwable e) {
            Throwable root = e;
            while (root.getCause() != null && root.getCause() != root) root = root.getCause();
            String msg = root.getMessage();
            if (msg == null || msg.isBlank()) msg = root.getClass().getSimpleName();
            return new Bad(BodySchemas.firstLine(msg));
        }
    }
}
