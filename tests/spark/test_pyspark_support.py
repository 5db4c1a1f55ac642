"""Which pyspark rmqsource accepts, and what a user sees otherwise (no Spark started).

An old pyspark is stood in for by a package named ``pyspark`` with a version and no Python Data Source
API, first on sys.path of a child Python: what rmqsource checks is exactly that API's presence.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]


def run_with_pyspark(tmp_path, version: str, code: str) -> subprocess.CompletedProcess:
    fake = tmp_path / "site"
    (fake / "pyspark" / "sql").mkdir(parents=True)
    (fake / "pyspark" / "__init__.py").write_text(f"__version__ = {version!r}\n")
    (fake / "pyspark" / "sql" / "__init__.py").write_text("")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake), str(PROJECT)])}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


UNSUPPORTED = ("rmqsource needs pyspark 4.0 to 4.x (Spark 4.0, 4.1, 4.2, 4.3), or 3.5 with the rmq jar; "
               "found pyspark 3.4.1, which has no Python Data Source API")
JAR_REQUIRED = ('the rmq jar is required on Spark 3.5: pyspark 3.5.1 has no Python Data Source API, so only the jar '
                'serves format("rmq") (spark.jars = the path `rmq jar` prints; RMQ_SPARK_MODE=python needs '
                'pyspark 4.0+)')


@pytest.mark.parametrize("code", ["import rmqsource.spark.source",
                                  "from rmqsource.spark.jar import session_conf; session_conf()"])
def test_spark_3_4_gets_one_line_naming_found_and_supported(tmp_path, code):
    done = run_with_pyspark(tmp_path, "3.4.1", code)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == f"rmqsource.spark.compat.UnsupportedSparkError: {UNSUPPORTED}"


def test_cli_says_it_in_one_line(tmp_path):
    done = run_with_pyspark(tmp_path, "3.4.1", "import sys; from rmqsource.cli import main; "
                                               "sys.exit(main(['jar', '--build']))")
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [f"rmq jar: error: {UNSUPPORTED}"]


@pytest.mark.parametrize("code", ["import rmqsource.spark.source", "import rmqsource.spark.sink",
                                  "import rmqsource.spark.stream",
                                  "import os; os.environ['RMQ_SPARK_MODE'] = 'python'\n"
                                  "from rmqsource.spark.jar import session_conf; session_conf()"])
def test_spark_3_5_without_the_jar_gets_one_line_saying_it_is_required(tmp_path, code):
    done = run_with_pyspark(tmp_path, "3.5.1", code)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == f"rmqsource.spark.compat.UnsupportedSparkError: {JAR_REQUIRED}"


def test_spark_3_5_sessions_get_the_jar_and_its_catalog(tmp_path):
    """With the jar (what the wheel carries): the session conf names it and the catalog serving USING rmq
    tables; the package, the CLI's Spark-free modules and Spark's discovery module import."""
    from rmqsource.spark.jar import jar_path
    if jar_path() is None:
        pytest.skip("the jar is not built")
    code = ("import os, json; os.environ['RMQ_SPARK_MODE'] = 'jvm'\n"
            "import rmqsource.spark, rmqsource.spark.planning, rmqsource.commands.export, pyspark_rmq\n"
            "from rmqsource.spark.jar import session_conf\n"
            "print(json.dumps([session_conf(), pyspark_rmq.__all__]))")
    done = run_with_pyspark(tmp_path, "3.5.1", code)
    assert done.returncode == 0, done.stderr
    conf, exported = json.loads(done.stdout)
    assert conf == {"spark.jars": jar_path(),
                    "spark.sql.catalog.spark_catalog": "io.rmqsource.spark.RmqSessionCatalog",
                    "spark.sql.extensions": "io.rmqsource.spark.RmqExtensions"}
    assert exported == []


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
