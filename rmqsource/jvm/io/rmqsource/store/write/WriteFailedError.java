package io.rmqsource.store.write;

import io.rmqsource.errors.StoreError;

/**
 * A put stopped on an I/O failure (a full disk, a failed fsync): the message names the file and
 * offset; {@link #results()} are the batch's final results (what was written and acknowledged is
 * PUT_OK, the rest UNKNOWN_ERROR, FLUSH_DISK_TIMEOUT, CREATE_MAPPED_FILE_FAILED or
 * SERVICE_NOT_AVAILABLE), never a message acknowledged for bytes that were not written.
 */
public final class WriteFailedError extends StoreError {
    private static final long serialVersionUID = 1L;
    private final transient PutResult[] results;
    private final transient PutSummary summary;

    WriteFailedError(String message, PutResult[] results, PutSummary summary, Throwable cause) {
        super(message);
        this.results = results;
        this.summary = summary;
        if (cause != null) initCause(cause);
    }

    /** The batch's results (null when the put did not ask for them: {@link MessageStoreWriter#putStaged}). */
    public PutResult[] results() {
        return results;
    }

    /** What a {@link MessageStoreWriter#putStaged} acknowledged before it stopped (null for putAll). */
    public PutSummary summary() {
        return summary;
    }
}
