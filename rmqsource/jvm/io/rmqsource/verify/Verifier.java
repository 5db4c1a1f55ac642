package io.rmqsource.verify;

import io.rmqsource.format.DLedgerFormat;
import io.rmqsource.format.JsonText;
import io.rmqsource.format.Properties;
import io.rmqsource.format.Record;
import io.rmqsource.format.TagsCode;
import io.rmqsource.store.CommitLog;
import io.rmqsource.store.QueueKey;
import io.rmqsource.store.Segment;
import io.rmqsource.store.Segments;
import io.rmqsource.store.StoreLayout;
import java.io.File;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.TreeMap;
import java.util.zip.CRC32;

/**
 * ``rmq verify`` on the JVM: the CommitLog, ConsumeQueue and IndexFile checks of
 * rmqsource/store/verify.py, with the same windows, order and messages (the checkpoint and
 * config JSON checks stay in Python: they read a few small files).
 *
 * One pass over the CommitLog, window by window (CHUNK_BYTES of one segment): the totalSize chain,
 * every record's fields, PHYSICALOFFSET, body CRC and __CRC32# property; the ConsumeQueue units and
 * IndexFile entries pointing into the window against the records there; records without a unit.
 */
public final class Verifier {
    static final int CHUNK_BYTES = 16 * 1024 * 1024;
    static final int PER_CHECK_DETAIL = 200;           // problems of one kind listed per window (all are counted)
    private static final long CRC_PROP_WORD = 0x5F5F435243333223L;  // "__CRC32#"

    private final StoreLayout layout;
    private final long hashSlotNum;
    private final long indexNum;
    private final long[] delays;
    private final Report report;
    private final CRC32 crc = new CRC32();
    private final Properties props = new Properties();
    private final RecordFields f = new RecordFields();

    private final Map<String, Integer> topicIds = new HashMap<>();
    private final List<String> topicNames = new ArrayList<>();
    private final List<byte[]> topicBytes = new ArrayList<>();
    private final java.util.BitSet validTopic = new java.util.BitSet();      // bytes passed topicProblem
    private byte[] topicScratch = new byte[256];
    private long records;
    private long maxStoreTs;
    private long invalidAt = 1L << 62;            // first record recovery would stop at (fields that do not add up)
    private final TreeMap<Long, long[]> unmatched = new TreeMap<>();   // (topic id, queueId) -> {count, first phy}

    private CommitLog cl;
    private long clMin;
    private List<QueueCursor> queues;
    private final Map<Long, Integer> queueKeyIndex = new HashMap<>();
    private final PriorityQueue<long[]> heap = new PriorityQueue<>(new PairOrder());   // {next phy, queue index}
    private final UnitQueue pending = new UnitQueue();
    private IndexCheck.Cursor index;
    private int indexFileCount;
    private final long[] indexEntries = {0};
    private boolean indexChecked;

    private final Window w = new Window();
    private final RecordChecker recordChecker = new RecordChecker();

    /** The chain walk's visitor: each record found is checked at once, while its bytes are in cache. */
    private final class RecordChecker implements Chain.Visitor {
        ByteBuffer buffer;

        @Override
        public void record(int pos, int totalSize) {
            checkRecord(buffer, pos, totalSize);
        }
    }

    /** {a, b} pairs of longs, by a then b. */
    private static final class PairOrder implements java.util.Comparator<long[]> {
        @Override
        public int compare(long[] x, long[] y) {
            return x[0] != y[0] ? Long.compare(x[0], y[0]) : Long.compare(x[1], y[1]);
        }
    }

    /** Problem items whose first two fields are boxed longs (phy, take order), by the first then the second. */
    private static final class BoxedPairOrder implements java.util.Comparator<Object[]> {
        @Override
        public int compare(Object[] x, Object[] y) {
            int c = Long.compare((Long) x[0], (Long) y[0]);
            return c != 0 ? c : Long.compare((Long) x[1], (Long) y[1]);
        }
    }

    public Verifier(StoreLayout layout, long hashSlotNum, long indexNum, long[] delays, Report report) {
        this.layout = layout;
        this.hashSlotNum = hashSlotNum;
        this.indexNum = indexNum;
        this.delays = delays;
        this.report = report;
    }

    /** Walks the store; returns the figures line (stats, the valid end, queue max offsets) for the report. */
    public String run() {
        cl = new CommitLog(layout);
        long end;
        String dledgerDir = layout.dledgerDir();       // verify walks local stores: a path
        dledger = dledgerDir == null ? null : new DLedgerChecks(new File(dledgerDir), report);
        try {
            clMin = cl.minOffset();
            checkSegmentFiles();
            openCursors();
            end = walkCommitLog();
            if (!cl.isDLedger()) end = Math.min(end, invalidAt);     // DLedger recovery checks entry headers only
            drainCursors(end);
        } finally {
            cl.segments.close();
            if (dledger != null) dledger.close();
        }
        if (dledger != null) dledger.finish();
        reportUnmatchedRecords();
        long cqUnits = 0;
        long cqExpired = 0;
        StringBuilder maxOffsets = new StringBuilder();
        for (QueueCursor q : queues) {
            cqUnits += q.units;
            cqExpired += q.expired;
            maxOffsets.append(maxOffsets.length() == 0 ? "" : ",").append('[').append(JsonText.str(q.topic)).append(',')
                    .append(q.queueId).append(',').append(q.maxOffset).append(']');
        }
        return "{\"stats\":{" + (indexChecked ? "\"indexEntries\":" + indexEntries[0] + "," : "")
                + "\"records\":" + records + ",\"commitLogMinOffset\":" + clMin + ",\"commitLogEnd\":" + end
                + ",\"segments\":" + cl.list().size() + ",\"queues\":" + queues.size() + ",\"cqUnits\":" + cqUnits
                + ",\"cqUnitsExpired\":" + cqExpired + ",\"indexFiles\":" + indexFileCount + "},\"maxStoreTimestamp\":"
                + maxStoreTs + ",\"queueMaxOffsets\":[" + maxOffsets + "]}";
    }

    private void checkSegmentFiles() {
        long z = cl.segmentSize();
        List<Segment> segs = cl.list();
        for (int i = 1; i < segs.size(); i++) {
            Segment prev = segs.get(i - 1);
            Segment seg = segs.get(i);
            if (seg.startOffset != prev.startOffset + z) {
                report.add("commitlog", "segment-missing", report.rel(seg.path), -1,
                        "CommitLog segments are not consecutive (a segment in between is missing)",
                        String.format("%020d", prev.startOffset + z), new File(seg.path).getName());
            }
        }
        for (Segment seg : segs) {
            if (seg.sizeBytes != z) {
                report.add("commitlog", "segment-size", report.rel(seg.path), 0, "CommitLog segments differ in size",
                        Long.toString(z), Long.toString(seg.sizeBytes));
            }
            if (z != 0 && seg.startOffset % z != 0) {
                report.add("commitlog", "segment-name", report.rel(seg.path), -1,
                        "segment start offset is not a multiple of the segment size", "a multiple of " + z,
                        Long.toString(seg.startOffset));
            }
        }
    }

    private void openCursors() {
        queues = new ArrayList<>();
        for (QueueKey k : layout.listQueues()) {
            QueueCursor q = new QueueCursor(layout.queueDir(k.topic, k.queueId).getPath(), k.topic, k.queueId, report,
                    clMin);
            if (!q.segments.isEmpty()) {
                q.topicId = topicId(k.topic);
                queues.add(q);
            }
        }
        for (int i = 0; i < queues.size(); i++) {
            long p = queues.get(i).nextPhy();
            if (p >= 0) heap.add(new long[] {p, i});
            queueKeyIndex.put(queueKey(queues.get(i).topicId, queues.get(i).queueId), i);
        }
        List<String> files = IndexCheck.indexFiles(layout.indexDir());
        indexFileCount = files.size();
        long[] geometry = IndexCheck.geometry(files, hashSlotNum, indexNum);
        List<IndexCheck.Usable> usable = new ArrayList<>();
        for (String path : files) {
            IndexCheck.Usable u = IndexCheck.check(path, geometry[0], geometry[1], report, indexEntries);
            if (u != null) {
                usable.add(u);
                indexChecked = true;
            }
        }
        index = new IndexCheck.Cursor(usable, clMin);
    }

    private static long queueKey(int topicId, int queueId) {
        return ((long) topicId << 32) | (queueId & 0xFFFFFFFFL);
    }

    private int topicId(String topic) {
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
    private int recordTopicId(ByteBuffer b, int pos, int len) {
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

    // ------------------------------------------------------------------ CommitLog
    private long walkCommitLog() {
        long end = clMin;
        List<Segment> segs = cl.list();
        for (int si = 0; si < segs.size(); si++) {
            Segment seg = segs.get(si);
            boolean last = si == segs.size() - 1;
            long segEnd = seg.dledger ? walkDLedgerSegment(seg, cl.segments.lengthOf(seg), last)
                    : walkSegment(seg, cl.segments.lengthOf(seg), last);
            if (segEnd >= 0) {
                end = segEnd;
                if (seg.dledger) break;                 // DLedger recovery drops every later entry
            }
        }
        return end;
    }

    // DLedger walk state: entries carry index and term across files.
    private final DLedgerFormat.Header entry = new DLedgerFormat.Header();
    private final DLedgerFormat.Chain entryChain = new DLedgerFormat.Chain();
    private DLedgerChecks dledger;

    /**
     * Windows of entries of one DLedger data file (each a 48-byte header, then one CommitLog record checked
     * as any record); returns the valid end when the data ends inside it, else -1.  The first header failing
     * a DLedger recovery check ends the data (entry-header); a record failing its checks is a commitlog
     * problem of the data file but does not end the data (recovery reads headers only).
     */
    private long walkDLedgerSegment(Segment seg, long segLen, boolean last) {
        String rel = report.rel(seg.path);
        ByteBuffer b = Segments.mapFile(seg.path);
        long limit = Math.min(segLen, b.capacity());
        long e = 0;
        while (true) {
            long windowStart = e;
            startWindow(b, seg, (int) limit);
            long stop = -2;                                     // -2: window full, -1: next file, else the data's end
            while (stop == -2 && e - windowStart < CHUNK_BYTES) {
                if (FileReads.reachesNewPage(e, 8) && zeroHead(seg.path, e, limit)) {
                    entry.kind = DLedgerFormat.END;         // (past the data the page may be a hole: not mapped in)
                } else {
                    DLedgerFormat.decodeEntry(b, e, limit, entry);
                }
                if (entry.kind == DLedgerFormat.BLANK) {
                    stop = last ? seg.startOffset + e : -1;
                    break;
                }
                if (entry.kind == DLedgerFormat.END) {
                    stop = seg.startOffset + e;
                    break;
                }
                String[] bad = DLedgerFormat.headerProblem(entry, seg.startOffset + e, entryChain);
                if (bad == null && entry.size > segLen - e) {
                    bad = new String[] {"size", "entry size " + entry.size + " runs past the end of the file ("
                        + (segLen - e) + " bytes left)"};
                }
                if (bad != null) {
                    report.add("dledger", "entry-header", rel, e, "DLedger entry header fails recovery's " + bad[0]
                            + " check: " + bad[1] + "; the data ends here", null, bad[0]);
                    stop = seg.startOffset + e;
                    break;
                }
                if (e > windowStart && e + entry.size - windowStart > CHUNK_BYTES) break;   // next window: whole entries
                long rec = e + DLedgerFormat.ENTRY_HEADER_BYTES;
                if (rec + entry.bodyLen > limit) {
                    report.add("commitlog", "record-length", rel, rec, "record runs past the end of the data file",
                            Integer.toString(entry.bodyLen), Long.toString(Math.max(0, limit - rec)));
                    stop = seg.startOffset + e;
                    break;
                }
                entryChain.follow(entry);
                dledger.entry(entry, seg.startOffset + e);
                int total = b.getInt((int) rec);
                if (total != entry.bodyLen) {
                    entryLengths.add(rec, "record totalSize is not the DLedger entry's bodyLen",
                            Integer.toString(entry.bodyLen), Integer.toString(total));
                } else if (!entryHoldsRecordHead(b, (int) rec, entry.bodyLen)) {
                    invalidAt = Math.min(invalidAt, seg.startOffset + rec);
                } else {
                    checkRecord(b, (int) rec, entry.bodyLen);
                }
                e = rec + entry.bodyLen;
            }
            long windowEnd = seg.startOffset + e;
            takeUnits(windowEnd);
            entryLengths.flush(rel);                            // the Python walk lists these after taking units
            endWindow(rel);
            checkUnitsAndEntries(windowEnd);
            report.progress(e - windowStart);
            if (stop == -2) continue;
            report.progress(segLen - e);
            if (stop >= 0 && entry.kind == DLedgerFormat.END) return dataEnds(b, seg, rel, (int) e, segLen, last, "zero bytes");
            return stop;
        }
    }

    /**
     * Whether the record inside a DLedger entry starts as a record (a message magic, a totalSize within
     * bounds); else its problem is listed as decode_record's kind (END, BLANK, CORRUPT) and reason.  The
     * chain walk proves this for CommitLog records; DLedger entries are found by their headers instead.
     */
    private boolean entryHoldsRecordHead(ByteBuffer b, int rec, int total) {
        int magic = b.getInt(rec + 4);
        if ((magic == Record.MAGIC_V1 || magic == Record.MAGIC_V2)
                && total >= Record.MIN_RECORD_BYTES && total <= Record.MAX_RECORD_BYTES_READ) {
            return true;
        }
        Record.check(b, rec, windowLimit, false, recordHead);
        String kind = recordHead.kind == Record.END ? "END" : recordHead.kind == Record.BLANK ? "BLANK" : "CORRUPT";
        fieldProblems.add(new Object[] {rec, recordHead.reason, kind});
        return false;
    }

    /** Windows of one segment; returns the valid end when the data ends inside it, else -1. */
    private long walkSegment(Segment seg, long segLen, boolean last) {
        String rel = report.rel(seg.path);
        ByteBuffer b = Segments.mapFile(seg.path);
        long fileLen = b.capacity();
        int pos = 0;
        while (true) {
            if (pos >= segLen) {
                report.progress(0);
                return -1;
            }
            long want = Math.min(CHUNK_BYTES, segLen - pos);
            int n = (int) Math.max(0, Math.min(want, fileLen - pos));
            takeUnits(seg.startOffset + pos + n);
            if (n == 0) return dataEnds(b, seg, rel, pos, segLen, last, "the file ends here, before the segment size");
            Chain c = walkWindow(b, seg, pos, n, segLen - pos);
            if (c.reason == Chain.SHORT && c.count == 0) {
                if (c.totalSize > want) {          // one record larger than a chunk: read exactly it
                    n = (int) Math.max(0, Math.min(c.totalSize, fileLen - pos));
                    takeUnits(seg.startOffset + pos + n);
                    c = walkWindow(b, seg, pos, n, segLen - pos);
                }
                if (c.count == 0) {
                    report.add("commitlog", "record-length", rel, pos, "record runs past the end of the segment file",
                            "<= " + n + " bytes", Long.toString(c.totalSize));
                    return seg.startOffset + pos;
                }
            }
            long windowEnd = seg.startOffset + pos + c.stop;
            endWindow(rel);
            checkUnitsAndEntries(windowEnd);
            report.progress(c.stop);
            if (c.reason == Chain.LIMIT || c.reason == Chain.SHORT) {
                pos += c.stop;
                continue;
            }
            int p = pos + c.stop;
            if (c.reason == Chain.BLANK) {
                int total = b.getInt(p);
                if (total != segLen - p) {
                    report.add("commitlog", "blank-size", rel, p,
                            "the end-of-segment blank record does not cover the rest of the segment",
                            Long.toString(segLen - p), Integer.toString(total));
                }
                report.progress(segLen - p);
                return last ? seg.startOffset + p : -1;
            }
            if (c.reason == Chain.CORRUPT) {
                report.add("commitlog", "record-length", rel, p, "record header is not valid: " + c.detail,
                        "totalSize in [" + Record.MIN_RECORD_BYTES + ", " + (segLen - p) + "]",
                        Long.toString(c.totalSize));
                report.progress(segLen - p);
                return seg.startOffset + p;
            }
            return dataEnds(b, seg, rel, p, segLen, last, c.detail);
        }
    }

    /** Whether the 8 bytes at {@code p} (read with read(2)) are zeros or past the data: the DLedger data ends. */
    private static boolean zeroHead(String path, long p, long limit) {
        if (p + 8 > limit) return true;
        ByteBuffer h = FileReads.read(path, p, 8);
        return h.limit() < 8 || h.getLong(0) == 0;
    }

    /** No record starts at {@code p} (zeros, an unknown magic, the file's end): the valid data ends there. */
    private long dataEnds(ByteBuffer b, Segment seg, String rel, int p, long segLen, boolean last, String detail) {
        report.progress(segLen - p);
        if (!last) {
            report.add("commitlog", "segment-end", rel, p, "records end inside a segment that is not the last ("
                    + detail + "); recovery would drop every later segment", "a blank end-of-segment record",
                    detail.isEmpty() ? "no record" : detail);
        } else {
            long nonZero = FileReads.firstNonZero(seg.path, p, b.capacity());   // the tail may be holes: read(2)
            if (nonZero >= 0) {
                report.add("commitlog", "tail-garbage", rel, nonZero, "non-zero bytes after the CommitLog's valid "
                        + "end at " + p + " (a torn or garbage tail; rmq recover zero-fills it)", "zeros",
                        "non-zero bytes");
            }
        }
        return seg.startOffset + p;
    }

    // Problems of the window being walked, listed in the Python twin's order when it ends.
    private final List<Object[]> fieldProblems = new ArrayList<>();   // {position, reason, decode_record's kind}
    private final Record.Check recordHead = new Record.Check();
    private Listed entryLengths;              // DLedger records whose totalSize is not their entry's bodyLen
    private Listed phyProblems;
    private Listed bodyCrcs;
    private Listed recordCrcs;
    private Segment windowSegment;
    private int windowLimit;

    private Chain walkWindow(ByteBuffer b, Segment seg, int pos, int n, long segRemaining) {
        startWindow(b, seg, pos + n);
        return Chain.walk(b, seg.path, pos, n, segRemaining, recordChecker);
    }

    /** A new window of {@code seg}, whose records lie below file position {@code limit}. */
    private void startWindow(ByteBuffer b, Segment seg, int limit) {
        w.clear();
        fieldProblems.clear();
        entryLengths = new Listed("record-length");
        phyProblems = new Listed("phy-offset");
        bodyCrcs = new Listed("body-crc");
        recordCrcs = new Listed("record-crc");
        windowSegment = seg;
        windowLimit = limit;
        recordChecker.buffer = b;
    }

    private void endWindow(String rel) {
        for (Object[] it : fieldProblems) {
            report.add("commitlog", "record-fields", rel, (Integer) it[0], "record fields do not add up: " + it[1],
                    "a decodable record", (String) it[2]);
        }
        phyProblems.flush(rel);
        bodyCrcs.flush(rel);
        recordCrcs.flush(rel);
    }

    private void checkRecord(ByteBuffer b, int p, int total) {
        Segment seg = windowSegment;
        String reason = f.decode(b, p, total, windowLimit);
        int tid = reason == null ? recordTopicId(b, f.topicPos, f.topicLen) : -1;
        if (tid < 0) {
            if (reason == null) reason = Record.topicProblem(b, f.topicPos, f.topicLen);
            invalidAt = Math.min(invalidAt, seg.startOffset + p);
            fieldProblems.add(new Object[] {p, reason, "CORRUPT"});
            return;
        }
        records++;
        long phy = seg.startOffset + p;
        maxStoreTs = Math.max(maxStoreTs, f.storeTimestamp);
        if (f.phyOffset != phy) {
            phyProblems.add(p, "PHYSICALOFFSET field is not where the record is", Long.toString(phy),
                    Long.toString(f.phyOffset));
        }
        long stored = f.bodyCrc & 0xFFFFFFFFL;
        long got = crc32(b, f.bodyPos, f.bodyLen) & 0x7FFFFFFFL;
        if (got != stored) {
            bodyCrcs.add(p, "body CRC does not match the body (" + f.bodyLen + " bytes at " + f.bodyPos + ")",
                    Long.toString(stored), Long.toString(got));
        }
        checkCrcProperty(b, p, total, recordCrcs);
        w.add(phy, total, tid, f.queueId, f.queueOffset, tagsCode(b, tid), !f.isPreparedOrRollback());
    }

    /** __CRC32# (5.2+ enabledAppendPropCRC): the last 20 bytes of the record, the CRC of everything before. */
    private void checkCrcProperty(ByteBuffer b, int p, int total, Listed problems) {
        int end = p + total;
        if (f.propsLen < 20 || b.get(end - 12) != 1 || b.getLong(end - 20) != CRC_PROP_WORD || b.get(end - 1) != 2) {
            return;
        }
        long value = 0;
        long scale = 1;
        boolean digits = true;
        for (int k = 0; k < 10; k++, scale *= 10) {
            int d = b.get(end - 11 + k) - '0';
            digits &= d >= 0 && d <= 9;
            value += Math.max(0, Math.min(9, d)) * scale;
        }
        long got = crc32(b, p, total - 20) & 0x7FFFFFFFL;
        if (!digits || got != value) {
            problems.add(p, "__CRC32# property does not match the record's bytes", Long.toString(got),
                    digits ? Long.toString(value) : "not 10 digits");
        }
    }

    private long crc32(ByteBuffer b, int pos, int len) {
        crc.reset();
        crc.update(b.slice(pos, len));
        return crc.getValue();
    }

    private byte[] propBytes = new byte[1024];
    private ByteBuffer propWords = ByteBuffer.wrap(propBytes).order(ByteOrder.LITTLE_ENDIAN);

    /**
     * The tagsCode dispatch computes for the record just decoded (spec 4): String.hashCode of the
     * TAGS property as the properties parse reads it (entries split at 0x02, the first 0x01 ends a
     * non-empty key, empty values dropped, the last entry wins), found in a copy of the bytes.
     */
    private long tagsCode(ByteBuffer b, int topicId) {
        if (TagsCode.SCHEDULE_TOPIC.equals(topicNames.get(topicId))) return scheduleTagsCode(b);
        int len = f.propsLen;
        if (propBytes.length < len) {
            propBytes = new byte[Math.max(len, 2 * propBytes.length)];
            propWords = ByteBuffer.wrap(propBytes).order(ByteOrder.LITTLE_ENDIAN);
        }
        byte[] s = propBytes;
        b.get(f.propsPos, s, 0, len);
        int value = -1;
        int valueEnd = -1;
        for (int i = 0; i < len; ) {
            int j = nextSeparator(s, propWords, i, len);
            // An entry starting "TAGS\x01" has its first 0x01 right after the key: valid when its value is not empty.
            if (j - i > 5 && s[i + 4] == Properties.NAME_VALUE_SEPARATOR && s[i] == 'T' && s[i + 1] == 'A'
                    && s[i + 2] == 'G' && s[i + 3] == 'S') {
                value = i + 5;
                valueEnd = j;
            }
            i = j + 1;
        }
        if (value < 0) return 0;
        int h = 0;
        for (int i = value; i < valueEnd; i++) {
            if (s[i] < 0) return new String(s, value, valueEnd - value, StandardCharsets.UTF_8).hashCode();
            h = 31 * h + s[i];
        }
        return h;
    }

    private static final long ONES = 0x0101010101010101L;

    /** Position of the first 0x02 in s[from, len), or len: eight bytes per step (a zero-byte test on s ^ 0x02..). */
    private static int nextSeparator(byte[] s, ByteBuffer words, int from, int len) {
        int j = from;
        for (; j + 8 <= len; j += 8) {
            long v = words.getLong(j) ^ (ONES * Properties.PROPERTY_SEPARATOR);
            long t = (v - ONES) & ~v & (ONES << 7);
            if (t != 0) return j + (Long.numberOfTrailingZeros(t) >>> 3);
        }
        while (j < len && s[j] != Properties.PROPERTY_SEPARATOR) j++;
        return j;
    }

    /** SCHEDULE_TOPIC_XXXX: the deliver time from the DELAY level (TagsCode). */
    private long scheduleTagsCode(ByteBuffer b) {
        props.parse(b, f.propsPos, f.propsLen);
        int tags = props.find(Properties.TAGS);
        int delay = props.find(Properties.DELAY);
        return TagsCode.consumeQueueTagsCode(TagsCode.SCHEDULE_TOPIC, tags < 0 ? null : props.valueString(tags),
                delay < 0 ? null : props.valueString(delay), f.storeTimestamp, delays);
    }

    // ------------------------------------------------------------------ units and entries
    private void checkUnitsAndEntries(long windowEnd) {
        matchUnits(windowEnd);
        matchEntries(windowEnd);
        collectUnmatched();
        w.clear();
    }

    /** Moves the units with phy < {@code hi} from the queue cursors into {@link #pending}. */
    private void takeUnits(long hi) {
        while (!heap.isEmpty() && heap.peek()[0] < hi) {
            int i = (int) heap.poll()[1];
            QueueCursor q = queues.get(i);
            q.takeBelow(hi, pending, i);
            long p = q.nextPhy();
            if (p >= 0) heap.add(new long[] {p, i});
        }
    }

    /** The pending units with phy < {@code windowEnd} against the window's records (all queues at once). */
    private void matchUnits(long windowEnd) {
        UnitQueue u = pending;
        Listed targets = new Listed("cq-target");
        Listed others = new Listed("cq-queue");
        Listed sizes = new Listed("cq-size");
        Listed codes = new Listed("cq-tagscode");
        boolean any = false;
        for (int j = 0; j < u.n; j++) {
            if (u.phy[j] >= windowEnd) continue;
            any = true;
            int r = w.find(u.phy[j]);
            if (r < 0) {
                targets.addUnit(j, "points at CommitLog offset " + u.phy[j] + ", where no valid record starts",
                        "a record start", "no valid record");
                continue;
            }
            QueueCursor q = queues.get(u.queue[j]);
            if (w.topic[r] == q.topicId && w.queueId[r] == q.queueId && w.queueOffset[r] == u.qoff[j]) {
                w.matched[r] = true;
            } else {
                others.addUnit(j, "points at the record at CommitLog offset " + u.phy[j] + " of another queue position",
                        q.topic + "/" + q.queueId + "/" + u.qoff[j],
                        topicNames.get(w.topic[r]) + "/" + w.queueId[r] + "/" + w.queueOffset[r]);
            }
            if (w.size[r] != u.size[j]) {
                sizes.addUnit(j, "size differs from the record at CommitLog offset " + u.phy[j],
                        Integer.toString(w.size[r]), Integer.toString(u.size[j]));
            }
            if (w.code[r] != u.code[j]) {
                codes.addUnit(j, "tagsCode differs from the record at CommitLog offset " + u.phy[j],
                        Long.toString(w.code[r]), Long.toString(u.code[j]));
            }
        }
        if (!any) return;
        for (Listed l : new Listed[] {targets, others, sizes, codes}) l.flushUnits();
        u.dropBelow(windowEnd);
    }

    private void matchEntries(long windowEnd) {
        index.takeBelow(windowEnd, entryMatcher);
    }

    /** Entries pointing into the window must point at a record start. */
    private final IndexCheck.Sink entryMatcher = new IndexCheck.Sink() {
        @Override
        public void block(IndexCheck.Usable file, int[] numbers, long[] phy, int from, int to) {
            String rel = report.rel(file.path);
            int listed = 0;
            for (int j = from; j < to; j++) {
                if (w.find(phy[j]) >= 0) continue;
                if (listed++ >= PER_CHECK_DETAIL) {
                    report.count(Report.ERROR, "index-target", 1);
                    continue;
                }
                report.add("index", "index-target", rel, file.base + (long) numbers[j] * 20, "entry " + numbers[j]
                        + " points at CommitLog offset " + phy[j] + ", where no record starts", "a record start",
                        "no record");
            }
        }
    };

    private void collectUnmatched() {
        for (int r = 0; r < w.n; r++) {
            if (!w.eligible[r] || w.matched[r]) continue;
            long key = queueKey(w.topic[r], w.queueId[r]);
            long[] e = unmatched.get(key);
            if (e == null) unmatched.put(key, e = new long[] {0, w.phy[r]});
            e[0]++;
        }
    }

    private void reportUnmatchedRecords() {
        for (Map.Entry<Long, long[]> e : unmatched.entrySet()) {
            int tid = (int) (e.getKey() >>> 32);
            int qid = (int) (long) e.getKey();
            String topic = topicNames.get(tid);
            long count = e.getValue()[0];
            boolean hasFiles = queueKeyIndex.containsKey(e.getKey());
            report.add("consumequeue", "cq-missing-unit", report.rel(layout.queueDir(topic, qid).getPath()), -1,
                    count + " record(s) of " + topic + "/" + qid + " have no ConsumeQueue unit (first at CommitLog "
                            + "offset " + e.getValue()[1] + ")"
                            + (hasFiles ? "" : "; the queue has no ConsumeQueue files (dispatch rebuilds them)"),
                    "a unit per record", count + " missing");
        }
    }

    /** Units and entries left after the walk point past the CommitLog's valid end. */
    private void drainCursors(long end) {
        w.clear();
        takeUnits(1L << 62);
        Listed past = new Listed("cq-past-end");
        for (int j = 0; j < pending.n; j++) {
            past.addUnit(j, "points at CommitLog offset " + pending.phy[j] + ", past the CommitLog's valid end "
                    + "(recovery trims it)", "< " + end, Long.toString(pending.phy[j]));
        }
        past.flushUnits();
        index.takeBelow(1L << 62, new IndexCheck.Sink() {
            @Override
            public void block(IndexCheck.Usable file, int[] numbers, long[] phy, int from, int to) {
                String rel = report.rel(file.path);
                for (int j = from; j < to; j++) {
                    if (j - from >= PER_CHECK_DETAIL) {
                        report.count(Report.WARNING, "index-past-end", to - j);
                        break;
                    }
                    report.add("index", "index-past-end", rel, file.base + (long) numbers[j] * 20, "entry "
                            + numbers[j] + " points at CommitLog offset " + phy[j] + ", past the CommitLog's valid end",
                            "< " + end, Long.toString(phy[j]), Report.WARNING);
                }
            }
        });
    }

    /**
     * Problems of one check in one window, listed when it ends: the first PER_CHECK_DETAIL in the
     * Python twin's order (records: CommitLog order; units: (phy, take order)), the others counted.
     */
    private final class Listed {
        final String check;
        final List<Object[]> items = new ArrayList<>();
        long extra;

        Listed(String check) {
            this.check = check;
        }

        /** A record's problem, at its position in the segment file (found in CommitLog order). */
        void add(long at, String message, String expected, String found) {
            if (items.size() >= PER_CHECK_DETAIL) {
                extra++;
            } else {
                items.add(new Object[] {at, message, expected, found});
            }
        }

        /** A problem of the unit at row {@code j} of {@link #pending} (rows come in no particular order). */
        void addUnit(int j, String message, String expected, String found) {
            UnitQueue u = pending;
            items.add(new Object[] {u.phy[j], u.seq[j], u.queue[j], u.qoff[j], message, expected, found});
        }

        void flush(String rel) {
            if (extra > 0) report.count(Report.ERROR, check, extra);
            for (Object[] it : items) {
                report.add("commitlog", check, rel, (Long) it[0], (String) it[1], (String) it[2], (String) it[3]);
            }
        }

        /** Unit problems, named by the unit's ConsumeQueue file and position. */
        void flushUnits() {
            items.sort(new BoxedPairOrder());
            if (items.size() > PER_CHECK_DETAIL) report.count(Report.ERROR, check, items.size() - PER_CHECK_DETAIL);
            for (Object[] it : items.subList(0, Math.min(items.size(), PER_CHECK_DETAIL))) {
                QueueCursor q = queues.get((Integer) it[2]);
                long qoff = (Long) it[3];
                Object[] where = q.fileAndPosition(qoff);
                report.add("consumequeue", check, (String) where[0], (Long) where[1], "unit " + qoff + " of "
                        + q.topic + "/" + q.queueId + " " + it[4], (String) it[5], (String) it[6]);
            }
        }
    }
}
