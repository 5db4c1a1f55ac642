package io.rmqsource.format;

import io.rmqsource.errors.CorruptRecordError;
import io.rmqsource.errors.Repr;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Trace message bodies: the events RocketMQ's client writes to {@code RMQ_SYS_TRACE_TOPIC} (twin of
 * rmqsource/format/trace.py).
 *
 * <p>The client's {@code TraceDataEncoder} ends each event with U+0002 and splits its fields with U+0001;
 * {@link #parse} reads them back as {@code decoderFromTraceDataString} does, field for field, for every
 * field count it accepts (4.9 and 5.x clients wrote more fields over time), and throws a
 * {@link CorruptRecordError} where that decoder would throw (a number that does not parse, a msgType
 * ordinal or transactionState the client does not have, too few fields).
 */
public final class TraceData {
    public static final String FIELD_SPLITOR = "\u0002";     // TraceConstants.FIELD_SPLITOR: ends an event
    public static final String CONTENT_SPLITOR = "\u0001";   // TraceConstants.CONTENT_SPLITOR: between fields
    /** org.apache.rocketmq.common.message.MessageType, in ordinal order (the client writes the ordinal). */
    public static final List<String> MESSAGE_TYPES =
            List.of("Normal_Msg", "Trans_Msg_Half", "Trans_msg_Commit", "Delay_Msg", "Order_Msg");
    /** org.apache.rocketmq.client.producer.LocalTransactionState. */
    public static final List<String> TRANSACTION_STATES = List.of("COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW");
    /** The fewest fields the decoder reads for each type it knows (one more index would throw). */
    public static final Map<String, Integer> MIN_FIELDS =
            Map.of("Pub", 12, "SubBefore", 8, "SubAfter", 6, "EndTransaction", 13, "Recall", 7);

    private TraceData() {
    }

    /** One event; a field its type does not have (or the client wrote as {@code null}) is null. */
    public static final class Event {
        public String traceType;
        public Long timestampMs;
        public String regionId;
        public String group;
        public String topic;
        public String msgId;
        public String offsetMsgId;
        public String tags;
        public List<String> keys;
        public String storeHost;
        public String clientHost;
        public Integer bodyLength;
        public Integer costTime;
        public String msgType;
        public Boolean success;
        public String requestId;
        public Integer retryTimes;
        public Integer contextCode;
        public String transactionId;
        public String transactionState;
        public Boolean fromTransactionCheck;

        Event(String traceType) {
            this.traceType = traceType;
        }
    }

    /** The events of one body, errors without a file (tests, and callers that name the message themselves). */
    public static List<Event> parse(String body) {
        return parse(body, null, -1);
    }

    /** The events of one trace message body; {@code file} and {@code offset} name the message in errors. */
    public static List<Event> parse(String body, String file, long offset) {
        List<Event> events = new ArrayList<>();
        if (body == null || body.isEmpty()) return events;
        // String.split of a one-character literal, as the client: trailing empty strings are dropped
        String[] contexts = body.split(FIELD_SPLITOR);
        for (int n = 0; n < contexts.length; n++) {
            String[] line = contexts[n].split(CONTENT_SPLITOR);
            if (line.length == 0) {   // separators only split to nothing: the decoder's line[0] throws
                throw new CorruptRecordError("trace event " + n + " of the message holds field separators only", file,
                        offset);
            }
            String kind = line[0];
            Integer need = MIN_FIELDS.get(kind);
            if (need == null) continue;               // the client's decoder skips a type it does not know
            if (line.length < need) {
                throw new CorruptRecordError("trace event " + n + " of the message: " + kind + " has " + line.length
                        + " fields, the client's decoder needs at least " + need, file, offset);
            }
            try {
                events.add(event(kind, line));
            } catch (IllegalArgumentException e) {
                throw new CorruptRecordError("trace event " + n + " of the message: " + kind + ": " + e.getMessage(),
                        file, offset);
            }
        }
        return events;
    }

    /** The decoder's branches, in its order of reading (so the first field it would choke on is named). */
    private static Event event(String kind, String[] f) {
        Event e = new Event(kind);
        switch (kind) {
            case "Pub" -> {
                e.timestampMs = parseLong(f[1], "timestamp");
                e.regionId = text(f[2]);
                e.group = text(f[3]);
                e.topic = text(f[4]);
                e.msgId = text(f[5]);
                e.tags = text(f[6]);
                e.keys = keys(f[7]);
                e.storeHost = text(f[8]);
                e.bodyLength = parseInt(f[9], "bodyLength");
                e.costTime = parseInt(f[10], "costTime");
                e.msgType = msgType(f[11]);
                if (f.length == 13) {
                    e.success = bool(f[12]);
                } else if (f.length >= 14) {
                    e.offsetMsgId = text(f[12]);
                    e.success = bool(f[13]);
                    if (f.length >= 15) e.clientHost = text(f[14]);
                }
            }
            case "SubBefore" -> {
                e.timestampMs = parseLong(f[1], "timestamp");
                e.regionId = text(f[2]);
                e.group = text(f[3]);
                e.requestId = text(f[4]);
                e.msgId = text(f[5]);
                e.retryTimes = parseInt(f[6], "retryTimes");
                e.keys = keys(f[7]);
            }
            case "SubAfter" -> {
                e.requestId = text(f[1]);
                e.msgId = text(f[2]);
                e.keys = keys(f[5]);
                e.costTime = parseInt(f[3], "costTime");
                e.success = bool(f[4]);
                if (f.length >= 7) e.contextCode = parseInt(f[6], "contextCode");
                if (f.length >= 9) {                  // 4.9.4 / 5.x clients
                    e.timestampMs = parseLong(f[7], "timestamp");
                    e.group = text(f[8]);
                }
            }
            case "EndTransaction" -> {
                e.timestampMs = parseLong(f[1], "timestamp");
                e.regionId = text(f[2]);
                e.group = text(f[3]);
                e.topic = text(f[4]);
                e.msgId = text(f[5]);
                e.tags = text(f[6]);
                e.keys = keys(f[7]);
                e.storeHost = text(f[8]);
                e.msgType = msgType(f[9]);
                e.transactionId = text(f[10]);
                if (!TRANSACTION_STATES.contains(f[11])) {     // LocalTransactionState.valueOf
                    throw new IllegalArgumentException("transactionState " + Repr.of(f[11])
                            + " is not a LocalTransactionState");
                }
                e.transactionState = f[11];
                e.fromTransactionCheck = bool(f[12]);
            }
            default -> {                              // Recall
                e.timestampMs = parseLong(f[1], "timestamp");
                e.regionId = text(f[2]);
                e.group = text(f[3]);
                e.topic = text(f[4]);
                e.msgId = text(f[5]);
                e.success = bool(f[6]);
            }
        }
        return e;
    }

    /** The encoder appends a Java null as the text "null". */
    private static String text(String v) {
        return v.equals("null") ? null : v;
    }

    /** Split on spaces, empty items dropped (as the message column keys). */
    private static List<String> keys(String v) {
        if (text(v) == null) return null;
        List<String> out = new ArrayList<>();
        for (String k : v.split(" ")) if (!k.isEmpty()) out.add(k);
        return out;
    }

    private static boolean bool(String v) {
        return Boolean.parseBoolean(v);
    }

    private static String msgType(String v) {
        int t = parseInt(v, "msgType");
        if (t < 0 || t >= MESSAGE_TYPES.size()) {      // MessageType.values()[t]
            throw new IllegalArgumentException("msgType " + t + " is not a MessageType ordinal");
        }
        return MESSAGE_TYPES.get(t);
    }

    /** Integer.parseInt, as the client; the error names the field. */
    private static int parseInt(String v, String name) {
        try {
            return Integer.parseInt(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + " " + Repr.of(v) + " is not a 32-bit number");
        }
    }

    private static long parseLong(String v, String name) {
        try {
            return Long.parseLong(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + " " + Repr.of(v) + " is not a 64-bit number");
        }
    }
}
