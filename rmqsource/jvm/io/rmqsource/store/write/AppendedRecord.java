package io.rmqsource.store.write;

import java.util.Map;

/** A record found by {@link MessageStoreWriter#scan}: where it is and the asked-for properties it carries. */
public final class AppendedRecord {
    public final long commitLogOffset;
    public final int size;
    public final String topic;
    public final int queueId;
    public final long queueOffset;
    public final long storeTimestamp;
    public final int sysFlag;
    /** The asked-for properties present on the record (name to value). */
    public final Map<String, String> properties;

    AppendedRecord(long commitLogOffset, int size, String topic, int queueId, long queueOffset, long storeTimestamp,
                   int sysFlag, Map<String, String> properties) {
        this.commitLogOffset = commitLogOffset;
        this.size = size;
        this.topic = topic;
        this.queueId = queueId;
        this.queueOffset = queueOffset;
        this.storeTimestamp = storeTimestamp;
        this.sysFlag = sysFlag;
        this.properties = properties;
    }

    @Override
    public String toString() {
        return "AppendedRecord{" + topic + ":" + queueId + "@" + queueOffset + ", commitLogOffset=" + commitLogOffset
                + ", " + properties + "}";
    }
}
