package io.rmqsource.brokertest;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.trace.TraceBean;
import org.apache.rocketmq.client.trace.TraceContext;
import org.apache.rocketmq.client.trace.TraceDataEncoder;

/**
 * The RocketMQ client's own reading of trace message bodies, the judge of rmqsource's trace view: for each
 * line of the input file (a body, base64) one JSON line, {@code {"events": [...]}} with what
 * {@code TraceDataEncoder.decoderFromTraceDataString} decoded, or {@code {"error": "<exception class>"}} where
 * it threw, into OUT_FILE (RocketMQ's logging writes its status to stdout).  Usage:
 * {@code TraceDecode BODIES_FILE OUT_FILE}.
 */
public final class TraceDecode {
    public static void main(String[] args) throws Exception {
        StringBuilder out = new StringBuilder();
        for (String line : Files.readAllLines(Paths.get(args[0]), StandardCharsets.UTF_8)) {
            String body = new String(Base64.getDecoder().decode(line.trim()), StandardCharsets.UTF_8);
            Map<String, Object> row = new LinkedHashMap<>();
            try {
                List<Object> events = new ArrayList<>();
                for (TraceContext ctx : TraceDataEncoder.decoderFromTraceDataString(body)) events.add(event(ctx));
                row.put("events", events);
            } catch (RuntimeException e) {
                row.put("error", e.getClass().getSimpleName());
            }
            out.append(Json.write(row)).append('\n');
        }
        Files.write(Paths.get(args[1]), out.toString().getBytes(StandardCharsets.UTF_8));
    }

    private static Map<String, Object> event(TraceContext ctx) {
        TraceBean bean = ctx.getTraceBeans() == null || ctx.getTraceBeans().isEmpty() ? null : ctx.getTraceBeans().get(0);
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("traceType", ctx.getTraceType().name());
        e.put("timestamp", ctx.getTimeStamp());
        e.put("regionId", ctx.getRegionId());
        e.put("group", ctx.getGroupName());
        e.put("requestId", ctx.getRequestId());
        e.put("costTime", ctx.getCostTime());
        e.put("success", ctx.isSuccess());
        e.put("contextCode", ctx.getContextCode());
        if (bean != null) {
            e.put("topic", bean.getTopic());
            e.put("msgId", bean.getMsgId());
            e.put("offsetMsgId", bean.getOffsetMsgId());
            e.put("tags", bean.getTags());
            e.put("keys", bean.getKeys());
            e.put("storeHost", bean.getStoreHost());
            e.put("clientHost", bean.getClientHost());
            e.put("bodyLength", bean.getBodyLength());
            e.put("msgType", bean.getMsgType() == null ? null : bean.getMsgType().name());
            e.put("retryTimes", bean.getRetryTimes());
            e.put("transactionId", bean.getTransactionId());
            e.put("transactionState", bean.getTransactionState() == null ? null : bean.getTransactionState().name());
            e.put("fromTransactionCheck", bean.isFromTransactionCheck());
        }
        return e;
    }
}
