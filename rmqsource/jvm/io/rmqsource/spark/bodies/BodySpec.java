package io.rmqsource.spark.bodies;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.rmqsource.errors.OptionError;
import io.rmqsource.errors.Repr;
import io.rmqsource.spark.Contract;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The typed-body options of a message read (docs/bodies.md), parsed once on the driver: the format, the
 * schema of each topic (texts read, files loaded) and the decoded columns.  Plain values, sent to the
 * tasks with the read.
 */
public final class BodySpec implements Serializable {
    private static final long serialVersionUID = 1L;
    public static final String JSON = "json", AVRO = "avro", TEXT = "text";
    public static final String FAIL = "fail", NULL = "null", SKIP = "skip";
    public static final String DECODE_ERROR = "_decodeError";
    static final List<String> FORMATS = List.of(JSON, AVRO, TEXT);
    static final List<String> ON_BAD = List.of(FAIL, NULL, SKIP);
    private static final List<String> OTHER_OPTIONS = List.of("bodyschema", "bodyschemafile", "bodyschemabytopic",
            "bodywireformat", "bodycolumnprefix", "onbadrecord");

    public final String format;
    /** bodyWireFormat=confluent: a 5-byte header (0, then the schema id) is checked and skipped. */
    public final boolean confluent;
    public final String onBadRecord;
    public final String prefix;
    /** The session time zone (JSON timestamps, as from_json). */
    public final String timeZone;
    /** The schema every topic not in {@link #byTopic} uses (its text: a DDL / Spark JSON, or Avro JSON), or null. */
    final TopicSchema fallback;
    final Map<String, TopicSchema> byTopic;
    /** The decoded columns (prefixed, nullable), without {@link #DECODE_ERROR}. */
    public final StructType decoded;

    /** One schema: its text (as given), its Spark struct, and where its fields go among the decoded columns. */
    static final class TopicSchema implements Serializable {
        private static final long serialVersionUID = 1L;
        final String text;
        final StructType struct;
        int[] columns;

        TopicSchema(String text, StructType struct) {
            this.text = text;
            this.struct = struct;
        }
    }

    private BodySpec(String format, boolean confluent, String onBadRecord, String prefix, String timeZone,
                     TopicSchema fallback, Map<String, TopicSchema> byTopic, StructType decoded) {
        this.format = format;
        this.confluent = confluent;
        this.onBadRecord = onBadRecord;
        this.prefix = prefix;
        this.timeZone = timeZone;
        this.fallback = fallback;
        this.byTopic = byTopic;
        this.decoded = decoded;
    }

    /** The body options of {@code options} (any case), or null when bodyFormat is not given. */
    public static BodySpec parse(Map<String, String> options) {
        Map<String, String> opts = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : options.entrySet()) {
            opts.put(e.getKey().toLowerCase(Locale.ROOT), e.getValue() == null ? "" : e.getValue());
        }
        String rawFormat = opts.get("bodyformat");
        if (rawFormat == null || rawFormat.isBlank()) {
            for (String k : OTHER_OPTIONS) {
                if (opts.containsKey(k)) throw new OptionError("option " + Contract.OPTIONS.get(k) + " needs option bodyFormat");
            }
            return null;
        }
        String format = rawFormat.strip().toLowerCase(Locale.ROOT);
        if (format.equals("protobuf")) {
            throw new OptionError("bodyFormat=protobuf is not supported yet; decode with from_protobuf(body, ...)");
        }
        if (!FORMATS.contains(format)) {
            throw new OptionError("option bodyFormat must be one of json, avro, text, got " + Repr.of(rawFormat));
        }
        if (opts.containsKey("metadata")) {
            throw new OptionError("option bodyFormat decodes message bodies; it does not apply to option metadata");
        }
        String view = opts.getOrDefault("view", "messages").strip().toLowerCase(Locale.ROOT);
        if (!view.equals("messages")) {
            throw new OptionError("option bodyFormat decodes message bodies; it does not apply to option view=" + view);
        }
        String wire = opts.getOrDefault("bodywireformat", "plain").strip().toLowerCase(Locale.ROOT);
        if (!wire.equals("plain") && !wire.equals("confluent")) {
            throw new OptionError("option bodyWireFormat must be plain or confluent, got "
                    + Repr.of(opts.get("bodywireformat")));
        }
        String onBad = opts.getOrDefault("onbadrecord", FAIL).strip().toLowerCase(Locale.ROOT);
        if (!ON_BAD.contains(onBad)) {
            throw new OptionError("option onBadRecord must be one of fail, null, skip, got " + Repr.of(opts.get("onbadrecord")));
        }
        String prefix = opts.getOrDefault("bodycolumnprefix", "");
        String schema = opts.get("bodyschema");
        String file = opts.get("bodyschemafile");
        String perTopic = opts.get("bodyschemabytopic");
        if (schema != null && file != null) {
            throw new OptionError("use at most one of the options bodySchema and bodySchemaFile");
        }
        TopicSchema fallback = null;
        Map<String, TopicSchema> byTopic = new LinkedHashMap<>();
        if (format.equals(TEXT)) {
            if (schema != null || file != null || perTopic != null) {
                throw new OptionError("bodyFormat=text takes no bodySchema, bodySchemaFile or bodySchemaByTopic "
                        + "(its one column is bodyText)");
            }
            fallback = new TopicSchema("", new StructType().add("bodyText", "string", true));
        } else {
            if (schema == null && file == null && perTopic == null) {
                throw new OptionError("bodyFormat=" + format + " needs the body's schema: option bodySchema, "
                        + "bodySchemaFile or bodySchemaByTopic");
            }
            if (file != null) schema = BodySchemas.readFile(file);
            if (schema != null) fallback = new TopicSchema(schema, BodySchemas.struct(format, schema, "bodySchema"));
            if (perTopic != null) {
                for (Map.Entry<String, String> e : topicTexts(perTopic).entrySet()) {
                    byTopic.put(e.getKey(), new TopicSchema(e.getValue(),
                            BodySchemas.struct(format, e.getValue(), "bodySchemaByTopic (topic " + e.getKey() + ")")));
                }
            }
        }
        List<TopicSchema> all = new ArrayList<>();
        if (fallback != null) all.add(fallback);
        all.addAll(byTopic.values());
        StructType decoded = BodySchemas.union(all, prefix, onBad.equals(NULL));
        return new BodySpec(format, wire.equals("confluent"), onBad, prefix, SQLConf.get().sessionLocalTimeZone(),
                fallback, byTopic, decoded);
    }

    private static Map<String, String> topicTexts(String text) {
        JsonNode doc;
        try {
            doc = new ObjectMapper().readTree(text);
        } catch (Exception e) {
            doc = null;
        }
        if (doc == null || !doc.isObject()) {
            throw new OptionError("option bodySchemaByTopic must be a JSON object of topic -> schema text, got "
                    + Repr.of(text));
        }
        Map<String, String> out = new LinkedHashMap<>();
        for (Map.Entry<String, JsonNode> e : doc.properties()) {
            JsonNode v = e.getValue();
            // a schema given as a JSON value (an Avro record, a Spark struct) is taken as its text
            out.put(e.getKey(), v.isTextual() ? v.asText() : v.toString());
        }
        return out;
    }

    /** The schema of {@code topic}'s bodies, or null (its decoded columns are null). */
    TopicSchema schemaOf(String topic) {
        TopicSchema s = byTopic.get(topic);
        return s != null ? s : fallback;
    }

    /** With onBadRecord=null, the {@link #DECODE_ERROR} column. */
    public boolean errorColumn() {
        return onBadRecord.equals(NULL);
    }

    /** The read's columns: the message columns, the decoded ones, then {@link #DECODE_ERROR} when onBadRecord=null. */
    public StructType tableSchema() {
        StructType out = Contract.SCHEMA;
        for (StructField f : decoded.fields()) out = out.add(f);
        if (errorColumn()) out = out.add(DECODE_ERROR, "string", true);
        return out;
    }

    /** Whether {@code name} is a column of the decoding (a decoded column or {@link #DECODE_ERROR}). */
    public boolean isDecodedColumn(String name) {
        return decoded.getFieldIndex(name).isDefined() || (errorColumn() && name.equals(DECODE_ERROR));
    }
}
