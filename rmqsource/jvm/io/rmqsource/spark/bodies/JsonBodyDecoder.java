package io.rmqsource.spark.bodies;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import io.rmqsource.spark.compat.JsonParsers;
import java.io.IOException;
import java.io.UncheckedIOException;
import com.fasterxml.jackson.core.JsonToken;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.json.JSONOptions;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.catalyst.json.JacksonParser;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * JSON bodies with Spark's own parser, as {@code from_json(CAST(body AS STRING), schema)} with its default
 * options: the same {@link JacksonParser}, reading the body's bytes in place (no string per row).  Only an
 * empty or blank body gives no row (null columns); whatever the parser rejects is a bad record.
 */
final class JsonBodyDecoder implements BodyDecoder {
    private final JacksonParser parser;
    private byte[] buf;
    private int off;
    private int len;
    /**
     * The body, read by the parser as a stream: given a byte[], Spark 4's parser (spark.sql.json.exactStringParsing)
     * keeps a nested value read into a string column as its raw text, where from_json over a string re-writes it
     * compactly ({"a":[1,true]}); a stream makes it write it as from_json does.
     */
    private final Body stream = new Body();
    private final scala.Function2<JsonFactory, Object, JsonParser> open = this::open;
    private final scala.Function1<Object, UTF8String> literal = r -> UTF8String.fromBytes(buf, off, len);

    // the direct path (decodeInto): the schema's fields by name, their kinds, and Spark's converter of each
    private static final int OTHER = 0, LONG = 1, INT = 2, DOUBLE = 3, STRING = 4, BOOLEAN = 5;
    private final JsonFactory factory;
    private final java.util.HashMap<String, Integer> fields = new java.util.HashMap<>();
    private final int[] kinds;
    private final DataType[] types;
    private final scala.Function1<JsonParser, Object>[] converters;
    private final boolean[] seen;
    private final String[] names;
    private byte[] utf8 = new byte[64];
    private final GenericInternalRow holder = new GenericInternalRow(1);
    /** The fast path over the body's bytes (null when the schema repeats a name). */
    private final FlatJsonScanner scanner;
    /** Whether bodies go to the scanner first: judged on the first {@link #TRIAL} bodies. */
    private boolean scanning;
    private static final int TRIAL = 2048;
    private int scanned;
    private int gaveUp;

    @SuppressWarnings("unchecked")
    JsonBodyDecoder(StructType schema, String timeZone) {
        JSONOptions options = JsonParsers.options(timeZone);
        parser = JsonParsers.create(schema, options);
        factory = options.buildJsonFactory();
        // exact (correctly rounded) as Double.parseDouble, and faster; Spark's converters read doubles the same way
        factory.enable(JsonParser.Feature.USE_FAST_DOUBLE_PARSER);
        StructField[] fs = schema.fields();
        kinds = new int[fs.length];
        types = new DataType[fs.length];
        converters = new scala.Function1[fs.length];
        seen = new boolean[fs.length];
        names = new String[fs.length];
        for (int i = 0; i < fs.length; i++) {
            fields.putIfAbsent(fs[i].name(), i);
            names[i] = fs[i].name().intern();        // the parser's names are interned: compared by identity first
            DataType t = fs[i].dataType();
            types[i] = t;
            kinds[i] = t instanceof LongType ? LONG : t instanceof IntegerType ? INT : t instanceof DoubleType ? DOUBLE
                    : t instanceof StringType ? STRING : t instanceof BooleanType ? BOOLEAN : OTHER;
            converters[i] = parser.makeConverter(t);
        }
        // the scanner's kinds: timestamps too, when Spark parses them its default way (no legacy parser policy)
        boolean isoTimestamps = options.timestampFormatInRead().isEmpty();
        boolean isoDates = options.dateFormatInRead().isEmpty();
        int[] scanKinds = new int[fs.length];
        java.util.HashSet<String> distinct = new java.util.HashSet<>();
        for (int i = 0; i < fs.length; i++) {
            distinct.add(fs[i].name());
            DataType t = types[i];
            scanKinds[i] = t instanceof LongType ? FlatJsonScanner.LONG : t instanceof IntegerType ? FlatJsonScanner.INT
                    : t instanceof DoubleType ? FlatJsonScanner.DOUBLE : t instanceof StringType ? FlatJsonScanner.STRING
                    : t instanceof BooleanType ? FlatJsonScanner.BOOLEAN
                    : t instanceof TimestampType && isoTimestamps ? FlatJsonScanner.TIMESTAMP
                    : t instanceof DateType && isoDates ? FlatJsonScanner.DATE : FlatJsonScanner.OTHER;
        }
        scanner = distinct.size() == fs.length ? new FlatJsonScanner(names, scanKinds, this::convert) : null;
        scanning = scanner != null;
    }

    /**
     * A top-level object read field by field as Spark's parser reads it (convertObject: fields by exact name, the
     * last of a repeated one wins, unknown ones skipped), values of the common kinds written straight into the
     * vectors (those tokens convert the same in Spark), any other value converted by Spark's own converter of its
     * field.  A body that is not an object (or empty) goes through {@link #decode}.
     */
    @Override
    public boolean decodeInto(byte[] b, int off, int len, WritableColumnVector[] out, int row) {
        if (scanning) {
            boolean done = scanner.scan(b, off, len, out, row);
            if (!done) gaveUp++;
            if (++scanned == TRIAL) {
                // the bodies' values mostly of other kinds (each read by a parser of its own), or bodies the scanner
                // leaves to the exact path: the exact path alone is faster
                scanning = scanner.converted < 3L * TRIAL && gaveUp < TRIAL / 2;
            }
            if (done) return true;
        }
        checkNoByteOrderMark(b, off, len);
        JsonParser p;
        try {
            stream.set(b, off, len);
            p = factory.createParser(stream);
            if (p.nextToken() != JsonToken.START_OBJECT) {
                p.close();
                return false;
            }
        } catch (Exception e) {
            return false;                // Spark's parse decides (and says why)
        }
        java.util.Arrays.fill(seen, false);
        int next = 0;                                   // the field expected next (bodies keep the schema's order)
        try (JsonParser q = p) {
            JsonToken t;
            while ((t = q.nextToken()) != JsonToken.END_OBJECT) {
                if (t != JsonToken.FIELD_NAME) throw new IllegalStateException("unexpected " + t);
                String name = q.currentName();
                int i;
                if (next < names.length && names[next] == name) {
                    i = next;
                } else {
                    Integer at = fields.get(name);
                    i = at == null ? -1 : at;
                }
                JsonToken v = q.nextToken();
                if (i < 0) {
                    q.skipChildren();
                    continue;
                }
                next = i + 1;
                seen[i] = true;
                WritableColumnVector o = out[i];
                if (v == JsonToken.VALUE_NULL) {
                    if (o != null) o.putNull(row);
                    continue;
                }
                switch (kinds[i]) {
                    case LONG:
                        if (v == JsonToken.VALUE_NUMBER_INT && q.getNumberType() != JsonParser.NumberType.BIG_INTEGER) {
                            long x = q.getLongValue();
                            if (o != null) {
                                o.putNotNull(row);
                                o.putLong(row, x);
                            }
                            continue;
                        }
                        break;
                    case INT:
                        if (v == JsonToken.VALUE_NUMBER_INT && q.getNumberType() == JsonParser.NumberType.INT) {
                            int x = q.getIntValue();
                            if (o != null) {
                                o.putNotNull(row);
                                o.putInt(row, x);
                            }
                            continue;
                        }
                        break;
                    case DOUBLE:
                        if (v == JsonToken.VALUE_NUMBER_FLOAT || v == JsonToken.VALUE_NUMBER_INT) {
                            double x = q.getDoubleValue();
                            if (o != null) {
                                o.putNotNull(row);
                                o.putDouble(row, x);
                            }
                            continue;
                        }
                        break;
                    case STRING:
                        if (v == JsonToken.VALUE_STRING) {
                            if (o != null) {
                                o.putNotNull(row);
                                putText(o, row, q);
                            }
                            continue;
                        }
                        break;
                    case BOOLEAN:
                        if (v == JsonToken.VALUE_TRUE || v == JsonToken.VALUE_FALSE) {
                            if (o != null) {
                                o.putNotNull(row);
                                o.putBoolean(row, v == JsonToken.VALUE_TRUE);
                            }
                            continue;
                        }
                        break;
                    default:
                        break;
                }
                holder.update(0, converters[i].apply(q));       // Spark's conversion of this value (or its error)
                if (o != null) RowToVectors.write(o, row, holder, 0, types[i]);
            }
        } catch (Exception e) {
            throw Bad.of(e);
        }
        for (int i = 0; i < seen.length; i++) if (!seen[i] && out[i] != null) out[i].putNull(row);
        return true;
    }

    /**
     * One value of field {@code f} (the scanner's {@link FlatJsonScanner.Values}), read as the exact path reads it:
     * a stream parser over its bytes, Spark's converter of the field.
     */
    private boolean convert(int f, byte[] b, int at, int n, WritableColumnVector o, int row) {
        try {
            stream.set(b, at, n);
            try (JsonParser p = factory.createParser(stream)) {
                p.nextToken();
                holder.update(0, converters[f].apply(p));
            }
        } catch (Exception e) {
            return false;                // the exact path decides (and says why)
        }
        if (o != null) RowToVectors.write(o, row, holder, 0, types[f]);
        return true;
    }

    private JsonParser open(JsonFactory factory, Object record) {
        try {
            stream.set(buf, off, len);
            return factory.createParser(stream);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The current string token's text into {@code o} as UTF-8 (as UTF8String.fromString(getText) gives it). */
    private void putText(WritableColumnVector o, int row, JsonParser q) throws IOException {
        char[] cs = q.getTextCharacters();
        int from = q.getTextOffset();
        int n = q.getTextLength();
        if (utf8.length < n * 3) utf8 = new byte[Math.max(n * 3, utf8.length * 2)];
        int k = 0;
        for (int i = from, end = from + n; i < end; i++) {
            char c = cs[i];
            if (c < 0x80) {
                utf8[k++] = (byte) c;
            } else {                                      // not ASCII: as Java encodes it
                byte[] u = new String(cs, from, n).getBytes(java.nio.charset.StandardCharsets.UTF_8);
                o.putByteArray(row, u, 0, u.length);
                return;
            }
        }
        o.putByteArray(row, utf8, 0, k);
    }

    /** A reusable stream over one body. */
    private static final class Body extends java.io.InputStream {
        private byte[] b;
        private int pos;
        private int end;

        void set(byte[] b, int off, int len) {
            this.b = b;
            this.pos = off;
            this.end = off + len;
        }

        @Override
        public int read() {
            return pos < end ? b[pos++] & 0xFF : -1;
        }

        @Override
        public int read(byte[] into, int off, int len) {
            if (len == 0) return 0;
            if (pos >= end) return -1;
            int n = Math.min(len, end - pos);
            System.arraycopy(b, pos, into, off, n);
            pos += n;
            return n;
        }

        @Override
        public int available() {
            return end - pos;
        }
    }

    /**
     * from_json reads the text, where a byte order mark is a character JSON does not allow; Jackson given the bytes
     * would skip it.
     */
    private static void checkNoByteOrderMark(byte[] b, int off, int len) {
        if (len >= 3 && b[off] == (byte) 0xEF && b[off + 1] == (byte) 0xBB && b[off + 2] == (byte) 0xBF) {
            throw new Bad("Unexpected character (U+FEFF, a byte order mark): expected a JSON value");
        }
    }

    @Override
    public InternalRow decode(byte[] b, int off, int len) {
        checkNoByteOrderMark(b, off, len);
        this.buf = b;
        this.off = off;
        this.len = len;
        scala.collection.Iterator<InternalRow> rows;
        try {
            rows = parser.parse(this, open, literal).iterator();
        } catch (Exception e) {
            throw Bad.of(e);
        }
        return rows.hasNext() ? rows.next() : null;
    }
}
