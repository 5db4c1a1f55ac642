package io.rmqsource.tools;

import io.rmqsource.errors.RmqError;
import io.rmqsource.format.FastJson;
import io.rmqsource.store.StoreConfig;
import io.rmqsource.store.write.AppendedRecord;
import io.rmqsource.store.write.Message;
import io.rmqsource.store.write.MessageStoreWriter;
import io.rmqsource.store.write.PutMessageStatus;
import io.rmqsource.store.write.PutResult;
import io.rmqsource.store.write.StagedPuts;
import io.rmqsource.store.write.TrailingProperties;
import io.rmqsource.store.write.WriteFailedError;
import io.rmqsource.store.write.WriteFiles;
import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * Command-line entry of the JVM writer (what tests and scripts/bench_jvm_writer.py drive):
 *
 * <pre>java -cp rmqsource-spark.jar io.rmqsource.tools.WriteMain put ROOT CONFIG INPUTS [options]
 *   options: --batch N (putAll in batches of N; 0 = one put per message; default 8192)
 *            --from I --to J (lines [I, J) of INPUTS)   --clock MS (a fixed store clock)
 *            --override key=value (store config)        --fail-after-bytes N (injected full disk)
 *            --abandon (let go without a clean shutdown, as a crash)
 *            --flush (flush after each batch, as a sink's commit does)
 *            --hold (after the results, wait for the end of stdin before shutting down: a test kills it there)
 *            --chunk-bytes N (bytes of records per CommitLog write)
 *            --staged MEMORY_BYTES (each batch staged first, StagedPuts with that much memory, then putStaged)
 * java ... WriteMain hold ROOT CONFIG [--timeout-ms N]   (open, print "locked", close when stdin ends)
 * java ... WriteMain scan ROOT CONFIG FROM NAME...       (MessageStoreWriter.scan: one JSON line per record)
 * java ... WriteMain bench ROOT MESSAGES BODY_BYTES CHUNK    (synthetic puts; JSON figures)</pre>
 *
 * {@code put} prints one JSON line per message (the put.jsonl fields plus reason), then
 * {@code {"maxPhyOffset": N}}; an error is {@code {"error": {"type", "message"}}} with exit 1.
 * INPUTS lines are a corpus's inputs.jsonl shape (camelCase fields, base64 body), plus optionally
 * {@code "trailing": [name, value, ...]} and {@code "trailingNumber": N} ({@link TrailingProperties});
 * CONFIG may be "-" (defaults).
 */
public final class WriteMain {
    private WriteMain() {
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16),
                false, StandardCharsets.UTF_8);
        int code = 0;
        try {
            switch (args.length == 0 ? "" : args[0]) {
                case "put" -> put(args, out);
                case "hold" -> hold(args, out);
                case "scan" -> scan(args, out);
                case "bench" -> WriteBench.run(args, out);
                default -> {
                    System.err.println("usage: WriteMain put|hold|bench ...");
                    code = 2;
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
        StringBuilder sb = new StringBuilder();
        io.rmqsource.format.JsonText.quote(sb, s == null ? "" : s);
        return sb.toString();
    }

    static StoreConfig config(String path, Map<String, String> overrides) {
        if (path.equals("-")) return StoreConfig.defaults().withOverrides(overrides);
        return StoreConfig.fromPropertiesFile(path, overrides);
    }

    private static void put(String[] args, PrintStream out) throws IOException {
        String root = args[1];
        int batch = 8192;
        long from = 0;
        long to = Long.MAX_VALUE;
        Long clock = null;
        boolean abandon = false;
        boolean flush = false;
        boolean hold = false;
        long stagedMemory = -1;
        Map<String, String> overrides = new LinkedHashMap<>();
        for (int i = 4; i < args.length; i++) {
            switch (args[i]) {
                case "--batch" -> batch = Integer.parseInt(args[++i]);
                case "--from" -> from = Long.parseLong(args[++i]);
                case "--to" -> to = Long.parseLong(args[++i]);
                case "--clock" -> clock = Long.parseLong(args[++i]);
                case "--abandon" -> abandon = true;
                case "--flush" -> flush = true;
                case "--hold" -> hold = true;
                case "--staged" -> stagedMemory = Long.parseLong(args[++i]);
                case "--chunk-bytes" -> MessageStoreWriter.chunkBytes = Integer.parseInt(args[++i]);
                case "--fail-after-bytes" -> WriteFiles.setFaults(WriteFiles.diskFullAfter(Long.parseLong(args[++i])));
                case "--override" -> {
                    String[] kv = args[++i].split("=", 2);
                    overrides.put(kv[0], kv[1]);
                }
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        List<Message> msgs = new ArrayList<>();
        try (BufferedReader r = Files.newBufferedReader(Path.of(args[3]), StandardCharsets.UTF_8)) {
            String line;
            long n = 0;
            while ((line = r.readLine()) != null) {
                if (line.isBlank()) continue;
                if (n >= from && n < to) msgs.add(fromJson(line));
                n++;
            }
        }
        final Long fixed = clock;
        LongSupplier clk = fixed != null ? () -> fixed : System::currentTimeMillis;
        MessageStoreWriter w = MessageStoreWriter.open(root, config(args[2], overrides), 0, clk);
        List<PutResult> results = new ArrayList<>();
        RmqError failed = null;
        try {
            if (stagedMemory >= 0) {
                int step = batch <= 0 ? 1 : batch;
                for (int i = 0; i < msgs.size(); i += step) {
                    results.addAll(List.of(putStaged(w, msgs.subList(i, Math.min(msgs.size(), i + step)), stagedMemory)));
                    if (flush) w.flush();
                }
            } else if (batch <= 0) {
                for (Message m : msgs) {
                    results.add(w.put(m));
                    if (flush) w.flush();
                }
            } else {
                for (int i = 0; i < msgs.size(); i += batch) {
                    results.addAll(List.of(w.putAll(msgs.subList(i, Math.min(msgs.size(), i + batch)))));
                    if (flush) w.flush();
                }
            }
        } catch (StagedFailure e) {
            results.addAll(List.of(e.results));
            failed = e.error;
        } catch (WriteFailedError e) {
            results.addAll(List.of(e.results()));
            failed = e;
        }
        for (PutResult res : results) out.println(res.toJson());
        out.println("{\"maxPhyOffset\":" + w.maxPhyOffset() + "}");
        if (hold) waitForEndOfStdin(out);
        if (abandon) {
            w.abandon();
        } else if (failed != null) {
            try {
                w.close();          // (on a full disk this fails too: abort stays, the next open recovers)
            } catch (RmqError e) {
                failed.addSuppressed(e);
            }
        } else {
            w.close();
        }
        if (failed != null) throw failed;
    }

    /** A putStaged that failed: the batch's results (the rest UNKNOWN_ERROR), the writer's error. */
    private static final class StagedFailure extends RuntimeException {
        final transient PutResult[] results;
        final WriteFailedError error;

        StagedFailure(PutResult[] results, WriteFailedError error) {
            this.results = results;
            this.error = error;
        }
    }

    /** {@code batch} staged (refusals are final at once), then put with putStaged; results in batch order. */
    private static PutResult[] putStaged(MessageStoreWriter w, List<Message> batch, long memory) throws IOException {
        PutResult[] out = new PutResult[batch.size()];
        int[] ordinal = new int[batch.size()];
        try (StagedPuts staged = new StagedPuts(w.config(), memory, Path.of(System.getProperty("java.io.tmpdir")))) {
            for (int i = 0; i < batch.size(); i++) {
                out[i] = staged.stage(batch.get(i));
                ordinal[i] = out[i] == null ? (int) staged.count() - 1 : -1;
            }
            PutResult[] put = new PutResult[(int) staged.count()];
            WriteFailedError failed = null;
            try {
                w.putStaged(staged, null, -1, put);
            } catch (WriteFailedError e) {
                failed = e;
            }
            for (int i = 0; i < batch.size(); i++) {
                if (out[i] != null) continue;
                out[i] = put[ordinal[i]] != null ? put[ordinal[i]]
                        : PutResult.failed(batch.get(i), PutMessageStatus.UNKNOWN_ERROR, null, failed.getMessage());
            }
            if (failed != null) throw new StagedFailure(out, failed);
        }
        return out;
    }

    private static void hold(String[] args, PrintStream out) throws IOException {
        long timeout = 0;
        for (int i = 3; i < args.length; i++) if (args[i].equals("--timeout-ms")) timeout = Long.parseLong(args[++i]);
        MessageStoreWriter w = MessageStoreWriter.open(args[1], config(args[2], Map.of()), timeout);
        out.println("locked");
        waitForEndOfStdin(out);
        w.close();
        out.println("closed");
    }

    /** What was printed goes out, then the end of stdin is waited for. */
    private static void waitForEndOfStdin(PrintStream out) throws IOException {
        out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (in.readLine() != null) {
            // wait for the end of stdin
        }
    }

    private static void scan(String[] args, PrintStream out) {
        String[] names = java.util.Arrays.copyOfRange(args, 4, args.length);
        try (MessageStoreWriter w = MessageStoreWriter.open(args[1], config(args[2], Map.of()), 0)) {
            for (AppendedRecord r : w.scan(Long.parseLong(args[3]), names)) {
                StringBuilder sb = new StringBuilder("{\"commitLogOffset\":").append(r.commitLogOffset)
                        .append(",\"size\":").append(r.size).append(",\"topic\":").append(json(r.topic))
                        .append(",\"queueId\":").append(r.queueId).append(",\"queueOffset\":").append(r.queueOffset)
                        .append(",\"properties\":{");
                int k = 0;
                for (Map.Entry<String, String> e : r.properties.entrySet()) {
                    if (k++ > 0) sb.append(',');
                    sb.append(json(e.getKey())).append(':').append(json(e.getValue()));
                }
                out.println(sb.append("}}"));
            }
        }
    }

    /** One inputs.jsonl line (MessageExtBrokerInner.from_json_dict). */
    @SuppressWarnings("unchecked")
    static Message fromJson(String line) {
        Map<Object, Object> d = FastJson.parse(line, "<inputs.jsonl>");
        Message m = new Message();
        m.topic = (String) d.get("topic");
        m.queueId = intOf(d.get("queueId"), 0);
        Object body = d.get("body");
        m.body = body == null ? new byte[0] : Base64.getDecoder().decode((String) body);
        m.flag = intOf(d.get("flag"), 0);
        if (d.containsKey("propertiesString")) {
            m.propertiesString = (String) d.get("propertiesString");
        } else if (d.get("properties") instanceof Map) {
            m.properties = new LinkedHashMap<>();
            for (Map.Entry<Object, Object> e : ((Map<Object, Object>) d.get("properties")).entrySet()) {
                m.properties.put(String.valueOf(e.getKey()), e.getValue() == null ? null : (String) e.getValue());
            }
        }
        if (d.get("trailing") instanceof List) {
            m.trailing = new TrailingProperties(((List<Object>) d.get("trailing")).stream()
                    .map(String::valueOf).toArray(String[]::new));
            m.trailingNumber = longOf(d.get("trailingNumber"), 0);
        }
        m.tags = (String) d.get("tags");
        m.keys = (String) d.get("keys");
        m.bornTimestampMs = longOf(d.get("bornTimestamp"), 0);
        if (d.get("bornHost") != null) m.bornHost = (String) d.get("bornHost");
        if (d.get("storeHost") != null) m.storeHost = (String) d.get("storeHost");
        m.sysFlag = intOf(d.get("sysFlag"), 0);
        m.reconsumeTimes = intOf(d.get("reconsumeTimes"), 0);
        m.preparedTransactionOffset = longOf(d.get("preparedTransactionOffset"), 0);
        m.storeTimestampMs = d.get("storeTimestamp") == null ? null : ((Number) d.get("storeTimestamp")).longValue();
        return m;
    }

    private static int intOf(Object v, int dflt) {
        return v == null ? dflt : ((Number) v).intValue();
    }

    private static long longOf(Object v, long dflt) {
        return v == null ? dflt : ((Number) v).longValue();
    }
}
