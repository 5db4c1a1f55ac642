package io.rmqsource.verify;

import io.rmqsource.format.Record;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The topics of one verify run by number: the queues' topics first (as their cursors open), then each new
 * topic a record names.  The walk compares records' topics by number; problems name them.
 */
final class TopicIds {
    private final Map<String, Integer> topicIds = new HashMap<>();
    private final List<String> topicNames = new ArrayList<>();
    private final List<byte[]> topicBytes = new ArrayList<>();
    private final java.util.BitSet validTopic = new java.util.BitSet();      // bytes passed topicProblem
    private byte[] topicScratch = new byte[256];

    int topicId(String topic) {
        Integer i = topicIds.get(topic);
        if (i == null) {
            i = topicIds.size();
            topicIds.put(topic, i);
            topicNames.add(topic);
            topicBytes.add(topic.getBytes(StandardCharsets.UTF_8));
        }
        return i;
    }

    /**
     * Id of the record's topic, or -1 when its bytes cannot be a topic.  Each topic's bytes are
     * checked once (topicProblem), then recognised by comparison with the topics seen last.
     */
    int recordTopicId(ByteBuffer b, int pos, int len) {
        if (topicScratch.length < len) topicScratch = new byte[len];
        b.get(pos, topicScratch, 0, len);                     // one bulk copy, then array compares
        for (int i = topicBytes.size() - 1, tries = 0; i >= 0 && tries < 64; i--, tries++) {
            byte[] t = topicBytes.get(i);
            if (t.length == len && validTopic.get(i) && Arrays.equals(t, 0, len, topicScratch, 0, len)) return i;
        }
        if (Record.topicProblem(b, pos, len) != null) return -1;
        int id = topicId(new String(topicScratch, 0, len, StandardCharsets.UTF_8));
        validTopic.set(id);
        return id;
    }

    String name(int topicId) {
        return topicNames.get(topicId);
    }
}
