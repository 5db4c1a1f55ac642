package io.rmqsource.store.write;

import io.rmqsource.errors.Repr;
import io.rmqsource.errors.UnsupportedMessageError;
import io.rmqsource.format.MsgId;
import io.rmqsource.format.Properties;
import io.rmqsource.format.Record;
import io.rmqsource.format.RecordEncoder;
import io.rmqsource.format.TagsCode;
import io.rmqsource.store.StoreConfig;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.zip.CRC32;

/**
 * Put checks (twin of rmqsource/store/put_checks.py): RocketMQ's validation of one message before
 * it is appended (DefaultMessageStore.checkMessage plus the append callback's size checks) and its
 * position-independent encoding.  {@link #prepare} returns a {@link Prepared} or the refused
 * message's {@link PutResult}.  Not thread-safe (the writer's put lock guards it).
 */
final class PutChecks {
    static final int TOPIC_MAX_BYTES_V1 = 127;
    static final int TOPIC_MAX_BYTES_V2 = 255;
    static final int PROPS_MAX = 32767;
    static final int RECORD_HEADROOM_BYTES = 64 * 1024;
    static final int END_FILE_MIN_BLANK_BYTES = 8;
    static final int MAX_PORT = 65535;
    static final int TRANSACTION_NOT_TYPE = 0;
    static final int TRANSACTION_COMMIT_TYPE = 0x8;
    private static final byte[] EMPTY = new byte[0];

    private final long segmentSize;
    private final boolean v5;
    private final boolean trailing;
    private final boolean appendCrc;
    private final boolean v2Ok;
    private final long[] delayLevels;
    /** The delay rewrite runs for a 4.9 store and, with brokerPutHooks, for a 5.x one (put_checks.py). */
    private final boolean scheduleHook;
    /** (real topic, real queue id) of every message parked in SCHEDULE_TOPIC_XXXX: routed in topics.json. */
    final java.util.Set<Map.Entry<String, Integer>> parkedQueues = new java.util.HashSet<>();
    private final long maxBody;
    private final long maxRecord;
    private final CRC32 crc = new CRC32();
    /** Parsed hosts by text: a batch names few hosts. */
    private final Map<String, Object[]> hosts = new HashMap<>();
    /** Valid topics with their bytes (topics are few). */
    private final Map<String, byte[]> topics = new HashMap<>();
    /** The last valid topic (the same String object row after row): no map lookup. */
    private String knownTopic;
    private byte[] knownTopicBytes;

    PutChecks(StoreConfig c) {
        this.segmentSize = c.mappedFileSizeCommitLog();
        this.v5 = c.isV5();
        this.trailing = c.trailingPropertySeparator();
        this.appendCrc = c.appendPropCrc();
        this.v2Ok = c.supportsMessageVersionV2() && c.autoMessageVersionOnTopicLen();
        this.delayLevels = c.messageDelayLevelsMs();
        this.scheduleHook = !v5 || c.brokerPutHooks();
        this.maxBody = c.maxMessageSize();
        this.maxRecord = c.maxMessageSize() + RECORD_HEADROOM_BYTES;
    }

    boolean trailing() {
        return trailing;
    }

    String topicProblem(String topic) {
        if (topic == null || topic.isEmpty()) return "topic is empty";
        for (int i = 0; i < topic.length(); i++) {
            char ch = topic.charAt(i);
            boolean ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')
                    || ch == '%' || ch == '|' || ch == '_' || ch == '-';
            if (!ok) return "topic " + Repr.of(topic) + " has characters outside [%|a-zA-Z0-9_-]";
        }
        int n = topic.length();
        if (n <= TOPIC_MAX_BYTES_V1) return null;
        if (!v2Ok) return "topic is " + n + " bytes, more than " + TOPIC_MAX_BYTES_V1;
        if (n > TOPIC_MAX_BYTES_V2) return "topic is " + n + " bytes, more than " + TOPIC_MAX_BYTES_V2;
        return null;
    }

    /** The bytes of a topic already found valid, else null. */
    private byte[] known(String topic) {
        if (topic == knownTopic) return knownTopicBytes;
        byte[] b = topics.get(topic);
        if (b != null) {
            knownTopic = topic;
            knownTopicBytes = b;
        }
        return b;
    }

    private byte[] topicBytes(String topic) {
        byte[] b = known(topic);
        if (b == null) {
            b = topic.getBytes(StandardCharsets.US_ASCII);
            if (topics.size() > 4096) topics.clear();
            topics.put(topic, b);
            knownTopic = topic;
            knownTopicBytes = b;
        }
        return b;
    }

    /** {address, port} of a host text, or a String saying why it is not one. */
    private Object host(String text) {
        Object[] h = hosts.get(text);
        if (h == null) {
            h = MsgId.parseHost(text);
            if (h == null) return "not a host:port address: " + Repr.of(text);
            if ((Integer) h[1] > MAX_PORT) {
                return "port " + h[1] + " of host " + Repr.of(text) + " is outside [0, " + MAX_PORT + "]";
            }
            if (hosts.size() > 4096) hosts.clear();
            hosts.put(text, h);
        }
        return h;
    }

    private static PutResult illegal(Message m, String reason) {
        return PutResult.failed(m, PutMessageStatus.MESSAGE_ILLEGAL, null, reason);
    }

    /** Validate and pre-encode one message: a Prepared, or the PutResult of a refused one. */
    Object prepare(Message m) {
        return prepare(m, -1);
    }

    /**
     * Validate and pre-encode one message: a Prepared (its properties bytes valid only until the next
     * call), or the PutResult of a refused one.  {@code slot}: the message's position in its batch.
     */
    Object prepare(Message m, int slot) {
        if (m == null) return PutResult.failed(null, PutMessageStatus.MESSAGE_ILLEGAL, null, "message is null");
        String problem = m.topic != null && known(m.topic) != null ? null : topicProblem(m.topic);
        if (problem != null) return illegal(m, problem);
        int qid = m.queueId;
        if (qid < 0) return illegal(m, "queueId " + qid + " out of range");
        byte[] body = m.body == null ? EMPTY : m.body;
        if (body.length > maxBody) {
            return PutResult.failed(m, PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageStatus.MESSAGE_SIZE_EXCEEDED,
                    "body is " + body.length + " bytes, more than maxMessageSize " + maxBody);
        }
        Object born = host(m.bornHost == null ? "127.0.0.1:0" : m.bornHost);
        if (born instanceof String) return illegal(m, (String) born);
        Object store = host(m.storeHost == null ? "127.0.0.1:10911" : m.storeHost);
        if (store instanceof String) return illegal(m, (String) store);
        byte[] bornAddr = (byte[]) ((Object[]) born)[0];
        byte[] storeAddr = (byte[]) ((Object[]) store)[0];
        boolean bornV6 = bornAddr.length == 16;
        boolean storeV6 = storeAddr.length == 16;
        int sysFlag = (m.sysFlag & ~(Record.BORNHOST_V6_FLAG | Record.STOREHOST_V6_FLAG))
                | (bornV6 ? Record.BORNHOST_V6_FLAG : 0) | (storeV6 ? Record.STOREHOST_V6_FLAG : 0);
        int tran = sysFlag & Record.TRANSACTION_MASK;
        String topic = m.topic;

        // Fast path: TAGS, KEYS and the caller's map in plain ASCII without separators and without the
        // names the engine treats specially: the bytes are written straight from the strings.
        if (fastProperties(m, topic)) {
            if (fastChars > PROPS_MAX) {
                return PutResult.failed(m, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, null,
                        "properties are " + fastChars + " chars, more than " + PROPS_MAX);
            }
            return finish(m, topic, qid, sysFlag, tran, body, bornAddr, bornV6, (Object[]) born, storeAddr, storeV6,
                    (Object[]) store, scratch, at, null, null, slot);
        }
        // Properties: ordered map (TAGS, KEYS, then the caller's) or a verbatim string.
        LinkedHashMap<String, String> pmap = null;
        String pstr;
        if (m.propertiesString != null) {
            if (m.tags != null || m.keys != null) {
                return illegal(m, "a verbatim properties string cannot be combined with tags/keys");
            }
            if ((m.properties != null && !m.properties.isEmpty()) || m.trailing != null) {
                return illegal(m, "a properties map cannot be combined with a verbatim properties string");
            }
            pstr = m.propertiesString;
        } else {
            pstr = null;
            pmap = new LinkedHashMap<>();
            if (m.tags != null) pmap.put(Properties.TAGS_NAME, m.tags);
            if (m.keys != null) pmap.put(Properties.KEYS_NAME, m.keys);
            if (m.properties != null) pmap.putAll(m.properties);
            if (m.trailing != null) m.trailing.putInto(pmap, m.trailingNumber);
            problem = stringsProblem(pmap);
            if (problem != null) return illegal(m, problem);
        }
        // Delay level rewrite into SCHEDULE_TOPIC_XXXX: the 4.9 store's CommitLog.asyncPutMessage, the 5.x
        // broker's HookUtils.transformDelayLevelMessage (brokerPutHooks).
        if (scheduleHook && (tran == TRANSACTION_NOT_TYPE || tran == TRANSACTION_COMMIT_TYPE)) {
            Map<String, String> source = pmap != null ? pmap : Properties.parseString(pstr);
            String rawDelay = source.get(Properties.DELAY_NAME);
            Integer level = null;
            if (rawDelay != null) {
                level = TagsCode.javaParseInt(rawDelay);
                if (level == null) return illegal(m, "DELAY " + Repr.of(rawDelay) + " is not an int");
            }
            if (v5 && (level == null || level <= 0)) refuseTimer(topic, source);
            if (level != null && level > 0) {
                int lv = Math.min(level, delayLevels.length);
                pmap = new LinkedHashMap<>(source);
                if (v5) {        // HookUtils.checkIfTimerMessage: a delay level wins over timer properties
                    pmap.remove(TIMER_DELIVER_MS);
                    pmap.remove(TIMER_DELAY_SEC);
                }
                pmap.put(Properties.DELAY_NAME, Integer.toString(lv));
                pmap.put(Properties.REAL_TOPIC_NAME, topic);
                pmap.put(Properties.REAL_QID_NAME, Integer.toString(qid));
                parkedQueues.add(Map.entry(topic, qid));
                topic = TagsCode.SCHEDULE_TOPIC;
                qid = lv - 1;
                pstr = null;
            }
        }
        if (pmap != null) {
            if (appendCrc) pmap.remove(Properties.CRC32_NAME);
            pstr = serialize(pmap, trailing);
        } else if (appendCrc) {
            pstr = Properties.deleteProperty(pstr, Properties.CRC32_NAME);
        }
        if (pstr.length() > PROPS_MAX && pstr.codePointCount(0, pstr.length()) > PROPS_MAX) {
            return PutResult.failed(m, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, null,
                    "properties are " + pstr.codePointCount(0, pstr.length()) + " chars, more than " + PROPS_MAX);
        }
        byte[] pbytes = RecordEncoder.utf8(pstr);
        if (pbytes == null) {
            int at = RecordEncoder.loneSurrogate(pstr);
            return illegal(m, "properties are not valid Unicode: a lone surrogate at char "
                    + pstr.codePointCount(0, at));
        }
        return finish(m, topic, qid, sysFlag, tran, body, bornAddr, bornV6, (Object[]) born, storeAddr, storeV6,
                (Object[]) store, pbytes, pbytes.length, pmap, pstr, slot);
    }

    private Object finish(Message m, String topic, int qid, int sysFlag, int tran, byte[] body, byte[] bornAddr,
                          boolean bornV6, Object[] born, byte[] storeAddr, boolean storeV6, Object[] store, byte[] pbytes,
                          int plen, Map<String, String> pmap, String pstr, int slot) {
        if (appendCrc && pmap == null && pstr == null) {
            // the fast path wrote the placeholder already
        } else if (appendCrc) {
            boolean sep = pbytes.length == 0 || pbytes[pbytes.length - 1] == Properties.PROPERTY_SEPARATOR;
            int extra = (sep ? 0 : 1) + RecordEncoder.CRC_PLACEHOLDER.length;
            byte[] withCrc = java.util.Arrays.copyOf(pbytes, pbytes.length + extra);
            if (!sep) withCrc[pbytes.length] = Properties.PROPERTY_SEPARATOR;
            System.arraycopy(RecordEncoder.CRC_PLACEHOLDER, 0, withCrc, withCrc.length - RecordEncoder.CRC_PLACEHOLDER.length,
                    RecordEncoder.CRC_PLACEHOLDER.length);
            pbytes = withCrc;
            plen = withCrc.length;
        }
        if (plen > PROPS_MAX) {
            return PutResult.failed(m, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                    AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                    "properties are " + plen + " bytes, more than " + PROPS_MAX);
        }
        byte[] tbytes = topicBytes(topic);
        boolean v2 = v2Ok && topic.length() > TOPIC_MAX_BYTES_V1;
        int size = RecordEncoder.recordSize(bornV6, storeV6, body.length, v2, tbytes.length, plen);
        if (size > maxRecord) {
            return PutResult.failed(m, PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageStatus.MESSAGE_SIZE_EXCEEDED,
                    "record is " + size + " bytes, more than " + maxRecord);
        }
        if ((long) size + END_FILE_MIN_BLANK_BYTES > segmentSize) {
            return PutResult.failed(m, PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageStatus.MESSAGE_SIZE_EXCEEDED,
                    "record of " + size + " bytes cannot fit a " + segmentSize + "-byte segment");
        }
        // A new (young) object per message: a pooled one would be old, and storing this message's
        // strings into it makes G1 refine its card for every message (more CPU than the allocation).
        Prepared p = new Prepared();
        p.topic = topic;
        p.topicBytes = tbytes;
        p.queueId = qid;
        p.sysFlag = sysFlag;
        p.size = size;
        p.magicV2 = v2;
        p.body = body;
        crc.reset();
        crc.update(body, 0, body.length);
        p.bodyCrc = (int) (crc.getValue() & 0x7FFFFFFFL);
        // The fast path's bytes stay in scratch: the writer encodes a Prepared before the next prepare.
        p.props = pbytes;
        p.propsLen = plen;
        p.crcProp = appendCrc;
        p.flag = m.flag;
        p.bornTimestamp = m.bornTimestampMs;
        p.bornAddr = bornAddr;
        p.bornPort = (Integer) ((Object[]) born)[1];
        p.storeAddr = storeAddr;
        p.storePort = (Integer) ((Object[]) store)[1];
        p.reconsumeTimes = m.reconsumeTimes;
        p.preparedTransactionOffset = m.preparedTransactionOffset;
        p.storeTimestamp = m.storeTimestampMs;
        p.entersCq = tran == TRANSACTION_NOT_TYPE || tran == TRANSACTION_COMMIT_TYPE;
        // What dispatch needs, as the engine's parser sees the stored string.
        if (pmap == null && pstr == null) {         // the fast path: the message's own strings
            p.tags = nonEmpty(m.tags);
            p.keys = nonEmpty(m.keys);
            p.uniqKey = nonEmpty(fastUniq);
            p.delay = null;
            return p;
        }
        Map<String, String> parsed = pmap != null ? pmap : Properties.parseString(pstr);
        p.tags = nonEmpty(parsed.get(Properties.TAGS_NAME));
        p.keys = nonEmpty(parsed.get(Properties.KEYS_NAME));
        p.uniqKey = nonEmpty(parsed.get(Properties.UNIQ_KEY_NAME));
        p.delay = TagsCode.SCHEDULE_TOPIC.equals(topic) ? nonEmpty(parsed.get(Properties.DELAY_NAME)) : null;
        return p;
    }

    private byte[] scratch = new byte[1024];
    private int at;
    /** The fast path's UNIQ_KEY value (null: none), found in its one pass over the map. */
    private String fastUniq;
    /** Length of the fast path's properties string before the CRC entry. */
    private int fastChars;

    /**
     * The stored PROPERTIES bytes (with the CRC placeholder when appended) of a message whose TAGS, KEYS
     * and user properties are all plain ASCII without separators (then UTF-8 is the chars and the map
     * reads back as itself), the map naming none of TAGS, KEYS, DELAY and __CRC32#, the topic not
     * SCHEDULE_TOPIC_XXXX, left in scratch[0, at); else false (the general path decides).
     */
    private boolean fastProperties(Message m, String topic) {
        if (m.propertiesString != null || topic.equals(TagsCode.SCHEDULE_TOPIC)) return false;
        at = 0;
        fastUniq = null;
        boolean any = false;
        if (m.tags != null) {
            if (!entry(Properties.TAGS_NAME, m.tags, false)) return false;
            any = true;
        }
        if (m.keys != null) {
            if (!entry(Properties.KEYS_NAME, m.keys, any)) return false;
            any = true;
        }
        if (m.properties != null) {
            for (Map.Entry<String, String> e : m.properties.entrySet()) {
                String k = e.getKey();
                if (k == null || notCopied(k)) return false;
                String v = e.getValue();
                if (v == null) continue;
                if (!entry(k, v, any)) return false;
                if (k.equals(Properties.UNIQ_KEY_NAME)) fastUniq = v;
                any = true;
            }
        }
        TrailingProperties t = m.trailing;
        if (t != null) {
            if (t.plain == null || (m.properties != null && t.namedIn(m.properties))) return false;
            if (any) put((byte) Properties.PROPERTY_SEPARATOR);
            putPlain(t.plain);
            putNumber(m.trailingNumber);
            any = true;
        }
        if (any && trailing) put((byte) Properties.PROPERTY_SEPARATOR);
        fastChars = at;
        if (appendCrc) {
            if (at > 0 && scratch[at - 1] != Properties.PROPERTY_SEPARATOR) put((byte) Properties.PROPERTY_SEPARATOR);
            for (byte x : RecordEncoder.CRC_PLACEHOLDER) put(x);
        }
        return true;
    }

    private boolean entry(String k, String v, boolean sep) {
        if (sep) put((byte) Properties.PROPERTY_SEPARATOR);
        if (!ascii(k)) return false;
        put((byte) Properties.NAME_VALUE_SEPARATOR);
        return ascii(v);
    }

    /** Names the fast path does not copy as they are (the engine reads them, or the writer rewrites them). */
    static boolean notCopied(String name) {
        return name.equals(Properties.TAGS_NAME) || name.equals(Properties.KEYS_NAME)
                || name.equals(Properties.DELAY_NAME) || name.equals(Properties.CRC32_NAME)
                || name.startsWith("TIMER_");
    }

    static final String TIMER_DELIVER_MS = "TIMER_DELIVER_MS";
    static final String TIMER_DELAY_SEC = "TIMER_DELAY_SEC";
    static final String TIMER_DELAY_MS = "TIMER_DELAY_MS";
    static final String TIMER_OUT_MS = "TIMER_OUT_MS";
    static final String[] TIMER_PROPERTIES = {TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS};

    /**
     * UnsupportedMessageError for a timer message (put_checks.py refuse_timer): a 5.x broker parks it in its
     * timer wheel, state the writer does not keep. Copies the wheel already holds (TIMER_OUT_MS) pass.
     */
    static void refuseTimer(String topic, Map<String, String> props) {
        if (topic.equals("rmq_sys_wheel_timer") || props.get(TIMER_OUT_MS) != null) return;
        for (String name : TIMER_PROPERTIES) {
            String value = props.get(name);
            if (value != null) {
                throw new UnsupportedMessageError("property " + name + "=" + Repr.of(value) + " (topic "
                        + Repr.of(topic) + "): timer messages are not written (a broker parks them in its timer "
                        + "wheel, which rmqsource does not keep); drop " + name + ", or use a delay level "
                        + "(property DELAY), which is parked as the broker parks it");
            }
        }
    }

    /** The batch-level pre-check of refuseTimer (before anything of a putAll batch is written). */
    void refuseUnsupported(Message m) {
        if (!(v5 && scheduleHook) || m == null || m.topic == null) return;
        int tran = m.sysFlag & 0xC;
        if (tran != TRANSACTION_NOT_TYPE && tran != TRANSACTION_COMMIT_TYPE) return;
        Map<String, String> props;
        if (m.propertiesString != null) {
            if (!m.propertiesString.contains("TIMER_")) return;
            props = Properties.parseString(m.propertiesString);
        } else {
            if (m.properties == null || m.properties.isEmpty()) return;
            props = m.properties;
        }
        String raw = props.get(Properties.DELAY_NAME);
        Integer level = raw != null ? TagsCode.javaParseInt(raw) : null;
        if (level == null || level <= 0) refuseTimer(m.topic, props);
    }

    /** Text the fast path copies as it is: every char in [3, 0x7F] (ASCII without the separators). */
    static boolean plain(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c < 3 || c > 0x7F) return false;
        }
        return true;
    }

    private char[] chars = new char[256];

    /** Room for {@code n} more bytes in scratch. */
    private void room(int n) {
        if (at + n > scratch.length) scratch = java.util.Arrays.copyOf(scratch, Math.max(scratch.length * 2, at + n + 64));
    }

    private boolean ascii(String s) {
        int n = s.length();
        room(n);
        if (n > chars.length) chars = new char[Math.max(n, chars.length * 2)];
        // getChars is a bulk copy (charAt per char is not); the check has no early exit so the loop stays
        // tight: a char outside [3, 0x7F] makes (c - 3) | (0x7F - c) negative.
        char[] cs = chars;
        s.getChars(0, n, cs, 0);
        byte[] b = scratch;
        int a = at;
        int bad = 0;
        for (int i = 0; i < n; i++) {
            int c = cs[i];
            bad |= (c - 3) | (0x7F - c);
            b[a + i] = (byte) c;
        }
        if (bad < 0) return false;
        at = a + n;
        return true;
    }

    private void putPlain(byte[] bytes) {
        room(bytes.length);
        System.arraycopy(bytes, 0, scratch, at, bytes.length);
        at += bytes.length;
    }

    /** The decimal digits of {@code v}, as Long.toString writes them (the sinks' row indexes are not negative). */
    private void putNumber(long v) {
        if (v < 0) {
            putPlain(Long.toString(v).getBytes(StandardCharsets.US_ASCII));
            return;
        }
        room(19);
        int digits = 1;
        for (long p = 10; digits < 19 && v >= p; p *= 10) digits++;
        for (int i = at + digits - 1; i >= at; i--) {
            scratch[i] = (byte) ('0' + v % 10);
            v /= 10;
        }
        at += digits;
    }

    private void put(byte x) {
        room(1);
        scratch[at++] = x;
    }

    /** A map entry reads back only with a non-empty name and value (parse_properties' rule). */
    private static String nonEmpty(String v) {
        return v == null || v.isEmpty() ? null : v;
    }

    /** Why TAGS/KEYS/property names and values cannot be stored (a separator inside, a null name), or null. */
    private static String stringsProblem(Map<String, String> pmap) {
        for (Map.Entry<String, String> e : pmap.entrySet()) {
            String k = e.getKey();
            String v = e.getValue();
            if (k == null) return "property name None is not a string";
            if (hasSeparator(k)) return "property name " + Repr.of(k) + " holds a property separator (\\x01 or \\x02)";
            if (v != null && hasSeparator(v)) {
                return what(k) + " " + Repr.of(v) + " holds a property separator (\\x01 or \\x02)";
            }
        }
        return null;
    }

    private static boolean hasSeparator(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == 1 || c == 2) return true;
        }
        return false;
    }

    private static String what(String name) {
        if (name.equals(Properties.TAGS_NAME)) return "tags";
        if (name.equals(Properties.KEYS_NAME)) return "keys";
        return "property " + Repr.of(name);
    }

    /** serialize_map: {@code k 0x01 v} joined by 0x02 (null values left out), 0x02 at the end when trailing. */
    static String serialize(Map<String, String> pmap, boolean trailing) {
        StringBuilder sb = new StringBuilder(128);
        boolean any = false;
        for (Map.Entry<String, String> e : pmap.entrySet()) {
            if (e.getValue() == null) continue;
            if (any) sb.append((char) Properties.PROPERTY_SEPARATOR);
            sb.append(e.getKey()).append((char) Properties.NAME_VALUE_SEPARATOR).append(e.getValue());
            any = true;
        }
        if (any && trailing) sb.append((char) Properties.PROPERTY_SEPARATOR);
        return sb.toString();
    }
}
