package io.rmqsource.spark.verify;

import io.rmqsource.spark.format.DLedgerFormat;
import io.rmqsource.spark.store.Segment;
import io.rmqsource.spark.store.Segments;
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;

/**
 * The DLedger folder's own files against the data walked (component {@code dledger}): the entry index
 * ({@code index/}, 32 bytes per entry at {@code index * 32}) and the {@code checkpoint}.  Problems are
 * collected during the walk and listed after it: index-entry (entry order), index-missing, checkpoint.
 */
final class DLedgerCheck {
    private final Report report;
    private final File folder;
    private final Segments index;
    private final List<Object[]> indexProblems = new ArrayList<>();
    private long indexProblemsNotListed;
    private long entries;
    private long missing;
    private long firstMissing = -1;
    private long lastIndex = -1;

    DLedgerCheck(File folder, Report report) {
        this.report = report;
        this.folder = folder;
        this.index = new Segments(Segments.listDirectory(new File(folder, "index").getPath()), 0);
    }

    /** An entry whose header passed the recovery checks, at absolute offset {@code entryPos}. */
    void entry(DLedgerFormat.Header h, long entryPos) {
        entries++;
        lastIndex = h.index;
        long at = h.index * DLedgerFormat.INDEX_ENTRY_BYTES;
        Segment seg = h.index >= 0 ? index.find(at) : null;
        ByteBuffer b = seg == null ? null : index.map(seg);
        long pos = at - (seg == null ? 0 : seg.startOffset);
        if (b == null || pos + DLedgerFormat.INDEX_ENTRY_BYTES > b.capacity()) {
            missing++;
            if (firstMissing < 0) firstMissing = h.index;
            return;
        }
        String problem = DLedgerFormat.indexEntryProblem(b, (int) pos, h, entryPos);
        if (problem == null) return;
        if (indexProblems.size() >= Verifier.PER_CHECK_DETAIL) {
            indexProblemsNotListed++;
        } else {
            indexProblems.add(new Object[] {report.rel(seg.path), pos, problem});
        }
    }

    /** Lists the problems found (after the walk). */
    void finish() {
        if (indexProblemsNotListed > 0) report.count(Report.ERROR, "index-entry", indexProblemsNotListed);
        for (Object[] p : indexProblems) {
            report.add("dledger", "index-entry", (String) p[0], (Long) p[1], (String) p[2]
                    + " (DLedger recovery rebuilds the index)", "the data entry's header", "a different index entry");
        }
        if (missing > 0) {
            report.add("dledger", "index-missing", report.rel(new File(folder, "index").getPath()), -1,
                    "the DLedger index covers fewer entries than the data holds (" + missing + " missing, the first "
                            + "is entry " + firstMissing + "; DLedger recovery rebuilds the index)",
                    entries + " entries", (entries - missing) + " entries");
        }
        checkpoint();
    }

    /** committedIndex / endIndex past the last valid entry, or a checkpoint that cannot be read. */
    private void checkpoint() {
        File f = new File(folder, "checkpoint");
        if (!f.exists()) return;                  // the engine recovers without it
        String rel = report.rel(f.getPath());
        Long committed;
        Long end;
        try {
            String text = new String(Files.readAllBytes(f.toPath()), StandardCharsets.ISO_8859_1);
            committed = value(text, "committedIndex");
            end = value(text, "endIndex");
        } catch (IOException | NumberFormatException e) {
            report.add("dledger", "checkpoint", rel, -1, "the DLedger checkpoint cannot be read: " + e.getMessage(),
                    "committedIndex=<n> and endIndex=<n>", "unreadable");
            return;
        }
        for (Object[] kv : new Object[][] {{"committedIndex", committed}, {"endIndex", end}}) {
            Long v = (Long) kv[1];
            if (v != null && v > lastIndex) {
                report.add("dledger", "checkpoint", rel, -1, kv[0] + " " + v + " is past the last valid entry "
                        + lastIndex, "<= " + lastIndex, Long.toString(v));
            }
        }
    }

    /** A key's value in Java properties text (null when absent). */
    private static Long value(String text, String key) {
        Long out = null;
        for (String line : text.split("\r?\n|\r")) {
            String l = line.strip();
            if (l.isEmpty() || l.charAt(0) == '#' || l.charAt(0) == '!' || l.indexOf('=') < 0) continue;
            int eq = l.indexOf('=');
            if (l.substring(0, eq).strip().equals(key)) out = Long.parseLong(l.substring(eq + 1).strip());
        }
        return out;
    }

    void close() {
        index.close();
    }
}
