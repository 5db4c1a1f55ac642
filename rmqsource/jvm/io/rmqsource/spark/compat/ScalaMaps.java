package io.rmqsource.spark.compat;

import java.lang.reflect.Method;

/** Immutable Scala maps from Java, through reflection: the same calls on Scala 2.12 (Spark 3.5) and 2.13. */
public final class ScalaMaps {
    private ScalaMaps() {
    }

    /** A {@code scala.collection.immutable.Map} of the given key, value pairs. */
    public static Object of(String... keysAndValues) {
        try {
            Class<?> companion = Class.forName("scala.collection.immutable.Map$");
            Object module = companion.getField("MODULE$").get(null);
            Object map = companion.getMethod("empty").invoke(module);
            Method updated = Class.forName("scala.collection.immutable.Map").getMethod("updated", Object.class, Object.class);
            for (int i = 0; i + 1 < keysAndValues.length; i += 2) {
                map = updated.invoke(map, keysAndValues[i], keysAndValues[i + 1]);
            }
            return map;
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot build a Scala map", e);
        }
    }
}
