"""Golden bytes through the Spark sink: every golden corpus's inputs, written by ``df.write.format("rmq")``
with ``preserveStoreFields``, give the real engine's CommitLog and ConsumeQueue bytes and IndexFile
contents, as ``rmq put`` does (tests/test_writer_golden.py).

The session's mode picks the sink: RMQ_SPARK_MODE=jvm writes through the JVM sink, =python through the
Python sink (scripts/test.sh runs both).  The rows whose expected put status is PUT_OK go in one
partition, in order (a refused input takes no bytes).  An input given as a verbatim ``propertiesString``
goes through the properties map when the map gives back the same string; one the map cannot express
(duplicate or empty keys, junk without a separator) is left out, and the store is then compared with the
engine's twin writer (judged by test_writer_golden.py) given the same rows, since every later offset moves.
"""

from __future__ import annotations

import base64
import json

import pytest

from rmqsource.format.message import MessageExtBrokerInner
from rmqsource.format.properties import KEYS, TAGS
from rmqsource.store.config import StoreConfig
from rmqsource.store.put_checks import input_view
from rmqsource.store.writer import MessageStoreWriter

from golden import GOLDEN_ROOT, writable_names
from test_writer_golden import assert_same_store

pytestmark = [pytest.mark.golden, pytest.mark.spark]

SCHEMA = ("topic string, queueId int, body binary, flag int, tags string, keys string, pk array<string>, "
          "pv array<string>, bornTimestamp bigint, bornHost string, storeHost string, storeTimestamp bigint, "
          "sysFlag int, reconsumeTimes int, preparedTransactionOffset bigint")


def _as_map(d: dict, trailing: bool):
    """(tags, keys, ordered properties) giving back ``d``'s propertiesString, or None when no map does."""
    text = d["propertiesString"]
    entries = [e.split("\x01", 1) for e in text.split("\x02") if e]
    if any(len(e) != 2 or not e[0] or not e[1] for e in entries) or \
            len({k for k, _ in entries}) != len(entries):
        return None
    props = dict(entries)
    tags, keys = props.pop(TAGS, None), props.pop(KEYS, None)
    m = MessageExtBrokerInner(topic=d["topic"], queue_id=0, tags=tags, keys=keys, properties=props)
    return (tags, keys, props) if input_view(m, trailing)[1] == text else None


def _rows(corpus: str):
    """The corpus's PUT_OK inputs as sink rows, and the inputs left out (their index)."""
    config = StoreConfig.from_properties_file(GOLDEN_ROOT / corpus / "store.properties")
    trailing = config.trailing_property_separator
    with open(GOLDEN_ROOT / corpus / "inputs.jsonl", encoding="utf-8") as f:
        inputs = [json.loads(line) for line in f]
    with open(GOLDEN_ROOT / corpus / "expected" / "put.jsonl", encoding="utf-8") as f:
        statuses = [json.loads(line).get("status") for line in f][:len(inputs)]
    rows, used, left_out = [], [], []
    for i, (d, status) in enumerate(zip(inputs, statuses)):
        if status != "PUT_OK":
            continue
        tags, keys, props = d.get("tags"), d.get("keys"), d.get("properties") or {}
        if "propertiesString" in d:
            mapped = _as_map(d, trailing)
            if mapped is None:
                left_out.append(i)
                continue
            tags, keys, props = mapped
        rows.append((d["topic"], int(d.get("queueId", 0)), base64.b64decode(d.get("body") or ""),
                     int(d.get("flag", 0)), tags, keys, list(props), list(props.values()),
                     int(d.get("bornTimestamp", 0)), d.get("bornHost"), d.get("storeHost"), d.get("storeTimestamp"),
                     int(d.get("sysFlag", 0)), int(d.get("reconsumeTimes", 0)),
                     int(d.get("preparedTransactionOffset", 0))))
        used.append(d)
    return config, rows, used, left_out


def _commit_log_bytes(store, end: int) -> bytes:
    """The store's CommitLog bytes [0, end), across its segments in order."""
    out = b"".join(p.read_bytes() for p in sorted((store / "commitlog").iterdir()))
    assert len(out) >= end
    return out[:end]


@pytest.mark.parametrize("corpus", writable_names())
def test_golden_inputs_through_the_sink_give_the_engine_bytes(spark, corpus, tmp_path):
    from pyspark.sql import functions as F
    config, rows, used, left_out = _rows(corpus)
    root = tmp_path / "store"
    # One partition, in order; the properties map built in Spark from two arrays keeps its order.
    df = (spark.createDataFrame(spark.sparkContext.parallelize(rows, 1), SCHEMA)
          .withColumn("properties", F.map_from_arrays("pk", "pv")).drop("pk", "pv"))
    (df.write.format("rmq").mode("append").option("config", str(GOLDEN_ROOT / corpus / "store.properties"))
     .option("preserveStoreFields", "true").save(str(root)))
    if not left_out:
        assert_same_store(GOLDEN_ROOT / corpus / "store", root)
        return
    # Up to the first input left out, the CommitLog is the engine's, byte for byte.
    with open(GOLDEN_ROOT / corpus / "expected" / "put.jsonl", encoding="utf-8") as f:
        first_moved = [json.loads(line) for line in f][left_out[0]]["commitLogOffset"]
    assert 0 < first_moved and _commit_log_bytes(root, first_moved) == \
        _commit_log_bytes(GOLDEN_ROOT / corpus / "store", first_moved)
    # Inputs left out move every later offset: the engine's twin writer, given the same rows, is the judge.
    expected = tmp_path / "expected"
    with MessageStoreWriter(expected, config) as w:
        results = w.put_messages([MessageExtBrokerInner.from_json_dict(d) for d in used])
    assert all(r.status.value == "PUT_OK" for r in results)
    assert_same_store(expected, root)
    print(f"{corpus}: {len(rows)} rows through the sink; inputs {left_out} (propertiesString no map gives) left out")
