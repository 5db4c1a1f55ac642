package io.rmqsource.verify;

import java.util.Arrays;

/**
 * ConsumeQueue units taken from the cursors and not yet matched, in the order they were taken.
 * Each unit keeps its take number ({@code seq}): (phy, seq) is the order the Python twin lists
 * their problems in (it keeps the units sorted by phy, stable), so only problems need sorting.
 */
final class UnitQueue {
    long[] phy = new long[1024];
    int[] size = new int[1024];
    long[] code = new long[1024];
    long[] qoff = new long[1024];
    int[] queue = new int[1024];
    long[] seq = new long[1024];
    int n;
    private long taken;

    void add(long p, int s, long c, long q, int queueIndex) {
        if (n == phy.length) {
            int m = n * 2;
            phy = Arrays.copyOf(phy, m);
            size = Arrays.copyOf(size, m);
            code = Arrays.copyOf(code, m);
            qoff = Arrays.copyOf(qoff, m);
            queue = Arrays.copyOf(queue, m);
            seq = Arrays.copyOf(seq, m);
        }
        phy[n] = p;
        size[n] = s;
        code[n] = c;
        qoff[n] = q;
        queue[n] = queueIndex;
        seq[n] = taken++;
        n++;
    }

    /** Keep only the units with phy >= {@code end}, in order. */
    void dropBelow(long end) {
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (phy[i] < end) continue;
            phy[k] = phy[i];
            size[k] = size[i];
            code[k] = code[i];
            qoff[k] = qoff[i];
            queue[k] = queue[i];
            seq[k] = seq[i];
            k++;
        }
        n = k;
    }
}
