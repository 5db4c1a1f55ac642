"""A quiet start for the local Spark sessions of ``rmq demo`` and the notebooks.

A fresh ``local[*]`` session prints start-up lines that look like problems but
are facts of a one-machine setup.  Each is dealt with at its source:

* "Your hostname ... resolves to a loopback address": Spark picks the bind
  address; ``SPARK_LOCAL_IP=127.0.0.1`` tells it (a local session serves only
  this machine).
* "NativeCodeLoader: Unable to load native-hadoop library" and Spark's "Using
  Spark's default log4j profile" / "Setting default log level": our
  ``log4j2.properties`` (WARN, that one logger at ERROR) replaces Spark's default.
* "WARNING: Using incubator modules: jdk.incubator.vector": the JVM prints it
  because Spark's launcher always adds ``--add-modules=jdk.incubator.vector``
  (not configurable), so :func:`start_local_session` reads the driver JVM's
  stderr and drops exactly that line; every other line passes through.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from pathlib import Path
from typing import IO, Optional

LOG4J2_CONFIG = Path(__file__).resolve().parent / "log4j2.properties"
JVM_NOISE = re.compile(r"^WARNING: Using incubator modules: jdk\.incubator\.vector\s*$")


def quiet_conf() -> dict[str, str]:
    """Spark settings for a quiet local session (our log4j2 configuration for the driver JVM)."""
    return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}"}


def use_loopback() -> None:
    """Bind a local session to 127.0.0.1 (unless SPARK_LOCAL_IP is set already)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def forward_stderr(stream: IO[bytes], sink: Optional[IO[str]] = None) -> threading.Thread:
    """Copy the driver JVM's stderr to ``sink`` (default: sys.stderr) line by line, without JVM_NOISE."""
    def pump() -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace")
            if not JVM_NOISE.match(line):
                out = sink or sys.stderr
                out.write(line)
                out.flush()
    t = threading.Thread(target=pump, name="spark-driver-stderr", daemon=True)
    t.start()
    return t


def start_local_session(master: str, app_name: str, conf: dict[str, str]):
    """A SparkSession on a driver JVM started here, its stderr filtered by :func:`forward_stderr`."""
    from subprocess import PIPE

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    use_loopback()
    conf = {**conf, **quiet_conf()}
    spark_conf = SparkConf().setMaster(master).setAppName(app_name).setAll(list(conf.items()))
    if SparkContext._active_spark_context is None:
        gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": PIPE})
        forward_stderr(gateway.proc.stderr)
        SparkContext(conf=spark_conf, gateway=gateway)
    return SparkSession.builder.config(map=conf).getOrCreate()
