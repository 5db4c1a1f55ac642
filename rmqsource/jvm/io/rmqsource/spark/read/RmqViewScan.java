package io.rmqsource.spark.read;

import io.rmqsource.errors.CorruptRecordError;
import io.rmqsource.errors.OptionError;
import io.rmqsource.format.TraceData;
import io.rmqsource.spark.Contract;
import io.rmqsource.spark.RmqOptions;
import io.rmqsource.store.Segment;
import io.rmqsource.store.StoreReader;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * {@code option("view", "dlq" | "retry" | "trace")} (docs/views.md; twin of rmqsource/spark/views.py).
 *
 * <p>Each view is a messages read of some of RocketMQ's own topics, chosen by {@link RmqOptions} ({@code %DLQ%...},
 * {@code %RETRY%...} or {@code RMQ_SYS_TRACE_TOPIC}): planned and partitioned by {@link RmqBatch} as any messages
 * read, so the rows are read on the executors; each task's columnar batches are turned into the view's rows:
 * <ul>
 * <li>dlq / retry: the message columns asked for, then {@code group}, {@code originTopic}, {@code originMsgId}
 *     from the topic name and the properties the broker set (message filters push down as in a messages read;
 *     filters on the three added columns go back to Spark);</li>
 * <li>trace: one row per event of each trace message's body ({@link TraceData}), then where that message is
 *     stored (no filter pushed: the view's {@code topic} is the traced message's, not the topic read).</li>
 * </ul>
 * No aggregate is pushed (a count of a trace view is a count of events, not of messages).
 */
public final class RmqViewScan implements Scan {
    static final Set<String> VIEWS = Set.of("dlq", "retry", "trace");
    static final List<String> GROUP_TOPIC_COLUMNS = List.of("group", "originTopic", "originMsgId");
    /** The message columns a trace row is made of. */
    static final List<String> TRACE_MESSAGE_COLUMNS = List.of("topic", "queueId", "queueOffset", "commitLogOffset",
            "storeTimestamp", "broker", "body");

    /** The view these read options ask for when it is read here (dlq, retry, trace), else null; before parsing. */
    public static String requested(Map<String, String> options) {
        String v = options.get("view");
        if (v == null) return null;
        v = v.strip().toLowerCase(java.util.Locale.ROOT);
        return VIEWS.contains(v) ? v : null;
    }

    /** The table schema of these read options: a metadata table's columns, the view's, or the message columns. */
    public static StructType tableSchema(Map<String, String> options) {
        String table = RmqMetadataScan.requested(options);
        if (table != null) return Contract.metadataSchema(table);
        String v = requested(options);
        if (v != null) return Contract.viewSchema(v);
        if (RmqTransactionsScan.requested(options)) return RmqTransactionsScan.SCHEMA;
        return RmqTimersScan.requested(options) ? RmqTimersScan.SCHEMA : Contract.SCHEMA;
    }

    /** Pushes the filters the view's messages read enforces; returns those Spark must evaluate. */
    static Filter[] push(String view, PushedFilters pushed, Filter[] filters) {
        if (view.equals("trace")) return filters;
        List<Filter> ours = new ArrayList<>();
        List<Filter> derived = new ArrayList<>();
        for (Filter f : filters) {
            boolean onDerived = Arrays.stream(f.references()).anyMatch(GROUP_TOPIC_COLUMNS::contains);
            (onDerived ? derived : ours).add(f);
        }
        List<Filter> rejected = new ArrayList<>(List.of(pushed.push(ours.toArray(new Filter[0]))));
        rejected.addAll(derived);
        return rejected.toArray(new Filter[0]);
    }

    private final Map<String, String> options;
    private final String view;
    private final PushedFilters pushed;
    private final Filter[] pushedFilters;
    private final StructType schema;

    RmqViewScan(Map<String, String> options, String view, PushedFilters pushed, Filter[] pushedFilters,
                StructType schema) {
        this.options = options;
        this.view = view;
        this.pushed = pushed;
        this.pushedFilters = pushedFilters;
        this.schema = schema;
    }

    @Override
    public StructType readSchema() {
        return schema;
    }

    @Override
    public String description() {
        String f = Arrays.stream(pushedFilters).map(Filter::toString).collect(Collectors.joining(", "));
        return "RmqScan(JVM, " + view + " view) PushedFilters: [" + f + "], ReadSchema: " + schema.catalogString();
    }

    /** The message columns the read under the view decodes for the view's columns (message_columns in views.py). */
    static StructType messageSchema(String view, StructType viewSchema) {
        List<String> names = new ArrayList<>();
        if (view.equals("trace")) {
            names.addAll(TRACE_MESSAGE_COLUMNS);
        } else {
            boolean derived = false;
            for (String c : viewSchema.fieldNames()) {
                if (GROUP_TOPIC_COLUMNS.contains(c)) derived = true;
                else names.add(c);
            }
            if (derived) for (String c : List.of("topic", "properties")) if (!names.contains(c)) names.add(c);
        }
        StructType out = new StructType();
        for (String n : names) out = out.add(Contract.SCHEMA.apply(n));
        return out;
    }

    @Override
    public Batch toBatch() {
        RmqOptions opts = RmqOptions.parse(options);     // chooses the view's topics (RmqOptions.applyView)
        StructType messages = messageSchema(view, schema);
        RmqBatch batch = new RmqBatch(new ReadSpec(opts, pushed, messages), null);
        return new Batch() {
            @Override
            public InputPartition[] planInputPartitions() {
                return batch.planInputPartitions();
            }

            @Override
            public PartitionReaderFactory createReaderFactory() {
                return new ViewReaderFactory(batch.createReaderFactory(), view, schema, messages);
            }
        };
    }

    /** A stream of a view is refused (RmqOptions.parse in stream mode says why, in one line). */
    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
        RmqOptions.parse(options, "stream");
        throw new OptionError("option view=" + view + " is for batch reads (spark.read)");
    }

    @Override
    public CustomMetric[] supportedCustomMetrics() {
        return RmqMetrics.all();
    }

    @Override
    public ColumnarSupportMode columnarSupportMode() {
        return ColumnarSupportMode.UNSUPPORTED;
    }

    // ------------------------------------------------------------------ task side

    /** Row readers of the view over the columnar readers of the messages read. */
    static final class ViewReaderFactory implements PartitionReaderFactory {
        private static final long serialVersionUID = 1L;
        private final PartitionReaderFactory messages;
        private final String view;
        private final StructType schema;
        private final StructType messageSchema;

        ViewReaderFactory(PartitionReaderFactory messages, String view, StructType schema, StructType messageSchema) {
            this.messages = messages;
            this.view = view;
            this.schema = schema;
            this.messageSchema = messageSchema;
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            PartitionReader<ColumnarBatch> batches = messages.createColumnarReader(partition);
            StoreRef store = ((RmqInputPartition) partition).store;
            return view.equals("trace") ? new TraceRows(batches, schema, messageSchema, store)
                    : new GroupTopicRows(batches, schema, messageSchema, RmqOptions.groupTopicPrefix(view));
        }
    }

    /** The rows of one partition: each message row of the batches gives zero or more view rows. */
    private abstract static class ViewRows implements PartitionReader<InternalRow> {
        private final PartitionReader<ColumnarBatch> batches;
        protected final StructType schema;
        protected final StructType messageSchema;
        private final UnsafeProjection out;
        private ColumnarBatch batch;
        private int next;
        private final List<Object[]> pending = new ArrayList<>();
        private int pendingAt;
        private InternalRow current;

        ViewRows(PartitionReader<ColumnarBatch> batches, StructType schema, StructType messageSchema) {
            this.batches = batches;
            this.schema = schema;
            this.messageSchema = messageSchema;
            this.out = UnsafeProjection.create(schema);
        }

        /** Appends the view's rows (values in the order of {@code schema}) of one message row to {@code rows}. */
        protected abstract void rowsOf(InternalRow message, List<Object[]> rows);

        @Override
        public boolean next() throws IOException {
            while (pendingAt >= pending.size()) {
                pending.clear();
                pendingAt = 0;
                while (batch == null || next >= batch.numRows()) {
                    if (!batches.next()) return false;
                    batch = batches.get();
                    next = 0;
                }
                rowsOf(batch.getRow(next++), pending);
            }
            // copied into the projection's buffer: the batch's vectors are reused by the next batch
            current = out.apply(new GenericInternalRow(pending.get(pendingAt++)));
            return true;
        }

        @Override
        public InternalRow get() {
            return current;
        }

        @Override
        public void close() throws IOException {
            batches.close();
        }

        @Override
        public CustomTaskMetric[] currentMetricsValues() {
            return batches.currentMetricsValues();
        }

        protected static UTF8String utf8(String s) {
            return s == null ? null : UTF8String.fromString(s);
        }

        protected Object value(InternalRow message, int j) {
            return message.isNullAt(j) ? null : message.get(j, messageSchema.fields()[j].dataType());
        }
    }

    /** dlq / retry: the message columns, then group, originTopic, originMsgId (twin of _group_topic_rows). */
    private static final class GroupTopicRows extends ViewRows {
        private final String prefix;
        /** Per view column: its index among the message columns, or -1 (derived). */
        private final int[] source;
        private final int topicAt;
        private final int propertiesAt;

        GroupTopicRows(PartitionReader<ColumnarBatch> batches, StructType schema, StructType messageSchema,
                       String prefix) {
            super(batches, schema, messageSchema);
            this.prefix = prefix;
            List<String> names = List.of(messageSchema.fieldNames());
            StructField[] fields = schema.fields();
            source = new int[fields.length];
            for (int c = 0; c < fields.length; c++) {
                source[c] = GROUP_TOPIC_COLUMNS.contains(fields[c].name()) ? -1 : names.indexOf(fields[c].name());
            }
            topicAt = names.indexOf("topic");
            propertiesAt = names.indexOf("properties");
        }

        @Override
        protected void rowsOf(InternalRow message, List<Object[]> rows) {
            Object[] values = new Object[source.length];
            String group = null;
            String originTopic = null;
            String originMsgId = null;
            if (propertiesAt >= 0) {     // a derived column is asked for
                String topic = message.getUTF8String(topicAt).toString();
                MapData props = message.isNullAt(propertiesAt) ? null : message.getMap(propertiesAt);
                group = groupOf(prefix, topic, property(props, "ORIGIN_GROUP"));
                originTopic = originTopicOf(prefix, topic, group, property(props, "RETRY_TOPIC"));
                originMsgId = property(props, "ORIGIN_MESSAGE_ID");
            }
            String[] names = schema.fieldNames();
            for (int c = 0; c < source.length; c++) {
                if (source[c] >= 0) {
                    values[c] = value(message, source[c]);
                } else {
                    values[c] = utf8(switch (names[c]) {
                        case "group" -> group;
                        case "originTopic" -> originTopic;
                        default -> originMsgId;
                    });
                }
            }
            rows.add(values);
        }

        /** The value of the first entry named {@code key} (map_lookup "first"), or null. */
        private static String property(MapData props, String key) {
            if (props == null) return null;
            ArrayData keys = props.keyArray();
            ArrayData values = props.valueArray();
            for (int i = 0; i < props.numElements(); i++) {
                if (!keys.isNullAt(i) && keys.getUTF8String(i).toString().equals(key)) {
                    return values.isNullAt(i) ? null : values.getUTF8String(i).toString();
                }
            }
            return null;
        }
    }

    /** ORIGIN_GROUP when set (POP retries), else the topic name after its prefix, up to a {@code +}. */
    static String groupOf(String prefix, String topic, String originGroup) {
        if (originGroup != null) return originGroup;
        String name = topic.startsWith(prefix) ? topic.substring(prefix.length()) : topic;
        int plus = name.indexOf('+');
        return plus >= 0 ? name.substring(0, plus) : name;
    }

    /**
     * RETRY_TOPIC when set (a consumer's send-back), else what follows {@code <group>_} or {@code <group>+} in a
     * POP retry topic's name; null when neither says.
     */
    static String originTopicOf(String prefix, String topic, String group, String retryTopic) {
        if (retryTopic != null) return retryTopic;
        String name = topic.startsWith(prefix) ? topic.substring(prefix.length()) : topic;
        if (name.length() > group.length() + 1 && name.startsWith(group)) {
            char sep = name.charAt(group.length());
            if (sep == '_' || sep == '+') return name.substring(group.length() + 1);
        }
        return null;
    }

    /** trace: one row per event of each trace message, then where it is stored (twin of _trace_rows). */
    private static final class TraceRows extends ViewRows {
        private final StoreRef store;
        private final String[] names;
        private final int topicAt;
        private final int queueIdAt;
        private final int queueOffsetAt;
        private final int phyAt;
        private final int storeTsAt;
        private final int brokerAt;
        private final int bodyAt;

        TraceRows(PartitionReader<ColumnarBatch> batches, StructType schema, StructType messageSchema, StoreRef store) {
            super(batches, schema, messageSchema);
            this.store = store;
            this.names = schema.fieldNames();
            topicAt = messageSchema.fieldIndex("topic");
            queueIdAt = messageSchema.fieldIndex("queueId");
            queueOffsetAt = messageSchema.fieldIndex("queueOffset");
            phyAt = messageSchema.fieldIndex("commitLogOffset");
            storeTsAt = messageSchema.fieldIndex("storeTimestamp");
            brokerAt = messageSchema.fieldIndex("broker");
            bodyAt = messageSchema.fieldIndex("body");
        }

        @Override
        protected void rowsOf(InternalRow message, List<Object[]> rows) {
            byte[] body = message.isNullAt(bodyAt) ? new byte[0] : message.getBinary(bodyAt);
            long phy = message.getLong(phyAt);
            List<TraceData.Event> events;
            try {
                events = TraceData.parse(new String(body, StandardCharsets.UTF_8));   // new String(body, UTF_8), as the client
            } catch (CorruptRecordError e) {
                throw new CorruptRecordError(e.getMessage(), commitLogFile(phy), phy);
            }
            for (TraceData.Event e : events) {
                Object[] values = new Object[names.length];
                for (int c = 0; c < names.length; c++) values[c] = column(names[c], e, message);
                rows.add(values);
            }
        }

        private Object column(String name, TraceData.Event e, InternalRow m) {
            return switch (name) {
                case "traceType" -> utf8(e.traceType);
                case "timestamp" -> e.timestampMs == null ? null : e.timestampMs * 1000L;
                case "regionId" -> utf8(e.regionId);
                case "group" -> utf8(e.group);
                case "topic" -> utf8(e.topic);
                case "msgId" -> utf8(e.msgId);
                case "offsetMsgId" -> utf8(e.offsetMsgId);
                case "tags" -> utf8(e.tags);
                case "keys" -> e.keys == null ? null : new GenericArrayData(e.keys.stream().map(UTF8String::fromString).toArray());
                case "storeHost" -> utf8(e.storeHost);
                case "clientHost" -> utf8(e.clientHost);
                case "bodyLength" -> e.bodyLength;
                case "costTime" -> e.costTime;
                case "msgType" -> utf8(e.msgType);
                case "success" -> e.success;
                case "requestId" -> utf8(e.requestId);
                case "retryTimes" -> e.retryTimes;
                case "contextCode" -> e.contextCode;
                case "transactionId" -> utf8(e.transactionId);
                case "transactionState" -> utf8(e.transactionState);
                case "fromTransactionCheck" -> e.fromTransactionCheck;
                case "traceTopic" -> value(m, topicAt);
                case "traceQueueId" -> value(m, queueIdAt);
                case "traceQueueOffset" -> value(m, queueOffsetAt);
                case "traceCommitLogOffset" -> value(m, phyAt);
                case "traceStoreTimestamp" -> value(m, storeTsAt);
                case "broker" -> value(m, brokerAt);
                default -> throw new IllegalStateException("no trace column " + name);
            };
        }

        /** The CommitLog file holding {@code phy} (named in an error only). */
        private String commitLogFile(long phy) {
            try (StoreReader r = new StoreReader(store.files, store.root, store.config, store.commitLogMax)) {
                Segment seg = r.commitLog.segments.find(phy);
                return seg != null ? seg.path : store.root;
            }
        }
    }
}
