package io.rmqsource.errors;

/** Bytes on disk do not follow the store format; the message starts with "file, offset N: ". */
public class FormatError extends RmqError {
    private final String file;
    private final long offset;

    public FormatError(String reason, String file, long offset) {
        super(prefix(file, offset) + reason);
        this.file = file;
        this.offset = offset;
    }

    public FormatError(String reason, String file, long offset, Throwable cause) {
        super(prefix(file, offset) + reason, cause);
        this.file = file;
        this.offset = offset;
    }

    private static String prefix(String file, long offset) {
        StringBuilder sb = new StringBuilder();
        if (file != null) sb.append(file);
        if (offset >= 0) {
            if (sb.length() > 0) sb.append(", ");
            sb.append("offset ").append(offset);
        }
        return sb.length() > 0 ? sb + ": " : "";
    }

    public String file() {
        return file;
    }

    public long offset() {
        return offset;
    }
}
