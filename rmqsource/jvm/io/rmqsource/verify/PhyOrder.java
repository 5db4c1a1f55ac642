package io.rmqsource.verify;

import java.util.Arrays;

/**
 * A block of units or entries put in phyOffset order, stably (twin of _by_phy in
 * rmqsource/store/verify_cursors.py).  Dispatch writes phyOffsets in order, so on a sound file
 * nothing moves; on a damaged one (the disorder is reported) every unit is still taken with its window.
 */
final class PhyOrder {
    private PhyOrder() {
    }

    /** Row order that sorts phy[0, n) stably, or null when it is sorted already. */
    static int[] of(long[] phy, int n) {
        boolean sorted = true;
        for (int i = 1; i < n && sorted; i++) sorted = phy[i - 1] <= phy[i];
        if (sorted) return null;
        Integer[] rows = new Integer[n];
        for (int i = 0; i < n; i++) rows[i] = i;
        Arrays.sort(rows, new java.util.Comparator<Integer>() {      // merge sort: stable
            @Override
            public int compare(Integer a, Integer b) {
                return Long.compare(phy[a], phy[b]);
            }
        });
        int[] order = new int[n];
        for (int i = 0; i < n; i++) order[i] = rows[i];
        return order;
    }

    static long[] apply(long[] column, int[] order) {
        long[] out = column.clone();
        for (int i = 0; i < order.length; i++) out[i] = column[order[i]];
        return out;
    }

    static int[] apply(int[] column, int[] order) {
        int[] out = column.clone();
        for (int i = 0; i < order.length; i++) out[i] = column[order[i]];
        return out;
    }
}
