package io.rmqsource.spark;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.execution.vectorized.Dictionary;

/**
 * The distinct values of a string column of one task (topics), for a dictionary-encoded column
 * vector: each row holds an int id, Spark reads the bytes through {@link #decodeToBinary}.
 */
final class BytesDictionary implements Dictionary {
    private final List<byte[]> values = new ArrayList<>();
    private final Map<ByteBuffer, Integer> ids = new HashMap<>();

    /** The id of {@code value} (compared by content), added on first sight. */
    int idOf(byte[] value) {
        return ids.computeIfAbsent(ByteBuffer.wrap(value), k -> {
            values.add(value);
            return values.size() - 1;
        });
    }

    @Override
    public byte[] decodeToBinary(int id) {
        return values.get(id);
    }

    @Override
    public int decodeToInt(int id) {
        throw new UnsupportedOperationException("a dictionary of strings");
    }

    @Override
    public long decodeToLong(int id) {
        throw new UnsupportedOperationException("a dictionary of strings");
    }

    @Override
    public float decodeToFloat(int id) {
        throw new UnsupportedOperationException("a dictionary of strings");
    }

    @Override
    public double decodeToDouble(int id) {
        throw new UnsupportedOperationException("a dictionary of strings");
    }
}
