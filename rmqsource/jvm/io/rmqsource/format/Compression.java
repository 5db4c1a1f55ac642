package io.rmqsource.format;

import io.rmqsource.errors.DecompressionError;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;

/**
 * Bounded decompression of bodies flagged compressed (spec 2.6), twin of compression.py.
 *
 * sysFlag 0x1 = compressed; type = (sysFlag >> 8) & 7: 0 legacy zlib, 1 LZ4 frame, 2 ZSTD frame,
 * 3 zlib.  Output is capped so a hostile body cannot exhaust memory.
 */
public final class Compression {
    public static final int ZLIB_LEGACY = 0;
    public static final int LZ4 = 1;
    public static final int ZSTD = 2;
    public static final int ZLIB = 3;

    private Compression() {
    }

    public static int compressionType(int sysFlag) {
        return (sysFlag >> 8) & 0x7;
    }

    public static boolean isCompressed(int sysFlag) {
        return (sysFlag & Record.COMPRESSED_FLAG) != 0;
    }

    public static byte[] inflate(ByteBuffer b, int pos, int len, int sysFlag, long maxBytes, String file,
                                 long offset) {
        byte[] body = new byte[len];
        b.get(pos, body, 0, len);
        int kind = compressionType(sysFlag);
        try {
            switch (kind) {
                case ZLIB_LEGACY:
                case ZLIB:
                    return zlib(body, maxBytes, file, offset);
                case LZ4:
                    return capped(new net.jpountz.lz4.LZ4FrameInputStream(new java.io.ByteArrayInputStream(body)),
                            maxBytes, "LZ4", file, offset);
                case ZSTD:
                    return capped(new com.github.luben.zstd.ZstdInputStream(new java.io.ByteArrayInputStream(body)),
                            maxBytes, "ZSTD", file, offset);
                default:
                    throw new DecompressionError(String.format("unknown compression type %d in sysFlag 0x%X",
                            kind, sysFlag), file, offset);
            }
        } catch (DecompressionError e) {
            throw e;
        } catch (Exception | LinkageError e) {
            throw new DecompressionError("cannot inflate body (compression type " + kind + "): " + e, file, offset, e);
        }
    }

    private static byte[] zlib(byte[] body, long maxBytes, String file, long offset) throws DataFormatException {
        Inflater inf = new Inflater();
        try {
            inf.setInput(body);
            ByteArrayOutputStream out = new ByteArrayOutputStream(Math.min(body.length * 4 + 64, 1 << 20));
            byte[] chunk = new byte[64 * 1024];
            // Bounded: each round either produces bytes (capped in total) or ends.
            while (!inf.finished()) {
                int n = inf.inflate(chunk);
                if (n == 0) {
                    if (inf.needsInput() || inf.needsDictionary()) {
                        throw new DecompressionError("zlib body is truncated", file, offset);
                    }
                    continue;
                }
                out.write(chunk, 0, n);
                if (out.size() > maxBytes) {
                    throw new DecompressionError("zlib body inflates past the cap of " + maxBytes + " bytes",
                            file, offset);
                }
            }
            return out.toByteArray();
        } finally {
            inf.end();
        }
    }

    private static byte[] capped(InputStream in, long maxBytes, String name, String file, long offset)
            throws java.io.IOException {
        try (InputStream s = in) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            byte[] chunk = new byte[64 * 1024];
            int n;
            while ((n = s.read(chunk)) > 0) {
                out.write(chunk, 0, n);
                if (out.size() > maxBytes) {
                    throw new DecompressionError(name + " body inflates past the cap of " + maxBytes + " bytes",
                            file, offset);
                }
            }
            return out.toByteArray();
        }
    }
}
