package io.rmqsource.spark.bodies;

import io.rmqsource.errors.OptionError;
import io.rmqsource.errors.Repr;
import io.rmqsource.spark.Contract;
import io.rmqsource.spark.compat.AvroSupport;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/** Schema texts to Spark structs (DDL, Spark JSON, Avro), and the decoded columns of a read (docs/bodies.md). */
final class BodySchemas {
    private BodySchemas() {
    }

    /** The struct of one schema text: json takes a DDL or Spark's JSON form, avro an Avro record schema. */
    static StructType struct(String format, String text, String option) {
        String t = text.strip();
        if (t.isEmpty()) throw new OptionError("option " + option + " is empty");
        if (format.equals(BodySpec.AVRO)) {
            DataType type = AvroSupport.sqlType(t, option);
            if (!(type instanceof StructType)) {
                throw new OptionError("option " + option + ": the top level of an Avro body schema must be a record, "
                        + "got " + type.simpleString());
            }
            return nullable((StructType) type);
        }
        DataType type;
        try {
            type = t.startsWith("{") ? DataType.fromJson(t) : StructType.fromDDL(t);
        } catch (Exception e) {
            throw new OptionError("option " + option + " is neither a Spark DDL (id BIGINT, amount DOUBLE) nor a "
                    + "Spark struct in JSON: cannot parse " + Repr.of(t) + ": " + firstLine(e.getMessage()));
        }
        if (!(type instanceof StructType)) {
            throw new OptionError("option " + option + " must describe a struct, got " + type.simpleString());
        }
        return nullable((StructType) type);
    }

    /** Every field, element and value nullable, as from_json reads with (schema.asNullable). */
    static DataType nullable(DataType t) {
        if (t instanceof StructType) return nullable((StructType) t);
        if (t instanceof ArrayType) return new ArrayType(nullable(((ArrayType) t).elementType()), true);
        if (t instanceof MapType) {
            MapType m = (MapType) t;
            return new MapType(nullable(m.keyType()), nullable(m.valueType()), true);
        }
        return t;
    }

    static StructType nullable(StructType s) {
        StructField[] fs = new StructField[s.fields().length];
        for (int i = 0; i < fs.length; i++) {
            StructField f = s.fields()[i];
            fs[i] = new StructField(f.name(), nullable(f.dataType()), true, f.metadata());
        }
        return new StructType(fs);
    }

    /**
     * The decoded columns: the union of the schemas' top-level fields by name in the order they first appear,
     * prefixed; sets each schema's {@code columns}.  A field typed differently in two schemas, or a column
     * named as a message column (case-insensitively), is refused.
     */
    static StructType union(List<BodySpec.TopicSchema> schemas, String prefix, boolean errorColumn) {
        Map<String, StructField> byName = new LinkedHashMap<>();
        for (BodySpec.TopicSchema s : schemas) {
            for (StructField f : s.struct.fields()) {
                StructField seen = byName.get(f.name());
                if (seen == null) {
                    byName.put(f.name(), f);
                } else if (!seen.dataType().sameType(f.dataType())) {
                    throw new OptionError("body field " + Repr.of(f.name()) + " has type " + seen.dataType().simpleString()
                            + " in one body schema and " + f.dataType().simpleString() + " in another; the decoded "
                            + "columns are the union of the schemas' fields, each of one type");
                }
            }
        }
        List<String> names = List.copyOf(byName.keySet());
        for (BodySpec.TopicSchema s : schemas) {
            int[] cols = new int[s.struct.fields().length];
            for (int i = 0; i < cols.length; i++) cols[i] = names.indexOf(s.struct.fields()[i].name());
            s.columns = cols;
        }
        Map<String, String> taken = new LinkedHashMap<>();
        for (String m : Contract.SCHEMA.fieldNames()) taken.put(m.toLowerCase(Locale.ROOT), "the message column " + m);
        if (errorColumn) taken.put(BodySpec.DECODE_ERROR.toLowerCase(Locale.ROOT), "the column " + BodySpec.DECODE_ERROR);
        StructType out = new StructType();
        for (StructField f : byName.values()) {
            String name = prefix + f.name();
            String clash = taken.get(name.toLowerCase(Locale.ROOT));
            if (clash != null) {
                throw new OptionError("decoded column " + Repr.of(name) + " has the name of " + clash
                        + "; set option bodyColumnPrefix (e.g. \"body_\") to tell them apart");
            }
            taken.put(name.toLowerCase(Locale.ROOT), "another decoded column");
            out = out.add(new StructField(name, f.dataType(), true, f.metadata()));
        }
        return out;
    }

    /** The text of bodySchemaFile: a local path or a Hadoop URI, read on the driver with Hadoop's FileSystem. */
    static String readFile(String location) {
        String loc = location.strip();
        if (loc.isEmpty()) throw new OptionError("option bodySchemaFile is empty");
        try {
            Path path = new Path(loc);
            SparkSession session = SparkSession.getActiveSession().isDefined() ? SparkSession.getActiveSession().get() : null;
            Configuration conf = session != null ? session.sessionState().newHadoopConf() : new Configuration();
            FileSystem fs = path.getFileSystem(conf);
            try (InputStream in = fs.open(path)) {
                ByteArrayOutputStream out = new ByteArrayOutputStream();
                in.transferTo(out);
                return out.toString(StandardCharsets.UTF_8);
            }
        } catch (OptionError e) {
            throw e;
        } catch (Exception e) {
            throw new OptionError("option bodySchemaFile: cannot read " + Repr.of(loc) + ": " + firstLine(e.toString()));
        }
    }

    static String firstLine(String s) {
        if (s == null) return "";
        int nl = s.indexOf('\n');
        return (nl < 0 ? s : s.substring(0, nl)).strip();
    }
}
