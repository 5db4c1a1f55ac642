"""The Python and JVM sinks share one store, one sink log and one stream checkpoint.

Each step runs in its own Spark session (a subprocess) in the mode it names: ``python`` (no jar: the
Python sink) or ``jvm`` (the jar on spark.jars: the JVM sink).  A streaming query started on one sink
resumes on the other, across a replayed batch and a task that died half-way through its append, and
every message is in the store exactly once (checked by its stamps); batch writes of both sinks alternate
on one store, a writeId re-run of a failed write finishes on the other sink, and ``rmq verify`` is clean.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from rmqsource.spark.jar import jar_path
from rmqsource.spark.sink import BATCH_PROPERTY, FAULT_ENV, SEQ_PROPERTY, SinkLog
from rmqsource.store.reader import MessageStoreReader

pytestmark = [pytest.mark.spark, pytest.mark.own_modes, pytest.mark.e2e,
              pytest.mark.skipif(jar_path() is None, reason="the JVM sink needs the jar (rmq jar --build)")]

HERE = os.path.join(os.path.dirname(__file__), os.pardir, "support")


def _messages(store, topic):
    out = []
    with MessageStoreReader(store) as rd:
        for t, q in rd.queue_keys():
            if t == topic:
                for res in rd.get_loop("check", t, q, 0, 1024):
                    out.extend(m.record for m in res.messages)
    return out


def _child(script, args, mode, tmp_path, fault=None, store=None):
    fault_file = tmp_path / "sink-fault"
    if fault:
        fault_file.write_text(f"{fault} {os.path.realpath(store)}")
    env = dict(os.environ, **{FAULT_ENV: str(fault_file), "RMQ_SPARK_MODE": mode})
    p = subprocess.run([sys.executable, os.path.join(HERE, script)] + args, capture_output=True, text=True,
                       env=env, timeout=600)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert p.returncode == 0 and lines, p.stderr[-3000:]
    assert not fault_file.exists(), f"the fault {fault} did not fire"
    return json.loads(lines[-1][len("RESULT "):])


def _add_source_files(src, start, files, per_file=1000):
    src.mkdir(exist_ok=True)
    for f in range(files):
        lo = start + f * per_file
        (src / f"part-{lo:08d}.json").write_text("".join(json.dumps({"i": i}) + "\n" for i in range(lo, lo + per_file)))


def _verify_clean(store):
    from io import StringIO
    from rmqsource import cli
    out = StringIO()
    assert cli.main(["verify", str(store)], stdout=out) == 0, out.getvalue()[-2000:]


@pytest.mark.slow      # five child Spark sessions taking turns, about 4 minutes: the slow tier
def test_a_stream_moves_between_the_python_and_jvm_sinks_exactly_once(tmp_path):
    src, store, ckpt = tmp_path / "src", tmp_path / "store", tmp_path / "ckpt"
    _add_source_files(src, 0, 4)
    (store / "config").mkdir(parents=True)
    args = [str(src), str(store), str(ckpt)]
    # 1) Python sink: batches 0 and 1 appended, the driver dies before the sink commit of batch 1
    r = _child("sink_stream_child.py", args, "python", tmp_path, fault="commit:1", store=store)
    assert r["error"] and "injected fault" in r["error"]
    assert len(_messages(store, "OUT")) == 2000
    # 2) JVM sink: batch 1 replayed and skipped (its task finished); a task of batch 2 dies half-way
    r = _child("sink_stream_child.py", args, "jvm", tmp_path, fault="mid-append:2", store=store)
    assert r["error"] is not None
    assert 2000 < len(_messages(store, "OUT")) < 3000
    # 3) Python sink: the rest of batch 2 (found by the JVM sink's stamps), then batch 3
    r = _child("sink_stream_child.py", args, "python", tmp_path)
    assert r["error"] is None, r["error"]
    assert len(_messages(store, "OUT")) == 4000
    # 4) more input; the JVM sink takes batches 4 and 5, the Python sink batch 6
    _add_source_files(src, 4000, 2)
    assert _child("sink_stream_child.py", args, "jvm", tmp_path)["error"] is None
    _add_source_files(src, 6000, 1)
    assert _child("sink_stream_child.py", args, "python", tmp_path)["error"] is None
    recs = _messages(store, "OUT")
    bodies = Counter(int(r.body) for r in recs)
    assert len(recs) == 7000 and set(bodies) == set(range(7000)) and max(bodies.values()) == 1
    stamps = Counter((r.properties[BATCH_PROPERTY], r.properties[SEQ_PROPERTY]) for r in recs)
    assert max(stamps.values()) == 1                                     # no row of a batch twice
    batches = {t for t, _ in stamps}
    assert len({t.rsplit(":", 1)[0] for t in batches}) == 1 and len(batches) == 7      # one query, 7 batches
    (qid, entry), = SinkLog(str(store)).load()["queries"].items()
    assert entry["committedBatch"] == 6 and entry["tasks"] == {}
    _verify_clean(store)


ROWS = 4_000


def _batch(store, tmp_path, mode, writes, fault=None):
    return _child("sink_retry_child.py", [json.dumps({"store": str(store), "writes": writes})], mode, tmp_path,
                  fault=fault, store=store)["writes"]


def test_python_and_jvm_batch_writes_alternate_on_one_store(tmp_path):
    store = tmp_path / "store"
    wid = {"rows": ROWS, "partitions": 4, "writeId": "nightly"}
    # the Python sink appends three partitions of a write whose fourth fails for good
    (failed,) = _batch(store, tmp_path, "python", [dict(wid, failAt=3_210, always=True)])
    assert failed["error"] is not None and failed["messages"] < ROWS
    # the JVM sink runs the same write again: only what is missing, its task killed half-way once
    rerun, other = _batch(store, tmp_path, "jvm", [wid, {"rows": 10, "partitions": 1}], fault="kill:3")
    assert rerun["error"] is None and rerun["messages"] == rerun["distinct"] == ROWS
    assert other["error"] is None and other["messages"] == ROWS + 10
    # the Python sink runs it once more (nothing to append), then a write of its own
    again, mine = _batch(store, tmp_path, "python", [wid, {"rows": 20, "partitions": 2}])
    assert again["messages"] == ROWS + 10 and mine["error"] is None and mine["messages"] == ROWS + 30
    bodies = sorted(int(r.body) for r in _messages(store, "R"))
    assert bodies == sorted(list(range(ROWS)) + list(range(10)) + list(range(20)))
    assert set(SinkLog(str(store)).load()["writes"]) == {"write:nightly"}
    _verify_clean(store)
