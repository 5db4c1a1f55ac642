"""Shared fixtures: one local SparkSession for every spark test, in the mode the run asks for.

RMQ_SPARK_MODE=jvm puts the JVM scan's jar on ``spark.jars`` (an error when it
is not built), =python runs ``format("rmq")`` on the Python data source alone;
unset: jvm when the jar is built. scripts/test.sh runs the Spark tests in both
modes. RMQ_SPARK_TESTS_ONLY=1 keeps the Spark tests whose answer depends on the
mode (not the tests whose child sessions pick their own modes, marker ``own_modes``).
The deployment tests (cluster, Connect, notebooks) also carry ``e2e``: the end-to-end
tier (scripts/test.sh --e2e), not the default run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The shared helpers (support/) and every tier's folder: some tests reuse another tier's checks
# (the JVM writer's golden tests take the Python writer's comparisons, the positioned-read tests re-run
# the batch tests) by importing its module.
TIER_FOLDERS = ("unit", "golden", "crash", "jvm", "spark", "fuzz", "broker")
sys.path[:0] = [os.path.join(os.path.dirname(__file__), d) for d in ("support",) + TIER_FOLDERS]

from rmqsource.spark.jar import MODE_ENV, JarError, has_native_scan, session_conf, session_jar, spark_mode  # noqa: E402

SPARK_MARKERS = ("spark", "cluster", "notebook")
DEPLOYMENT_MARKERS = ("cluster", "connect", "notebook")     # each also in the e2e tier


def pytest_configure(config):
    try:
        mode = spark_mode()
    except JarError as e:
        raise pytest.UsageError(str(e)) from None
    # Subprocesses (the cluster driver, notebook kernels) follow the same mode.
    os.environ[MODE_ENV] = mode


def _mode_line() -> str:
    jar = session_jar()
    if jar is None:
        return "rmq Spark mode: python (format(\"rmq\") is the Python data source; no jar on spark.jars)"
    scan = "native JVM batch scan" if has_native_scan(jar) else "batch scans handed to the Python data source"
    return f"rmq Spark mode: jvm (spark.jars={jar}; {scan})"


def pytest_report_header(config):
    return _mode_line()


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(_mode_line())


def _mark_what_tests_start(items) -> None:
    """Each test carries the marker of its folder's tier and markers for what it starts.

    ``spark``: it takes the session fixture; ``jvm``: it starts a JVM without Spark (the tests of
    tests/jvm, and the ``[jvm]`` cases of tests holding one contract for both implementations);
    ``e2e``: it deploys Spark (a standalone cluster, a Connect server, a notebook kernel).
    """
    for item in items:
        tier = Path(str(item.fspath)).parent.name
        if tier in TIER_FOLDERS:
            item.add_marker(tier)
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker("spark")
        params = getattr(getattr(item, "callspec", None), "params", {})
        if tier == "jvm" or any(isinstance(v, str) and v == "jvm" for v in params.values()):
            item.add_marker("jvm")
        if any(item.get_closest_marker(m) for m in DEPLOYMENT_MARKERS):
            item.add_marker("e2e")
        # A module that imports another module's tests runs them again under its own fixtures; its
        # RERUN_MARKER names the tier those copies belong to.
        rerun = getattr(getattr(item, "module", None), "RERUN_MARKER", None)
        function = getattr(item, "function", None)
        if rerun and function is not None and function.__module__ != item.module.__name__:
            item.add_marker(rerun)


def _starts_spark(item) -> bool:
    return any(item.get_closest_marker(m) for m in SPARK_MARKERS)


@pytest.hookimpl(tryfirst=True)      # the markers must be there before -m selects
def pytest_collection_modifyitems(config, items):
    _mark_what_tests_start(items)
    if os.environ.get("RMQ_SPARK_TESTS_ONLY") != "1":
        return
    # The second pass of scripts/test.sh: the Spark tests whose answer depends on the mode.
    selected = lambda i: _starts_spark(i) and not i.get_closest_marker("own_modes")
    keep = [i for i in items if selected(i)]
    dropped = [i for i in items if not selected(i)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    # The streaming sink's fault seam (see rmqsource.spark.sink.FAULT_ENV): set before the JVM starts so
    # Spark's Python workers inherit it; tests write a one-shot fault spec into this file.
    os.environ.setdefault("RMQSOURCE_TEST_SINK_FAULT_FILE", str(tmp_path_factory.mktemp("faults") / "sink-fault"))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    conf = session_conf()       # the jar in jvm mode; see session_conf on pushdown
    # Spark's Avro support, as users add it for from_avro: the typed-body tests judge bodyFormat=avro by it
    from spark_avro import spark_avro_jar
    avro = spark_avro_jar()
    if avro:
        conf["spark.jars"] = ",".join(j for j in (conf.get("spark.jars"), avro) if j)
    session = (SparkSession.builder
               .master("local[2]")
               .appName("rmqsource-tests")
               .config(map=conf)
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.python.worker.reuse", "true")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "2g")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 40 MB tmpfs mounted for the test (a file system that really fills up); skipped unless root may mount."""
    import shutil
    import subprocess
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(mnt)], capture_output=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
