"""The DLedger layout writer (store/dledger_writer.py), judged by the DLedger golden corpora.

Re-encoding a corpus's DLedger records must give its ``dledger-<id>/`` files byte for byte: every data
file (headers, records with their PHYSICALOFFSET set by the writer, DLedger blanks, the zero tail of
the last preallocated file), every index file and the checkpoint/currterm of the clean shutdown.
A store the writer makes from scratch must read back through MessageStoreReader and verify clean.
"""

from __future__ import annotations

import struct

import pytest

from golden import dledger_corpora, load_config, tree_bytes
from rmqsource.errors import StoreError
from rmqsource.format.javahash import tags_code
from rmqsource.format.record import PHY_OFFSET_POS, Kind, encode_record
from rmqsource.store.commitlog import CommitLog
from rmqsource.store.config import StoreConfig
from rmqsource.store.dispatch import Dispatcher
from rmqsource.store.dledger_writer import DLedgerWriter
from rmqsource.store.layout import StoreLayout
from rmqsource.store.reader import GetMessageStatus, MessageStoreReader
from rmqsource.store.verify import verify_store

CORPORA = dledger_corpora()


def corpus_records(store, config) -> tuple[int, list[tuple[int, bytes]]]:
    """(dividedCommitlogOffset, [(record offset, record bytes)]) of a store's DLedger data, as the reader walks it."""
    commitlog = CommitLog(StoreLayout.for_config(store, config), config.mapped_file_size_commit_log_bytes)
    try:
        steps = commitlog.walk(commitlog.divided_offset, keep_raw=True)
        records = [(s.phy_offset, s.decoded.record.raw) for s in steps if s.decoded.kind is Kind.MESSAGE]
        return commitlog.divided_offset, records
    finally:
        commitlog.close()


def without_phy_offset(record: bytes) -> bytes:
    """The record with PHYSICALOFFSET zeroed: the writer must set it, as DLedgerCommitLog's append hook does."""
    return record[:PHY_OFFSET_POS] + bytes(8) + record[PHY_OFFSET_POS + 8:]


@pytest.mark.parametrize("corpus", CORPORA, ids=[c.name for c in CORPORA])
def test_rewriting_the_corpus_records_gives_its_dledger_files(corpus, tmp_path):
    config = load_config(corpus)
    golden = StoreLayout.for_config(corpus / "store", config).dledger_dir
    divided, records = corpus_records(corpus / "store", config)
    assert records, "the corpus holds DLedger records"
    # The harness shrank the DLedger index files (README: not settable through MessageStoreConfig),
    # so their size comes from the corpus's files; term 0 is the README's (a one-member group).
    index_file_bytes = {p.stat().st_size for p in (golden / "index").iterdir()}
    assert len(index_file_bytes) == 1
    with DLedgerWriter(tmp_path, config, first_offset=divided, term=0,
                       index_file_bytes=index_file_bytes.pop()) as writer:
        offsets = [writer.append(without_phy_offset(raw)) for _, raw in records]
    assert offsets == [offset for offset, _ in records]
    written = tree_bytes(tmp_path / golden.name)
    expected = tree_bytes(golden)
    assert sorted(written) == sorted(expected)
    for name in expected:       # one file at a time, so a failure names the file
        assert written[name] == expected[name], name


def message(i: int, topic: str, queue_id: int, queue_offset: int) -> bytes:
    body = bytes((i * 7 + k) & 0xFF for k in range(40 + (i * 997) % 9000))     # sizes vary up to ~9 KB
    props = f"UNIQ_KEY\x01ID-{i:06d}\x02KEYS\x01key-{i}\x02TAGS\x01tag-{i % 3}\x02WAIT\x01true".encode()
    return encode_record(topic=topic.encode(), queue_id=queue_id, flag=0, queue_offset=queue_offset, phy_offset=0,
                         sys_flag=0, born_timestamp_ms=1_700_000_000_000 + i, born_addr=bytes([10, 0, 0, 1]),
                         born_port=40000, store_timestamp_ms=1_700_000_000_010 + i, store_addr=bytes([10, 0, 0, 2]),
                         store_port=10911, reconsume_times=0, prepared_transaction_offset=0, body=body,
                         properties=props)


def test_a_writer_made_store_reads_back_and_verifies_clean(tmp_path):
    # Small data and index files so the writer rolls both, with DLedger blanks between data files.
    config = StoreConfig.from_mapping({"mappedFileSizeCommitLog": 64 * 1024, "mappedFileSizeConsumeQueue": 20 * 40})
    queues = [("DlA", 0), ("DlA", 1), ("DlB", 0)]
    sent: dict[tuple[str, int], list[tuple[int, bytes]]] = {q: [] for q in queues}
    with DLedgerWriter(tmp_path, config, index_file_bytes=32 * 50) as writer:
        for i in range(300):
            topic, queue_id = queues[i % len(queues)]
            record = message(i, topic, queue_id, len(sent[(topic, queue_id)]))
            sent[(topic, queue_id)].append((writer.append(record), record))
    dledger = tmp_path / "dledger-n0"
    data_files = sorted((dledger / "data").iterdir())
    assert len(data_files) > 3 and len(list((dledger / "index").iterdir())) == 6
    blank = struct.pack(">i", -1)
    assert any(blank in f.read_bytes() for f in data_files[:-1])
    commitlog = CommitLog(StoreLayout.for_config(tmp_path, config))
    dispatcher = Dispatcher(tmp_path, cq_file_size=config.mapped_file_size_consume_queue_bytes,
                            delay_levels_ms=config.message_delay_levels_ms, index_service=None)
    try:
        dispatcher.rebuild(commitlog)           # ConsumeQueues as the engine's reput builds them
    finally:
        dispatcher.close()
        commitlog.close()

    with MessageStoreReader(tmp_path, config) as reader:
        assert reader.commit_log_max_offset == writer.write_offset
        for (topic, queue_id), expected in sent.items():
            results = list(reader.get_loop("g", topic, queue_id, 0, 32))
            assert {r.status for r in results} == {GetMessageStatus.FOUND}
            got = [m for r in results for m in r.messages]
            assert [(m.record.phy_offset, without_phy_offset(m.record.raw)) for m in got] == \
                [(offset, without_phy_offset(record)) for offset, record in expected]
            assert [m.cq.tags_code for m in got] == [tags_code(m.record.tags) for m in got]
    report = verify_store(tmp_path, config)
    assert report.ok, [p.text() for p in report.problems]
    assert report.stats["commitLogEnd"] == writer.write_offset


def test_the_writer_starts_a_log_and_refuses_an_entry_larger_than_a_file(tmp_path):
    config = StoreConfig.from_mapping({"mappedFileSizeCommitLog": 4096})
    with DLedgerWriter(tmp_path, config, index_file_bytes=32 * 8) as writer:
        writer.append(message(1, "T", 0, 0))
        with pytest.raises(StoreError, match="does not fit"):
            writer.append(message(2, "T", 0, 1) + bytes(4096))
    with pytest.raises(StoreError, match="already holds DLedger files"):
        DLedgerWriter(tmp_path, config)
