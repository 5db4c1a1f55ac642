"""Golden bytes through the Spark sink: every golden corpus's inputs, written by ``df.write.format("rmq")``
with ``preserveStoreFields``, give the real engine's CommitLog and ConsumeQueue bytes and IndexFile
contents, as ``rmq put`` does (tests/test_writer_golden.py).

The session's mode picks the sink: RMQ_SPARK_MODE=jvm writes through the JVM sink, =python through the
Python sink (scripts/test.sh runs both).  Every input whose expected put status is PUT_OK goes through the
sink in one partition, in order (a refused input takes no bytes).  The ``properties`` column is a string
in RocketMQ's wire form: an input's verbatim ``propertiesString`` as given (duplicate or empty keys, junk
without a separator, trailing separators: no properties map expresses those), else TAGS, KEYS and the map
serialized as the writer does (``input_view``).  A map the string cannot stand for goes as a map: on a
4.x store a delayed message's properties are re-parsed for the SCHEDULE_TOPIC rewrite, and parsing drops
an empty value that the map keeps (the writer's own checks tell: the message prepared from the string
must equal the one prepared from the map).  Consecutive rows of one form are one write; the writes append
to one store in order, so the store is that of a single put sequence.
"""

from __future__ import annotations

import base64
import json

import pytest

from rmqsource.format.message import MessageExtBrokerInner
from rmqsource.store.config import StoreConfig
from rmqsource.store.put_checks import Prepared, PutChecks, input_view

from golden import GOLDEN_ROOT, writable_names
from test_writer_golden import assert_same_store

pytestmark = [pytest.mark.golden, pytest.mark.spark]

FIELDS = ("topic string, queueId int, body binary, flag int, bornTimestamp bigint, bornHost string, "
          "storeHost string, storeTimestamp bigint, sysFlag int, reconsumeTimes int, "
          "preparedTransactionOffset bigint")
STRING_SCHEMA = FIELDS + ", properties string"
MAP_SCHEMA = FIELDS + ", tags string, keys string, pk array<string>, pv array<string>"


def _same_prepared(checks: PutChecks, a: MessageExtBrokerInner, b: MessageExtBrokerInner) -> bool:
    pa_, pb = checks.prepare(a), checks.prepare(b)
    return isinstance(pa_, Prepared) and isinstance(pb, Prepared) and \
        all(getattr(pa_, s) == getattr(pb, s) for s in Prepared.__slots__)


def _runs(corpus: str):
    """The corpus's PUT_OK inputs as sink rows, in runs of one form: [(is_string, rows)], and the count
    of verbatim propertiesString rows and of map rows (those the string cannot stand for)."""
    config = StoreConfig.from_properties_file(GOLDEN_ROOT / corpus / "store.properties", {"brokerPutHooks": "false"})
    checks = PutChecks(config, config.mapped_file_size_commit_log_bytes)
    with open(GOLDEN_ROOT / corpus / "inputs.jsonl", encoding="utf-8") as f:
        inputs = [json.loads(line) for line in f]
    with open(GOLDEN_ROOT / corpus / "expected" / "put.jsonl", encoding="utf-8") as f:
        statuses = [json.loads(line).get("status") for line in f][:len(inputs)]
    runs: list[tuple[bool, list]] = []
    verbatim = maps = 0
    for d, status in zip(inputs, statuses):
        if status != "PUT_OK":
            continue
        fields = (d["topic"], int(d.get("queueId", 0)), base64.b64decode(d.get("body") or ""),
                  int(d.get("flag", 0)), int(d.get("bornTimestamp", 0)), d.get("bornHost"), d.get("storeHost"),
                  d.get("storeTimestamp"), int(d.get("sysFlag", 0)), int(d.get("reconsumeTimes", 0)),
                  int(d.get("preparedTransactionOffset", 0)))
        m = MessageExtBrokerInner.from_json_dict(d)
        if isinstance(m.properties, str):
            verbatim += 1
            row, string = fields + (m.properties,), True
        else:
            text = input_view(m, config.trailing_property_separator)[1]
            as_string = MessageExtBrokerInner.from_json_dict(
                {**{k: v for k, v in d.items() if k not in ("tags", "keys", "properties")}, "propertiesString": text})
            string = _same_prepared(checks, m, as_string)
            props = m.properties or {}
            row = fields + (text,) if string else fields + (m.tags, m.keys, list(props), list(props.values()))
            maps += not string
        if not runs or runs[-1][0] != string:
            runs.append((string, []))
        runs[-1][1].append(row)
    return runs, verbatim, maps


@pytest.mark.parametrize("corpus", writable_names())
def test_golden_inputs_through_the_sink_give_the_engine_bytes(spark, corpus, tmp_path):
    from pyspark.sql import functions as F
    runs, verbatim, maps = _runs(corpus)
    root = tmp_path / "store"
    for string, rows in runs:
        df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 1), STRING_SCHEMA if string else MAP_SCHEMA)
        if not string:                   # the map built in Spark from two arrays keeps their order
            df = df.withColumn("properties", F.map_from_arrays("pk", "pv")).drop("pk", "pv")
        (df.write.format("rmq").mode("append").option("config", str(GOLDEN_ROOT / corpus / "store.properties"))
         .option("preserveStoreFields", "true").option("brokerPutHooks", "false").save(str(root)))
    assert_same_store(GOLDEN_ROOT / corpus / "store", root)
    print(f"{corpus}: {sum(len(r) for _, r in runs)} rows through the sink in {len(runs)} writes; "
          f"{verbatim} verbatim propertiesString, {maps} as a map")
