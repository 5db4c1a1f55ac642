package io.rmqsource.spark.compat;

import java.lang.reflect.Constructor;
import org.apache.spark.sql.catalyst.json.JSONOptions;
import org.apache.spark.sql.catalyst.json.JacksonParser;
import org.apache.spark.sql.types.StructType;

/**
 * Spark's JSON parser, as {@code from_json} builds it.  Its constructor takes the pushed filters as a
 * {@code scala.collection.Seq} on Spark 3.5 (Scala 2.12) and a {@code scala.collection.immutable.Seq}
 * on 4.x: found by its parameter count, given an empty Seq of the kind it asks for.
 */
public final class JsonParsers {
    private JsonParsers() {
    }

    /** from_json's default options: {@code new JSONOptions(Map(), timeZone, "")}. */
    @SuppressWarnings("unchecked")
    public static JSONOptions options(String timeZone) {
        return new JSONOptions((scala.collection.immutable.Map<String, String>) emptyMap(), timeZone, "");
    }

    /** {@code new JacksonParser(schema, options, allowArrayAsStructs=false, Nil)}. */
    public static JacksonParser create(StructType schema, JSONOptions options) {
        for (Constructor<?> k : JacksonParser.class.getConstructors()) {
            Class<?>[] p = k.getParameterTypes();
            if (p.length == 4 && p[2] == boolean.class) {
                return (JacksonParser) Constructors.create(k, schema, options, false, emptySeq());
            }
        }
        throw new IllegalStateException("this Spark's JacksonParser has no constructor (schema, options, "
                + "allowArrayAsStructs, filters)");
    }

    @SuppressWarnings("unchecked")
    private static Object emptyMap() {
        return ScalaMaps.of();
    }

    /** Nil: a List, both a scala.collection.Seq and an immutable one. */
    private static Object emptySeq() {
        try {
            return Class.forName("scala.collection.immutable.Nil$").getField("MODULE$").get(null);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }
}
