"""The same query on a Spark standalone cluster (master + 2 workers on loopback) and in local mode."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from cluster_workload import query_rows
from golden import corpora
from rmqsource.spark.jar import spark_mode

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

TESTS_DIR = Path(__file__).resolve().parents[1] / "support"


class StandaloneCluster:
    """A master and workers started from the installed pyspark's jars, on 127.0.0.1."""

    def __init__(self, state: Path, workers: int = 2):
        import pyspark
        self.state = state
        self.spark_home = os.path.dirname(pyspark.__file__)
        self.env = dict(os.environ, SPARK_HOME=self.spark_home, SPARK_SCALA_VERSION="2.13",
                        SPARK_LOCAL_IP="127.0.0.1", SPARK_LOCAL_HOSTNAME="127.0.0.1",
                        PYSPARK_PYTHON=sys.executable)
        self.url = ""
        self.procs: list[subprocess.Popen] = []
        self.workers = workers

    def _java(self, *args: str, log: str, jvm_opts: tuple[str, ...] = ()) -> subprocess.Popen:
        cmd = ["java", "-Xmx512m", *jvm_opts, "-cp", os.path.join(self.spark_home, "jars", "*"), *args]
        out = open(self.state / log, "wb")
        proc = subprocess.Popen(cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def _logged(self, log: str, pattern: str, deadline: float) -> str:
        """The first match of pattern in a process's log, waiting for it to appear."""
        path = self.state / log
        while time.monotonic() < deadline:
            found = re.search(pattern, path.read_text(errors="replace"))
            if found:
                return found.group(1)
            if any(proc.poll() is not None for proc in self.procs):
                break
            time.sleep(0.2)
        self.stop()
        raise AssertionError(f"standalone cluster did not come up ({pattern!r} not in {log}): "
                             + path.read_text(errors="replace")[-2000:])

    def start(self, timeout_s: float = 180) -> "StandaloneCluster":
        # Port 0 everywhere: the master and its UI bind ports the kernel picks, and the real ones are
        # read from its log, so nothing else on the machine can take a port between choice and bind.
        self.state.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout_s
        self._java("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0",
                   "--webui-port", "0", log="master.log", jvm_opts=("-Dspark.master.rest.enabled=false",))
        self.url = self._logged("master.log", r"Starting Spark master at (spark://\S+)", deadline)
        ui_port = self._logged("master.log", r"Successfully started service 'MasterUI' on port (\d+)", deadline)
        for i in range(self.workers):
            work = self.state / f"work{i}"
            work.mkdir(exist_ok=True)
            self._java("org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1", "--port", "0",
                       "--cores", "1", "--memory", "1g", "--webui-port", "0", "--work-dir", str(work),
                       log=f"worker{i}.log")
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
                    doc = json.load(r)
                if sum(w.get("state") == "ALIVE" for w in doc.get("workers", [])) == self.workers:
                    return self
            except (OSError, ValueError):
                pass
            time.sleep(0.5)
        self.stop()
        raise AssertionError("standalone cluster did not come up: " + (self.state / "master.log").read_text()[-2000:])

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self.procs.clear()


@pytest.mark.skipif(shutil.which("java") is None, reason="needs java")
def test_cluster_answer_equals_local_mode(spark, tmp_path):
    corpus = corpora()[0]
    store, config = str(corpus / "store"), str(corpus / "store.properties")
    local = json.loads(json.dumps(query_rows(spark, store, config)))
    assert local["rows"] and local["tagged"]
    # The driver below reads RMQ_SPARK_MODE (set by conftest) and ships the jar through spark.jars in jvm
    # mode; equal "relations" (table and scan classes) show the cluster ran the same provider.
    tables = {table for table, _ in local["relations"]}
    assert tables == ({"io.rmqsource.spark.RmqTable"} if spark_mode() == "jvm"
                      else {"org.apache.spark.sql.execution.datasources.v2.python.PythonTable"})
    cluster = StandaloneCluster(tmp_path / "cluster").start()
    try:
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable,
                   PYTHONPATH=os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]))
        done = subprocess.run([sys.executable, str(TESTS_DIR / "cluster_query.py"), cluster.url, store, config],
                              env=env, capture_output=True, text=True, timeout=600)
    finally:
        cluster.stop()
    assert done.returncode == 0, done.stderr[-4000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["executors"] >= 3  # the driver plus one executor per worker
    assert answer["result"] == local
