"""``format("rmq")`` through Spark Connect: a local Connect server started from the installed pyspark.

The server is what pyspark's ``sbin/start-connect-server.sh`` runs: ``spark-submit --class
SparkConnectServer`` (here in the foreground, so the test owns the JVM's process and ends it);
a separate JVM, as on a cluster. This process is a thin Connect client. In jvm mode the server has the jar on
``spark.jars``; in python mode it finds the Python data source through its Python
(``PYSPARK_PYTHON``), which has rmqsource. Rows are judged by the engines' ``expected/get``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from golden import case_id, corpora
from rmqsource.spark.jar import JAR_NAME, session_conf, session_jar
from test_spark_batch import assert_row_equals_engine, expected_messages

pytestmark = [pytest.mark.spark, pytest.mark.connect]

CORPORA = corpora()
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
STARTED = re.compile(r"Spark Connect server started at: .*:(\d+)\s*$", re.M)
START_TIMEOUT_S = 180


def _pyspark_home() -> Path:
    import pyspark
    return Path(pyspark.__file__).resolve().parent


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    """(sc:// URL, server log) of a Connect server in the run's mode."""
    pytest.importorskip("grpc", reason="Spark Connect's client needs pyspark[connect] (the test extra has it)")
    home = _pyspark_home()
    submit = home / "bin" / "spark-submit"
    if not any((home / "jars").glob("spark-connect_*.jar")):
        pytest.skip(f"this pyspark has no Spark Connect server jar under {home / 'jars'}")
    work = tmp_path_factory.mktemp("connect")
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_DRIVER_PYTHON", "SPARK_CONF_DIR")}
    env.update(SPARK_HOME=str(home), SPARK_LOG_DIR=str(work), SPARK_PID_DIR=str(work),
               PYSPARK_PYTHON=sys.executable)   # the server's Python workers run the Python data source
    conf = {**session_conf(),                   # the jar on spark.jars in jvm mode
            "spark.connect.grpc.binding.port": "0",
            "spark.ui.enabled": "false",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.shuffle.partitions": "2",
            "spark.python.worker.reuse": "true"}
    # spark-submit ends in `exec java`: the process started here is the server's JVM itself.
    cmd = ["bash", str(submit), "--class", SERVER_CLASS, "--name", "rmq Connect test", "--master", "local[2]"]
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    log_path = work / "server.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(cmd, env=env, cwd=work, stdin=subprocess.DEVNULL, stdout=log,
                                  stderr=subprocess.STDOUT)
    try:
        port = _wait_for_port(server, log_path)
        yield f"sc://127.0.0.1:{port}", log_path
    finally:
        _stop(server)


def _wait_for_port(server: subprocess.Popen, log_path: Path) -> int:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        m = STARTED.search(text)
        if m:
            return int(m.group(1))
        if server.poll() is not None:
            pytest.fail(f"the Connect server exited ({server.returncode}):\n{text[-3000:]}")
        time.sleep(0.5)
    pytest.fail(f"the Connect server did not start in {START_TIMEOUT_S} s:\n{log_path.read_text()[-3000:]}")


def _stop(server: subprocess.Popen) -> None:
    if server.poll() is not None:
        return
    server.terminate()                 # Spark's shutdown hooks stop the session and its Python workers
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def remote(connect_server):
    # The Connect client's own builder: pyspark's generic builder refuses a remote session in a
    # process that already runs a classic one (the suite's shared `spark` session).
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession
    session = RemoteSparkSession.builder.remote(connect_server[0]).create()
    assert type(session).__module__.startswith("pyspark.sql.connect"), type(session)
    yield session
    session.stop()


@pytest.mark.parametrize("corpus", CORPORA, ids=case_id)
def test_connect_session_reads_golden_store(remote, corpus):
    df = (remote.read.format("rmq").option("config", str(corpus / "store.properties"))
          .option("excludeInternalTopics", "false").load(str(corpus / "store")))
    rows = df.toArrow().to_pylist()
    want = expected_messages(corpus / "expected")
    got = {(r["topic"], r["queueId"], r["queueOffset"]): r for r in rows}
    assert len(got) == len(rows) and set(got) == set(want)
    for key, w in want.items():
        assert_row_equals_engine(got[key], w)


def test_server_runs_in_the_announced_mode(remote, connect_server):
    """jvm mode: the jar is on the server's spark.jars (its provider answers format("rmq"))."""
    assert remote.range(3).count() == 3
    added = re.findall(r"Added JAR (\S+)", connect_server[1].read_text(errors="replace"))
    if session_jar():
        assert any(a.endswith("/" + JAR_NAME) for a in added), added
    else:
        assert not any(JAR_NAME in a for a in added), added


def test_connect_session_filters_by_tag(remote):
    corpus = CORPORA[0]
    want = {k for k, w in expected_messages(corpus / "expected").items() if w["tags"] == "TagA"}
    assert want
    df = (remote.read.format("rmq").option("config", str(corpus / "store.properties"))
          .option("excludeInternalTopics", "false").load(str(corpus / "store")).where("tags = 'TagA'").select("topic", "queueId", "queueOffset"))
    got = {(r["topic"], r["queueId"], r["queueOffset"]) for r in df.toArrow().to_pylist()}
    assert got == want
