"""The transactions view as both twins answer it: io.rmqsource.store.Transactions (driven through the session JVM)
gives the entries of rmqsource.store.transactions.transaction_entries, field by field, on every store of the
shared corpora (whole store, without RocketMQ's own real topics, and restricted to one real topic); and the JVM
scan's rows (spark/read/RmqTransactionsScan.java) are those entries, with the message columns of the record each
entry names."""

from __future__ import annotations

import datetime as dt
import glob
from pathlib import Path

import pytest
from py4j.java_gateway import get_field

from rmqsource.spark.schema import TRANSACTIONS_ARROW_SCHEMA
from rmqsource.store.config import StoreConfig
from rmqsource.store.reader import MessageStoreReader
from rmqsource.store.transactions import transaction_entries
from tests.support.jvm_twins import _Call, jvm_or_skip

pytestmark = pytest.mark.jvm

UTC = dt.timezone.utc
STORES = sorted(Path(p) for p in glob.glob("/work/shared/golden*/*/store"))
FIELDS = [("real_topic", "realTopic"), ("real_queue_id", "realQueueId"), ("uniq_key", "uniqKey"),
          ("transaction_id", "transactionId"), ("producer_group", "producerGroup"), ("state", "state"),
          ("check_times", "checkTimes"), ("half_copies", "halfCopies"), ("commits", "commits"),
          ("resolved_time_ms", "resolvedTimeMs"), ("open", "open"), ("phy_offset", "phyOffset"), ("size", "size"),
          ("queue_offset", "queueOffset"), ("tags_code", "tagsCode"), ("half_offset", "halfOffset")]


def config_of(store: Path) -> Path | None:
    for name in ("broker.properties", "store.properties"):
        if (store.parent / name).is_file():
            return store.parent / name
    return None


def python_entries(store: Path, topics=None, exclude_internal=False) -> list[tuple]:
    cfg = config_of(store)
    config = StoreConfig.from_properties_file(cfg) if cfg else StoreConfig()
    with MessageStoreReader(store, config) as reader:
        return [tuple(getattr(e, f) for f, _ in FIELDS)
                for e in transaction_entries(reader, topics, exclude_internal=exclude_internal)]


def jvm_entries(jvm, store: Path, topics=None, exclude_internal=False) -> list[tuple]:
    cfg = config_of(store)
    with _Call():
        config = (jvm.io.rmqsource.store.StoreConfig.fromPropertiesFile(str(cfg), jvm.java.util.HashMap()) if cfg
                  else jvm.io.rmqsource.store.StoreConfig.defaults())
        wanted = None
        if topics is not None:
            wanted = jvm.java.util.HashSet()
            for t in topics:
                wanted.add(t)
        reader = jvm.io.rmqsource.store.StoreReader(str(store), config, None)
        try:
            got = jvm.io.rmqsource.store.Transactions.entries(reader, wanted, exclude_internal)
            return [tuple(get_field(e, j) for _, j in FIELDS) for e in got]
        finally:
            reader.close()


@pytest.fixture(scope="module")
def jvm(request):
    return jvm_or_skip(request)


@pytest.mark.parametrize("store", STORES, ids=lambda p: p.parent.name)
def test_entries_equal_the_python_ones(jvm, store):
    for exclude in (False, True):
        want = python_entries(store, exclude_internal=exclude)
        assert jvm_entries(jvm, store, exclude_internal=exclude) == want
    every = python_entries(store)
    if every:
        topic = every[0][0]
        want = python_entries(store, [topic])
        assert want and jvm_entries(jvm, store, [topic]) == want


def ms(ts):
    if ts is None:
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return (ts - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(milliseconds=1)


@pytest.mark.parametrize("store", STORES, ids=lambda p: p.parent.name)
def test_the_jvm_scan_rows_are_the_entries(jvm, spark, store):
    cfg = config_of(store)
    r = spark.read.format("rmq").option("view", "transactions")
    if cfg:
        r = r.option("config", str(cfg))
    df = r.load(str(store))
    assert df.columns == TRANSACTIONS_ARROW_SCHEMA.names
    rows = df.collect()
    want = python_entries(store, exclude_internal=True)
    # the JVM scan answers on the driver (a LocalScan: Spark plans its rows as a LocalTableScan)
    assert "LocalTableScan" in df._jdf.queryExecution().executedPlan().toString()
    got = [(x.topic, x.queueId, x.uniqKey, x.transactionId, x.producerGroup, x.state, x.checkTimes, x.halfCopies,
            x.commits, ms(x.resolvedTime), x.open, x.commitLogOffset, x.storeSize, x.queueOffset, x.tagsCode,
            x.halfCommitLogOffset) for x in rows]
    assert got == want
    with MessageStoreReader(store, StoreConfig.from_properties_file(cfg) if cfg else StoreConfig()) as reader:
        for x in rows:
            rec = reader.commitlog.read_message(x.commitLogOffset)
            assert bytes(x.body) == rec.body and dict(x.properties) == rec.properties


@pytest.mark.parametrize("options, stream", [
    ({"topics": "T", "view": "transactions", "startingTimestamp": "5"}, False),
    ({"queues": "T:0", "view": " Transactions"}, False),
    ({"topics": "T", "view": "transactions"}, True),
    ({"topics": "T", "view": "transaction"}, False),
])
def test_the_option_parsers_refuse_alike(jvm, tmp_path, options, stream):
    from rmqsource.errors import OptionError
    from rmqsource.spark.options import parse_options
    from rmqsource.spark.stream_options import parse_stream_options
    options = {"path": str(tmp_path), **options}
    with pytest.raises(OptionError) as want:
        (parse_stream_options if stream else parse_options)(options)
    m = jvm.java.util.LinkedHashMap()
    for k, v in options.items():
        m.put(k, v)
    with pytest.raises(OptionError) as got, _Call():
        if stream:
            jvm.io.rmqsource.spark.stream.RmqStreamOptions.parse(m)
        else:
            jvm.io.rmqsource.spark.RmqOptions.parse(m)
    assert str(got.value) == str(want.value)
