package io.rmqsource.store.write;

import java.util.LinkedHashMap;

/**
 * One message to put: the twin of rmqsource/format/message.py {@code MessageExtBrokerInner}.
 *
 * Plain mutable fields (set them directly, or chain the setters). {@code properties} (user
 * properties in their order, serialized after TAGS and KEYS) or {@code propertiesString} (a
 * verbatim {@code k\u0001v\u0002...} string stored as given; then tags and keys must be null).
 * Hosts are {@code "a.b.c.d:port"} or {@code "[v6]:port"}. {@code storeTimestampMs} pins the
 * store clock (null: the writer's clock). {@code trailing} (with {@code trailingNumber}) adds
 * properties after {@code properties}, see {@link TrailingProperties}. A Message may be reused after
 * put returns.
 */
public final class Message {
    public String topic;
    public int queueId;
    public byte[] body = new byte[0];
    public int flag;
    public LinkedHashMap<String, String> properties;
    public String propertiesString;
    public TrailingProperties trailing;
    public long trailingNumber;
    public String tags;
    public String keys;
    public long bornTimestampMs;
    public String bornHost = "127.0.0.1:0";
    public String storeHost = "127.0.0.1:10911";
    public int sysFlag;
    public int reconsumeTimes;
    public long preparedTransactionOffset;
    public Long storeTimestampMs;

    public Message() {
    }

    public Message(String topic, int queueId, byte[] body) {
        this.topic = topic;
        this.queueId = queueId;
        this.body = body;
    }

    public Message topic(String v) { topic = v; return this; }
    public Message queueId(int v) { queueId = v; return this; }
    public Message body(byte[] v) { body = v; return this; }
    public Message flag(int v) { flag = v; return this; }
    public Message tags(String v) { tags = v; return this; }
    public Message keys(String v) { keys = v; return this; }
    public Message bornTimestampMs(long v) { bornTimestampMs = v; return this; }
    public Message bornHost(String v) { bornHost = v; return this; }
    public Message storeHost(String v) { storeHost = v; return this; }
    public Message sysFlag(int v) { sysFlag = v; return this; }
    public Message reconsumeTimes(int v) { reconsumeTimes = v; return this; }
    public Message preparedTransactionOffset(long v) { preparedTransactionOffset = v; return this; }
    public Message storeTimestampMs(Long v) { storeTimestampMs = v; return this; }
    public Message propertiesString(String v) { propertiesString = v; return this; }

    /** Adds a user property (kept in insertion order). */
    public Message property(String name, String value) {
        if (properties == null) properties = new LinkedHashMap<>();
        properties.put(name, value);
        return this;
    }
}
