"""DLedger CommitLog structures (openmessaging DLedger 0.3.x as RocketMQ 4.9.7 uses it).

One decoder per structure (twin: format/DLedgerFormat.java), and beside it the encoder the DLedger
layout writer (store/dledger_writer.py) uses:

* entry header, 48 bytes before every CommitLog record in ``dledger-<id>/data/``::

      0 magic int32 (1)   4 size int32 (48 + bodyLen)   8 index int64   16 term int64
      24 pos int64 (absolute offset of the entry)      32 channel int32  36 chainCrc int32
      40 bodyCrc int32    44 bodyLen int32, then bodyLen bytes: one CommitLog record

  The record's offset everywhere (ConsumeQueue, IndexFile, msgId) is ``pos + 48``.
* DLedger blank: ``int32 -1, int32 remaining`` (the rest of the file); 8 zero bytes end the data.
* index entry, 32 bytes at ``k * 32`` of ``dledger-<id>/index/``: magic int32, pos int64,
  size int32, index int64, term int64.
* ``dledger-<id>/checkpoint``: Java properties text ``committedIndex=<i>`` / ``endIndex=<i>``;
  ``dledger-<id>/currterm``: ``voteLeader=<id>`` / ``currTerm=<t>``.
"""

from __future__ import annotations

import enum
import re
import struct
from dataclasses import dataclass
from typing import Optional

ENTRY_HEADER_BYTES = 48
ENTRY_MAGIC = 1                   # DLedgerMmapFileStore.CURRENT_MAGIC
BLANK_MAGIC = -1                  # MmapFileList.BLANK_MAGIC_CODE
INDEX_ENTRY_BYTES = 32

_HEADER = struct.Struct(">iiqqqiiii")
_INDEX = struct.Struct(">iqiqq")
_HEAD8 = struct.Struct(">ii")


class EntryKind(enum.Enum):
    ENTRY = "entry"               # a header (checked by the caller against the walk)
    BLANK = "blank"               # the rest of the file is a DLedger blank
    END = "end"                   # 8 zero bytes or fewer than 8 bytes left: the data ends


@dataclass(frozen=True)
class EntryHeader:
    magic: int
    size: int
    index: int
    term: int
    pos: int
    channel: int
    chain_crc: int
    body_crc: int
    body_len: int


@dataclass(frozen=True)
class DecodedEntry:
    kind: EntryKind
    header: Optional[EntryHeader] = None
    blank_bytes: int = 0


_END = DecodedEntry(EntryKind.END)


def decode_entry(buf, pos: int, limit: int) -> DecodedEntry:
    """What starts at ``buf[pos:]`` (``limit`` = end of the file's bytes in ``buf``).

    A header with fewer than 48 bytes left is returned with the fields that are there (zeros
    after them), so the caller's checks fail on it rather than this decoder guessing.
    """
    left = limit - pos
    if left < 8:
        return _END
    magic, size = _HEAD8.unpack_from(buf, pos)
    if magic == 0 and size == 0:
        return _END
    if magic == BLANK_MAGIC:
        return DecodedEntry(EntryKind.BLANK, blank_bytes=size)
    raw = bytes(buf[pos:pos + min(left, ENTRY_HEADER_BYTES)]).ljust(ENTRY_HEADER_BYTES, b"\0")
    return DecodedEntry(EntryKind.ENTRY, EntryHeader(*_HEADER.unpack(raw)))


def entry_header(*, index: int, term: int, pos: int, body_len: int) -> EntryHeader:
    """The header DLedger 0.3.1.2 writes: channel and both CRCs stay 0 (it computes neither)."""
    return EntryHeader(ENTRY_MAGIC, ENTRY_HEADER_BYTES + body_len, index, term, pos, 0, 0, 0, body_len)


def encode_entry_header(h: EntryHeader) -> bytes:
    return _HEADER.pack(h.magic, h.size, h.index, h.term, h.pos, h.channel, h.chain_crc, h.body_crc, h.body_len)


def encode_blank(remaining: int) -> bytes:
    """The 8 bytes that start a DLedger blank covering the ``remaining`` bytes to the file end (zeros follow)."""
    return _HEAD8.pack(BLANK_MAGIC, remaining)


def header_problem(h: EntryHeader, entry_pos: int, prev_index: Optional[int],
                   prev_term: Optional[int]) -> Optional[tuple[str, str]]:
    """(field, reason) of the first DLedger recovery check ``h`` fails at ``entry_pos``, else None.

    The checks of DLedgerMmapFileStore.recover, in its order: magic, pos, size, index, term.
    """
    if h.magic != ENTRY_MAGIC:
        return "magic", f"entry magic {h.magic} is not {ENTRY_MAGIC}"
    if h.pos != entry_pos:
        return "pos", f"entry pos {h.pos} is not its offset {entry_pos}"
    if h.size != h.body_len + ENTRY_HEADER_BYTES or h.size <= ENTRY_HEADER_BYTES - 4:
        return "size", f"entry size {h.size} is not bodyLen {h.body_len} + {ENTRY_HEADER_BYTES}"
    if prev_index is not None and h.index != prev_index + 1:
        return "index", f"entry index {h.index} does not follow {prev_index}"
    if prev_term is not None and h.term < prev_term:
        return "term", f"entry term {h.term} is below the previous term {prev_term}"
    return None


@dataclass(frozen=True)
class IndexEntry:
    magic: int
    pos: int
    size: int
    index: int
    term: int


def decode_index_entry(buf, pos: int) -> IndexEntry:
    return IndexEntry(*_INDEX.unpack_from(buf, pos))


def index_entry_of(h: EntryHeader) -> IndexEntry:
    """The index entry DLedger writes for the data entry ``h``."""
    return IndexEntry(h.magic, h.pos, h.size, h.index, h.term)


def encode_index_entry(e: IndexEntry) -> bytes:
    return _INDEX.pack(e.magic, e.pos, e.size, e.index, e.term)


def index_entry_problem(entry: IndexEntry, header: EntryHeader, entry_pos: int) -> Optional[str]:
    """Why an index entry disagrees with the data header it indexes (field named first), or None."""
    for name, got, want in (("magic", entry.magic, header.magic), ("pos", entry.pos, entry_pos),
                            ("size", entry.size, header.size), ("index", entry.index, header.index),
                            ("term", entry.term, header.term)):
        if got != want:
            return f"index entry {name} {got} but the data entry has {want}"
    return None


@dataclass(frozen=True)
class DLedgerCheckpoint:
    committed_index: Optional[int]
    end_index: Optional[int]


_JAVA_LONG = re.compile(r"[+-]?[0-9]+")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_JAVA_WHITESPACE = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f "   # Character.isWhitespace within latin-1


def java_long(text: str) -> int:
    """``Long.parseLong``: an optional sign and ASCII digits within int64, else ValueError (Python's
    int() would also take '1_0', inner spaces and out-of-range values)."""
    if not _JAVA_LONG.fullmatch(text):
        raise ValueError(f"not a Java long: {text[:40]!r}")
    value = int(text)
    if not -(1 << 63) <= value < 1 << 63:
        raise ValueError(f"outside the long range: {text[:40]!r}")
    return value


def decode_checkpoint(text: str) -> DLedgerCheckpoint:
    """``committedIndex``/``endIndex`` of the checkpoint properties (the last line naming each), read as
    the engine reads them: ValueError when any such line's value is not a Java long."""
    values: dict[str, int] = {}
    for line in _LINE_BREAK.split(text):
        line = line.strip(_JAVA_WHITESPACE)
        if not line or line[0] in "#!" or "=" not in line:
            continue
        key, value = line.split("=", 1)
        key = key.strip(_JAVA_WHITESPACE)
        if key in ("committedIndex", "endIndex"):
            values[key] = java_long(value.strip(_JAVA_WHITESPACE))
    return DLedgerCheckpoint(values.get("committedIndex"), values.get("endIndex"))


def encode_checkpoint(cp: DLedgerCheckpoint) -> str:
    """The checkpoint text DLedgerMmapFileStore.persistCheckPoint writes (IOUtils.properties2String: the
    Properties table's iteration order, no date comment)."""
    return f"committedIndex={cp.committed_index}\nendIndex={cp.end_index}\n"


def encode_currterm(vote_leader: str, term: int) -> str:
    """``dledger-<id>/currterm`` as MemberState.persistTerm writes it after the member voted for ``vote_leader``."""
    return f"voteLeader={vote_leader}\ncurrTerm={term}\n"
