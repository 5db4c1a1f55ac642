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
    private final scala.Function2<JsonFactory, Object, JsonParser> open = this::open;
    private final scala.Function1<Object, UTF8String> literal = r -> UTF8String.fromBytes(buf, off, len);

    JsonBodyDecoder(StructType schema, String timeZone) {
        parser = JsonParsers.create(schema, timeZone);
    }

    private JsonParser open(JsonFactory factory, Object record) {
        try {
            return factory.createParser(buf, off, len);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
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
