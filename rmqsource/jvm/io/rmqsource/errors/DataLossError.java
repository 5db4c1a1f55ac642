package io.rmqsource.errors;

/** Requested offsets point at data that retention (or damage) removed. */
public class DataLossError extends StoreError {
    public DataLossError(String message) {
        super(message);
    }
}
