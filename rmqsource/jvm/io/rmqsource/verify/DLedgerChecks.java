package io.rmqsource.verify;

import io.rmqsource.format.DLedgerFormat;
import io.rmqsource.store.Segment;
import io.rmqsource.store.Segments;
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.util.ArrayList;
import java.util.List;

/**
 * ``rmq verify`` of the DLedger files besides the data walk (twin of rmqsource/store/verify_dledger.py): the
 * entry index ({@code index/}, 32 bytes per entry at {@code index * 32}) against every entry the walk found
 * valid, and the {@code checkpoint}.  Problems are component {@code dledger}, listed after the walk in this
 * order: index-entry (ascending entry index), index-missing, checkpoint.
 */
final class DLedgerChecks {
    private final Report report;
    private final File folder;
    private final Segments index;
    private final List<Object[]> indexProblems = new ArrayList<>();
    private long indexProblemsNotListed;
    private long entries;
    private long covered;
    private long lastIndex = -1;

    DLedgerChecks(File folder, Report report) {
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
        if (seg == null || at + DLedgerFormat.INDEX_ENTRY_BYTES > seg.startOffset + seg.sizeBytes) return;
        ByteBuffer b = index.map(seg);
        int pos = (int) (at - seg.startOffset);
        if (pos + DLedgerFormat.INDEX_ENTRY_BYTES > b.capacity()) return;
        covered++;
        String[] problem = DLedgerFormat.indexEntryProblem(b, pos, h, entryPos);
        if (problem == null) return;
        if (indexProblems.size() >= Verifier.PER_CHECK_DETAIL) {
            indexProblemsNotListed++;
        } else {
            indexProblems.add(new Object[] {report.rel(seg.path), (long) pos, "DLedger index entry " + h.index
                    + " disagrees with its data entry header (" + problem[0] + ")", problem[1], problem[2]});
        }
    }

    /** Lists the problems found (after the walk). */
    void finish() {
        for (Object[] p : indexProblems) {
            report.add("dledger", "index-entry", (String) p[0], (Long) p[1], (String) p[2], (String) p[3], (String) p[4]);
        }
        if (indexProblemsNotListed > 0) report.count(Report.ERROR, "index-entry", indexProblemsNotListed);
        if (covered < entries) {
            report.add("dledger", "index-missing", report.rel(new File(folder, "index").getPath()), -1,
                    "the DLedger index covers fewer entries than the data holds (DLedger recovery rebuilds it)",
                    Long.toString(entries), Long.toString(covered));
        }
        checkpoint();
    }

    /** committedIndex / endIndex past the last valid entry; a checkpoint missing (a warning) or unreadable. */
    private void checkpoint() {
        File f = new File(folder, "checkpoint");
        String rel = report.rel(f.getPath());
        String text;
        try {
            text = new String(Files.readAllBytes(f.toPath()), StandardCharsets.ISO_8859_1);
        } catch (NoSuchFileException e) {
            report.add("dledger", "checkpoint", rel, -1, "no DLedger checkpoint (the engine recovers without it: the "
                    + "leader re-commits every entry)", null, null, Report.WARNING);
            return;
        } catch (IOException e) {
            report.add("dledger", "checkpoint", rel, -1, "DLedger checkpoint unreadable: " + e.getMessage(), null, null);
            return;
        }
        Long committed;
        Long end;
        try {
            committed = value(text, "committedIndex");
            end = value(text, "endIndex");
        } catch (NumberFormatException e) {
            report.add("dledger", "checkpoint", rel, -1, "DLedger checkpoint values are not numbers",
                    "committedIndex=<n> and endIndex=<n>", text.substring(0, Math.min(80, text.length())));
            return;
        }
        for (Object[] kv : new Object[][] {{"committedIndex", committed}, {"endIndex", end}}) {
            Long v = (Long) kv[1];
            if (v != null && v > lastIndex) {
                report.add("dledger", "checkpoint", rel, -1, "DLedger checkpoint " + kv[0]
                        + " is past the last valid entry", "<= " + lastIndex, Long.toString(v));
            }
        }
    }

    /** A key's value in Java properties text (the last line naming it; null when absent). */
    private static Long value(String text, String key) {
        Long out = null;
        for (String line : text.split("\r\n|\r|\n")) {
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
