package io.rmqsource.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.rmqsource.store.StoreConfig;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.types.StructType;

/**
 * contract.json, the one definition of columns, option names and MessageStoreConfig keys
 * shared with the Python path (tests/test_contract.py checks the Python side against it).
 */
public final class Contract {
    /** Output columns in order, with their Spark DDL types. */
    public static final List<String[]> COLUMNS;
    /** Our own option names: lower-case -> documented name. */
    public static final Map<String, String> OPTIONS;
    /** Options only streams take (a batch read names them in its error): lower-case -> documented name. */
    public static final Map<String, String> STREAM_OPTIONS;
    /** MessageStoreConfig keys also accepted as options: lower-case -> RocketMQ name. */
    public static final Map<String, String> STORE_KEYS;
    /** The sink's options: lower-case -> documented name. */
    public static final Map<String, String> SINK_OPTIONS;
    /** Options Spark's writers pass to every sink (DataStreamWriter.queryName): accepted, ignored. */
    public static final Map<String, String> SPARK_SINK_OPTIONS;
    /** Columns the sink writes, in order. */
    public static final List<String> SINK_COLUMNS;
    /** Columns the sink writes only with preserveStoreFields (read-only otherwise). */
    public static final List<String> SINK_STORE_FIELD_COLUMNS;
    /** The sink's refusal texts by name (the Python sink's SINK_ERRORS). */
    public static final Map<String, String> SINK_ERRORS;
    public static final StructType SCHEMA;
    /**
     * viewColumns: per option view, its own columns (name, Spark DDL type); timers, dlq and retry put them
     * after the message columns, trace has only its own (twin of VIEW_SCHEMAS in rmqsource/spark/schema.py).
     */
    public static final Map<String, List<String[]>> VIEW_COLUMNS;
    private static final Map<String, StructType> VIEW_SCHEMAS;
    /**
     * metadataColumns: per option metadata (queues, topics, groups, segments, indexes), all its columns in order
     * (name, Spark DDL type), broker and storePath last (twin of METADATA_SCHEMAS in rmqsource/spark/schema.py).
     */
    public static final Map<String, List<String[]>> METADATA_COLUMNS;
    private static final Map<String, StructType> METADATA_SCHEMAS;

    static {
        try (InputStream in = Contract.class.getResourceAsStream("contract.json")) {
            if (in == null) throw new IllegalStateException("contract.json is missing from the rmqsource jar");
            JsonNode doc = new ObjectMapper().readTree(in);
            List<String[]> cols = new ArrayList<>();
            StringBuilder ddl = new StringBuilder();
            for (JsonNode c : doc.get("columns")) {
                cols.add(new String[] {c.get(0).asText(), c.get(1).asText()});
                if (ddl.length() > 0) ddl.append(", ");
                ddl.append('`').append(c.get(0).asText()).append("` ").append(c.get(1).asText());
            }
            Map<String, List<String[]>> viewCols = new LinkedHashMap<>();
            Map<String, StructType> viewSchemas = new LinkedHashMap<>();
            for (Map.Entry<String, JsonNode> e : doc.get("viewColumns").properties()) {
                List<String[]> own = new ArrayList<>();
                // a trace row is an event, not a message: it has no message columns
                StringBuilder viewDdl = new StringBuilder(e.getKey().equals("trace") ? "" : ddl);
                for (JsonNode c : e.getValue()) {
                    own.add(new String[] {c.get(0).asText(), c.get(1).asText()});
                    if (viewDdl.length() > 0) viewDdl.append(", ");
                    viewDdl.append('`').append(c.get(0).asText()).append("` ").append(c.get(1).asText());
                }
                viewCols.put(e.getKey(), Collections.unmodifiableList(own));
                viewSchemas.put(e.getKey(), StructType.fromDDL(viewDdl.toString()));
            }
            Map<String, List<String[]>> metaCols = new LinkedHashMap<>();
            Map<String, StructType> metaSchemas = new LinkedHashMap<>();
            for (Map.Entry<String, JsonNode> e : doc.get("metadataColumns").properties()) {
                List<String[]> all = new ArrayList<>();
                StringBuilder metaDdl = new StringBuilder();
                for (JsonNode c : e.getValue()) {
                    all.add(new String[] {c.get(0).asText(), c.get(1).asText()});
                    if (metaDdl.length() > 0) metaDdl.append(", ");
                    metaDdl.append('`').append(c.get(0).asText()).append("` ").append(c.get(1).asText());
                }
                metaCols.put(e.getKey(), Collections.unmodifiableList(all));
                metaSchemas.put(e.getKey(), StructType.fromDDL(metaDdl.toString()));
            }
            Map<String, String> opts = new LinkedHashMap<>();
            for (Map.Entry<String, JsonNode> e : doc.get("options").properties()) {
                opts.put(e.getKey(), e.getValue().asText());
            }
            Map<String, String> stream = new LinkedHashMap<>();
            for (Map.Entry<String, JsonNode> e : doc.get("streamOptions").properties()) {
                stream.put(e.getKey(), e.getValue().asText());
            }
            Map<String, String> sink = new LinkedHashMap<>();
            for (Map.Entry<String, JsonNode> e : doc.get("sinkOptions").properties()) {
                sink.put(e.getKey(), e.getValue().asText());
            }
            Map<String, String> sparkSink = new LinkedHashMap<>();
            for (Map.Entry<String, JsonNode> e : doc.get("sparkSinkOptions").properties()) {
                sparkSink.put(e.getKey(), e.getValue().asText());
            }
            List<String> sinkColumns = new ArrayList<>();
            for (JsonNode c : doc.get("sinkColumns")) sinkColumns.add(c.asText());
            List<String> storeFields = new ArrayList<>();
            for (JsonNode c : doc.get("sinkStoreFieldColumns")) storeFields.add(c.asText());
            Map<String, String> sinkErrors = new LinkedHashMap<>();
            for (Map.Entry<String, JsonNode> e : doc.get("sinkErrors").properties()) {
                sinkErrors.put(e.getKey(), e.getValue().asText());
            }
            Map<String, String> keys = new LinkedHashMap<>();
            List<String> names = new ArrayList<>();
            for (JsonNode k : doc.get("storeConfigKeys")) {
                keys.put(k.asText().toLowerCase(java.util.Locale.ROOT), k.asText());
                names.add(k.asText());
            }
            if (!names.equals(StoreConfig.keyNames())) {
                throw new IllegalStateException("contract.json storeConfigKeys differ from StoreConfig's keys: "
                        + names + " vs " + StoreConfig.keyNames());
            }
            COLUMNS = Collections.unmodifiableList(cols);
            OPTIONS = Collections.unmodifiableMap(opts);
            STREAM_OPTIONS = Collections.unmodifiableMap(stream);
            STORE_KEYS = Collections.unmodifiableMap(keys);
            SINK_OPTIONS = Collections.unmodifiableMap(sink);
            SPARK_SINK_OPTIONS = Collections.unmodifiableMap(sparkSink);
            SINK_COLUMNS = Collections.unmodifiableList(sinkColumns);
            SINK_STORE_FIELD_COLUMNS = Collections.unmodifiableList(storeFields);
            SINK_ERRORS = Collections.unmodifiableMap(sinkErrors);
            SCHEMA = StructType.fromDDL(ddl.toString());
            VIEW_COLUMNS = Collections.unmodifiableMap(viewCols);
            VIEW_SCHEMAS = Collections.unmodifiableMap(viewSchemas);
            METADATA_COLUMNS = Collections.unmodifiableMap(metaCols);
            METADATA_SCHEMAS = Collections.unmodifiableMap(metaSchemas);
        } catch (IOException e) {
            throw new IllegalStateException("cannot read contract.json: " + e, e);
        }
    }

    private Contract() {
    }

    /** The columns of option view {@code view}: the message columns for messages, else from viewColumns. */
    public static StructType viewSchema(String view) {
        if (view.equals("messages")) return SCHEMA;
        StructType s = VIEW_SCHEMAS.get(view);
        if (s == null) throw new IllegalArgumentException("no view " + view + " in contract.json");
        return s;
    }

    /** The columns of option metadata {@code table} (metadataColumns). */
    public static StructType metadataSchema(String table) {
        StructType s = METADATA_SCHEMAS.get(table);
        if (s == null) throw new IllegalArgumentException("no metadata table " + table + " in contract.json");
        return s;
    }

    public static int columnIndex(String name) {
        for (int i = 0; i < COLUMNS.size(); i++) if (COLUMNS.get(i)[0].equals(name)) return i;
        return -1;
    }
}
