package io.rmqsource.brokertest;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.admin.OffsetWrapper;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;

/**
 * What differs between the RocketMQ lines the harness compiles against, for the 4.x line (src/main/java4; the
 * 5.x twin is src/main/java5). tests/support/broker_harness.py compiles src/main/java with one of the two.
 */
final class Compat {
    /** No timer messages before 5.0: the workload has no timer kinds. */
    static final boolean TIMERS = false;

    private Compat() {
    }

    /** 4.x's NettyServerConfig has no bindAddress: the NameServer listens on every address. */
    static void bindAddress(NettyServerConfig config, String address) {
    }

    /** 4.x's consumeStats have no pull offset. */
    static Long pullOffset(OffsetWrapper w) {
        return null;
    }

    static void deliverAt(Message m, long deliverTimeMs) {
        throw new UnsupportedOperationException("timer messages need RocketMQ 5");
    }

    static String recall(DefaultMQProducer producer, String topic, SendResult r) {
        throw new UnsupportedOperationException("recalling a message needs RocketMQ 5");
    }
}
