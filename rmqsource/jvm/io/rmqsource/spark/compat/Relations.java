package io.rmqsource.spark.compat;

import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A {@code DataSourceV2Relation} with other read options.  Its constructor differs between Spark versions (3.5
 * and 4.0 take five fields, later ones a time-travel spec too), so the copy takes the case class's fields
 * ({@code productElement}), replaces the {@link CaseInsensitiveStringMap} and calls the one public constructor
 * of that arity: the output attributes (their expression ids), catalog and identifier stay as they were.
 */
public final class Relations {
    private Relations() {
    }

    /** {@code relation} with {@code options} in place of its own; its tree node tags copied. */
    public static LogicalPlan withOptions(LogicalPlan relation, CaseInsensitiveStringMap options) {
        try {
            Class<?> c = relation.getClass();
            int arity = (Integer) c.getMethod("productArity").invoke(relation);
            Method element = c.getMethod("productElement", int.class);
            Object[] args = new Object[arity];
            int replaced = 0;
            for (int i = 0; i < arity; i++) {
                args[i] = element.invoke(relation, i);
                if (args[i] instanceof CaseInsensitiveStringMap) {
                    args[i] = options;
                    replaced++;
                }
            }
            if (replaced != 1) throw new IllegalStateException(c.getName() + " has " + replaced + " option maps");
            Constructor<?> make = null;
            for (Constructor<?> k : c.getConstructors()) if (k.getParameterCount() == arity) make = k;
            if (make == null) throw new IllegalStateException(c.getName() + " has no public constructor of " + arity);
            LogicalPlan out = (LogicalPlan) make.newInstance(args);
            for (Method m : c.getMethods()) {
                if (m.getName().equals("copyTagsFrom") && m.getParameterCount() == 1) {
                    m.invoke(out, relation);
                    break;
                }
            }
            return out;
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot copy " + relation.getClass().getName() + " with other options", e);
        }
    }
}
