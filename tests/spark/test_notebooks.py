"""Every notebook under notebooks/ runs top to bottom in a fresh kernel, in the run's Spark mode."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rmqsource.spark.jar import has_native_scan, session_jar

pytestmark = pytest.mark.notebook

# lake.ipynb needs a Spark with a tested Delta/Iceberg runtime pair: the lake tier runs it (test_lake.py).
LAKE_NOTEBOOKS = ("lake.ipynb",)
NOTEBOOKS = sorted(p for p in (Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb")
                   if p.name not in LAKE_NOTEBOOKS)


def expected_scan() -> str:
    """What the quickstart must report for the mode (the kernel inherits RMQ_SPARK_MODE)."""
    jar = session_jar()
    if jar is None:
        return "Python data source"
    return "JVM scan" if has_native_scan(jar) else "Python scan behind the JVM provider"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    errors = [o for o in outputs if o.get("output_type") == "error"]
    assert not errors, errors
    streams = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert not noisy_lines(streams), noisy_lines(streams)
    if path.name == "quickstart.ipynb":
        printed = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
        assert f"format('rmq') reads with the {expected_scan()}" in printed, printed[:2000]


NOISE = re.compile(r"WARN|Warning|Traceback")


def noisy_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if NOISE.search(line)]


@pytest.mark.slow
def test_demo_starts_quietly(tmp_path):
    """`rmq demo` (the Spark part included) prints no warning and no traceback, on stdout or stderr."""
    proc = subprocess.run([sys.executable, "-m", "rmqsource", "demo", "--messages", "5000", "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "starting Spark" in proc.stdout
    assert "PaymentEvents with tag 'paid'" in proc.stdout, proc.stdout[-3000:]
    assert not noisy_lines(proc.stdout + proc.stderr), proc.stdout + proc.stderr


def test_driver_stderr_filter_drops_only_the_known_jvm_line():
    from rmqsource.spark.quiet import forward_stderr
    jvm = (b"WARNING: Using incubator modules: jdk.incubator.vector\n"
           b"26/11/23 18:23:27 WARN TaskSetManager: Lost task 0.0 in stage 1.0\n"
           b"WARNING: Using incubator modules: jdk.incubator.vector, jdk.incubator.foreign\n"
           b"Traceback (most recent call last):\n")
    sink = io.StringIO()
    forward_stderr(io.BytesIO(jvm), sink).join(timeout=10)
    assert sink.getvalue().splitlines() == ["26/11/23 18:23:27 WARN TaskSetManager: Lost task 0.0 in stage 1.0",
                                            "WARNING: Using incubator modules: jdk.incubator.vector, "
                                            "jdk.incubator.foreign",
                                            "Traceback (most recent call last):"]


def test_notebooks_exist():
    assert any(p.name == "quickstart.ipynb" for p in NOTEBOOKS)
