"""RocketMQ's own topics on a real broker's store: left out of whole-store reads and topic patterns by
default, every record with ``excludeInternalTopics=false``, always read when named.

The judge is the broker's own engine: ``expected/storeview.jsonl`` (every ConsumeQueue entry, read by
RocketMQ's store engine, RocketMQ's own topics included) and the corpus table of the broker corpora's
README (records in the CommitLog, and how many of them are in user topics).  Stores are read in place
(``../shared/golden-broker``, ``RMQ_GOLDEN_BROKER_ROOT`` elsewhere) and never written.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from rmqsource.format.system_topics import is_internal_topic

from golden import GOLDEN_BROKER_ROOT

pytestmark = pytest.mark.spark

BROKER_ROOT = GOLDEN_BROKER_ROOT


def _runs() -> list:
    if not BROKER_ROOT.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no broker corpora in {BROKER_ROOT}"))]
    out = []
    for p in sorted(BROKER_ROOT.iterdir()):
        conf = p / "broker.properties"
        if not ((p / "store").is_dir() and conf.is_file() and (p / "expected" / "storeview.jsonl").is_file()):
            continue
        out.append(pytest.param(p, id=p.name))
    return out


RUNS = _runs()


LMQ_PREFIX = "%LMQ%"


def storeview_counts(run: Path) -> Counter:
    """ConsumeQueue entries per topic, as the broker's engine read them, less the LMQ queues: those are
    further queues of records stored under a user topic (multi-dispatch), which a whole-store read gives
    once, under the topic they were stored in."""
    out: Counter = Counter()
    with open(run / "expected" / "storeview.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d["record"] == "entry" and not d["topic"].startswith(LMQ_PREFIX):
                out[d["topic"]] += 1
    return out


def storeview_keys(run: Path, topics) -> set:
    keys = set()
    with open(run / "expected" / "storeview.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d["record"] == "entry" and d["topic"] in topics:
                keys.add((d["topic"], d["queueId"], d["queueOffset"]))
    return keys


def readme_counts(run: Path):
    """(records in the CommitLog, of them in user topics) from the corpus table of the broker corpora's
    README (``| `rmq550-b1` | ... | 2,361: 726 in user topics, ... |``), or None when it has no such row."""
    readme = run.parent / "README.md"
    if not readme.is_file():
        return None
    for line in readme.read_text(encoding="utf-8").splitlines():
        m = re.match(rf"\|\s*`{re.escape(run.name)}`\s*\|.*\|\s*([\d,]+): ([\d,]+) in user topics", line)
        if m:
            return int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))
    return None


def snapshot(store: Path) -> dict:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in store.rglob("*") if p.is_file()}


def load(spark, run: Path, **options):
    r = spark.read.format("rmq")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(str(run / "store"))


def topic_counts(df) -> Counter:
    return Counter({r["topic"]: r["count"] for r in df.groupBy("topic").count().collect()})


@pytest.fixture(scope="module")
def unchanged():
    """Every run's store is the same after the module's reads (read in place, never written)."""
    before = {p.values[0]: snapshot(p.values[0] / "store") for p in RUNS if p.values[0] is not None}
    yield
    for run, snap in before.items():
        assert snapshot(run / "store") == snap, f"{run.name}: the store changed"


@pytest.mark.parametrize("run", RUNS)
def test_whole_store_read_leaves_out_internal_topics(spark, run, unchanged):
    view = storeview_counts(run)
    user = Counter({t: n for t, n in view.items() if not is_internal_topic(t)})
    own = {t for t in view if is_internal_topic(t)}
    assert user and own, "the corpus should hold user topics and RocketMQ's own"

    default = topic_counts(load(spark, run))
    assert default == user
    everything = topic_counts(load(spark, run, excludeInternalTopics="false"))
    assert Counter({t: n for t, n in everything.items() if not is_internal_topic(t)}) == user
    # every internal queue's entries are in the CommitLog (the revive log and transaction topics may
    # have grown during shutdown, after storeview.jsonl was taken: at least, then)
    assert own <= set(everything)
    assert all(everything[t] >= view[t] for t in own), {t: (everything[t], view[t]) for t in own}
    total, in_user = sum(everything.values()), sum(default.values())
    assert total > in_user
    documented = readme_counts(run)
    if documented is not None:
        assert (total, in_user) == documented
    # the count a query asks for (the JVM scan may answer it from the ConsumeQueues)
    assert load(spark, run).count() == in_user
    assert load(spark, run, excludeInternalTopics="false").count() == total
    # the rows themselves are the engine's entries of the user topics
    rows = load(spark, run).select("topic", "queueId", "queueOffset").collect()
    assert {(r.topic, r.queueId, r.queueOffset) for r in rows} == storeview_keys(run, set(user))
    assert len(rows) == in_user


@pytest.mark.parametrize("run", RUNS)
def test_a_named_internal_topic_is_always_read(spark, run, unchanged):
    view = storeview_counts(run)
    trace = "RMQ_SYS_TRACE_TOPIC"
    if not view.get(trace):
        pytest.skip(f"{run.name} has no {trace} entries")
    got = topic_counts(load(spark, run, topics=trace))
    assert got == Counter({trace: view[trace]})
    assert topic_counts(load(spark, run, topics=trace, excludeInternalTopics="true")) == got
    rows = load(spark, run, topics=trace).select("topic", "queueId", "queueOffset").collect()
    assert {(r.topic, r.queueId, r.queueOffset) for r in rows} == storeview_keys(run, {trace})
    queue = next(k for k in sorted(storeview_keys(run, {trace})))
    n = sum(1 for k in storeview_keys(run, {trace}) if k[:2] == queue[:2])
    assert load(spark, run, queues=f"{trace}:{queue[1]}").count() == n
    # a filter on a whole-store read filters what that read gives: RocketMQ's own topics only when asked for
    assert load(spark, run).where(f"topic = '{trace}'").count() == 0
    assert load(spark, run, excludeInternalTopics="false").where(f"topic = '{trace}'").count() == view[trace]


@pytest.mark.parametrize("run", RUNS)
def test_topic_pattern_follows_the_option(spark, run, unchanged):
    view = storeview_counts(run)
    retry = sorted(t for t in view if t.startswith("%RETRY%"))
    user = sorted(t for t in view if not is_internal_topic(t))
    if not retry:
        pytest.skip(f"{run.name} has no retry topics")
    pattern = f"{re.escape(user[0])}|%RETRY%.*"
    assert topic_counts(load(spark, run, topicPattern=pattern)) == Counter({user[0]: view[user[0]]})
    assert topic_counts(load(spark, run, topicPattern=pattern, excludeInternalTopics="false")) == \
        Counter({t: view[t] for t in [user[0], *retry]})
    with pytest.raises(Exception) as e:
        load(spark, run, topicPattern="%RETRY%.*").count()
    assert "matches only RocketMQ's own topics" in str(e.value) and "excludeInternalTopics" in str(e.value), \
        str(e.value)[:2000]


@pytest.mark.parametrize("run", RUNS)
def test_stream_topic_pattern_leaves_out_internal_topics(spark, run, unchanged, tmp_path):
    view = storeview_counts(run)
    user = sorted(t for t in view if not is_internal_topic(t))
    counts: Counter = Counter()

    def each(batch_df, batch_id):
        for r in batch_df.groupBy("topic").count().collect():
            counts[r["topic"]] += r["count"]

    for exclude, ckpt in (("true", tmp_path / "a"), ("false", tmp_path / "b")):
        counts.clear()
        df = (spark.readStream.format("rmq").option("topicPattern", f"{re.escape(user[0])}|%DLQ%.*|%RETRY%.*")
              .option("startingOffsets", "earliest").option("excludeInternalTopics", exclude).load(str(run / "store")))
        q = df.writeStream.foreachBatch(each).option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start()
        try:
            assert q.awaitTermination(240), "the stream did not finish"
            assert q.exception() is None, str(q.exception())
        finally:
            q.stop()
        want = {t: n for t, n in view.items()
                if t == user[0] or (exclude == "false" and t.startswith(("%DLQ%", "%RETRY%")))}
        assert counts == Counter(want), exclude
