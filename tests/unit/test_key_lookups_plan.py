"""Lookups by key on the Python path, without Spark: the options parsed, ``plan()`` answering through the
IndexFiles (Lookup partitions), the IndexFile walk of many keys at once equal to one walk per key, and the
cases that read the store instead (the cap, indexLookups=false, no IndexFile). The rows themselves:
tests/spark/test_key_lookups.py."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from golden import corpora
from rmqsource.errors import OptionError
from rmqsource.spark import lookup_planning, planning
from rmqsource.spark.options import parse_options
from rmqsource.spark.planning import Lookup, plan
from rmqsource.spark.pushdown import Pushed
from rmqsource.store.reader import MessageStoreReader

pytestmark = pytest.mark.unit

CORPORA = corpora()
ALL = (0, (1 << 63) - 1)


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    from rmqsource.sample import write_sample_store
    root = tmp_path_factory.mktemp("key-plan") / "store"
    write_sample_store(root, 20_000)
    return root


def sample_keys(root: Path) -> list[tuple[str, int, list[str]]]:
    """(topic, storeTimestamp, keys) of every record of the sample store."""
    out = []
    with MessageStoreReader(root) as r:
        for step in r.commitlog.walk(r.commitlog.min_offset, stop_offset=r.commit_log_max_offset):
            rec = step.decoded.record
            if rec is not None:
                out.append((rec.topic, rec.store_timestamp_ms, rec.keys.split(" "), rec.phy_offset))
    return out


def corpus_options(corpus: Path, **extra) -> dict:
    return {"path": str(corpus / "store"), "config": str(corpus / "store.properties"), **extra}


# --------------------------------------------------------------------------- options

def test_keys_and_keys_file_parse_into_a_set(tmp_path):
    base = {"path": str(tmp_path)}
    assert parse_options({**base, "keys": '["a", "b", "a"]'}).keys == frozenset({"a", "b"})
    assert parse_options({**base, "keys": "[]"}).keys == frozenset()
    assert parse_options(base).keys is None
    f = tmp_path / "keys.txt"
    f.write_text("a\n\n  b  \r\nclé\n", encoding="utf-8")
    assert parse_options({**base, "keysFile": str(f)}).keys == frozenset({"a", "b", "clé"})
    assert parse_options({**base, "keysfile": f.as_uri()}).keys == frozenset({"a", "b", "clé"})


@pytest.mark.parametrize("options, error", [
    ({"keys": "order-1"}, r"option keys must be a JSON array of strings"),
    ({"keys": '"order-1"'}, r"option keys must be a JSON array of strings"),
    ({"keys": "[1]"}, r"option keys must be a JSON array of strings"),
    ({"keys": '{"a": 1}'}, r"option keys must be a JSON array of strings"),
    ({"keys": '["a b"]'}, r"option keys: key 'a b' contains a space and can never match"),
    ({"keys": '[""]'}, r"option keys: an empty key can never match"),
    ({"keys": '["a"]', "keysFile": "/x"}, r"use only one of the options keys and keysFile"),
    ({"keysFile": "s3a://bucket/keys.txt"}, r"option keysFile .*not s3a: URIs"),
    ({"keysFile": "/no/such/keys.txt"}, r"option keysFile: no such file"),
    ({"keys": '["a"]', "view": "timers"}, r"option keys .*does not apply to view=timers"),
    ({"keys": '["a"]', "view": "dlq"}, r"option keys .*does not apply to view=dlq"),
    ({"keys": '["a"]', "metadata": "queues"}, r"option metadata=queues .*keys"),
])
def test_bad_key_options_are_refused(tmp_path, options, error):
    with pytest.raises(OptionError, match=error):
        parse_options({"path": str(tmp_path), **options})


def test_a_stream_refuses_keys(tmp_path):
    from rmqsource.spark.options import STREAM, option_names
    from rmqsource.spark.stream_options import parse_stream_options
    for name in ("keys", "keysFile"):
        with pytest.raises(OptionError, match=f"option {name} is for batch reads"):
            parse_stream_options({"path": str(tmp_path), "topics": "T", name: '["a"]'})
        assert name not in option_names(STREAM)


# --------------------------------------------------------------------------- the IndexFile walk

def test_walk_of_many_keys_equals_one_walk_per_key(sample):
    records = sample_keys(sample)
    rnd = random.Random(5)
    keys = sorted({k for _, _, ks, _ in rnd.sample(records, 500) for k in ks}) + ["order-x", "AaAa", "BBBB"]
    t0, t1 = records[len(records) // 3][1], records[2 * len(records) // 3][1]
    with MessageStoreReader(sample) as r:
        pairs = [(t, k) for t in r.topics() for k in keys]
        for max_num, begin, end in ((64, *ALL), (3, *ALL), (64, t0, t1), (1 << 20, t0, (1 << 63) - 1)):
            many, last_phy, last_ts = r.query_offsets_many(pairs, max_num, begin, end)
            one = [r.query_offsets(t, k, max_num, begin, end)[0] for t, k in pairs]
            assert many == one
            assert (last_phy, last_ts) == r.query_offsets("x", "y", 1, *ALL)[1:]
            covering = r.query_offsets_many(pairs, max_num, begin, end, covering=True)[0]
            assert all(set(a) <= set(b) for a, b in zip(many, covering))


@pytest.mark.parametrize("corpus", [pytest.param(c, id=c.name) for c in CORPORA])
def test_walk_of_many_keys_equals_one_walk_per_key_in_the_corpora(corpus):
    from rmqsource.store.config import StoreConfig
    config = StoreConfig.from_properties_file(str(corpus / "store.properties"))
    with MessageStoreReader(corpus / "store", config) as r:
        keys = ["AaAa", "BBBB", "no-such"] + [f"clé-{i}" for i in range(0, 300, 7)] + \
               [f"bulk-key-{i}" for i in range(100)]
        pairs = [(t, k) for t in r.topics() for k in keys]
        many = r.query_offsets_many(pairs, 1 << 10, *ALL)[0]
        assert many == [r.query_offsets(t, k, 1 << 10, *ALL)[0] for t, k in pairs]
        assert sum(map(len, many))


# --------------------------------------------------------------------------- plan()

@pytest.mark.parametrize("corpus", [pytest.param(c, id=c.name) for c in CORPORA])
def test_plan_of_keys_is_lookups(corpus):
    opts = parse_options(corpus_options(corpus, keys=json.dumps(["AaAa", "BBBB", "bulk-key-70", "no-such"])))
    parts = plan(opts, Pushed())
    assert parts and all(isinstance(p, Lookup) for p in parts)
    topic = parse_options(corpus_options(corpus, topics="TopicTest", keys='["AaAa"]'))
    assert all(isinstance(p, Lookup) and p.queues for p in plan(topic, Pushed()))
    # a key of no message: at most the point read of the last message indexed (its keys may be in the index
    # only in part), no range: the IndexFiles cover the whole CommitLog
    none = plan(parse_options(corpus_options(corpus, keys='["no-such-key"]')), Pushed())
    assert all(isinstance(p, Lookup) for p in none) and sum(len(p.offsets) for p in none) <= 1
    assert plan(parse_options(corpus_options(corpus, keys="[]")), Pushed()) == []


def test_plan_prunes_by_store_time_and_splits_large_lookups(sample, monkeypatch):
    records = sample_keys(sample)
    keys = sorted({ks[0] for _, _, ks, _ in records})
    opts = parse_options({"path": str(sample), "keys": json.dumps(keys)})
    monkeypatch.setattr(planning, "default_parallelism", lambda: 4)
    monkeypatch.setattr(lookup_planning, "MIN_LOOKUP_SPLIT_OFFSETS", 1000)
    parts = plan(opts, Pushed())
    assert len(parts) == 4 and all(isinstance(p, Lookup) for p in parts)
    assert sorted(o for p in parts for o in p.offsets) == sorted(phy for *_, phy in records)
    lo, hi = records[1000][1], records[3000][1]
    narrow = plan(opts, Pushed(store_ts=(lo, hi)))
    got = {o for p in narrow for o in p.offsets}
    assert {phy for _, ts, _, phy in records if lo <= ts < hi} <= got
    assert len(got) < 2500            # whole seconds of the IndexFile around the range, not the store


def test_plan_reads_the_store_past_the_cap_or_without_index(sample, monkeypatch, tmp_path):
    opts = parse_options({"path": str(sample), "keys": '["user-5", "order-1"]'})
    assert all(isinstance(p, Lookup) for p in plan(opts, Pushed()))
    monkeypatch.setattr(lookup_planning, "LOOKUP_MAX_HITS", 3)        # user-5 has more hits than that
    parts = plan(opts, Pushed())
    assert parts and not any(isinstance(p, Lookup) for p in parts)
    monkeypatch.undo()
    for extra in ({"indexLookups": "false"}, {"messageIndexEnable": "false"}, {"includeTransactional": "true"}):
        parts = plan(parse_options({"path": str(sample), "keys": '["order-1"]', **extra}), Pushed())
        assert parts and not any(isinstance(p, Lookup) for p in parts), extra


def test_ten_thousand_keys_plan_with_one_walk(sample, monkeypatch):
    """The keys are walked together: one query_offsets_many per store, not one walk per key and topic."""
    keys = [f"order-{i}" for i in range(10_000)]
    calls = []
    real = MessageStoreReader.query_offsets_many
    monkeypatch.setattr(MessageStoreReader, "query_offsets_many",
                        lambda self, pairs, *a, **k: (calls.append(len(pairs)), real(self, pairs, *a, **k))[1])
    monkeypatch.setattr(MessageStoreReader, "query_offsets", lambda *a, **k: pytest.fail("a walk per key"))
    plan(parse_options({"path": str(sample), "keys": json.dumps(keys)}), Pushed())
    assert calls == [4 * 10_000]


def test_plan_reads_past_the_index_end_as_a_range(tmp_path):
    """IndexFiles that end before the CommitLog (a live broker, or a crashed one's index not rebuilt yet): the
    hits below the end of the last message indexed, that message as a point read, and the rest of the CommitLog
    as ranges (topic reads: the planned queue ranges' units there); no offset planned twice."""
    from store_records import write_lagging_index_store
    from rmqsource.spark.planning import CommitLogRange, QueueRange, QueueRanges
    root = tmp_path / "store"
    covered, end = write_lagging_index_store(root)
    with MessageStoreReader(root) as r:
        last_size = r.commitlog.decode_at(covered)[0].record.store_size
    for pushed, options in ((Pushed(uniq_keys=frozenset(["no-such"])), {}), (Pushed(), {"keys": '["user-5"]'})):
        parts = plan(parse_options({"path": str(root), **options}), pushed)
        lookups = [p for p in parts if isinstance(p, Lookup)]
        ranges = [p for p in parts if isinstance(p, CommitLogRange)]
        assert lookups and all(o <= covered for p in lookups for o in p.offsets)
        assert covered in {o for p in lookups for o in p.offsets}
        assert sorted((p.start, p.end) for p in ranges)[0][0] == covered + last_size
        assert max(p.end for p in ranges) == end and len(parts) == len(lookups) + len(ranges)
        topics = plan(parse_options({"path": str(root), "topics": "OrderEvents", **options}), pushed)
        assert topics and all(isinstance(p, (Lookup, QueueRange, QueueRanges)) for p in topics)
        assert any(not isinstance(p, Lookup) for p in topics)
