"""Shared fixtures: one local SparkSession for every spark test."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    # The streaming sink's fault seam (see rmqsource.spark.sink.FAULT_ENV): set before the JVM starts so
    # Spark's Python workers inherit it; tests write a one-shot fault spec into this file.
    os.environ.setdefault("RMQSOURCE_TEST_SINK_FAULT_FILE", str(tmp_path_factory.mktemp("faults") / "sink-fault"))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    session = (SparkSession.builder
               .master("local[2]")
               .appName("rmqsource-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.python.filterPushdown.enabled", "true")
               .config("spark.python.worker.reuse", "true")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "2g")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
