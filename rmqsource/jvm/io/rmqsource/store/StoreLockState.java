package io.rmqsource.store;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Who holds {@code {root}/lock} (twin of store_lock_state in rmqsource/io/lock.py): a broker locks
 * byte 0 of it, an rmqsource writer bytes 0 and 1.  Tested without opening, creating or locking
 * the file: the kernel's lock table (/proc/locks) is matched by the file's device and inode, as
 * F_GETLK would answer.  Where that table cannot be read, nobody visible holds the lock.
 */
public final class StoreLockState {
    public static final int BROKER_LOCK_BYTE = 0;
    public static final int RMQSOURCE_MARK_BYTE = 1;

    public final boolean held;
    /** The holder also marks byte 1: an rmqsource writer, not a broker. */
    public final boolean rmqsource;
    /** The holder's process id, or -1. */
    public final long pid;

    private StoreLockState(boolean held, boolean rmqsource, long pid) {
        this.held = held;
        this.rmqsource = rmqsource;
        this.pid = pid;
    }

    /** A running broker holds the store: its config/ is not ours to write. */
    public boolean byBroker() {
        return held && !rmqsource;
    }

    public static StoreLockState of(Path lockFile) {
        long holder = holder(lockFile, BROKER_LOCK_BYTE);
        if (holder == 0) return new StoreLockState(false, false, -1);
        return new StoreLockState(true, holder(lockFile, RMQSOURCE_MARK_BYTE) != 0, holder);
    }

    /** The pid holding a POSIX (or OFD) lock over {@code offset} of the file (-1 when unknown), 0 when none. */
    public static long holder(Path file, long offset) {
        long ino;
        long dev;
        try {
            ino = ((Number) Files.getAttribute(file, "unix:ino")).longValue();
            dev = ((Number) Files.getAttribute(file, "unix:dev")).longValue();
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
            return 0;
        }
        long major = ((dev >>> 8) & 0xfff) | ((dev >>> 32) & ~0xfffL);
        long minor = (dev & 0xff) | ((dev >>> 12) & ~0xffL);
        List<String> lines;
        try {
            lines = Files.readAllLines(Path.of("/proc/locks"));
        } catch (IOException | SecurityException e) {
            return 0;
        }
        long self = ProcessHandle.current().pid();
        for (String line : lines) {
            String[] t = line.trim().split("\\s+");
            if (t.length < 8 || t[1].equals("->") || !(t[1].equals("POSIX") || t[1].equals("OFDLCK"))) continue;
            String[] id = t[5].split(":");
            if (id.length != 3) continue;
            try {
                if (Long.parseLong(id[2]) != ino || Long.parseLong(id[0], 16) != major || Long.parseLong(id[1], 16) != minor) {
                    continue;
                }
                long start = Long.parseLong(t[6]);
                long end = t[7].equals("EOF") ? Long.MAX_VALUE : Long.parseLong(t[7]);
                long pid = Long.parseLong(t[4]);
                if (start <= offset && offset <= end && pid != self) return pid > 0 ? pid : -1;
            } catch (NumberFormatException e) {
                // a line in another format: not ours
            }
        }
        return 0;
    }

    /** {@code process 1234 (java ... BrokerStartup)} as far as /proc tells, for messages (describe_holder). */
    public String describeHolder() {
        if (pid <= 0) return "another process";
        String cmd = "";
        try {
            byte[] raw = Files.readAllBytes(Path.of("/proc/" + pid + "/cmdline"));
            int n = Math.min(raw.length, 4096);
            cmd = new String(raw, 0, n, StandardCharsets.UTF_8).replace('\0', ' ').strip();
        } catch (IOException | SecurityException e) {
            cmd = "";
        }
        if (cmd.length() > 120) cmd = cmd.substring(0, 60) + " ... " + cmd.substring(cmd.length() - 55);
        return "process " + pid + (cmd.isEmpty() ? "" : " (" + cmd + ")");
    }
}
