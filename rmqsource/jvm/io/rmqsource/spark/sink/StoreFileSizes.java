package io.rmqsource.spark.sink;

import io.rmqsource.errors.OptionError;
import io.rmqsource.errors.StoreError;
import io.rmqsource.store.StoreConfig;
import io.rmqsource.store.StoreLayout;
import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * file_sizes.py fit_config_to_files: a writer appending to a store uses the sizes its files already
 * have; a size the caller set that disagrees with the files, or files of one kind that disagree, is an
 * error naming a file.
 */
final class StoreFileSizes {
    private static final String COMMIT_LOG_KEY = "mappedFileSizeCommitLog";
    private static final String CONSUME_QUEUE_KEY = "mappedFileSizeConsumeQueue";
    private static final int INDEX_HEADER_BYTES = 40;
    private static final int INDEX_SLOT_BYTES = 4;
    private static final int INDEX_ENTRY_BYTES = 20;
    private static final int MAX_QUEUE_DIRS = 1_000_000;

    private StoreFileSizes() {
    }

    /** given_keys: the MessageStoreConfig keys of the config file and the overrides. */
    static Set<String> givenKeys(String configFile, Collection<String> overrides) {
        Set<String> keys = new HashSet<>();
        for (String k : overrides) keys.add(k.strip());
        if (configFile != null && !configFile.isEmpty()) {
            java.util.Properties p = new java.util.Properties();
            try (InputStreamReader in = new InputStreamReader(new FileInputStream(configFile), StandardCharsets.UTF_8)) {
                p.load(in);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            for (Object k : p.keySet()) keys.add(String.valueOf(k).strip());
        }
        return keys;
    }

    static StoreConfig fit(StoreConfig config, String root, Set<String> given) {
        if (!new File(root).isDirectory()) return config;
        StoreLayout layout = new StoreLayout(root, config);
        layout.checkSupported();
        Map<String, String> changes = new java.util.LinkedHashMap<>();
        List<File> commitLog = new ArrayList<>();
        for (String d : layout.commitLogDirs) commitLog.addAll(segments(new File(d)));
        File seg = oneSize(commitLog, "CommitLog segment");
        if (seg != null && seg.length() != config.mappedFileSizeCommitLog()) {
            refuseGiven(given, COMMIT_LOG_KEY, Long.toString(config.mappedFileSizeCommitLog()), seg, "");
            changes.put(COMMIT_LOG_KEY, Long.toString(seg.length()));
        }
        List<File> cq = new ArrayList<>();
        File[] topics = layout.consumeQueueDir().listFiles(File::isDirectory);
        int dirs = 0;
        for (File t : topics == null ? new File[0] : topics) {
            File[] queues = t.listFiles(File::isDirectory);
            for (File q : queues == null ? new File[0] : queues) {
                if (++dirs > MAX_QUEUE_DIRS) break;
                cq.addAll(segments(q));
            }
        }
        seg = oneSize(cq, "ConsumeQueue");
        long cqBytes = config.mappedFileSizeConsumeQueue();
        if (seg != null && seg.length() != cqBytes) {
            refuseGiven(given, CONSUME_QUEUE_KEY, Long.toString(cqBytes), seg, "");
            changes.put(CONSUME_QUEUE_KEY, Long.toString(seg.length()));
        }
        File index = oldestIndexFile(layout.indexDir());
        long h = config.maxHashSlotNum();
        long n = config.maxIndexNum();
        long expected = INDEX_HEADER_BYTES + h * INDEX_SLOT_BYTES + n * INDEX_ENTRY_BYTES;
        if (index != null && index.length() != expected) {
            String note = "maxHashSlotNum=" + h + " maxIndexNum=" + n + " make " + expected + "-byte IndexFiles";
            refuseGiven(given, "maxHashSlotNum", h + "/" + n, index, note);
            refuseGiven(given, "maxIndexNum", h + "/" + n, index, note);
            long body = index.length() - INDEX_HEADER_BYTES;
            long per = INDEX_SLOT_BYTES + 4L * INDEX_ENTRY_BYTES;
            if (body > 0 && body % per == 0) {
                changes.put("maxHashSlotNum", Long.toString(body / per));
                changes.put("maxIndexNum", Long.toString(4 * (body / per)));
            }
        }
        return changes.isEmpty() ? config : config.withOverrides(changes);
    }

    private static List<File> segments(File dir) {
        File[] files = dir.listFiles(f -> f.isFile() && allDigits(f.getName()));
        if (files == null) return List.of();
        Arrays.sort(files);
        return Arrays.asList(files);
    }

    private static File oneSize(List<File> segments, String what) {
        if (segments.isEmpty()) return null;
        File first = segments.get(0);
        for (File s : segments) {
            if (s.length() != first.length()) {
                throw new StoreError(what + " files differ in size: " + first + " is " + first.length() + " bytes, "
                        + s + " is " + s.length());
            }
        }
        return first;
    }

    private static File oldestIndexFile(File dir) {
        File[] files = dir.listFiles(f -> f.isFile() && f.getName().length() == 17 && allDigits(f.getName()));
        if (files == null) return null;
        Arrays.sort(files);
        for (File f : files) if (f.length() > 0) return f;
        return null;
    }

    private static void refuseGiven(Set<String> given, String key, String value, File seg, String note) {
        if (given.contains(key)) {
            throw new OptionError(key + " is set to " + value + (note.isEmpty() ? "" : " (" + note + ")") + ", but "
                    + seg + " is " + seg.length() + " bytes: leave " + key + " out to take the size from the store's "
                    + "files, or give the value the store was written with");
        }
    }

    private static boolean allDigits(String s) {
        if (s.isEmpty()) return false;
        for (int i = 0; i < s.length(); i++) if (s.charAt(i) < '0' || s.charAt(i) > '9') return false;
        return true;
    }
}
