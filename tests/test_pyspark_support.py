"""Which pyspark rmqsource accepts, and what a user sees otherwise (no Spark started).

An old pyspark is stood in for by a package named ``pyspark`` with a version and no Python Data Source
API, first on sys.path of a child Python: what rmqsource checks is exactly that API's presence.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]


def run_with_pyspark(tmp_path, version: str, code: str) -> subprocess.CompletedProcess:
    fake = tmp_path / "site"
    (fake / "pyspark" / "sql").mkdir(parents=True)
    (fake / "pyspark" / "__init__.py").write_text(f"__version__ = {version!r}\n")
    (fake / "pyspark" / "sql" / "__init__.py").write_text("")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake), str(PROJECT)])}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("code", ["import rmqsource.spark.source",
                                  "from rmqsource.spark.jar import session_conf; session_conf()"])
def test_spark_3_5_gets_one_line_naming_found_and_supported(tmp_path, code):
    done = run_with_pyspark(tmp_path, "3.5.1", code)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("rmqsource.spark.compat.UnsupportedSparkError: rmqsource needs pyspark 4.0 to 4.x")
    assert "found pyspark 3.5.1" in last


def test_cli_says_it_in_one_line(tmp_path):
    done = run_with_pyspark(tmp_path, "3.5.1", "import sys; from rmqsource.cli import main; "
                                               "sys.exit(main(['jar', '--build']))")
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "rmq jar: error: rmqsource needs pyspark 4.0 to 4.x (Spark 4.0, 4.1, 4.2, 4.3); found pyspark 3.5.1, "
        "which has no Python Data Source API"]


def test_installed_pyspark_is_supported():
    from rmqsource.spark import compat
    compat.check_supported()
    assert compat.describe().startswith("pyspark 4.")


def test_import_failure_of_the_source_is_reported_at_first_use(tmp_path):
    """Spark's discovery imports pyspark_rmq: a failing import still yields an ``rmq`` source (so the jar's
    lookup finds it instead of blaming PYSPARK_PYTHON), whose first use raises the real cause."""
    broken = tmp_path / "broken"
    (broken / "pyarrow").mkdir(parents=True)
    (broken / "pyarrow" / "__init__.py").write_text("raise ImportError('libarrow.so: cannot open shared object')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(broken), str(PROJECT)])}
    code = ("import pyspark_rmq\n"
            "from pyspark.sql.datasource import DataSource\n"
            "assert issubclass(pyspark_rmq.DefaultSource, DataSource) and pyspark_rmq.DefaultSource.name() == 'rmq'\n"
            "pyspark_rmq.DefaultSource({})\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        "ImportError: the rmq data source could not be imported: ImportError: libarrow.so: cannot open shared object")
