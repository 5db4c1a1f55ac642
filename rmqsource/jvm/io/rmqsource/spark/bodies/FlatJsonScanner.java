package io.rmqsource.spark.bodies;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;

/**
 * The fast path of JSON bodies: one pass over the body's bytes, no parser, no String, for the bodies nearly all
 * messages hold — an object of fields whose values are of their column's common kind (integral numbers in long
 * and int columns, numbers in double columns, strings in string columns, true/false in boolean columns, ISO-8601
 * strings in timestamp columns; null anywhere), unknown fields of any value skipped.  It takes only text that is
 * strict JSON and whose meaning is beyond doubt, and writes what Spark's parser writes for it.  A well-formed
 * value of another kind (a number or an object in a string column, a struct, an array, a date, a timestamp of
 * another form, ...) goes to {@link Values#convert}: Spark's converter of its field over just that value.
 * Anything else (single quotes, NaN, a leading zero, an escaped surrogate, text that is not well-formed UTF-8,
 * a value Spark's converter refuses, ...) makes it give up on the body ({@link #scan} false), and the exact path
 * (Jackson and Spark's converters) decodes it from scratch, rewriting every column of the row.
 */
final class FlatJsonScanner {
    static final int OTHER = 0, LONG = 1, INT = 2, DOUBLE = 3, STRING = 4, BOOLEAN = 5, TIMESTAMP = 6, DATE = 7;
    private static final int GIVE_UP = -1;
    private static final int MAX_DEPTH = 200;
    private static final int MAX_STRING = 1 << 20;
    private static final int MAX_NUMBER = 100;
    private static final double[] POW10 = new double[23];

    static {
        POW10[0] = 1;
        for (int i = 1; i < POW10.length; i++) POW10[i] = POW10[i - 1] * 10;
    }

    /** Values of the kinds the scanner does not read itself. */
    interface Values {
        /**
         * The JSON value {@code b[at, at + len)} (well-formed) of field {@code f}, converted as Spark converts it,
         * into {@code o} at {@code row} (when {@code o} is not null); false when Spark's converter refuses it.
         */
        boolean convert(int f, byte[] b, int at, int len, WritableColumnVector o, int row);
    }

    private final Values values;
    /** How many values went to {@link Values#convert}, ever. */
    long converted;
    private final byte[][] names;
    /** Per field: its name is printable ASCII without a quote or backslash (JSON writes it as its bytes). */
    private final boolean[] plain;
    private final int[] kinds;
    private final boolean[] seen;
    /** The order of the last bodies: their first field, and per field the one that came after it. */
    private int first;
    private final int[] follows;
    /** The last string read: its bytes (the body's, or {@link #scratch} when it had escapes). */
    private byte[] str;
    private int strAt;
    private int strLen;
    private byte[] scratch = new byte[128];
    /** The last number read: integral (no fraction, no exponent) with its digits as a long when it has <= 18. */
    private boolean integral;
    private boolean negative;
    private int digits;
    private long longValue;
    private long mantissa;
    private int e10;
    private int numberAt;
    private int numberEnd;

    /** {@code kinds}: per field of the schema, its kind; {@code names}: the fields' names. */
    FlatJsonScanner(String[] names, int[] kinds, Values values) {
        this.values = values;
        this.names = new byte[names.length][];
        this.plain = new boolean[names.length];
        for (int i = 0; i < names.length; i++) {
            this.names[i] = names[i].getBytes(StandardCharsets.UTF_8);
            plain[i] = names[i].chars().allMatch(c -> c >= 0x20 && c < 0x7F && c != '"' && c != '\\');
        }
        this.kinds = kinds;
        this.seen = new boolean[names.length];
        this.follows = new int[names.length];
        for (int f = 0; f < follows.length; f++) follows[f] = f + 1;       // the schema's order, to begin with
    }

    /** Writes the body {@code b[off, off + len)} into {@code out} at {@code row}; false when it leaves it to the exact path. */
    boolean scan(byte[] b, int off, int len, WritableColumnVector[] out, int row) {
        int end = off + len;
        for (int k = off, e = Math.min(end, off + 4); k < e; k++) if (b[k] == 0) return false;   // Jackson's UTF-16/32 guess
        int i = ws(b, off, end);
        if (i >= end || b[i] != '{') return false;
        Arrays.fill(seen, false);
        i = ws(b, i + 1, end);
        if (i >= end) return false;
        if (b[i] != '}') {
            int previous = -1;                   // the last field of the schema read
            while (true) {
                if (b[i] != '"') return false;
                int from = i + 1;
                int guess = previous < 0 ? first : follows[previous];
                int f;
                int to;
                if (guess < names.length && plain[guess] && (to = from + names[guess].length) < end && b[to] == '"'
                        && same(names[guess], b, from)) {
                    f = guess;                   // the field that came next in the last body
                } else {
                    to = from;
                    while (true) {               // a name: ASCII without escapes, else the exact path
                        if (to >= end) return false;
                        byte c = b[to];
                        if (c == '"') break;
                        if (c < 0x20 || c == '\\') return false;    // also any byte >= 0x80 (negative)
                        to++;
                    }
                    f = field(b, from, to - from);
                }
                if (f >= 0) {
                    if (previous < 0) first = f;
                    else follows[previous] = f;
                    previous = f;
                }
                i = ws(b, to + 1, end);
                if (i >= end || b[i] != ':') return false;
                i = ws(b, i + 1, end);
                if (i >= end) return false;
                if (f < 0) {
                    i = skip(b, i, end, 0);
                } else {
                    seen[f] = true;
                    i = value(b, i, end, f, out[f], row);
                }
                if (i < 0) return false;
                i = ws(b, i, end);
                if (i >= end) return false;
                if (b[i] == ',') {
                    i = ws(b, i + 1, end);
                    if (i >= end) return false;
                } else if (b[i] == '}') {
                    break;
                } else {
                    return false;
                }
            }
        }
        for (int f = 0; f < seen.length; f++) if (!seen[f] && out[f] != null) out[f].putNull(row);
        return true;
    }

    /** The field named {@code b[at, at + n)} (a name in the body, read as plain ASCII); -1 when none. */
    private int field(byte[] b, int at, int n) {
        for (int f = 0; f < names.length; f++) if (names[f].length == n && same(names[f], b, at)) return f;
        return -1;
    }

    private static boolean same(byte[] name, byte[] b, int at) {
        for (int k = 0; k < name.length; k++) if (name[k] != b[at + k]) return false;
        return true;
    }

    private static int ws(byte[] b, int i, int end) {
        while (i < end) {
            byte c = b[i];
            if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return i;
            i++;
        }
        return i;
    }

    /** The value at {@code i} of field {@code f} into {@code o} (when asked for); the index after it, or GIVE_UP. */
    private int value(byte[] b, int i, int end, int f, WritableColumnVector o, int row) {
        byte c = b[i];
        int kind = kinds[f];
        if (c == '"') {
            int e = string(b, i, end);
            if (e < 0) return GIVE_UP;
            if (kind == STRING) {
                if (o != null) {
                    o.putNotNull(row);
                    o.putByteArray(row, str, strAt, strLen);
                }
                return e;
            }
            if (kind == TIMESTAMP) {
                long t = IsoTimestamps.parseMicros(str, strAt, strLen);
                if (t != IsoTimestamps.NONE) {
                    if (o != null) {
                        o.putNotNull(row);
                        o.putLong(row, t);
                    }
                    return e;
                }
            }
            if (kind == DATE) {
                int days = IsoTimestamps.parseDays(str, strAt, strLen);
                if (days != Integer.MIN_VALUE) {
                    if (o != null) {
                        o.putNotNull(row);
                        o.putInt(row, days);
                    }
                    return e;
                }
            }
            return other(f, b, i, e, o, row);
        }
        if (c == '-' || (c >= '0' && c <= '9')) {
            int e = number(b, i, end);
            if (e < 0) return GIVE_UP;
            switch (kind) {
                case LONG:
                    if (!integral || digits > 18) return other(f, b, i, e, o, row);
                    if (o != null) {
                        o.putNotNull(row);
                        o.putLong(row, longValue);
                    }
                    return e;
                case INT:
                    if (!integral || digits > 9) return other(f, b, i, e, o, row);
                    if (o != null) {
                        o.putNotNull(row);
                        o.putInt(row, (int) longValue);
                    }
                    return e;
                case DOUBLE:
                    double x;
                    if (integral) {
                        if (digits > 18 || (negative && longValue == 0)) return other(f, b, i, e, o, row);   // -0: Jackson's
                        x = (double) longValue;                    // as Jackson: an int token's value, widened
                    } else {
                        x = toDouble(b);
                    }
                    if (o != null) {
                        o.putNotNull(row);
                        o.putDouble(row, x);
                    }
                    return e;
                default:
                    return other(f, b, i, e, o, row);
            }
        }
        if (c == 't' || c == 'f') {
            int e = literal(b, i, end);
            if (e < 0) return GIVE_UP;
            if (kind != BOOLEAN) return other(f, b, i, e, o, row);
            if (o != null) {
                o.putNotNull(row);
                o.putBoolean(row, c == 't');
            }
            return e;
        }
        if (c == 'n') {
            int e = literal(b, i, end);
            if (e >= 0 && o != null) o.putNull(row);
            return e;
        }
        if (c == '{' || c == '[') {
            int e = skip(b, i, end, 0);
            return e < 0 ? GIVE_UP : other(f, b, i, e, o, row);
        }
        return GIVE_UP;
    }

    /** The value {@code b[i, e)} of field {@code f} by Spark's converter; {@code e}, or GIVE_UP when it refuses it. */
    private int other(int f, byte[] b, int i, int e, WritableColumnVector o, int row) {
        converted++;
        return values.convert(f, b, i, e - i, o, row) ? e : GIVE_UP;
    }

    /** Skips the value at {@code i} (checked as strictly as read); the index after it, or GIVE_UP. */
    private int skip(byte[] b, int i, int end, int depth) {
        byte c = b[i];
        if (c == '"') return string(b, i, end);
        if (c == '-' || (c >= '0' && c <= '9')) return number(b, i, end);
        if (c == 't' || c == 'f' || c == 'n') return literal(b, i, end);
        if (c != '{' && c != '[') return GIVE_UP;
        if (depth >= MAX_DEPTH) return GIVE_UP;
        byte close = c == '{' ? (byte) '}' : (byte) ']';
        i = ws(b, i + 1, end);
        if (i >= end) return GIVE_UP;
        if (b[i] == close) return i + 1;
        while (true) {
            if (c == '{') {
                if (b[i] != '"') return GIVE_UP;
                i = string(b, i, end);
                if (i < 0) return GIVE_UP;
                i = ws(b, i, end);
                if (i >= end || b[i] != ':') return GIVE_UP;
                i = ws(b, i + 1, end);
                if (i >= end) return GIVE_UP;
            }
            i = skip(b, i, end, depth + 1);
            if (i < 0) return GIVE_UP;
            i = ws(b, i, end);
            if (i >= end) return GIVE_UP;
            if (b[i] == close) return i + 1;
            if (b[i] != ',') return GIVE_UP;
            i = ws(b, i + 1, end);
            if (i >= end) return GIVE_UP;
        }
    }

    /** true, false or null at {@code i}; the index after it, or GIVE_UP. */
    private static int literal(byte[] b, int i, int end) {
        byte c = b[i];
        if (c == 'f') {
            if (end - i < 5 || b[i + 1] != 'a' || b[i + 2] != 'l' || b[i + 3] != 's' || b[i + 4] != 'e') return GIVE_UP;
            return i + 5;
        }
        if (end - i < 4) return GIVE_UP;
        boolean ok = c == 't' ? b[i + 1] == 'r' && b[i + 2] == 'u' && b[i + 3] == 'e'
                : b[i + 1] == 'u' && b[i + 2] == 'l' && b[i + 3] == 'l';
        return ok ? i + 4 : GIVE_UP;             // what follows must be a separator: the caller gives up on anything else
    }

    /**
     * A number as strict JSON writes it, {@code -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?} (Jackson refuses a
     * leading zero; Spark allows NaN and Infinity, left to the exact path); the index after it, or GIVE_UP.  Keeps
     * its digits as a long ({@link #mantissa}, when it has at most 18 significant ones), its digits after the point
     * and its exponent.
     */
    private int number(byte[] b, int i, int end) {
        int j = i;
        negative = b[j] == '-';
        if (negative) j++;
        int from = j;
        if (j >= end) return GIVE_UP;
        long m = 0;
        int sig = 0;
        if (b[j] == '0') {
            j++;
            if (j < end && b[j] >= '0' && b[j] <= '9') return GIVE_UP;
        } else {
            while (j < end) {
                int d = b[j] - '0';
                if (d < 0 || d > 9) break;
                m = m * 10 + d;
                j++;
            }
            if (j == from) return GIVE_UP;
            sig = j - from;
        }
        digits = j - from;
        integral = true;
        int scale = 0;
        if (j < end && b[j] == '.') {
            integral = false;
            int f = ++j;
            while (j < end) {
                int d = b[j] - '0';
                if (d < 0 || d > 9) break;
                if (sig > 0 || d != 0) sig++;
                m = m * 10 + d;                      // (meaningless past 18 significant digits: not used then)
                j++;
            }
            if (j == f) return GIVE_UP;
            scale = j - f;
        }
        int exp = 0;
        boolean expOk = true;
        if (j < end && (b[j] == 'e' || b[j] == 'E')) {
            integral = false;
            j++;
            boolean minus = false;
            if (j < end && (b[j] == '+' || b[j] == '-')) minus = b[j++] == '-';
            int f = j;
            while (j < end) {
                int d = b[j] - '0';
                if (d < 0 || d > 9) break;
                exp = exp * 10 + d;
                j++;
            }
            if (j == f) return GIVE_UP;
            if (j - f > 4) expOk = false;
            if (minus) exp = -exp;
        }
        if (j - i > MAX_NUMBER) return GIVE_UP;
        mantissa = sig <= 18 ? m : -1;
        longValue = negative ? -m : m;                 // (an integral number's value, when digits <= 18)
        e10 = expOk ? exp - scale : Integer.MAX_VALUE;
        numberAt = i;
        numberEnd = j;
        return j;
    }

    /** The last number read (not integral) as a double, correctly rounded (as Double.parseDouble). */
    private double toDouble(byte[] b) {
        if (mantissa < 0 || mantissa >= (1L << 53) || e10 < -22 || e10 > 22) return slow(b);
        double x = e10 < 0 ? mantissa / POW10[-e10] : mantissa * POW10[e10];    // both exact: one correctly rounded operation
        return negative ? -x : x;
    }

    private double slow(byte[] b) {
        return Double.parseDouble(new String(b, numberAt, numberEnd - numberAt, StandardCharsets.ISO_8859_1));
    }

    /**
     * The string at {@code i} (its opening quote): well-formed UTF-8 (no surrogates, no overlong forms), no control
     * characters, escapes other than {@code \\u} of a surrogate decoded; its bytes in {@link #str}; the index after
     * it, or GIVE_UP.
     */
    private int string(byte[] b, int i, int end) {
        int j = i + 1;
        while (true) {
            if (j >= end) return GIVE_UP;
            int c = b[j];
            if (c == '"') {
                if (j - i - 1 > MAX_STRING) return GIVE_UP;
                str = b;
                strAt = i + 1;
                strLen = j - i - 1;
                return j + 1;
            }
            if (c == '\\') return escaped(b, i + 1, j, end);
            if (c >= 0) {
                if (c < 0x20) return GIVE_UP;
                j++;
            } else {
                j = utf8(b, j, end);
                if (j < 0) return GIVE_UP;
            }
        }
    }

    /** The rest of a string whose first escape is at {@code j} ({@code from}: its first byte), decoded into scratch. */
    private int escaped(byte[] b, int from, int j, int end) {
        int k = j - from;
        ensure(k + 16);
        System.arraycopy(b, from, scratch, 0, k);
        while (true) {
            if (j >= end) return GIVE_UP;
            int c = b[j];
            if (c == '"') {
                if (k > MAX_STRING) return GIVE_UP;
                str = scratch;
                strAt = 0;
                strLen = k;
                return j + 1;
            }
            ensure(k + 4);
            if (c == '\\') {
                if (j + 1 >= end) return GIVE_UP;
                byte e = b[j + 1];
                j += 2;
                switch (e) {
                    case '"':
                    case '\\':
                    case '/':
                        scratch[k++] = e;
                        break;
                    case 'b':
                        scratch[k++] = '\b';
                        break;
                    case 'f':
                        scratch[k++] = '\f';
                        break;
                    case 'n':
                        scratch[k++] = '\n';
                        break;
                    case 'r':
                        scratch[k++] = '\r';
                        break;
                    case 't':
                        scratch[k++] = '\t';
                        break;
                    case 'u': {
                        if (end - j < 4) return GIVE_UP;
                        int u = 0;
                        for (int q = 0; q < 4; q++) {
                            int h = Character.digit(b[j + q], 16);
                            if (h < 0) return GIVE_UP;
                            u = u * 16 + h;
                        }
                        j += 4;
                        if (u >= 0xD800 && u <= 0xDFFF) return GIVE_UP;      // a surrogate: the exact path
                        if (u < 0x80) {
                            scratch[k++] = (byte) u;
                        } else if (u < 0x800) {
                            scratch[k++] = (byte) (0xC0 | (u >> 6));
                            scratch[k++] = (byte) (0x80 | (u & 0x3F));
                        } else {
                            scratch[k++] = (byte) (0xE0 | (u >> 12));
                            scratch[k++] = (byte) (0x80 | ((u >> 6) & 0x3F));
                            scratch[k++] = (byte) (0x80 | (u & 0x3F));
                        }
                        break;
                    }
                    default:
                        return GIVE_UP;
                }
            } else if (c >= 0) {
                if (c < 0x20) return GIVE_UP;
                scratch[k++] = (byte) c;
                j++;
            } else {
                int e = utf8(b, j, end);
                if (e < 0) return GIVE_UP;
                while (j < e) scratch[k++] = b[j++];
            }
        }
    }

    private void ensure(int n) {
        if (scratch.length < n) scratch = Arrays.copyOf(scratch, Math.max(n, scratch.length * 2));
    }

    /** One well-formed multi-byte UTF-8 sequence at {@code j} (Unicode's table 3-7); the index after it, or GIVE_UP. */
    private static int utf8(byte[] b, int j, int end) {
        int c = b[j] & 0xFF;
        int n;
        int lo = 0x80;
        int hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            if (c == 0xE0) lo = 0xA0;
            else if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            if (c == 0xF0) lo = 0x90;
            else if (c == 0xF4) hi = 0x8F;
        } else {
            return GIVE_UP;
        }
        if (end - j <= n) return GIVE_UP;
        int c1 = b[j + 1] & 0xFF;
        if (c1 < lo || c1 > hi) return GIVE_UP;
        for (int q = 2; q <= n; q++) {
            int cq = b[j + q] & 0xFF;
            if (cq < 0x80 || cq > 0xBF) return GIVE_UP;
        }
        return j + n + 1;
    }
}
