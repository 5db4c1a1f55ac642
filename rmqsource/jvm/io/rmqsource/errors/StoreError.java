package io.rmqsource.errors;

/** The store as a whole cannot be used as asked. */
public class StoreError extends RmqError {
    public StoreError(String message) {
        super(message);
    }
}
