"""DLedger layout writer: CommitLog records into ``dledger-<selfId>/`` as RocketMQ 4.9.7 in DLedger mode
writes them (a one-member group on DLedger 0.3.1.2), for tests and benchmarks.

rmqsource does not write DLedger stores through put or the sinks (StoreLayout.check_writable): a real
one is written by its Raft group.  This writer makes the files such a group leaves after a clean
shutdown, byte for byte (tests/test_dledger_writer.py holds it to the golden corpus):

* ``data/``: per record one entry, the 48-byte header (format/dledger.py) then the record, whose
  PHYSICALOFFSET is set to the entry position + 48 (DLedgerCommitLog's append hook).  An entry goes
  at the write position when it leaves at least 8 bytes of the file (MmapFileList.preAppend);
  otherwise a DLedger blank fills the rest of the file and the entry starts the next one.  Files
  are ``mappedFileSizeCommitLog`` bytes, zero past the data; the first is named ``first_offset``
  (0, or dividedCommitlogOffset after a switch from normal mode).
* ``index/``: 32 bytes per entry at ``index * 32``, files of ``index_file_bytes`` named by byte offset.
* ``checkpoint`` (committedIndex = endIndex = the last index: everything committed) and ``currterm``.

The ConsumeQueues and IndexFiles are the caller's (Dispatcher.rebuild builds them as reput does).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Optional

from ..errors import StoreError
from ..format.dledger import (ENTRY_HEADER_BYTES, INDEX_ENTRY_BYTES, DLedgerCheckpoint, encode_blank,
                              encode_checkpoint, encode_currterm, encode_entry_header, encode_index_entry,
                              entry_header, index_entry_of)
from ..format.record import PHY_OFFSET_POS
from ..io import files
from ..io.durable import string2file
from ..io.files import pwrite_all
from ..io.segments import list_segments, offset_to_file_name
from .config import StoreConfig
from .layout import DEFAULT_DLEDGER_SELF_ID, DLEDGER_PREFIX

# DLedgerConfig.mappedFileSizeForEntryIndex: not settable through MessageStoreConfig, so every broker's.
DEFAULT_INDEX_FILE_BYTES = 160 * 1024 * 1024
MIN_BLANK_BYTES = 8                         # MmapFileList.MIN_BLANK_LEN: room an entry must leave for a blank
FLUSH_BYTES = 64 << 20                      # pending bytes per file kept before one pwrite

_PHY_OFFSET = struct.Struct(">q")


class _PreallocatedFile:
    """One file of a DLedger file list being written: created at its full size (zeros, as the mapped
    file is), filled by buffered appends at its write position."""

    def __init__(self, path: Path, size: int):
        self.fd = files.ops.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL)
        files.ops.ftruncate(self.fd, size)
        self.wrote = 0                      # bytes handed to append (written or pending)
        self._flushed = 0
        self._pending: list[bytes] = []
        self._pending_bytes = 0

    def append(self, *parts: bytes) -> None:
        for part in parts:
            self._pending.append(part)
            self._pending_bytes += len(part)
            self.wrote += len(part)
        if self._pending_bytes >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            pwrite_all(self.fd, b"".join(self._pending), self._flushed)
            self._flushed = self.wrote
            self._pending, self._pending_bytes = [], 0

    def close(self) -> None:
        self.flush()
        files.ops.close(self.fd)


class DLedgerWriter:
    """Appends CommitLog records as DLedger entries; ``close`` writes the checkpoint and currterm."""

    def __init__(self, root: str | os.PathLike, config: Optional[StoreConfig] = None, *, first_offset: int = 0,
                 term: int = 0, index_file_bytes: int = DEFAULT_INDEX_FILE_BYTES):
        config = config or StoreConfig()
        self.self_id = config.dleger_self_id or DEFAULT_DLEDGER_SELF_ID
        self.dir = Path(root) / (DLEDGER_PREFIX + self.self_id)
        self.data_dir, self.index_dir = self.dir / "data", self.dir / "index"
        if list_segments(self.data_dir) or list_segments(self.index_dir):
            raise StoreError(f"{self.dir} already holds DLedger files; the writer starts a DLedger log, it does "
                             f"not append to one")
        if index_file_bytes % INDEX_ENTRY_BYTES:
            raise StoreError(f"DLedger index file size {index_file_bytes} is not a multiple of "
                             f"{INDEX_ENTRY_BYTES} (index files hold whole entries)")
        self.data_file_bytes = config.mapped_file_size_commit_log_bytes
        self.index_file_bytes = index_file_bytes
        self.term = term
        self.next_index = 0
        self._data: Optional[_PreallocatedFile] = None
        self._data_start = first_offset     # where the current data file starts (the first one: first_offset)
        self._index: Optional[_PreallocatedFile] = None
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.index_dir.mkdir(parents=True, exist_ok=True)

    @property
    def write_offset(self) -> int:
        """Where the next entry would go (the end of the data)."""
        return self._data_start + (self._data.wrote if self._data is not None else 0)

    def append(self, record: bytes) -> int:
        """Appends one CommitLog record (its PHYSICALOFFSET is overwritten); returns the record's offset."""
        size = ENTRY_HEADER_BYTES + len(record)
        if size + MIN_BLANK_BYTES > self.data_file_bytes:
            raise StoreError(f"a DLedger entry of {size} bytes does not fit a {self.data_file_bytes}-byte data file")
        if self._data is None or size + MIN_BLANK_BYTES > self.data_file_bytes - self._data.wrote:
            self._next_data_file()
        pos = self.write_offset
        body = bytearray(record)
        _PHY_OFFSET.pack_into(body, PHY_OFFSET_POS, pos + ENTRY_HEADER_BYTES)
        header = entry_header(index=self.next_index, term=self.term, pos=pos, body_len=len(record))
        self._data.append(encode_entry_header(header), bytes(body))
        self._append_index(header)
        self.next_index += 1
        return pos + ENTRY_HEADER_BYTES

    def _next_data_file(self) -> None:
        if self._data is not None:
            # The rest of the file becomes a DLedger blank (its zeros are the preallocated file's).
            self._data.append(encode_blank(self.data_file_bytes - self._data.wrote))
            self._data.close()
            self._data_start += self.data_file_bytes
        self._data = _PreallocatedFile(self.data_dir / offset_to_file_name(self._data_start), self.data_file_bytes)

    def _append_index(self, header) -> None:
        at = header.index * INDEX_ENTRY_BYTES
        if self._index is None or at % self.index_file_bytes == 0:
            if self._index is not None:
                self._index.close()
            name = offset_to_file_name(at - at % self.index_file_bytes)
            self._index = _PreallocatedFile(self.index_dir / name, self.index_file_bytes)
        self._index.append(encode_index_entry(index_entry_of(header)))

    def close(self) -> None:
        """Writes what a clean shutdown leaves: the files' data, the checkpoint (all committed), currterm."""
        for f in (self._data, self._index):
            if f is not None:
                f.close()
        if self._data is not None:
            self._data_start += self._data.wrote
        self._data = self._index = None
        last = self.next_index - 1
        string2file(self.dir / "checkpoint", encode_checkpoint(DLedgerCheckpoint(last, last)))
        string2file(self.dir / "currterm", encode_currterm(self.self_id, self.term))

    def __enter__(self) -> "DLedgerWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
