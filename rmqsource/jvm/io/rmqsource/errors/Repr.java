package io.rmqsource.errors;

/** Python's repr() of a str, so error texts read exactly as the Python path's. */
public final class Repr {
    private Repr() {
    }

    public static String of(String s) {
        if (s == null) return "None";
        char q = s.indexOf('\'') >= 0 && s.indexOf('"') < 0 ? '"' : '\'';
        StringBuilder sb = new StringBuilder(s.length() + 2).append(q);
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\\') sb.append("\\\\");
            else if (c == q) sb.append('\\').append(c);
            else if (c == '\n') sb.append("\\n");
            else if (c == '\r') sb.append("\\r");
            else if (c == '\t') sb.append("\\t");
            else if (c < 0x20 || c == 0x7F) sb.append(String.format("\\x%02x", (int) c));
            else sb.append(c);
        }
        return sb.append(q).toString();
    }
}
