"""One run of a streaming query into an rmq store, in the mode RMQ_SPARK_MODE names (jvm: the JVM sink,
python: the Python sink), for the interop tests (test_spark_sink_interop.py).

``python sink_stream_child.py SRC_DIR STORE CHECKPOINT``: reads the JSON files of SRC_DIR (one file per
micro-batch: ``{"i": n}`` lines), writes topic OUT with body = str(i) through ``writeStream.format("rmq")``
with ``trigger(availableNow=True)``.  The sink's fault seam (RMQSOURCE_TEST_SINK_FAULT_FILE) comes from
the environment.  Prints ``RESULT {"error": null | "<text>"}``.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def main() -> None:
    src, store, ckpt = sys.argv[1:4]
    from pyspark.sql import SparkSession
    from rmqsource.spark.jar import session_conf
    spark = (SparkSession.builder.master("local[2]").appName("rmqsource-sink-interop")
             .config(map=session_conf()).config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    df = (spark.readStream.schema("i long").option("maxFilesPerTrigger", 1).json(src)
          .selectExpr("'OUT' AS topic", "CAST(CAST(i AS STRING) AS BINARY) AS body", "'t' AS tags"))
    q = (df.writeStream.format("rmq").option("checkpointLocation", ckpt).trigger(availableNow=True)
         .start(store))
    error = None
    try:
        q.awaitTermination(300)
        if q.exception() is not None:
            error = str(q.exception())[-3000:]
    except Exception as exc:          # noqa: BLE001 - reported to the test
        error = str(exc)[-3000:]
    print("RESULT " + json.dumps({"error": error}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
