package io.rmqsource.spark;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.rmqsource.errors.OptionError;
import io.rmqsource.errors.Repr;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Kafka source option names (kafka_options.json, the file the Python path reads, packed into the
 * jar): aliases renamed to our options, other Kafka names refused with a pointer to ours
 * (twin of apply_kafka_names in rmqsource/spark/options.py).
 */
public final class KafkaNames {
    private static final Map<String, JsonNode> TABLE = load();

    private KafkaNames() {
    }

    private static Map<String, JsonNode> load() {
        try (InputStream in = KafkaNames.class.getResourceAsStream("kafka_options.json")) {
            if (in == null) throw new IllegalStateException("kafka_options.json is missing from the rmqsource jar");
            Map<String, JsonNode> out = new HashMap<>();
            for (JsonNode e : new ObjectMapper().readTree(in).get("options")) {
                out.put(e.get("kafka").asText().toLowerCase(Locale.ROOT), e);
            }
            return out;
        } catch (IOException e) {
            throw new IllegalStateException("cannot read kafka_options.json: " + e, e);
        }
    }

    public static Map<String, String> apply(Map<String, String> opts, String mode) {
        Map<String, String> out = new LinkedHashMap<>(opts);
        for (String key : new ArrayList<>(opts.keySet())) {
            JsonNode entry = TABLE.get(key);
            if (entry == null && key.startsWith("kafka.")) {
                throw new OptionError("option " + Repr.of(key) + " is a Kafka consumer setting; the rmq source reads a "
                        + "RocketMQ store directory (load('/path/to/store')) and takes RocketMQ MessageStoreConfig keys "
                        + "instead (e.g. maxHashSlotNum)");
            }
            if (entry == null) continue;
            String kafka = entry.get("kafka").asText();
            String ours = entry.get("rmq").isNull() ? null : entry.get("rmq").asText();
            boolean alias = entry.get("alias").asBoolean();
            List<String> modes = new ArrayList<>();
            if (entry.has("modes")) for (JsonNode m : entry.get("modes")) modes.add(m.asText());
            if (!alias || !modes.contains(mode)) {
                String hint = ours != null ? "the rmq source calls this " + ours : "the rmq source has no such option";
                if (alias && !modes.contains(mode)) hint += ", an option of " + String.join(" and ", modes) + " reads";
                throw new OptionError("option " + kafka + " is a Kafka source option: " + hint + " ("
                        + entry.get("note").asText() + ")");
            }
            String value = out.remove(key);
            if (kafka.equals("assign")) value = assignToQueues(value);
            String ourKey = ours.toLowerCase(Locale.ROOT);
            if (out.containsKey(ourKey) && !out.get(ourKey).equals(value)) {
                throw new OptionError("options " + kafka + " and " + ours + " are the same option; give one of them");
            }
            out.put(ourKey, value);
        }
        return out;
    }

    /** Kafka's assign JSON {"T": [0, 1]} as our queues list T:0,T:1 (our form passes through). */
    private static String assignToQueues(String value) {
        String text = value.strip();
        if (!text.startsWith("{")) return text;
        JsonNode doc;
        try {
            doc = new ObjectMapper().readTree(text);
        } catch (JsonProcessingException e) {
            throw new OptionError("option assign: cannot parse " + Repr.of(text) + " as JSON like {\"TopicA\": [0, 1]}: "
                    + e.getOriginalMessage());
        }
        boolean lists = doc.isObject();
        if (lists) for (JsonNode v : doc) lists &= v.isArray();
        if (!lists) throw new OptionError("option assign must map topics to lists of queue ids, got " + Repr.of(text));
        List<String> out = new ArrayList<>();
        for (Map.Entry<String, JsonNode> e : doc.properties()) {
            for (JsonNode q : e.getValue()) out.add(e.getKey() + ":" + (q.isTextual() ? q.asText() : q.toString()));
        }
        return String.join(",", out);
    }
}
