package io.rmqsource.store.write;

/** RocketMQ's AppendMessageStatus (rmqsource/store/put_result.py). */
public enum AppendMessageStatus {
    PUT_OK, END_OF_FILE, MESSAGE_SIZE_EXCEEDED, PROPERTIES_SIZE_EXCEEDED, UNKNOWN_ERROR
}
