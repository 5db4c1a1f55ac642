"""Batch-sink writes in one local Spark session that retries failed tasks (``local[2,2]``).

Run by test_spark_sink's retry tests: ``python sink_retry_child.py SPEC_JSON``, where the spec gives the
store and a list of writes, run one after the other; each gives its rows (``spark.range(rows,
numPartitions=partitions)``, body = the row's id), an optional ``writeId``, and ``failAt``: the id of a row
whose upstream function raises, in the task's first attempt only (``"always": true``: every attempt, so
the job fails); ``"verbatim": true`` writes with preserveStoreFields and a string ``properties`` column
(VERBATIM_PREFIX + the row's id, RocketMQ's wire form that no map expresses).  The rmq mode follows RMQ_SPARK_MODE; the sink's fault seam
(RMQSOURCE_TEST_SINK_FAULT_FILE) comes from the environment (one fault: before the first write).
Prints ``RESULT {"writes": [{"error": null | "<text>", "messages": n, "distinct": n}, ...]}``: the
error of each write and the store's messages of topic R after it.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


# Duplicate keys, an empty key, an entry without separator, then the row's id.
VERBATIM_PREFIX = "dup\x01a\x02dup\x01b\x02\x01empty\x02junk\x02id\x01"


def main() -> None:
    spec = json.loads(sys.argv[1])
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from rmqsource.spark.jar import session_conf
    spark = (SparkSession.builder.master("local[2,2]").appName("rmqsource-sink-retry")
             .config(map=session_conf()).config("spark.ui.enabled", "false")
             .config("spark.python.worker.reuse", "true").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    results = [dict(write(spark, spec["store"], w), **messages(spec["store"])) for w in spec["writes"]]
    print("RESULT " + json.dumps({"writes": results}), flush=True)
    spark.stop()


def write(spark, store: str, w: dict) -> dict:
    from pyspark.sql import functions as F
    fail_at, always = w.get("failAt"), w.get("always", False)

    def body(i):
        from pyspark import TaskContext
        if i == fail_at and (always or TaskContext.get().attemptNumber() == 0):
            raise ValueError(f"upstream failure at row {i}")
        return str(i).encode()

    df = spark.range(w["rows"], numPartitions=w["partitions"]).select(
        F.lit("R").alias("topic"), F.udf(body, "binary")("id").alias("body"))
    writer = df.write.format("rmq").mode("append").option("messageIndexEnable", "false")
    if w.get("verbatim"):
        df = df.withColumn("properties", F.concat(F.lit(VERBATIM_PREFIX), F.col("body").cast("string")))
        writer = df.write.format("rmq").mode("append").option("messageIndexEnable", "false") \
            .option("preserveStoreFields", "true")
    if w.get("writeId"):
        writer = writer.option("writeId", w["writeId"])
    try:
        writer.save(store)
    except Exception as exc:        # noqa: BLE001 - reported to the test
        return {"error": str(exc)[-3000:]}
    return {"error": None}


def messages(store: str) -> dict:
    from rmqsource.store.reader import MessageStoreReader
    bodies = []
    with MessageStoreReader(store) as rd:
        for t, q in rd.queue_keys():
            if t == "R":
                for res in rd.get_loop("check", t, q, 0, 1024):
                    bodies.extend(m.record.body for m in res.messages)
    return {"messages": len(bodies), "distinct": len(set(bodies))}


if __name__ == "__main__":
    main()
