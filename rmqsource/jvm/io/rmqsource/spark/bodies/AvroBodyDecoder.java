package io.rmqsource.spark.bodies;

import io.rmqsource.spark.compat.AvroSupport;
import java.util.Arrays;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;

/** Avro bodies with Spark's own {@code from_avro} (spark-avro), in FAILFAST mode: a datum it rejects is a bad record. */
final class AvroBodyDecoder implements BodyDecoder {
    private final Expression fromAvro;
    private final GenericInternalRow input = new GenericInternalRow(1);

    AvroBodyDecoder(String avroSchema) {
        fromAvro = AvroSupport.fromAvro(avroSchema);
    }

    @Override
    public InternalRow decode(byte[] b, int off, int len) {
        input.update(0, off == 0 && len == b.length ? b : Arrays.copyOfRange(b, off, off + len));
        Object row;
        try {
            row = fromAvro.eval(input);
        } catch (Exception e) {
            throw Bad.of(e);
        }
        if (row == null) throw new Bad("from_avro gave no record");
        return (InternalRow) row;
    }
}
