package io.rmqsource.errors;

/** The path is not a RocketMQ store root. */
public class NotAStoreError extends StoreError {
    public NotAStoreError(String message) {
        super(message);
    }
}
