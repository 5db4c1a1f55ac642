"""Bounded decompression of bodies flagged compressed (spec §2.6).

sysFlag 0x1 = compressed; type = ``(sysFlag >> 8) & 7``: 0 legacy zlib,
1 LZ4 frame, 2 ZSTD frame, 3 zlib.  LZ4/ZSTD need the optional ``lz4`` /
``zstandard`` packages.  Output is capped so a hostile body cannot exhaust
memory.
"""

from __future__ import annotations

import zlib

from .. import limits
from ..errors import DecompressionError
from .record import COMPRESSED_FLAG

ZLIB_LEGACY, LZ4, ZSTD, ZLIB = 0, 1, 2, 3


def compression_type(sys_flag: int) -> int:
    return (sys_flag >> 8) & 0x7


def is_compressed(sys_flag: int) -> bool:
    return bool(sys_flag & COMPRESSED_FLAG)


def inflate_body(body: bytes, sys_flag: int, *, max_bytes: int = limits.DEFAULT_MAX_INFLATED_BODY_BYTES,
                 file: str | None = None, offset: int | None = None) -> bytes:
    """Return the plain body; bodies without the compressed flag are returned as-is."""
    if not is_compressed(sys_flag):
        return body
    kind = compression_type(sys_flag)
    try:
        if kind in (ZLIB_LEGACY, ZLIB):
            d = zlib.decompressobj()
            out = d.decompress(body, max_bytes + 1)
            if len(out) > max_bytes or d.unconsumed_tail:
                raise DecompressionError(f"zlib body inflates past the cap of {max_bytes} bytes",
                                         file=file, offset=offset)
            if not d.eof:
                raise DecompressionError("zlib body is truncated", file=file, offset=offset)
            return out
        if kind == LZ4:
            try:
                import lz4.frame
            except ImportError as exc:
                raise DecompressionError("LZ4 body needs the 'lz4' package", file=file, offset=offset) from exc
            d = lz4.frame.LZ4FrameDecompressor()
            out = d.decompress(body, max_length=max_bytes + 1)
            if len(out) > max_bytes:
                raise DecompressionError(f"LZ4 body inflates past the cap of {max_bytes} bytes",
                                         file=file, offset=offset)
            return out
        if kind == ZSTD:
            try:
                import zstandard
            except ImportError as exc:
                raise DecompressionError("ZSTD body needs the 'zstandard' package", file=file, offset=offset) from exc
            # Frames from zstd-jni's stream may lack a content size: stream it.
            reader = zstandard.ZstdDecompressor().stream_reader(body)
            out = reader.read(max_bytes + 1)
            if len(out) > max_bytes:
                raise DecompressionError(f"ZSTD body inflates past the cap of {max_bytes} bytes",
                                         file=file, offset=offset)
            return out
    except DecompressionError:
        raise
    except Exception as exc:  # zlib.error, LZ4/zstd errors: report, never crash
        raise DecompressionError(f"cannot inflate body (compression type {kind}): {exc}",
                                 file=file, offset=offset) from exc
    raise DecompressionError(f"unknown compression type {kind} in sysFlag 0x{sys_flag:X}",
                             file=file, offset=offset)
