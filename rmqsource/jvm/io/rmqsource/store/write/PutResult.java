package io.rmqsource.store.write;

/**
 * The outcome of one put (rmqsource/store/put_result.py PutMessageResult, flattened): the field names
 * and values of a corpus {@code expected/put.jsonl} line. A message that was not written has
 * {@code appendStatus} null (or the append status that refused it), commitLogOffset/queueOffset -1,
 * size 0 and msgId null.
 */
public final class PutResult {
    public final PutMessageStatus status;
    public final AppendMessageStatus appendStatus;
    public final long commitLogOffset;
    public final long queueOffset;
    public final int size;
    public final long storeTimestamp;
    public final String topic;
    public final int queueId;
    public final int sysFlag;
    public final String reason;
    /** Store host address bytes and port of the record (for the offset msgId), or null. */
    final byte[] storeAddr;
    final int storePort;

    PutResult(PutMessageStatus status, AppendMessageStatus appendStatus, long commitLogOffset, long queueOffset,
              int size, long storeTimestamp, String topic, int queueId, int sysFlag, String reason,
              byte[] storeAddr, int storePort) {
        this.status = status;
        this.appendStatus = appendStatus;
        this.commitLogOffset = commitLogOffset;
        this.queueOffset = queueOffset;
        this.size = size;
        this.storeTimestamp = storeTimestamp;
        this.topic = topic;
        this.queueId = queueId;
        this.sysFlag = sysFlag;
        this.reason = reason == null ? "" : reason;
        this.storeAddr = storeAddr;
        this.storePort = storePort;
    }

    /** A put that wrote nothing. */
    public static PutResult failed(Message m, PutMessageStatus status, AppendMessageStatus append, String reason) {
        return new PutResult(status, append, -1, -1, 0, 0, m == null || m.topic == null ? "" : m.topic,
                m == null ? -1 : m.queueId, m == null ? 0 : m.sysFlag, reason, null, 0);
    }

    /** This result with another status and reason (a status found after the message was written). */
    PutResult withStatus(PutMessageStatus newStatus, String newReason) {
        return new PutResult(newStatus, appendStatus, commitLogOffset, queueOffset, size, storeTimestamp, topic, queueId,
                sysFlag, newReason, storeAddr, storePort);
    }

    public boolean ok() {
        return status == PutMessageStatus.PUT_OK;
    }

    /** The offset msgId (upper-case hex of store address, port and CommitLog offset), or null when not written. */
    public String msgId() {
        if (appendStatus != AppendMessageStatus.PUT_OK || storeAddr == null) return null;
        return io.rmqsource.format.MsgId.offsetMsgId(storeAddr, storePort, commitLogOffset);
    }

    /** The put.jsonl fields as JSON (status, appendStatus, msgId, commitLogOffset, queueOffset, size,
     *  storeTimestamp, topic, queueId, sysFlag). */
    public String toJson() {
        boolean written = appendStatus != null;
        StringBuilder sb = new StringBuilder(256);
        sb.append("{\"status\":\"").append(status.name()).append("\",\"appendStatus\":")
                .append(written ? "\"" + appendStatus.name() + "\"" : "null");
        String id = msgId();
        sb.append(",\"msgId\":").append(written ? (id == null ? "\"\"" : "\"" + id + "\"") : "null");
        sb.append(",\"commitLogOffset\":").append(written ? Long.toString(commitLogOffset) : "null");
        sb.append(",\"queueOffset\":").append(written ? Long.toString(queueOffset) : "null");
        sb.append(",\"size\":").append(written ? Integer.toString(size) : "null");
        sb.append(",\"storeTimestamp\":").append(written ? Long.toString(storeTimestamp) : "null");
        sb.append(",\"topic\":");
        io.rmqsource.format.JsonText.quote(sb, topic);
        sb.append(",\"queueId\":").append(queueId).append(",\"sysFlag\":").append(sysFlag);
        sb.append(",\"reason\":");
        io.rmqsource.format.JsonText.quote(sb, reason);
        return sb.append('}').toString();
    }

    @Override
    public String toString() {
        return toJson();
    }
}
