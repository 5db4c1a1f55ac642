"""The mode the run announces (RMQ_SPARK_MODE, see conftest) is the implementation Spark really uses."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from golden import corpora
from rmqsource.spark.jar import has_native_scan, jar_path, relation_classes, spark_mode

pytestmark = pytest.mark.spark

PYTHON_TABLE = "org.apache.spark.sql.execution.datasources.v2.python.PythonTable"
PYTHON_SCAN = "org.apache.spark.sql.execution.datasources.v2.python.PythonScan"


def test_format_rmq_runs_the_announced_provider(spark):
    corpus = corpora()[0]
    df = spark.read.format("rmq").option("config", str(corpus / "store.properties")).load(str(corpus / "store"))
    [(table, scan)] = relation_classes(df.where("queueId = 0"))
    jars = spark.sparkContext.getConf().get("spark.jars", "")
    if spark_mode() == "jvm":
        assert jar_path() in jars.split(",")
        assert table == "io.rmqsource.spark.RmqTable"
        if has_native_scan(jar_path()):
            assert scan.startswith("io.rmqsource.spark."), scan
        else:
            assert scan == PYTHON_SCAN
    else:
        assert "rmqsource-spark" not in jars
        assert (table, scan) == (PYTHON_TABLE, PYTHON_SCAN)
    assert df.where("queueId = 0").count() > 0


@pytest.mark.slow
@pytest.mark.skipif(spark_mode() != "jvm", reason="with the jar; on the Python data source the workers import rmqsource")
def test_with_the_jar_a_worker_python_without_rmqsource_reads(spark, tmp_path):
    """With the jar nothing of rmq runs in Python: workers whose Python lacks rmqsource read the same rows."""
    corpus = corpora()[0]
    store = str(corpus / "store")
    script = textwrap.dedent(f"""
        from pyspark.sql import SparkSession
        from rmqsource.spark.jar import session_conf
        spark = SparkSession.builder.master("local[1]").config(map=session_conf()) \\
            .config("spark.ui.enabled", "false").getOrCreate()
        print("COUNT", spark.read.format("rmq").load({store!r}).count())
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_DRIVER_PYTHON"}   # it would win in local mode
    env["PYSPARK_PYTHON"] = other = "/usr/bin/python3"
    if not os.path.exists(other) or subprocess.run([other, "-c", "import rmqsource"], cwd=tmp_path,
                                                   capture_output=True).returncode == 0:
        pytest.skip("needs a Python without rmqsource")
    # cwd: not the checkout, whose rmqsource/ a worker started there could import from its cwd
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = [int(ln.split()[1]) for ln in done.stdout.splitlines() if ln.startswith("COUNT ")]
    assert counts == [spark.read.format("rmq").load(store).count()], done.stdout[-3000:]
