package io.rmqsource.spark.compat;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.catalog.TableProvider;

/**
 * Spark's Python data sources as seen from the JVM: {@code PythonDataSourceV2} (the provider that serves a
 * registered Python data source as a DataSource V2 table) and the session's registry of Python sources.
 * Spark 4.0 has both; Spark 3.5 has neither, so there the rmq table is native only. Found once, by
 * reflection: no class of this jar names them, so the jar links (and compiles) on both.
 */
public final class PythonDataSources {
    private static final String PROVIDER = "org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2";
    private static final Class<?> PROVIDER_CLASS = find(PROVIDER);
    /** SessionState.dataSourceManager() (its class has dataSourceExists(String)), or null. */
    private static final Method MANAGER = PROVIDER_CLASS == null ? null : method(sessionStateClass(), "dataSourceManager");

    private PythonDataSources() {}

    /** Whether the running Spark can serve a Python data source behind a JVM provider. */
    public static boolean available() {
        return PROVIDER_CLASS != null && MANAGER != null;
    }

    /** Whether the session's Python has a data source of this name (Spark looks in its Python at first use). */
    public static boolean exists(SparkSession session, String shortName) {
        try {
            Object manager = MANAGER.invoke(session.sessionState());
            return (Boolean) manager.getClass().getMethod("dataSourceExists", String.class).invoke(manager, shortName);
        } catch (InvocationTargetException e) {
            throw unwrap(e);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("Spark's Python data source registry: " + e, e);
        }
    }

    /** A new PythonDataSourceV2 for the Python data source {@code shortName} (only when {@link #available}). */
    public static TableProvider provider(String shortName) {
        try {
            Object provider = PROVIDER_CLASS.getConstructor().newInstance();
            PROVIDER_CLASS.getMethod("setShortName", String.class).invoke(provider, shortName);
            return (TableProvider) provider;
        } catch (InvocationTargetException e) {
            throw unwrap(e);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("Spark's " + PROVIDER + ": " + e, e);
        }
    }

    private static RuntimeException unwrap(InvocationTargetException e) {
        Throwable cause = e.getCause();
        if (cause instanceof RuntimeException) return (RuntimeException) cause;
        if (cause instanceof Error) throw (Error) cause;
        return new IllegalStateException(cause);
    }

    private static Class<?> find(String name) {
        try {
            return Class.forName(name, false, PythonDataSources.class.getClassLoader());
        } catch (ClassNotFoundException | LinkageError e) {
            return null;
        }
    }

    private static Class<?> sessionStateClass() {
        return find("org.apache.spark.sql.internal.SessionState");
    }

    private static Method method(Class<?> owner, String name) {
        if (owner == null) return null;
        try {
            return owner.getMethod(name);
        } catch (NoSuchMethodException e) {
            return null;
        }
    }
}
