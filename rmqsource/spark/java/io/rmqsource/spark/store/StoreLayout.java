package io.rmqsource.spark.store;

import io.rmqsource.spark.errors.NotAStoreError;
import io.rmqsource.spark.errors.OptionError;
import io.rmqsource.spark.errors.UnsupportedLayoutError;
import java.io.File;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

/** Where things live under a store root (spec 1), twin of rmqsource/store/layout.py. */
public final class StoreLayout implements Serializable {
    private static final long serialVersionUID = 1L;
    public final String root;
    public final List<String> commitLogDirs;

    public StoreLayout(String root, String storePathCommitLog) {
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
        boolean has = false;
        for (String d : commitLogDirs) has |= new File(d).isDirectory();
        if (!has) {
            throw new NotAStoreError(root + " is not a RocketMQ store: no commitlog directory ("
                    + String.join(", ", commitLogDirs) + ")");
        }
        File cq = consumeQueueDir();
        if (cq.isDirectory()) {
            String[] names = cq.list();
            boolean rocks = new File(cq, "CURRENT").isFile() || new File(cq, "IDENTITY").isFile();
            if (names != null) for (String n : names) rocks |= n.startsWith("MANIFEST-");
            if (rocks) {
                throw new UnsupportedLayoutError("consumequeue/ holds a RocksDB database (storeType=defaultRocksDB); "
                        + "only the file ConsumeQueue layout is supported", cq.getPath(), -1);
            }
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
