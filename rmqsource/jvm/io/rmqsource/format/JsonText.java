package io.rmqsource.format;

/** JSON string literals as Python's json.dumps writes them (ensure_ascii): what the Python side reads back. */
public final class JsonText {
    private JsonText() {
    }

    /** The JSON literal of {@code s}, or null for null. */
    public static String str(String s) {
        if (s == null) return "null";
        StringBuilder sb = new StringBuilder(s.length() + 2);
        quote(sb, s);
        return sb.toString();
    }

    public static void quote(StringBuilder sb, String s) {
        quote(sb, s, true);
    }

    /**
     * {@code s} as a JSON string literal: control characters escaped, and with {@code asciiOnly} every character
     * above 0x7E too (Python's ensure_ascii); without it those go as they are (as fastjson2 writes them).
     */
    public static void quote(StringBuilder sb, String s, boolean asciiOnly) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                case '\b': sb.append("\\b"); break;
                case '\f': sb.append("\\f"); break;
                default:
                    if (c < 0x20 || (asciiOnly && c > 0x7E)) sb.append(String.format("\\u%04x", (int) c));
                    else sb.append(c);
            }
        }
        sb.append('"');
    }
}
