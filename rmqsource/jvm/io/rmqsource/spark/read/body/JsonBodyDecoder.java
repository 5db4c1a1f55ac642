package io.rmqsource.spark.read.body;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import io.rmqsource.spark.compat.JsonParsers;
import java.io.IOException;
import java.io.UncheckedIOException;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.json.JacksonParser;
import org.apache.spark.sql.types.StructType;
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

    JsonBodyDecoder(StructType schema, String timeZone) {
        parser = JsonParsers.create(schema, timeZone);
    }

    private JsonParser open(JsonFactory factory, Object record) {
        try {
            stream.set(buf, off, len);
            return factory.createParser(stream);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
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

    @Override
    public InternalRow decode(byte[] b, int off, int len) {
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
