"""The manifest of a snapshot (``DEST/rmq-snapshot.json``) and the check of a snapshot against it.

The manifest is written last, so it always describes a snapshot that was wholly written.  Fields (docs/
snapshots.md): ``format``, ``formatVersion``, ``validEnd`` (the CommitLog end every copied unit and index
entry is below), ``commitLogMinOffset``, ``segmentBytes``, ``queues`` (each queue's max offset), ``files``
(every file: ``kind``, ``size``, ``validBytes``, ``crc32`` of its first ``validBytes``, ``sealed``),
``source`` (path, host, brokerName / brokerClusterName when the config names them, storeType,
engineVersion, whether a writer held it), ``counts`` per kind, ``bytesCopied``, ``createdAt``, ``seconds``.

``validBytes`` is where a file's content ends: the rest of the file is zeros (the unwritten tail of a
CommitLog segment, ConsumeQueue or IndexFile, which RocketMQ creates at full size).  For an IndexFile the
checksum covers its entries only (header and hash slots are rebuilt from them, :mod:`snapshot_index`).

:func:`check_snapshot` re-reads the destination and compares it with its manifest.  While a later run is
unfinished (its ``rmq-snapshot.pending.json`` marker is there) the files it rewrites may be ahead of the
manifest: the growing ones (CommitLog segments, ConsumeQueue files, IndexFile entries) must still start with
the bytes the manifest checksums, the rewritten ones (configs, checkpoint) must still parse.
"""

from __future__ import annotations

import json
import os
import zlib
from typing import Optional

from ..errors import FormatError, StoreError
from ..format.configjson import loads_fastjson
from ..format.indexfile import HASH_SLOT_SIZE, INDEX_HEADER_SIZE

MANIFEST_NAME = "rmq-snapshot.json"
PENDING_NAME = "rmq-snapshot.pending.json"
FORMAT = "rmq-snapshot"
FORMAT_VERSION = 1
GROWING_KINDS = ("commitlog", "consumequeue", "index")
READ_BLOCK = 8 * 1024 * 1024


def parse_manifest(data: bytes, where: str) -> dict:
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise FormatError(f"snapshot manifest is not JSON: {e}", file=where) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise FormatError(f"not an rmq snapshot manifest (format is not {FORMAT!r})", file=where)
    if doc.get("formatVersion") != FORMAT_VERSION:
        raise FormatError(f"snapshot manifest formatVersion {doc.get('formatVersion')!r} is not "
                          f"{FORMAT_VERSION}: written by another rmqsource version", file=where)
    return doc


def manifest_bytes(doc: dict) -> bytes:
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8")


def crc_of_file(path: str, start: int, end: int, crc: int = 0) -> Optional[int]:
    """CRC-32 of ``path``'s bytes [start, end) continued from ``crc``; None when the file is shorter."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        pos = start
        for _ in range((end - start) // READ_BLOCK + 2):
            if pos >= end:
                return crc
            chunk = os.pread(fd, min(READ_BLOCK, end - pos), pos)
            if not chunk:
                return None
            crc = zlib.crc32(chunk, crc)
            pos += len(chunk)
        return crc if pos >= end else None
    finally:
        os.close(fd)


def check_snapshot(dest_root: str | os.PathLike) -> list[str]:
    """Problems of the local snapshot at ``dest_root`` against its manifest (empty: it matches)."""
    root = os.fspath(dest_root)
    where = os.path.join(root, MANIFEST_NAME)
    try:
        with open(where, "rb") as f:
            doc = parse_manifest(f.read(), where)
    except FileNotFoundError:
        raise StoreError(f"{root} holds no snapshot manifest ({MANIFEST_NAME})") from None
    later_run = os.path.exists(os.path.join(root, PENDING_NAME))
    problems = []
    for rel, entry in sorted(doc["files"].items()):
        path = os.path.join(root, *rel.split("/"))
        kind = entry["kind"]
        try:
            size = os.path.getsize(path)
        except FileNotFoundError:
            problems.append(f"{rel}: missing")
            continue
        if size != entry["size"]:
            problems.append(f"{rel}: {size} bytes, the manifest says {entry['size']}")
            continue
        if kind == "index":
            start = INDEX_HEADER_SIZE + entry["hashSlotNum"] * HASH_SLOT_SIZE
            crc = crc_of_file(path, start, start + entry["validBytes"])
        elif kind in ("config", "checkpoint") and later_run:
            if rel.endswith(".json"):
                try:
                    with open(path, "rb") as f:
                        loads_fastjson(f.read(), file=path)
                except FormatError as e:
                    problems.append(f"{rel}: {e}")
            continue
        else:
            crc = crc_of_file(path, 0, entry["validBytes"])
        if crc != entry["crc32"]:
            problems.append(f"{rel}: crc32 of the first {entry['validBytes']} bytes is "
                            f"{crc if crc is None else format(crc, '08x')}, the manifest says {entry['crc32']:08x}")
        elif kind in GROWING_KINDS and not later_run and kind != "index" \
                and crc_of_file(path, entry["validBytes"], size) != _zeros_crc(size - entry["validBytes"]):
            problems.append(f"{rel}: bytes after the first {entry['validBytes']} are not zeros")
    return problems


def _zeros_crc(length: int) -> int:
    crc = 0
    block = bytes(min(READ_BLOCK, max(length, 0)))
    left = length
    for _ in range(length // READ_BLOCK + 2):
        if left <= 0:
            break
        n = min(left, len(block))
        crc = zlib.crc32(block[:n], crc)
        left -= n
    return crc
