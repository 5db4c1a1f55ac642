package io.rmqsource.format;

import io.rmqsource.errors.FormatError;
import io.rmqsource.errors.OptionError;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CoderResult;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * fastjson-1.x-compatible JSON for RocketMQ's {@code {root}/config/*.json}, the Java twin of
 * rmqsource/format/configjson.py (same grammar, same layout, same error texts and byte offsets).
 *
 * Values: objects are {@code LinkedHashMap<Object, Object>} whose keys are {@code String}
 * (quoted or bare identifiers) or {@code Long}/{@code BigInteger} (bare integers, fastjson's
 * {@code {0:12}}); numbers are {@code Long}, {@code BigInteger} or {@code Double}; arrays
 * {@code ArrayList}.  Writing: a {@code java.util.Set} or a plain {@code List} comes out compact
 * ({@code ["a","b"]}, sets sorted), a {@link PrettyList} one item per line (fastjson's
 * ListSerializer).
 */
public final class FastJson {
    public static final int DEFAULT_MAX_DEPTH = 64;
    static final int MAX_NUMBER_CHARS = 400;

    private FastJson() {
    }

    /** A list written one item per line, like a {@code java.util.List} field in fastjson. */
    public static final class PrettyList extends ArrayList<Object> {
        private static final long serialVersionUID = 1L;

        public PrettyList(Collection<?> items) {
            super(items);
        }
    }

    // ------------------------------------------------------------------ reading

    /** UTF-8 bytes as text; invalid bytes are a FormatError at the first bad byte. */
    public static String decodeUtf8(byte[] data, String file) {
        CharsetDecoder dec = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT);
        ByteBuffer in = ByteBuffer.wrap(data);
        CharBuffer out = CharBuffer.allocate(data.length + 1);
        CoderResult r = dec.decode(in, out, true);
        if (r.isError()) {
            throw new FormatError("config JSON is not UTF-8 (invalid byte sequence)", file == null ? "<config json>" : file,
                    in.position());
        }
        dec.flush(out);
        out.flip();
        return out.toString();
    }

    /** Parses one JSON value of any type (loads_fastjson_value). */
    public static Object parseValue(String text, String file, int maxDepth) {
        if (maxDepth < 1) throw new OptionError("max_depth must be >= 1");
        return new Parser(text, file, maxDepth).document();
    }

    /** Parses a RocketMQ config document: the top level must be an object (loads_fastjson). */
    @SuppressWarnings("unchecked")
    public static Map<Object, Object> parse(String text, String file) {
        Object value = parseValue(text, file, DEFAULT_MAX_DEPTH);
        if (!(value instanceof Map)) {
            throw new FormatError("config JSON: top level is a " + pythonType(value) + ", expected an object",
                    file != null ? file : "<config json>", 0);
        }
        return (Map<Object, Object>) value;
    }

    public static Map<Object, Object> parse(byte[] data, String file) {
        return parse(decodeUtf8(data, file), file);
    }

    /** The Python type name of a parsed value, for messages that read as the Python path's. */
    public static String pythonType(Object v) {
        if (v == null) return "NoneType";
        if (v instanceof Map) return "dict";
        if (v instanceof List) return "list";
        if (v instanceof String) return "str";
        if (v instanceof Boolean) return "bool";
        if (v instanceof Double) return "float";
        return "int";
    }

    private static boolean isWs(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\b';
    }

    private static boolean identStart(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == '$';
    }

    private static boolean identPart(char c) {
        return identStart(c) || (c >= '0' && c <= '9');
    }

    /** Recursive descent over the text; {@code pos} is a char index, errors give byte offsets. */
    private static final class Parser {
        private final String text;
        private final int n;
        private final String file;
        private final int maxDepth;
        private int pos;

        Parser(String text, String file, int maxDepth) {
            this.text = text;
            this.n = text.length();
            this.file = file;
            this.maxDepth = maxDepth;
            this.pos = text.startsWith("\ufeff") ? 1 : 0;     // Java keeps a BOM; skip it
        }

        FormatError fail(String message) {
            return fail(message, pos);
        }

        FormatError fail(String message, int at) {
            return new FormatError("config JSON: " + message, file != null ? file : "<config json>", utf8Length(text, at));
        }

        String found() {
            if (pos >= n) return "end of text";
            return reprChar(text.charAt(pos));
        }

        void skipWs() {
            while (pos < n && isWs(text.charAt(pos))) pos++;
        }

        void expect(char ch, String what) {
            skipWs();
            if (pos >= n || text.charAt(pos) != ch) throw fail("expected " + what + ", found " + found());
            pos++;
        }

        Object document() {
            Object value = value(0);
            skipWs();
            if (pos != n) throw fail("unexpected " + found() + " after the end of the JSON value");
            return value;
        }

        Object value(int depth) {
            skipWs();
            if (pos >= n) throw fail("expected a value, found end of text");
            char ch = text.charAt(pos);
            if (ch == '{') return obj(depth + 1);
            if (ch == '[') return array(depth + 1);
            if (ch == '"') return string();
            if (ch == '-' || (ch >= '0' && ch <= '9')) return number(false);
            if (identStart(ch)) {
                int end = pos + 1;
                while (end < n && identPart(text.charAt(end))) end++;
                String word = text.substring(pos, end);
                switch (word) {
                    case "true": pos = end; return Boolean.TRUE;
                    case "false": pos = end; return Boolean.FALSE;
                    case "null": pos = end; return null;
                    default:
                        throw fail("unexpected word " + reprString(word.length() > 40 ? word.substring(0, 40) : word)
                                + " where a value was expected");
                }
            }
            throw fail("expected a value, found " + found());
        }

        void checkDepth(int depth) {
            if (depth > maxDepth) throw fail("nesting deeper than " + maxDepth + " levels");
        }

        Map<Object, Object> obj(int depth) {
            checkDepth(depth);
            pos++;
            Map<Object, Object> result = new LinkedHashMap<>();
            skipWs();
            if (pos < n && text.charAt(pos) == '}') {
                pos++;
                return result;
            }
            for (int guard = 0; guard <= n; guard++) {
                Object key = key();
                expect(':', "':' after an object key");
                Object v = value(depth);
                result.put(key, v);                 // a duplicate: the last value wins, at the first position
                skipWs();
                if (pos >= n) throw fail("unterminated object: expected ',' or '}', found end of text");
                char ch = text.charAt(pos++);
                if (ch == '}') return result;
                if (ch != ',') throw fail("expected ',' or '}' after an object entry, found " + reprChar(ch), pos - 1);
                skipWs();
            }
            throw fail("object does not end");
        }

        Object key() {
            skipWs();
            if (pos >= n) throw fail("expected an object key, found end of text");
            char ch = text.charAt(pos);
            if (ch == '"') return string();
            if (ch == '-' || (ch >= '0' && ch <= '9')) return number(true);
            if (identStart(ch)) {                  // fastjson's AllowUnQuotedFieldNames
                int start = pos;
                while (pos < n && identPart(text.charAt(pos))) pos++;
                return text.substring(start, pos);
            }
            throw fail("expected an object key, found " + found());
        }

        List<Object> array(int depth) {
            checkDepth(depth);
            pos++;
            List<Object> result = new ArrayList<>();
            skipWs();
            if (pos < n && text.charAt(pos) == ']') {
                pos++;
                return result;
            }
            for (int guard = 0; guard <= n; guard++) {
                result.add(value(depth));
                skipWs();
                if (pos >= n) throw fail("unterminated array: expected ',' or ']', found end of text");
                char ch = text.charAt(pos++);
                if (ch == ']') return result;
                if (ch != ',') throw fail("expected ',' or ']' after an array item, found " + reprChar(ch), pos - 1);
            }
            throw fail("array does not end");
        }

        String string() {
            int start = pos;
            pos++;
            StringBuilder sb = new StringBuilder();
            while (true) {
                while (pos < n && text.charAt(pos) != '"' && text.charAt(pos) != '\\') sb.append(text.charAt(pos++));
                if (pos >= n) throw fail("unterminated string", start);
                char ch = text.charAt(pos++);
                if (ch == '"') return sb.toString();
                if (pos >= n) throw fail("unterminated escape in string", start);
                char esc = text.charAt(pos++);
                switch (esc) {
                    case '"': sb.append('"'); break;
                    case '\\': sb.append('\\'); break;
                    case '/': sb.append('/'); break;
                    case 'b': sb.append('\b'); break;
                    case 'f': sb.append('\f'); break;
                    case 'n': sb.append('\n'); break;
                    case 'r': sb.append('\r'); break;
                    case 't': sb.append('\t'); break;
                    case 'u': sb.append((char) hex4()); break;      // UTF-16 units: pairs join by themselves
                    default: throw fail("invalid escape '\\" + esc + "' in string", pos - 2);
                }
            }
        }

        int hex4() {
            if (pos + 4 > n) throw fail("'\\u' must be followed by 4 hex digits");
            int v = 0;
            for (int i = 0; i < 4; i++) {
                int d = Character.digit(text.charAt(pos + i), 16);
                if (d < 0 || text.charAt(pos + i) > 'f') throw fail("'\\u' must be followed by 4 hex digits");
                v = v * 16 + d;
            }
            pos += 4;
            return v;
        }

        /** -?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)? */
        Object number(boolean integerOnly) {
            int start = pos;
            int p = pos;
            if (p < n && text.charAt(p) == '-') p++;
            int digits = p;
            while (p < n && isDigit(text.charAt(p))) p++;
            if (p == digits) throw fail("malformed number at " + found());
            boolean fraction = false;
            boolean exponent = false;
            if (p + 1 < n && text.charAt(p) == '.' && isDigit(text.charAt(p + 1))) {
                fraction = true;
                p++;
                while (p < n && isDigit(text.charAt(p))) p++;
            }
            if (p < n && (text.charAt(p) == 'e' || text.charAt(p) == 'E')) {
                int q = p + 1;
                if (q < n && (text.charAt(q) == '+' || text.charAt(q) == '-')) q++;
                if (q < n && isDigit(text.charAt(q))) {
                    exponent = true;
                    p = q;
                    while (p < n && isDigit(text.charAt(p))) p++;
                }
            }
            String token = text.substring(start, p);
            if (token.length() > MAX_NUMBER_CHARS) throw fail("number longer than " + MAX_NUMBER_CHARS + " characters", start);
            boolean integer = !fraction && !exponent;
            if (integerOnly && !integer) throw fail("bare object key " + reprString(token) + " is not an integer", start);
            pos = p;
            if (integer) {
                BigInteger v = new BigInteger(token);
                return v.bitLength() < 64 ? (Object) v.longValue() : v;
            }
            double d = Double.parseDouble(token);
            if (Double.isInfinite(d) || Double.isNaN(d)) {
                throw fail("number " + reprString(token.length() > 40 ? token.substring(0, 40) : token) + " is out of range",
                        start);
            }
            return d;
        }
    }

    private static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }

    /** UTF-8 length of text[0, end) (lone surrogates count 3 bytes, as Python's surrogatepass). */
    static long utf8Length(String text, int end) {
        long bytes = 0;
        for (int i = 0; i < end && i < text.length(); i++) {
            char c = text.charAt(i);
            if (c < 0x80) bytes += 1;
            else if (c < 0x800) bytes += 2;
            else if (Character.isHighSurrogate(c) && i + 1 < end && Character.isLowSurrogate(text.charAt(i + 1))) {
                bytes += 4;
                i++;
            } else bytes += 3;
        }
        return bytes;
    }

    /** Python repr() of a one-character string. */
    static String reprChar(char c) {
        return reprString(String.valueOf(c));
    }

    static String reprString(String s) {
        return io.rmqsource.errors.Repr.of(s);
    }

    // ------------------------------------------------------------------ writing

    /**
     * fastjson PrettyFormat (dumps_fastjson): {@code sortKeys} orders integer keys ascending,
     * then string keys by UTF-16 units; without it each map keeps its iteration order.
     */
    public static String write(Object value, boolean sortKeys) {
        StringBuilder out = new StringBuilder();
        new Emitter(out, sortKeys, DEFAULT_MAX_DEPTH).value(value, 0, 0);
        return out.toString();
    }

    public static String write(Object value) {
        return write(value, true);
    }

    private static int compareKeys(Object a, Object b) {
        boolean sa = a instanceof String;
        boolean sb = b instanceof String;
        if (sa != sb) return sa ? 1 : -1;
        if (sa) return ((String) a).compareTo((String) b);
        return toBig(a).compareTo(toBig(b));
    }

    private static BigInteger toBig(Object o) {
        return o instanceof BigInteger ? (BigInteger) o : BigInteger.valueOf(((Number) o).longValue());
    }

    private static boolean isIntegral(Object o) {
        return o instanceof Long || o instanceof Integer || o instanceof Short || o instanceof Byte
                || o instanceof BigInteger;
    }

    private static final class Emitter {
        private final StringBuilder out;
        private final boolean sortKeys;
        private final int maxDepth;

        Emitter(StringBuilder out, boolean sortKeys, int maxDepth) {
            this.out = out;
            this.sortKeys = sortKeys;
            this.maxDepth = maxDepth;
        }

        void newline(int indent) {
            out.append('\n');
            for (int i = 0; i < indent; i++) out.append('\t');
        }

        void value(Object v, int indent, int depth) {
            if (depth > maxDepth) throw new OptionError("value nests deeper than " + maxDepth + " levels");
            if (v == null) {
                out.append("null");
            } else if (v instanceof Boolean) {
                out.append(((Boolean) v) ? "true" : "false");
            } else if (v instanceof Enum) {
                quote(((Enum<?>) v).name());
            } else if (isIntegral(v)) {
                out.append(v.toString());
            } else if (v instanceof Double || v instanceof Float) {
                double d = ((Number) v).doubleValue();
                if (Double.isNaN(d) || Double.isInfinite(d)) {
                    throw new OptionError("cannot write " + d + " as JSON (fastjson writes null; refusing)");
                }
                out.append(Double.toString(d));
            } else if (v instanceof CharSequence) {
                quote(v.toString());
            } else if (v instanceof Map) {
                obj((Map<?, ?>) v, indent, depth + 1);
            } else if (v instanceof PrettyList) {
                prettyList((List<?>) v, indent, depth + 1);
            } else if (v instanceof Set) {
                List<Object> items = new ArrayList<>((Set<?>) v);
                boolean strings = items.stream().allMatch(x -> x instanceof String);
                boolean ints = items.stream().allMatch(FastJson::isIntegral);
                if (strings || ints) items.sort(FastJson::compareKeys);
                compact(items, indent, depth + 1);
            } else if (v instanceof Collection) {
                compact(new ArrayList<>((Collection<?>) v), indent, depth + 1);
            } else {
                throw new OptionError("cannot write a " + v.getClass().getSimpleName() + " as fastjson config JSON");
            }
        }

        void obj(Map<?, ?> m, int indent, int depth) {
            List<Map.Entry<?, ?>> items = new ArrayList<>(m.entrySet());
            for (Map.Entry<?, ?> e : items) {
                if (!(e.getKey() instanceof String) && !isIntegral(e.getKey())) {
                    throw new OptionError("config JSON keys must be str or int, got "
                            + (e.getKey() == null ? "NoneType" : e.getKey().getClass().getSimpleName()));
                }
            }
            if (sortKeys) items.sort((a, b) -> compareKeys(a.getKey(), b.getKey()));
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : items) {
                if (e.getValue() == null) continue;        // fastjson drops null map values
                if (!first) out.append(',');
                if (e.getKey() instanceof String) {
                    newline(indent + 1);
                    quote((String) e.getKey());
                } else {
                    out.append(e.getKey().toString());
                }
                out.append(':');
                value(e.getValue(), indent + 1, depth);
                first = false;
            }
            if (!items.isEmpty()) newline(indent);        // MapSerializer: println when map.size() > 0
            out.append('}');
        }

        void prettyList(List<?> items, int indent, int depth) {
            if (items.isEmpty()) {
                out.append("[]");
                return;
            }
            out.append('[');
            for (int i = 0; i < items.size(); i++) {
                if (i > 0) out.append(',');
                newline(indent + 1);
                value(items.get(i), indent + 1, depth);
            }
            newline(indent);
            out.append(']');
        }

        void compact(List<?> items, int indent, int depth) {
            out.append('[');
            for (int i = 0; i < items.size(); i++) {
                if (i > 0) out.append(',');
                value(items.get(i), indent, depth);
            }
            out.append(']');
        }

        /** fastjson escapes '"', '\\', C0 controls, 0x7F-0x9F, U+2028/9 (upper-case hex); lone surrogates too. */
        void quote(String s) {
            out.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"': out.append("\\\""); continue;
                    case '\\': out.append("\\\\"); continue;
                    case '\b': out.append("\\b"); continue;
                    case '\t': out.append("\\t"); continue;
                    case '\n': out.append("\\n"); continue;
                    case '\f': out.append("\\f"); continue;
                    case '\r': out.append("\\r"); continue;
                    default:
                }
                if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
                    out.append(c).append(s.charAt(++i));
                } else if (c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == '\u2028' || c == '\u2029'
                        || Character.isSurrogate(c)) {
                    out.append(String.format("\\u%04X", (int) c));
                } else {
                    out.append(c);
                }
            }
            out.append('"');
        }
    }
}
