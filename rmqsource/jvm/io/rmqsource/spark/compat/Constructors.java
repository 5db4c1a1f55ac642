package io.rmqsource.spark.compat;

import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;

/** Calling a constructor found by reflection, so that what it throws reaches the caller as itself. */
final class Constructors {
    private Constructors() {
    }

    /** {@code k.newInstance(args)}; a RuntimeException the constructor throws is rethrown unwrapped. */
    static Object create(Constructor<?> k, Object... args) {
        try {
            return k.newInstance(args);
        } catch (InvocationTargetException e) {
            Throwable c = e.getCause();
            if (c instanceof RuntimeException) throw (RuntimeException) c;
            throw new IllegalStateException(c);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }
}
