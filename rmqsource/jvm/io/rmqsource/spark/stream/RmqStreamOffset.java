package io.rmqsource.spark.stream;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.rmqsource.errors.FormatError;
import io.rmqsource.format.JsonText;
import io.rmqsource.store.QueueKey;
import java.util.Collections;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.connector.read.streaming.Offset;

/**
 * A stream position: the next queue offset of every queue, {@code {topic: {queueId: offset}}}.
 *
 * {@link #json()} writes exactly what the Python source writes (Python's {@code json.dumps} of
 * offsets_to_json: topics sorted, queue ids in numeric order, {@code ", "} and {@code ": "}
 * separators), so a checkpoint's offset log reads the same whichever implementation wrote it and
 * a query resumes under the other one.
 */
public final class RmqStreamOffset extends Offset {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final TreeMap<QueueKey, Long> offsets;
    private final String json;

    public RmqStreamOffset(Map<QueueKey, Long> offsets) {
        this.offsets = new TreeMap<>(offsets);
        this.json = render(this.offsets);
    }

    /** The offsets, sorted by topic and queue id (read-only). */
    public Map<QueueKey, Long> offsets() {
        return Collections.unmodifiableMap(offsets);
    }

    @Override
    public String json() {
        return json;
    }

    private static String render(TreeMap<QueueKey, Long> offsets) {
        StringBuilder sb = new StringBuilder("{");
        String topic = null;
        for (Map.Entry<QueueKey, Long> e : offsets.entrySet()) {
            QueueKey k = e.getKey();
            if (!k.topic.equals(topic)) {
                if (topic != null) sb.append("}, ");
                JsonText.quote(sb, k.topic);
                sb.append(": {");
                topic = k.topic;
            } else {
                sb.append(", ");
            }
            sb.append('"').append(k.queueId).append("\": ").append(e.getValue());
        }
        if (topic != null) sb.append('}');
        return sb.append('}').toString();
    }

    /** Parses the JSON of either implementation (offsets_from_json); bad text names the checkpoint. */
    public static RmqStreamOffset fromJson(String text) {
        JsonNode doc;
        try {
            doc = JSON.readTree(text);
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new FormatError("stream offsets are not JSON {topic: {queueId: offset}}: " + e.getOriginalMessage(),
                    "<checkpoint offsets>", -1);
        }
        TreeMap<QueueKey, Long> out = new TreeMap<>();
        if (doc == null || doc.isNull()) return new RmqStreamOffset(out);
        if (!doc.isObject()) {
            throw new FormatError("stream offsets must be a JSON object {topic: {queueId: offset}}, got " + text,
                    "<checkpoint offsets>", -1);
        }
        for (Map.Entry<String, JsonNode> t : doc.properties()) {
            if (!t.getValue().isObject()) {
                throw new FormatError("stream offsets: topic " + t.getKey() + " maps to " + t.getValue()
                        + ", expected {queueId: offset}", "<checkpoint offsets>", -1);
            }
            for (Map.Entry<String, JsonNode> e : t.getValue().properties()) {
                int qid;
                try {
                    qid = Integer.parseInt(e.getKey().strip());
                } catch (NumberFormatException x) {
                    throw new FormatError("stream offsets: queue id " + e.getKey() + " of topic " + t.getKey()
                            + " is not an integer", "<checkpoint offsets>", -1);
                }
                if (!e.getValue().canConvertToLong() || !e.getValue().isIntegralNumber()) {
                    throw new FormatError("stream offsets: " + t.getKey() + "/" + qid + " offset " + e.getValue()
                            + " is not an integer", "<checkpoint offsets>", -1);
                }
                out.put(new QueueKey(t.getKey(), qid), e.getValue().asLong());
            }
        }
        return new RmqStreamOffset(out);
    }
}
