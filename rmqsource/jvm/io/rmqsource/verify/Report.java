package io.rmqsource.verify;

import io.rmqsource.format.JsonText;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What the walk found (twin of rmqsource/store/verify_report.py): the first problems in full,
 * every problem counted by (severity, check), written to stdout as JSON lines for ``rmq verify``.
 */
public final class Report {
    static final String ERROR = "error";
    static final String WARNING = "warning";
    static final int MAX_PROBLEMS_KEPT = 1000;

    private final Path root;
    private final PrintStream out;
    private final List<String> problems = new ArrayList<>();
    /** "severity check" -> number found (listed or not). */
    final Map<String, Long> counts = new LinkedHashMap<>();

    public Report(String root, PrintStream out) {
        this.root = Path.of(root).toAbsolutePath().normalize();
        this.out = out;
    }

    void add(String area, String check, String file, long offset, String message, String expected, String found) {
        add(area, check, file, offset, message, expected, found, ERROR);
    }

    /** One problem; {@code offset} < 0 means none (a directory, or the file as a whole). */
    void add(String area, String check, String file, long offset, String message, String expected, String found,
             String severity) {
        count(severity, check, 1);
        if (problems.size() >= MAX_PROBLEMS_KEPT) return;
        StringBuilder sb = new StringBuilder(256);
        sb.append("{\"severity\":").append(JsonText.str(severity)).append(",\"area\":").append(JsonText.str(area))
                .append(",\"check\":").append(JsonText.str(check)).append(",\"file\":").append(JsonText.str(file))
                .append(",\"offset\":").append(offset < 0 ? "null" : Long.toString(offset))
                .append(",\"expected\":").append(JsonText.str(expected)).append(",\"found\":").append(JsonText.str(found))
                .append(",\"message\":").append(JsonText.str(message)).append('}');
        problems.add(sb.toString());
    }

    /** Problems found but not built one by one (past a per-check listing limit). */
    void count(String severity, String check, long n) {
        String key = severity + " " + check;
        Long had = counts.get(key);
        counts.put(key, had == null ? n : had + n);
    }

    /** A store file's path relative to the root, as problems name them (the path itself when outside it). */
    String rel(String path) {
        Path p = Path.of(path).toAbsolutePath().normalize();
        return p.startsWith(root) && !p.equals(root) ? root.relativize(p).toString() : path;
    }

    void progress(long bytes) {
        out.println("{\"progress\":" + bytes + "}");
        out.flush();
    }

    /** The problems kept, then every count, then {@code tail} (the walk's figures). */
    public void write(String tail) {
        for (String p : problems) out.append("{\"problem\":").append(p).append("}\n");
        StringBuilder sb = new StringBuilder("{\"counts\":[");
        boolean first = true;
        for (Map.Entry<String, Long> e : counts.entrySet()) {
            String[] k = e.getKey().split(" ", 2);
            sb.append(first ? "" : ",").append('[').append(JsonText.str(k[0])).append(',').append(JsonText.str(k[1]))
                    .append(',').append(e.getValue()).append(']');
            first = false;
        }
        out.append(sb).append("]}\n").append(tail).append('\n');
        out.flush();
    }
}
