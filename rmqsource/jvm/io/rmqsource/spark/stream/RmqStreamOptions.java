package io.rmqsource.spark.stream;

import io.rmqsource.errors.OptionError;
import io.rmqsource.errors.Repr;
import io.rmqsource.spark.Contract;
import io.rmqsource.spark.KafkaNames;
import io.rmqsource.spark.RmqOptions;
import java.io.Serializable;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Stream read options (twin of parse_stream_options in rmqsource/spark/stream_options.py, same rules and
 * messages): the stream's own options are taken out, the rest are batch options
 * ({@link RmqOptions}).
 */
public final class RmqStreamOptions implements Serializable {
    private static final long serialVersionUID = 1L;
    public static final String GROUP = "group";
    public static final long DEFAULT_MAX_TRIGGER_DELAY_MS = 15L * 60 * 1000;
    private static final String[] BATCH_ONLY = {"endingoffsets", "endingtimestamp"};
    private static final Pattern DURATION = Pattern.compile("([0-9]{1,15})\\s*(ms|s|m|min|h|d)?");
    public static final String NONE = "none";

    public RmqOptions read;
    /** "latest", "earliest", "group" or {topic: {queueId: offset}}. */
    public Object starting = RmqOptions.LATEST;
    /** earliest | latest | none; null: a group without commits fails (startingOffsetsFallback). */
    public String startingFallback;
    public Long startingTimestamp;
    public Long maxMessages;
    public Long maxBytes;
    public Long minMessages;
    public long maxTriggerDelayMs = DEFAULT_MAX_TRIGGER_DELAY_MS;
    /** Tags of subExpression; null = "*". */
    public Set<String> subTags;
    public String subExpression = "*";
    public String consumerGroup;
    /** With consumerGroup: commit each batch's end (false: only read the group's offsets). */
    public boolean commitOffsets = true;
    public boolean reportLatest = true;

    /** True when batches' ends are committed under consumerGroup. */
    public boolean commits() {
        return consumerGroup != null && commitOffsets;
    }

    public String root() {
        return read.paths.get(0);
    }

    public String broker() {
        return read.brokers.get(0);
    }

    /** parse_duration_ms: 500ms, 10s, 2m, 1h, 1d or plain milliseconds. */
    public static long parseDurationMs(String name, String value) {
        String text = value.strip().toLowerCase(Locale.ROOT);
        Matcher m = DURATION.matcher(text);
        if (!m.matches()) {
            throw new OptionError("option " + name + " must be a duration like 500ms, 10s, 2m, 1h (or milliseconds), got "
                    + Repr.of(value));
        }
        String unit = m.group(2);
        long mult = unit == null || unit.equals("ms") ? 1 : unit.equals("s") ? 1000
                : unit.equals("m") || unit.equals("min") ? 60_000 : unit.equals("h") ? 3_600_000 : 86_400_000;
        return Long.parseLong(m.group(1)) * mult;
    }

    /** FilterAPI.buildSubscriptionData: "*" or empty = all (null), else the tags split on "||". */
    static Set<String> parseSubExpression(String text) {
        String expr = text == null ? "" : text.strip();
        if (expr.isEmpty() || expr.equals("*")) return null;
        Set<String> tags = new LinkedHashSet<>();
        for (String t : expr.split("\\|\\|", -1)) if (!t.strip().isEmpty()) tags.add(t.strip());
        if (tags.isEmpty()) {
            throw new OptionError("option subExpression " + Repr.of(text) + " names no tag; use e.g. 'TagA || TagB' or '*'");
        }
        return tags;
    }

    public static RmqStreamOptions parse(Map<String, String> options) {
        Map<String, String> opts = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : options.entrySet()) {
            opts.put(e.getKey().toLowerCase(Locale.ROOT), e.getValue() == null ? "" : e.getValue());
        }
        opts = KafkaNames.apply(opts, "stream");
        for (String key : BATCH_ONLY) {
            if (opts.containsKey(key)) throw new OptionError("option " + key + " is for batch reads; a stream has no end");
        }
        Map<String, String> ours = new LinkedHashMap<>();
        for (String key : Contract.STREAM_OPTIONS.keySet()) {
            if (opts.containsKey(key)) ours.put(key, opts.remove(key));
        }
        RmqStreamOptions o = new RmqStreamOptions();
        o.read = RmqOptions.parse(opts, "stream");
        if (o.read.paths.size() != 1) {
            throw new OptionError("a stream reads one store; got " + o.read.paths.size() + " paths ("
                    + String.join(", ", o.read.paths) + ")");
        }
        if (!o.read.topicMode()) throw new OptionError("a stream needs one of the options topics, topicPattern or queues");
        if (ours.containsKey("startingoffsets")) {
            String text = ours.get("startingoffsets").strip();
            String low = text.toLowerCase(Locale.ROOT);
            o.starting = low.equals(RmqOptions.EARLIEST) || low.equals(RmqOptions.LATEST) || low.equals(GROUP) ? low
                    : RmqOptions.parseOffsets("startingOffsets", text);
        }
        if (ours.containsKey("startingoffsetsfallback")) {
            String fb = ours.get("startingoffsetsfallback").strip().toLowerCase(Locale.ROOT);
            if (!fb.equals(RmqOptions.EARLIEST) && !fb.equals(RmqOptions.LATEST) && !fb.equals(NONE)) {
                throw new OptionError("option startingOffsetsFallback must be earliest, latest or none, got "
                        + Repr.of(fb));
            }
            o.startingFallback = fb;
        }
        if (ours.containsKey("startingtimestamp")) {
            if (ours.containsKey("startingoffsets")) {
                throw new OptionError("use either startingOffsets or startingTimestamp, not both");
            }
            if (o.read.startingByTimestamp != null) {
                throw new OptionError("use either startingOffsetsByTimestamp or startingTimestamp, not both");
            }
            String raw = ours.get("startingtimestamp");
            long ts;
            try {
                ts = Long.parseLong(raw.strip());
            } catch (NumberFormatException e) {
                throw new OptionError("option startingTimestamp must be epoch milliseconds, got " + Repr.of(raw));
            }
            if (ts < 0) throw new OptionError("option startingTimestamp must be >= 0, got " + ts);
            o.startingTimestamp = ts;
        }
        if (ours.containsKey("maxmessagespertrigger")) {
            o.maxMessages = positive("maxMessagesPerTrigger", ours.get("maxmessagespertrigger"));
        }
        if (ours.containsKey("maxbytespertrigger")) o.maxBytes = positive("maxBytesPerTrigger", ours.get("maxbytespertrigger"));
        if (ours.containsKey("minmessagespertrigger")) {
            o.minMessages = positive("minMessagesPerTrigger", ours.get("minmessagespertrigger"));
        }
        if (ours.containsKey("maxtriggerdelay")) {
            if (!ours.containsKey("minmessagespertrigger")) {
                throw new OptionError("option maxTriggerDelay needs minMessagesPerTrigger");
            }
            o.maxTriggerDelayMs = parseDurationMs("maxTriggerDelay", ours.get("maxtriggerdelay"));
        }
        if (o.minMessages != null && o.maxMessages != null && o.minMessages > o.maxMessages) {
            throw new OptionError("minMessagesPerTrigger (" + o.minMessages + ") is larger than maxMessagesPerTrigger ("
                    + o.maxMessages + ")");
        }
        if (ours.containsKey("subexpression")) {
            o.subTags = parseSubExpression(ours.get("subexpression"));
            String s = ours.get("subexpression").strip();
            o.subExpression = s.isEmpty() ? "*" : s;
        }
        if (ours.containsKey("consumergroup")) {
            String group = ours.get("consumergroup").strip();
            if (group.isEmpty() || group.contains("@")) {
                throw new OptionError("option consumerGroup must be a non-empty name without '@', got " + Repr.of(group));
            }
            o.consumerGroup = group;
        }
        if (ours.containsKey("commitoffsets")) {
            o.commitOffsets = RmqOptions.parseBool("commitOffsets", ours.get("commitoffsets"));
        }
        if (o.consumerGroup != null) {
            if (io.rmqsource.io.StoreFiles.isUri(o.root())) {
                throw new OptionError("option consumerGroup commits into the store's config/consumerOffset.json; "
                        + o.root() + " is on another file system, read-only to rmqsource");
            }
        }
        if (GROUP.equals(o.starting) && o.consumerGroup == null) {
            throw new OptionError("startingOffsets=group needs the option consumerGroup");
        }
        if (ours.containsKey("reportlatestoffset")) {
            o.reportLatest = RmqOptions.parseBool("reportLatestOffset", ours.get("reportlatestoffset"));
        }
        return o;
    }

    private static long positive(String name, String value) {
        return RmqOptions.parseInt(name, value, 1, Long.MAX_VALUE);
    }
}
