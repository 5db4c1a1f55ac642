package io.rmqsource.store;

import io.rmqsource.errors.NotAStoreError;
import io.rmqsource.errors.OptionError;
import io.rmqsource.errors.UnsupportedLayoutError;
import io.rmqsource.io.StoreFiles;
import java.io.File;
import java.io.IOException;
import java.io.Serializable;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Where things live under a store root (spec 1), twin of rmqsource/store/layout.py. {@link #checkSupported}
 * is the one place that decides whether the files (and the store config) are a layout this package reads
 * (ConsumeQueues in RocksDB, storeType=defaultRocksDB, are read through {@link RocksDbQueues});
 * a store holding data of another layout is refused with one UnsupportedLayoutError naming the folder.
 */
public final class StoreLayout implements Serializable {
    private static final long serialVersionUID = 2L;
    private static final String[] ROCKSDB_CONSUME_QUEUE_DIRS = {"consumequeue", "consumequeue_rocksdb"};
    /** consumequeue/ holding a RocksDB database is read; consumequeue_rocksdb/ (a combined store's copy) is not. */
    private static final String READ_ROCKSDB_CONSUME_QUEUE_DIR = "consumequeue";
    private static final String DLEDGER_PREFIX = "dledger-";        // DLedgerConfig: {storeBaseDir}/dledger-{selfId}/
    private static final String DEFAULT_DLEDGER_SELF_ID = "n0";     // MessageStoreConfig.dLegerSelfId
    private static final String ONLY_FILE_LAYOUT = "only the file CommitLog and ConsumeQueue layout is read";
    public final String root;
    /** Where the files are read: local maps, or a Hadoop FileSystem (paths are then URIs). */
    public final StoreFiles files;
    public final List<String> commitLogDirs;
    // Store-config keys that announce a layout (null / false: the config says nothing).
    private final String readOnlyCommitLogStorePaths;
    private final boolean enableDLegerCommitLog;
    private final String storePathDLedgerCommitLog;
    private final String dLegerSelfId;

    /** The layout of root as the config describes it. */
    public StoreLayout(String root, StoreConfig config) {
        this(StoreFiles.LOCAL, root, config);
    }

    /** The layout of root, read through {@code files}, as the config describes it. */
    public StoreLayout(StoreFiles files, String root, StoreConfig config) {
        this(files, root, config.storePathCommitLog(), config.readOnlyCommitLogStorePaths(),
                config.enableDLegerCommitLog(), config.storePathDLedgerCommitLog(), config.dLegerSelfId());
    }

    public StoreLayout(String root, String storePathCommitLog) {
        this(StoreFiles.LOCAL, root, storePathCommitLog, null, false, null, null);
    }

    private StoreLayout(StoreFiles files, String root, String storePathCommitLog, String readOnlyCommitLogStorePaths,
                        boolean enableDLegerCommitLog, String storePathDLedgerCommitLog, String dLegerSelfId) {
        this.files = files;
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
            dirs.add(StoreFiles.child(root, "commitlog"));
        }
        this.commitLogDirs = dirs;
    }

    public File consumeQueueDir() {
        return new File(root, "consumequeue");
    }

    private transient Boolean rocksDbQueues;

    /** Whether consumequeue/ is a RocksDB database (storeType=defaultRocksDB), not queue folders. */
    public boolean rocksDbQueues() {
        if (rocksDbQueues == null) rocksDbQueues = isRocksDbDir(StoreFiles.child(root, "consumequeue"));
        return rocksDbQueues;
    }

    private boolean isRocksDbDir(String folder) {
        for (String n : names(folder, false)) {
            if (n.equals("CURRENT") || n.equals("IDENTITY") || n.startsWith("MANIFEST-")) return true;
        }
        return false;
    }

    /** The store's RocksDB ConsumeQueues as they are now, opened read-only (only when {@link #rocksDbQueues}). */
    public RocksDbQueues.Queues rocksDbQueueStore() {
        return rocksDbQueueStore(StoreConfig.defaults().messageDelayLevelsMs());
    }

    /** The same, the tags codes of delayed messages computed with {@code delayLevelsMs}. */
    public RocksDbQueues.Queues rocksDbQueueStore(long[] delayLevelsMs) {
        return RocksDbQueues.open(StoreFiles.child(root, "consumequeue")).at(this, delayLevelsMs);
    }

    /** UnsupportedLayoutError when the queues are the broker's RocksDB database: read here, never {@code what}. */
    public void refuseRocksDbQueues(String what) {
        if (rocksDbQueues()) {
            throw new UnsupportedLayoutError("RocksDB ConsumeQueue (storeType=defaultRocksDB): its queues are the "
                    + "broker's database, read-only here; the store is not " + what,
                    StoreFiles.child(root, "consumequeue"), -1);
        }
    }

    public File indexDir() {
        return new File(root, "index");
    }

    /**
     * The {@code dledger-<selfId>/} folder of a DLedger store as a path of {@link #files} (it may not
     * exist yet), else null (layout.py's dledger_dir).  Found from the files (one {@code dledger-*}
     * folder under the root, or under storePathDLedgerCommitLog), or announced by the config
     * (enableDLegerCommitLog, storePathDLedgerCommitLog).  Several folders need dLegerSelfId to choose one.
     */
    public String dledgerDir() {
        String base = storePathDLedgerCommitLog != null ? storePathDLedgerCommitLog : root;
        List<String> folders = new ArrayList<>();
        for (String n : names(base, true)) if (n.startsWith(DLEDGER_PREFIX)) folders.add(n);
        folders.sort(null);
        if (!base.equals(root) && files.isDirectory(StoreFiles.child(base, "data"))
                && !new File(base).getName().startsWith(DLEDGER_PREFIX) && folders.isEmpty()) {
            return base;                // storePathDLedgerCommitLog names the folder itself
        }
        boolean announced = enableDLegerCommitLog || storePathDLedgerCommitLog != null;
        if (dLegerSelfId != null) {
            String name = DLEDGER_PREFIX + dLegerSelfId;
            if (!folders.contains(name) && !announced) {
                throw new UnsupportedLayoutError("dLegerSelfId " + dLegerSelfId + " names no DLedger folder: no " + name
                        + " under " + base
                        + (folders.isEmpty() ? "" : " (DLedger folders: " + String.join(", ", folders) + ")"), root, -1);
            }
            return StoreFiles.child(base, name);
        }
        if (folders.size() > 1) {
            throw new UnsupportedLayoutError("several DLedger folders (" + String.join(", ", folders)
                    + "): choose one with the dLegerSelfId option", root, -1);
        }
        if (!folders.isEmpty()) return StoreFiles.child(base, folders.get(0));
        return announced ? StoreFiles.child(base, DLEDGER_PREFIX + DEFAULT_DLEDGER_SELF_ID) : null;
    }

    /** The DLedger data folder ({@code dledger-<selfId>/data}) as a path of {@link #files}, or null. */
    public String dledgerDataDir() {
        String d = dledgerDir();
        return d == null ? null : StoreFiles.child(d, "data");
    }

    public File checkpointFile() {
        return new File(root, "checkpoint");
    }

    public boolean abortExists() {
        String abort = StoreFiles.child(root, "abort");
        return files.mapped() ? new File(abort).exists() : files.isFile(abort) || files.isDirectory(abort);
    }

    public File lockFile() {
        return new File(root, "lock");
    }

    public static boolean isSafeDirName(String name) {
        return !name.isEmpty() && !name.equals(".") && !name.equals("..") && name.indexOf('/') < 0
                && name.indexOf('\\') < 0 && name.indexOf('\0') < 0;
    }

    public File queueDir(String topic, int queueId) {
        return new File(queueDirPath(topic, queueId));
    }

    /** consumequeue/{topic}/{queueId} under the root, as a path of {@link #files}. */
    public String queueDirPath(String topic, int queueId) {
        if (!isSafeDirName(topic)) throw new OptionError("unsafe path component " + io.rmqsource.errors.Repr.of(topic));
        return StoreFiles.child(StoreFiles.child(StoreFiles.child(root, "consumequeue"), topic), Integer.toString(queueId));
    }

    /** index/ under the root, as a path of {@link #files}. */
    public String indexDirPath() {
        return StoreFiles.child(root, "index");
    }

    /** A file or folder under the root, as a path of {@link #files}. */
    public String pathOf(String name) {
        return StoreFiles.child(root, name);
    }

    /** NotAStoreError / UnsupportedLayoutError unless this looks like a file store. */
    public void checkIsStore() {
        if (!files.isDirectory(root)) throw new NotAStoreError(root + " is not a directory");
        checkSupported();
        String dledgerData = dledgerDataDir();
        boolean has = dledgerData != null && files.isDirectory(dledgerData);   // a store may hold only DLedger files
        for (String d : commitLogDirs) has |= files.isDirectory(d);
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
        String r = root;
        dledgerDir();          // several DLedger folders, or dLegerSelfId naming none, are refused first
        if (commitLogDirs.size() > 1) {
            return new String[] {commitLogDirs.get(0), "multi-path CommitLog (storePathCommitLog names "
                    + commitLogDirs.size() + " directories) is not read"};
        }
        if (readOnlyCommitLogStorePaths != null) {
            return new String[] {readOnlyCommitLogStorePaths.split(",", -1)[0].strip(),
                "read-only CommitLog directories (readOnlyCommitLogStorePaths) are not read"};
        }
        String own = StoreFiles.child(r, "commitlog");
        boolean moved = !commitLogDirs.equals(List.of(own));
        if (moved && holdsFiles(own, 3) && !sameDir(own, commitLogDirs.get(0))) {
            return new String[] {own, "CommitLog files while storePathCommitLog names "
                    + commitLogDirs.get(0) + ": two CommitLogs are not read"};
        }
        for (String name : ROCKSDB_CONSUME_QUEUE_DIRS) {
            String folder = StoreFiles.child(r, name);
            if (!isRocksDbDir(folder)) continue;
            if (!name.equals(READ_ROCKSDB_CONSUME_QUEUE_DIR)) {
                return new String[] {folder, "RocksDB ConsumeQueue (storeType=defaultRocksDB) is not read"};
            }
            if (!files.mapped()) {
                // RocksDB opens databases in local folders only; copying one out of an object store is a job
                // for the user (its table files may be large and change under a live broker).
                return new String[] {folder, "RocksDB ConsumeQueue (storeType=defaultRocksDB) is read from a local "
                        + "folder only (RocksDB cannot open a database on " + scheme(folder) + "): copy the store, or "
                        + "at least its consumequeue/ folder, to a local path"};
            }
        }
        String batch = StoreFiles.child(r, "batchconsumequeue");
        if (holdsFiles(batch, 3)) {
            return new String[] {batch, "BatchConsumeQueue (batch topics, queue.type=BatchCQ) is not read"};
        }
        String ext = StoreFiles.child(r, "consumequeue_ext");
        if (holdsFiles(ext, 3)) {
            return new String[] {ext, "ConsumeQueueExt (enableConsumeQueueExt=true) is not read"};
        }
        String compaction = StoreFiles.child(StoreFiles.child(r, "compaction"), "compactionLog");
        if (holdsFiles(compaction, 3)) {
            return new String[] {compaction, "compacted topics (cleanup.policy=COMPACTION) are not read"};
        }
        String tiered = StoreFiles.child(StoreFiles.child(r, "config"), "tieredStoreMetadata.json");
        if (underRoot(tiered) && files.isFile(tiered)) {
            return new String[] {tiered,
                "tiered storage (tieredstore metadata): messages moved to another tier are not read"};
        }
        return null;
    }

    private static String scheme(String path) {
        int colon = path.indexOf("://");
        return colon > 0 ? path.substring(0, colon + 3) + " (" + path + ")" : path;
    }

    /** Names of the sub-directories (dirs) or regular files (!dirs) of folder; none when it is not a folder. */
    private List<String> names(String folder, boolean dirs) {
        List<StoreFiles.Entry> entries = underRoot(folder) ? files.list(folder) : null;
        List<String> out = new ArrayList<>();
        if (entries == null) return out;
        for (StoreFiles.Entry e : entries) if (e.directory == dirs) out.add(e.name);
        return out;
    }

    /** A regular file lies under folder, at most depth levels down ({folder}/{topic}/{queueId}/{file}: 3). */
    private boolean holdsFiles(String folder, int depth) {
        List<StoreFiles.Entry> entries = underRoot(folder) ? files.list(folder) : null;
        if (entries == null) return false;
        entries.sort((a, b) -> a.name.compareTo(b.name));
        for (StoreFiles.Entry e : entries) {
            if (!e.directory || (depth > 1 && holdsFiles(StoreFiles.child(folder, e.name), depth - 1))) return true;
        }
        return false;
    }

    private transient java.util.Set<String> rootNames;

    /**
     * Whether {@code path} may exist: off a mapped file system, a path under the root whose first
     * component the root's one listing lacks does not (no request per folder the layout checks).
     */
    private boolean underRoot(String path) {
        if (files.mapped() || path.equals(root)) return true;
        String prefix = root.endsWith("/") ? root : root + "/";
        if (!path.startsWith(prefix)) return true;
        if (rootNames == null) {
            rootNames = new java.util.HashSet<>();
            List<StoreFiles.Entry> entries = files.list(root);
            if (entries != null) for (StoreFiles.Entry e : entries) rootNames.add(e.name);
        }
        String rest = path.substring(prefix.length());
        int slash = rest.indexOf('/');
        return rootNames.contains(slash < 0 ? rest : rest.substring(0, slash));
    }

    private boolean sameDir(String a, String b) {
        if (!files.mapped()) return a.equals(b);
        try {
            return Files.isSameFile(Path.of(a), Path.of(b));
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

    private transient java.util.Map<String, List<StoreFiles.Entry>> consumeQueueTree;

    /** The entries of a folder under consumequeue/: from {@link #listQueues}' one listing where it made one. */
    public List<StoreFiles.Entry> listConsumeQueueDir(String dir) {
        if (consumeQueueTree == null) return files.list(dir);
        List<StoreFiles.Entry> entries = consumeQueueTree.get(dir);
        return entries == null ? null : new ArrayList<>(entries);
    }

    /**
     * (topic, queueId) of every ConsumeQueue directory, sorted.  Off an object store the whole
     * consumequeue/ tree is one listing (a listing per topic and per queue costs a request each),
     * kept for the queues' files; a queue folder without files is then no queue (object stores
     * keep no empty folders).
     */
    public List<QueueKey> listQueues() {
        if (rocksDbQueues()) return rocksDbQueueStore().listQueues();
        List<QueueKey> out = new ArrayList<>();
        String cq = StoreFiles.child(root, "consumequeue");
        if (underRoot(cq)) consumeQueueTree = files.listTree(cq);
        List<StoreFiles.Entry> topics = listConsumeQueueDir(cq);
        if (topics == null) return out;
        for (StoreFiles.Entry t : topics) {
            if (!t.directory || !isSafeDirName(t.name)) continue;
            List<StoreFiles.Entry> queues = listConsumeQueueDir(StoreFiles.child(cq, t.name));
            if (queues == null) continue;
            for (StoreFiles.Entry q : queues) {
                String n = q.name;
                if (q.directory && !n.isEmpty() && allDigits(n) && n.length() < 10) {
                    out.add(new QueueKey(t.name, Integer.parseInt(n)));
                }
            }
        }
        out.sort(null);
        return out;
    }
}
