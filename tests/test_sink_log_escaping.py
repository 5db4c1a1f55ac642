"""Both sinks write the sink log as Python's ``json.dumps(doc, indent=1, sort_keys=True)``: the same bytes.

A key holding U+007F is the edge: json.dumps (ensure_ascii) escapes everything outside U+0020..U+007E, so
DEL is written ``\\u007f``; an escaper that keeps U+007F as it is would write a raw DEL byte and the two
sinks' logs of one store would differ. The log is started by the Python streaming sink (a query id with
DEL in it), then a batch write through ``format("rmq")`` (the JVM sink in jvm mode) loads it and saves it
again; the file must be what the Python sink writes for the same document.
"""

from __future__ import annotations

import json

import pytest

from rmqsource.spark.sink import RmqStreamWriter, SinkCommitMessage, SinkLog

pytestmark = pytest.mark.spark

QUERY_ID = "q\x7fid"


def _python_log_bytes(root, doc) -> bytes:
    log = SinkLog(str(root))
    (root / "config").mkdir(parents=True, exist_ok=True)
    log.save(doc)
    with open(log.path, "rb") as f:
        return f.read()


def test_sink_log_key_with_del_is_byte_identical_between_the_sinks(spark, tmp_path):
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType
    store = tmp_path / "store"
    (store / "config").mkdir(parents=True)
    schema = StructType([StructField("topic", StringType()), StructField("body", BinaryType())])
    # the Python streaming sink commits a batch of a query whose id holds DEL
    RmqStreamWriter({"path": str(store)}, schema, False).commit(
        [SinkCommitMessage(partition_id=0, rows=1, batch_id=1, query_id=QUERY_ID)], 1)
    log = SinkLog(str(store))
    with open(log.path, "rb") as f:
        python_written = f.read()
    assert b"\\u007f" in python_written and b"\x7f" not in python_written
    # a named batch write through format("rmq") loads that log and saves it with its own entry
    spark.createDataFrame([("T", b"x")], schema).write.format("rmq").option("writeId", "w1") \
        .mode("append").save(str(store))
    with open(log.path, "rb") as f:
        written = f.read()
    doc = json.loads(written.decode("utf-8"))
    assert QUERY_ID in doc["queries"] and "write:w1" in doc["writes"], doc
    assert b"\x7f" not in written, written
    assert written == _python_log_bytes(tmp_path / "python", doc)
