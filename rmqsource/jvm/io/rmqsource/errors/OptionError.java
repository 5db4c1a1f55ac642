package io.rmqsource.errors;

/** A user-supplied option is malformed or names something that does not exist. */
public class OptionError extends RmqError {
    public OptionError(String message) {
        super(message);
    }
}
