"""The JVM store writer (io.rmqsource.store.write) against the real engine's corpora and the Python writer.

Run through its entry point WriteMain as a subprocess (tests/jvm_writer.py):

* every golden corpus (../shared/golden): putting inputs.jsonl with store.properties gives CommitLog
  segments and ConsumeQueue files byte-identical with the engine's store/, IndexFile contents identical
  in name order, and per-message results equal to expected/put.jsonl -- with putAll batches, single
  puts and odd batch sizes, and across a reopen;
* every crash case: the JVM writer opening a copy (recovery), putting a few messages and closing gives
  the same files as the Python writer doing the same on another copy with the same clock;
* the {root}/lock protocol between Python and JVM writers, and the two alternating on one store;
* an injected full disk: typed error naming the file, nothing acknowledged that was not written, and
  the store recovers on the next open.
"""

from __future__ import annotations

import base64
import json
import os
import struct
from pathlib import Path

import pytest

from rmqsource.errors import StoreLockedError
from rmqsource.store.config import StoreConfig
from rmqsource.store.reader import MessageStoreReader
from rmqsource.store.verify import verify_store
from rmqsource.store.writer import MessageExtBrokerInner, MessageStoreWriter

from golden import (ENGINE_ONLY, GOLDEN_ROOT, copy_store, corpus_of, crash_cases, default_layout_corpora, index_file_contents,
                    is_dledger, tree_bytes, writable, writable_names)
from jvm_writer import JvmLockHolder, jvm_scan
from jvm_writer import jvm_put as _jvm_put
from test_writer_golden import PUT_FIELDS, assert_same_store


def jvm_put(*args, overrides=(), **kwargs):
    """The JVM writer as the golden corpora's engine wrote them: no broker put hook (golden.ENGINE_ONLY)."""
    return _jvm_put(*args, overrides=["brokerPutHooks=false", *overrides], **kwargs)

pytestmark = pytest.mark.golden

CORPORA = writable_names()
DEFAULT = [p.name for p in default_layout_corpora()]      # for tests that take one corpus
CLOCK_MS = 1_800_000_000_000


def _expected(corpus: str) -> tuple[list[dict], dict]:
    lines = [json.loads(x) for x in (GOLDEN_ROOT / corpus / "expected" / "put.jsonl").read_text().splitlines()]
    return lines[:-1], lines[-1]


def _assert_results(results: list[dict], corpus: str) -> None:
    expected, summary = _expected(corpus)
    assert len(results) == len(expected) == summary["done"]
    for got, exp in zip(results, expected):
        assert {k: got[k] for k in PUT_FIELDS} == {k: exp[k] for k in PUT_FIELDS}, f"put #{exp['i']}"


@pytest.fixture(scope="module", params=CORPORA)
def written(request, tmp_path_factory):
    corpus = request.param
    root = tmp_path_factory.mktemp(corpus) / "store"
    results, trailer, _ = jvm_put(root, GOLDEN_ROOT / corpus / "store.properties",
                                  GOLDEN_ROOT / corpus / "inputs.jsonl")
    return corpus, root, results, trailer


def test_corpora_discovered():
    assert CORPORA, f"no golden corpora under {GOLDEN_ROOT}"


def test_put_results_match(written):
    corpus, _, results, _ = written
    _assert_results(results, corpus)


def test_store_bytes_match(written):
    corpus, root, _, _ = written
    assert_same_store(GOLDEN_ROOT / corpus / "store", root)


def test_clean_shutdown_state(written):
    corpus, root, results, trailer = written
    _, summary = _expected(corpus)
    assert not (root / "abort").exists()
    assert trailer["maxPhyOffset"] == summary["commitLogMaxOffset"]
    assert max(r["commitLogOffset"] + r["size"] for r in results) == summary["commitLogMaxOffset"]
    assert sorted(os.listdir(root / "commitlog")) == sorted(os.listdir(GOLDEN_ROOT / corpus / "store" / "commitlog"))
    names = sorted(os.listdir(root / "index"))
    assert all(len(n) == 17 and n.isdigit() for n in names) and len(set(names)) == len(names)


def test_checkpoint_logics_and_index_timestamps(written):
    corpus, root, results, _ = written
    got = struct.unpack(">qqq", (root / "checkpoint").read_bytes()[:24])
    exp = struct.unpack(">qqq", (GOLDEN_ROOT / corpus / "store" / "checkpoint").read_bytes()[:24])
    assert (root / "checkpoint").stat().st_size == 4096
    assert got[1:] == exp[1:]
    assert got[0] == max(r["storeTimestamp"] for r in results)


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("batch", [0, 37], ids=["single-puts", "batches-of-37"])
def test_single_puts_and_odd_batches_give_same_bytes(tmp_path, corpus, batch):
    root = tmp_path / "store"
    results, _, _ = jvm_put(root, GOLDEN_ROOT / corpus / "store.properties", GOLDEN_ROOT / corpus / "inputs.jsonl",
                            batch=batch)
    _assert_results(results, corpus)
    assert_same_store(GOLDEN_ROOT / corpus / "store", root)


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("batch,memory", [(8192, 64 << 20), (37, 0)], ids=["in-memory", "spilled-batches-of-37"])
def test_staged_puts_give_same_bytes(tmp_path, corpus, batch, memory):
    """Messages checked and encoded ahead (StagedPuts), then put by putStaged (copy, position fields,
    dispatch): the engine's results and bytes, from memory and from the spill file."""
    root = tmp_path / "store"
    results, _, _ = jvm_put(root, GOLDEN_ROOT / corpus / "store.properties", GOLDEN_ROOT / corpus / "inputs.jsonl",
                            batch=batch, staged=memory)
    _assert_results(results, corpus)
    assert_same_store(GOLDEN_ROOT / corpus / "store", root)


def test_sync_flush_gives_same_bytes(tmp_path):
    corpus = DEFAULT[0]
    root = tmp_path / "store"
    results, _, _ = jvm_put(root, GOLDEN_ROOT / corpus / "store.properties", GOLDEN_ROOT / corpus / "inputs.jsonl",
                            batch=50, overrides=["flushDiskType=SYNC_FLUSH"])
    _assert_results(results, corpus)
    assert_same_store(GOLDEN_ROOT / corpus / "store", root)


@pytest.mark.parametrize("corpus", CORPORA)
def test_reopen_and_append_gives_same_bytes(tmp_path, corpus):
    """Close after a part, reopen (recovery, queue offsets, index state from disk), put the rest."""
    root = tmp_path / "store"
    config, inputs = GOLDEN_ROOT / corpus / "store.properties", GOLDEN_ROOT / corpus / "inputs.jsonl"
    n = sum(1 for line in inputs.read_text().splitlines() if line.strip())
    cut = n * 2 // 5
    first, _, _ = jvm_put(root, config, inputs, lines=(0, cut))
    rest, _, _ = jvm_put(root, config, inputs, lines=(cut, n))
    _assert_results(first + rest, corpus)
    assert_same_store(GOLDEN_ROOT / corpus / "store", root)


def test_python_then_jvm_gives_same_bytes(tmp_path):
    """The Python writer puts the first part, the JVM writer opens its store and puts the rest."""
    corpus = DEFAULT[-1]
    root = tmp_path / "store"
    config, inputs = GOLDEN_ROOT / corpus / "store.properties", GOLDEN_ROOT / corpus / "inputs.jsonl"
    lines = [line for line in inputs.read_text().splitlines() if line.strip()]
    cut = len(lines) // 3
    with MessageStoreWriter(root, StoreConfig.from_properties_file(config, ENGINE_ONLY)) as w:
        first = [r.to_json_dict() for r in
                 w.put_messages([MessageExtBrokerInner.from_json_dict(json.loads(x)) for x in lines[:cut]])]
    rest, _, _ = jvm_put(root, config, inputs, lines=(cut, len(lines)))
    _assert_results(first + rest, corpus)
    assert_same_store(GOLDEN_ROOT / corpus / "store", root)


# ---------------------------------------------------------------------------------------------- recovery

def _after_crash_inputs(corpus: Path, path: Path, count: int) -> Path:
    """A few messages to put after recovery: the corpus's last ones, some on the writer's clock."""
    lines = [json.loads(x) for x in (corpus / "inputs.jsonl").read_text().splitlines() if x.strip()]
    lines = lines[len(lines) - count:]
    for i, d in enumerate(lines):
        if i % 2:
            d.pop("storeTimestamp", None)
    path.write_text("".join(json.dumps(d) + "\n" for d in lines))
    return path


def _store_files(root: Path) -> dict:
    out = tree_bytes(root / "commitlog")
    out.update({f"cq/{k}": v for k, v in tree_bytes(root / "consumequeue").items()})
    out.update({f"index#{i}": v for i, v in enumerate(index_file_contents(root / "index"))})
    out["checkpoint"] = (root / "checkpoint").read_bytes()
    out["abort"] = (root / "abort").exists()
    return out


@pytest.mark.crash
@pytest.mark.parametrize("count", [0, 6], ids=["open-close", "6-puts"])
@pytest.mark.parametrize("case", writable(crash_cases()))
def test_recovery_matches_python_writer(tmp_path, case, count):
    corpus = corpus_of(case)
    assert not is_dledger(case)
    config_path = corpus / "store.properties"
    inputs = _after_crash_inputs(corpus, tmp_path / "after.jsonl", count)
    py_root = copy_store(case / "store", tmp_path / "py")
    jvm_root = copy_store(case / "store", tmp_path / "jvm")
    msgs = [MessageExtBrokerInner.from_json_dict(json.loads(x)) for x in inputs.read_text().splitlines() if x]
    with MessageStoreWriter(py_root, StoreConfig.from_properties_file(config_path, ENGINE_ONLY), clock_ms=lambda: CLOCK_MS) as w:
        py_results = [r.to_json_dict() for r in w.put_messages(msgs)]
    jvm_results, _, _ = jvm_put(jvm_root, config_path, inputs, clock_ms=CLOCK_MS)
    assert [{k: r[k] for k in PUT_FIELDS} for r in jvm_results] == [{k: r[k] for k in PUT_FIELDS} for r in py_results]
    py_files, jvm_files = _store_files(py_root), _store_files(jvm_root)
    assert sorted(jvm_files) == sorted(py_files)
    for name in py_files:
        assert jvm_files[name] == py_files[name], f"{name} differs after recovery + puts"


# ---------------------------------------------------------------------------------------------- lock

def test_jvm_writer_lock_excludes_python_writer(tmp_path):
    root = tmp_path / "store"
    root.mkdir()
    with JvmLockHolder(root) as holder:
        assert holder.locked, holder.release()
        with pytest.raises(StoreLockedError, match=str(root / "lock")):
            MessageStoreWriter(root, StoreConfig(), lock_timeout_s=0)
        out = holder.release()
    assert "closed" in out
    with MessageStoreWriter(root, StoreConfig(), lock_timeout_s=0):
        pass


def test_python_writer_lock_excludes_jvm_writer(tmp_path):
    root = tmp_path / "store"
    with MessageStoreWriter(root, StoreConfig()):
        with JvmLockHolder(root) as holder:
            out = holder.release()
        assert not holder.locked
        assert "StoreLockedError" in out and str(root / "lock") in out
        assert holder.proc.returncode == 1
    with JvmLockHolder(root) as holder:
        assert holder.locked, holder.release()


def _message_dicts(seed: int, n: int) -> list[dict]:
    import random
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        body = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 600)))
        d = {"topic": rnd.choice(["AltA", "AltB", "Alt_C"]), "queueId": rnd.randrange(3),
             "body": base64.b64encode(body).decode(), "tags": rnd.choice(["t1", "t2", "", "标签"]),
             "keys": f"k{seed}-{i} shared", "properties": {"UNIQ_KEY": f"{seed:08X}{i:024X}", "p": str(i)},
             "bornTimestamp": 1_700_000_000_000 + i, "bornHost": "192.168.1.9:4000",
             "storeHost": "10.0.0.5:10911", "storeTimestamp": 1_700_000_100_000 + seed * 10_000 + i}
        if i % 17 == 0:
            d["sysFlag"] = 4          # PREPARED: in the CommitLog, not in a ConsumeQueue
        out.append(d)
    return out


def test_python_and_jvm_writers_alternate(tmp_path):
    """Rounds of puts alternating between the two writers on one store with small segments (rolls in
    every round): rmq verify finds it clean and every message reads back as put."""
    root = tmp_path / "store"
    overrides = {"mappedFileSizeCommitLog": "65536", "mappedFileSizeConsumeQueue": "400",
                 "maxHashSlotNum": "64", "maxIndexNum": "256"}
    config = StoreConfig().with_overrides(overrides)
    put: list[dict] = []
    for rnd in range(6):
        msgs = _message_dicts(rnd, 150)
        if rnd % 2 == 0:
            with MessageStoreWriter(root, config) as w:
                results = [r.to_json_dict() for r in
                           w.put_messages([MessageExtBrokerInner.from_json_dict(d) for d in msgs])]
        else:
            path = tmp_path / f"round{rnd}.jsonl"
            path.write_text("".join(json.dumps(d) + "\n" for d in msgs))
            results, _, _ = jvm_put(root, "-", path, batch=64, overrides=[f"{k}={v}" for k, v in overrides.items()])
        assert all(r["status"] == "PUT_OK" for r in results)
        put.extend(msgs)
    assert len(os.listdir(root / "commitlog")) > 6
    report = verify_store(root, config)
    assert report.ok, [p for p in report.problems][:5]
    import subprocess
    import sys
    for engine in ("jvm", "python"):                    # `rmq verify`, both walks
        cli = subprocess.run([sys.executable, "-m", "rmqsource", "verify", str(root), "--engine", engine,
                              *[a for k, v in overrides.items() for a in ("-C", f"{k}={v}")]],
                             capture_output=True, text=True, timeout=300)
        assert cli.returncode == 0, (engine, cli.stdout[-2000:], cli.stderr[-2000:])
    with MessageStoreReader(root, config) as reader:
        stored = [s.decoded.record for s in reader.commitlog.walk(reader.commitlog.min_offset)
                  if s.decoded.record is not None]
    assert len(stored) == len(put)
    for rec, d in zip(stored, put):
        assert (rec.topic, rec.queue_id, rec.body) == (d["topic"], d["queueId"], base64.b64decode(d["body"]))
        props = rec.properties
        assert props.get("UNIQ_KEY") == d["properties"]["UNIQ_KEY"] and props.get("KEYS") == d["keys"]
        assert props.get("TAGS") == (d["tags"] or None)


# ---------------------------------------------------------------------------------------------- full disk

@pytest.mark.parametrize("staged,batch,chunk_bytes", [(None, 100, None), (0, 100, None), (None, 10**6, 4096),
                                                     (0, 10**6, 4096)],
                         ids=["putAll", "staged", "putAll-chunks-in-flight", "staged-chunks-in-flight"])
def test_full_disk_acknowledges_only_written_and_recovers(tmp_path, staged, batch, chunk_bytes):
    """Also with one batch of small CommitLog writes: several are in flight when the disk fills, and
    none after the failed one is written or acknowledged."""
    corpus = DEFAULT[0]
    config, inputs = GOLDEN_ROOT / corpus / "store.properties", GOLDEN_ROOT / corpus / "inputs.jsonl"
    root = tmp_path / "store"
    results, trailer, rc = jvm_put(root, config, inputs, batch=batch, fail_after_bytes=300_000, check=False,
                                   staged=staged, chunk_bytes=chunk_bytes)
    assert rc == 1
    assert trailer["error"]["type"] == "WriteFailedError"
    assert "commitlog/0000" in trailer["error"]["message"] and "No space left" in trailer["error"]["message"]
    ok = [r for r in results if r["status"] == "PUT_OK"]
    assert 0 < len(ok) < len(results)
    # Acknowledged puts are a prefix, and their bytes are the engine's.
    assert all(r["status"] == "PUT_OK" for r in results[:len(ok)])
    assert results[len(ok)]["status"] == "UNKNOWN_ERROR"
    _assert_prefix_matches(results[:len(ok)], corpus)
    # Every acknowledged record is on disk as acknowledged (read before any recovery).
    seg_size = StoreConfig.from_properties_file(config, ENGINE_ONLY).mapped_file_size_commit_log_bytes
    for r in ok:
        start = r["commitLogOffset"] - r["commitLogOffset"] % seg_size
        with open(root / "commitlog" / f"{start:020d}", "rb") as f:
            f.seek(r["commitLogOffset"] - start)
            total, magic = struct.unpack(">iI", f.read(8))
        assert (total, magic) == (r["size"], 0xDAA320A7), f"acknowledged record at {r['commitLogOffset']} is not there"
    assert (root / "abort").exists()          # the clean shutdown failed on the full disk too
    # The next open recovers; the rest of the inputs then gives the engine's CommitLog and ConsumeQueues.
    # (IndexFiles newer than the checkpoint were deleted and rebuilt: the record at the kept file's end is
    # not indexed twice, as recovery.py does, so their bytes need not be the engine's; verify checks them.)
    rest, _, _ = jvm_put(root, config, inputs, lines=(len(ok), 10**9))
    _assert_results(results[:len(ok)] + rest, corpus)
    golden = GOLDEN_ROOT / corpus / "store"
    assert tree_bytes(root / "commitlog") == tree_bytes(golden / "commitlog")
    assert tree_bytes(root / "consumequeue") == tree_bytes(golden / "consumequeue")
    report = verify_store(root, StoreConfig.from_properties_file(config, ENGINE_ONLY))
    assert report.ok, report.problems[:5]


def _assert_prefix_matches(results: list[dict], corpus: str) -> None:
    expected, _ = _expected(corpus)
    for got, exp in zip(results, expected):
        assert {k: got[k] for k in PUT_FIELDS} == {k: exp[k] for k in PUT_FIELDS}, f"put #{exp['i']}"


def test_crash_mid_batch_recovers_to_acknowledged_prefix(tmp_path):
    """A writer let go without a clean shutdown (abort stays): the next open recovers, and the store
    then matches the engine's after the rest is put."""
    corpus = DEFAULT[-1]
    config, inputs = GOLDEN_ROOT / corpus / "store.properties", GOLDEN_ROOT / corpus / "inputs.jsonl"
    root = tmp_path / "store"
    first, _, _ = jvm_put(root, config, inputs, lines=(0, 250), abandon=True)
    assert (root / "abort").exists()
    rest, _, _ = jvm_put(root, config, inputs, lines=(250, 10**9))
    _assert_results(first + rest, corpus)
    assert_same_store(GOLDEN_ROOT / corpus / "store", root)


def test_scan_finds_records_by_property(tmp_path):
    """MessageStoreWriter.scan: from an offset, the records carrying the asked properties, with their values."""
    root = tmp_path / "store"
    msgs = _message_dicts(3, 120)
    for i, d in enumerate(msgs):
        if i % 3 == 0:
            d["properties"]["__RMQSOURCE_BATCH"] = f"b{i // 30}"
            d["properties"]["__RMQSOURCE_SEQ"] = str(i)
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in msgs))
    overrides = ["mappedFileSizeCommitLog=16384"]
    results, _, _ = jvm_put(root, "-", path, batch=50, overrides=overrides)
    config = tmp_path / "store.properties"
    config.write_text("mappedFileSizeCommitLog=16384\n")
    tagged = [(r, d) for r, d in zip(results, msgs) if "__RMQSOURCE_SEQ" in d["properties"]]
    found = jvm_scan(root, config, 0, "__RMQSOURCE_BATCH", "__RMQSOURCE_SEQ")
    assert [f["commitLogOffset"] for f in found] == [r["commitLogOffset"] for r, _ in tagged]
    assert [f["properties"] for f in found] == [
        {"__RMQSOURCE_BATCH": d["properties"]["__RMQSOURCE_BATCH"], "__RMQSOURCE_SEQ": d["properties"]["__RMQSOURCE_SEQ"]}
        for _, d in tagged]
    assert [(f["topic"], f["queueId"], f["queueOffset"]) for f in found] == [
        (r["topic"], r["queueId"], r["queueOffset"]) for r, _ in tagged]
    middle = results[60]["commitLogOffset"]
    later = jvm_scan(root, config, middle, "__RMQSOURCE_SEQ")
    assert [f["commitLogOffset"] for f in later] == [r["commitLogOffset"] for r, _ in tagged
                                                     if r["commitLogOffset"] >= middle]
    assert len(os.listdir(root / "commitlog")) > 2          # the scan crossed segment ends


# ---------------------------------------------------------------------------------------------- differential

def _hostile_dicts(seed: int, n: int) -> list[dict]:
    """Messages the checks must refuse or store in their special ways: IPv6 hosts, long topics (magic
    v2 on 5.x), bad topics and hosts, separators and lone surrogates in strings, DELAY on 4.9,
    verbatim property strings with and without __CRC32#, TAGS/KEYS inside the map, transactions."""
    import random
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        d = {"topic": rnd.choice(["DiffT"] * 6 + ["Diff_T2", "x" * 130, "y" * 300, "bad topic", "", "%RETRY%g"]),
             "queueId": rnd.choice([0, 1, 5, 0, 1, -1]), "body": base64.b64encode(bytes(rnd.randrange(256) for _ in
                                                                            range(rnd.randrange(0, 300)))).decode(),
             "bornTimestamp": 1_700_000_000_000 + i, "storeTimestamp": 1_700_000_200_000 + i,
             "bornHost": rnd.choice(["10.1.2.3:7"] * 6 + ["[2001:db8::1]:9876", "[::ffff:1.2.3.4]:1", "1.2.3:4",
                                                          "10.0.0.1:70000", "01.2.3.4:5"]),
             "storeHost": rnd.choice(["10.0.0.5:10911", "[fe80::1:2]:10911"]),
             "sysFlag": rnd.choice([0, 0, 0, 4, 8, 12, 1]), "flag": rnd.choice([0, -5, 2**31 - 1])}
        kind = rnd.randrange(8)
        if kind == 0:
            d["propertiesString"] = rnd.choice(["TAGS\x01a\x02KEYS\x01k1 k2\x02", "__CRC32#\x011234\x02UNIQ_KEY\x01u1",
                                                "DELAY\x013\x02TAGS\x01t", "\x01\x02\x02x\x01", "UNIQ_KEY\x01\x02"])
        else:
            d["tags"] = rnd.choice([None, "", "T1", "T1", "标签", "a\x02b", "\ud800x", "TAG" * 50])
            d["keys"] = rnd.choice([None, "", "k1", "k1", " k1  k2 ", "k\x01x", "ключ"])
            props = {}
            for _ in range(rnd.randrange(3)):
                props[rnd.choice(["UNIQ_KEY", "p", "TAGS", "KEYS", "DELAY", "__CRC32#", "q\x02"])] = \
                    rnd.choice(["v", "", "2", "30", "-1", "x\x01y", "ü", "z" * 40])
            if kind == 1:
                props["big"] = "b" * 33000
            d["properties"] = props
        out.append(d)
    return out


@pytest.mark.parametrize("staged", [None, 0], ids=["putAll", "staged"])
@pytest.mark.parametrize("corpus", DEFAULT)
def test_hostile_messages_same_results_and_bytes_as_python(tmp_path, corpus, staged):
    """Both writers, one config, the same hostile batch: the same statuses, offsets and store bytes."""
    config_path = GOLDEN_ROOT / corpus / "store.properties"
    config = StoreConfig.from_properties_file(config_path, ENGINE_ONLY)
    msgs = _hostile_dicts(11, 400)
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in msgs))
    py_root, jvm_root = tmp_path / "py", tmp_path / "jvm"
    py_msgs = []
    for d in msgs:
        try:
            py_msgs.append(MessageExtBrokerInner.from_json_dict(d))
        except Exception:                               # noqa: BLE001 - refused at construction in Python
            py_msgs.append(None)
    with MessageStoreWriter(py_root, config, clock_ms=lambda: CLOCK_MS) as w:
        it = iter(w.put_messages([m for m in py_msgs if m is not None]))
        py_results = [next(it).to_json_dict() if m is not None else None for m in py_msgs]
    jvm_results, _, _ = jvm_put(jvm_root, config_path, path, batch=64, clock_ms=CLOCK_MS, staged=staged)
    assert len(jvm_results) == len(msgs)
    statuses = set()
    for i, (j, p) in enumerate(zip(jvm_results, py_results)):
        if p is None:      # Python refuses the object itself (a verbatim string with tags/keys): JVM refuses the put
            assert j["status"] == "MESSAGE_ILLEGAL", (i, msgs[i], j)
            continue
        fields = PUT_FIELDS if p["status"] == "PUT_OK" else ("status", "topic", "queueId")
        assert {k: j[k] for k in fields} == {k: p[k] for k in fields}, (i, msgs[i], j.get("reason"))
        statuses.add(p["status"])
    assert {"PUT_OK", "MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED"} <= statuses
    ok = [j for j in jvm_results if j["status"] == "PUT_OK"]
    assert len(ok) > 40 and any(r["topic"] == "SCHEDULE_TOPIC_XXXX" for r in ok) == (corpus.startswith("rmq4"))
    assert any(len(r["msgId"]) == 56 for r in ok)          # an IPv6 store host
    assert _store_files(jvm_root) == _store_files(py_root)


def _trailing_cases() -> list[tuple[dict, list, int]]:
    """(message dict, trailing name/value pairs, number): stamps as the sinks add them, and the edges of
    the copied fast path (digit counts, negatives, user properties before or of the same name) and of
    its fall-backs (non-ASCII, a separator, names the engine reads)."""
    stamps = ["__RMQSOURCE_BATCH", "q-1:7", "__RMQSOURCE_SEQ", "3:"]
    numbers = [0, 9, 10, 99, 100, 12345, 10**18 - 1, 10**18, 2**63 - 1, -1, -10, -(2**63)]
    cases = [({}, stamps, n) for n in numbers]
    body = base64.b64encode(b"trailing").decode()
    cases += [
        ({"properties": {"a": "1", "b": "2"}}, stamps, 41),
        ({"tags": "TagA", "keys": "k1 k2", "properties": {"UNIQ_KEY": "AC1100"}}, stamps, 42),
        ({"properties": {"__RMQSOURCE_SEQ": "user's", "z": "after"}}, stamps, 43),       # keeps its place
        ({"properties": {"__RMQSOURCE_BATCH": None}}, stamps, 44),
        ({}, ["__RMQSOURCE_BATCH", "q-ü:7", "__RMQSOURCE_SEQ", "3:"], 45),                 # not ASCII
        ({}, ["__RMQSOURCE_BATCH", "q\x01:7", "__RMQSOURCE_SEQ", "3:"], 46),              # a separator: refused
        ({}, ["UNIQ_KEY", "U", "__RMQSOURCE_SEQ", "3:"], 47),                              # dispatch reads it
        ({"tags": "T"}, ["DELAY", "2", "__RMQSOURCE_SEQ", "3:"], 48),                      # 4.9 rewrites the topic
        ({"properties": {"x": "ü"}}, stamps, 49),
    ]
    out = []
    for i, (extra, pairs, n) in enumerate(cases):
        d = {"topic": f"Trail{i % 3}", "queueId": i % 2, "body": body, "bornTimestamp": 1_700_000_000_000 + i,
             "storeTimestamp": 1_700_000_000_500 + i, **extra}
        out.append((d, pairs, n))
    return out


@pytest.mark.parametrize("staged", [None, 0], ids=["putAll", "staged"])
@pytest.mark.parametrize("corpus", DEFAULT)
def test_trailing_properties_give_the_bytes_of_the_same_properties_put_in_the_map(tmp_path, corpus, staged):
    """A sink's stamps (TrailingProperties, serialized once and copied per message) against the reference:
    the Python writer given the same stamps at the end of each message's properties map. Same statuses,
    offsets and store bytes, under each corpus's config (trailing separator, CRC property)."""
    config_path = GOLDEN_ROOT / corpus / "store.properties"
    config = StoreConfig.from_properties_file(config_path, ENGINE_ONLY)
    cases = _trailing_cases()
    jvm_lines, py_msgs = [], []
    for d, pairs, n in cases:
        jvm_lines.append(dict(d, trailing=pairs, trailingNumber=n))
        props = dict(d.get("properties") or {})
        for k in range(0, len(pairs) - 2, 2):
            props[pairs[k]] = pairs[k + 1]
        props[pairs[-2]] = pairs[-1] + str(n)
        py_msgs.append(MessageExtBrokerInner.from_json_dict(dict(d, properties=props)))
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in jvm_lines))
    py_root, jvm_root = tmp_path / "py", tmp_path / "jvm"
    with MessageStoreWriter(py_root, config, clock_ms=lambda: CLOCK_MS) as w:
        py_results = [r.to_json_dict() for r in w.put_messages(py_msgs)]
    jvm_results, _, _ = jvm_put(jvm_root, config_path, path, batch=8, clock_ms=CLOCK_MS, staged=staged)
    assert len(jvm_results) == len(cases)
    for i, (j, p) in enumerate(zip(jvm_results, py_results)):
        fields = PUT_FIELDS if p["status"] == "PUT_OK" else ("status", "topic", "queueId")
        assert {k: j[k] for k in fields} == {k: p[k] for k in fields}, (i, cases[i], j.get("reason"))
    assert [p["status"] for p in py_results].count("PUT_OK") == len(cases) - 1      # the separator is refused
    assert _store_files(jvm_root) == _store_files(py_root)


# ---------------------------------------------------------------------------------------------- refusals

def test_store_held_by_a_broker_is_refused(tmp_path):
    """A process locking only byte 0 of {root}/lock (what a broker's FileChannel.tryLock(0, 1, false) does)."""
    import subprocess
    import sys
    root = tmp_path / "store"
    root.mkdir()
    child = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys\n"
        f"fd = os.open({str(root / 'lock')!r}, os.O_RDWR | os.O_CREAT, 0o644)\n"
        "fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "locked"
        with JvmLockHolder(root) as holder:
            out = holder.release()
        assert not holder.locked
        assert "StoreLockedError" in out and f"process {child.pid}" in out and "rmqsource writer" not in out
    finally:
        child.communicate("", timeout=30)
    with JvmLockHolder(root) as holder:
        assert holder.locked, holder.release()


@pytest.mark.parametrize("corpus", [p for p in __import__("golden").dledger_corpora()], ids=lambda p: p.name)
def test_dledger_store_is_refused(tmp_path, corpus):
    root = copy_store(corpus / "store", tmp_path / "store")
    before = tree_bytes(root)
    results, trailer, rc = jvm_put(root, corpus / "store.properties", corpus / "inputs.jsonl", check=False)
    assert rc == 1 and not results
    assert trailer["error"]["type"] == "UnsupportedLayoutError" and "DLedger" in trailer["error"]["message"]
    assert tree_bytes(root) == before


@pytest.mark.crash
def test_full_filesystem_is_a_typed_error_not_a_crash(small_tmpfs, tmp_path):
    """A file system that really fills while the JVM writer appends (default IndexFile geometry: a
    420 MB sparse map on a 40 MB tmpfs): a typed error naming a file, never a JVM crash; every
    acknowledged message is on disk and the store reopens once space is freed."""
    store = small_tmpfs / "store"
    filler = small_tmpfs / "filler"
    st = os.statvfs(small_tmpfs)
    with open(filler, "wb") as f:                        # leave 24 MB
        f.write(bytes(max(st.f_bavail * st.f_frsize - (24 << 20), 0)))
    msgs = [{"topic": "FullDisk", "queueId": i % 4, "body": base64.b64encode(bytes([i % 251]) * 1000).decode(),
             "keys": f"full-{i}", "properties": {"UNIQ_KEY": f"U{i:020d}"}} for i in range(40_000)]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in msgs))
    overrides = ["mappedFileSizeCommitLog=8388608"]
    results, trailer, rc = jvm_put(store, "-", path, batch=500, overrides=overrides, check=False)
    assert rc == 1, (rc, trailer)
    assert trailer["error"]["type"] in ("WriteFailedError", "StoreError"), trailer
    assert str(small_tmpfs) in trailer["error"]["message"], trailer
    assert not list(Path.cwd().glob("hs_err_pid*.log"))
    acked = [(i, r) for i, r in enumerate(results) if r["status"] == "PUT_OK"]
    assert acked and len(acked) < len(msgs)
    assert [i for i, _ in acked] == list(range(len(acked)))          # a prefix
    filler.unlink()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    jvm_put(store, "-", empty, overrides=overrides)          # reopen: recovery, clean close
    config = StoreConfig().with_overrides({"mappedFileSizeCommitLog": "8388608"})
    with MessageStoreReader(store, config) as reader:
        stored = {s.phy_offset: s.decoded.record for s in reader.commitlog.walk(reader.commitlog.min_offset)
                  if s.decoded.record is not None}
    for i, r in acked:
        rec = stored.get(r["commitLogOffset"])
        assert rec is not None and rec.properties.get("KEYS") == msgs[i]["keys"], r
    report = verify_store(store, config)
    assert report.ok, report.problems[:5]


@pytest.mark.crash
def test_full_filesystem_under_the_index_is_a_typed_error(small_tmpfs, tmp_path):
    """The CommitLog elsewhere (storePathCommitLog), ConsumeQueues and the mapped IndexFile on a full
    tmpfs: the fault in the IndexFile's map (SIGBUS) or a ConsumeQueue write is a typed error naming
    the file, the JVM does not crash, and the store reopens and verifies once space is freed."""
    store = small_tmpfs / "store"
    commitlog = tmp_path / "commitlog"
    filler = small_tmpfs / "filler"
    st = os.statvfs(small_tmpfs)
    with open(filler, "wb") as f:                        # leave 1 MB
        f.write(bytes(max(st.f_bavail * st.f_frsize - (1 << 20), 0)))
    msgs = [{"topic": "FullIdx", "queueId": i % 4, "body": "", "keys": f"k-{i}",
             "properties": {"UNIQ_KEY": f"U{i:020d}"}} for i in range(30_000)]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in msgs))
    overrides = [f"storePathCommitLog={commitlog}"]
    results, trailer, rc = jvm_put(store, "-", path, batch=500, overrides=overrides, check=False)
    assert rc == 1, (rc, trailer)
    assert "error" in trailer, trailer
    assert trailer["error"]["type"] in ("WriteFailedError", "StoreError"), trailer
    assert "/index/" in trailer["error"]["message"] or "/consumequeue/" in trailer["error"]["message"], trailer
    acked = [(i, r) for i, r in enumerate(results) if r["status"] == "PUT_OK"]
    assert acked and len(acked) < len(msgs)
    assert all(r["status"] == "SERVICE_NOT_AVAILABLE" for r in results[len(acked):])
    filler.unlink()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    jvm_put(store, "-", empty, overrides=overrides)          # reopen: recovery re-dispatches, clean close
    config = StoreConfig().with_overrides({"storePathCommitLog": str(commitlog)})
    report = verify_store(store, config)
    assert report.ok, report.problems[:5]
    with MessageStoreReader(store, config) as reader:        # the last acknowledged key is indexed again
        found = reader.query("FullIdx", msgs[acked[-1][0]]["keys"], 4, only_matching=True)
    assert [m.record.phy_offset for m in found.messages] == [acked[-1][1]["commitLogOffset"]]


def test_busy_flush_thread_and_rolls_do_not_change_bytes(tmp_path):
    """The flush thread every 10 ms, small segments and ConsumeQueue files (rolls, retired channels, the
    write thread in flight): the same bytes as the Python writer with the same config and clock."""
    overrides = {"mappedFileSizeCommitLog": "32768", "mappedFileSizeConsumeQueue": "2000",
                 "flushIntervalCommitLog": "10", "maxHashSlotNum": "128", "maxIndexNum": "512"}
    msgs = [d for seed in (5, 6, 7) for d in _message_dicts(seed, 400)]
    for d in msgs[::3]:
        d.pop("storeTimestamp")
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in msgs))
    jvm_root, py_root = tmp_path / "jvm", tmp_path / "py"
    jvm_results, _, _ = jvm_put(jvm_root, "-", path, batch=97, clock_ms=CLOCK_MS,
                                overrides=[f"{k}={v}" for k, v in overrides.items()])
    with MessageStoreWriter(py_root, StoreConfig().with_overrides(overrides), clock_ms=lambda: CLOCK_MS) as w:
        py_results = [r.to_json_dict() for r in w.put_messages([MessageExtBrokerInner.from_json_dict(d) for d in msgs])]
    assert [{k: r[k] for k in PUT_FIELDS} for r in jvm_results] == [{k: r[k] for k in PUT_FIELDS} for r in py_results]
    assert len(os.listdir(jvm_root / "commitlog")) > 10
    assert _store_files(jvm_root) == _store_files(py_root)
