package io.rmqsource.spark.store.write;

import io.rmqsource.spark.errors.StoreError;

/**
 * A put stopped on an I/O failure (a full disk, a failed fsync): the message names the file and
 * offset; {@link #results()} are the batch's final results (what was written and acknowledged is
 * PUT_OK, the rest UNKNOWN_ERROR, FLUSH_DISK_TIMEOUT, CREATE_MAPPED_FILE_FAILED or
 * SERVICE_NOT_AVAILABLE), never a message acknowledged for bytes that were not written.
 */
public final class WriteFailedError extends StoreError {
    private static final long serialVersionUID = 1L;
    private final transient PutResult[] results;

    WriteFailedError(String message, PutResult[] results, Throwable cause) {
        super(message);
        this.results = results;
        if (cause != null) initCause(cause);
    }

    public PutResult[] results() {
        return results;
    }
}
