package io.rmqsource.spark;

import java.nio.ByteBuffer;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The body column of a batch, never null: each row names its bytes in the mapped CommitLog
 * (buffer, position, length), or holds an inflated body.  Spark copies a body out once, when it
 * asks for it ({@link #getBinary}); nothing is copied into the batch first.  The maps stay valid
 * while referenced (store files are read-only maps shared by the JVM).
 */
final class BodyVector extends ColumnVector {
    private final ByteBuffer[] buffers;
    private final int[] positions;
    private final int[] lengths;
    private final byte[][] inflated;

    BodyVector(int capacity) {
        super(DataTypes.BinaryType);
        buffers = new ByteBuffer[capacity];
        positions = new int[capacity];
        lengths = new int[capacity];
        inflated = new byte[capacity][];
    }

    void putMapped(int row, ByteBuffer b, int pos, int len) {
        buffers[row] = b;
        positions[row] = pos;
        lengths[row] = len;
        inflated[row] = null;
    }

    void putInflated(int row, byte[] body) {
        buffers[row] = null;
        inflated[row] = body;
    }

    /** Drops the references of the last batch (rows below {@code rows}). */
    void reset(int rows) {
        java.util.Arrays.fill(buffers, 0, rows, null);
        java.util.Arrays.fill(inflated, 0, rows, null);
    }

    @Override
    public byte[] getBinary(int row) {
        byte[] plain = inflated[row];
        if (plain != null) return plain.clone();
        byte[] out = new byte[lengths[row]];
        buffers[row].get(positions[row], out, 0, out.length);
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
    public boolean isNullAt(int row) {
        return false;
    }

    @Override
    public void close() {
        reset(buffers.length);
    }

    private static UnsupportedOperationException notBinary() {
        return new UnsupportedOperationException("body is a binary column");
    }

    @Override
    public boolean getBoolean(int row) {
        throw notBinary();
    }

    @Override
    public byte getByte(int row) {
        throw notBinary();
    }

    @Override
    public short getShort(int row) {
        throw notBinary();
    }

    @Override
    public int getInt(int row) {
        throw notBinary();
    }

    @Override
    public long getLong(int row) {
        throw notBinary();
    }

    @Override
    public float getFloat(int row) {
        throw notBinary();
    }

    @Override
    public double getDouble(int row) {
        throw notBinary();
    }

    @Override
    public ColumnarArray getArray(int row) {
        throw notBinary();
    }

    @Override
    public ColumnarMap getMap(int row) {
        throw notBinary();
    }

    @Override
    public Decimal getDecimal(int row, int precision, int scale) {
        throw notBinary();
    }

    @Override
    public UTF8String getUTF8String(int row) {
        throw notBinary();
    }

    @Override
    public ColumnVector getChild(int ordinal) {
        throw notBinary();
    }
}
