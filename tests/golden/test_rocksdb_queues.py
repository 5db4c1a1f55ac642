"""ConsumeQueues kept in RocksDB (``storeType=defaultRocksDB``): every read path against the broker's own view.

The real-broker corpora whose ``store/consumequeue/`` is a RocksDB database are found by listing
../shared/golden-broker (``RMQ_GOLDEN_BROKER_ROOT``); each is copied first and never opened in place.
Judged against ``expected/storeview.jsonl`` (the broker's engine reading its own queues: min/max per queue,
each unit's queueOffset, CommitLog offset, size and tags code) and ``expected/admin.json`` topicStats:

* the Python store layer (MessageStoreReader over RocksDbQueueStore) and the JVM one (StoreReader over
  RocksDbQueues, through QueueDumpMain) reproduce every queue and unit, and agree with each other;
* neither writes a byte into the database folder (every file's bytes, names and mtimes compared);
* a file-queue twin (the CommitLog dispatched by rmqsource into file ConsumeQueues) reads the same units;
* per-topic Spark reads (the session's mode) and a tag-filtered read equal the engine's entries; a stream
  reads a topic to its end;
* ``rmq verify`` (both engines, the same report) checks the database's units against their records: the
  cleanly stopped store has no problem and as many units as the engine's view; a database cut where a running
  broker's last flush left it warns the records past its dispatch checkpoint per queue (cq-undispatched),
  never an error; a damaged unit (a wrong CommitLog offset, a value of the wrong length) is an error naming
  its queue and offset;
* without rocksdict the Python path refuses with one line naming the extra and the jar; put and recover
  refuse the store with one line and leave it unchanged.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

from fuzz_stores import verify_facts
from golden import GOLDEN_BROKER_ROOT, copy_store, tree_bytes
from jvm_twins import jvm_queue_view
from rmqsource.cli import main
from rmqsource.commands.verify_jvm import jvm_command, verify_store_jvm
from rmqsource.store.verify import verify_store

pytestmark = pytest.mark.golden

BROKER_ROOT = GOLDEN_BROKER_ROOT
# RocketMQ's own topics that grow during shutdown, after storeview.jsonl was taken (../README.md): a reader
# sees a few more units there, and the units the view lists are unchanged.
GROWS_AFTER_VIEW = ("rmq_sys_REVIVE_LOG_", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
                    "TRANS_CHECK_MAX_TIME_TOPIC")
USER_TOPIC_PREFIX = "rb_topic_"


def rocksdb_runs() -> list[Path]:
    if not BROKER_ROOT.is_dir():
        return []
    return [p for p in sorted(BROKER_ROOT.iterdir()) if (p / "store" / "consumequeue" / "CURRENT").is_file()]


RUNS = rocksdb_runs()
needs_runs = pytest.mark.skipif(not RUNS, reason=f"no RocksDB-queue broker run under {BROKER_ROOT}")
run_param = pytest.mark.parametrize("run_dir", RUNS, ids=lambda p: p.name)


@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> dict[Path, Path]:
    """One writable copy of each run's store (module-wide: reads only)."""
    return {r: copy_store(r / "store", tmp_path_factory.mktemp(r.name) / "store") for r in RUNS}


def storeview(run_dir: Path) -> tuple[dict, dict, list[dict]]:
    """(queues {(topic, qid): (min, max)}, units {(topic, qid, off): (pos, size, code)}, entry records)."""
    queues, units, entries = {}, {}, []
    with open(run_dir / "expected" / "storeview.jsonl", encoding="utf-8") as f:
        for rec in map(json.loads, f):
            key = (rec["topic"], rec["queueId"])
            if rec["record"] == "queue":
                queues[key] = (rec["minOffset"], rec["maxOffset"])
            elif rec["record"] == "entry":
                units[key + (rec["queueOffset"],)] = (rec["cqPos"], rec["cqSize"], rec["cqTagsCode"])
                entries.append(rec)
    return queues, units, entries


def assert_reproduces_storeview(run_dir: Path, queues: dict, units: dict) -> None:
    exp_queues, exp_units, _ = storeview(run_dir)
    assert sorted(queues) == sorted(exp_queues)
    for key, (mn, mx) in exp_queues.items():
        got_min, got_max = queues[key]
        assert got_min == mn, key
        if key[0].startswith(GROWS_AFTER_VIEW):
            assert got_max >= mx, key
        else:
            assert got_max == mx, key
        # every unit from min to max is there, none missing in between
        assert [o for (t, q, o) in units if (t, q) == key] == list(range(got_min, got_max)), key
    for key, unit in exp_units.items():
        assert units[key] == unit, key
    assert len(exp_units) > 1000


def python_view(store: Path, *, rocksdb: bool = True) -> tuple[dict, dict]:
    from rmqsource.store.reader import MessageStoreReader
    queues, units = {}, {}
    with MessageStoreReader(store) as reader:
        assert reader.layout.rocksdb_queues == rocksdb
        for info in reader.queue_infos():
            key = (info.topic, info.queue_id)
            queues[key] = (info.min_offset, info.max_offset)
            q = reader.consume_queue(*key)
            got = q.read_units(info.min_offset, info.max_offset - info.min_offset)
            for i, u in enumerate(got):
                units[key + (info.min_offset + i,)] = (int(u["phy_offset"]), int(u["size"]), int(u["tags_code"]))
    return queues, units


def snapshot(folder: Path):
    """Every file's bytes, every path and every file's mtime: a read leaves no trace."""
    return (tree_bytes(folder), sorted(str(p.relative_to(folder)) for p in folder.rglob("*")),
            {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")})


def run_cli(argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv], stdout=out, stdin=io.BytesIO(b""))
    return code, out.getvalue(), err.getvalue()


# ------------------------------------------------------------------ store layers

@needs_runs
@run_param
def test_python_store_layer_reproduces_the_broker_view(run_dir, copies):
    assert_reproduces_storeview(run_dir, *python_view(copies[run_dir]))


@needs_runs
@run_param
def test_jvm_store_layer_reproduces_the_broker_view_and_the_python_one(run_dir, copies):
    jvm = jvm_queue_view(copies[run_dir])
    assert_reproduces_storeview(run_dir, *jvm)
    assert jvm == python_view(copies[run_dir])


@contextlib.contextmanager
def writable_database(store: Path):
    """The database of a copy (never a corpus) opened for writing with rocksdict, every column family; flushed
    and closed after, and rocksdict's own config file removed."""
    import rocksdict
    folder = str(store / "consumequeue")
    names = rocksdict.Rdict.list_cf(folder, rocksdict.Options(raw_mode=True))
    db = rocksdict.Rdict(folder, options=rocksdict.Options(raw_mode=True),
                         column_families={n: rocksdict.Options(raw_mode=True) for n in names if n != "default"})
    try:
        yield db
        db.flush()
    finally:
        db.close()
        Path(folder, "rocksdict-config.json").unlink(missing_ok=True)


def cut_database_at(store: Path, fraction: float) -> int:
    """Leave in ``store``'s database only what a running broker's would hold after a memtable flush at a
    point of its dispatch: every unit of a record before the cut, each queue's ``max`` entry at its last unit
    kept, the checkpoint at the cut (none when nothing was kept); everything after lives in the CommitLog
    only (the broker writes units without a WAL, and its column families flush atomically).  Returns the cut."""
    from rmqsource.format.rocksdb_queue import (CHECKPOINT_TOPIC, decode_cq_key, decode_cq_value,
                                                encode_offset_key, encode_offset_value)
    with writable_database(store) as db:
        offsets = db.get_column_family("offset")
        units = [(k, decode_cq_value(v)) for k, v in db.items()]
        ends = sorted({phy + size for _, (phy, size, _, _) in units})
        cut = 0 if fraction == 0 else ends[int(len(ends) * fraction) - 1]
        kept: dict[tuple[str, int], tuple[int, int]] = {}
        for k, (phy, size, _, _) in units:
            key = decode_cq_key(k)
            if phy + size > cut:
                del db[k]
            elif kept.get((key.topic, key.queue_id), (-1, -1))[1] < key.queue_offset:
                kept[(key.topic, key.queue_id)] = (phy, key.queue_offset)
        for k in [k for k, _ in offsets.items()]:
            del offsets[k]
        for (topic, qid), (phy, queue_offset) in kept.items():
            offsets[encode_offset_key(topic, qid, max_entry=True)] = encode_offset_value(phy, queue_offset)
        if cut:
            offsets[encode_offset_key(CHECKPOINT_TOPIC, 0, max_entry=True)] = cut.to_bytes(8, "big")
    return cut


@needs_runs
@run_param
@pytest.mark.parametrize("fraction", [0, 0.5, 0.97])
def test_units_past_the_database_are_dispatched_from_the_commitlog(run_dir, copies, tmp_path, fraction):
    """A running broker's database holds only the units before its last flush (none at all before the
    first): the queues continue from the CommitLog as the broker's recovery dispatches them, and every
    queue and unit of the engine's view is read, LMQ copies included; the JVM store layer agrees."""
    store = copy_store(run_dir / "store", tmp_path / "store")
    cut = cut_database_at(store, fraction)
    assert (cut == 0) == (fraction == 0)
    cut_queues, cut_units = python_view(store)
    assert_reproduces_storeview(run_dir, cut_queues, cut_units)
    assert (cut_queues, cut_units) == python_view(copies[run_dir])
    assert jvm_queue_view(store) == (cut_queues, cut_units)


@needs_runs
@run_param
def test_queue_bounds_equal_the_admin_topic_stats(run_dir, copies):
    stats = json.loads((run_dir / "expected" / "admin.json").read_text(encoding="utf-8"))["topicStats"]
    queues, _ = python_view(copies[run_dir])
    checked = 0
    for topic, rows in stats.items():
        for row in rows:
            key = (topic, row["queueId"])
            if key not in queues:
                assert row["maxOffset"] == 0, key          # a queue the admin API lists with nothing in it
                continue
            mn, mx = queues[key]
            assert mn == row["minOffset"], key
            assert mx == row["maxOffset"] or (topic.startswith(GROWS_AFTER_VIEW) and mx > row["maxOffset"]), key
            checked += 1
    assert checked >= 16


@needs_runs
@run_param
def test_reads_never_write_the_database(run_dir, tmp_path):
    """Python (read-only open through a shadow folder), the CLI and the JVM (openReadOnly) change nothing."""
    store = copy_store(run_dir / "store", tmp_path / "store")
    before = snapshot(store)
    python_view(store)
    for argv in (["queues", store], ["topics", store], ["get", store, "rb_topic_0", "0", "0", "8"]):
        code, _, err = run_cli(argv)
        assert code == 0, err
    jvm_queue_view(store)
    assert snapshot(store) == before


@needs_runs
@run_param
def test_a_file_queue_twin_reads_the_same_units(run_dir, tmp_path):
    """The CommitLog dispatched by rmqsource into file ConsumeQueues (``rmq recover`` of a copy without the
    database) gives every queue's units as the RocksDB ones, but LMQ queues (rmqsource's dispatch does not
    multi-dispatch ``INNER_MULTI_DISPATCH``)."""
    store = copy_store(run_dir / "store", tmp_path / "store")
    rocks_queues, rocks_units = python_view(store)
    shutil.rmtree(store / "consumequeue")
    code, _, err = run_cli(["recover", store])
    assert code == 0, err
    twin_queues, twin_units = python_view(store, rocksdb=False)
    non_lmq = {k: v for k, v in rocks_queues.items() if not k[0].startswith("%LMQ%")}
    assert twin_queues == non_lmq
    assert twin_units == {k: v for k, v in rocks_units.items() if not k[0].startswith("%LMQ%")}



# ------------------------------------------------------------------ rmq verify (both engines)

ENGINES = ["python", pytest.param("jvm", marks=pytest.mark.skipif(
    jvm_command() is None, reason="the JVM verify needs the rmq jar (rmq jar --build) and java"))]
needs_jvm = pytest.mark.skipif(jvm_command() is None, reason="the JVM verify needs the rmq jar and java")
UNDISPATCHED = re.compile(r"(\d+) record\(s\) of (.+)/(\d+) past the RocksDB database's dispatch checkpoint at offset "
                          r"(\d+) \(first at CommitLog offset (\d+)\): the broker holds their units in memory until "
                          r"its next flush; its recovery dispatches them")


def walk(engine: str):
    return verify_store_jvm if engine == "jvm" else verify_store


def damage_unit(store: Path, entry: dict, how: str) -> None:
    """Rewrite the database's value of one unit of the engine's view: its CommitLog offset 8 bytes on
    (``phy``), or cut to a file unit's 20 bytes (``value-size``)."""
    from rmqsource.format.rocksdb_queue import decode_cq_value, encode_cq_key, encode_cq_value
    key = encode_cq_key(entry["topic"], entry["queueId"], entry["queueOffset"])
    with writable_database(store) as db:
        value = db[key]
        phy, size, code, store_ts = decode_cq_value(value)
        assert (phy, size, code) == (entry["cqPos"], entry["cqSize"], entry["cqTagsCode"])    # the broker's unit
        db[key] = encode_cq_value(phy + 8, size, code, store_ts) if how == "phy" else value[:20]


def damaged_entry(run_dir: Path) -> dict:
    """A unit of a user topic in the middle of its queue."""
    _, _, entries = storeview(run_dir)
    queue = [e for e in entries if e["topic"] == USER_TOPIC_PREFIX + "1" and e["queueId"] == 2]
    return queue[len(queue) // 2]


@needs_runs
@run_param
@pytest.mark.parametrize("engine", ENGINES)
def test_verify_checks_every_unit_of_a_cleanly_stopped_store(run_dir, copies, engine):
    """The broker stopped cleanly: its database holds every unit (LMQ copies included), each points at its
    record; verify finds nothing and checks as many units as the engine's view has, plus the few RocketMQ's own
    topics took during shutdown, after the view (GROWS_AFTER_VIEW: counted from the reader's queue bounds)."""
    report = walk(engine)(copies[run_dir])
    assert report.ok and report.warnings == 0, [p.text() for p in report.problems]
    view_queues, view_units, _ = storeview(run_dir)
    queues, _ = python_view(copies[run_dir])
    grown = sum(queues[k][1] - mx for k, (_, mx) in view_queues.items() if k[0].startswith(GROWS_AFTER_VIEW))
    assert 0 <= grown < 100
    assert report.stats["queues"] == len(view_queues)
    assert report.stats["cqUnits"] == len(view_units) + grown
    assert report.stats["cqUnitsExpired"] == 0


@needs_runs
@run_param
@pytest.mark.parametrize("engine", ENGINES)
def test_verify_of_a_database_cut_at_a_flush_warns_each_queue_past_the_checkpoint(run_dir, tmp_path, engine):
    """A running broker's database after a flush half-way: the units before the cut are checked, the records
    past the checkpoint have none by design (the broker holds them in memory): one cq-undispatched warning per
    queue with their count and first record, exactly the engine's view's units past the cut; no error."""
    store = copy_store(run_dir / "store", tmp_path / "store")
    cut = cut_database_at(store, 0.5)
    report = walk(engine)(store)
    assert report.ok, [p.text() for p in report.problems if p.severity == "error"]
    _, _, entries = storeview(run_dir)
    past = [e for e in entries if e["cqPos"] >= cut and not e["topic"].startswith("%LMQ%")]
    want = Counter((e["topic"], e["queueId"]) for e in past)
    warned = {}
    for p in report.problems:
        m = UNDISPATCHED.fullmatch(p.message)
        assert (p.severity, p.check, p.file, p.offset) == ("warning", "cq-undispatched", "consumequeue", None), p
        assert m and int(m[4]) == cut, p.message
        key = (m[2], int(m[3]))
        warned[key] = int(m[1])
        assert int(m[5]) == min((e["cqPos"] for e in past if (e["topic"], e["queueId"]) == key), default=int(m[5]))
    assert len(warned) == report.warnings == len(report.problems)
    assert set(want) <= set(warned) and all(k[0].startswith(GROWS_AFTER_VIEW) for k in set(warned) - set(want))
    for key, n in want.items():
        assert warned[key] == n or (key[0].startswith(GROWS_AFTER_VIEW) and warned[key] > n), key
    assert report.stats["cqUnits"] == sum(1 for e in entries if e["cqPos"] < cut) > 0


@needs_runs
@run_param
@pytest.mark.parametrize("how", ["phy", "value-size"])
@pytest.mark.parametrize("engine", ENGINES)
def test_verify_names_a_damaged_unit_by_its_queue_and_offset(run_dir, tmp_path, engine, how):
    """One unit rewritten: pointing 8 bytes into its record, or a 20-byte value; the unit is an error named
    by its queue and offset in the database folder, and its record one without a unit."""
    entry = damaged_entry(run_dir)
    store = copy_store(run_dir / "store", tmp_path / "store")
    damage_unit(store, entry, how)
    report = walk(engine)(store)
    topic, qid, phy = entry["topic"], entry["queueId"], entry["cqPos"]
    unit = f"RocksDB ConsumeQueue {topic}:{qid} unit {entry['queueOffset']}"
    if how == "phy":
        first = ("cq-target", f"{unit} points at CommitLog offset {phy + 8}, where no valid record starts",
                 "a record start", "no valid record")
    else:
        first = ("cq-value-size", f"{unit} has a 20-byte value: not a unit, no record is matched to it",
                 "28 bytes", "20 bytes")
    missing = ("cq-missing-unit", f"1 record(s) of {topic}/{qid} have no ConsumeQueue unit (first at CommitLog "
                                  f"offset {phy})", "a unit per record", "1 missing")
    assert [(p.severity, p.area, p.file, p.offset) for p in report.problems] == \
        [("error", "consumequeue", "consumequeue", None)] * 2
    assert [(p.check, p.message, p.expected, p.found) for p in report.problems] == [first, missing]


@needs_jvm
@needs_runs
@run_param
def test_verify_reports_of_both_engines_are_the_same(run_dir, copies, tmp_path):
    """Problem for problem, count for count, figure for figure: clean, cut (no unit at all, half-way) and
    damaged databases."""
    stores = {"clean": copies[run_dir]}
    for fraction in (0, 0.5):
        stores[f"cut {fraction}"] = copy_store(run_dir / "store", tmp_path / f"cut{fraction}")
        cut_database_at(stores[f"cut {fraction}"], fraction)
    for how in ("phy", "value-size"):
        stores[how] = copy_store(run_dir / "store", tmp_path / how)
        damage_unit(stores[how], damaged_entry(run_dir), how)
    for name, store in stores.items():
        python, jvm = verify_store(store), verify_store_jvm(store)
        assert verify_facts(jvm) == verify_facts(python), name
        assert python.problems or name == "clean", name


# ------------------------------------------------------------------ refusals

@needs_runs
def test_without_rocksdict_the_python_path_refuses_with_one_line(copies, monkeypatch):
    from rmqsource.io import rocksdb
    rocksdb.close_all()
    monkeypatch.setitem(sys.modules, "rocksdict", None)      # import rocksdict -> ImportError
    store = copies[RUNS[0]]
    code, out, err = run_cli(["topics", store])
    assert code == 1 and out == "", err
    (line,) = err.splitlines()
    assert line.startswith(f"rmq topics: error: {store / 'consumequeue'}: reading RocksDB ConsumeQueues"), line
    assert "pip install 'rmqsource[rocksdb]'" in line and "rmq jar --build" in line, line


@needs_runs
@pytest.mark.parametrize("argv", [["put"], ["recover"]], ids=["put", "recover"])
def test_writes_and_recover_refuse_with_one_line(argv, tmp_path):
    store = copy_store(RUNS[0] / "store", tmp_path / "store")
    before = snapshot(store)
    code, out, err = run_cli([*argv, store])
    assert code == 1, (out, err)
    (line,) = err.splitlines()
    assert f"{store / 'consumequeue'}: RocksDB ConsumeQueue (storeType=defaultRocksDB)" in line, line
    assert snapshot(store) == before


def test_a_damaged_database_is_one_typed_error(tmp_path):
    """Marker files of a database RocksDB cannot open: one UnsupportedLayoutError naming the folder."""
    from rmqsource.errors import UnsupportedLayoutError
    from rmqsource.store.reader import MessageStoreReader
    store = tmp_path / "store"
    (store / "commitlog").mkdir(parents=True)
    (store / "consumequeue").mkdir()
    (store / "consumequeue" / "CURRENT").write_bytes(b"MANIFEST-000005\n")
    (store / "consumequeue" / "MANIFEST-000005").write_bytes(b"x")
    with pytest.raises(UnsupportedLayoutError) as e:
        with MessageStoreReader(store) as reader:
            reader.queue_keys()
    assert e.value.file == str(store / "consumequeue")
    assert "cannot open the RocksDB ConsumeQueue database read-only" in str(e.value)


# ------------------------------------------------------------------ Spark (the session's mode)

def user_topics(entries: list[dict]) -> list[str]:
    return sorted({e["topic"] for e in entries if e["topic"].startswith(USER_TOPIC_PREFIX)})


def rows_of(df) -> list[tuple]:
    return sorted((r["queueId"], r["queueOffset"], r["commitLogOffset"], r["storeSize"], r["tagsCode"])
                  for r in df.select("queueId", "queueOffset", "commitLogOffset", "storeSize", "tagsCode").collect())


def expected_rows(entries: list[dict], topic: str, tags=None) -> list[tuple]:
    return sorted((e["queueId"], e["queueOffset"], e["cqPos"], e["cqSize"], e["cqTagsCode"]) for e in entries
                  if e["topic"] == topic and (tags is None or e.get("tags") == tags))


@pytest.mark.spark
@needs_runs
@run_param
def test_spark_topic_reads_equal_the_engine_entries(spark, run_dir, copies):
    _, _, entries = storeview(run_dir)
    store = str(copies[run_dir])
    topics = user_topics(entries)
    assert len(topics) >= 4
    for topic in topics:
        df = spark.read.format("rmq").option("topics", topic).load(store)
        assert rows_of(df) == expected_rows(entries, topic), topic
    # a tag-filtered read (pushed down to the tags code, then the exact TAGS)
    topic = topics[0]
    df = spark.read.format("rmq").option("topics", topic).load(store).where("tags = 'TagA'")
    want = expected_rows(entries, topic, "TagA")
    assert want and rows_of(df) == want


@pytest.mark.spark
@needs_runs
@run_param
def test_spark_stream_reads_a_topic_to_its_end(spark, run_dir, copies, tmp_path):
    _, _, entries = storeview(run_dir)
    topic = user_topics(entries)[0]
    seen = []
    q = (spark.readStream.format("rmq").option("topics", topic).option("startingOffsets", "earliest")
         .load(str(copies[run_dir])).writeStream
         .foreachBatch(lambda df, _: seen.extend(rows_of(df)))
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    try:
        q.awaitTermination(300)
        assert not q.isActive and q.exception() is None
    finally:
        q.stop()
    assert sorted(seen) == expected_rows(entries, topic)
