"""A real S3 API server on loopback and a Spark session that reads it through Hadoop's S3A connector.

The server is s3proxy (``org.gaul:s3proxy``, its jar with dependencies fetched once from Maven Central into
``~/.cache/rmqsource/s3proxy``), a child JVM on 127.0.0.1 with a free port over a temp folder; stores are
uploaded with boto3. Spark reads it with the ``hadoop-aws`` of pyspark's own Hadoop version and the AWS SDK
bundle it names (fetched once by scripts/s3_jars.sh) next to the rmq jar on ``spark.jars``. Used by
tests/spark/test_objectstore.py (marker ``objectstore``, run by scripts/test_objectstore.sh) and
scripts/bench_objectstore.py. boto3 is installed by that script, not by the package's extras: only this
tier needs it.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BUCKET = "rmq-stores"           # a valid S3 name (3+ characters)
ACCESS_KEY = SECRET_KEY = "rmq-test"
REGION = "us-east-1"
S3PROXY = ("org.gaul", "s3proxy", "4.1.0", "jar-with-dependencies")   # runs on Java 17
S3PROXY_CACHE = Path(os.environ.get("RMQ_S3PROXY_CACHE", Path.home() / ".cache" / "rmqsource" / "s3proxy"))


def maven_jar(coordinates: tuple[str, ...], cache: Path) -> str:
    """A jar from Maven Central, fetched once into ``cache`` and checked (scripts/maven_jar.sh)."""
    out = subprocess.run(["bash", str(PROJECT_ROOT / "scripts" / "maven_jar.sh"), *coordinates], check=True,
                         stdout=subprocess.PIPE, text=True, env={**os.environ, "RMQ_MAVEN_CACHE": str(cache)})
    return out.stdout.strip()


def s3a_jars() -> list[str]:
    """Paths of the S3A connector's two jars, matching pyspark's Hadoop (scripts/s3_jars.sh fetches them)."""
    out = subprocess.run(["bash", str(PROJECT_ROOT / "scripts" / "s3_jars.sh")], check=True,
                         stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHON": sys.executable}).stdout
    return [line for line in out.splitlines() if line.strip()]


def hadoop_settings(endpoint: str) -> dict[str, str]:
    """The ``spark.hadoop.*`` settings that point S3A at ``endpoint`` (credentials included)."""
    settings = {
        "fs.s3a.endpoint": endpoint,
        "fs.s3a.endpoint.region": REGION,
        "fs.s3a.access.key": ACCESS_KEY,
        "fs.s3a.secret.key": SECRET_KEY,
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
    }
    return {f"spark.hadoop.{k}": v for k, v in settings.items()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def java_command() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else (shutil.which("java") or "java")


def stop_server(proc: subprocess.Popen, log, folder) -> None:
    """Stop a server's child JVM (SIGTERM, then SIGKILL after 30 s), close its log, remove its folder."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    log.close()
    shutil.rmtree(folder, ignore_errors=True)


class S3Server:
    """s3proxy (a real S3 API server, Java) on 127.0.0.1 over a temp folder, with one bucket, and boto3 to fill it.

    Its jclouds ``filesystem`` backend keeps each object as a file, so a ranged GET reads the bytes it
    serves (as S3: a GET costs no more for a larger object). Its Prometheus endpoint counts the requests
    it answers by S3 operation (:meth:`requests`): the server's side of the traffic.
    """

    def __init__(self, bucket: str = BUCKET):
        import boto3
        jar = maven_jar(S3PROXY, S3PROXY_CACHE)
        self._dir = Path(tempfile.mkdtemp(prefix="rmq-s3proxy-"))
        (self._dir / "blobs").mkdir()
        port, metrics_port = free_port(), free_port()
        self.endpoint = f"http://127.0.0.1:{port}"
        self._metrics = f"http://127.0.0.1:{metrics_port}/metrics"
        props = self._dir / "s3proxy.properties"
        props.write_text(f"s3proxy.endpoint={self.endpoint}\n"
                         "s3proxy.authorization=aws-v2-or-v4\n"
                         f"s3proxy.identity={ACCESS_KEY}\ns3proxy.credential={SECRET_KEY}\n"
                         "jclouds.provider=filesystem\n"
                         f"jclouds.filesystem.basedir={self._dir / 'blobs'}\n"
                         "s3proxy.metrics.enabled=true\ns3proxy.metrics.host=127.0.0.1\n"
                         f"s3proxy.metrics.port={metrics_port}\n")
        self._log = open(self._dir / "s3proxy.log", "wb")
        self._proc = subprocess.Popen([java_command(), "-Xmx512m", "-jar", jar, "--properties", str(props)],
                                      stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            self._wait_ready(port)
            self.bucket = bucket
            self.client = boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION,
                                       aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
            self.client.create_bucket(Bucket=bucket)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, port: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            try:
                urllib.request.urlopen(self._metrics, timeout=2).read()
                with socket.create_connection(("127.0.0.1", port), timeout=2):
                    return
            except OSError:
                time.sleep(0.2)
        log = (self._dir / "s3proxy.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"s3proxy did not start on {self.endpoint} (exit code {self._proc.poll()}):\n{log}")

    def uri(self, key: str, bucket: str | None = None) -> str:
        return f"s3a://{bucket or self.bucket}/{key.strip('/')}"

    def upload_dir(self, local: Path, prefix: str, bucket: str | None = None) -> str:
        """Every file under ``local`` as an object under ``prefix`` (as a sync job copies it: empty
        folders have no object), in ``bucket`` (default: the server's); returns the prefix's s3a:// URI."""
        local = Path(local)
        for path in sorted(local.rglob("*")):
            if path.is_file():
                self.upload_file(path, f"{prefix.strip('/')}/{path.relative_to(local).as_posix()}", bucket)
        return self.uri(prefix, bucket)

    def upload_file(self, path: Path, key: str, bucket: str | None = None) -> None:
        self.client.upload_file(str(path), bucket or self.bucket, key)

    def put_bytes(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data)

    def keys(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def requests(self) -> dict[str, int]:
        """Requests answered so far, by S3 operation (``GetObject``, ``ListObjectsV2``, ``HeadObject``, ...)."""
        text = urllib.request.urlopen(self._metrics, timeout=10).read().decode()
        out: dict[str, int] = {}
        for m in re.finditer(r'^http_server_request_duration_seconds_count\{([^}]*)\} (\S+)$', text, re.M):
            op = re.search(r's3_operation="([^"]*)"', m.group(1))
            key = op.group(1) if op else "other"
            out[key] = out.get(key, 0) + int(float(m.group(2)))
        return out

    def bytes_sent(self) -> int:
        """Bytes the server process has written so far (Linux ``/proc/<pid>/io`` wchar): its responses,
        headers included, plus a few log lines; its filesystem backend writes no file while serving GETs."""
        with open(f"/proc/{self._proc.pid}/io") as f:
            return int(next(line for line in f if line.startswith("wchar:")).split()[1])

    def stop(self) -> None:
        stop_server(self._proc, self._log, self._dir)


def spark_session(endpoint: str, app_name: str, rmq_jar: str, **conf):
    """A local[2] session with the rmq jar and the S3A connector on spark.jars, S3A pointed at ``endpoint``."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    builder = (SparkSession.builder.master("local[2]").appName(app_name)
               .config("spark.jars", ",".join([rmq_jar, *s3a_jars()]))
               .config(map=hadoop_settings(endpoint))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.python.worker.reuse", "true")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "2g"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
