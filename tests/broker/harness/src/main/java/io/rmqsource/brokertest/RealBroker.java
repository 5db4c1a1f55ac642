package io.rmqsource.brokertest;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.rocketmq.broker.BrokerController;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.namesrv.NamesrvConfig;
import org.apache.rocketmq.namesrv.NamesrvController;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Starts Apache RocketMQ's own NameServer and Broker in this JVM on loopback, drives a workload with the official
 * client, writes what the broker and the consumers answered (expected/sent.jsonl, consumed.jsonl, admin.json) and
 * shuts both down cleanly. With --kill it only sends: after --kill-after acknowledged sends it writes
 * expected/ACKED and keeps sending until the test kills the JVM.
 *
 * With --serve it starts the NameServer and the Broker on an existing store and only consumes (see serve()).
 *
 * With --send-for it keeps a broker sending for that many seconds while a test reads the same store (see
 * liveSend()), then shuts down cleanly.
 *
 * Arguments: --store DIR --out DIR [--seed N] [--messages N] [--kill] [--kill-after N] [--set key=value ...]
 * [--serve --topics T1,T2 --expect N --wait-ms MS [--groups G1,G2]]
 * [--send-for SECONDS [--rate SENDS_PER_SECOND] [--hold-until FILE]]
 * (--set: a BrokerConfig / MessageStoreConfig / NettyServerConfig property, as in a broker.conf file).
 *
 * Compiles against RocketMQ 4.x and 5.x: what differs is class Compat (src/main/java4, src/main/java5). On 4.x
 * the workload has no timer kinds (no timer messages before 5.0).
 */
public final class RealBroker {
    static final String CLUSTER = "RbCluster";
    static final String BROKER = "rb-broker-a";
    static final int TOPICS = 3;
    static final int QUEUES = 4;
    static final String[] TAGS = {"TagA", "TagB", "TagC", "TagD", null, "标签Ω"};
    static final String[] WORDS = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"};

    final Map<String, String> args = new LinkedHashMap<>();
    final Properties settings = new Properties();
    final List<String> rawArgs;
    File storeDir;
    File outDir;
    Random rnd;
    Writer sentOut;
    Writer consumedOut;
    final Object sentLock = new Object();
    final Object consumedLock = new Object();
    final Map<String, Integer> deliveries = new ConcurrentHashMap<>();
    final Set<String> allSeen = ConcurrentHashMap.newKeySet();          // send sequence numbers
    final Set<String> expectedForAll = ConcurrentHashMap.newKeySet();
    final Map<String, Integer> counts = new TreeMap<>();
    String nsAddr;
    String brokerAddr;
    int seq;

    RealBroker(String[] argv) {
        rawArgs = Arrays.asList(argv);
        for (int i = 0; i < argv.length; i++) {
            String a = argv[i];
            if (a.equals("--kill") || a.equals("--serve")) {
                args.put(a.substring(2), "true");
            } else if (a.equals("--set")) {
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
            new RealBroker(argv).run();
        } catch (Throwable t) {
            t.printStackTrace();
            rc = 1;
        }
        System.out.flush();
        System.err.flush();
        Runtime.getRuntime().halt(rc);
    }

    static int freePort(Set<Integer> taken) throws IOException {
        while (true) {
            try (ServerSocket s = new ServerSocket()) {
                s.setReuseAddress(false);
                s.bind(new InetSocketAddress("127.0.0.1", 0));
                int p = s.getLocalPort();
                // The broker also listens on listenPort - 2 (its "fast" port): keep both free.
                if (p > 1100 && !taken.contains(p) && !taken.contains(p - 2) && portFree(p - 2)) {
                    taken.add(p);
                    taken.add(p - 2);
                    return p;
                }
            }
        }
    }

    static boolean portFree(int p) {
        try (ServerSocket s = new ServerSocket()) {
            s.bind(new InetSocketAddress("0.0.0.0", p));
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    void run() throws Exception {
        long t0 = System.currentTimeMillis();
        storeDir = new File(args.get("store")).getAbsoluteFile();
        outDir = new File(args.get("out")).getAbsoluteFile();
        File expected = new File(outDir, "expected");
        expected.mkdirs();
        storeDir.mkdirs();
        rnd = new Random(Long.parseLong(args.getOrDefault("seed", "7")));
        int messages = Integer.parseInt(args.getOrDefault("messages", "400"));
        boolean kill = args.containsKey("kill");

        Set<Integer> taken = new HashSet<>();
        int nsPort = freePort(taken);
        int brokerPort = freePort(taken);
        int haPort = freePort(taken);
        nsAddr = "127.0.0.1:" + nsPort;

        NamesrvConfig namesrvConfig = new NamesrvConfig();
        namesrvConfig.setKvConfigPath(new File(outDir, "namesrv/kvConfig.json").getPath());
        namesrvConfig.setConfigStorePath(new File(outDir, "namesrv/namesrv.properties").getPath());
        NettyServerConfig nsNetty = new NettyServerConfig();
        nsNetty.setListenPort(nsPort);
        Compat.bindAddress(nsNetty, "127.0.0.1");
        NamesrvController namesrv = new NamesrvController(namesrvConfig, nsNetty);
        check(namesrv.initialize(), "NamesrvController.initialize");
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
        p.setProperty("mappedFileSizeCommitLog", String.valueOf(1024 * 1024));
        p.setProperty("mappedFileSizeConsumeQueue", String.valueOf(60 * 20));
        p.setProperty("mappedFileSizeTimerLog", String.valueOf(1024 * 1024));
        p.setProperty("maxIndexNum", "256");
        p.setProperty("maxHashSlotNum", "64");
        p.setProperty("transactionCheckInterval", "2000");
        p.setProperty("autoCreateTopicEnable", "true");
        p.setProperty("traceTopicEnable", "false");
        p.setProperty("enablePropertyFilter", "false");
        // Timers sent with kinds timer_recalled / timer_parked_recalled are recalled (off by default).
        p.setProperty("recallMessageEnable", "true");
        // An 8 s roll window (default 2 days): timers hours ahead are re-parked every few seconds, several
        // wheel records of one message, as a long timer gets on a broker with default settings.
        p.setProperty("timerRollWindowSlot", "8");
        // Nothing expires during a run.
        p.setProperty("deleteWhen", "04");
        p.setProperty("fileReservedTime", "72");
        p.putAll(settings);
        MixAll.properties2Object(p, brokerConfig);
        MixAll.properties2Object(p, storeConfig);
        MixAll.properties2Object(p, netty);
        writeEffectiveConfig(new File(outDir, "broker.properties"), brokerConfig, storeConfig, netty);

        BrokerController broker = new BrokerController(brokerConfig, netty, nettyClient, storeConfig);
        check(broker.initialize(), "BrokerController.initialize");
        broker.start();
        brokerAddr = "127.0.0.1:" + brokerPort;
        log("broker " + brokerAddr + " namesrv " + nsAddr + " store " + storeDir);

        if (args.containsKey("serve")) {
            serve(broker, namesrv, expected, t0);
            return;
        }
        if (args.containsKey("send-for")) {
            liveSend(broker, namesrv, expected, t0);
            return;
        }
        sentOut = new OutputStreamWriter(new FileOutputStream(new File(expected, "sent.jsonl")), StandardCharsets.UTF_8);
        consumedOut = new OutputStreamWriter(new FileOutputStream(new File(expected, "consumed.jsonl")), StandardCharsets.UTF_8);

        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(nsAddr);
        admin.setInstanceName("rb-admin");
        admin.setAdminExtGroup("rb_admin_group");
        admin.start();
        List<String> topics = new ArrayList<>();
        for (int i = 0; i < TOPICS; i++) {
            String topic = "rb_topic_" + i;
            topics.add(topic);
            TopicConfig tc = new TopicConfig(topic, QUEUES, QUEUES, 6);
            admin.createAndUpdateTopicConfig(brokerAddr, tc);
        }
        for (String topic : topics) {
            waitForRoute(admin, topic);
        }

        DefaultMQProducer producer = new DefaultMQProducer("rb_pg");
        producer.setNamesrvAddr(nsAddr);
        producer.setInstanceName("rb-producer");
        producer.setSendMsgTimeout(15000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        TransactionMQProducer txProducer = new TransactionMQProducer("rb_pg_tx");
        txProducer.setNamesrvAddr(nsAddr);
        txProducer.setInstanceName("rb-producer-tx");
        txProducer.setSendMsgTimeout(15000);
        txProducer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return "rollback".equals(msg.getUserProperty("rb_tx"))
                    ? LocalTransactionState.ROLLBACK_MESSAGE : LocalTransactionState.COMMIT_MESSAGE;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                LocalTransactionState s = "rollback".equals(msg.getUserProperty("rb_tx"))
                    ? LocalTransactionState.ROLLBACK_MESSAGE : LocalTransactionState.COMMIT_MESSAGE;
                Map<String, Object> line = new LinkedHashMap<>();
                line.put("record", "tx_check");
                line.put("uniqKey", msg.getProperty(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX));
                line.put("returned", s.name());
                line.put("checkedTopic", msg.getTopic());
                line.put("checkedQueueId", msg.getQueueId());
                line.put("checkedQueueOffset", msg.getQueueOffset());
                line.put("checkedCommitLogOffset", msg.getCommitLogOffset());
                writeSent(line);
                return s;
            }
        });
        txProducer.start();

        Map<String, Object> groups = new LinkedHashMap<>();
        DefaultMQPushConsumer all = null;
        DefaultLitePullConsumer lag = null;
        Thread lagThread = null;
        final java.util.concurrent.atomic.AtomicInteger lagPolled = new java.util.concurrent.atomic.AtomicInteger();
        AtomicBoolean lagRunning = new AtomicBoolean(true);
        if (!kill) {
            all = new DefaultMQPushConsumer("rb_all");
            all.setNamesrvAddr(nsAddr);
            all.setInstanceName("rb-all");
            all.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            all.setPersistConsumerOffsetInterval(1000);
            Map<String, String> subs = new LinkedHashMap<>();
            for (String topic : topics) {
                all.subscribe(topic, "*");
                subs.put(topic, "*");
            }
            all.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    recordConsume("rb_all", "push", m);
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            all.start();
            groups.put("rb_all", group("DefaultMQPushConsumer", "push", subs, "acks everything"));

            lag = new DefaultLitePullConsumer("rb_lag");
            lag.setNamesrvAddr(nsAddr);
            lag.setInstanceName("rb-lag");
            lag.setAutoCommit(false);
            lag.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            lag.setPullBatchSize(8);
            for (String topic : topics) {
                lag.subscribe(topic, "*");
            }
            lag.start();
            final DefaultLitePullConsumer lagc = lag;
            lagThread = new Thread(() -> {
                while (lagRunning.get()) {
                    for (MessageExt m : lagc.poll(200)) {
                        recordConsume("rb_lag", "litepull", m);
                        lagPolled.incrementAndGet();
                    }
                    lagc.commitSync();
                }
            }, "rb-lag-poll");
            lagThread.start();
            groups.put("rb_lag", group("DefaultLitePullConsumer", "litepull", subs,
                "commits what it polled; stopped half-way through the sends: it has lag"));
        }

        // The sends.
        int killAfter = Integer.parseInt(args.getOrDefault("kill-after", String.valueOf(messages)));
        boolean lagStopped = kill;
        while (kill || seq < messages) {
            if (!lagStopped && seq >= messages / 2) {
                // a quick machine can send half the messages before the lite pull consumer's first poll: the
                // group is to have consumed some (a committed offset) and lag, so it gets up to 30 s for a first one
                long deadline = System.currentTimeMillis() + 30_000;
                while (lagPolled.get() == 0 && System.currentTimeMillis() < deadline) {
                    Thread.sleep(100);
                }
                lagRunning.set(false);
                lagThread.join();
                lag.commitSync();
                lag.shutdown();
                lagStopped = true;
                log("rb_lag stopped at seq " + seq);
            }
            sendOne(producer, txProducer, topics, kill);
            if (kill && seq >= killAfter && !new File(expected, "ACKED").exists()) {
                synchronized (sentLock) {
                    sentOut.flush();
                }
                Files.write(new File(expected, "ACKED").toPath(), String.valueOf(seq).getBytes(StandardCharsets.UTF_8));
                log("ACKED after " + seq + " sends; sending on until killed");
            }
            if (kill && seq > killAfter) {
                Thread.sleep(2);
            }
        }
        synchronized (sentLock) {
            sentOut.flush();
        }

        // Drain: rb_all receives every message that is due (parked delays/timers and rollbacks are not).
        long drainDeadline = System.currentTimeMillis() + 90_000;
        while (System.currentTimeMillis() < drainDeadline && !allSeen.containsAll(expectedForAll)) {
            Thread.sleep(200);
        }
        boolean drainComplete = allSeen.containsAll(expectedForAll);
        log("drain complete: " + drainComplete + " (" + allSeen.size() + " seen, " + expectedForAll.size() + " due)");
        Thread.sleep(1500);   // the push consumer's last offset commit (every 1 s)
        all.shutdown();
        Thread.sleep(1000);   // oneway offset updates sent at shutdown
        producer.shutdown();
        txProducer.shutdown();

        Map<String, Object> adminJson = new LinkedHashMap<>();
        adminJson.put("killed", false);
        Map<String, Object> harness = new LinkedHashMap<>();
        harness.put("program", "RealBroker");
        harness.put("rocketmqVersion", org.apache.rocketmq.common.MQVersion.getVersionDesc(
            org.apache.rocketmq.common.MQVersion.CURRENT_VERSION));
        harness.put("args", rawArgs);
        harness.put("nsAddr", nsAddr);
        harness.put("brokerAddr", brokerAddr);
        harness.put("brokerName", BROKER);
        harness.put("cluster", CLUSTER);
        harness.put("storePathRootDir", storeDir.getPath());
        harness.put("topics", topics);
        harness.put("queuesPerTopic", QUEUES);
        harness.put("groups", groups);
        harness.put("sendsPerKind", counts);
        harness.put("drainComplete", drainComplete);
        adminJson.put("harness", harness);

        log("consumers and producers stopped; admin snapshot");
        Map<String, Object> topicStats = new TreeMap<>();
        Set<String> allTopics = new TreeSet<String>(admin.fetchAllTopicList().getTopicList());
        for (String topic : allTopics) {
            try {
                var table = admin.examineTopicStats(topic);
                List<Map<String, Object>> queues = new ArrayList<>();
                List<MessageQueue> mqs = new ArrayList<>(table.getOffsetTable().keySet());
                Collections.sort(mqs);
                for (MessageQueue mq : mqs) {
                    var off = table.getOffsetTable().get(mq);
                    Map<String, Object> q = new LinkedHashMap<>();
                    q.put("queueId", mq.getQueueId());
                    q.put("brokerName", mq.getBrokerName());
                    q.put("minOffset", off.getMinOffset());
                    q.put("maxOffset", off.getMaxOffset());
                    q.put("lastUpdateTimestamp", off.getLastUpdateTimestamp());
                    queues.add(q);
                }
                topicStats.put(topic, queues);
            } catch (Exception e) {
                log("topicStats " + topic + ": " + e);
            }
        }
        adminJson.put("topicStats", topicStats);
        Map<String, Object> consumeStats = new TreeMap<>();
        for (String g : groups.keySet()) {
            @SuppressWarnings("unchecked")
            Map<String, String> subs = (Map<String, String>) ((Map<String, Object>) groups.get(g)).get("subscriptions");
            var cs = withRoutes(broker, () -> {
                try {
                    return admin.examineConsumeStats(g);
                } catch (MQClientException e) {
                    // The admin finds the brokers through the route of the group's retry topic, which a group that
                    // never sent a message back may not have: then through each subscribed topic's, merged.
                    if (e.getResponseCode() != 17) throw e;
                    var merged = admin.examineConsumeStats(g, subs.keySet().iterator().next());
                    for (String t : subs.keySet()) {
                        var more = admin.examineConsumeStats(g, t);
                        merged.getOffsetTable().putAll(more.getOffsetTable());
                    }
                    return merged;
                }
            });
            Map<String, Object> gj = new LinkedHashMap<>();
            gj.put("consumeTps", cs.getConsumeTps());
            gj.put("totalDiff", cs.computeTotalDiff());
            List<Map<String, Object>> queues = new ArrayList<>();
            List<MessageQueue> mqs = new ArrayList<>(cs.getOffsetTable().keySet());
            Collections.sort(mqs);
            for (MessageQueue mq : mqs) {
                var w = cs.getOffsetTable().get(mq);
                Map<String, Object> q = new LinkedHashMap<>();
                q.put("topic", mq.getTopic());
                q.put("queueId", mq.getQueueId());
                q.put("brokerOffset", w.getBrokerOffset());
                q.put("consumerOffset", w.getConsumerOffset());
                q.put("pullOffset", Compat.pullOffset(w));
                q.put("lastTimestamp", w.getLastTimestamp());
                q.put("diff", w.getBrokerOffset() - w.getConsumerOffset());
                queues.add(q);
            }
            gj.put("queues", queues);
            consumeStats.put(g, gj);
        }
        adminJson.put("consumeStats", consumeStats);
        Map<String, Object> engine = new LinkedHashMap<>();
        engine.put("minPhyOffset", broker.getMessageStore().getMinPhyOffset());
        engine.put("maxPhyOffset", broker.getMessageStore().getMaxPhyOffset());
        Map<String, Object> cot = new TreeMap<>();
        broker.getConsumerOffsetManager().getOffsetTable().forEach((k, v) -> cot.put(k, new TreeMap<>(v)));
        engine.put("consumerOffsetTable", cot);
        adminJson.put("engine", engine);
        admin.shutdown();

        synchronized (consumedLock) {
            consumedOut.close();
        }
        synchronized (sentLock) {
            sentOut.close();
        }
        log("admin snapshot taken; broker shutdown");
        broker.shutdown();
        log("broker shut down");
        namesrv.shutdown();
        harness.put("wallMs", System.currentTimeMillis() - t0);
        Files.write(new File(expected, "admin.json").toPath(), Json.write(adminJson).getBytes(StandardCharsets.UTF_8));
        Files.write(new File(expected, "DONE").toPath(), new byte[0]);
        log("clean shutdown after " + (System.currentTimeMillis() - t0) + " ms");
    }

    /**
     * --send-for SECONDS: creates topics lv_topic_0..2 (4 queues each), starts a push consumer group rb_live that
     * acks everything (so the broker also commits offsets while it runs) and sends synchronously at --rate sends
     * per second (default 40) for SECONDS (with --hold-until FILE: once the topics are routed it writes
     * expected/READY and waits for FILE before the first send): kinds normal, props, multikey, tiny, order, batch, big (compressed),
     * each with user property rb_seq. Every send is a line of expected/sent.jsonl, flushed as it is written: a
     * SEND_OK line on disk means the broker acknowledged that message. expected/SENDING appears after the first
     * acknowledged send, expected/SENT after the last; then the producer and consumer stop, expected/admin.json
     * gets the topics' topicStats and the broker shuts down cleanly (expected/DONE).
     */
    void liveSend(BrokerController broker, NamesrvController namesrv, File expected, long t0) throws Exception {
        sentOut = new OutputStreamWriter(new FileOutputStream(new File(expected, "sent.jsonl")), StandardCharsets.UTF_8);
        consumedOut = new OutputStreamWriter(new FileOutputStream(new File(expected, "consumed.jsonl")), StandardCharsets.UTF_8);
        long sendForMs = (long) (Double.parseDouble(args.get("send-for")) * 1000);
        double rate = Double.parseDouble(args.getOrDefault("rate", "40"));
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(nsAddr);
        admin.setInstanceName("rb-live-admin");
        admin.setAdminExtGroup("rb_admin_group");
        admin.start();
        List<String> topics = new ArrayList<>();
        for (int i = 0; i < TOPICS; i++) {
            String topic = "lv_topic_" + i;
            topics.add(topic);
            admin.createAndUpdateTopicConfig(brokerAddr, new TopicConfig(topic, QUEUES, QUEUES, 6));
        }
        for (String topic : topics) {
            waitForRoute(admin, topic);
        }
        DefaultMQProducer producer = new DefaultMQProducer("rb_live_pg");
        producer.setNamesrvAddr(nsAddr);
        producer.setInstanceName("rb-live-producer");
        producer.setSendMsgTimeout(15000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("rb_live");
        consumer.setNamesrvAddr(nsAddr);
        consumer.setInstanceName("rb-live");
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPersistConsumerOffsetInterval(1000);
        for (String topic : topics) {
            consumer.subscribe(topic, "*");
        }
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                recordConsume("rb_live", "push", m);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();

        String hold = args.get("hold-until");
        if (hold != null) {   // the test starts its reader first, then lets the sends begin
            Files.write(new File(expected, "READY").toPath(), new byte[0]);
            long holdDeadline = System.currentTimeMillis() + 300_000;
            while (!new File(hold).exists() && System.currentTimeMillis() < holdDeadline) {
                Thread.sleep(100);
            }
            log("hold released");
        }
        long start = System.currentTimeMillis();
        long deadline = start + sendForMs;
        File sending = new File(expected, "SENDING");
        int sends = 0;
        while (System.currentTimeMillis() < deadline) {
            sendOne(producer, null, topics, false);
            sends++;
            if (!sending.exists() && !expectedForAll.isEmpty()) {
                Files.write(sending.toPath(), String.valueOf(seq).getBytes(StandardCharsets.UTF_8));
                log("SENDING: first sends acknowledged");
            }
            long next = start + (long) (sends * 1000 / rate);
            long now = System.currentTimeMillis();
            if (next > now) {
                Thread.sleep(next - now);
            }
        }
        synchronized (sentLock) {
            sentOut.flush();
        }
        Files.write(new File(expected, "SENT").toPath(), String.valueOf(seq).getBytes(StandardCharsets.UTF_8));
        log("sent for " + (System.currentTimeMillis() - start) + " ms: " + seq + " messages, "
            + expectedForAll.size() + " SEND_OK, kinds " + counts);
        producer.shutdown();
        long drainDeadline = System.currentTimeMillis() + 20_000;
        while (System.currentTimeMillis() < drainDeadline && !allSeen.containsAll(expectedForAll)) {
            Thread.sleep(200);
        }
        Thread.sleep(1500);   // the push consumer's last offset commit (every 1 s)
        consumer.shutdown();
        Map<String, Object> adminJson = new LinkedHashMap<>();
        Map<String, Object> harness = new LinkedHashMap<>();
        harness.put("program", "RealBroker");
        harness.put("mode", "send-for");
        harness.put("rocketmqVersion", org.apache.rocketmq.common.MQVersion.getVersionDesc(
            org.apache.rocketmq.common.MQVersion.CURRENT_VERSION));
        harness.put("args", rawArgs);
        harness.put("topics", topics);
        harness.put("queuesPerTopic", QUEUES);
        harness.put("sendsPerKind", counts);
        harness.put("sendOk", expectedForAll.size());
        harness.put("drainComplete", allSeen.containsAll(expectedForAll));
        adminJson.put("harness", harness);
        Map<String, Object> topicStats = new TreeMap<>();
        for (String topic : topics) {
            var table = admin.examineTopicStats(topic);
            List<Map<String, Object>> queues = new ArrayList<>();
            List<MessageQueue> mqs = new ArrayList<>(table.getOffsetTable().keySet());
            Collections.sort(mqs);
            for (MessageQueue mq : mqs) {
                var off = table.getOffsetTable().get(mq);
                Map<String, Object> q = new LinkedHashMap<>();
                q.put("queueId", mq.getQueueId());
                q.put("minOffset", off.getMinOffset());
                q.put("maxOffset", off.getMaxOffset());
                queues.add(q);
            }
            topicStats.put(topic, queues);
        }
        adminJson.put("topicStats", topicStats);
        admin.shutdown();
        synchronized (consumedLock) {
            consumedOut.close();
        }
        synchronized (sentLock) {
            sentOut.close();
        }
        log("producer and consumer stopped; broker shutdown");
        broker.shutdown();
        namesrv.shutdown();
        harness.put("wallMs", System.currentTimeMillis() - t0);
        Files.write(new File(expected, "admin.json").toPath(), Json.write(adminJson).getBytes(StandardCharsets.UTF_8));
        Files.write(new File(expected, "DONE").toPath(), new byte[0]);
        log("clean shutdown after " + (System.currentTimeMillis() - t0) + " ms");
    }

    /**
     * --serve: the broker was started on a store it did not write (--store, not wiped); no topic is created and
     * no admin command changes anything. For each topic of --topics a DefaultLitePullConsumer (group
     * rb_serve) is assigned every queue the route names, seeks to each queue's start and polls until --expect
     * messages came or --wait-ms passed. Every message goes to expected/consumed.jsonl (group rb_serve, mode
     * litepull, receivedAtMs), the route's queue numbers to expected/routes.json; then a clean shutdown.
     * With --groups, each group's committed offsets as the broker loaded them (before anything is
     * consumed, read from the broker's ConsumerOffsetManager) go to expected/groups.json:
     * {group: [{topic, queueId, consumerOffset}]}.
     */
    void serve(BrokerController broker, NamesrvController namesrv, File expected, long t0) throws Exception {
        consumedOut = new OutputStreamWriter(new FileOutputStream(new File(expected, "consumed.jsonl")), StandardCharsets.UTF_8);
        List<String> topics = Arrays.asList(args.get("topics").split(","));
        int expect = Integer.parseInt(args.getOrDefault("expect", "0"));
        long waitMs = Long.parseLong(args.getOrDefault("wait-ms", "60000"));
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(nsAddr);
        admin.setInstanceName("rb-serve-admin");
        admin.start();
        Map<String, Object> routes = new TreeMap<>();
        long routeDeadline = System.currentTimeMillis() + 30_000;
        for (String topic : topics) {
            while (true) {                      // the broker registers its topics.json with the NameServer
                try {
                    var route = admin.examineTopicRouteInfo(topic);
                    if (route != null && !route.getQueueDatas().isEmpty()) {
                        routes.put(topic, Map.of("readQueueNums", route.getQueueDatas().get(0).getReadQueueNums(),
                            "writeQueueNums", route.getQueueDatas().get(0).getWriteQueueNums()));
                        break;
                    }
                } catch (Exception e) {
                    if (System.currentTimeMillis() > routeDeadline) {
                        routes.put(topic, Map.of("error", String.valueOf(e.getMessage())));
                        break;
                    }
                }
                Thread.sleep(200);
            }
        }
        if (args.containsKey("groups")) {       // the broker's own ConsumerOffsetManager, as it loaded the store
            Map<String, Object> groupStats = new TreeMap<>();
            for (String g : args.get("groups").split(",")) {
                List<Map<String, Object>> queues = new ArrayList<>();
                for (var e : new TreeMap<>(broker.getConsumerOffsetManager().getOffsetTable()).entrySet()) {
                    String[] tg = e.getKey().split("@");
                    if (tg.length != 2 || !tg[1].equals(g)) continue;
                    for (var q : new TreeMap<>(e.getValue()).entrySet()) {
                        Map<String, Object> row = new LinkedHashMap<>();
                        row.put("topic", tg[0]);
                        row.put("queueId", q.getKey());
                        row.put("consumerOffset", q.getValue());
                        queues.add(row);
                    }
                }
                groupStats.put(g, queues);
            }
            Files.write(new File(expected, "groups.json").toPath(), Json.write(groupStats).getBytes(StandardCharsets.UTF_8));
        }
        admin.shutdown();
        Files.write(new File(expected, "routes.json").toPath(), Json.write(routes).getBytes(StandardCharsets.UTF_8));
        DefaultLitePullConsumer c = new DefaultLitePullConsumer("rb_serve");
        c.setNamesrvAddr(nsAddr);
        c.setInstanceName("rb-serve");
        c.setAutoCommit(false);
        c.setPullBatchSize(32);
        c.start();
        List<MessageQueue> all = new ArrayList<>();
        for (String topic : topics) {
            if (routes.get(topic) instanceof Map && ((Map<?, ?>) routes.get(topic)).containsKey("error")) continue;
            all.addAll(c.fetchMessageQueues(topic));
        }
        c.assign(all);
        for (MessageQueue mq : all) seekToStart(c, mq);
        int got = 0;
        long deadline = System.currentTimeMillis() + waitMs;
        while (got < expect && System.currentTimeMillis() < deadline) {
            for (MessageExt m : c.poll(500)) {
                recordConsume("rb_serve", "litepull", m);
                got++;
            }
        }
        c.shutdown();
        synchronized (consumedLock) {
            consumedOut.close();
        }
        log("served " + got + " of " + expect + " messages; broker shutdown");
        broker.shutdown();
        namesrv.shutdown();
        Files.write(new File(expected, "DONE").toPath(), new byte[0]);
        log("clean shutdown after " + (System.currentTimeMillis() - t0) + " ms");
    }

    /**
     * seek asks the broker for the queue's min and max offsets; on a loaded machine the first request to a broker
     * that just finished recovery can fail to send (RemotingSendRequestException), so it is tried again for 30 s.
     */
    static void seekToStart(DefaultLitePullConsumer c, MessageQueue mq) throws Exception {
        long deadline = System.currentTimeMillis() + 30_000;
        while (true) {
            try {
                c.seek(mq, 0);
                return;
            } catch (MQClientException e) {
                if (System.currentTimeMillis() > deadline) throw e;
                Thread.sleep(500);
            }
        }
    }

    /**
     * An admin call that asks the NameServer for topic routes. A topic the broker created since its last
     * registration (every 30 s) has no route yet ("No topic route info", code 17), so the broker registers again
     * and the call is tried again, for up to 30 s.
     */
    static <T> T withRoutes(BrokerController broker, java.util.concurrent.Callable<T> call) throws Exception {
        long deadline = System.currentTimeMillis() + 30_000;
        while (true) {
            try {
                return call.call();
            } catch (MQClientException e) {
                if (e.getResponseCode() != 17 || System.currentTimeMillis() > deadline) throw e;
                broker.registerBrokerAll(true, false, true);
                Thread.sleep(500);
            }
        }
    }

    static Map<String, Object> group(String client, String mode, Map<String, String> subs, String behaviour) {
        Map<String, Object> g = new LinkedHashMap<>();
        g.put("client", client);
        g.put("mode", mode);
        g.put("subscriptions", subs);
        g.put("behaviour", behaviour);
        return g;
    }

    void waitForRoute(DefaultMQAdminExt admin, String topic) throws InterruptedException {
        long deadline = System.currentTimeMillis() + 30_000;
        while (true) {
            try {
                var route = admin.examineTopicRouteInfo(topic);
                if (route != null && !route.getQueueDatas().isEmpty()
                    && route.getQueueDatas().get(0).getWriteQueueNums() == QUEUES) {
                    return;
                }
            } catch (Exception e) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("no route for " + topic, e);
                }
            }
            Thread.sleep(200);
        }
    }

    /** The kinds of the default workload, each as often as it is picked. */
    static final String[] FULL_KINDS = {"plain", "plain", "plain", "normal", "normal", "normal", "multikey", "multikey",
        "props", "props", "big", "big", "big", "big", "tiny", "order", "order", "order", "batch", "batch", "batch", "delay",
        "delay_parked", "timer", "timer_parked", "timer_recalled", "timer_parked_recalled", "tx_commit", "tx_rollback"};
    /** On a line without timer messages (4.x): the same without the timer kinds. */
    static final String[] FULL_KINDS_NO_TIMERS =
        Arrays.stream(FULL_KINDS).filter(k -> !k.startsWith("timer")).toArray(String[]::new);

    String pickKind(boolean kill) {
        String[] kinds = args.containsKey("send-for")
            ? new String[] {"normal", "normal", "normal", "props", "multikey", "tiny", "order", "batch", "big"}
            : kill
            ? new String[] {"plain", "normal", "props", "multikey", "big", "batch"}
            : Compat.TIMERS ? FULL_KINDS : FULL_KINDS_NO_TIMERS;
        return kinds[rnd.nextInt(kinds.length)];
    }

    String body(int s, String kind, int minLen) {
        StringBuilder sb = new StringBuilder("rb seq=").append(s).append(" kind=").append(kind);
        while (sb.length() < minLen) {
            sb.append(' ').append(WORDS[rnd.nextInt(WORDS.length)]);
        }
        return sb.toString();
    }

    Message newMessage(String topic, String kind) {
        int s = seq++;
        String text;
        if (kind.equals("big")) {
            // 8-96 KiB that deflate only halves: a few of them roll the 1 MiB CommitLog files.
            StringBuilder sb = new StringBuilder(body(s, kind, 0));
            int len = 8192 + rnd.nextInt(88 * 1024);
            while (sb.length() < len) {
                sb.append(rnd.nextInt(10) == 0 ? ' ' : (char) ('a' + rnd.nextInt(16)));
            }
            text = sb.toString();
        } else if (kind.equals("tiny")) {
            text = "x";
        } else {
            text = body(s, kind, 40 + rnd.nextInt(300));
        }
        Message m = new Message(topic, text.getBytes(StandardCharsets.UTF_8));
        String tag = TAGS[rnd.nextInt(TAGS.length)];
        if (tag != null && !kind.equals("plain")) {
            m.setTags(tag);
        } else if (kind.equals("plain")) {
            m.setTags("TagA");
        }
        if (kind.equals("multikey")) {
            List<String> keys = new ArrayList<>();
            int n = 2 + rnd.nextInt(3);
            for (int i = 0; i < n; i++) {
                keys.add("k-" + s + "-" + i);
            }
            m.setKeys(keys);
        } else {
            m.setKeys("k-" + s);
        }
        if (!kind.equals("plain")) {
            m.putUserProperty("rb_seq", String.valueOf(s));
        }
        if (kind.equals("props")) {
            String[] vals = {"a=b", "c:d", "e;f", "ünïcödé", "😀 emoji", "plain"};
            int n = 1 + rnd.nextInt(4);
            for (int i = 0; i < n; i++) {
                m.putUserProperty("rb_p" + i, vals[rnd.nextInt(vals.length)]);
            }
        }
        return m;
    }

    void sendOne(DefaultMQProducer producer, TransactionMQProducer txProducer, List<String> topics, boolean kill) {
        String kind = pickKind(kill);
        String topic = kind.equals("order") ? topics.get(0) : topics.get(rnd.nextInt(topics.size()));
        counts.merge(kind, 1, Integer::sum);
        long now = System.currentTimeMillis();
        if (kind.equals("batch")) {
            int n = 2 + rnd.nextInt(4);
            List<Message> batch = new ArrayList<>();
            int first = seq;
            for (int i = 0; i < n; i++) {
                batch.add(newMessage(topic, kind));
            }
            SendResult r = null;
            Throwable err = null;
            try {
                r = producer.send(batch);
            } catch (Throwable t) {
                err = t;
            }
            for (int i = 0; i < n; i++) {
                Message m = batch.get(i);
                Map<String, Object> line = sentLine(first + i, kind, m, now);
                if (r != null) {
                    Map<String, Object> res = result(r);
                    String[] ids = r.getMsgId() == null ? new String[0] : r.getMsgId().split(",");
                    String[] offIds = r.getOffsetMsgId() == null ? new String[0] : r.getOffsetMsgId().split(",");
                    res.put("msgId", i < ids.length ? ids[i] : null);
                    res.put("offsetMsgId", i < offIds.length ? offIds[i] : null);
                    res.put("queueOffset", r.getQueueOffset() + i);
                    res.put("queueOffsetDerived", true);
                    Map<String, Object> b = new LinkedHashMap<>();
                    b.put("firstSeq", first);
                    b.put("index", i);
                    b.put("size", n);
                    b.put("rawMsgId", r.getMsgId());
                    b.put("rawOffsetMsgId", r.getOffsetMsgId());
                    line.put("batch", b);
                    line.put("result", res);
                    if (r.getSendStatus().name().equals("SEND_OK")) {
                        expectedForAll.add(String.valueOf(first + i));
                    }
                } else {
                    line.put("error", error(err));
                }
                writeSent(line);
            }
            return;
        }
        Message m = newMessage(topic, kind);
        boolean due = true;
        switch (kind) {
            case "delay":
                m.setDelayTimeLevel(1 + rnd.nextInt(2));
                break;
            case "delay_parked":
                m.setDelayTimeLevel(18);
                due = false;
                break;
            case "timer":
                Compat.deliverAt(m, now + 2000 + rnd.nextInt(1000));
                break;
            case "timer_recalled":
                Compat.deliverAt(m, now + 3000 + rnd.nextInt(1000));
                due = false;
                break;
            case "timer_parked":
            case "timer_parked_recalled":
                Compat.deliverAt(m, now + 3 * 3600_000L + rnd.nextInt(3 * 3600_000));
                due = false;
                break;
            case "tx_rollback":
                m.putUserProperty("rb_tx", "rollback");
                due = false;
                break;
            case "tx_commit":
                m.putUserProperty("rb_tx", "commit");
                break;
            default:
                break;
        }
        Map<String, Object> line = sentLine(seq - 1, kind, m, now);
        try {
            SendResult r;
            if (kind.startsWith("tx_")) {
                r = txProducer.sendMessageInTransaction(m, null);
            } else if (kind.equals("order")) {
                // One queue gets more than a ConsumeQueue file's 60 units: its CQ files roll.
                r = producer.send(m, (mqs, msg, arg) -> mqs.get(1 % mqs.size()), null);
            } else {
                r = producer.send(m);
            }
            Map<String, Object> res = result(r);
            if (r instanceof org.apache.rocketmq.client.producer.TransactionSendResult) {
                var ts = (org.apache.rocketmq.client.producer.TransactionSendResult) r;
                res.put("localTransactionState", ts.getLocalTransactionState() == null ? null
                    : ts.getLocalTransactionState().name());
            }
            line.put("result", res);
            if (kind.endsWith("_recalled") && r.getSendStatus().name().equals("SEND_OK")) {
                line.put("recall", recall(producer, m.getTopic(), r));
            }
            if (due && r.getSendStatus().name().equals("SEND_OK")) {
                expectedForAll.add(String.valueOf(seq - 1));
            }
        } catch (Throwable t) {
            line.put("error", error(t));
        }
        // The properties the client set (UNIQ_KEY among them) are known only after the send.
        line.put("uniqKey", m.getProperty(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX));
        line.put("properties", new TreeMap<>(m.getProperties()));
        writeSent(line);
    }

    Map<String, Object> sentLine(int s, String kind, Message m, long now) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("record", "send");
        line.put("seq", s);
        line.put("kind", kind);
        line.put("topic", m.getTopic());
        line.put("tags", m.getTags());
        line.put("keys", m.getKeys() == null ? List.of() : Arrays.asList(m.getKeys().split(" ")));
        Map<String, String> user = new TreeMap<>();
        for (Map.Entry<String, String> e : m.getProperties().entrySet()) {
            if (!MessageConst.STRING_HASH_SET.contains(e.getKey())) {
                user.put(e.getKey(), e.getValue());
            }
        }
        line.put("userProperties", user);
        line.put("bodyLen", m.getBody().length);
        line.put("body_b64", Base64.getEncoder().encodeToString(m.getBody()));
        line.put("delayLevel", m.getDelayTimeLevel() == 0 ? null : m.getDelayTimeLevel());
        String deliver = m.getProperty("TIMER_DELIVER_MS");
        line.put("deliverTimeMs", deliver == null ? null : Long.parseLong(deliver));
        line.put("txAction", kind.equals("tx_commit") ? "COMMIT_MESSAGE" : kind.equals("tx_rollback") ? "ROLLBACK_MESSAGE" : null);
        line.put("sendAtMs", now);
        line.put("result", null);
        line.put("error", null);
        line.put("uniqKey", m.getProperty(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX));
        line.put("properties", new TreeMap<>(m.getProperties()));
        return line;
    }

    /** Recalls a timer message right after its send: {"msgId": what the broker answered} or {"error": ...}. */
    static Map<String, Object> recall(DefaultMQProducer producer, String topic, SendResult r) {
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            out.put("msgId", Compat.recall(producer, topic, r));
        } catch (Throwable t) {
            out.put("error", error(t));
        }
        return out;
    }

    static Map<String, Object> result(SendResult r) {
        Map<String, Object> res = new LinkedHashMap<>();
        res.put("status", r.getSendStatus().name());
        res.put("msgId", r.getMsgId());
        res.put("offsetMsgId", r.getOffsetMsgId());
        res.put("topic", r.getMessageQueue().getTopic());
        res.put("brokerName", r.getMessageQueue().getBrokerName());
        res.put("queueId", r.getMessageQueue().getQueueId());
        res.put("queueOffset", r.getQueueOffset());
        res.put("transactionId", r.getTransactionId());
        res.put("regionId", r.getRegionId());
        return res;
    }

    static Map<String, Object> error(Throwable t) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("class", t.getClass().getName());
        e.put("message", String.valueOf(t.getMessage()));
        Integer code = null;
        if (t instanceof org.apache.rocketmq.client.exception.MQClientException) {
            code = ((org.apache.rocketmq.client.exception.MQClientException) t).getResponseCode();
        } else if (t instanceof org.apache.rocketmq.client.exception.MQBrokerException) {
            code = ((org.apache.rocketmq.client.exception.MQBrokerException) t).getResponseCode();
        }
        e.put("responseCode", code);
        return e;
    }

    void writeSent(Map<String, Object> line) {
        synchronized (sentLock) {
            try {
                sentOut.write(Json.write(line));
                sentOut.write('\n');
                if (args.containsKey("kill") || args.containsKey("send-for")) {
                    sentOut.flush();   // a line on disk means the send was acknowledged
                }
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        }
    }

    void recordConsume(String group, String mode, MessageExt m) {
        String uniq = m.getProperty(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX);
        int delivery = deliveries.merge(group + "\u0000" + uniq + "\u0000" + m.getTopic() + m.getQueueOffset(), 1, Integer::sum);
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("record", "consume");
        line.put("group", group);
        line.put("mode", mode);
        line.put("result", "ack");
        line.put("delivery", delivery);
        line.put("receivedAtMs", System.currentTimeMillis());
        line.put("topic", m.getTopic());
        line.put("storeTopic", m.getTopic());
        line.put("queueId", m.getQueueId());
        line.put("queueOffset", m.getQueueOffset());
        line.put("commitLogOffset", m.getCommitLogOffset());
        line.put("storeSize", m.getStoreSize());
        line.put("msgId", m.getMsgId());
        line.put("offsetMsgId", m instanceof org.apache.rocketmq.common.message.MessageClientExt
            ? ((org.apache.rocketmq.common.message.MessageClientExt) m).getOffsetMsgId() : m.getMsgId());
        line.put("uniqKey", uniq);
        line.put("tags", m.getTags());
        line.put("keys", m.getKeys());
        line.put("bornTimestamp", m.getBornTimestamp());
        line.put("storeTimestamp", m.getStoreTimestamp());
        line.put("reconsumeTimes", m.getReconsumeTimes());
        line.put("sysFlag", m.getSysFlag());
        line.put("bodyCRC", m.getBodyCRC());
        line.put("properties", new TreeMap<>(m.getProperties()));
        line.put("bodyLen", m.getBody() == null ? 0 : m.getBody().length);
        line.put("body_b64", m.getBody() == null ? null : Base64.getEncoder().encodeToString(m.getBody()));
        synchronized (consumedLock) {
            try {
                consumedOut.write(Json.write(line));
                consumedOut.write('\n');
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        }
        if (group.equals("rb_all") || group.equals("rb_live")) {
            // By send sequence, not msgId: before 5.5.0 a batch's items share one UNIQ_KEY (apache/rocketmq#9416).
            String rbSeq = m.getUserProperty("rb_seq");
            allSeen.add(rbSeq != null ? rbSeq : m.getKeys().split(" ")[0].substring(2));
        }
    }

    /** The RocketMQ version on the class path, dotted ("4.9.7", "5.5.0"). */
    static String rocketmqVersion() {
        String desc = org.apache.rocketmq.common.MQVersion.getVersionDesc(
            org.apache.rocketmq.common.MQVersion.CURRENT_VERSION);          // V4_9_7
        return String.join(".", Arrays.asList(desc.substring(1).split("_")).subList(0, 3));
    }

    /**
     * The effective settings of {@code configs}, one key=value a line, sorted, and engineVersion: not a RocketMQ
     * setting, the engine generation rmqsource reads the store as (4.x and 5.x stores differ).
     */
    static void writeEffectiveConfig(File f, Object... configs) throws IOException {
        Properties all = new Properties();
        for (Object c : configs) {
            all.putAll(MixAll.object2Properties(c));
        }
        StringBuilder sb = new StringBuilder();
        for (String k : new TreeSet<>(all.stringPropertyNames())) {
            sb.append(k).append('=').append(all.getProperty(k)).append('\n');
        }
        sb.append("# not a RocketMQ setting: the engine generation that wrote the store\n");
        sb.append("engineVersion=").append(rocketmqVersion()).append('\n');
        Files.write(f.toPath(), sb.toString().getBytes(StandardCharsets.UTF_8));
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException(what + " returned false");
        }
    }

    static void log(String s) {
        System.out.println("[harness " + System.currentTimeMillis() + "] " + s);
        System.out.flush();
    }
}
