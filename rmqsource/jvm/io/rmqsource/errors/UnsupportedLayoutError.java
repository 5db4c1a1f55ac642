package io.rmqsource.errors;

/** The directory holds a store layout that is not read (RocksDB ConsumeQueue ...). */
public class UnsupportedLayoutError extends FormatError {
    public UnsupportedLayoutError(String reason, String file, long offset) {
        super(reason, file, offset);
    }

    public UnsupportedLayoutError(String reason, String file, long offset, Throwable cause) {
        super(reason, file, offset, cause);
    }
}
