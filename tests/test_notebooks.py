"""Every notebook under notebooks/ runs top to bottom in a fresh kernel, in the run's Spark mode."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rmqsource.spark.jar import has_native_scan, session_jar

pytestmark = pytest.mark.notebook

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


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
    if path.name == "quickstart.ipynb":
        printed = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
        assert f"format('rmq') reads with the {expected_scan()}" in printed, printed[:2000]


def test_notebooks_exist():
    assert any(p.name == "quickstart.ipynb" for p in NOTEBOOKS)
