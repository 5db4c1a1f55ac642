package io.rmqsource.tools;

import io.rmqsource.format.JsonText;
import io.rmqsource.store.StoreConfig;
import io.rmqsource.store.StoreLayout;
import io.rmqsource.verify.Report;
import io.rmqsource.verify.Verifier;
import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

/**
 * Entry point of ``rmq verify``'s JVM walk, run by rmqsource/commands/verify_jvm.py:
 *
 * <pre>java -cp rmqsource-spark.jar io.rmqsource.tools.VerifyMain ROOT STORE_PATH_COMMIT_LOG
 *     MAX_HASH_SLOT_NUM MAX_INDEX_NUM DELAY_LEVELS_MS READ_ONLY_COMMIT_LOG_STORE_PATHS ENABLE_DLEGER_COMMIT_LOG
 *     STORE_PATH_DLEDGER_COMMIT_LOG [DLEGER_SELF_ID]</pre>
 *
 * (the paths may be empty; DELAY_LEVELS_MS is comma-separated; the last ones are the store-config keys
 * StoreLayout.checkSupported reads, so the walk refuses the layouts the Python walk refuses and reads the
 * DLedger folder it reads; a store whose ConsumeQueues are a RocksDB database needs rocksdbjni on the class
 * path.)  Writes JSON lines:
 * {"progress": bytes} while walking, then {"problem": {...}} for each problem kept, {"counts": [...]},
 * and the figures line.  Exit 0 when the walk finished (whatever it found), 1 on an error, written
 * as {"error": {"type", "message"}}, 2 on bad arguments.
 */
public final class VerifyMain {
    private VerifyMain() {
    }

    public static void main(String[] args) {
        PrintStream out = new PrintStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16),
                false, StandardCharsets.UTF_8);
        if (args.length != 8 && args.length != 9) {
            System.err.println("usage: VerifyMain ROOT STORE_PATH_COMMIT_LOG MAX_HASH_SLOT_NUM MAX_INDEX_NUM DELAY_LEVELS_MS "
                    + "READ_ONLY_COMMIT_LOG_STORE_PATHS ENABLE_DLEGER_COMMIT_LOG STORE_PATH_DLEDGER_COMMIT_LOG [DLEGER_SELF_ID]");
            System.exit(2);
        }
        int code = 0;
        try {
            String[] levels = args[4].isEmpty() ? new String[0] : args[4].split(",");
            long[] delays = new long[levels.length];
            for (int i = 0; i < levels.length; i++) delays[i] = Long.parseLong(levels[i]);
            Map<String, String> layoutKeys = new HashMap<>();
            layoutKeys.put("storePathCommitLog", args[1]);
            layoutKeys.put("readOnlyCommitLogStorePaths", args[5]);
            layoutKeys.put("enableDLegerCommitLog", args[6]);
            layoutKeys.put("storePathDLedgerCommitLog", args[7]);
            if (args.length > 8) layoutKeys.put("dLegerSelfId", args[8]);
            StoreLayout layout = new StoreLayout(args[0], StoreConfig.defaults().withOverrides(layoutKeys));
            layout.checkIsStore();
            Report report = new Report(args[0], out);
            String figures = new Verifier(layout, Long.parseLong(args[2]), Long.parseLong(args[3]), delays, report).run();
            report.write(figures);
        } catch (RuntimeException | OutOfMemoryError e) {
            out.println("{\"error\":{\"type\":" + JsonText.str(e.getClass().getSimpleName()) + ",\"message\":"
                    + JsonText.str(String.valueOf(e.getMessage())) + "}}");
            code = 1;
        }
        out.flush();
        System.exit(code);
    }
}
