package io.rmqsource.errors;

/** A compressed body could not be inflated, or would inflate past the size cap. */
public class DecompressionError extends FormatError {
    public DecompressionError(String reason, String file, long offset) {
        super(reason, file, offset);
    }

    public DecompressionError(String reason, String file, long offset, Throwable cause) {
        super(reason, file, offset, cause);
    }
}
