package io.rmqsource.spark.compat;

import io.rmqsource.errors.OptionError;
import java.lang.reflect.Constructor;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

/**
 * Spark's own Avro support ({@code spark-avro}, the package users add for {@code from_avro}), which
 * pyspark's jars do not carry: its {@code AvroDataToCatalyst} expression is found at run time, so the rmq
 * jar names none of its classes.  Decoding a body is evaluating {@code from_avro(body, schema,
 * {"mode": "FAILFAST"})} on a one-column row holding the body.
 */
public final class AvroSupport {
    static final String EXPRESSION = "org.apache.spark.sql.avro.AvroDataToCatalyst";

    private AvroSupport() {
    }

    /** The message a read with bodyFormat=avro fails with when spark-avro is not on the classpath. */
    static String missing() {
        return "bodyFormat=avro needs Spark's Avro support: add org.apache.spark:spark-avro_" + scalaVersion() + ":"
                + org.apache.spark.package$.MODULE$.SPARK_VERSION() + " to spark.jars.packages";
    }

    private static String scalaVersion() {
        String v = scala.util.Properties.versionNumberString();
        String[] parts = v.split("\\.");
        return parts.length >= 2 ? parts[0] + "." + parts[1] : v;
    }

    private static Constructor<?> constructor() {
        Class<?> c;
        try {
            c = Class.forName(EXPRESSION, true, classLoader());
        } catch (ClassNotFoundException | LinkageError e) {
            throw new OptionError(missing());
        }
        for (Constructor<?> k : c.getConstructors()) {
            Class<?>[] p = k.getParameterTypes();
            if (p.length == 3 && p[0] == Expression.class && p[1] == String.class) return k;
        }
        throw new OptionError(missing() + " (its " + EXPRESSION + " has no constructor (child, jsonFormatSchema, "
                + "options))");
    }

    private static ClassLoader classLoader() {
        ClassLoader l = Thread.currentThread().getContextClassLoader();
        return l != null ? l : AvroSupport.class.getClassLoader();
    }

    /** from_avro(input column 0 as binary, avroSchema, FAILFAST) as an expression ready to eval. */
    public static Expression fromAvro(String avroSchema) {
        return (Expression) Constructors.create(constructor(), new BoundReference(0, DataTypes.BinaryType, true),
                avroSchema, ScalaMaps.of("mode", "FAILFAST"));
    }

    /** The Spark type from_avro gives an Avro schema; an invalid schema is an OptionError naming {@code option}. */
    public static DataType sqlType(String avroSchema, String option) {
        Expression e = fromAvro(avroSchema);
        try {
            return e.dataType();
        } catch (RuntimeException err) {
            Throwable root = err;
            while (root.getCause() != null && root.getCause() != root) root = root.getCause();
            String msg = root.getMessage() == null ? root.toString() : root.getMessage();
            int nl = msg.indexOf('\n');
            throw new OptionError("option " + option + " is not a valid Avro schema: " + (nl < 0 ? msg : msg.substring(0, nl)));
        }
    }
}
