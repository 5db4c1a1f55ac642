"""Committed offsets wherever the broker keeps them, against what the broker itself reported.

The stores under ../shared/golden-broker (``RMQ_GOLDEN_BROKER_ROOT``) were written by a real RocketMQ 5.5.0
broker; ``expected/admin.json`` holds its ``consumeStats`` (brokerOffset, consumerOffset, diff per group, topic
and queue) and ``engine.consumerOffsetTable`` (the broker's in-memory table), both taken just before shutdown.

* the offset source (config/consumerOffset.json in ``rmq550-b1``, RocksDB ``config/rdb`` of config v2 in
  ``rmq550-b2-*``) gives every group's committed offsets, in Python and in the JVM, equal to the broker's table;
* ``rmq lag`` rows (and ``--json``) equal ``consumeStats`` for every group and queue, with ``requestMode``, in
  every corpus (``rmq550-b2``: RocksDB ConsumeQueues and config v2 together); on that store both stream paths
  started at ``startingOffsets=group`` (``commitOffsets=false``) give the same brokerOffset, consumerOffset, diff;
* a store keeping its offsets in RocksDB: ``startingOffsets=group`` (with ``commitOffsets=false``) starts at the
  group's offsets in both stream paths, and a ``consumerGroup`` commit is refused with one line;
* "no groups" and "offsets that could not be read" are different answers;
* reading RocksDB changes no file of the store (every file checksummed before and after).

Tolerance: RocketMQ's own groups (``CID_RMQ_SYS_*``: the POP revive log and the transaction check) go on
consuming during shutdown, after admin.json was taken, so their stored offsets may be larger than the broker's
table (never smaller); user groups, their retry topics and POP groups are compared exactly.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path

import pytest

from rmqsource import cli
from rmqsource.errors import OptionError, StoreError
from rmqsource.format import rocksdb_config as rc
from rmqsource.io.rocksdb import DEFAULT_CF, ReadOnlyRocksDb
from rmqsource.store import offset_source
from rmqsource.store.lag import group_lag_with_source
from rmqsource.store.offset_source import load_committed_offsets, locate_offset_source, refuse_group_commit

from golden import GOLDEN_BROKER_ROOT, copy_store

pytestmark = pytest.mark.golden

BROKER_ROOT = GOLDEN_BROKER_ROOT
CORPORA = sorted(p.name for p in BROKER_ROOT.iterdir() if (p / "expected" / "admin.json").is_file()) \
    if BROKER_ROOT.is_dir() else []
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"
pytest.importorskip("rocksdict", reason="the RocksDB config is read with rocksdict (pip install 'rmqsource[rocksdb]')")


def admin(corpus: str) -> dict:
    return json.loads((BROKER_ROOT / corpus / "expected" / "admin.json").read_text(encoding="utf-8"))


def broker_table(corpus: str) -> dict[tuple[str, str, int], int]:
    return {(k.split("@")[1], k.split("@")[0], int(q)): v
            for k, qs in admin(corpus)["engine"]["consumerOffsetTable"].items() for q, v in qs.items()}


def consume_stats(corpus: str) -> dict[tuple[str, str, int], dict]:
    return {(g, q["topic"], q["queueId"]): q for g, s in admin(corpus)["consumeStats"].items() for q in s["queues"]}


def checksums(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def config_copies(tmp_path_factory) -> dict[str, Path]:
    """Each corpus' config/ under a store root of its own (RocksDB is read only from copies)."""
    out = {}
    for corpus in CORPORA:
        root = tmp_path_factory.mktemp(corpus) / "store"
        shutil.copytree(BROKER_ROOT / corpus / "store" / "config", root / "config")
        out[corpus] = root
    return out


def assert_equals_broker(corpus: str, got: dict[tuple[str, str, int], int]) -> None:
    want = broker_table(corpus)
    assert set(got) == set(want), sorted(set(got) ^ set(want))
    exact = {k: v for k, v in want.items() if not k[0].startswith(SYSTEM_GROUP_PREFIX)}
    assert {k: got[k] for k in exact} == exact
    behind = {k: (got[k], v) for k, v in want.items() if k[0].startswith(SYSTEM_GROUP_PREFIX) and got[k] < v}
    assert not behind, f"system groups behind the broker's table: {behind}"
    for key, q in consume_stats(corpus).items():
        assert got[key] == q["consumerOffset"], key


def test_corpora_are_there():
    assert {"json", "rocksdb-v2"} <= {locate_offset_source(BROKER_ROOT / c / "store").kind for c in CORPORA}, CORPORA


@pytest.mark.parametrize("corpus", CORPORA)
def test_offsets_equal_the_brokers_table_python(corpus, config_copies):
    root = config_copies[corpus]
    before = checksums(root)
    committed = load_committed_offsets(root)
    assert checksums(root) == before          # no file written, changed or added (LOCK, LOG, rocksdict's json)
    expected_kind = "rocksdb-v2" if (BROKER_ROOT / corpus / "store" / "config" / "rdb").is_dir() else "json"
    assert committed.source.kind == expected_kind
    assert_equals_broker(corpus, {(e.group, e.topic, e.queue_id): e.offset for e in committed.entries})


@pytest.mark.spark
@pytest.mark.parametrize("corpus", CORPORA)
def test_offsets_equal_the_brokers_table_jvm(corpus, config_copies, request):
    from jvm_twins import jvm_or_skip
    jvm = jvm_or_skip(request)
    root = config_copies[corpus]
    before = checksums(root)
    source = jvm.io.rmqsource.store.ConsumerOffsetSource.locate(str(root))
    lines = [json.loads(x) for x in source.entriesJson().splitlines()]
    assert checksums(root) == before
    from py4j.java_gateway import get_field
    assert get_field(source, "kind") == load_committed_offsets(root).source.kind
    assert_equals_broker(corpus, {(r["group"], r["topic"], r["queueId"]): r["offset"] for r in lines})


def lag_rows(root: Path) -> list[dict]:
    out = io.StringIO()
    assert cli.main(["lag", str(root), "--json"], stdout=out) == 0
    return [json.loads(x) for x in out.getvalue().splitlines()]


def assert_lag_equals_consume_stats(corpus: str, rows: list[dict]) -> None:
    by_key = {(r["group"], r["topic"], r["queueId"]): r for r in rows}
    stats = consume_stats(corpus)
    assert stats
    for key, q in stats.items():
        r = by_key[key]
        assert (r["brokerOffset"], r["consumerOffset"], r["diff"]) == \
               (q["brokerOffset"], q["consumerOffset"], q["diff"]), key
    groups = admin(corpus)["consumeStats"]
    for g, s in groups.items():
        assert sum(r["diff"] for r in rows if r["group"] == g) == s["totalDiff"], g
    pops = {(k[1], k[0]) for k in stats if k[0] == "rb_pop" and not k[1].startswith("%RETRY%")}
    for r in rows:
        pop = (r["topic"], r["group"]) in pops or r["topic"].startswith("%RETRY%rb_pop_")
        assert r["requestMode"] == ("POP" if pop else "PULL"), r


def test_lag_equals_consume_stats_json_store():
    corpus = next(c for c in CORPORA if locate_offset_source(BROKER_ROOT / c / "store").kind == "json")
    rows = lag_rows(BROKER_ROOT / corpus / "store")      # a JSON-config store is read in place
    assert {r["offsetSource"] for r in rows} == {"json"}
    assert_lag_equals_consume_stats(corpus, rows)
    text = io.StringIO()
    assert cli.main(["lag", str(BROKER_ROOT / corpus / "store")], stdout=text) == 0
    out = text.getvalue()
    assert "Offsets from: config/consumerOffset.json" in out
    assert "rb_pop (POP)" in out and "in flight" in out


@pytest.mark.parametrize("corpus", CORPORA)
def test_lag_equals_consume_stats_every_corpus(corpus, tmp_path):
    root = copy_store(BROKER_ROOT / corpus / "store", tmp_path / "store")
    before = checksums(root)
    rows, committed = group_lag_with_source(root)         # RocksDB queues and config v2 in rmq550-b2
    assert checksums(root) == before
    assert committed.source.kind == locate_offset_source(BROKER_ROOT / corpus / "store").kind
    assert_lag_equals_consume_stats(corpus, rows)


@pytest.fixture(scope="module")
def rocksdb_corpus(tmp_path_factory) -> tuple[str, Path]:
    """A copy of the corpus whose queues and offsets are both in RocksDB (rmq550-b2: defaultRocksDB, config v2)."""
    corpus = next((c for c in CORPORA if locate_offset_source(BROKER_ROOT / c / "store").kind == "rocksdb-v2"
                   and (BROKER_ROOT / c / "store" / "consumequeue" / "CURRENT").is_file()), None)
    if corpus is None:
        pytest.skip("no broker corpus with RocksDB ConsumeQueues and a config v2")
    return corpus, copy_store(BROKER_ROOT / corpus / "store", tmp_path_factory.mktemp("rocks") / "store")


@pytest.mark.parametrize("kind", ["python", pytest.param("jvm", marks=pytest.mark.spark)])
def test_rocksdb_store_streams_give_consume_stats(kind, rocksdb_corpus, request):
    """The streams' lag: startingOffsets=group (commitOffsets=false) starts at each group's consumerOffset and the
    latest offset is the brokerOffset, for every group and queue of consumeStats (user and retry topics)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable
    corpus, root = rocksdb_corpus
    make = stream_reader(kind, request)
    before = checksums(root)
    stats = consume_stats(corpus)
    checked = 0
    for group in sorted({k[0] for k in stats}):
        topics = sorted({t for g, t, _ in stats if g == group})
        reader = make(root, topics=",".join(topics), startingOffsets="group", consumerGroup=group,
                      commitOffsets="false")
        start = reader.initialOffset()
        latest = reader.latestOffset(start, ReadAllAvailable())
        for (g, t, q), s in stats.items():
            if g != group:
                continue
            # a queue with no unit in the store (%RETRY%rb_pop: the broker made it, nothing was revived into
            # it) is in no stream offset: it reads as 0, which is what the broker reports for it
            hi, lo = latest.get(t, {}).get(str(q), 0), start.get(t, {}).get(str(q), 0)
            got = (hi, lo, hi - lo)
            assert got == (s["brokerOffset"], s["consumerOffset"], s["diff"]), (kind, g, t, q)
            checked += 1
        reader.commit(latest)                 # commitOffsets=false: nothing is written
    assert checked == len(stats)
    assert checksums(root) == before


# ------------------------------------------------------------------ a v2 config beside file ConsumeQueues

def write_v2_config(root: Path, entries: dict[tuple[str, str, int], int]) -> None:
    """config/rdb as ConsumerOffsetManagerV2 writes it (rocksdict), and no consumerOffset.json."""
    import rocksdict
    for name in ("consumerOffset.json", "consumerOffset.json.bak"):
        (root / "config" / name).unlink(missing_ok=True)
    db = rocksdict.Rdict(str(root / "config" / "rdb"), options=rocksdict.Options(raw_mode=True))
    try:
        db[rc.v2_data_version_key(rc.TableId.CONSUMER_OFFSET)] = rc.encode_v2_data_version(
            rc.V2DataVersion(0, 1_795_857_000_000, len(entries)))
        for (group, topic, qid), off in entries.items():
            db[rc.encode_v2_offset_key(group, topic, qid)] = rc.encode_v2_offset_value(off)
            # a pull offset (table 2) is not consumer progress: a larger one must not be read as committed
            db[rc.encode_v2_offset_key(group, topic, qid, rc.TableId.PULL_OFFSET)] = rc.encode_v2_offset_value(off + 7)
        db.flush()
    finally:
        db.close()
    (root / "config" / "rdb" / "rocksdict-config.json").unlink(missing_ok=True)


@pytest.fixture(scope="module")
def v2_store(tmp_path_factory) -> tuple[str, Path]:
    """rmq550-b1 (file ConsumeQueues) with its offsets moved into a config v2 RocksDB."""
    corpus = next(c for c in CORPORA if locate_offset_source(BROKER_ROOT / c / "store").kind == "json")
    root = copy_store(BROKER_ROOT / corpus / "store", tmp_path_factory.mktemp("v2") / "store")
    table = {(e.group, e.topic, e.queue_id): e.offset for e in load_committed_offsets(root).entries}
    write_v2_config(root, table)
    return corpus, root


def test_v2_store_lag_equals_consume_stats(v2_store):
    corpus, root = v2_store
    before = checksums(root)
    rows = lag_rows(root)
    assert checksums(root) == before
    assert {r["offsetSource"] for r in rows} == {"rocksdb-v2"}
    assert_lag_equals_consume_stats(corpus, rows)
    text = io.StringIO()
    assert cli.main(["lag", str(root), "--group", "rb_lag"], stdout=text) == 0
    assert "Offsets from: RocksDB config/rdb/ (configManagerVersion=v2)" in text.getvalue()


def stream_reader(kind: str, request):
    if kind == "python":
        from rmqsource.spark.stream import RmqStreamReader
        return lambda root, **o: RmqStreamReader({"path": str(root), **{k: str(v) for k, v in o.items()}})
    from jvm_twins import JvmStreamReader, jvm_or_skip
    jvm = jvm_or_skip(request)
    return lambda root, **o: JvmStreamReader(jvm, root, **o)


@pytest.mark.parametrize("kind", ["python", pytest.param("jvm", marks=pytest.mark.spark)])
def test_v2_store_stream_starts_at_the_group_and_commits_into_rdb(kind, v2_store, request, tmp_path):
    """A stream on a config-v2 store starts at the group's offsets in config/rdb and commits there, as
    ConsumerOffsetManagerV2 would: the group's keys move forward, every other record stays, and the group
    gets its subscription-group record; nothing is written with commitOffsets=false."""
    corpus, shared = v2_store
    root = copy_store(shared, tmp_path / "store")
    make = stream_reader(kind, request)
    topics = sorted({k[1] for k in consume_stats(corpus) if k[0] == "rb_lag"})
    before = checksums(root)
    reader = make(root, topics=",".join(topics), startingOffsets="group", consumerGroup="rb_lag",
                  commitOffsets="false")
    start = reader.initialOffset()
    want = {}
    for (g, t, q), s in consume_stats(corpus).items():
        if g == "rb_lag":
            want.setdefault(t, {})[str(q)] = s["consumerOffset"]
    assert start == want
    reader.commit(start)          # commitOffsets=false: nothing is written
    assert checksums(root) == before

    others = {(e.group, e.topic, e.queue_id): e.offset for e in load_committed_offsets(root).entries
              if e.group != "rb_lag"}
    committing = make(root, topics=",".join(topics), startingOffsets="group", consumerGroup="rb_lag")
    assert committing.initialOffset() == want
    ahead = {t: {q: o + 1 for q, o in qs.items()} for t, qs in want.items()}
    committing.commit(ahead)
    after = load_committed_offsets(root)
    assert after.source.kind == "rocksdb-v2"
    assert after.offsets_for_group("rb_lag") == {t: {int(q): o for q, o in qs.items()} for t, qs in ahead.items()}
    assert {(e.group, e.topic, e.queue_id): e.offset for e in after.entries if e.group != "rb_lag"} == others
    assert not (root / "config" / "consumerOffset.json").exists()
    with ReadOnlyRocksDb(root / "config" / "rdb") as db:
        group = db.get(DEFAULT_CF, rc.encode_v2_name_key(rc.TableId.SUBSCRIPTION_GROUP, "rb_lag"))
        version = rc.decode_v2_data_version(db.get(DEFAULT_CF, rc.v2_data_version_key(rc.TableId.CONSUMER_OFFSET)))
    assert rc.decode_v2_config_value(group)["groupName"] == "rb_lag"
    # write_v2_config stamped one version per record; the commit one more per queue it moved
    assert version.counter == len(others) + 2 * sum(map(len, want.values()))


def test_refusal_names_the_source(tmp_path):
    root = tmp_path / "store"
    (root / "config").mkdir(parents=True)
    write_v1_config(root / "config" / "consumerOffsets", {"T@g": {0: 5}}, counter=1)
    with pytest.raises(OptionError, match="storeType=defaultRocksDB, config v1"):
        refuse_group_commit(root)


# ------------------------------------------------------------------ no groups vs unreadable

def test_no_groups_and_unreadable_are_different_answers(v2_store, tmp_path, monkeypatch):
    corpus, v2_root = v2_store
    bare = copy_store(BROKER_ROOT / corpus / "store", tmp_path / "bare")
    for name in ("consumerOffset.json", "consumerOffset.json.bak"):
        (bare / "config" / name).unlink()
    assert locate_offset_source(bare).kind == "none"
    text = io.StringIO()
    assert cli.main(["lag", str(bare)], stdout=text) == 0
    assert "(no consumer groups: the store has no committed offsets anywhere)" in text.getvalue()

    monkeypatch.setattr(offset_source, "rocksdict_available", lambda: False)       # rocksdict not installed
    with pytest.raises(StoreError, match=r"reading them needs rocksdict: pip install 'rmqsource\[rocksdb\]'"):
        load_committed_offsets(v2_root)
    err = io.StringIO()
    import contextlib
    with contextlib.redirect_stderr(err):
        code = cli.main(["lag", str(v2_root)], stdout=io.StringIO())
    assert code != 0
    assert "rocksdict" in err.getvalue() and "no consumer groups" not in err.getvalue()
    assert len(err.getvalue().strip().splitlines()) == 1


def test_damaged_rocksdb_config_is_an_error_not_empty(v2_store, tmp_path):
    _, v2_root = v2_store
    root = tmp_path / "store"
    shutil.copytree(v2_root / "config", root / "config")
    (root / "config" / "rdb" / "CURRENT").write_text("MANIFEST-999999\n")
    with pytest.raises(StoreError, match="cannot open the RocksDB config read-only"):
        load_committed_offsets(root)


# ------------------------------------------------------------------ the 5.2 RocksDB config layout

def write_v1_config(folder: Path, table: dict[str, dict[int, int]], counter: int) -> None:
    """config/consumerOffsets as RocksDBConsumerOffsetManager writes it: default CF + kvDataVersion CF."""
    import rocksdict
    opts = rocksdict.Options(raw_mode=True)
    opts.create_if_missing(True)
    db = rocksdict.Rdict(str(folder), options=opts)
    try:
        version = db.create_column_family(rc.V1_DATA_VERSION_CF, rocksdict.Options(raw_mode=True))
        version[rc.V1_DATA_VERSION_KEY] = json.dumps({"counter": counter, "stateVersion": 0,
                                                      "timestamp": 1}).encode()
        for key, queues in table.items():
            db[key.encode()] = json.dumps({"offsetTable": {str(q): o for q, o in queues.items()}}).encode()
        db.flush()
    finally:
        db.close()
    (folder / "rocksdict-config.json").unlink(missing_ok=True)


@pytest.mark.parametrize("kind", ["python", pytest.param("jvm", marks=pytest.mark.spark)])
def test_v1_rocksdb_layout_and_its_merge_with_a_newer_json(kind, tmp_path, request):
    root = tmp_path / "store"
    (root / "config").mkdir(parents=True)
    write_v1_config(root / "config" / "consumerOffsets", {"T@g": {0: 5, 1: 9}, "%LMQ%q@g": {0: 2}}, counter=10)

    def read() -> dict:
        if kind == "python":
            return {(e.group, e.topic, e.queue_id): e.offset for e in load_committed_offsets(root).entries}
        from jvm_twins import jvm_or_skip
        src = jvm_or_skip(request).io.rmqsource.store.ConsumerOffsetSource.locate(str(root))
        return {(r["group"], r["topic"], r["queueId"]): r["offset"]
                for r in map(json.loads, src.entriesJson().splitlines())}

    before = checksums(root)
    assert locate_offset_source(root).kind == "rocksdb-v1"
    assert read() == {("g", "T", 0): 5, ("g", "T", 1): 9, ("g", "%LMQ%q", 0): 2}
    assert checksums(root) == before
    doc = {"dataVersion": {"counter": 3, "stateVersion": 0, "timestamp": 1}, "offsetTable": {"T@g": {"0": 1}}}
    (root / "config" / "consumerOffset.json").write_text(json.dumps(doc))
    assert read()[("g", "T", 0)] == 5              # older JSON: RocksDB wins
    doc["dataVersion"]["counter"] = 11
    (root / "config" / "consumerOffset.json").write_text(json.dumps(doc))
    assert read() == {("g", "T", 0): 1}            # newer JSON replaces the table, as on the broker's load
    (root / "config" / "lmqConsumerOffset.json").write_text(json.dumps({"offsetTable": {"%LMQ%z@h": {"0": 4}}}))
    assert read() == {("g", "T", 0): 1, ("h", "%LMQ%z", 0): 4}


# ------------------------------------------------------------------ rmq verify reads the offset source

def verify_problems(root: Path, engine: str) -> list[dict]:
    out = io.StringIO()
    cli.main(["verify", "--engine", engine, "--json", str(root)], stdout=out)
    lines = [json.loads(x) for x in out.getvalue().splitlines() if x.strip()]
    return [x for x in lines if "check" in x]           # the problem lines (the first line is the summary)


@pytest.mark.parametrize("engine", ["python", pytest.param("jvm", marks=pytest.mark.spark)])
def test_verify_checks_offsets_a_v2_config_keeps(engine, tmp_path, request):
    """rmq verify checks committed offsets against the queues wherever they are (config v2 here), both engines."""
    if engine == "jvm":
        from jvm_twins import jvm_or_skip
        jvm_or_skip(request)
    corpus = next(c for c in CORPORA if locate_offset_source(BROKER_ROOT / c / "store").kind == "json")
    root = copy_store(BROKER_ROOT / corpus / "store", tmp_path / "store")
    table = {(e.group, e.topic, e.queue_id): e.offset for e in load_committed_offsets(root).entries}
    key = ("rb_lag", "rb_topic_1", 2)
    table[key] = 10_000                                   # past the queue's end
    write_v2_config(root, table)
    before = checksums(root)
    found = [p for p in verify_problems(root, engine) if p["area"] == "config"]
    assert checksums(root) == before
    assert [(p["check"], p["file"], p["found"]) for p in found] == [("consumer-offset", "config/rdb", "10000")], found
    assert "group rb_lag commits offset 10000 for rb_topic_1/2" in found[0]["message"]
