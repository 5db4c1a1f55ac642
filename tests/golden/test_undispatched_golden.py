"""Records a stopped store's CommitLog holds past every ConsumeQueue are dispatched by queue reads as the broker's
recovery dispatches them (from the queues' maximum physical end, spec §7.3, §7.5), on every golden corpus and its
CommitLog layout, DLedger included.

Judged by the queues the real engines wrote: each corpus's store with every unit of the records from a cut point
on taken out of its ConsumeQueue files (a writer killed after its CommitLog write, before its dispatch) reads
queue for queue, unit for unit, as the corpus itself, in the Python reader and in its JVM twin (StoreReader,
through QueueDumpMain).  On a DLedger store the queues' maximum physical end is an entry's start, 48 bytes
before the next record: the walk starts at that entry."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from golden import case_id, corpora, load_config
from jvm_twins import jvm_queue_view
from rmqsource.format.consumequeue import CQ_UNIT_DTYPE
from rmqsource.store.reader import MessageStoreReader

pytestmark = pytest.mark.golden

CORPORA = [pytest.param(c, id=case_id(c)) for c in corpora()]


def config_of(corpus: Path):
    return load_config(corpus) if (corpus / "store.properties").is_file() else None


def undispatched_copy(corpus: Path, tmp_path: Path) -> tuple[Path, int]:
    """The corpus's store (entries linked in place) with its ConsumeQueue files copied and every unit of a
    record at or past the cut (the start of the record four fifths into the queued ones) zeroed, as a file
    the writer never reached reads; returns the store and how many units were taken out."""
    store = tmp_path / "store"
    store.mkdir()
    for entry in (corpus / "store").iterdir():
        if entry.name not in ("consumequeue", "abort", "lock"):
            os.symlink(entry, store / entry.name)
    files = sorted(p for p in (corpus / "store" / "consumequeue").rglob("*") if p.is_file())
    units = {f: np.frombuffer(f.read_bytes(), dtype=CQ_UNIT_DTYPE) for f in files}
    phys = np.unique(np.concatenate([u["phy_offset"][u["size"] > 0] for u in units.values()]))
    cut = int(phys[len(phys) * 4 // 5])
    taken = 0
    for f, u in units.items():
        out = store / f.relative_to(corpus / "store")
        out.parent.mkdir(parents=True, exist_ok=True)
        u = u.copy()
        past = (u["size"] > 0) & (u["phy_offset"] >= cut)
        if past.any():
            first = int(np.flatnonzero(past)[0])
            taken += int(past.sum())
            u[first:] = np.zeros(1, dtype=CQ_UNIT_DTYPE)
        out.write_bytes(u.tobytes())
    return store, taken


def python_view(store: Path, config) -> tuple[dict, dict]:
    queues, units = {}, {}
    with MessageStoreReader(str(store), config) as reader:
        assert not reader.live
        for info in reader.queue_infos():
            key = (info.topic, info.queue_id)
            queues[key] = (info.min_offset, info.max_offset)
            got = reader.consume_queue(*key).read_units(info.min_offset, info.max_offset - info.min_offset)
            for i, u in enumerate(got):
                units[key + (info.min_offset + i,)] = (int(u["phy_offset"]), int(u["size"]), int(u["tags_code"]))
    return queues, units


@pytest.mark.parametrize("corpus", CORPORA)
def test_undispatched_records_are_served_as_the_engine_queued_them(corpus, tmp_path):
    config = config_of(corpus)
    store, taken = undispatched_copy(corpus, tmp_path)
    assert taken > 10
    assert python_view(store, config) == python_view(corpus / "store", config)


@pytest.mark.jvm
@pytest.mark.parametrize("corpus", CORPORA)
def test_undispatched_records_are_served_by_the_jvm_twin(corpus, tmp_path):
    store, taken = undispatched_copy(corpus, tmp_path)
    assert taken > 10
    assert jvm_queue_view(store) == jvm_queue_view(corpus / "store")
