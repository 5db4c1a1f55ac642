package io.rmqsource.tools;

import io.rmqsource.errors.RmqError;
import io.rmqsource.store.QueueKey;
import io.rmqsource.store.QueueUnits;
import io.rmqsource.store.StoreConfig;
import io.rmqsource.store.StoreReader;
import java.io.BufferedWriter;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;

/**
 * Every queue of a store as the JVM store layer reads it, as JSON lines (the queue view of the broker's
 * own storeview.jsonl): {@code {"record":"queue","topic","queueId","minOffset","maxOffset"}} then one
 * {@code {"record":"entry","topic","queueId","queueOffset","cqPos","cqSize","cqTagsCode"}} per unit.
 * Args: the store root.  Exit 1 with {@code {"error":{"type","message"}}} on an RmqError.
 */
public final class QueueDumpMain {
    private QueueDumpMain() {
    }

    public static void main(String[] args) {
        PrintWriter out = new PrintWriter(new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8)));
        int code = 0;
        try (StoreReader reader = new StoreReader(args[0], StoreConfig.defaults(), null)) {
            long[] p = new long[4096];
            int[] s = new int[4096];
            long[] c = new long[4096];
            for (QueueKey k : reader.queueKeys()) {
                QueueUnits q = reader.consumeQueue(k.topic, k.queueId);
                long max = reader.queueMaxOffset(q);
                long min = reader.queueMinOffset(q, max);
                String head = "\"topic\":" + json(k.topic) + ",\"queueId\":" + k.queueId;
                out.println("{\"record\":\"queue\"," + head + ",\"minOffset\":" + min + ",\"maxOffset\":" + max + "}");
                for (long off = min; off < max; ) {
                    int n = q.read(off, (int) Math.min(p.length, max - off), p, s, c);
                    if (n == 0) break;
                    for (int i = 0; i < n; i++) {
                        out.println("{\"record\":\"entry\"," + head + ",\"queueOffset\":" + (off + i) + ",\"cqPos\":"
                                + p[i] + ",\"cqSize\":" + s[i] + ",\"cqTagsCode\":" + c[i] + "}");
                    }
                    off += n;
                }
            }
        } catch (RmqError e) {
            out.println("{\"error\":{\"type\":" + json(e.getClass().getSimpleName()) + ",\"message\":"
                    + json(e.getMessage()) + "}}");
            code = 1;
        }
        out.flush();
        System.exit(code);
    }

    private static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            if (ch == '"' || ch == '\\') b.append('\\').append(ch);
            else if (ch < 0x20) b.append(String.format("\\u%04x", (int) ch));
            else b.append(ch);
        }
        return b.append('"').toString();
    }
}
