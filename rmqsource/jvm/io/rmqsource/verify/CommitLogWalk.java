package io.rmqsource.verify;

import io.rmqsource.format.DLedgerFormat;
import io.rmqsource.format.Properties;
import io.rmqsource.format.Record;
import io.rmqsource.format.TagsCode;
import io.rmqsource.store.CommitLog;
import io.rmqsource.store.RocksDbTail;
import io.rmqsource.store.Segment;
import io.rmqsource.store.Segments;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32;

/**
 * The CommitLog walk of {@link Verifier} (rmqsource/store/verify_walk.py): segment by segment, window by window
 * (CHUNK_BYTES of one segment, or whole DLedger entries), the totalSize chain and every record's fields,
 * PHYSICALOFFSET, body CRC and __CRC32# property; each window's records (and the LMQ copies their multi-dispatch
 * gives) go to {@link UnitMatching}.
 */
final class CommitLogWalk {
    static final int CHUNK_BYTES = 16 * 1024 * 1024;
    private static final long CRC_PROP_WORD = 0x5F5F435243333223L;  // "__CRC32#"
    static final String INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH";          // MessageConst names
    static final String INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET";
    private static final byte[] MULTI_DISPATCH_KEY = INNER_MULTI_DISPATCH.getBytes(StandardCharsets.US_ASCII);
    private static final byte[] MULTI_QUEUE_OFFSET_KEY = INNER_MULTI_QUEUE_OFFSET.getBytes(StandardCharsets.US_ASCII);

    private final CommitLog cl;
    private final long clMin;
    private final long[] delays;
    private final Report report;
    private final TopicIds topics;
    private final UnitMatching units;
    private final DLedgerChecks dledger;
    private final CRC32 crc = new CRC32();
    private final Properties props = new Properties();
    private final RecordFields f = new RecordFields();
    /** The records of the window being walked (cleared by the unit matching when it is done with them). */
    private final Window w;
    private final RecordChecker recordChecker = new RecordChecker();
    long records;
    long maxStoreTs;
    long invalidAt = 1L << 62;            // first record recovery would stop at (fields that do not add up)
    private boolean multiDispatch;        // the record just decoded has an INNER_MULTI_DISPATCH entry

    /** The chain walk's visitor: each record found is checked at once, while its bytes are in cache. */
    private final class RecordChecker implements Chain.Visitor {
        ByteBuffer buffer;

        @Override
        public void record(int pos, int totalSize) {
            checkRecord(buffer, pos, totalSize);
        }
    }

    CommitLogWalk(CommitLog cl, long clMin, long[] delays, Report report, TopicIds topics, UnitMatching units,
                  Window w, DLedgerChecks dledger) {
        this.cl = cl;
        this.clMin = clMin;
        this.delays = delays;
        this.report = report;
        this.topics = topics;
        this.units = units;
        this.w = w;
        this.dledger = dledger;
    }

    /** Checks every segment; returns the end of the valid data. */
    long walk() {
        long end = clMin;
        List<Segment> segs = upToTheLastHoldingData(cl.list());
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

    /**
     * The segments up to the last one holding a non-zero byte (the first one at least). A broker creates the
     * next CommitLog file before it is needed (RocketMQ's AllocateMappedFileService): all zeros, it holds no
     * record, and the broker's recovery deletes it; it is not a later segment the data failed to reach.
     */
    private static List<Segment> upToTheLastHoldingData(List<Segment> segs) {
        int n = segs.size();
        while (n > 1 && FileReads.firstNonZero(segs.get(n - 1).path, 0, segs.get(n - 1).sizeBytes) < 0) n--;
        return segs.subList(0, n);
    }

    // DLedger walk state: entries carry index and term across files.
    private final DLedgerFormat.Header entry = new DLedgerFormat.Header();
    private final DLedgerFormat.Chain entryChain = new DLedgerFormat.Chain();

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
            units.takeUnits(windowEnd);
            entryLengths.flush(rel);                            // the Python walk lists these after taking units
            endWindow(rel);
            units.checkUnitsAndEntries(windowEnd);
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
            units.takeUnits(seg.startOffset + pos + n);
            if (n == 0) return dataEnds(b, seg, rel, pos, segLen, last, "the file ends here, before the segment size");
            Chain c = walkWindow(b, seg, pos, n, segLen - pos);
            if (c.reason == Chain.SHORT && c.count == 0) {
                if (c.totalSize > want) {          // one record larger than a chunk: read exactly it
                    n = (int) Math.max(0, Math.min(c.totalSize, fileLen - pos));
                    units.takeUnits(seg.startOffset + pos + n);
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
            units.checkUnitsAndEntries(windowEnd);
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
        entryLengths = new Listed(report, "record-length");
        phyProblems = new Listed(report, "phy-offset");
        bodyCrcs = new Listed(report, "body-crc");
        recordCrcs = new Listed(report, "record-crc");
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
        int tid = reason == null ? topics.recordTopicId(b, f.topicPos, f.topicLen) : -1;
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
        multiDispatch = false;
        w.add(phy, total, tid, f.queueId, f.queueOffset, tagsCode(b, tid), !f.isPreparedOrRollback());
        if (multiDispatch && !f.isPreparedOrRollback()) addLmqCopies(b, w.n - 1);
    }

    /**
     * The copies the multi-dispatch of the record just added (row {@code row}) gives (LMQ): a record naming queues
     * in INNER_MULTI_DISPATCH has a unit in each, at its offset in INNER_MULTI_QUEUE_OFFSET (twin of _lmq_copies
     * in rmqsource/store/verify_walk.py).  A prepared or rolled-back half is not dispatched at all.
     */
    private void addLmqCopies(ByteBuffer b, int row) {
        props.parse(b, f.propsPos, f.propsLen);
        int names = props.find(MULTI_DISPATCH_KEY);
        int offsets = props.find(MULTI_QUEUE_OFFSET_KEY);
        if (names < 0 || offsets < 0) return;
        for (Object[] c : RocksDbTail.multiDispatchCopies(props.valueString(names), props.valueString(offsets),
                f.queueId)) {
            w.addCopy(row, (String) c[0], (Integer) c[1], (Long) c[2]);
        }
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
        if (TagsCode.SCHEDULE_TOPIC.equals(topics.name(topicId))) return scheduleTagsCode(b);
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
            } else if (s[i] == 'I' && startsWithKey(s, i, j, MULTI_DISPATCH_KEY)) {
                multiDispatch = true;
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

    /** Whether the entry s[i, j) starts with {@code key} and its 0x01. */
    private static boolean startsWithKey(byte[] s, int i, int j, byte[] key) {
        if (j - i <= key.length || s[i + key.length] != Properties.NAME_VALUE_SEPARATOR) return false;
        for (int k = 0; k < key.length; k++) {
            if (s[i + k] != key[k]) return false;
        }
        return true;
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
        multiDispatch = props.find(MULTI_DISPATCH_KEY) >= 0;
        int tags = props.find(Properties.TAGS);
        int delay = props.find(Properties.DELAY);
        return TagsCode.consumeQueueTagsCode(TagsCode.SCHEDULE_TOPIC, tags < 0 ? null : props.valueString(tags),
                delay < 0 ? null : props.valueString(delay), f.storeTimestamp, delays);
    }
}
