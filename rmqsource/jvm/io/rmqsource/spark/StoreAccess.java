package io.rmqsource.spark;

import io.rmqsource.errors.OptionError;
import io.rmqsource.errors.Repr;
import io.rmqsource.io.HadoopConf;
import io.rmqsource.io.HadoopFiles;
import io.rmqsource.io.StoreFiles;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.SparkSession;

/**
 * How a scan reads each store's files, decided once at planning.  Local paths are mapped (zero
 * copy); any other scheme ({@code s3a://}, {@code hdfs://}, {@code abfss://}, {@code gs://},
 * {@code dbfs:/}) is read through its Hadoop FileSystem by positioned reads, with the session's Hadoop
 * configuration broadcast to the executors once per scan.  {@value #MODE_CONF}{@code =positioned}
 * reads local stores through Hadoop's local file system by the same positioned reads (tests of that
 * reader; a file system where mapping is unwelcome).
 */
public final class StoreAccess {
    /** {@code auto} (default: local paths mapped, other schemes positioned) or {@code positioned}. */
    static final String MODE_CONF = "spark.rmq.io.mode";
    /** Bytes of one CommitLog read of the positioned reader (default 16 MiB). */
    static final String WINDOW_CONF = "spark.rmq.io.windowBytes";
    static final int DEFAULT_WINDOW_BYTES = 16 << 20;
    static final int MIN_WINDOW_BYTES = 4096;

    private StoreAccess() {
    }

    /** The files of each store root, in order: {@link StoreFiles#LOCAL} or one shared {@link HadoopFiles}. */
    public static List<StoreFiles> forPaths(List<String> roots) {
        SparkSession session = SparkSession.getActiveSession().isDefined() ? SparkSession.getActiveSession().get()
                : SparkSession.getDefaultSession().isDefined() ? SparkSession.getDefaultSession().get() : null;
        String mode = session == null ? "auto" : session.conf().get(MODE_CONF, "auto").strip().toLowerCase(Locale.ROOT);
        if (!mode.equals("auto") && !mode.equals("positioned")) {
            throw new OptionError(MODE_CONF + " must be auto or positioned, got " + Repr.of(mode));
        }
        boolean anyRemote = mode.equals("positioned");
        for (String r : roots) anyRemote |= StoreFiles.isUri(r);
        List<StoreFiles> out = new ArrayList<>();
        if (!anyRemote) {
            for (int i = 0; i < roots.size(); i++) out.add(StoreFiles.LOCAL);
            return out;
        }
        HadoopFiles hadoop = hadoopFiles(session);
        for (String r : roots) out.add(mode.equals("positioned") || StoreFiles.isUri(r) ? hadoop : StoreFiles.LOCAL);
        return out;
    }

    /** The files of a stream's store (the driver's StoreWatcher and the stream's tasks read through them). */
    public static StoreFiles forStream(String root) {
        return forPaths(List.of(root)).get(0);
    }

    private static HadoopFiles hadoopFiles(SparkSession session) {
        int window = DEFAULT_WINDOW_BYTES;
        if (session == null) return new HadoopFiles(new Configuration(), null, window);
        String w = session.conf().get(WINDOW_CONF, "");
        if (!w.isBlank()) window = (int) RmqOptions.parseInt(WINDOW_CONF, w, MIN_WINDOW_BYTES, 1 << 30);
        Configuration conf = session.sessionState().newHadoopConf();
        Broadcast<HadoopConf> shared = JavaSparkContext.fromSparkContext(session.sparkContext())
                .broadcast(new HadoopConf(conf));
        return new HadoopFiles(conf, new BroadcastConf(shared), window);
    }

    /** The executors' Configuration: the value of the scan's broadcast (read once per JVM copy of the files). */
    private static final class BroadcastConf implements HadoopFiles.ConfSource {
        private static final long serialVersionUID = 1L;
        private final Broadcast<HadoopConf> shared;

        BroadcastConf(Broadcast<HadoopConf> shared) {
            this.shared = shared;
        }

        @Override
        public Configuration get() {
            return shared.value().get();
        }
    }
}
