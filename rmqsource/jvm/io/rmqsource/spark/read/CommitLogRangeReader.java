package io.rmqsource.spark.read;

import io.rmqsource.errors.CorruptRecordError;
import io.rmqsource.errors.DataLossError;
import io.rmqsource.format.ConsumeQueue;
import io.rmqsource.format.DLedgerFormat;
import io.rmqsource.format.Record;
import io.rmqsource.format.TagsCode;
import io.rmqsource.spark.read.RmqInputPartition.CommitLogRange;
import io.rmqsource.spark.read.vector.RecordColumns;
import io.rmqsource.store.Segment;
import io.rmqsource.store.Segments;
import org.apache.spark.sql.types.StructType;

/**
 * Whole-store reads: the records of a CommitLog byte range [start, end) of one segment, walked
 * header by header through the mapped file (twin of read_commitlog_range in commitlog_range.py, same stops
 * and errors); a DLedger data file entry by entry, through the same windows.  The range starts at a record boundary; the first record must say so in its own
 * PHYSICALOFFSET, and no record may run past the end (the valid end or a split point).  Off a
 * mapped file the range is read in large windows (a record straddling a window's end is read again
 * from its start by the next), never a request per record.
 */
final class CommitLogRangeReader extends RecordBatchReader {
    private final CommitLogRange part;
    private final Segment seg;
    private final Segments segments;
    private Segments.Window w;
    private final long segStart;
    private final long segLen;
    private final long end;
    private final boolean tagsCodeNeeded;
    private long pos;
    private boolean first = true;
    // DLedger data file: pos is the position of the next entry header; index/term follow from entry to entry.
    private final DLedgerFormat.Header entry;
    private final DLedgerFormat.Chain chain = new DLedgerFormat.Chain();

    CommitLogRangeReader(ReadSpec spec, CommitLogRange part, StructType schema) {
        super(spec, part.store, schema);
        this.part = part;
        seg = reader.commitLog.segments.find(part.start);
        if (seg == null) {
            throw new DataLossError("CommitLog segment for offset " + part.start + " of " + part.store.root
                    + " is gone (deleted while the query ran?)");
        }
        segments = reader.commitLog.segments;
        segStart = seg.startOffset;
        segLen = segments.lengthOf(seg);
        pos = part.start - segStart;
        end = part.end - segStart;
        // A range of a DLedger file starts at a record (its entry header is 48 bytes before) or at the file start.
        if (seg.dledger && pos >= DLedgerFormat.ENTRY_HEADER_BYTES) pos -= DLedgerFormat.ENTRY_HEADER_BYTES;
        w = segments.readWindow(seg, pos, Math.max(Math.min(8, end - pos),
                Math.min(segments.files.windowBytes(), end - pos)));
        readAhead();
        tagsCodeNeeded = spec.tagHashes != null || columns.has(RecordColumns.TAGS_CODE);
        entry = seg.dledger ? new DLedgerFormat.Header() : null;
    }

    /**
     * Makes the window hold [pos, pos + need): a new window from pos when it does not, of the window
     * size but never past the range's end (nothing after it is read).  Whether the window changed.
     */
    private boolean holdAtLeast(long need) {
        if (w.covers(pos, need)) return false;
        w = segments.readWindow(seg, pos, Math.max(need, Math.min(segments.files.windowBytes(), end - pos)));
        readAhead();
        return true;
    }

    /** Starts reading the window after this one while this one is decoded (positioned reads). */
    private void readAhead() {
        long next = w.base + w.buf.capacity();
        segments.prefetch(seg, next, Math.min(segments.files.windowBytes(), end - next));
    }

    private CorruptRecordError noRecord(String detail) {
        return new CorruptRecordError("no valid record at CommitLog offset " + (segStart + pos) + ", below the valid end "
                + part.end + ": " + detail, seg.path, pos);
    }

    @Override
    protected boolean fill() {
        if (entry != null) return fillDLedger();
        long fileLen = w.fileLength;
        long bufEnd = Math.min(fileLen, end);          // what a read of the range can return
        while (pos < end) {
            if (columns.full()) return true;
            if (holdAtLeast(Math.min(8, end - pos))) {
                fileLen = w.fileLength;
                bufEnd = Math.min(fileLen, end);
            }
            if (fileLen - pos < Math.min(8, end - pos)) {
                long at = Math.max(pos, fileLen);
                throw new CorruptRecordError("file ends at position " + at + " before the valid CommitLog end " + part.end,
                        seg.path, at);
            }
            if (pos + 8 > bufEnd) {
                if (pos + 8 > segLen) throw noRecord("fewer than 8 bytes left in the segment");
                throw new CorruptRecordError("a record header runs past the range end " + part.end
                        + " (the valid CommitLog end or a split point)", seg.path, pos);
            }
            int total = w.buf.getInt(w.at(pos));
            int magic = w.buf.getInt(w.at(pos) + 4);
            if (magic != Record.MAGIC_V1 && magic != Record.MAGIC_V2) {
                if (magic == Record.BLANK_MAGIC) {
                    pos = end;                          // end-of-segment padding: nothing after it
                    return false;
                }
                throw noRecord(total == 0 && magic == 0 ? "zero bytes"
                        : String.format("unknown magic code 0x%08X", magic));
            }
            int maxRecord = segments.files.maxRecordBytes();
            if (total < Record.MIN_RECORD_BYTES || pos + total > segLen || total > maxRecord) {
                throw noRecord("totalSize " + total + " outside [" + Record.MIN_RECORD_BYTES + ", "
                        + Math.min(segLen - pos, maxRecord) + "]");
            }
            if (pos + total > end) {
                throw new CorruptRecordError("record of " + total + " bytes runs past the range end " + part.end
                        + " (the valid CommitLog end or a split point)", seg.path, pos);
            }
            if (pos + total > fileLen) {
                throw new CorruptRecordError("file ends at position " + fileLen + " before the valid CommitLog end "
                        + part.end, seg.path, fileLen);
            }
            holdAtLeast(total);
            base = w.base;
            decode(w.buf, w.at(pos), bufEnd - pos, -1, seg.path);
            if (first) {
                if (record.phyOffset != part.start) {
                    throw new CorruptRecordError("no record starts at CommitLog offset " + part.start
                            + " (the record here says PHYSICALOFFSET " + record.phyOffset + ")", seg.path, pos);
                }
                first = false;
            }
            pos += total;
            offerWholeStore();
        }
        return false;
    }

    /**
     * The records of a DLedger data file in [start, end): entry by entry, each header checked as DLedger
     * recovery checks it and its record as any CommitLog record at its own offset.  Below the valid end
     * every entry must hold (the end was found by the same header walk); a blank ends the file.
     */
    private boolean fillDLedger() {
        while (pos + DLedgerFormat.ENTRY_HEADER_BYTES < end) {     // the next record starts inside the range
            if (columns.full()) return true;
            holdAtLeast(DLedgerFormat.ENTRY_HEADER_BYTES);
            long limit = Math.min(segLen, w.fileLength);            // file positions the file has
            DLedgerFormat.decodeEntry(w.buf, w.at(pos), Math.min(w.buf.capacity(), w.at(limit)), entry);
            if (entry.kind == DLedgerFormat.BLANK) break;
            if (entry.kind == DLedgerFormat.END) {
                throw new CorruptRecordError("the DLedger data ends at CommitLog offset " + (segStart + pos)
                        + ", below the end " + part.end + " this read was planned with", seg.path, pos);
            }
            String[] problem = DLedgerFormat.headerProblem(entry, segStart + pos, chain);
            if (problem == null && pos + entry.size > segLen) {
                problem = new String[] {"size", "entry size " + entry.size + " runs past the end of the file"};
            }
            if (problem != null) {
                throw new CorruptRecordError("DLedger entry header below the end " + part.end
                        + " this read was planned with: " + problem[1], seg.path, pos);
            }
            if (pos + entry.size > limit) {
                throw new CorruptRecordError("the file ends inside the DLedger entry of " + entry.size
                        + " bytes that starts here", seg.path, pos);
            }
            if (entry.bodyLen > segments.files.maxRecordBytes()) throw Segments.tooLong(seg, pos, entry.bodyLen, segments.files);
            holdAtLeast(entry.size);
            chain.follow(entry);
            long rec = pos + DLedgerFormat.ENTRY_HEADER_BYTES;
            base = w.base;
            decode(w.buf, w.at(rec), entry.bodyLen, entry.bodyLen, seg.path);     // the record fills its entry exactly
            if (record.phyOffset != segStart + rec) {
                throw new CorruptRecordError("record PHYSICALOFFSET " + record.phyOffset + " is not its offset "
                        + (segStart + rec), seg.path, rec);
            }
            pos = rec + entry.bodyLen;
            offerWholeStore();
        }
        pos = end;
        return false;
    }

    private void offerWholeStore() {
        if (!rowMask(true)) return;
        Topic topic = null;
        long code = 0;
        boolean valid = false;
        if (dropInternalTopics) {
            topic = topic(w.buf, record);
            if (topic.internal) return;
        }
        if (tagsCodeNeeded) {
            if (topic == null) topic = topic(w.buf, record);
            valid = unitTagsCode(topic, record);
            code = valid ? lastUnitTagsCode() : 0;
            if (spec.tagHashes != null && valid && !TagsCode.SCHEDULE_TOPIC.equals(topic.name)
                    && !ConsumeQueue.tagMatches(code, spec.tagHashes)) {
                return;       // its unit's tagsCode cannot match: skipped as the unit filter would
            }
        }
        emit(w.buf, topic, code, valid, seg.path);
    }
}
