package io.rmqsource.spark.bodies;

import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A message column of a batch some of whose rows were dropped (onBadRecord=skip): row {@code i} is row
 * {@code rows[i]} of the column read.  Closing it closes nothing (the column belongs to its reader).
 */
final class KeptRowsVector extends ColumnVector {
    private final ColumnVector inner;
    private final int[] rows;
    private final KeptRowsVector[] children;

    KeptRowsVector(ColumnVector inner, int[] rows) {
        super(inner.dataType());
        this.inner = inner;
        this.rows = rows;
        int n = inner.dataType() instanceof org.apache.spark.sql.types.StructType
                ? ((org.apache.spark.sql.types.StructType) inner.dataType()).size() : 0;
        children = new KeptRowsVector[n];
    }

    @Override
    public void close() {
    }

    @Override
    public boolean hasNull() {
        return inner.hasNull();
    }

    @Override
    public int numNulls() {
        return inner.numNulls();
    }

    @Override
    public boolean isNullAt(int rowId) {
        return inner.isNullAt(rows[rowId]);
    }

    @Override
    public boolean getBoolean(int rowId) {
        return inner.getBoolean(rows[rowId]);
    }

    @Override
    public byte getByte(int rowId) {
        return inner.getByte(rows[rowId]);
    }

    @Override
    public short getShort(int rowId) {
        return inner.getShort(rows[rowId]);
    }

    @Override
    public int getInt(int rowId) {
        return inner.getInt(rows[rowId]);
    }

    @Override
    public long getLong(int rowId) {
        return inner.getLong(rows[rowId]);
    }

    @Override
    public float getFloat(int rowId) {
        return inner.getFloat(rows[rowId]);
    }

    @Override
    public double getDouble(int rowId) {
        return inner.getDouble(rows[rowId]);
    }

    @Override
    public ColumnarArray getArray(int rowId) {
        return inner.getArray(rows[rowId]);
    }

    @Override
    public ColumnarMap getMap(int rowId) {
        return inner.getMap(rows[rowId]);
    }

    @Override
    public Decimal getDecimal(int rowId, int precision, int scale) {
        return inner.getDecimal(rows[rowId], precision, scale);
    }

    @Override
    public UTF8String getUTF8String(int rowId) {
        return inner.getUTF8String(rows[rowId]);
    }

    @Override
    public byte[] getBinary(int rowId) {
        return inner.getBinary(rows[rowId]);
    }

    @Override
    public ColumnVector getChild(int ordinal) {
        if (children[ordinal] == null) children[ordinal] = new KeptRowsVector(inner.getChild(ordinal), rows);
        return children[ordinal];
    }
}
