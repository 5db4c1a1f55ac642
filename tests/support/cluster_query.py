"""Run the cluster-comparison query against a Spark master and print its rows as JSON.

usage: cluster_query.py MASTER_URL STORE CONFIG_PROPERTIES
Runs in its own process: one SparkContext per Python process.
"""

import json
import os
import sys

from pyspark.sql import SparkSession

from cluster_workload import query_rows
from rmqsource.spark.jar import session_conf


def main() -> None:
    master, store, config = sys.argv[1:4]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(master).appName("rmqsource-cluster-test")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.executor.memory", "1g").config("spark.executor.cores", "1")
             .config("spark.cores.max", "2").config("spark.task.maxFailures", "1")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config(map=session_conf())   # the jar (shipped to the executors) in jvm mode
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    try:
        result = query_rows(spark, store, config)
        # Executors register asynchronously: count them once the query has run on them.
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()
        print(json.dumps({"executors": executors, "result": result}))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
