"""File sizes a writer must use for an existing store, taken from its files.

RocketMQ sizes every CommitLog segment (``mappedFileSizeCommitLog``), every
ConsumeQueue file (``mappedFileSizeConsumeQueue``) and every IndexFile
(``maxHashSlotNum``/``maxIndexNum``) from its config, and a writer appending to a
store must use the sizes its files already have.  :func:`fit_config_to_files`
takes each size the caller did not set from the files; a size that was set and
disagrees with the files, or files of one kind that disagree among themselves,
is a clear error naming a file.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from typing import Optional

from ..errors import OptionError, StoreError
from ..format.indexfile import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, index_file_size
from ..io.segments import Segment, list_segments
from .config import StoreConfig, parse_java_properties
from .layout import StoreLayout

COMMIT_LOG_KEY = "mappedFileSizeCommitLog"
CONSUME_QUEUE_KEY = "mappedFileSizeConsumeQueue"
INDEX_KEYS = ("maxHashSlotNum", "maxIndexNum")
SIZE_KEYS = (COMMIT_LOG_KEY, CONSUME_QUEUE_KEY) + INDEX_KEYS


def given_keys(config_file: Optional[str], overrides: Iterable[str] = ()) -> set[str]:
    """MessageStoreConfig keys a caller set: those of ``config_file`` (a .properties file) and the overrides."""
    keys = {str(k).strip() for k in overrides}
    if config_file:
        with open(config_file, "rb") as f:
            data = f.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("latin-1")
        keys |= set(parse_java_properties(text, file=str(config_file)))
    return keys


def _one_size(segments: list[Segment], what: str, strict: bool) -> Optional[Segment]:
    """A segment of the common size (None: no files, or sizes differ and not ``strict``)."""
    if not segments:
        return None
    first = segments[0]
    for s in segments[1:]:
        if s.size_bytes != first.size_bytes:
            if not strict:
                return None
            raise StoreError(f"{what} files differ in size: {first.path} is {first.size_bytes} bytes, "
                             f"{s.path} is {s.size_bytes}")
    return first


def fit_config_to_files(config: StoreConfig, root: str | os.PathLike,
                        given: Collection[str] = (), *, strict: bool = True) -> StoreConfig:
    """``config`` with the store's file sizes for every size key not in ``given``.

    Files of one kind that differ in size are a StoreError when ``strict``
    (appending to them cannot be right); otherwise that kind keeps the
    configured size, for recovery and its own, more precise, reports.

    A store without files of a kind keeps the configured size.  IndexFile
    geometry is taken from the oldest IndexFile when it has the default ratio
    maxIndexNum = 4 x maxHashSlotNum (the size alone cannot tell other pairs
    apart); otherwise the writer names the file and asks for both settings.
    """
    root = os.fspath(root)
    layout = StoreLayout.for_config(root, config)
    layout.check_supported()            # the sizes of files of another layout mean nothing here
    given = set(given)
    changes: dict[str, int] = {}
    commit_log = [s for d in config.commit_log_dirs(root) for s in list_segments(d)]
    seg = _one_size(commit_log, "CommitLog segment", strict)
    if seg is not None and seg.size_bytes != config.mapped_file_size_commit_log_bytes:
        _refuse_given(given, COMMIT_LOG_KEY, config.mapped_file_size_commit_log_bytes, seg)
        changes[COMMIT_LOG_KEY] = seg.size_bytes
    cq = [s for t, q in layout.list_queues() for s in list_segments(layout.queue_dir(t, q))]
    seg = _one_size(cq, "ConsumeQueue", strict)
    if seg is not None and seg.size_bytes != config.mapped_file_size_consume_queue_bytes:
        _refuse_given(given, CONSUME_QUEUE_KEY, config.mapped_file_size_consume_queue_bytes, seg)
        changes[CONSUME_QUEUE_KEY] = seg.size_bytes
    index = _oldest_index_file(layout)
    h, n = config.max_hash_slot_num, config.max_index_num
    if index is not None and index.size_bytes != index_file_size(h, n):
        for key in INDEX_KEYS:
            _refuse_given(given, key, f"{h}/{n}", index,
                          note=f"maxHashSlotNum={h} maxIndexNum={n} make {index_file_size(h, n)}-byte IndexFiles")
        slots, rest = divmod(index.size_bytes - INDEX_HEADER_SIZE, 4 + 4 * INDEX_ENTRY_SIZE)
        if slots > 0 and rest == 0:
            changes["maxHashSlotNum"], changes["maxIndexNum"] = slots, 4 * slots
    return config.with_overrides(changes) if changes else config


def _refuse_given(given: set[str], key: str, value, seg: Segment, note: str = "") -> None:
    if key in given:
        raise OptionError(f"{key} is set to {value}{' (' + note + ')' if note else ''}, but {seg.path} is "
                          f"{seg.size_bytes} bytes: leave {key} out to take the size from the store's files, "
                          f"or give the value the store was written with")


def _oldest_index_file(layout: StoreLayout) -> Optional[Segment]:
    d = layout.index_dir
    if not d.is_dir():
        return None
    names = sorted(n for n in os.listdir(d) if n.isdigit() and len(n) == 17)
    for name in names:
        path = os.path.join(d, name)
        size = os.path.getsize(path)
        if size:
            return Segment(0, path, size)
    return None
