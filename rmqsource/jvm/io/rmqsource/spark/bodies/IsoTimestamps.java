package io.rmqsource.spark.bodies;

/**
 * The one timestamp form JSON bodies mostly hold (and the date form {@code yyyy-MM-dd}, {@link #parseDays}), {@code yyyy-MM-ddTHH:mm:ss[.f{1,6}](Z|±hh:mm)}, read as
 * Spark's default timestamp parsing (DateTimeUtils.stringToTimestamp: proleptic Gregorian, a fixed offset,
 * the fraction as microseconds) reads it.  Any other text, or a field out of range (a day the month lacks, a
 * second 60, an offset beyond 17:59), is {@link #NONE}: Spark's own parser decides those.
 */
final class IsoTimestamps {
    private IsoTimestamps() {
    }

    /** Not the form read here. */
    static final long NONE = Long.MIN_VALUE;

    private static final int[] SCALE = {0, 100_000, 10_000, 1_000, 100, 10, 1};

    /** The microseconds since the epoch of the UTF-8 text {@code b[s, s + n)}, or {@link #NONE}. */
    static long parseMicros(byte[] b, int s, int n) {
        if (n < 20 || n > 32) return NONE;
        int y = d4(b, s);
        int mo = d2(b, s + 5);
        int d = d2(b, s + 8);
        int h = d2(b, s + 11);
        int mi = d2(b, s + 14);
        int sec = d2(b, s + 17);
        if ((y | mo | d | h | mi | sec) < 0 || b[s + 4] != '-' || b[s + 7] != '-' || b[s + 10] != 'T'
                || b[s + 13] != ':' || b[s + 16] != ':') {
            return NONE;
        }
        int p = 19;
        int frac = 0;
        if (b[s + p] == '.') {
            int from = ++p;
            while (p < n && p - from < 7) {
                int c = b[s + p] - '0';
                if (c < 0 || c > 9) break;
                frac = frac * 10 + c;
                p++;
            }
            int digits = p - from;
            if (digits < 1 || digits > 6) return NONE;
            frac *= SCALE[digits];
        }
        if (p >= n) return NONE;
        int offset;
        byte z = b[s + p];
        if (z == 'Z') {
            offset = 0;
            p++;
        } else if (z == '+' || z == '-') {
            if (n - p != 6 || b[s + p + 3] != ':') return NONE;
            int oh = d2(b, s + p + 1);
            int om = d2(b, s + p + 4);
            if (oh < 0 || om < 0 || oh > 17 || om > 59) return NONE;
            offset = (oh * 3600 + om * 60) * (z == '-' ? -1 : 1);
            p += 6;
        } else {
            return NONE;
        }
        if (p != n) return NONE;
        if (mo < 1 || mo > 12 || d < 1 || d > lengthOfMonth(y, mo) || h > 23 || mi > 59 || sec > 59) return NONE;
        long seconds = epochDay(y, mo, d) * 86_400L + h * 3600 + mi * 60 + sec - offset;
        return seconds * 1_000_000L + frac;
    }

    /**
     * The days since the epoch of the UTF-8 text {@code b[s, s + n)} when it is exactly {@code yyyy-MM-dd} of a real
     * date (as Spark's default date parsing reads it), else {@code Integer.MIN_VALUE}.
     */
    static int parseDays(byte[] b, int s, int n) {
        if (n != 10 || b[s + 4] != '-' || b[s + 7] != '-') return Integer.MIN_VALUE;
        int y = d4(b, s);
        int mo = d2(b, s + 5);
        int d = d2(b, s + 8);
        if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > lengthOfMonth(y, mo)) return Integer.MIN_VALUE;
        return (int) epochDay(y, mo, d);
    }

    private static int d2(byte[] b, int at) {
        int x = b[at] - '0';
        int y = b[at + 1] - '0';
        if (x < 0 || x > 9 || y < 0 || y > 9) return -1;
        return x * 10 + y;
    }

    private static int d4(byte[] b, int at) {
        int x = d2(b, at);
        int y = d2(b, at + 2);
        return x < 0 || y < 0 ? -1 : x * 100 + y;
    }

    private static int lengthOfMonth(int y, int m) {
        switch (m) {
            case 2:
                return (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)) ? 29 : 28;
            case 4:
            case 6:
            case 9:
            case 11:
                return 30;
            default:
                return 31;
        }
    }

    /** Days since 1970-01-01 of a proleptic Gregorian date (as LocalDate.toEpochDay). */
    static long epochDay(int y, int m, int d) {
        long yy = m <= 2 ? y - 1 : y;
        long era = Math.floorDiv(yy, 400);
        long yoe = yy - era * 400;
        long doy = (153L * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
        long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        return era * 146_097 + doe - 719_468;
    }
}
