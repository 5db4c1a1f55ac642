"""A snapshot read by ``spark.read.format("rmq")`` equals the source read, in the Spark mode under test:
the whole store (a CommitLog walk), topic reads (ConsumeQueue ranges) and a key lookup, after a first
snapshot and after an incremental one into the same DEST."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from rmqsource.sample import write_sample_store
from rmqsource.store.config import StoreConfig
from rmqsource.store.snapshot import snapshot_store

pytestmark = pytest.mark.spark

CONFIG = {"mappedFileSizeCommitLog": 1024 * 1024, "mappedFileSizeConsumeQueue": 6000}
COLUMNS = ["topic", "queueId", "queueOffset", "commitLogOffset", "msgId", "keys", "tags", "storeTimestamp"]


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    base = tmp_path_factory.mktemp("snapshot-spark")
    source, dest = base / "store", base / "snap"
    config = StoreConfig.from_mapping(CONFIG)
    write_sample_store(str(source), 4000, config=config)
    first = snapshot_store(source, str(dest), config)
    write_sample_store(str(source), 1500, config=config, seed=3)
    second = snapshot_store(source, str(dest), config)
    assert 0 < first["validEnd"] < second["validEnd"]
    return source, dest


def load(spark, path, **options):
    reader = spark.read.format("rmq")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(path))


def rows(df):
    present = [c for c in COLUMNS if c in df.columns]
    return sorted(tuple(r) for r in df.select(*present, F.sha2(F.col("body"), 256)).collect())


def test_snapshot_reads_as_its_source(spark, stores):
    source, dest = stores
    want = rows(load(spark, source))
    assert len(want) == 5500
    assert rows(load(spark, dest)) == want
    for topic in sorted({r[0] for r in want}):
        assert rows(load(spark, dest, topics=topic)) == rows(load(spark, source, topics=topic)) \
            == [r for r in want if r[0] == topic]
    msg_id = want[len(want) // 2][4]
    one = load(spark, dest).where(F.col("msgId") == msg_id)
    assert rows(one) == [r for r in want if r[4] == msg_id]


def test_snapshot_of_rocksdb_queues_reads_as_its_source(spark, tmp_path):
    """A store whose ConsumeQueues are a RocksDB database (the golden broker corpus, read in place): the
    snapshot's copied database serves the same topic reads as the source's."""
    pytest.importorskip("rocksdict")
    from golden import GOLDEN_BROKER_ROOT
    corpus = GOLDEN_BROKER_ROOT / "rmq550-b2-rocksdb-v2-lmq"
    if not (corpus / "store").is_dir():
        pytest.skip(f"no {corpus}")
    config = StoreConfig.from_properties_file(corpus / "broker.properties")
    dest = tmp_path / "snap"
    snapshot_store(corpus / "store", str(dest), config)
    want = rows(load(spark, corpus / "store"))
    assert want and rows(load(spark, dest)) == want
    for topic in ("rb_topic_0", "rb_topic_3"):
        got = rows(load(spark, dest, topics=topic))
        assert got and got == rows(load(spark, corpus / "store", topics=topic))
