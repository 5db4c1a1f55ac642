package io.rmqsource.store.write;

import io.rmqsource.format.Properties;
import io.rmqsource.format.Record;
import io.rmqsource.store.CommitLog;
import io.rmqsource.store.StoreLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Finding records by their properties in a CommitLog range (what {@link MessageStoreWriter#scan} does). */
final class CommitLogScan {
    private CommitLogScan() {
    }

    /** Records in [from, end) carrying at least one of the properties {@code names}, in CommitLog order. */
    static List<AppendedRecord> scan(StoreLayout layout, long from, long end, String... names) {
        byte[][] wanted = new byte[names.length][];
        for (int i = 0; i < names.length; i++) wanted[i] = names[i].getBytes(StandardCharsets.UTF_8);
        List<AppendedRecord> out = new ArrayList<>();
        if (from >= end) return out;
        CommitLog commitLog = new CommitLog(layout);
        try {
            Record r = new Record();
            Properties props = new Properties();
            commitLog.walk(from, false, (kind, seg, b, pos, offset, size) -> {
                if (offset >= end) return false;
                if (kind != Record.MESSAGE) return true;
                r.decode(b, pos, size, -1);
                props.parse(b, r.propsPos, r.propsLen);
                Map<String, String> found = null;
                for (int i = 0; i < wanted.length; i++) {
                    int e = props.find(wanted[i]);
                    if (e < 0) continue;
                    if (found == null) found = new LinkedHashMap<>();
                    found.put(names[i], props.valueString(e));
                }
                if (found != null) {
                    byte[] t = new byte[r.topicLen];
                    b.get(r.topicPos, t, 0, t.length);
                    out.add(new AppendedRecord(offset, r.totalSize, new String(t, StandardCharsets.UTF_8), r.queueId,
                            r.queueOffset, r.storeTimestamp, r.sysFlag, found));
                }
                return true;
            }, null);
        } finally {
            commitLog.segments.close();
        }
        return out;
    }
}
