package io.rmqsource.errors;

/** A CommitLog record, ConsumeQueue unit or IndexFile entry is damaged. */
public class CorruptRecordError extends FormatError {
    public CorruptRecordError(String reason, String file, long offset) {
        super(reason, file, offset);
    }

    public CorruptRecordError(String reason, String file, long offset, Throwable cause) {
        super(reason, file, offset, cause);
    }
}
