package io.rmqsource.errors;

/** Base of every error raised on purpose (mirrors rmqsource/errors.py, class names included). */
public class RmqError extends RuntimeException {
    public RmqError(String message) {
        super(message);
    }

    public RmqError(String message, Throwable cause) {
        super(message, cause);
    }
}
