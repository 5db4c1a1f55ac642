package io.rmqsource.verify;

import java.util.ArrayList;
import java.util.List;

/**
 * Problems of one check in one window, listed when it ends: the first PER_CHECK_DETAIL in the
 * Python twin's order (records: CommitLog order; units: (phy, take order)), the others counted.
 */
final class Listed {
    private static final int PER_CHECK_DETAIL = Verifier.PER_CHECK_DETAIL;
    final Report report;
    final String check;
    final List<Object[]> items = new ArrayList<>();
    long extra;

    Listed(Report report, String check) {
        this.report = report;
        this.check = check;
    }

    /** A record's problem, at its position in the segment file (found in CommitLog order). */
    void add(long at, String message, String expected, String found) {
        if (items.size() >= PER_CHECK_DETAIL) {
            extra++;
        } else {
            items.add(new Object[] {at, message, expected, found});
        }
    }

    /** A problem of the unit at row {@code j} of the pending units {@code u} (rows come in no particular order). */
    void addUnit(UnitQueue u, int j, String message, String expected, String found) {
        items.add(new Object[] {u.phy[j], u.seq[j], u.queue[j], u.qoff[j], message, expected, found});
    }

    void flush(String rel) {
        if (extra > 0) report.count(Report.ERROR, check, extra);
        for (Object[] it : items) {
            report.add("commitlog", check, rel, (Long) it[0], (String) it[1], (String) it[2], (String) it[3]);
        }
    }

    /** Unit problems, named by the unit's ConsumeQueue file and position (or its queue in the RocksDB database). */
    void flushUnits(List<UnitCursor> queues) {
        items.sort(BY_PHY_AND_TAKE_ORDER);
        if (items.size() > PER_CHECK_DETAIL) report.count(Report.ERROR, check, items.size() - PER_CHECK_DETAIL);
        for (Object[] it : items.subList(0, Math.min(items.size(), PER_CHECK_DETAIL))) {
            UnitCursor q = queues.get((Integer) it[2]);
            long qoff = (Long) it[3];
            Object[] where = q.fileAndPosition(qoff);
            report.add("consumequeue", check, (String) where[0], (Long) where[1], q.unitName(qoff) + " " + it[4],
                    (String) it[5], (String) it[6]);
        }
    }

    /** Problem items whose first two fields are boxed longs (phy, take order), by the first then the second. */
    private static final class BoxedPairOrder implements java.util.Comparator<Object[]> {
        @Override
        public int compare(Object[] x, Object[] y) {
            int c = Long.compare((Long) x[0], (Long) y[0]);
            return c != 0 ? c : Long.compare((Long) x[1], (Long) y[1]);
        }
    }

    private static final BoxedPairOrder BY_PHY_AND_TAKE_ORDER = new BoxedPairOrder();
}
