package io.rmqsource.spark.sink;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The replay tests' fault seam, as sink/faults.py's {@code take_fault}: only when the environment variable
 * {@link #ENV} names a file holding {@code "<point> <store root>"} does that step fail, once (the file is
 * removed first). Nothing in a store can trigger it.
 */
final class SinkFaults {
    static final String ENV = "RMQSOURCE_TEST_SINK_FAULT_FILE";

    private SinkFaults() {
    }

    static boolean take(String root, String point) {
        String path = System.getenv(ENV);
        if (path == null || path.isEmpty()) return false;
        String spec;
        try {
            spec = new String(Files.readAllBytes(Path.of(path)), StandardCharsets.UTF_8).strip();
        } catch (IOException e) {
            return false;
        }
        String real;
        try {
            real = Path.of(root).toRealPath().toString();
        } catch (IOException e) {
            real = Path.of(root).toAbsolutePath().normalize().toString();
        }
        if (!spec.equals(point + " " + real)) return false;
        try {
            Files.delete(Path.of(path));
        } catch (IOException e) {
            return false;
        }
        return true;
    }
}
