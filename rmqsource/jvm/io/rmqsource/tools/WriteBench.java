package io.rmqsource.tools;

import io.rmqsource.store.StoreConfig;
import io.rmqsource.store.write.Message;
import io.rmqsource.store.write.MessageStoreWriter;
import io.rmqsource.store.write.PutResult;
import io.rmqsource.store.write.StagedPuts;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The JVM writer benchmark (driven by scripts/bench_jvm_writer.py): MESSAGES messages of BODY_BYTES
 * bytes over 4 topics x 8 queues, each with KEYS, TAGS and a UNIQ_KEY property, put with
 * putAll in chunks of CHUNK (dispatch and IndexFile included; default store config), timed from
 * open to close, messages made per chunk inside the timing (as the Spark sink converts its rows); then a raw sequential write of the same number of CommitLog bytes in 8 MiB writes and
 * one fsync.  Prints one JSON object.
 */
final class WriteBench {
    private WriteBench() {
    }

    /** {@code 0A00000500002A9F} + 16 upper-case hex digits of i. */
    static String uniqKey(long i) {
        char[] c = "0A00000500002A9F0000000000000000".toCharArray();
        for (int k = 31; k >= 16; k--, i >>>= 4) c[k] = "0123456789ABCDEF".charAt((int) (i & 15));
        return new String(c);
    }

    static void run(String[] args, PrintStream out) throws IOException {
        Path root = Path.of(args[1]);
        int n = Integer.parseInt(args[2]);
        int bodyBytes = Integer.parseInt(args[3]);
        int chunk = Integer.parseInt(args[4]);
        String chunkBytes = System.getProperty("rmqsource.chunkBytes");
        if (chunkBytes != null) MessageStoreWriter.chunkBytes = Integer.parseInt(chunkBytes);
        // The same rows as scripts/bench_jvm_writer.py builds for the Python writer (same bytes).
        String[] topics = {"BenchTopicA", "BenchTopicB", "BenchTopicC", "BenchTopicD"};
        String[] tags = {"TagA", "TagB", "TagC"};
        byte[][] bodies = new byte[64][];
        for (int i = 0; i < bodies.length; i++) {
            bodies[i] = new byte[bodyBytes];
            for (int j = 0; j < bodyBytes; j++) bodies[i][j] = (byte) (i * 31 + j * 7);
        }
        long born = 1_700_000_000_000L;
        // Messages are made chunk by chunk inside the timing as the Spark sink converts its rows (a new
        // Message and properties map per row into a reused list; keys and UNIQ_KEY strings per message).
        // Reused Message objects would be old: G1 would refine a card for each one filled.
        List<Message> pool = new ArrayList<>(chunk);
        Map<String, String> overrides = new java.util.LinkedHashMap<>();
        for (int i = 5; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            overrides.put(kv[0], kv[1]);
        }
        StoreConfig config = StoreConfig.defaults().withOverrides(overrides);
        com.sun.management.OperatingSystemMXBean os = (com.sun.management.OperatingSystemMXBean)
                java.lang.management.ManagementFactory.getOperatingSystemMXBean();
        long cpu0 = os.getProcessCpuTime();
        java.lang.management.ThreadMXBean tm = java.lang.management.ManagementFactory.getThreadMXBean();
        long th0 = tm.getCurrentThreadCpuTime();
        long t0 = System.nanoTime();
        // rmqsource.benchStaged=MEMORY_BYTES: the messages staged first (StagedPuts, as the Spark sink's
        // tasks do before the lock), then put with putStaged; the two times are printed apart.
        String stagedMemory = System.getProperty("rmqsource.benchStaged");
        StagedPuts staged = stagedMemory == null ? null
                : new StagedPuts(config, Long.parseLong(stagedMemory), root.resolveSibling(root.getFileName() + "-staged"));
        double stageSecs = 0;
        MessageStoreWriter w = staged == null ? MessageStoreWriter.open(root.toString(), config, 0) : null;
        long ok = 0;
        // rmqsource.benchBuildOnly: only fill the messages (the cost a sink pays before putAll).
        boolean buildOnly = Boolean.getBoolean("rmqsource.benchBuildOnly");
        for (int i = 0; i < n; i += chunk) {
            int k = Math.min(chunk, n - i);
            pool.clear();
            for (int j = 0; j < k; j++) {
                int x = i + j;
                Message m = new Message();
                m.bornHost = "192.168.0.7:50000";
                m.storeHost = "10.0.0.5:10911";
                m.properties = new java.util.LinkedHashMap<>(4);
                pool.add(m);
                m.topic = topics[x & 3];
                m.queueId = (x >>> 2) & 7;
                m.body = bodies[x & 63];
                m.tags = tags[x % 3];
                m.keys = "order-" + x;
                m.bornTimestampMs = born + x;
                m.storeTimestampMs = born + x + 1000;
                m.properties.put("UNIQ_KEY", uniqKey(x));
            }
            if (buildOnly) {
                ok += k;
                continue;
            }
            if (staged != null) {
                for (Message m : pool) if (staged.stage(m) != null) throw new IllegalStateException("refused");
                continue;
            }
            PutResult[] rs = w.putAll(pool);
            for (PutResult r : rs) if (r.ok()) ok++;
        }
        if (staged != null) {
            stageSecs = (System.nanoTime() - t0) / 1e9;
            w = MessageStoreWriter.open(root.toString(), config, 0);
            ok = w.putStaged(staged, null, -1, null).count;
            staged.close();
        }
        long bytes = w.maxPhyOffset();
        StringBuilder threads = new StringBuilder();
        for (long id : tm.getAllThreadIds()) {
            java.lang.management.ThreadInfo ti = tm.getThreadInfo(id);
            long t = tm.getThreadCpuTime(id);
            if (ti != null && t > 50_000_000L) {
                threads.append(threads.length() == 0 ? "" : ",").append('"').append(ti.getThreadName()).append("\":")
                        .append(Math.round(t / 1e7) / 100.0);
            }
        }
        long tClose = System.nanoTime();
        w.close();
        double closeSecs = (System.nanoTime() - tClose) / 1e9;
        double secs = (System.nanoTime() - t0) / 1e9;
        double cpuSecs = (os.getProcessCpuTime() - cpu0) / 1e9;
        double putThreadCpuSecs = (tm.getCurrentThreadCpuTime() - th0) / 1e9;
        // Raw sequential write of the same bytes (the disk's ceiling for the CommitLog alone).
        Path raw = root.resolveSibling(root.getFileName() + "-raw");
        ByteBuffer b = ByteBuffer.allocateDirect(8 << 20);
        long t1 = System.nanoTime();
        long cpu1 = os.getProcessCpuTime();
        try (FileChannel ch = FileChannel.open(raw, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            for (long done = 0; done < bytes; ) {
                b.clear().limit((int) Math.min(b.capacity(), bytes - done));
                done += ch.write(b, done);
            }
            ch.force(true);
        }
        double rawSecs = (System.nanoTime() - t1) / 1e9;
        double rawCpuSecs = (os.getProcessCpuTime() - cpu1) / 1e9;
        Files.deleteIfExists(raw);
        out.println("{\"messages\":" + n + ",\"ok\":" + ok + ",\"commitLogBytes\":" + bytes + ",\"seconds\":" + secs
                + ",\"cpuSeconds\":" + cpuSecs + ",\"putThreadCpuSeconds\":" + putThreadCpuSecs + ",\"closeSeconds\":" + closeSecs + ",\"stageSeconds\":" + stageSecs + ",\"rawSeconds\":" + rawSecs
                + ",\"rawCpuSeconds\":" + rawCpuSecs + ",\"threadCpuSeconds\":{" + threads + "}}");
    }
}
