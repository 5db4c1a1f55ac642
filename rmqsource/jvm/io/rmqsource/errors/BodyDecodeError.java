package io.rmqsource.errors;

/**
 * A message body could not be decoded as the read's bodyFormat asks (docs/bodies.md), under
 * onBadRecord=fail; the same text as rmqsource/errors.py's BodyDecodeError.
 */
public class BodyDecodeError extends RmqError {
    public BodyDecodeError(String reason, String bodyFormat, String topic, int queueId, long queueOffset,
                           long commitLogOffset) {
        super("cannot decode the body of the message at " + topic + " queue " + queueId + " offset " + queueOffset
                + " (commitLogOffset " + commitLogOffset + ") as " + bodyFormat + ": " + reason);
    }
}
