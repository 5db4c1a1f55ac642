package io.rmqsource.spark.store;

import io.rmqsource.spark.errors.NotAStoreError;
import io.rmqsource.spark.errors.OptionError;
import io.rmqsource.spark.errors.UnsupportedLayoutError;
import java.io.File;
import java.io.IOException;
import java.io.Serializable;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Where things live under a store root (spec 1), twin of rmqsource/store/layout.py. {@link #checkSupported}
 * is the one place that decides whether the files (and the store config) are a layout this package reads;
 * a store holding data of another layout is refused with one UnsupportedLayoutError naming the folder.
 * DLedger stores ({@code dledger-<selfId>/}) are read (the Python writer refuses to write them).
 */
public final class StoreLayout implements Serializable {
    private static final long serialVersionUID = 2L;
    private static final String[] ROCKSDB_CONSUME_QUEUE_DIRS = {"consumequeue", "consumequeue_rocksdb"};
    private static final String DLEDGER_PREFIX = "dledger-";        // DLedgerConfig: {storeBaseDir}/dledger-{selfId}/
    private static final String DEFAULT_DLEDGER_SELF_ID = "n0";     // MessageStoreConfig.dLegerSelfId
    private static final String ONLY_FILE_LAYOUT = "only the file CommitLog and ConsumeQueue layout is read";
    public final String root;
    public final List<String> commitLogDirs;
    // Store-config keys that announce a layout (null / false: the config says nothing).
    private final String readOnlyCommitLogStorePaths;
    private final boolean enableDLegerCommitLog;
    private final String storePathDLedgerCommitLog;
    private final String dLegerSelfId;

    /** The layout of root as the config describes it. */
    public StoreLayout(String root, StoreConfig config) {
        this(root, config.storePathCommitLog(), config.readOnlyCommitLogStorePaths(), config.enableDLegerCommitLog(),
                config.storePathDLedgerCommitLog(), config.dLegerSelfId());
    }

    public StoreLayout(String root, String storePathCommitLog) {
        this(root, storePathCommitLog, null, false, null, null);
    }

    private StoreLayout(String root, String storePathCommitLog, String readOnlyCommitLogStorePaths,
                        boolean enableDLegerCommitLog, String storePathDLedgerCommitLog, String dLegerSelfId) {
        this.readOnlyCommitLogStorePaths = readOnlyCommitLogStorePaths;
        this.enableDLegerCommitLog = enableDLegerCommitLog;
        this.storePathDLedgerCommitLog = storePathDLedgerCommitLog == null || storePathDLedgerCommitLog.strip().isEmpty()
                ? null : storePathDLedgerCommitLog;
        this.dLegerSelfId = dLegerSelfId == null || dLegerSelfId.strip().isEmpty() ? null : dLegerSelfId.strip();
        this.root = root;
        List<String> dirs = new ArrayList<>();
        if (storePathCommitLog != null && !storePathCommitLog.isEmpty()) {
            for (String p : storePathCommitLog.split(",")) {
                if (!p.strip().isEmpty()) dirs.add(p.strip());
            }
        } else {
            dirs.add(new File(root, "commitlog").getPath());
        }
        this.commitLogDirs = dirs;
    }

    public File consumeQueueDir() {
        return new File(root, "consumequeue");
    }

    public File indexDir() {
        return new File(root, "index");
    }

    /**
     * The {@code dledger-<selfId>/} folder of a DLedger store (it may not exist yet), else null (layout.py's
     * dledger_dir).  Found from the files (one {@code dledger-*} folder under the root, or under
     * storePathDLedgerCommitLog), or announced by the config (enableDLegerCommitLog,
     * storePathDLedgerCommitLog).  Several folders need dLegerSelfId to choose one.
     */
    public File dledgerDir() {
        File r = new File(root);
        File base = storePathDLedgerCommitLog != null ? new File(storePathDLedgerCommitLog) : r;
        List<String> folders = new ArrayList<>();
        for (String n : names(base, true)) if (n.startsWith(DLEDGER_PREFIX)) folders.add(n);
        folders.sort(null);
        if (!base.equals(r) && new File(base, "data").isDirectory() && !base.getName().startsWith(DLEDGER_PREFIX)
                && folders.isEmpty()) {
            return base;                // storePathDLedgerCommitLog names the folder itself
        }
        boolean announced = enableDLegerCommitLog || storePathDLedgerCommitLog != null;
        if (dLegerSelfId != null) {
            String name = DLEDGER_PREFIX + dLegerSelfId;
            if (!folders.contains(name) && !announced) {
                throw new UnsupportedLayoutError("dLegerSelfId " + dLegerSelfId + " names no DLedger folder: no " + name
                        + " under " + base.getPath()
                        + (folders.isEmpty() ? "" : " (DLedger folders: " + String.join(", ", folders) + ")"), root, -1);
            }
            return new File(base, name);
        }
        if (folders.size() > 1) {
            throw new UnsupportedLayoutError("several DLedger folders (" + String.join(", ", folders)
                    + "): choose one with the dLegerSelfId option", root, -1);
        }
        if (!folders.isEmpty()) return new File(base, folders.get(0));
        return announced ? new File(base, DLEDGER_PREFIX + DEFAULT_DLEDGER_SELF_ID) : null;
    }

    /** The DLedger data folder ({@code dledger-<selfId>/data}), or null when the store has none. */
    public File dledgerDataDir() {
        File d = dledgerDir();
        return d == null ? null : new File(d, "data");
    }

    public File checkpointFile() {
        return new File(root, "checkpoint");
    }

    public boolean abortExists() {
        return new File(root, "abort").exists();
    }

    public File lockFile() {
        return new File(root, "lock");
    }

    public static boolean isSafeDirName(String name) {
        return !name.isEmpty() && !name.equals(".") && !name.equals("..") && name.indexOf('/') < 0
                && name.indexOf('\\') < 0 && name.indexOf('\0') < 0;
    }

    public File queueDir(String topic, int queueId) {
        if (!isSafeDirName(topic)) throw new OptionError("unsafe path component " + io.rmqsource.spark.errors.Repr.of(topic));
        return new File(new File(consumeQueueDir(), topic), Integer.toString(queueId));
    }

    /** NotAStoreError / UnsupportedLayoutError unless this looks like a file store. */
    public void checkIsStore() {
        File r = new File(root);
        if (!r.isDirectory()) throw new NotAStoreError(root + " is not a directory");
        checkSupported();
        File dledgerData = dledgerDataDir();
        boolean has = dledgerData != null && dledgerData.isDirectory();      // a store may hold only DLedger files
        for (String d : commitLogDirs) has |= new File(d).isDirectory();
        if (!has) {
            throw new NotAStoreError(root + " is not a RocketMQ store: no commitlog directory ("
                    + String.join(", ", commitLogDirs) + ")");
        }
    }

    /**
     * UnsupportedLayoutError naming the folder when the store holds data of a layout not read (layout.py's
     * check_supported: same order, same texts). A reader of one of these layouts plugs in here.
     */
    public void checkSupported() {
        String[] refusal = unsupported();
        if (refusal != null) throw new UnsupportedLayoutError(refusal[1] + "; " + ONLY_FILE_LAYOUT, refusal[0], -1);
    }

    private String[] unsupported() {
        File r = new File(root);
        dledgerDir();          // several DLedger folders, or dLegerSelfId naming none, are refused first
        if (commitLogDirs.size() > 1) {
            return new String[] {commitLogDirs.get(0), "multi-path CommitLog (storePathCommitLog names "
                    + commitLogDirs.size() + " directories) is not read"};
        }
        if (readOnlyCommitLogStorePaths != null) {
            return new String[] {readOnlyCommitLogStorePaths.split(",", -1)[0].strip(),
                "read-only CommitLog directories (readOnlyCommitLogStorePaths) are not read"};
        }
        File own = new File(r, "commitlog");
        boolean moved = !commitLogDirs.equals(List.of(own.getPath()));
        if (moved && holdsFiles(own, 3) && !sameDir(own, commitLogDirs.get(0))) {
            return new String[] {own.getPath(), "CommitLog files while storePathCommitLog names "
                    + commitLogDirs.get(0) + ": two CommitLogs are not read"};
        }
        for (String name : ROCKSDB_CONSUME_QUEUE_DIRS) {
            File folder = new File(r, name);
            for (String n : names(folder, false)) {
                if (n.equals("CURRENT") || n.equals("IDENTITY") || n.startsWith("MANIFEST-")) {
                    return new String[] {folder.getPath(),
                        "RocksDB ConsumeQueue (storeType=defaultRocksDB) is not read"};
                }
            }
        }
        File batch = new File(r, "batchconsumequeue");
        if (holdsFiles(batch, 3)) {
            return new String[] {batch.getPath(), "BatchConsumeQueue (batch topics, queue.type=BatchCQ) is not read"};
        }
        File ext = new File(r, "consumequeue_ext");
        if (holdsFiles(ext, 3)) {
            return new String[] {ext.getPath(), "ConsumeQueueExt (enableConsumeQueueExt=true) is not read"};
        }
        File compaction = new File(new File(r, "compaction"), "compactionLog");
        if (holdsFiles(compaction, 3)) {
            return new String[] {compaction.getPath(), "compacted topics (cleanup.policy=COMPACTION) are not read"};
        }
        File tiered = new File(new File(r, "config"), "tieredStoreMetadata.json");
        if (tiered.isFile()) {
            return new String[] {tiered.getPath(),
                "tiered storage (tieredstore metadata): messages moved to another tier are not read"};
        }
        return null;
    }

    /** Names of the sub-directories (dirs) or regular files (!dirs) of folder; none when it is not a folder. */
    private static List<String> names(File folder, boolean dirs) {
        File[] entries = folder.listFiles();
        List<String> out = new ArrayList<>();
        if (entries == null) return out;
        for (File e : entries) if (dirs ? e.isDirectory() : e.isFile()) out.add(e.getName());
        return out;
    }

    /** A regular file lies under folder, at most depth levels down ({folder}/{topic}/{queueId}/{file}: 3). */
    private static boolean holdsFiles(File folder, int depth) {
        File[] entries = folder.listFiles();
        if (entries == null) return false;
        Arrays.sort(entries);
        for (File e : entries) {
            if (e.isFile() || (depth > 1 && e.isDirectory() && holdsFiles(e, depth - 1))) return true;
        }
        return false;
    }

    private static boolean sameDir(File a, String b) {
        try {
            return Files.isSameFile(a.toPath(), Path.of(b));
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    static boolean allDigits(String s) {
        for (int i = 0; i < s.length(); i++) {
            if (!Character.isDigit(s.charAt(i))) return false;
        }
        return true;
    }

    /** (topic, queueId) of every ConsumeQueue directory, sorted. */
    public List<QueueKey> listQueues() {
        List<QueueKey> out = new ArrayList<>();
        File[] topics = consumeQueueDir().listFiles();
        if (topics == null) return out;
        for (File t : topics) {
            if (!t.isDirectory() || !isSafeDirName(t.getName())) continue;
            File[] queues = t.listFiles();
            if (queues == null) continue;
            for (File q : queues) {
                String n = q.getName();
                if (q.isDirectory() && !n.isEmpty() && allDigits(n) && n.length() < 10) {
                    out.add(new QueueKey(t.getName(), Integer.parseInt(n)));
                }
            }
        }
        out.sort(null);
        return out;
    }
}
