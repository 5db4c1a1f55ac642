"""The CommitLog tail of a RocksDB ConsumeQueue store (rmqsource/store/rocksdb_tail.py) walked two ways.

The chunked walk (vectorized header decoding, CRCs per record) must dispatch exactly what the record walk
(CommitLog.walk with CRCs, recovery's checks) dispatches and stop where it stops, on every store the real
engines and brokers wrote (blank records, transaction halves, delayed and timer messages, LMQ copies,
DLedger files) and on each crash case (torn and garbage tails, a CommitLog ahead of its queues).  Judged
also against the engine: on a corpus store the units of every queue equal its ConsumeQueue files'.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from golden import broker_corpora, case_id, copy_store, corpora, crash_cases, is_dledger, load_config
from rmqsource.errors import RmqError
from rmqsource.store.commitlog import CommitLog
from rmqsource.store.layout import StoreLayout
from rmqsource.store.reader import MessageStoreReader
from rmqsource.store.rocksdb_tail import DEFAULT_DELAY_LEVELS_MS, CommitLogTail

pytestmark = pytest.mark.golden

STORES = [pytest.param(c / "store", c, id=case_id(c)) for c in corpora()] \
    + [pytest.param(c / "store", c.parent.parent, id=case_id(c)) for c in crash_cases()] \
    + [pytest.param(b / "store", None, id=b.name) for b in broker_corpora()]


def walked(store: Path, corpus, *, chunked: bool, chunk_bytes: int = 0, monkeypatch=None):
    """(end, {queue: (first offset, units)}), or the error the walk raised (a DLedger entry whose record
    fails its checks is one: DLedger recovery would not stop there)."""
    try:
        return _walked(store, corpus, chunked=chunked, chunk_bytes=chunk_bytes, monkeypatch=monkeypatch)
    except RmqError as e:
        return type(e).__name__, str(e)


def _walked(store: Path, corpus, *, chunked: bool, chunk_bytes: int, monkeypatch):
    config = load_config(corpus) if corpus is not None else None
    layout = StoreLayout.for_config(store, config) if config is not None else StoreLayout.for_root(store)
    delays = config.message_delay_levels_ms if config is not None else DEFAULT_DELAY_LEVELS_MS
    commitlog = CommitLog(layout)
    try:
        tail = CommitLogTail(commitlog.min_offset if commitlog.segments else 0, {}, delays)
        if chunked:
            if chunk_bytes:
                monkeypatch.setattr("rmqsource.store.rocksdb_tail.CHUNK_BYTES", chunk_bytes)
            tail.extend(commitlog)
        elif commitlog.segments:
            tail.end = tail._walk_records(commitlog, tail.start)
        view = tail.view()
    finally:
        commitlog.close()
    return tail.end, {k: (q.first_offset, q.units.tolist()) for k, q in view.items()}


@pytest.mark.parametrize("store, corpus", STORES)
def test_the_chunked_walk_dispatches_what_the_record_walk_does(store, corpus, monkeypatch):
    expected = walked(store, corpus, chunked=False)
    assert walked(store, corpus, chunked=True) == expected
    # Chunks that end inside records and records longer than a chunk take the same path to the same end.
    assert walked(store, corpus, chunked=True, chunk_bytes=3001, monkeypatch=monkeypatch) == expected


@pytest.mark.parametrize("corpus", [pytest.param(c, id=case_id(c)) for c in corpora()])
def test_the_tail_of_a_whole_commitlog_is_the_engines_consumequeues(corpus):
    """From the first record on, every queue's dispatched units equal the engine's ConsumeQueue files."""
    end, view = walked(corpus / "store", corpus, chunked=True)
    assert view
    with MessageStoreReader(corpus / "store", load_config(corpus)) as reader:
        assert end == reader.commit_log_max_offset
        for (topic, qid), (first, units) in view.items():
            q = reader.consume_queue(topic, qid)
            assert q is not None, (topic, qid)
            assert (first, q.max_offset) == (q.first_file_start_offset, first + len(units)), (topic, qid)
            assert q.read_units(first, q.max_offset - first).tolist() == units, (topic, qid)


@pytest.mark.parametrize("cut", ["inside a record", "at a record's end", "inside a header"])
@pytest.mark.parametrize("corpus", [pytest.param(c, id=case_id(c)) for c in corpora() if not is_dledger(c)])
def test_a_commitlog_file_shorter_than_its_segment_ends_both_walks_alike(corpus, cut, tmp_path, monkeypatch):
    """The last CommitLog file cut short (a copy truncated mid-write): both walks stop at the same record,
    whatever the chunk size (a chunk read past the file's end comes back short)."""
    store = copy_store(corpus / "store", tmp_path / "store")
    last = sorted((store / "commitlog").iterdir())[-1]
    size = last.stat().st_size
    first = int.from_bytes(last.read_bytes()[:4], "big")      # the file's first record's totalSize
    at = {"inside a record": first // 2, "at a record's end": first, "inside a header": first + 3}[cut]
    assert 0 < at < size
    os.truncate(last, at)
    expected = walked(store, corpus, chunked=False)
    assert walked(store, corpus, chunked=True) == expected
    assert walked(store, corpus, chunked=True, chunk_bytes=3001, monkeypatch=monkeypatch) == expected
