package io.rmqsource.spark.read.body;

import org.apache.spark.sql.catalyst.InternalRow;

/** Decodes one body into a row of its schema's fields (one decoder per task and schema; not thread-safe). */
interface BodyDecoder {
    /**
     * The body {@code b[off, off + len)} as a row of the schema (valid until the next call), or null when all
     * its fields are null (an empty JSON body); throws {@link Bad} for a body that cannot be decoded.
     */
    InternalRow decode(byte[] b, int off, int len);

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
