package io.rmqsource.store.write;

import io.rmqsource.format.Properties;
import java.util.Map;

/**
 * Properties that close every message of a batch and differ only in a number ending the last value:
 * a Spark sink's stamps {@code __RMQSOURCE_BATCH=<query>:<batch>}, {@code __RMQSOURCE_SEQ=<partition>:<row>}.
 * A message carrying them ({@link Message#trailing}, {@link Message#trailingNumber}) is put as if each
 * were {@code put} into its {@code properties} after the caller's, the last value being the prefix given
 * here followed by the number. Plain-ASCII names and values are checked and serialized once, here, so
 * the put checks copy their bytes rather than build, check and encode strings for every message.
 */
public final class TrailingProperties {
    private final String[] names;
    private final String[] values;
    /** {@code name 0x01 value} joined by 0x02, the last value without its number; null: not plain ASCII. */
    final byte[] plain;

    /**
     * {@code nameValuePairs}: name, value, name, value...; the last value is the prefix of the
     * numbered one.
     */
    public TrailingProperties(String... nameValuePairs) {
        if (nameValuePairs.length == 0 || nameValuePairs.length % 2 != 0) {
            throw new IllegalArgumentException("name, value pairs expected");
        }
        int n = nameValuePairs.length / 2;
        names = new String[n];
        values = new String[n];
        StringBuilder sb = new StringBuilder();
        boolean plainAscii = true;
        for (int i = 0; i < n; i++) {
            names[i] = nameValuePairs[2 * i];
            values[i] = nameValuePairs[2 * i + 1];
            if (i > 0) sb.append((char) Properties.PROPERTY_SEPARATOR);
            sb.append(names[i]).append((char) Properties.NAME_VALUE_SEPARATOR).append(values[i]);
            plainAscii &= PutChecks.plain(values[i]) && PutChecks.plain(names[i]) && !readAtDispatch(names[i]);
        }
        plain = plainAscii ? sb.toString().getBytes(java.nio.charset.StandardCharsets.US_ASCII) : null;
    }

    /** Names the general path takes: those the fast path does not copy, and UNIQ_KEY (dispatch reads it). */
    private static boolean readAtDispatch(String name) {
        return PutChecks.notCopied(name) || name.equals(Properties.UNIQ_KEY_NAME);
    }

    /** Whether {@code properties} names one of these (its entry keeps its place, with this value). */
    boolean namedIn(Map<String, String> properties) {
        for (String name : names) {
            if (properties.containsKey(name)) return true;
        }
        return false;
    }

    /** Puts these into {@code properties}, the last value ending in {@code number}. */
    void putInto(Map<String, String> properties, long number) {
        int last = names.length - 1;
        for (int i = 0; i < last; i++) properties.put(names[i], values[i]);
        properties.put(names[last], values[last] + number);
    }
}
