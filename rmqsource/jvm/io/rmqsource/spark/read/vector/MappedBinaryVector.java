package io.rmqsource.spark.read.vector;

import java.nio.ByteBuffer;
import org.apache.spark.sql.types.DataTypes;

/**
 * The body column as views of the mapped CommitLog: each row keeps where its body is, and
 * {@link #getBinary} copies it out when Spark asks.  A body goes from the page cache to Spark's
 * row in one copy instead of two (into a batch buffer, then out of it), and a query that never
 * reads the body (its length only, or not at all) never moves the bytes.  Stored bodies only:
 * inflated bodies (decompress=true) are copied into an ordinary vector.  Nothing to free: the maps
 * belong to the executor's cache.
 */
final class MappedBinaryVector extends OneKindVector {
    private final ByteBuffer[] buffers;
    private final int[] positions;
    private final int[] lengths;

    MappedBinaryVector(int capacity) {
        super(DataTypes.BinaryType, "binary values (the body)");
        buffers = new ByteBuffer[capacity];
        positions = new int[capacity];
        lengths = new int[capacity];
    }

    void set(int row, ByteBuffer b, int pos, int len) {
        buffers[row] = b;
        positions[row] = pos;
        lengths[row] = len;
    }

    @Override
    public byte[] getBinary(int rowId) {
        byte[] out = new byte[lengths[rowId]];
        buffers[rowId].get(positions[rowId], out, 0, out.length);
        return out;
    }

    @Override
    public boolean hasNull() {
        return false;
    }

    @Override
    public int numNulls() {
        return 0;
    }

    @Override
    public boolean isNullAt(int rowId) {
        return false;
    }
}
