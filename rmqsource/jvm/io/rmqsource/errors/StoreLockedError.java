package io.rmqsource.errors;

/** Another process holds the store's writer lock (or the consumer-offset lock for too long). */
public class StoreLockedError extends StoreError {
    public StoreLockedError(String message) {
        super(message);
    }
}
