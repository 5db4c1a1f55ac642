"""A real HDFS on loopback: Hadoop's mini cluster (one NameNode, one DataNode) in a child JVM over a temp folder.

The cluster is ``org.apache.hadoop.mapreduce.MiniHadoopClusterManager`` (its own main, with ``-nomr``: HDFS
only) from ``hadoop-client-minicluster`` of pyspark's Hadoop version, fetched once by scripts/hdfs_jars.sh;
the rest of the Hadoop client comes from pyspark's ``jars/``. It writes its NameNode port to a file once up.
Files go in through the Spark session's own Hadoop client (``FileSystem.copyFromLocalFile``), so nothing
else is needed. Used by tests/spark/test_hdfs.py (marker ``objectstore``, scripts/test_objectstore.sh).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from objectstore import PROJECT_ROOT, free_port, java_command, stop_server

START_TIMEOUT_S = 180          # a loaded 2-core machine takes 20-60 s


def minicluster_jars() -> list[str]:
    out = subprocess.run(["bash", str(PROJECT_ROOT / "scripts" / "hdfs_jars.sh")], check=True,
                         stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHON": sys.executable}).stdout
    return [line for line in out.splitlines() if line.strip()]


class HdfsCluster:
    """The mini cluster, started on construction; ``uri(path)`` names a path on it, ``stop()`` ends it.
    ``http_port`` is its NameNode's HTTP port, where WebHDFS (``webhdfs://127.0.0.1:<http_port>/...``) answers."""

    def __init__(self):
        import pyspark
        spark_jars = Path(pyspark.__file__).parent / "jars"
        self._dir = Path(tempfile.mkdtemp(prefix="rmq-hdfs-"))
        details = self._dir / "details.json"
        classpath = os.pathsep.join([*minicluster_jars(), str(spark_jars / "*")])
        self._log = open(self._dir / "cluster.log", "wb")
        self.http_port = free_port()          # chosen here: the details file names the RPC port only
        self._proc = subprocess.Popen(
            [java_command(), "-Xmx512m", f"-Dtest.build.data={self._dir / 'data'}", "-cp", classpath,
             "org.apache.hadoop.mapreduce.MiniHadoopClusterManager", "-nomr", "-format", "-datanodes", "1",
             "-nnport", "0", "-nnhttpport", str(self.http_port), "-writeDetails", str(details),
             # loopback only, no web UIs to bind
             "-D", "dfs.datanode.address=127.0.0.1:0", "-D", "dfs.datanode.http.address=127.0.0.1:0",
             "-D", "dfs.datanode.ipc.address=127.0.0.1:0"],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self._dir)
        try:
            self.port = self._wait_port(details)
        except BaseException:
            self.stop()
            raise
        self.root = f"hdfs://127.0.0.1:{self.port}"

    def _wait_port(self, details: Path) -> int:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self._proc.poll() is None:
            if details.is_file():
                try:
                    return int(json.loads(details.read_text())["namenode_port"])
                except (ValueError, KeyError):
                    pass                      # written but not whole yet
            time.sleep(0.5)
        log = (self._dir / "cluster.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"the HDFS mini cluster did not start in {START_TIMEOUT_S} s "
                           f"(exit code {self._proc.poll()}):\n{log}")

    def uri(self, path: str) -> str:
        return f"{self.root}/{path.strip('/')}"

    def upload_dir(self, spark, local: Path, path: str) -> str:
        """``local`` (a folder) copied to ``path`` on the cluster by the session's Hadoop client; its URI."""
        jvm = spark.sparkContext._jvm
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        dest = jvm.org.apache.hadoop.fs.Path(self.uri(path))
        fs = dest.getFileSystem(conf)
        fs.mkdirs(dest.getParent())
        fs.copyFromLocalFile(False, True, jvm.org.apache.hadoop.fs.Path(Path(local).resolve().as_uri()), dest)
        return self.uri(path)

    def stop(self) -> None:
        stop_server(self._proc, self._log, self._dir)


def jvm_session_or_skip(spark):
    """The tests' session when it reads through the JVM scan (the pure Python source reads local paths only)."""
    from rmqsource.spark.jar import session_jar
    if session_jar() is None:
        import pytest
        pytest.skip("RMQ_SPARK_MODE=python: the pure Python source reads local paths only")
    return spark


@contextlib.contextmanager
def started_cluster():
    """A mini cluster for the test's span (skips without a Java runtime), stopped after it."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        import pytest
        pytest.skip("no Java runtime: the HDFS mini cluster cannot start")
    cluster = HdfsCluster()
    try:
        yield cluster
    finally:
        cluster.stop()
