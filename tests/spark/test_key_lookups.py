"""Lookups by key (docs/reading.md#lookups-by-key): the options ``keys`` / ``keysFile`` of a batch read.

The rows of ``option("keys", json.dumps(ks))`` are the rows of the same read without the option whose
``keys`` column holds one of ``ks`` (filtered here in Python), over the golden corpora (RocketMQ's own
stores: hash-colliding keys such as AaAa / BBBB, keys in several topics, retried copies in RocketMQ's own
topics) and a sample store (keys ``order-N user-M``). Public behaviour only: both Spark modes run this file
(that the Python path answers through the IndexFiles is tests/unit/test_key_lookups_plan.py).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from golden import corpora

CORPORA = corpora()


def load(spark, store: Path, config: Path | None = None, **options):
    r = spark.read.format("rmq")
    if config is not None:
        r = r.option("config", str(config))
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(str(store))


def corpus_read(spark, corpus: Path, **options):
    return load(spark, corpus / "store", corpus / "store.properties", **options)


def rows(df) -> list[tuple]:
    return sorted((r.commitLogOffset, tuple(r["keys"] or ())) for r in df.select("commitLogOffset", "keys").collect())


def assert_keys_read(df_of, ks: frozenset) -> list[tuple]:
    """``df_of(**options)``: the read with ``keys`` (and with indexLookups=false) equals the full read
    filtered by Python; returns the rows."""
    want = [r for r in rows(df_of()) if set(r[1]) & ks]
    got = rows(df_of(keys=json.dumps(sorted(ks))))
    assert got == want
    assert rows(df_of(keys=json.dumps(sorted(ks)), indexLookups="false")) == want
    return want


def corpus_keys(spark, corpus: Path, **options) -> list[str]:
    return sorted({k for _, ks in rows(corpus_read(spark, corpus, **options)) for k in ks})


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory) -> Path:
    from rmqsource.sample import write_sample_store
    root = tmp_path_factory.mktemp("key-lookups") / "store"
    write_sample_store(root, 30_000)
    return root


@pytest.mark.compat
@pytest.mark.parametrize("corpus", [pytest.param(c, id=c.name) for c in CORPORA])
def test_a_few_keys_and_keys_of_no_message(spark, corpus):
    keys = corpus_keys(spark, corpus)
    picked = frozenset(random.Random(7).sample(keys, 6))
    assert assert_keys_read(lambda **o: corpus_read(spark, corpus, **o), picked)
    # hash-colliding keys ("AaAa" and "BBBB" share String.hashCode), all keys, keys of no message
    for ks in (frozenset(k for k in ("AaAa", "BBBB") if k in keys) or picked, frozenset(keys),
               frozenset(["no-such-key", "AaBB", keys[0] + "-not"])):
        assert_keys_read(lambda **o: corpus_read(spark, corpus, **o), ks)
    assert corpus_read(spark, corpus, keys=json.dumps(["no-such-key"])).count() == 0


@pytest.mark.parametrize("corpus", [pytest.param(c, id=c.name) for c in CORPORA])
def test_keys_follow_other_options_and_filters(spark, corpus):
    keys = corpus_keys(spark, corpus, excludeInternalTopics="false")
    ks = frozenset(random.Random(11).sample(keys, min(40, len(keys))))
    # RocketMQ's own topics (a retried copy keeps its keys) are left out unless asked for
    assert_keys_read(lambda **o: corpus_read(spark, corpus, excludeInternalTopics="false", **o), ks)
    # a topics option
    topics = sorted({r.topic for r in corpus_read(spark, corpus).select("topic").distinct().collect()})
    assert_keys_read(lambda **o: corpus_read(spark, corpus, topics=topics[0], **o), ks)
    assert_keys_read(lambda **o: corpus_read(spark, corpus, topicPattern=".*Topic.*", **o), ks)
    # a storeTimestamp range (the IndexFiles outside it are pruned), a tags filter, a queueId filter
    times = sorted(r.t for r in corpus_read(spark, corpus).selectExpr("unix_millis(storeTimestamp) AS t").collect())
    lo, hi = times[len(times) // 4], times[3 * len(times) // 4]
    where = f"storeTimestamp >= timestamp_millis({lo}) AND storeTimestamp < timestamp_millis({hi})"
    assert assert_keys_read(lambda **o: corpus_read(spark, corpus, **o).where(where), frozenset(keys))
    tags = [r.tags for r in corpus_read(spark, corpus).where("tags IS NOT NULL").select("tags").limit(1).collect()]
    assert_keys_read(lambda **o: corpus_read(spark, corpus, **o).where(f"tags = '{tags[0]}'"), frozenset(keys))
    assert_keys_read(lambda **o: corpus_read(spark, corpus, **o).where("queueId = 1"), frozenset(keys))


def test_sample_store_keys_file_of_2000_keys(spark, sample_store, tmp_path):
    all_rows = rows(load(spark, sample_store))
    keys = sorted({k for _, ks in all_rows for k in ks if k.startswith("order-")})
    ks = random.Random(3).sample(keys, 2000)
    path = tmp_path / "keys.txt"
    # one key a line; blank lines and the spaces around a key are ignored
    path.write_text("\n".join(ks[:1000]) + "\n\n  \n" + "\n".join(f" {k}\r" for k in ks[1000:]) + "\n",
                    encoding="utf-8")
    want = [r for r in all_rows if set(r[1]) & set(ks)]
    assert len(want) >= 2000
    assert rows(load(spark, sample_store, keysFile=str(path))) == want
    assert rows(load(spark, sample_store, keysFile=path.as_uri())) == want
    assert rows(load(spark, sample_store, keysFile=str(path), indexLookups="false")) == want


def test_sample_store_prefix_keys_and_shared_keys(spark, sample_store):
    df_of = lambda **o: load(spark, sample_store, **o)  # noqa: E731
    all_keys = {k for _, ks in rows(df_of()) for k in ks}
    # "order-1" is a prefix of "order-12..." (and of keys no message holds): only exact keys match
    prefix = next(k for k in sorted(all_keys) if k.startswith("order-") and any(
        o != k and o.startswith(k) for o in all_keys))
    assert assert_keys_read(df_of, frozenset([prefix]))
    assert_keys_read(df_of, frozenset([prefix[:-1], prefix + "0"]))
    # a key many messages share (user-M), with a topics option and tags
    assert len(assert_keys_read(df_of, frozenset(["user-5", "user-6"]))) > 20
    assert assert_keys_read(lambda **o: df_of(topics="OrderEvents,ClickStream", **o).where("tags IN ('paid', 'viewed')"),
                            frozenset(["user-5", "user-6", prefix]))


def test_an_empty_key_list_reads_no_rows(spark, sample_store, tmp_path):
    assert load(spark, sample_store, keys="[]").count() == 0
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    assert load(spark, sample_store, keysFile=str(empty)).count() == 0


@pytest.fixture(scope="module")
def lagging_index_store(tmp_path_factory) -> Path:
    from store_records import write_lagging_index_store
    root = tmp_path_factory.mktemp("key-lookups-lagging-index") / "store"
    write_lagging_index_store(root)
    return root


@pytest.mark.parametrize("options", [{}, {"topics": "OrderEvents,PaymentEvents"}], ids=["whole-store", "topics"])
def test_keys_of_messages_past_the_index_end_are_found(spark, lagging_index_store, options):
    """The CommitLog runs on past what the IndexFiles cover (a live broker's, or a crashed one's, whose index
    has not caught up): the keys of those messages are found all the same, each message once."""
    def df_of(**o):
        return load(spark, lagging_index_store, **options, **o)

    every = rows(df_of())
    keys = sorted({k for _, ks in every for k in ks})
    offsets = sorted(off for off, _ in every)
    tail = [ks for off, ks in every if off >= offsets[-len(offsets) // 8]]     # the last messages: unindexed
    picked = frozenset(random.Random(5).sample(keys, 30)) | {ks[0] for ks in tail[-20:]} | {tail[0][1]}
    got = assert_keys_read(df_of, picked)
    assert len({off for off, _ in got}) == len(got)
    assert any(off >= offsets[-len(offsets) // 8] for off, _ in got)


@pytest.mark.parametrize("value", ['"order-1"', "order-1", '{"a": 1}', "[1, 2]", '["a", null]', "[\"a\""])
def test_a_bad_keys_value_is_refused_naming_the_option(spark, sample_store, value):
    with pytest.raises(Exception, match=r"option keys"):
        load(spark, sample_store, keys=value).collect()


def test_keys_with_a_space_keys_and_keysfile_together_and_views_are_refused(spark, sample_store, tmp_path):
    with pytest.raises(Exception, match=r"(?s)option keys.*space"):
        load(spark, sample_store, keys=json.dumps(["order-1 user-2"])).collect()
    path = tmp_path / "keys.txt"
    path.write_text("order-1\norder-2 user-3\n", encoding="utf-8")
    with pytest.raises(Exception, match=r"(?s)option keysFile.*space"):
        load(spark, sample_store, keysFile=str(path)).collect()
    with pytest.raises(Exception, match=r"keys and keysFile"):
        load(spark, sample_store, keys='["order-1"]', keysFile=str(path)).collect()
    with pytest.raises(Exception, match=r"(?s)keysFile.*(no such file|not found|does not exist)"):
        load(spark, sample_store, keysFile=str(tmp_path / "missing.txt")).collect()
    for option, value in (("view", "timers"), ("metadata", "queues")):
        with pytest.raises(Exception, match=r"(?s)keys"):
            load(spark, sample_store, keys='["order-1"]', **{option: value}).collect()


def test_a_stream_refuses_the_key_options(spark, sample_store, tmp_path):
    for option, value in (("keys", '["order-1"]'), ("keysFile", str(tmp_path / "k.txt"))):
        with pytest.raises(Exception, match=rf"(?s)option {option}.*batch"):
            df = (spark.readStream.format("rmq").option("topics", "OrderEvents").option(option, value)
                  .load(str(sample_store)))
            q = df.writeStream.format("memory").queryName(f"key_lookup_{option}").start()
            try:
                q.processAllAvailable()
            finally:
                q.stop()
