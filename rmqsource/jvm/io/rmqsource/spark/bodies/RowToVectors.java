package io.rmqsource.spark.bodies;

import org.apache.spark.sql.catalyst.expressions.SpecializedGetters;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.CalendarIntervalType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.DayTimeIntervalType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.sql.types.YearMonthIntervalType;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.CalendarInterval;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Writes one value of an InternalRow (or of an array's elements) into a writable column vector, for any
 * Spark type a decoded body gives: atomic types, struct, array and map (elements appended to the child
 * vectors, as Spark's own vectorized readers do).
 */
final class RowToVectors {
    private RowToVectors() {
    }

    /** Value {@code ordinal} of {@code src}, of type {@code t}, into {@code v} at {@code row}. */
    static void write(WritableColumnVector v, int row, SpecializedGetters src, int ordinal, DataType t) {
        if (src.isNullAt(ordinal)) {
            v.putNull(row);
            return;
        }
        v.putNotNull(row);          // the row may have been written before (a bad record skipped there)
        if (t instanceof LongType || t instanceof TimestampType || t instanceof TimestampNTZType
                || t instanceof DayTimeIntervalType) {
            v.putLong(row, src.getLong(ordinal));
        } else if (t instanceof StringType) {
            putString(v, row, src.getUTF8String(ordinal));
        } else if (t instanceof DoubleType) {
            v.putDouble(row, src.getDouble(ordinal));
        } else if (t instanceof IntegerType || t instanceof DateType || t instanceof YearMonthIntervalType) {
            v.putInt(row, src.getInt(ordinal));
        } else if (t instanceof BooleanType) {
            v.putBoolean(row, src.getBoolean(ordinal));
        } else if (t instanceof FloatType) {
            v.putFloat(row, src.getFloat(ordinal));
        } else if (t instanceof ShortType) {
            v.putShort(row, src.getShort(ordinal));
        } else if (t instanceof ByteType) {
            v.putByte(row, src.getByte(ordinal));
        } else if (t instanceof BinaryType) {
            byte[] b = src.getBinary(ordinal);
            v.putByteArray(row, b, 0, b.length);
        } else if (t instanceof DecimalType) {
            DecimalType d = (DecimalType) t;
            v.putDecimal(row, src.getDecimal(ordinal, d.precision(), d.scale()), d.precision());
        } else if (t instanceof StructType) {
            StructType st = (StructType) t;
            SpecializedGetters r = src.getStruct(ordinal, st.size());
            v.putNotNull(row);
            for (int i = 0; i < st.size(); i++) {
                WritableColumnVector c = v.getChild(i);
                c.reserve(row + 1);
                write(c, row, r, i, st.fields()[i].dataType());
            }
        } else if (t instanceof ArrayType) {
            ArrayData a = src.getArray(ordinal);
            int n = a.numElements();
            v.putNotNull(row);
            v.putArray(row, append(v.getChild(0), a, n, ((ArrayType) t).elementType()), n);
        } else if (t instanceof MapType) {
            MapType mt = (MapType) t;
            MapData m = src.getMap(ordinal);
            int n = m.numElements();
            int start = append(v.getChild(0), m.keyArray(), n, mt.keyType());
            append(v.getChild(1), m.valueArray(), n, mt.valueType());
            v.putNotNull(row);
            v.putArray(row, start, n);
        } else if (t instanceof CalendarIntervalType) {
            CalendarInterval ci = src.getInterval(ordinal);
            v.putNotNull(row);
            v.getChild(0).reserve(row + 1);
            v.getChild(1).reserve(row + 1);
            v.getChild(2).reserve(row + 1);
            v.getChild(0).putInt(row, ci.months);
            v.getChild(1).putInt(row, ci.days);
            v.getChild(2).putLong(row, ci.microseconds);
        } else {
            throw new UnsupportedOperationException("a decoded column of type " + t.simpleString() + " is not supported");
        }
    }

    /** Appends the {@code n} elements of {@code a} to {@code child}; returns the index of the first. */
    private static int append(WritableColumnVector child, ArrayData a, int n, DataType et) {
        int start = child.getElementsAppended();
        child.reserve(start + n);
        for (int i = 0; i < n; i++) write(child, start + i, a, i, et);
        child.addElementsAppended(n);
        return start;
    }

    static void putString(WritableColumnVector v, int row, UTF8String s) {
        Object base = s.getBaseObject();
        if (base instanceof byte[]) {
            v.putByteArray(row, (byte[]) base, (int) (s.getBaseOffset() - Platform.BYTE_ARRAY_OFFSET), s.numBytes());
        } else {
            byte[] b = s.getBytes();
            v.putByteArray(row, b, 0, b.length);
        }
    }
}
