"""A real S3 API server on loopback and a Spark session that reads it through Hadoop's S3A connector.

The server is moto's server mode (``moto.server.ThreadedMotoServer``, PyPI ``moto[server]``), started in
this process on 127.0.0.1 with a free port; stores are uploaded with boto3. Spark reads it with
``hadoop-aws-3.3.1.jar`` and ``aws-java-sdk-bundle-1.11.901.jar`` (fetched once by scripts/s3_jars.sh)
next to the rmq jar on ``spark.jars``. Used by tests/test_objectstore.py (marker ``objectstore``, run by
scripts/test_objectstore.sh) and scripts/bench_objectstore.py. moto and boto3 are installed by that
script, not by the package's extras: only this tier needs them.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BUCKET = "rmq-stores"           # a valid S3 name (3+ characters; moto refuses 'b')
ACCESS_KEY = SECRET_KEY = "rmq-test"
REGION = "us-east-1"

# pyspark 4.3 carries the Hadoop 3.5 client, whose core-default.xml gives these S3A durations with units
# ("60s"); hadoop-aws 3.3.1 parses them as plain numbers, so they are given as numbers here. Hadoop 3.5's
# default credential chain names AWS SDK v2 classes the v1 bundle lacks: the simple key/secret provider.
S3A_COMPAT_SETTINGS = {
    "fs.s3a.threads.keepalivetime": "60",
    "fs.s3a.connection.establish.timeout": "30000",
    "fs.s3a.connection.timeout": "200000",
    "fs.s3a.multipart.purge.age": "86400",
    "fs.s3a.connection.request.timeout": "0",
    "fs.s3a.connection.acquisition.timeout": "60000",
    "fs.s3a.connection.idle.time": "60000",
    "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
}


def s3a_jars() -> list[str]:
    """Paths of the S3A connector's two jars (scripts/s3_jars.sh fetches them on first use)."""
    out = subprocess.run(["bash", str(PROJECT_ROOT / "scripts" / "s3_jars.sh")], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return [line for line in out.splitlines() if line.strip()]


def hadoop_settings(endpoint: str) -> dict[str, str]:
    """The ``spark.hadoop.*`` settings that point S3A at ``endpoint`` (credentials included)."""
    settings = dict(S3A_COMPAT_SETTINGS)
    settings.update({
        "fs.s3a.endpoint": endpoint,
        "fs.s3a.access.key": ACCESS_KEY,
        "fs.s3a.secret.key": SECRET_KEY,
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
    })
    return {f"spark.hadoop.{k}": v for k, v in settings.items()}


class RequestLog:
    """WSGI middleware counting the requests the server answers and the bytes of their bodies.

    Keys: ``GET`` (object reads, ranged or whole), ``LIST`` (bucket listings), ``HEAD``, other methods
    by name. The server's side of the traffic, whatever client or connector sent it.
    """

    def __init__(self, app):
        self.app = app
        self._lock = threading.Lock()
        self.requests: dict[str, int] = {}
        self.bytes: dict[str, int] = {}
        # (kind, object key, Range header, bytes sent, seconds) per request while set to a list
        self.trace: list[tuple[str, str, str, int, float]] | None = None

    def __call__(self, environ, start_response):
        method = environ.get("REQUEST_METHOD", "")
        path = environ.get("PATH_INFO", "").strip("/")
        kind = "LIST" if method == "GET" and "/" not in path else method
        sent = 0
        began = time.perf_counter()
        try:
            for chunk in self.app(environ, start_response):
                sent += len(chunk)
                yield chunk
        finally:
            with self._lock:
                self.requests[kind] = self.requests.get(kind, 0) + 1
                self.bytes[kind] = self.bytes.get(kind, 0) + sent
                if self.trace is not None:
                    self.trace.append((kind, path, environ.get("HTTP_RANGE", ""), sent, time.perf_counter() - began))

    def snapshot(self) -> tuple[dict[str, int], dict[str, int]]:
        with self._lock:
            return dict(self.requests), dict(self.bytes)

    def since(self, snap) -> tuple[dict[str, int], dict[str, int]]:
        """Requests and bytes per kind since ``snap`` (a ``snapshot()``)."""
        reqs, sent = self.snapshot()
        return ({k: v - snap[0].get(k, 0) for k, v in reqs.items() if v - snap[0].get(k, 0)},
                {k: v - snap[1].get(k, 0) for k, v in sent.items() if v - snap[1].get(k, 0)})


class S3Server:
    """moto's S3 server on 127.0.0.1 (free port) with one bucket, and boto3 to fill it."""

    def __init__(self, bucket: str = BUCKET):
        import boto3
        from moto.server import ThreadedMotoServer
        logging.getLogger("werkzeug").setLevel(logging.ERROR)     # no line per request
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        # Count what the server answers: its WSGI app is only called per request, so wrapping it
        # before the first request sees every one (werkzeug's server keeps the app as `.app`).
        self.log = RequestLog(self._server._server.app)
        self._server._server.app = self.log
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self.bucket = bucket
        self.client = boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION,
                                   aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
        self.client.create_bucket(Bucket=bucket)

    def uri(self, key: str) -> str:
        return f"s3a://{self.bucket}/{key.strip('/')}"

    def upload_dir(self, local: Path, prefix: str) -> str:
        """Every file under ``local`` as an object under ``prefix`` (as a sync job copies it: empty
        folders have no object); returns the prefix's s3a:// URI."""
        local = Path(local)
        for path in sorted(local.rglob("*")):
            if path.is_file():
                self.upload_file(path, f"{prefix.strip('/')}/{path.relative_to(local).as_posix()}")
        return self.uri(prefix)

    def upload_file(self, path: Path, key: str) -> None:
        self.client.upload_file(str(path), self.bucket, key)

    def put_bytes(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data)

    def keys(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def stop(self) -> None:
        self._server.stop()


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
