package io.rmqsource.store;

import io.rmqsource.errors.OptionError;
import io.rmqsource.errors.Repr;
import java.io.IOException;
import java.io.Serializable;
import java.io.StringReader;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The MessageStoreConfig settings a reader uses (twin of rmqsource/store/config.py).
 *
 * Keys are RocketMQ's own; every modelled key is validated with the Python path's messages;
 * other keys of a config file are kept verbatim and never fail.
 */
public final class StoreConfig implements Serializable {
    private static final long serialVersionUID = 1L;
    static final long JAVA_INT_MAX = Integer.MAX_VALUE;
    private static final int MAX_PROPERTIES_CHARS = 16 * 1024 * 1024;
    private static final String DEFAULT_DELAY = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";
    private static final Pattern INT = Pattern.compile("[+-]?[0-9]{1,19}");
    private static final Pattern DELAY_TOKEN = Pattern.compile("([0-9]{1,18})([smhd])");
    private static final Pattern VERSION = Pattern.compile(
            "(\\d{1,4})\\.(\\d{1,4})\\.(\\d{1,4})(?:[-.+][0-9A-Za-z.+-]{0,64})?");

    /** RocketMQ key -> parser kind, in the Python _KEYS order (the option names come from contract.json). */
    private static final Map<String, String> KEYS = new LinkedHashMap<>();

    static {
        String[][] keys = {
            {"mappedFileSizeCommitLog", "pos"}, {"mappedFileSizeConsumeQueue", "cq"}, {"maxHashSlotNum", "pos"},
            {"maxIndexNum", "pos"}, {"flushDiskType", "enum:ASYNC_FLUSH,SYNC_FLUSH"},
            {"brokerRole", "enum:ASYNC_MASTER,SYNC_MASTER,SLAVE"}, {"messageDelayLevel", "delay"},
            {"checkCRCOnRecover", "bool"}, {"messageIndexEnable", "bool"}, {"messageIndexSafe", "bool"},
            {"maxMsgsNumBatch", "pos"}, {"maxTransferCountOnMessageInMemory", "pos"},
            {"maxTransferBytesOnMessageInMemory", "pos"}, {"maxMessageSize", "pos"},
            {"enableConsumeQueueExt", "bool"}, {"enabledAppendPropCRC", "bool"},
            {"autoMessageVersionOnTopicLen", "bool"}, {"brokerPutHooks", "bool"}, {"storePathRootDir", "optstr"},
            {"storePathCommitLog", "optstr"}, {"readOnlyCommitLogStorePaths", "optstr"},
            {"enableDLegerCommitLog", "bool"}, {"storePathDLedgerCommitLog", "optstr"},
            {"dLegerSelfId", "optstr"},
            {"fileReservedTime", "nonneg"}, {"deleteWhen", "str"},
            {"diskMaxUsedSpaceRatio", "nonneg"}, {"flushIntervalCommitLog", "pos"},
            {"flushCommitLogTimed", "bool"}, {"maxFilterMessageSize", "pos"}, {"engineVersion", "version"},
            {"configManagerVersion", "cmv"},
        };
        for (String[] k : keys) KEYS.put(k[0], k[1]);
    }

    private final Map<String, Object> values;

    private StoreConfig(Map<String, Object> values) {
        this.values = values;
        if ("v2".equals(values.get("configManagerVersion")) && !versionAtLeast(5, 3, 2)) {
            throw new OptionError("configManagerVersion=v2 needs a 5.3.2+ broker; engineVersion is "
                    + values.get("engineVersion"));
        }
        long size = 40 + 4L * maxHashSlotNum() + 20L * maxIndexNum();
        if (size > JAVA_INT_MAX) {
            throw new OptionError("maxHashSlotNum=" + maxHashSlotNum() + " / maxIndexNum=" + maxIndexNum()
                    + " give a " + size + "-byte IndexFile, larger than a Java int");
        }
    }

    public static List<String> keyNames() {
        return Collections.unmodifiableList(new ArrayList<>(KEYS.keySet()));
    }

    public static StoreConfig defaults() {
        Map<String, Object> v = new LinkedHashMap<>();
        v.put("mappedFileSizeCommitLog", 1024L * 1024 * 1024);
        v.put("mappedFileSizeConsumeQueue", 300_000L * 20);
        v.put("maxHashSlotNum", 5_000_000L);
        v.put("maxIndexNum", 20_000_000L);
        v.put("messageDelayLevel", parseDelay(DEFAULT_DELAY));
        v.put("checkCRCOnRecover", true);
        v.put("messageIndexEnable", true);
        v.put("messageIndexSafe", false);
        v.put("maxMsgsNumBatch", 64L);
        v.put("enableConsumeQueueExt", false);
        v.put("storePathCommitLog", null);
        v.put("readOnlyCommitLogStorePaths", null);
        v.put("enableDLegerCommitLog", false);
        v.put("storePathDLedgerCommitLog", null);
        v.put("dLegerSelfId", null);
        v.put("engineVersion", "5.3.3");
        return new StoreConfig(v);
    }

    /** A copy with RocketMQ keys replaced (values as strings); unknown keys are kept aside, never fail. */
    public StoreConfig withOverrides(Map<String, String> overrides) {
        Map<String, Object> v = new LinkedHashMap<>(values);
        for (Map.Entry<String, String> e : overrides.entrySet()) {
            String key = e.getKey().strip();
            String kind = KEYS.get(key);
            if (kind != null) {
                v.put(key, parse(key, kind, e.getValue()));
            }
        }
        return new StoreConfig(v);
    }

    /** Load a Java .properties file, then apply option overrides (StoreConfig.from_properties_file). */
    public static StoreConfig fromPropertiesFile(String name, Map<String, String> overrides) {
        byte[] data;
        try {
            data = Files.readAllBytes(Path.of(name));
        } catch (NoSuchFileException e) {
            throw new OptionError("cannot read store config " + name + ": No such file or directory");
        } catch (IOException e) {
            throw new OptionError("cannot read store config " + name + ": " + e.getMessage());
        }
        if (data.length > MAX_PROPERTIES_CHARS) {
            throw new OptionError(name + ": larger than " + MAX_PROPERTIES_CHARS + " bytes; not a config file");
        }
        String text;
        try {
            text = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(data)).toString();
        } catch (CharacterCodingException e) {
            text = new String(data, StandardCharsets.ISO_8859_1);
        }
        Map<String, String> mapping = new LinkedHashMap<>();
        StoreConfig config;
        try {
            java.util.Properties p = new java.util.Properties() {
                @Override
                public synchronized Object put(Object k, Object val) {
                    mapping.remove(k);
                    mapping.put((String) k, (String) val);
                    return super.put(k, val);
                }
            };
            try {
                p.load(new StringReader(text));
            } catch (IllegalArgumentException | IOException e) {
                throw new OptionError(name + ": malformed \\uxxxx escape");
            }
            config = defaults().withOverrides(mapping);
        } catch (OptionError e) {
            throw new OptionError(name + ": " + e.getMessage());
        }
        if (overrides != null && !overrides.isEmpty()) {
            try {
                config = config.withOverrides(overrides);
            } catch (OptionError e) {
                throw new OptionError("override: " + e.getMessage());
            }
        }
        return config;
    }

    // ------------------------------------------------------------------ parsers (config.py)

    private static Object parse(String key, String kind, String raw) {
        switch (kind) {
            case "pos":
                return intValue(key, raw, 1);
            case "nonneg":
                return intValue(key, raw, 0);
            case "cq": {
                long value = intValue(key, raw, 1);
                long rounded = (value + 19) / 20 * 20;
                if (rounded > JAVA_INT_MAX) throw new OptionError(key + "=" + value + " rounds up past a Java int");
                return rounded;
            }
            case "bool": {
                String t = raw.strip().toLowerCase(java.util.Locale.ROOT);
                if (t.equals("true") || t.equals("false")) return t.equals("true");
                throw new OptionError(key + "=" + Repr.of(raw) + " is not a boolean (true or false)");
            }
            case "delay":
                return parseDelay(raw);
            case "optstr": {
                String t = raw.strip();
                return t.isEmpty() ? null : t;
            }
            case "str":
                return raw.strip();
            case "version": {
                String t = raw.strip();
                parseEngineVersion(t);
                return t;
            }
            case "cmv": {            // the broker takes anything but "v2" for v1: a typo must not pass as v1
                String t = raw.strip();
                if (t.isEmpty()) return null;
                if (!t.equals("v1") && !t.equals("v2")) throw new OptionError(key + "=" + Repr.of(raw) + " is not v1 or v2");
                return t;
            }
            default: {
                String[] members = kind.substring(5).split(",");
                String name = raw.strip().toUpperCase(java.util.Locale.ROOT);
                for (String m : members) if (m.equals(name)) return m;
                throw new OptionError(key + "=" + Repr.of(raw) + " is not one of " + String.join(", ", members));
            }
        }
    }

    private static long intValue(String key, String raw, long minimum) {
        String text = raw.strip();
        if (!INT.matcher(text).matches()) throw new OptionError(key + "=" + Repr.of(raw) + " is not an integer");
        java.math.BigInteger value = new java.math.BigInteger(text.startsWith("+") ? text.substring(1) : text);
        if (value.compareTo(java.math.BigInteger.valueOf(minimum)) < 0
                || value.compareTo(java.math.BigInteger.valueOf(JAVA_INT_MAX)) > 0) {
            throw new OptionError(key + "=" + value + " is out of range [" + minimum + ", " + JAVA_INT_MAX + "]");
        }
        return value.longValue();
    }

    static long[] parseDelay(String text) {
        String[] tokens = text.strip().isEmpty() ? new String[0] : text.strip().split("\\s+");
        if (tokens.length == 0) throw new OptionError("messageDelayLevel is empty; expected e.g. '1s 5s 10s 30s 1m'");
        if (tokens.length > 1000) {
            throw new OptionError("messageDelayLevel has " + tokens.length + " levels, more than 1000");
        }
        long[] out = new long[tokens.length];
        for (int i = 0; i < tokens.length; i++) {
            Matcher m = DELAY_TOKEN.matcher(tokens[i]);
            if (!m.matches()) {
                throw new OptionError("messageDelayLevel: level " + (i + 1) + " is " + Repr.of(tokens[i])
                        + "; expected a number followed by one of s, m, h, d (e.g. '30s', '2h')");
            }
            long unit = switch (m.group(2)) {
                case "s" -> 1000L;
                case "m" -> 60_000L;
                case "h" -> 3_600_000L;
                default -> 86_400_000L;
            };
            try {
                out[i] = Math.multiplyExact(Long.parseLong(m.group(1)), unit);
            } catch (ArithmeticException e) {
                throw new OptionError("messageDelayLevel: level " + (i + 1) + " (" + tokens[i]
                        + ") overflows a Java long of ms");
            }
        }
        return out;
    }

    static int parseEngineVersion(String text) {
        Matcher m = VERSION.matcher(text);
        if (!m.matches()) {
            throw new OptionError("engineVersion " + Repr.of(text) + " is not a version like '4.9.7' or '5.3.3'");
        }
        int major = Integer.parseInt(m.group(1));
        if (major != 4 && major != 5) {
            throw new OptionError("engineVersion " + Repr.of(text) + ": only RocketMQ 4.x and 5.x stores are supported");
        }
        return major;
    }

    // ------------------------------------------------------------------ values

    private long longValue(String key) {
        return (Long) values.get(key);
    }

    public long maxHashSlotNum() {
        return longValue("maxHashSlotNum");
    }

    public long maxIndexNum() {
        return longValue("maxIndexNum");
    }

    public long[] messageDelayLevelsMs() {
        return (long[]) values.get("messageDelayLevel");
    }

    public boolean checkCrcOnRecover() {
        return (Boolean) values.get("checkCRCOnRecover");
    }

    public boolean messageIndexEnable() {
        return (Boolean) values.get("messageIndexEnable");
    }

    public boolean messageIndexSafe() {
        return (Boolean) values.get("messageIndexSafe");
    }

    public boolean enableConsumeQueueExt() {
        return (Boolean) values.get("enableConsumeQueueExt");
    }

    public String storePathCommitLog() {
        return (String) values.get("storePathCommitLog");
    }

    public String readOnlyCommitLogStorePaths() {
        return (String) values.get("readOnlyCommitLogStorePaths");
    }

    public boolean enableDLegerCommitLog() {
        return (Boolean) values.get("enableDLegerCommitLog");
    }

    public String storePathDLedgerCommitLog() {
        return (String) values.get("storePathDLedgerCommitLog");
    }

    /** DLedger member id: which dledger-<id> folder holds the DLedger CommitLog. */
    public String dLegerSelfId() {
        return (String) values.get("dLegerSelfId");
    }

    public int consumeQueueUnitsPerFile() {
        return (int) (longValue("mappedFileSizeConsumeQueue") / 20);
    }

    /** A modelled key's value, or {@code dflt} when the config does not set it. */
    private Object valueOr(String key, Object dflt) {
        Object v = values.get(key);
        return v == null ? dflt : v;
    }

    public long mappedFileSizeCommitLog() {
        return longValue("mappedFileSizeCommitLog");
    }

    public long mappedFileSizeConsumeQueue() {
        return longValue("mappedFileSizeConsumeQueue");
    }

    public long maxMsgsNumBatch() {
        return (Long) valueOr("maxMsgsNumBatch", 64L);
    }

    /** maxMessageSize (bytes of a body), 4 MiB unless set. */
    public long maxMessageSize() {
        return (Long) valueOr("maxMessageSize", 4L * 1024 * 1024);
    }

    public boolean syncFlush() {
        return "SYNC_FLUSH".equals(valueOr("flushDiskType", "ASYNC_FLUSH"));
    }

    public long flushIntervalCommitLogMs() {
        return (Long) valueOr("flushIntervalCommitLog", 500L);
    }

    public boolean enabledAppendPropCRC() {
        return (Boolean) valueOr("enabledAppendPropCRC", false);
    }

    /** rmqsource's own: a 5.x broker's put hook before the store (DELAY parked, timers refused); store.py twin. */
    public boolean brokerPutHooks() {
        return (Boolean) valueOr("brokerPutHooks", true);
    }

    public boolean autoMessageVersionOnTopicLen() {
        return (Boolean) valueOr("autoMessageVersionOnTopicLen", true);
    }

    /** engineVersion as {major, minor, patch}. */
    public int[] engineVersion() {
        String v = (String) values.get("engineVersion");
        parseEngineVersion(v);
        Matcher m = VERSION.matcher(v);
        m.matches();
        return new int[] {Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2)), Integer.parseInt(m.group(3))};
    }

    private boolean versionAtLeast(int major, int minor, int patch) {
        int[] v = engineVersion();
        return java.util.Arrays.compare(v, new int[] {major, minor, patch}) >= 0;
    }

    /** Whether the engine ends the properties string with 0x02: up to 4.9.0, and from 5.2.0 (spec 2.8). */
    public boolean trailingPropertySeparator() {
        return !versionAtLeast(4, 9, 1) || versionAtLeast(5, 2, 0);
    }

    /** Magic v2 (2-byte topic length) exists since 5.1.0 (spec 2.2). */
    public boolean supportsMessageVersionV2() {
        return versionAtLeast(5, 1, 0);
    }

    /** enabledAppendPropCRC as the engine applies it (the __CRC32# property exists since 5.2.0). */
    public boolean appendPropCrc() {
        return enabledAppendPropCRC() && versionAtLeast(5, 2, 0);
    }

    /** configManagerVersion (v1, v2), or null when not given: the store shows where the broker keeps its configs. */
    public String configManagerVersion() {
        return (String) values.get("configManagerVersion");
    }

    public boolean isV5() {
        return parseEngineVersion((String) values.get("engineVersion")) >= 5;
    }
}
