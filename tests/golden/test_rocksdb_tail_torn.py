"""A record the broker is still copying into the CommitLog when the tail walk reads it.

The broker appends a record with one copy into the mapped file; a reader's read can land in the middle of it.
When the body is already whole its CRC checks out, but the properties after it may still be zeros, so the
record's tags code (and its LMQ copies) would come out wrong, and the tail keeps what it walked for the life of
its snapshot.  The walk therefore reads its last record again after decoding it: here the file is completed
between the two reads, as the broker would complete it.  The walk must end before the record, then take it
whole on its next walk, and give exactly what a walk of the finished file gives."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from golden import broker_corpora, case_id, default_layout_corpora, load_config
from rmqsource.store.commitlog import CommitLog
from rmqsource.store.layout import StoreLayout
from rmqsource.store.rocksdb_tail import DEFAULT_DELAY_LEVELS_MS, CommitLogTail

pytestmark = pytest.mark.golden

CORPORA = [pytest.param(c, id=case_id(c)) for c in default_layout_corpora()] + \
          [pytest.param(b, id=b.name) for b in broker_corpora()]


def open_commitlog(store: Path, corpus: Path) -> tuple[CommitLog, tuple]:
    config = load_config(corpus) if (corpus / "store.properties").is_file() else None
    layout = StoreLayout.for_config(store, config) if config is not None else StoreLayout.for_root(store)
    return CommitLog(layout), (config.message_delay_levels_ms if config is not None else DEFAULT_DELAY_LEVELS_MS)


def tail_of(store: Path, corpus: Path) -> tuple[int, dict]:
    commitlog, delays = open_commitlog(store, corpus)
    try:
        tail = CommitLogTail(commitlog.min_offset, {}, delays)
        tail.extend(commitlog)
        return tail.end, {k: (q.first_offset, q.units.tolist()) for k, q in tail.view().items()}
    finally:
        commitlog.close()


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "record-walk"])
@pytest.mark.parametrize("corpus", CORPORA)
def test_a_record_completed_during_the_walk_is_taken_on_the_next_walk(corpus, chunked, tmp_path, monkeypatch):
    store = tmp_path / "store"
    store.mkdir()
    shutil.copytree(corpus / "store" / "commitlog", store / "commitlog", copy_function=shutil.copyfile)
    for f in (store / "commitlog").iterdir():
        f.chmod(0o644)
    end, finished = tail_of(store, corpus)

    # The last record as the broker's copy left it half-way: header and body written, properties still zeros.
    commitlog, delays = open_commitlog(store, corpus)
    last, size, record = max((step.phy_offset, step.decoded.size, step.decoded.record)
                             for step in commitlog.walk(commitlog.min_offset) if step.decoded.record is not None)
    commitlog.close()
    assert last + size == end and record.properties_raw, "the corpus's last record has properties"
    segment = next(p for p in sorted((store / "commitlog").iterdir(), reverse=True) if int(p.name) <= last)
    at = last - int(segment.name)
    props_at = at + size - len(record.properties_raw)
    whole = segment.read_bytes()
    torn = whole[:props_at] + bytes(len(record.properties_raw)) + whole[props_at + len(record.properties_raw):]
    segment.write_bytes(torn)

    # The broker completes its copy while the walk decodes what it read (the read that saw the torn record).
    original_dispatch = CommitLogTail._dispatch_chunk if chunked else CommitLogTail._dispatch

    def dispatch_then_complete(self, *args):
        out = original_dispatch(self, *args)
        read = range(args[2], args[2] + len(args[0])) if chunked else range(args[0], args[0] + 1)
        if last in read:
            segment.write_bytes(whole)
        return out
    monkeypatch.setattr(CommitLogTail, "_dispatch_chunk" if chunked else "_dispatch", dispatch_then_complete)
    if not chunked:
        monkeypatch.setattr(CommitLogTail, "_walk", lambda self, commitlog, at: self._walk_records(commitlog, at))

    commitlog, delays = open_commitlog(store, corpus)
    try:
        tail = CommitLogTail(commitlog.min_offset, {}, delays)
        tail.extend(commitlog)
        assert tail.end == last                       # held back: it read differently the second time
        first = {k: q.units["phy_offset"].tolist() for k, q in tail.view().items()}
        assert all(last not in phys for phys in first.values())
        monkeypatch.undo()
        tail.extend(commitlog)
        got = {k: (q.first_offset, q.units.tolist()) for k, q in tail.view().items()}
    finally:
        commitlog.close()
    assert tail.end == end
    assert got == finished
