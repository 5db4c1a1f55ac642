"""The writer under a full or failing disk, on copies of a golden store.

Faults come from the file-operation seam (``rmqsource.io.files.installed`` with
``rmqsource.io.faults.FaultyFileOps``: ENOSPC, EIO, short writes at chosen calls) and,
where this machine allows it, from a real full filesystem (a small tmpfs).

The writer's contract under every fault:
* an acknowledged message (PUT_OK under SYNC_FLUSH) is durable: it survives the
  loss of every write that was not fsynced, and reads back exactly;
* an unacknowledged message may or may not be there -- but never torn: every
  message that reads back is exactly one that was put;
* the process never dies (no SIGBUS): a full disk is a put status or a typed error;
* the store reopens (recovery) every time.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest

from rmqsource.format.configjson import loads_fastjson
from rmqsource.format.record import Kind
from rmqsource.io import files
from rmqsource.io.faults import FaultyFileOps, random_plan, when
from rmqsource.store.commitlog import CommitLog
from rmqsource.store.config import StoreConfig
from rmqsource.store.layout import StoreLayout
from rmqsource.store.reader import MessageStoreReader
from rmqsource.store.writer import MessageExtBrokerInner, MessageStoreWriter, PutMessageStatus

from golden import PROJECT_ROOT, copy_store, corpora, load_config, writable

pytestmark = [pytest.mark.crash, pytest.mark.skipif(not corpora(), reason="no golden corpus")]

TOPIC = "FaultTopic"
OK = PutMessageStatus.PUT_OK


def golden_copy(tmp_path: Path, corpus: Path | None = None, **overrides) -> tuple[Path, StoreConfig]:
    corpus = corpus or corpora()[0]
    store = copy_store(corpus / "store", tmp_path / "store")
    return store, load_config(corpus).with_overrides(overrides)


def message(i: int, size: int = 40) -> MessageExtBrokerInner:
    body = (f"m{i}:".encode() + bytes(range(256)) * (size // 256 + 1))[:size]
    return MessageExtBrokerInner(topic=TOPIC, queue_id=i % 3, body=body, tags=f"T{i % 5}", keys=f"fk-{i}",
                                 born_host="10.0.0.1:4000", store_host="10.0.0.5:10911",
                                 born_timestamp_ms=1700000000000 + i)


class StoreCheck:
    """Reopen (recovery), then: acknowledged messages are there, exactly, and served by their
    ConsumeQueues; every other record is one that was put.  Incremental across calls: what one
    call verified cannot change later (the writer only appends past it)."""

    def __init__(self, store: Path, config: StoreConfig, clock=None):
        self.store, self.config, self.clock = store, config, clock
        self.verified_end = 0                   # CommitLog offset up to which records were checked
        self.seen: dict[str, int] = {}          # key -> phyOffset of every FaultTopic record
        self.served: set[str] = set()
        self.queue_next = {q: 0 for q in range(3)}

    def __call__(self, sent: dict, acked: set) -> None:
        with MessageStoreWriter(self.store, self.config, clock_ms=self.clock):
            pass
        layout = StoreLayout.for_root(self.store, self.config.store_path_commit_log or None)
        cl = CommitLog(layout, self.config.mapped_file_size_commit_log_bytes)
        try:
            end = max(self.verified_end, cl.min_offset)
            for step in cl.walk(end, check_crc=True):
                kind = step.decoded.kind
                if kind is Kind.BLANK:
                    end = step.segment.start_offset + self.config.mapped_file_size_commit_log_bytes
                    continue
                if kind is not Kind.MESSAGE:
                    break
                rec = step.decoded.record
                end = step.phy_offset + step.decoded.size
                if rec.topic != TOPIC:
                    continue
                key = rec.properties.get("KEYS")
                m = sent.get(key)
                assert m is not None, f"a record nobody put: {key!r} at {rec.phy_offset}"
                assert (rec.body, rec.queue_id, rec.properties.get("TAGS")) == (m.body, m.queue_id, m.tags), key
                assert key not in self.seen, f"{key} stored twice"
                self.seen[key] = rec.phy_offset
            self.verified_end = end
        finally:
            cl.close()
        missing = acked - set(self.seen)
        assert not missing, f"acknowledged but lost: {sorted(missing)[:5]}"
        with MessageStoreReader(self.store, self.config) as r:      # the ConsumeQueues serve them too
            for q in range(3):
                for _ in range(10_000):
                    res = r.get_message("g", TOPIC, q, self.queue_next[q], 256)
                    self.served.update(m.record.properties.get("KEYS") for m in res.messages)
                    if not res.messages:
                        break
                    self.queue_next[q] = res.next_begin_offset
        assert self.served == set(self.seen)


def check_store(store: Path, config: StoreConfig, sent: dict, acked: set) -> None:
    StoreCheck(store, config)(sent, acked)


def topic_records(store: Path, config: StoreConfig) -> dict:
    """KEYS -> record of every FaultTopic message in the CommitLog."""
    layout = StoreLayout.for_root(store, config.store_path_commit_log or None)
    cl = CommitLog(layout, config.mapped_file_size_commit_log_bytes)
    try:
        out = {}
        for step in cl.walk(cl.min_offset, check_crc=True):
            if step.decoded.kind is Kind.MESSAGE:
                if step.decoded.record.topic == TOPIC:
                    out[step.decoded.record.properties.get("KEYS")] = step.decoded.record
            elif step.decoded.kind is not Kind.BLANK:
                break
        return out
    finally:
        cl.close()


# -- single faults: what each one becomes ---------------------------------------------------------

def test_enospc_on_commitlog_write_refuses_the_batch_and_the_writer_goes_on(tmp_path):
    store, config = golden_copy(tmp_path, flushDiskType="SYNC_FLUSH")
    sent = {f"fk-{i}": message(i) for i in range(30)}
    msgs = list(sent.values())
    plan = when(lambda c: c.op == "pwrite" and c.path and "/commitlog/" in c.path, "ENOSPC", times=1)
    with files.installed(FaultyFileOps(plan)) as ops, MessageStoreWriter(store, config) as w:
        first = w.put_messages(msgs[:10])
        second = w.put_messages(msgs[10:20])
        third = w.put_arrow_batch(pa.Table.from_pylist([{"topic": TOPIC, "queueId": m.queue_id, "body": m.body,
                                                         "tags": m.tags, "keys": m.keys} for m in msgs[20:]]))
    assert len(ops.injected) == 1
    assert {r.status for r in first} == {PutMessageStatus.UNKNOWN_ERROR}
    assert "No space left" in first[0].reason
    assert {r.status for r in second} == {OK} and third.ok_count == 10
    check_store(store, config, sent, {f"fk-{i}" for i in range(10, 30)})
    assert set(topic_records(store, config)) == {f"fk-{i}" for i in range(10, 30)}


def test_enospc_creating_a_segment_is_create_mapped_file_failed(tmp_path):
    store, config = golden_copy(tmp_path, flushDiskType="SYNC_FLUSH")
    big = [message(i, size=20_000) for i in range(30)]             # more than a 256 KiB segment holds
    sent = {m.keys: m for m in big}
    plan = when(lambda c: c.op == "open" and c.path and "commitlog" in c.path and not os.path.exists(c.path),
                "ENOSPC")
    with files.installed(FaultyFileOps(plan)), MessageStoreWriter(store, config) as w:
        results = w.put_messages(big)
    statuses = [r.status for r in results]
    k = statuses.index(PutMessageStatus.CREATE_MAPPED_FILE_FAILED)
    assert 0 < k and set(statuses[:k]) == {OK} and set(statuses[k:]) == {PutMessageStatus.CREATE_MAPPED_FILE_FAILED}
    check_store(store, config, sent, {m.keys for m, r in zip(big, results) if r.ok})


def test_enospc_reserving_index_space_keeps_the_store_whole(tmp_path):
    """The IndexFile is mapped: its blocks are reserved before a key is written, so a full disk is an
    OSError there (not SIGBUS); the messages are in the CommitLog and the next open indexes them."""
    store, config = golden_copy(tmp_path, flushDiskType="SYNC_FLUSH")
    sent = {f"fk-{i}": message(i) for i in range(20)}
    msgs = list(sent.values())
    armed = []
    plan = when(lambda c: armed and c.op == "reserve" and c.path and "/index/" in c.path, "ENOSPC")
    with files.installed(FaultyFileOps(plan)) as ops:
        w = MessageStoreWriter(store, config)
        armed.append(True)
        first = w.put_messages(msgs[:10])
        second = w.put_messages(msgs[10:])
    w.close()
    assert ops.injected and not w.clean_shutdown
    assert {r.status for r in first} == {OK}            # in the CommitLog, fsynced: acknowledged
    assert {r.status for r in second} == {PutMessageStatus.SERVICE_NOT_AVAILABLE}
    assert "No space left" in second[0].reason
    check_store(store, config, sent, {m.keys for m in msgs[:10]})
    with MessageStoreReader(store, config) as r:        # indexed again by the reopen
        assert [m.record.properties["KEYS"] for m in r.query(TOPIC, "fk-3", 8, only_matching=True).messages] == ["fk-3"]


def test_fsync_failure_is_flush_disk_timeout_then_not_writable(tmp_path):
    store, config = golden_copy(tmp_path, flushDiskType="SYNC_FLUSH")
    msgs = [message(i) for i in range(20)]
    plan = when(lambda c: c.op == "fsync" and c.path and "/commitlog/" in c.path, "EIO", times=1)
    with files.installed(FaultyFileOps(plan)):
        w = MessageStoreWriter(store, config)
        first = w.put_messages(msgs[:10])
        second = w.put_messages(msgs[10:])
    w.close()
    assert {r.status for r in first} == {PutMessageStatus.FLUSH_DISK_TIMEOUT}
    assert {r.status for r in second} == {PutMessageStatus.SERVICE_NOT_AVAILABLE}
    assert not w.clean_shutdown
    check_store(store, config, {m.keys: m for m in msgs}, set())


def test_routes_not_written_are_flush_disk_timeout_then_written_by_the_next_put(tmp_path):
    """SYNC_FLUSH: a put call routes its new topics in topics.json before acknowledging them; when that file
    cannot be written its messages are stored but not acknowledged, and the next put call routes them."""
    store, config = golden_copy(tmp_path, flushDiskType="SYNC_FLUSH")
    msgs = [message(i) for i in range(20)]
    with files.installed(FaultyFileOps(failing_routes("ENOSPC"))) as ops, MessageStoreWriter(store, config) as w:
        first = w.put_messages(msgs[:10])
        unrouted = routes(store)
        second = w.put_arrow_batch(pa.Table.from_pylist([{"topic": TOPIC, "queueId": m.queue_id, "body": m.body,
                                                          "tags": m.tags, "keys": m.keys} for m in msgs[10:]]))
        routed = routes(store)
    assert len(ops.injected) == 1
    assert {r.status for r in first} == {PutMessageStatus.FLUSH_DISK_TIMEOUT}
    assert "topics.json could not be written" in first[0].reason and "No space left" in first[0].reason
    assert TOPIC not in unrouted
    assert second.ok_count == 10 and routed[TOPIC]["writeQueueNums"] == 3
    check_store(store, config, {m.keys: m for m in msgs}, {m.keys for m in msgs[10:]})


def test_a_flush_that_cannot_route_fails_and_the_next_one_routes(tmp_path):
    store, config = golden_copy(tmp_path, flushDiskType="ASYNC_FLUSH", flushIntervalCommitLog=3_600_000)
    with files.installed(FaultyFileOps(failing_routes("EIO"))), MessageStoreWriter(store, config) as w:
        assert all(r.ok for r in w.put_messages([message(i) for i in range(5)]))
        with pytest.raises(OSError, match="Input/output error"):
            w.flush()
        assert TOPIC not in routes(store)
        w.flush()
        assert routes(store)[TOPIC]["writeQueueNums"] == 3


def failing_routes(kind: str):
    """A plan failing the first write of a new topics.json."""
    return when(lambda c: c.op == "write" and c.path and c.path.endswith("topics.json.tmp"), kind, times=1)


def routes(store: Path) -> dict:
    """The topicConfigTable of the store's topics.json (empty when there is none)."""
    path = store / "config" / "topics.json"
    return loads_fastjson(path.read_text())["topicConfigTable"] if path.exists() else {}


@pytest.mark.parametrize("corpus", writable(corpora()))
def test_short_writes_change_no_byte(tmp_path, corpus):
    """Every pwrite/write writing only half of what it was given: the golden replay is still exact."""
    from test_writer_golden import _config, _inputs, assert_same_store
    ops = FaultyFileOps(lambda c: "short" if c.op in ("pwrite", "write") else None)
    with files.installed(ops), MessageStoreWriter(tmp_path / "store", _config(corpus.name)) as w:
        w.put_messages(_inputs(corpus.name))
    assert len(ops.injected) > 100
    assert_same_store(corpus / "store", tmp_path / "store")


# -- the contract under many random faults --------------------------------------------------------

def run_fault_rounds(tmp_path: Path, seed: int, faults_wanted: int, corpus: Path) -> tuple[int, int]:
    """Rounds of: open (faults on), put batches through all put paths, close or crash, lose every
    write not fsynced, reopen and check.  Returns (faults injected, rounds)."""
    print(f"fault rounds: seed={seed} corpus={corpus.name}")
    rng = random.Random(seed)
    clock = itertools.count(1_800_000_000_000).__next__           # the same work for the same seed
    injected = rounds = rounds_acking = 0
    next_id = 0
    while injected < faults_wanted:
        if rounds % 40 == 0:                    # a fresh copy now and then keeps recovery walks short
            shutil.rmtree(tmp_path / "store", ignore_errors=True)
            store, config = golden_copy(tmp_path, corpus, flushDiskType="SYNC_FLUSH")
            check = StoreCheck(store, config, clock)
            sent: dict[str, MessageExtBrokerInner] = {}
            acked: set[str] = set()
        rounds += 1
        acked_before = len(acked)
        ops = FaultyFileOps(random_plan(rng, rng.choice((0.05, 0.1, 0.2)), kinds=("short", "short", "ENOSPC", "EIO")),
                            track_unsynced=True)
        with files.installed(ops):
            try:
                w = MessageStoreWriter(store, config, clock_ms=clock)
            except OSError:
                w = None
            for _ in range(rng.randint(1, 4) if w else 0):
                batch = [message(next_id + k, size=rng.choice((10, 100, 1000))) for k in range(rng.randint(1, 20))]
                next_id += len(batch)
                sent.update((m.keys, m) for m in batch)
                how = rng.choice(("messages", "arrow", "json"))
                if how == "messages":
                    results = w.put_messages(batch)
                elif how == "arrow":
                    results = w.put_arrow_batch(pa.Table.from_pylist(
                        [{"topic": m.topic, "queueId": m.queue_id, "body": m.body, "tags": m.tags, "keys": m.keys,
                          "bornHost": m.born_host, "storeHost": m.store_host,
                          "bornTimestamp": m.born_timestamp_ms} for m in batch]))
                else:
                    results = w.put_json_lines("".join(json.dumps(
                        {"topic": m.topic, "queueId": m.queue_id, "body": base64.b64encode(m.body).decode(),
                         "tags": m.tags, "keys": m.keys, "bornHost": m.born_host, "storeHost": m.store_host,
                         "bornTimestamp": m.born_timestamp_ms}) + "\n" for m in batch).encode())
                acked.update(m.keys for m, r in zip(batch, results) if r.status is OK)
            if w is not None:
                if rng.random() < 0.5:
                    try:
                        w.close()
                    except OSError:
                        pass
                else:
                    w.abandon()                         # the process dies here
        injected += len(ops.injected)
        ops.lose_unsynced(rng)                          # ... and the page cache with it
        check(sent, acked)
        rounds_acking += len(acked) > acked_before
    # About half the rounds acknowledge something (measured); a tenth guards against a run whose
    # faults leave nothing acknowledged to check, without failing on a streak of unlucky rounds.
    assert rounds_acking >= rounds // 10, f"only {rounds_acking} of {rounds} rounds acknowledged a message"
    return injected, rounds


def _seed() -> int:
    return int(os.environ.get("RMQ_FAULT_SEED", time.time_ns() % 1_000_000))


def test_sync_writer_contract_under_random_faults(tmp_path):
    """Short run for the default tier (the slow tier runs 1,000 faults per corpus)."""
    seed = _seed()
    injected, rounds = run_fault_rounds(tmp_path, seed, 60, corpora()[0])
    print(f"seed={seed}: {injected} faults injected over {rounds} rounds")


@pytest.mark.slow
@pytest.mark.parametrize("corpus", writable(corpora()))
def test_sync_writer_loses_no_acknowledged_message_under_1000_faults(tmp_path, corpus):
    seed = _seed()
    injected, rounds = run_fault_rounds(tmp_path, seed, 1000, corpus)
    print(f"seed={seed}: {injected} faults injected over {rounds} rounds")
    assert injected >= 1000


# -- a real full filesystem -------------------------------------------------------------------

CHILD = textwrap.dedent("""
    import json, random, sys
    from rmqsource.store.config import StoreConfig
    from rmqsource.store.writer import MessageExtBrokerInner, MessageStoreWriter
    store, props = sys.argv[1], sys.argv[2]
    # the corpus settings with RocketMQ's default index geometry (a 420 MB IndexFile)
    config = StoreConfig.from_properties_file(props, {"maxHashSlotNum": 5000000, "maxIndexNum": 20000000,
                                                      "flushDiskType": "SYNC_FLUSH"})
    w = MessageStoreWriter(store, config)
    statuses = {}
    rng = random.Random(7)             # keys spread over the hash slots: pages all over the IndexFile
    try:
        for b in range(400):
            msgs = [MessageExtBrokerInner(topic="FullDisk", queue_id=0, body=bytes(10), keys=f"{rng.getrandbits(64):x}",
                                          tags="T") for i in range(50)]
            for m, r in zip(msgs, w.put_messages(msgs)):
                statuses[r.status.value] = statuses.get(r.status.value, 0) + 1
                if r.ok:
                    print(json.dumps(m.keys), flush=True)
    finally:
        try:
            w.close()
        except OSError as e:
            print("close:", e, file=sys.stderr)
    print(json.dumps(statuses), file=sys.stderr)
""")


def test_full_filesystem_is_a_put_status_not_sigbus(small_tmpfs):
    """Row 2: default index geometry, the disk fills while the writer appends: before, SIGBUS in a
    sparse IndexFile page; now puts fail with a status, close reports, reopen and ``rmq put`` are clean."""
    corpus = corpora()[0]
    store = copy_store(corpus / "store", small_tmpfs / "store")
    shutil.rmtree(store / "index")                      # rebuilt with the default geometry
    filler = small_tmpfs / "filler"
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    st = os.statvfs(small_tmpfs)
    with open(filler, "wb") as f:                        # leave 22 MB: the IndexFile's 20 MB of slots fit
        f.write(bytes(max(st.f_bavail * st.f_frsize - (22 << 20), 0)))
    p = subprocess.run([sys.executable, "-c", CHILD, str(store), str(corpus / "store.properties")],
                       capture_output=True, env=env, timeout=300)
    assert p.returncode == 0, (p.returncode, p.stderr.decode()[-2000:])
    acked = [json.loads(x) for x in p.stdout.decode().splitlines()]
    counts = json.loads(p.stderr.decode().strip().splitlines()[-1])
    assert acked and set(counts) - {"PUT_OK"}, counts      # the disk did fill up
    # The full store: ``rmq put`` is a one-line error or a put status, never a crash.
    q = subprocess.run([sys.executable, "-m", "rmqsource.cli", "put", str(store), "--config",
                        str(corpus / "store.properties"), "-C", "maxHashSlotNum=5000000", "-C",
                        "maxIndexNum=20000000", "--json"], input=b'{"topic":"FullDisk","body":""}\n',
                       capture_output=True, env=env, timeout=120)
    assert q.returncode in (0, 1), (q.returncode, q.stderr)
    assert b"internal error" not in q.stderr and b"Traceback" not in q.stderr
    # Space freed: the store reopens and every acknowledged message is there.
    filler.unlink()
    config = load_config(corpus).with_overrides({"maxHashSlotNum": 5000000, "maxIndexNum": 20000000})
    with MessageStoreWriter(store, config):
        pass
    layout = StoreLayout.for_root(store, None)
    cl = CommitLog(layout, config.mapped_file_size_commit_log_bytes)
    try:
        keys = {step.decoded.record.properties.get("KEYS") for step in cl.walk(cl.min_offset, check_crc=True)
                if step.decoded.kind is Kind.MESSAGE and step.decoded.record.topic == "FullDisk"}
    finally:
        cl.close()
    assert set(acked) <= keys
