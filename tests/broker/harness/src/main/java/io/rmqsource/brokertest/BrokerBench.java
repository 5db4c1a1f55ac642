package io.rmqsource.brokertest;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.broker.BrokerController;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.namesrv.NamesrvConfig;
import org.apache.rocketmq.namesrv.NamesrvController;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The broker side of scripts/bench_broker_read.py: a NameServer and Broker with RocketMQ's default file sizes
 * ({@code serve}), and a client JVM ({@code client}) that loads a topic through batch sends and drains it with the
 * official consumers. Both read one command per line on stdin and answer one line {@code @@ <json>} on stdout
 * (RocketMQ's own logging may print other lines there).
 *
 * <pre>
 * serve --store DIR --out DIR [--topic T --queues N] [--set key=value ...]
 *                                                       answers {nsAddr, brokerAddr, version}; then "stop"
 * client --ns HOST:PORT --broker HOST:PORT               then commands:
 *   load TOPIC QUEUES MESSAGES BODY_BYTES TAGS BATCH THREADS   (the topic created by serve --topic)
 *   drain default|lite32|tuned TOPIC EXPECTED            a fresh group each time, from the first offset
 *   quit
 * </pre>
 *
 * A drain answers {mode, ms, startMs, count, bodyBytes, tags: {tag: count}, pulls, settings}: ms from before the
 * consumer's start to the last expected message (shutdown not included).
 */
public final class BrokerBench {
    static final String CLUSTER = "BenchCluster";
    static final String BROKER = "bench-broker-a";
    static final int TUNED_THREADS = 4;
    static final int TUNED_BATCH = 2000;
    static final long DRAIN_TIMEOUT_MS = 600_000;

    final Map<String, String> args = new LinkedHashMap<>();
    final Properties settings = new Properties();
    int groups;

    BrokerBench(String[] argv) {
        for (int i = 1; i < argv.length; i++) {
            String a = argv[i];
            if (a.equals("--set")) {
                String kv = argv[++i];
                int eq = kv.indexOf('=');
                settings.setProperty(kv.substring(0, eq), kv.substring(eq + 1));
            } else if (a.startsWith("--")) {
                args.put(a.substring(2), argv[++i]);
            } else {
                throw new IllegalArgumentException("unknown argument " + a);
            }
        }
    }

    public static void main(String[] argv) throws Exception {
        int rc = 0;
        try {
            BrokerBench b = new BrokerBench(argv);
            switch (argv[0]) {
                case "serve":
                    b.serve();
                    break;
                case "client":
                    b.client();
                    break;
                default:
                    throw new IllegalArgumentException("mode: serve or client, not " + argv[0]);
            }
        } catch (Throwable t) {
            t.printStackTrace();
            rc = 1;
        }
        System.out.flush();
        System.err.flush();
        Runtime.getRuntime().halt(rc);
    }

    static void reply(Map<String, Object> m) {
        synchronized (System.out) {
            System.out.println("@@ " + Json.write(m));
            System.out.flush();
        }
    }

    static String version() {
        return org.apache.rocketmq.common.MQVersion.getVersionDesc(org.apache.rocketmq.common.MQVersion.CURRENT_VERSION);
    }

    // ---------------------------------------------------------------- serve

    void serve() throws Exception {
        File storeDir = new File(args.get("store")).getAbsoluteFile();
        File outDir = new File(args.get("out")).getAbsoluteFile();
        storeDir.mkdirs();
        outDir.mkdirs();
        Set<Integer> taken = new HashSet<>();
        int nsPort = RealBroker.freePort(taken);
        int brokerPort = RealBroker.freePort(taken);
        int haPort = RealBroker.freePort(taken);
        String nsAddr = "127.0.0.1:" + nsPort;

        NamesrvConfig namesrvConfig = new NamesrvConfig();
        namesrvConfig.setKvConfigPath(new File(outDir, "namesrv/kvConfig.json").getPath());
        namesrvConfig.setConfigStorePath(new File(outDir, "namesrv/namesrv.properties").getPath());
        NettyServerConfig nsNetty = new NettyServerConfig();
        nsNetty.setListenPort(nsPort);
        Compat.bindAddress(nsNetty, "127.0.0.1");
        NamesrvController namesrv = new NamesrvController(namesrvConfig, nsNetty);
        RealBroker.check(namesrv.initialize(), "NamesrvController.initialize");
        namesrv.start();

        BrokerConfig brokerConfig = new BrokerConfig();
        MessageStoreConfig storeConfig = new MessageStoreConfig();
        NettyServerConfig netty = new NettyServerConfig();
        NettyClientConfig nettyClient = new NettyClientConfig();
        Properties p = new Properties();
        p.setProperty("brokerClusterName", CLUSTER);
        p.setProperty("brokerName", BROKER);
        p.setProperty("brokerIP1", "127.0.0.1");
        p.setProperty("brokerIP2", "127.0.0.1");
        p.setProperty("namesrvAddr", nsAddr);
        p.setProperty("listenPort", String.valueOf(brokerPort));
        p.setProperty("bindAddress", "127.0.0.1");
        p.setProperty("haListenPort", String.valueOf(haPort));
        p.setProperty("storePathRootDir", storeDir.getPath());
        p.setProperty("storePathCommitLog", new File(storeDir, "commitlog").getPath());
        p.setProperty("autoCreateTopicEnable", "true");
        p.setProperty("traceTopicEnable", "false");
        p.setProperty("deleteWhen", "04");
        p.setProperty("fileReservedTime", "72");
        p.putAll(settings);
        MixAll.properties2Object(p, brokerConfig);
        MixAll.properties2Object(p, storeConfig);
        MixAll.properties2Object(p, netty);
        RealBroker.writeEffectiveConfig(new File(outDir, "broker.properties"), brokerConfig, storeConfig, netty);

        BrokerController broker = new BrokerController(brokerConfig, netty, nettyClient, storeConfig);
        RealBroker.check(broker.initialize(), "BrokerController.initialize");
        broker.start();
        String brokerAddr = "127.0.0.1:" + brokerPort;
        if (args.containsKey("topic")) {
            createTopic(broker, nsAddr, brokerAddr, args.get("topic"), Integer.parseInt(args.getOrDefault("queues", "8")));
        }
        Map<String, Object> ready = new LinkedHashMap<>();
        ready.put("nsAddr", nsAddr);
        ready.put("brokerAddr", brokerAddr);
        ready.put("version", version());
        ready.put("maxTransferCountOnMessageInMemory", storeConfig.getMaxTransferCountOnMessageInMemory());
        ready.put("maxTransferBytesOnMessageInMemory", storeConfig.getMaxTransferBytesOnMessageInMemory());
        reply(ready);

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
            // nothing else to do: the broker serves until stopped
        }
        long t = System.currentTimeMillis();
        broker.shutdown();
        namesrv.shutdown();
        Map<String, Object> done = new LinkedHashMap<>();
        done.put("stopped", true);
        done.put("shutdownMs", System.currentTimeMillis() - t);
        reply(done);
    }

    /** The topic, created through the broker's admin API; returns once the NameServer routes it. */
    static void createTopic(BrokerController broker, String nsAddr, String brokerAddr, String topic, int queues)
        throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(nsAddr);
        admin.setInstanceName("bench-serve-admin");
        admin.start();
        try {
            admin.createAndUpdateTopicConfig(brokerAddr, new TopicConfig(topic, queues, queues, 6));
            long deadline = System.currentTimeMillis() + 60_000;
            long nextRegister = System.currentTimeMillis() + 3_000;
            while (true) {
                try {
                    var route = admin.examineTopicRouteInfo(topic);
                    if (route != null && !route.getQueueDatas().isEmpty()
                        && route.getQueueDatas().get(0).getWriteQueueNums() == queues) {
                        return;
                    }
                } catch (Exception e) {
                    if (System.currentTimeMillis() > deadline) {
                        throw new IllegalStateException("no route for " + topic, e);
                    }
                }
                if (System.currentTimeMillis() > nextRegister) {
                    broker.registerBrokerAll(true, false, true);     // the NameServer has not picked the topic up
                    nextRegister = System.currentTimeMillis() + 3_000;
                }
                Thread.sleep(200);
            }
        } finally {
            admin.shutdown();
        }
    }

    // ---------------------------------------------------------------- client

    void client() throws Exception {
        String ns = args.get("ns");
        String brokerAddr = args.get("broker");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w[0].isEmpty()) {
                continue;
            }
            if (w[0].equals("quit")) {
                break;
            }
            try {
                if (w[0].equals("load")) {
                    reply(load(ns, brokerAddr, w[1], Integer.parseInt(w[2]), Integer.parseInt(w[3]),
                        Integer.parseInt(w[4]), Integer.parseInt(w[5]), Integer.parseInt(w[6]), Integer.parseInt(w[7])));
                } else if (w[0].equals("drain")) {
                    reply(drain(ns, w[1], w[2], Long.parseLong(w[3])));
                } else {
                    throw new IllegalArgumentException("unknown command " + line);
                }
            } catch (Throwable t) {
                t.printStackTrace();
                Map<String, Object> err = new LinkedHashMap<>();
                err.put("error", t.toString());
                reply(err);
            }
        }
    }

    Map<String, Object> load(String ns, String brokerAddr, String topic, int queues, int messages, int bodyBytes,
                             int tags, int batch, int threads) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(ns);
        admin.setInstanceName("bench-admin");
        admin.start();
        try {
            DefaultMQProducer producer = new DefaultMQProducer("bench_pg");
            producer.setNamesrvAddr(ns);
            producer.setInstanceName("bench-producer");
            producer.setSendMsgTimeout(30_000);
            producer.start();
            Random rnd = new Random(7);
            byte[][] bodies = new byte[64][bodyBytes];
            for (byte[] b : bodies) {
                rnd.nextBytes(b);
            }
            String[] tagNames = new String[tags];
            for (int i = 0; i < tags; i++) {
                tagNames[i] = "Tag" + (char) ('A' + i);
            }
            AtomicLong next = new AtomicLong();
            long t0 = System.nanoTime();
            ExecutorService pool = Executors.newFixedThreadPool(threads);
            List<Future<Long>> futures = new ArrayList<>();
            for (int th = 0; th < threads; th++) {
                futures.add(pool.submit(() -> {
                    long sent = 0;
                    while (true) {
                        long first = next.getAndAdd(batch);
                        if (first >= messages) {
                            return sent;
                        }
                        long end = Math.min(messages, first + batch);
                        List<Message> msgs = new ArrayList<>((int) (end - first));
                        for (long i = first; i < end; i++) {
                            msgs.add(new Message(topic, tagNames[(int) (i % tags)], bodies[(int) (i % bodies.length)]));
                        }
                        SendResult r = producer.send(msgs);
                        if (r.getSendStatus() != SendStatus.SEND_OK) {
                            throw new IllegalStateException("batch send: " + r);
                        }
                        sent += msgs.size();
                    }
                }));
            }
            long sent = 0;
            for (Future<Long> f : futures) {
                sent += f.get();
            }
            long sendMs = (System.nanoTime() - t0) / 1_000_000;
            pool.shutdown();
            producer.shutdown();

            // Every message dispatched to its ConsumeQueue before the reads start.
            long dispatched = 0;
            long deadline = System.currentTimeMillis() + 120_000;
            while (System.currentTimeMillis() < deadline) {
                var stats = admin.examineTopicStats(topic);
                dispatched = stats.getOffsetTable().values().stream().mapToLong(o -> o.getMaxOffset()).sum();
                if (dispatched >= messages) {
                    break;
                }
                Thread.sleep(100);
            }
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("sent", sent);
            out.put("sendMs", sendMs);
            out.put("dispatched", dispatched);
            out.put("loadMs", (System.nanoTime() - t0) / 1_000_000);
            return out;
        } finally {
            admin.shutdown();
        }
    }

    static final class Agg {
        long count;
        long bodyBytes;
        long pulls;
        final Map<String, Long> tags = new TreeMap<>();

        void add(MessageExt m) {
            count++;
            bodyBytes += m.getBody() == null ? 0 : m.getBody().length;
            tags.merge(String.valueOf(m.getTags()), 1L, Long::sum);
        }

        void merge(Agg o) {
            count += o.count;
            bodyBytes += o.bodyBytes;
            pulls += o.pulls;
            o.tags.forEach((k, v) -> tags.merge(k, v, Long::sum));
        }
    }

    Map<String, Object> drain(String ns, String mode, String topic, long expected) throws Exception {
        String group = "bench_" + mode + "_" + (++groups) + "_" + System.currentTimeMillis();
        Map<String, Object> settingsOut = new LinkedHashMap<>();
        Agg agg = new Agg();
        long t0 = System.nanoTime();
        long startMs;
        long endNs;
        if (mode.equals("default") || mode.equals("lite32")) {
            DefaultLitePullConsumer c = new DefaultLitePullConsumer(group);
            c.setNamesrvAddr(ns);
            c.setInstanceName(group);
            c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            if (mode.equals("lite32")) {
                c.setPullBatchSize(32);
            }
            c.subscribe(topic, "*");
            settingsOut.put("client", "DefaultLitePullConsumer");
            settingsOut.put("pullBatchSize", c.getPullBatchSize());
            settingsOut.put("pullThreadNums", c.getPullThreadNums());
            settingsOut.put("pullThresholdForQueue", c.getPullThresholdForQueue());
            settingsOut.put("autoCommit", c.isAutoCommit());
            c.start();
            startMs = (System.nanoTime() - t0) / 1_000_000;
            long deadline = System.currentTimeMillis() + DRAIN_TIMEOUT_MS;
            while (agg.count < expected && System.currentTimeMillis() < deadline) {
                List<MessageExt> got = c.poll(1000);
                agg.pulls++;
                for (MessageExt m : got) {
                    agg.add(m);
                }
            }
            endNs = System.nanoTime();
            c.shutdown();
        } else if (mode.equals("tuned")) {
            DefaultMQPullConsumer c = new DefaultMQPullConsumer(group);
            c.setNamesrvAddr(ns);
            c.setInstanceName(group);
            settingsOut.put("client", "DefaultMQPullConsumer");
            settingsOut.put("threads", TUNED_THREADS);
            settingsOut.put("maxNums", TUNED_BATCH);
            c.start();
            List<MessageQueue> mqs = new ArrayList<>(c.fetchSubscribeMessageQueues(topic));
            Collections.sort(mqs);
            startMs = (System.nanoTime() - t0) / 1_000_000;
            ExecutorService pool = Executors.newFixedThreadPool(TUNED_THREADS);
            List<Future<Agg>> futures = new ArrayList<>();
            for (int th = 0; th < TUNED_THREADS; th++) {
                final int me = th;
                futures.add(pool.submit(() -> {
                    Agg local = new Agg();
                    for (int qi = me; qi < mqs.size(); qi += TUNED_THREADS) {
                        MessageQueue mq = mqs.get(qi);
                        long off = c.minOffset(mq);
                        long max = c.maxOffset(mq);
                        while (off < max) {
                            PullResult r = c.pull(mq, "*", off, TUNED_BATCH);
                            local.pulls++;
                            if (r.getPullStatus() == PullStatus.FOUND) {
                                for (MessageExt m : r.getMsgFoundList()) {
                                    local.add(m);
                                }
                            } else if (r.getPullStatus() != PullStatus.NO_NEW_MSG) {
                                throw new IllegalStateException(mq + " at " + off + ": " + r.getPullStatus());
                            }
                            off = r.getNextBeginOffset();
                        }
                    }
                    return local;
                }));
            }
            for (Future<Agg> f : futures) {
                agg.merge(f.get());
            }
            endNs = System.nanoTime();
            pool.shutdown();
            c.shutdown();
        } else {
            throw new IllegalArgumentException("drain mode: default, lite32 or tuned, not " + mode);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("mode", mode);
        out.put("group", group);
        out.put("ms", (endNs - t0) / 1e6);
        out.put("startMs", startMs);
        out.put("count", agg.count);
        out.put("bodyBytes", agg.bodyBytes);
        out.put("tags", agg.tags);
        out.put(mode.equals("tuned") ? "pulls" : "polls", agg.pulls);
        out.put("settings", settingsOut);
        return out;
    }
}
