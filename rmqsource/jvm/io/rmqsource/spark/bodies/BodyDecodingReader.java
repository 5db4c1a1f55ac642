package io.rmqsource.spark.bodies;

import io.rmqsource.errors.BodyDecodeError;
import io.rmqsource.spark.Contract;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Map;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Typed bodies on the task side (docs/bodies.md): wraps the reader of the message columns (those asked for,
 * plus the body, the topic and, under onBadRecord=fail, where the message is) and decodes each row's body
 * into the decoded columns asked for; hands Spark batches of exactly the requested columns, in order.  Rows
 * dropped under onBadRecord=skip leave the batch and are counted ({@link #SKIPPED}).
 */
public final class BodyDecodingReader implements PartitionReader<ColumnarBatch> {
    /** The custom metric of the rows dropped under onBadRecord=skip. */
    public static final String SKIPPED = "badRecordsSkipped";
    private static final String[] WHERE = {"topic", "body", "queueId", "queueOffset", "commitLogOffset"};

    private final PartitionReader<ColumnarBatch> inner;
    private final BodySpec spec;
    private final int body, topic, queueId, queueOffset, commitLogOffset;   // columns of the inner batch
    /** Per output column: its inner column (>= 0), or -1 - its decoded column, or ERROR. */
    private final int[] sources;
    private static final int ERROR = Integer.MIN_VALUE;
    /** Per decoded column (of spec.decoded): its vector when asked for, else null. */
    private final OnHeapColumnVector[] decoded;
    private final DataType[] types;
    private final OnHeapColumnVector errors;
    private final ColumnVector[] out;
    private final Map<BodySpec.TopicSchema, Slot> decoders = new IdentityHashMap<>();
    private Slot lastSlot = new Slot(null, null, null, null);
    private final Map<UTF8String, BodySpec.TopicSchema> topics = new HashMap<>();
    private UTF8String lastTopic;
    private UTF8String lastKey;
    private BodySpec.TopicSchema lastSchema;
    private int[] kept;
    private ColumnarBatch batch;
    private long skipped;

    /** The columns the wrapped reader reads for output {@code schema}: its message columns, then those decoding needs. */
    public static StructType innerSchema(StructType schema, BodySpec spec) {
        StructType in = new StructType();
        for (StructField f : schema.fields()) if (!spec.isDecodedColumn(f.name())) in = in.add(f);
        int needed = spec.onBadRecord.equals(BodySpec.FAIL) ? WHERE.length : 2;
        for (int i = 0; i < needed; i++) {
            if (!in.getFieldIndex(WHERE[i]).isDefined()) in = in.add(Contract.SCHEMA.apply(WHERE[i]));
        }
        return in;
    }

    /** {@code inner} reads {@link #innerSchema}({@code schema}); {@code capacity}: its rows per batch. */
    public BodyDecodingReader(PartitionReader<ColumnarBatch> inner, StructType innerSchema, StructType schema,
                              BodySpec spec, int capacity) {
        this.inner = inner;
        this.spec = spec;
        body = innerSchema.fieldIndex("body");
        topic = innerSchema.fieldIndex("topic");
        boolean fail = spec.onBadRecord.equals(BodySpec.FAIL);
        queueId = fail ? innerSchema.fieldIndex("queueId") : -1;
        queueOffset = fail ? innerSchema.fieldIndex("queueOffset") : -1;
        commitLogOffset = fail ? innerSchema.fieldIndex("commitLogOffset") : -1;
        StructField[] dec = spec.decoded.fields();
        decoded = new OnHeapColumnVector[dec.length];
        types = new DataType[dec.length];
        for (int i = 0; i < dec.length; i++) types[i] = dec[i].dataType();
        sources = new int[schema.fields().length];
        OnHeapColumnVector err = null;
        for (int c = 0; c < sources.length; c++) {
            String name = schema.fields()[c].name();
            if (spec.errorColumn() && name.equals(BodySpec.DECODE_ERROR)) {
                err = new OnHeapColumnVector(capacity, schema.fields()[c].dataType());
                sources[c] = ERROR;
            } else if (spec.decoded.getFieldIndex(name).isDefined()) {
                int d = spec.decoded.fieldIndex(name);
                decoded[d] = new OnHeapColumnVector(capacity, types[d]);
                sources[c] = -1 - d;
            } else {
                sources[c] = innerSchema.fieldIndex(name);
            }
        }
        errors = err;
        out = new ColumnVector[sources.length];
        kept = new int[capacity];
    }

    @Override
    public boolean next() throws IOException {
        while (inner.next()) {
            ColumnarBatch in = inner.get();
            int rows = decode(in);
            if (rows == 0 && in.numRows() > 0) continue;
            boolean all = rows == in.numRows();
            for (int c = 0; c < sources.length; c++) {
                int s = sources[c];
                if (s == ERROR) out[c] = errors;
                else if (s < 0) out[c] = decoded[-1 - s];
                else out[c] = all ? in.column(s) : new KeptRowsVector(in.column(s), kept);
            }
            batch = new ColumnarBatch(out, rows);
            return true;
        }
        return false;
    }

    /** Decodes the bodies of {@code in} into the decoded columns; returns the rows kept (their rows in {@link #kept}). */
    private int decode(ColumnarBatch in) {
        int n = in.numRows();
        for (OnHeapColumnVector v : decoded) {
            if (v != null) {
                v.reset();
                v.reserve(n);
            }
        }
        if (errors != null) {
            errors.reset();
            errors.reserve(n);
        }
        if (kept.length < n) kept = new int[n];
        ColumnVector bodies = in.column(body);
        ColumnVector topicColumn = in.column(topic);
        int at = 0;
        for (int r = 0; r < n; r++) {
            BodySpec.TopicSchema schema = schemaOf(topicColumn.getUTF8String(r));
            if (schema == null) {
                putNulls(at);
                kept[at++] = r;
                continue;
            }
            InternalRow row;
            Slot slot;
            try {
                slot = decoder(schema);
                row = decodeBody(slot, bodies, r, at);
            } catch (BodyDecoder.Bad bad) {
                switch (spec.onBadRecord) {
                    case BodySpec.FAIL:
                        throw new BodyDecodeError(bad.getMessage(), spec.format, topicColumn.getUTF8String(r).toString(),
                                in.column(queueId).getInt(r), in.column(queueOffset).getLong(r),
                                in.column(commitLogOffset).getLong(r));
                    case BodySpec.NULL:
                        putNulls(at);
                        if (errors != null) {
                            byte[] why = bad.getMessage().getBytes(StandardCharsets.UTF_8);
                            errors.putByteArray(at, why, 0, why.length);
                        }
                        kept[at++] = r;
                        continue;
                    default:
                        skipped++;
                        continue;
                }
            }
            if (row == DIRECT) {
                for (int d : slot.missing) decoded[d].putNull(at);
            } else if (row == null) {
                putNulls(at);
            } else {
                int[] cols = schema.columns;
                for (int i = 0; i < cols.length; i++) {
                    OnHeapColumnVector v = decoded[cols[i]];
                    if (v != null) RowToVectors.write(v, at, row, i, types[cols[i]]);
                }
                for (int d : slot.missing) decoded[d].putNull(at);
            }
            if (errors != null) errors.putNull(at);
            kept[at++] = r;
        }
        return at;
    }

    /** The body of row {@code r} decoded (after the Confluent header when asked). */
    private InternalRow decodeBody(Slot slot, ColumnVector bodies, int r, int at) {
        byte[] b;
        int off;
        int len;
        if (bodies instanceof WritableColumnVector) {               // inflated bodies: read in place
            UTF8String s = bodies.getUTF8String(r);
            Object base = s.getBaseObject();
            if (base instanceof byte[]) {
                b = (byte[]) base;
                off = (int) (s.getBaseOffset() - Platform.BYTE_ARRAY_OFFSET);
            } else {
                b = s.getBytes();
                off = 0;
            }
            len = s.numBytes();
        } else {
            b = bodies.getBinary(r);
            off = 0;
            len = b.length;
        }
        if (spec.confluent) {
            if (len < 5 || b[off] != 0) {
                throw new BodyDecoder.Bad("the body does not start with Confluent's wire format header (byte 0, then a "
                        + "4-byte schema id)");
            }
            off += 5;
            len -= 5;
        }
        if (slot.decoder.decodeInto(b, off, len, slot.direct, at)) return DIRECT;
        return slot.decoder.decode(b, off, len);
    }

    /** decodeBody's answer when the decoder wrote the row's columns itself. */
    private static final InternalRow DIRECT = new org.apache.spark.sql.catalyst.expressions.GenericInternalRow(0);

    /** The schema of a row's topic: the last one when the same value (batch scans share a topic's value), else looked up. */
    private BodySpec.TopicSchema schemaOf(UTF8String t) {
        if (t == lastTopic) return lastSchema;
        if (lastKey != null && lastKey.equals(t)) {       // the same topic in another value: no hashing
            lastTopic = t;
            return lastSchema;
        }
        BodySpec.TopicSchema s = topics.get(t);
        UTF8String key = t.copy();
        if (s == null && !topics.containsKey(t)) {
            s = spec.schemaOf(t.toString());
            topics.put(key, s);
        }
        lastTopic = t;                // only ever compared by identity: a value reused with other bytes never matches
        lastKey = key;                // (a copy: its bytes do not change)
        lastSchema = s;
        return s;
    }

    /** A schema's decoder, and the decoded columns asked for that the schema lacks (null on its rows). */
    private static final class Slot {
        final BodySpec.TopicSchema schema;
        final BodyDecoder decoder;
        final int[] missing;
        /** Per field of the schema, its decoded column's vector (null when not asked for). */
        final WritableColumnVector[] direct;

        Slot(BodySpec.TopicSchema schema, BodyDecoder decoder, int[] missing, WritableColumnVector[] direct) {
            this.schema = schema;
            this.decoder = decoder;
            this.missing = missing;
            this.direct = direct;
        }
    }

    private Slot decoder(BodySpec.TopicSchema schema) {
        if (schema == lastSlot.schema) return lastSlot;
        Slot slot = decoders.get(schema);
        if (slot == null) {
            BodyDecoder d;
            switch (spec.format) {
                case BodySpec.JSON:
                    d = new JsonBodyDecoder(schema.struct, spec.timeZone);
                    break;
                case BodySpec.AVRO:
                    d = new AvroBodyDecoder(schema.text);
                    break;
                default:
                    d = new TextBodyDecoder();
            }
            boolean[] own = new boolean[decoded.length];
            for (int c : schema.columns) own[c] = true;
            int[] missing = java.util.stream.IntStream.range(0, decoded.length)
                    .filter(c -> !own[c] && decoded[c] != null).toArray();
            WritableColumnVector[] direct = new WritableColumnVector[schema.columns.length];
            for (int i = 0; i < direct.length; i++) direct[i] = decoded[schema.columns[i]];
            slot = new Slot(schema, d, missing, direct);
            decoders.put(schema, slot);
        }
        lastSlot = slot;
        return slot;
    }

    private void putNulls(int at) {
        for (OnHeapColumnVector v : decoded) if (v != null) v.putNull(at);
    }

    @Override
    public ColumnarBatch get() {
        return batch;
    }

    @Override
    public void close() throws IOException {
        try {
            inner.close();
        } finally {
            for (OnHeapColumnVector v : decoded) if (v != null) v.close();
            if (errors != null) errors.close();
        }
    }

    @Override
    public CustomTaskMetric[] currentMetricsValues() {
        CustomTaskMetric[] base = inner.currentMetricsValues();
        CustomTaskMetric[] all = Arrays.copyOf(base == null ? new CustomTaskMetric[0] : base,
                (base == null ? 0 : base.length) + 1);
        long value = skipped;
        all[all.length - 1] = new CustomTaskMetric() {
            @Override
            public String name() {
                return SKIPPED;
            }

            @Override
            public long value() {
                return value;
            }
        };
        return all;
    }
}
