package io.rmqsource.spark.read.vector;

import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A read-only column of one kind of value kept outside Spark's writable vectors: every getter of
 * another kind throws.  A subclass overrides the getter of its kind and the null checks; it holds no
 * off-heap memory, so closing frees nothing.
 */
abstract class OneKindVector extends ColumnVector {
    private final String kind;

    /** {@code kind}: what the column holds, for the error of a getter of another kind. */
    OneKindVector(DataType type, String kind) {
        super(type);
        this.kind = kind;
    }

    @Override
    public void close() {
    }

    @Override
    public void closeIfFreeable() {
    }

    private UnsupportedOperationException otherKind() {
        return new UnsupportedOperationException("this column holds " + kind);
    }

    @Override
    public boolean getBoolean(int rowId) {
        throw otherKind();
    }

    @Override
    public byte getByte(int rowId) {
        throw otherKind();
    }

    @Override
    public short getShort(int rowId) {
        throw otherKind();
    }

    @Override
    public int getInt(int rowId) {
        throw otherKind();
    }

    @Override
    public long getLong(int rowId) {
        throw otherKind();
    }

    @Override
    public float getFloat(int rowId) {
        throw otherKind();
    }

    @Override
    public double getDouble(int rowId) {
        throw otherKind();
    }

    @Override
    public ColumnarArray getArray(int rowId) {
        throw otherKind();
    }

    @Override
    public ColumnarMap getMap(int ordinal) {
        throw otherKind();
    }

    @Override
    public Decimal getDecimal(int rowId, int precision, int scale) {
        throw otherKind();
    }

    @Override
    public UTF8String getUTF8String(int rowId) {
        throw otherKind();
    }

    @Override
    public byte[] getBinary(int rowId) {
        throw otherKind();
    }

    @Override
    public ColumnVector getChild(int ordinal) {
        throw otherKind();
    }
}
