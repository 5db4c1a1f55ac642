package io.rmqsource.spark;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.rmqsource.spark.compat.Relations;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.ArrayContains;
import org.apache.spark.sql.catalyst.expressions.ArraysOverlap;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.CreateArray;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.Or;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The optimizer rule of {@link RmqExtensions}.  Spark hands a data source no array filter, so a Filter directly
 * over an rmq relation (a {@code load()} or a catalog table of messages) whose condition has conjuncts
 * {@code array_contains(keys, 'k')}, {@code arrays_overlap(keys, array('a', 'b'))} or ORs made only of those gets
 * the relation's option {@code keys} set to their keys (intersected over several conjuncts): the scan then reads
 * the IndexFile hits of those keys only.  The Filter stays, so Spark still applies it exactly.  A relation that
 * already has keys or keysFile, a view other than messages or metadata is left alone.  Injected optimizer rules
 * run before Spark's V2 pushdown, which builds the scan from the options this sets.
 */
public final class KeyLookupRule extends Rule<LogicalPlan> {
    private static final String KEYS = "keys";

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        LogicalPlan p = plan.mapChildren(this::apply);
        return rewrite(p);
    }

    private static LogicalPlan rewrite(LogicalPlan p) {
        if (!(p instanceof Filter) || !(((Filter) p).child() instanceof DataSourceV2Relation)) return p;
        Filter filter = (Filter) p;
        DataSourceV2Relation relation = (DataSourceV2Relation) filter.child();
        RmqTable table = rmqTable(relation.table());
        if (table == null) return p;
        CaseInsensitiveStringMap merged = table.withTableOptions(relation.options());
        if (merged.containsKey("keys") || merged.containsKey("keysFile") || merged.containsKey("metadata")) return p;
        String view = merged.get("view");
        if (view != null && !view.strip().toLowerCase(Locale.ROOT).equals("messages")) return p;
        Set<String> keys = conjunctKeys(filter.condition(), relation, null);
        if (keys == null) return p;
        Map<String, String> options = new HashMap<>(relation.options().asCaseSensitiveMap());
        try {
            options.put(KEYS, new ObjectMapper().writeValueAsString(new ArrayList<>(keys)));
        } catch (JsonProcessingException e) {
            return p;
        }
        LogicalPlan rebuilt = Relations.withOptions(relation, new CaseInsensitiveStringMap(options));
        return filter.mapChildren(child -> rebuilt);
    }

    /** The rmq table behind a relation's table (a load() or a catalog table of messages), else null. */
    private static RmqTable rmqTable(Table t) {
        if (t instanceof RmqTable) return (RmqTable) t;
        if (t instanceof CatalogTable) return ((CatalogTable) t).messagesTable();
        return null;
    }

    /** The keys of the key conjuncts of {@code e} intersected into {@code acc}; null when there is none. */
    private static Set<String> conjunctKeys(Expression e, DataSourceV2Relation relation, Set<String> acc) {
        if (e instanceof And) {
            acc = conjunctKeys(((And) e).left(), relation, acc);
            return conjunctKeys(((And) e).right(), relation, acc);
        }
        Set<String> ks = disjunctKeys(e, relation);
        if (ks == null) return acc;
        if (acc == null) return ks;
        acc.retainAll(ks);
        return acc;
    }

    /**
     * The keys a row must hold one of for {@code e} to be true: {@code e} an array_contains / arrays_overlap of
     * the relation's keys column and string literals, or an OR of such; else null.  Keys no message can have
     * (empty, or with a space: KEYS is split on spaces) and null literals are left out: they never match.
     */
    private static Set<String> disjunctKeys(Expression e, DataSourceV2Relation relation) {
        if (e instanceof Or) {
            Set<String> l = disjunctKeys(((Or) e).left(), relation);
            Set<String> r = l == null ? null : disjunctKeys(((Or) e).right(), relation);
            if (r == null) return null;
            l.addAll(r);
            return l;
        }
        List<String> values = null;
        if (e instanceof ArrayContains) {
            ArrayContains c = (ArrayContains) e;
            if (isKeys(c.left(), relation)) values = stringLiteral(c.right());
        } else if (e instanceof ArraysOverlap) {
            ArraysOverlap o = (ArraysOverlap) e;
            if (isKeys(o.left(), relation)) values = stringArray(o.right());
            else if (isKeys(o.right(), relation)) values = stringArray(o.left());
        }
        if (values == null) return null;
        Set<String> out = new LinkedHashSet<>();
        for (String v : values) if (v != null && !v.isEmpty() && v.indexOf(' ') < 0) out.add(v);
        return out;
    }

    private static boolean isKeys(Expression e, DataSourceV2Relation relation) {
        return e instanceof AttributeReference && ((AttributeReference) e).name().equalsIgnoreCase(KEYS)
                && relation.outputSet().contains((AttributeReference) e);
    }

    /** A string literal as a one-item list (null item for a null literal), else null. */
    private static List<String> stringLiteral(Expression e) {
        if (!(e instanceof Literal) || !(((Literal) e).dataType() instanceof StringType)) return null;
        Object v = ((Literal) e).value();
        List<String> out = new ArrayList<>();
        out.add(v == null ? null : v.toString());
        return out;
    }

    /** The items of an array of string literals (a folded literal or array(...) of literals), else null. */
    private static List<String> stringArray(Expression e) {
        if (e instanceof Literal) {
            Literal lit = (Literal) e;
            if (!(lit.dataType() instanceof ArrayType) || !(((ArrayType) lit.dataType()).elementType() instanceof StringType)
                    || !(lit.value() instanceof ArrayData)) {
                return null;
            }
            ArrayData a = (ArrayData) lit.value();
            List<String> out = new ArrayList<>();
            for (int i = 0; i < a.numElements(); i++) {
                if (a.isNullAt(i)) continue;
                UTF8String s = a.getUTF8String(i);
                out.add(s == null ? null : s.toString());
            }
            return out;
        }
        if (e instanceof CreateArray) {
            List<Expression> children = new ArrayList<>();
            e.mapChildren(c -> {
                children.add(c);
                return c;
            });
            List<String> out = new ArrayList<>();
            for (Expression c : children) {
                List<String> one = stringLiteral(c);
                if (one == null) return null;
                out.addAll(one);
            }
            return out;
        }
        return null;
    }
}
