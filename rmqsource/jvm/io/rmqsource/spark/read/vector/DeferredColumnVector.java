package io.rmqsource.spark.read.vector;

import java.util.function.Supplier;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A column whose values are decoded on first access, for the whole batch at once.  Spark prunes
 * no columns of a stream (every column of the schema reaches the reader), but its generated code
 * reads only the columns the query uses: so a batch that nobody asks for bodies, properties or
 * msgIds never copies or formats them.
 */
final class DeferredColumnVector extends ColumnVector {
    /** Fills {@code target} for the current batch's rows. */
    interface Filler {
        void fill(int column, WritableColumnVector target);
    }

    private final Supplier<WritableColumnVector> allocate;
    private final Filler filler;
    private final int column;
    /** Allocated at the first access. */
    private WritableColumnVector inner;
    private boolean filled;

    DeferredColumnVector(DataType type, Supplier<WritableColumnVector> allocate, Filler filler, int column) {
        super(type);
        this.allocate = allocate;
        this.filler = filler;
        this.column = column;
    }

    /** A new batch: the values are to be decoded again. */
    void reset() {
        if (inner != null) inner.reset();
        filled = false;
    }

    private WritableColumnVector values() {
        if (!filled) {
            if (inner == null) inner = allocate.get();
            filled = true;
            filler.fill(column, inner);
        }
        return inner;
    }

    @Override
    public void close() {
        if (inner != null) inner.close();
    }

    /** Reused batch after batch, like a writable vector: Spark's "done with this batch" frees nothing. */
    @Override
    public void closeIfFreeable() {
    }

    @Override
    public boolean hasNull() {
        return values().hasNull();
    }

    @Override
    public int numNulls() {
        return values().numNulls();
    }

    @Override
    public boolean isNullAt(int rowId) {
        return values().isNullAt(rowId);
    }

    @Override
    public boolean getBoolean(int rowId) {
        return values().getBoolean(rowId);
    }

    @Override
    public byte getByte(int rowId) {
        return values().getByte(rowId);
    }

    @Override
    public short getShort(int rowId) {
        return values().getShort(rowId);
    }

    @Override
    public int getInt(int rowId) {
        return values().getInt(rowId);
    }

    @Override
    public long getLong(int rowId) {
        return values().getLong(rowId);
    }

    @Override
    public float getFloat(int rowId) {
        return values().getFloat(rowId);
    }

    @Override
    public double getDouble(int rowId) {
        return values().getDouble(rowId);
    }

    @Override
    public ColumnarArray getArray(int rowId) {
        return values().getArray(rowId);
    }

    @Override
    public ColumnarMap getMap(int ordinal) {
        return values().getMap(ordinal);
    }

    @Override
    public Decimal getDecimal(int rowId, int precision, int scale) {
        return values().getDecimal(rowId, precision, scale);
    }

    @Override
    public UTF8String getUTF8String(int rowId) {
        return values().getUTF8String(rowId);
    }

    @Override
    public byte[] getBinary(int rowId) {
        return values().getBinary(rowId);
    }

    @Override
    public ColumnVector getChild(int ordinal) {
        return values().getChild(ordinal);
    }
}
