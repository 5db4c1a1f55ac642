package io.rmqsource.brokertest;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.remoting.protocol.admin.OffsetWrapper;

/**
 * What differs between the RocketMQ lines the harness compiles against, for the 5.x line (src/main/java5; the
 * 4.x twin is src/main/java4). tests/support/broker_harness.py compiles src/main/java with one of the two.
 */
final class Compat {
    /** Timer messages (Message.setDeliverTimeMs) and their recall (DefaultMQProducer.recallMessage). */
    static final boolean TIMERS = true;

    private Compat() {
    }

    /** Makes a NameServer listen on {@code address} only. */
    static void bindAddress(NettyServerConfig config, String address) {
        config.setBindAddress(address);
    }

    /** The admin API's pull offset of a consumeStats queue. */
    static Long pullOffset(OffsetWrapper w) {
        return w.getPullOffset();
    }

    static void deliverAt(Message m, long deliverTimeMs) {
        m.setDeliverTimeMs(deliverTimeMs);
    }

    /** Recalls a sent timer message: the msgId the broker answered. */
    static String recall(DefaultMQProducer producer, String topic, SendResult r) throws Exception {
        return producer.recallMessage(topic, r.getRecallHandle());
    }
}
