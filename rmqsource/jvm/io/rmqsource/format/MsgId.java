package io.rmqsource.format;

import java.nio.ByteBuffer;

/**
 * Offset msgIds and host strings (spec 6), twin of rmqsource/format/msgid.py.
 *
 * Offset msgId = upper-case hex of storeIP (4|16 bytes) + int32 port + int64 phyOffset.
 */
public final class MsgId {
    private static final byte[] HEX = "0123456789ABCDEF".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

    private MsgId() {
    }

    /** Writes the msgId of the record whose store host field starts at {@code hostPos}; returns its length. */
    public static int write(ByteBuffer b, int hostPos, boolean v6, long phyOffset, byte[] out) {
        int addr = v6 ? 16 : 4;
        int n = 0;
        for (int i = 0; i < addr + 4; i++) {
            int v = b.get(hostPos + i) & 0xFF;
            out[n++] = HEX[v >>> 4];
            out[n++] = HEX[v & 15];
        }
        for (int s = 56; s >= 0; s -= 8) {
            int v = (int) (phyOffset >>> s) & 0xFF;
            out[n++] = HEX[v >>> 4];
            out[n++] = HEX[v & 15];
        }
        return n;
    }

    /** CommitLog offset of an offset msgId (32 hex digits IPv4, 56 IPv6), or -1 when it is not one. */
    public static long decodePhyOffset(String msgId) {
        String text = msgId.strip();
        if (text.length() != 32 && text.length() != 56) return -1;
        long v = 0;
        for (int i = text.length() - 16; i < text.length(); i++) {
            int d = Character.digit(text.charAt(i), 16);
            if (d < 0) return -1;
            v = (v << 4) | d;
        }
        for (int i = 0; i < text.length() - 16; i++) {
            if (Character.digit(text.charAt(i), 16) < 0) return -1;
        }
        return v;
    }

    /** {@code a.b.c.d:port} or Java's uncompressed {@code [x:x:...]:port} for the host field at {@code pos}. */
    public static String host(ByteBuffer b, int pos, boolean v6) {
        StringBuilder sb = new StringBuilder(v6 ? 48 : 24);
        if (v6) {
            sb.append('[');
            for (int g = 0; g < 8; g++) {
                if (g > 0) sb.append(':');
                sb.append(Integer.toHexString(b.getShort(pos + 2 * g) & 0xFFFF));
            }
            sb.append("]:").append(b.getInt(pos + 16));
        } else {
            sb.append(b.get(pos) & 0xFF).append('.').append(b.get(pos + 1) & 0xFF).append('.')
                    .append(b.get(pos + 2) & 0xFF).append('.').append(b.get(pos + 3) & 0xFF)
                    .append(':').append(b.getInt(pos + 4));
        }
        return sb.toString();
    }

    /** Offset msgId of a record stored by {@code addr} (4 or 16 bytes) : {@code port} at {@code phyOffset}. */
    public static String offsetMsgId(byte[] addr, int port, long phyOffset) {
        char[] out = new char[2 * (addr.length + 12)];
        int n = 0;
        for (byte x : addr) {
            out[n++] = (char) HEX[(x >>> 4) & 15];
            out[n++] = (char) HEX[x & 15];
        }
        for (int s = 24; s >= 0; s -= 8) {
            int v = (port >>> s) & 0xFF;
            out[n++] = (char) HEX[v >>> 4];
            out[n++] = (char) HEX[v & 15];
        }
        for (int s = 56; s >= 0; s -= 8) {
            int v = (int) (phyOffset >>> s) & 0xFF;
            out[n++] = (char) HEX[v >>> 4];
            out[n++] = (char) HEX[v & 15];
        }
        return new String(out);
    }

    /**
     * (address bytes, port) of {@code a.b.c.d:port} or {@code [v6]:port} (parse_host), or null when
     * the text is not one.  The result is {address (4 or 16 bytes), port as 2 big-endian bytes}.
     */
    public static Object[] parseHost(String text) {
        if (text == null) return null;
        try {
            if (text.startsWith("[")) {
                int close = text.indexOf("]:");
                if (close < 0) return null;
                String host = text.substring(1, close);
                if (host.indexOf(':') < 0) return null;
                java.net.InetAddress a = java.net.InetAddress.getByName(host);   // a literal: no lookup
                byte[] raw = a.getAddress();
                if (raw.length == 4) {          // ::ffff:a.b.c.d comes back as IPv4: keep the 16 bytes
                    byte[] v6 = new byte[16];
                    v6[10] = (byte) 0xFF;
                    v6[11] = (byte) 0xFF;
                    System.arraycopy(raw, 0, v6, 12, 4);
                    raw = v6;
                }
                Integer port = digits(text.substring(close + 2));
                return port == null ? null : new Object[] {raw, port};
            }
            int colon = text.lastIndexOf(':');
            if (colon < 0) return null;
            byte[] addr = ipv4(text.substring(0, colon));
            Integer port = digits(text.substring(colon + 1));
            return addr == null || port == null ? null : new Object[] {addr, port};
        } catch (java.net.UnknownHostException | RuntimeException e) {
            return null;
        }
    }

    private static Integer digits(String s) {
        if (s.isEmpty() || s.length() > 9) return null;
        for (int i = 0; i < s.length(); i++) if (s.charAt(i) < '0' || s.charAt(i) > '9') return null;
        return Integer.parseInt(s);
    }

    /** Dotted quad, as Python's ipaddress.IPv4Address takes it (no leading zeros), or null. */
    private static byte[] ipv4(String s) {
        String[] parts = s.split("\\.", -1);
        if (parts.length != 4) return null;
        byte[] out = new byte[4];
        for (int i = 0; i < 4; i++) {
            String p = parts[i];
            if (p.isEmpty() || p.length() > 3 || (p.length() > 1 && p.charAt(0) == '0')) return null;
            for (int k = 0; k < p.length(); k++) if (p.charAt(k) < '0' || p.charAt(k) > '9') return null;
            int v = Integer.parseInt(p);
            if (v > 255) return null;
            out[i] = (byte) v;
        }
        return out;
    }
}
