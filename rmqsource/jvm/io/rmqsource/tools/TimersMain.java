package io.rmqsource.tools;

import io.rmqsource.format.JsonText;
import io.rmqsource.store.StoreConfig;
import io.rmqsource.store.StoreReader;
import io.rmqsource.store.Timers;
import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * {@link Timers#entries} of a store as JSON lines (the fields of timers.py's TimerEntry, snake_case), run as a
 * process so tests compare the JVM twin with the Python one without Spark.
 * Usage: TimersMain ROOT [--topic T]... [--exclude-internal] [KEY=VALUE (MessageStoreConfig)]...
 */
public final class TimersMain {
    private TimersMain() {
    }

    public static void main(String[] args) {
        PrintStream out = new PrintStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16),
                false, StandardCharsets.UTF_8);
        if (args.length < 1) {
            System.err.println("usage: TimersMain ROOT [--topic T]... [KEY=VALUE]...");
            System.exit(2);
        }
        int code = 0;
        try {
            Map<String, String> overrides = new HashMap<>();
            Set<String> topics = null;
            boolean excludeInternal = false;
            for (int i = 1; i < args.length; i++) {
                if (args[i].equals("--exclude-internal")) {
                    excludeInternal = true;
                } else if (args[i].equals("--topic") && i + 1 < args.length) {
                    if (topics == null) topics = new HashSet<>();
                    topics.add(args[++i]);
                } else {
                    int eq = args[i].indexOf('=');
                    overrides.put(args[i].substring(0, eq), args[i].substring(eq + 1));
                }
            }
            try (StoreReader reader = new StoreReader(args[0], StoreConfig.defaults().withOverrides(overrides), null)) {
                for (Timers.Entry e : Timers.entries(reader, topics, excludeInternal)) {
                    out.println("{\"real_topic\":" + JsonText.str(e.realTopic) + ",\"real_queue_id\":" + e.realQueueId
                            + ",\"uniq_key\":" + (e.uniqKey == null ? "null" : JsonText.str(e.uniqKey))
                            + ",\"reconsume_times\":" + e.reconsumeTimes + ",\"deliver_time_ms\":" + e.deliverTimeMs
                            + ",\"delay_level\":" + e.delayLevel + ",\"state\":" + JsonText.str(e.state)
                            + ",\"phy_offset\":" + e.phyOffset + ",\"size\":" + e.size + ",\"queue_offset\":" + e.queueOffset
                            + ",\"tags_code\":" + e.tagsCode + ",\"parked_offset\":" + e.parkedOffset
                            + ",\"parked_store_timestamp_ms\":" + e.parkedStoreTimestampMs + "}");
                }
            }
        } catch (RuntimeException | OutOfMemoryError e) {
            out.println("{\"error\":{\"type\":" + JsonText.str(e.getClass().getSimpleName()) + ",\"message\":"
                    + JsonText.str(String.valueOf(e.getMessage())) + "}}");
            code = 1;
        }
        out.flush();
        System.exit(code);
    }
}
