package io.rmqsource.spark.read;

import io.rmqsource.io.StoreFiles;
import io.rmqsource.store.StoreConfig;
import java.io.Serializable;

/** One store as planned: every task sees it as it was at planning (the valid end is pinned). */
public final class StoreRef implements Serializable {
    private static final long serialVersionUID = 1L;
    public final int index;
    public final String root;
    public final String broker;
    public final StoreConfig config;
    public final long commitLogMin;
    public final long commitLogMax;
    public final boolean cqOnDisk;
    /** How tasks read the store's files (local maps, or a Hadoop FileSystem with the session's conf). */
    public final StoreFiles files;

    public StoreRef(int index, String root, String broker, StoreConfig config, long commitLogMin, long commitLogMax,
                    boolean cqOnDisk) {
        this(index, root, broker, config, commitLogMin, commitLogMax, cqOnDisk, StoreFiles.LOCAL);
    }

    public StoreRef(int index, String root, String broker, StoreConfig config, long commitLogMin, long commitLogMax,
                    boolean cqOnDisk, StoreFiles files) {
        this.files = files;
        this.index = index;
        this.root = root;
        this.broker = broker;
        this.config = config;
        this.commitLogMin = commitLogMin;
        this.commitLogMax = commitLogMax;
        this.cqOnDisk = cqOnDisk;
    }
}
