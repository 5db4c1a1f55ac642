package io.rmqsource.store.write;

/** RocketMQ's PutMessageStatus (rmqsource/store/put_result.py). */
public enum PutMessageStatus {
    PUT_OK, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE, SERVICE_NOT_AVAILABLE,
    CREATE_MAPPED_FILE_FAILED, MESSAGE_ILLEGAL, PROPERTIES_SIZE_EXCEEDED, OS_PAGE_CACHE_BUSY, UNKNOWN_ERROR
}
