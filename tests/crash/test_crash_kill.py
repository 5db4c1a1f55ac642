"""kill -9 of a writing process, then recovery: acknowledged messages survive, torn ones never show.

Also: a reader in another process while the writer appends sees only whole,
dispatched records; a writer killed after acknowledging messages of new topics
(``rmq put``, the JVM writer) leaves them routed in config/topics.json.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rmqsource.commands.put import PUT_BLOCK_BYTES
from rmqsource.format.configjson import loads_fastjson
from rmqsource.format.record import Kind
from rmqsource.store.config import StoreConfig
from rmqsource.store.reader import MessageStoreReader
from rmqsource.store.recovery import recover_store
from rmqsource.store.writer import MessageStoreWriter

from jvm_writer import put_command
from workload import index_of, make_message, matches

pytestmark = pytest.mark.crash

TESTS_DIR = Path(__file__).resolve().parents[1] / "support"
CHILD = TESTS_DIR / "writer_child.py"
SEGMENT_BYTES = 1 << 20


def config(flush_type: str) -> StoreConfig:
    return StoreConfig.from_mapping({"flushDiskType": flush_type, "mappedFileSizeCommitLog": SEGMENT_BYTES,
                                     "mappedFileSizeConsumeQueue": 6000, "maxHashSlotNum": 4096,
                                     "maxIndexNum": 16384})


class Child:
    """The writer child process and the acknowledgements it printed."""

    def __init__(self, store: Path, seed: int, count: int, batch: int, flush_type: str, pause_s: float = 0.0):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]))
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(store), str(seed), str(count), str(batch), flush_type,
             str(SEGMENT_BYTES), str(pause_s)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        self.acked = 0
        self.closed = False
        self.failed = None
        self._progress = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        for line in self.proc.stdout:
            line = line.strip()
            with self._progress:
                if line.isdigit():
                    self.acked = int(line)
                elif line == "CLOSED":
                    self.closed = True
                elif line.startswith("FAILED"):
                    self.failed = line
                self._progress.notify_all()
        with self._progress:
            self._progress.notify_all()

    def wait_for_acked(self, target: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        with self._progress:
            while self.acked < target and not self.closed and self.failed is None and self.proc.poll() is None:
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"writer child too slow: {self.acked} < {target}"
                self._progress.wait(min(remaining, 0.5))

    def kill(self) -> int:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self._thread.join(10)
        return self.acked

    def wait(self) -> None:
        self.proc.wait(600)
        self._thread.join(10)
        assert self.proc.returncode == 0, self.proc.stderr.read()


def served_messages(reader: MessageStoreReader, seed: int) -> int:
    """Messages every queue serves from offset 0; each queue's offsets consecutive, each record intact."""
    served = 0
    for topic, qid in reader.queue_keys():
        expect_offset = 0
        for result in reader.get_loop("check", topic, qid, 0, 256):
            for m in result.messages:
                assert m.record.queue_offset == expect_offset
                assert matches(seed, m.record)
                expect_offset += 1
        served += expect_offset
    return served


def check_store_after_crash(store: Path, seed: int, acked: int, attempted: int, cfg: StoreConfig) -> int:
    """Every acknowledged message present and intact; nothing torn readable. Returns messages present."""
    present = 0
    with MessageStoreReader(store, cfg) as reader:
        end = reader.commit_log_max_offset
        indices = []
        for step in reader.commitlog.walk(reader.commitlog.min_offset, stop_offset=end):
            if step.decoded.kind is Kind.MESSAGE:
                assert matches(seed, step.decoded.record)
                indices.append(index_of(step.decoded.record))
            else:
                assert step.decoded.kind is Kind.BLANK, step.decoded.reason
        # CommitLog order is write order, with no gap and no duplicate.
        assert indices == list(range(len(indices)))
        present = len(indices)
        assert acked <= present <= attempted
        # Every queue serves exactly its share, consecutive offsets, each record intact.
        assert served_messages(reader, seed) == present
    return present


def kill_and_recover(tmp_path: Path, *, count: int, batch: int, flush_type: str, seed: int):
    print("seed", seed)
    rng = random.Random(seed)
    store = tmp_path / "store"
    child = Child(store, seed, count, batch, flush_type)
    target = rng.randrange(batch, count - batch)
    child.wait_for_acked(target, timeout_s=600)
    acked = child.kill()
    assert not child.closed and child.failed is None
    cfg = config(flush_type)
    assert (store / "abort").exists()
    # Read-only view of the crashed store first, then recovery in place.
    present = check_store_after_crash(store, seed, acked, count, cfg)
    report = recover_store(store, cfg, mark_clean=True)
    assert not (store / "abort").exists()
    assert check_store_after_crash(store, seed, acked, count, cfg) == present
    # The writer continues after the last surviving message; the store then holds everything once.
    with MessageStoreWriter(store, cfg) as writer:
        for start in range(present, count, 1000):
            results = writer.put_messages([make_message(seed, i) for i in range(start, min(count, start + 1000))])
            assert all(r.ok for r in results)
    assert check_store_after_crash(store, seed, count, count, cfg) == count
    return report


@pytest.mark.parametrize("flush_type", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_kill_9_mid_write_then_recover(tmp_path, flush_type):
    kill_and_recover(tmp_path, count=20_000, batch=250, flush_type=flush_type, seed=random.randrange(1 << 30))


@pytest.mark.slow
def test_kill_9_one_million_messages(tmp_path):
    kill_and_recover(tmp_path, count=1_000_000, batch=2000, flush_type="SYNC_FLUSH",
                     seed=random.randrange(1 << 30))


def test_reader_in_another_process_never_sees_torn_or_undispatched(tmp_path):
    seed = random.randrange(1 << 30)
    print("seed", seed)
    store = tmp_path / "store"
    cfg = config("ASYNC_FLUSH")
    child = Child(store, seed, 30_000, 100, "ASYNC_FLUSH", pause_s=0.002)
    child.wait_for_acked(100, timeout_s=120)
    observations = 0
    last_seen = 0
    for _ in range(10_000):
        if child.closed or child.proc.poll() is not None:
            break
        with MessageStoreReader(store, cfg) as reader:
            live = reader.live
            seen = served_messages(reader, seed)
            end = reader.commit_log_max_offset
            for step in reader.commitlog.walk(reader.commitlog.min_offset, stop_offset=end):
                assert step.decoded.kind in (Kind.MESSAGE, Kind.BLANK), step.decoded.reason
        if live:
            observations += 1
            assert seen >= last_seen
            last_seen = seen
    child.wait()
    assert observations >= 3, "the reader never overlapped the writer"
    assert check_store_after_crash(store, seed, 30_000, 30_000, cfg) == 30_000


# -- a killed writer's acknowledged topics are routed ----------------------------------------------

ROUTED_TOPICS, ROUTED_QUEUES = 3, 5


def new_topic_lines(count: int, body_bytes: int) -> list[bytes]:
    """inputs.jsonl lines of topics Routed0.. with queue ids 0..ROUTED_QUEUES-1 (every pair once in 15 lines)."""
    body = base64.b64encode(bytes(body_bytes)).decode()
    return [json.dumps({"topic": f"Routed{i % ROUTED_TOPICS}", "queueId": i % ROUTED_QUEUES, "body": body}).encode()
            + b"\n" for i in range(count)]


def read_until(proc: subprocess.Popen, done) -> None:
    """Lines of the child's stdout until ``done(line)`` (a watchdog kills a child that stops answering)."""
    watchdog = threading.Timer(120, proc.kill)
    watchdog.start()
    try:
        for line in proc.stdout:
            if done(json.loads(line)):
                return
        raise AssertionError(f"the writer ended ({proc.wait()}): {proc.stderr.read()[-3000:]!r}")
    finally:
        watchdog.cancel()


def rmq_put_killed_after_a_block(store: Path) -> int:
    """``rmq put --json`` (SYNC_FLUSH) fed a first block of lines and part of the next one: SIGKILLed once it
    acknowledged the block, waiting for the rest of its stdin. Returns the dataVersion counter expected."""
    lines = new_topic_lines(66, 3 << 18)                    # 1 MiB of base64 each: the block reads 64 of them
    in_block = sum(1 for end in itertools.accumulate(map(len, lines)) if end <= PUT_BLOCK_BYTES)
    assert ROUTED_TOPICS * ROUTED_QUEUES <= in_block < len(lines)
    proc = subprocess.Popen([sys.executable, "-m", "rmqsource", "put", str(store), "--json",
                             "-C", "flushDiskType=SYNC_FLUSH"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdin.write(b"".join(lines))
    proc.stdin.flush()
    acked = []
    read_until(proc, lambda r: acked.append(r["status"]) or len(acked) == in_block)
    assert set(acked) == {"PUT_OK"}
    proc.kill()
    proc.wait(30)
    return 1                                                # one put call routed them all


def jvm_put_killed_after_its_puts(store: Path, inputs: Path, durable_by: str) -> int:
    """The JVM writer's puts in batches of 4, each made durable by its SYNC_FLUSH put call or by a flush after
    it (a sink's commit), SIGKILLed once it printed their results. Returns the dataVersion counter expected."""
    lines = new_topic_lines(ROUTED_TOPICS * ROUTED_QUEUES, 100)
    inputs.write_bytes(b"".join(lines))
    flush_type = "SYNC_FLUSH" if durable_by == "SYNC_FLUSH" else "ASYNC_FLUSH"
    proc = subprocess.Popen(put_command(store, "-", inputs, batch=4, overrides=[f"flushDiskType={flush_type}"],
                                        flush=durable_by == "flush", hold=True),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    acked = []
    read_until(proc, lambda r: "maxPhyOffset" in r or acked.append(r["status"]))
    assert acked == ["PUT_OK"] * len(lines)
    proc.kill()
    proc.wait(30)
    return -(-len(lines) // 4)                              # each batch routed its new queues


@pytest.mark.parametrize("writer, durable_by", [("python", "SYNC_FLUSH"), ("jvm", "SYNC_FLUSH"), ("jvm", "flush")])
def test_a_killed_writer_leaves_its_acknowledged_topics_routed(tmp_path, writer, durable_by):
    """A broker started on the store serves the acknowledged messages of new topics: their routes (every topic,
    its queue count) are in config/topics.json although the writer never shut down."""
    store = tmp_path / "store"
    if writer == "python":
        counter = rmq_put_killed_after_a_block(store)
    else:
        counter = jvm_put_killed_after_its_puts(store, tmp_path / "inputs.jsonl", durable_by)
    assert (store / "abort").exists()                       # killed: no clean shutdown
    doc = loads_fastjson((store / "config" / "topics.json").read_text())
    routes = {t: (e["readQueueNums"], e["writeQueueNums"]) for t, e in doc["topicConfigTable"].items()}
    assert routes == {f"Routed{i}": (ROUTED_QUEUES, ROUTED_QUEUES) for i in range(ROUTED_TOPICS)}
    assert doc["dataVersion"]["counter"] == counter
