package io.rmqsource.errors;

/**
 * A message the writer cannot store the way a broker would (a timer message): refused before anything of its
 * batch is written (errors.py UnsupportedMessageError).
 */
public class UnsupportedMessageError extends OptionError {
    public UnsupportedMessageError(String message) {
        super(message);
    }
}
