"""A store's topics backfilled into Delta Lake and Apache Iceberg tables (rmqsource.spark.lake, docs/lake.md).

The runtimes come as users add them: ``spark.jars.packages`` resolved by Ivy from Maven Central (into
``RMQ_LAKE_IVY``, default ~/.cache/rmqsource/ivy), with their session extensions, Delta's session catalog
and an Iceberg catalog of type ``hadoop`` over a local warehouse. Only a Spark with a tested pair runs them:
scripts/test_lake.sh (marker ``lake``, left out of the default run) starts them in that environment, in both
Spark modes. The module starts its own session, so it runs in a pytest process of its own.

Judged by the engines themselves: every table is compared with the store read directly
(``spark.read.format("rmq")``) as a multiset of whole rows, and its commits are read from Delta's history
and Iceberg's snapshots.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from golden import corpora
from rmqsource.sample import sample_table
from rmqsource.spark.jar import session_conf
from rmqsource.spark.compat import UnsupportedSparkError
from rmqsource.spark.lake import FORMATS, backfill, lake_conf, runtime_formats, runtime_packages
from rmqsource.store.config import StoreConfig
from rmqsource.store.writer import MessageStoreWriter

pytestmark = pytest.mark.lake

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "lake.ipynb"
# The formats with a tested runtime on this pyspark (rmqsource.spark.lake.TESTED_RUNTIMES): both on 4.1, Delta on 4.2.
HERE = runtime_formats()
IVY = os.environ.get("RMQ_LAKE_IVY") or str(Path.home() / ".cache" / "rmqsource" / "ivy")
ORDER_SCHEMA = "seq BIGINT, `order` BIGINT, event STRING, amount DOUBLE"
MINUTE_MS = 60_000
FIRST, MORE = 1_500, 600          # messages before the first run, and written between the runs
SPACING_MS = 4 * MINUTE_MS        # 2,100 messages over about 6 days: several day partitions, runs share one


def require(fmt: str) -> None:
    """Skips, saying why, where no runtime of ``fmt`` is tested (Iceberg on 4.2)."""
    if fmt not in HERE:
        try:
            runtime_packages([fmt])
        except UnsupportedSparkError as e:
            pytest.skip(str(e))


def test_lake_notebook_runs(tmp_path, monkeypatch):
    """notebooks/lake.ipynb top to bottom in a fresh kernel (first here: before this module's own session)."""
    for fmt in FORMATS:
        require(fmt)
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    from test_notebooks import noisy_lines
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("RMQ_LAKE_IVY", IVY)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    printed = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert not noisy_lines(printed), noisy_lines(printed)
    assert "second run: 3000 rows" in printed, printed[-2000:]


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    assert SparkContext._active_spark_context is None, \
        "the lake tests start a session with the lake runtimes: run them in a pytest process of their own"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = tmp_path_factory.mktemp("lake")
    # On a pyspark without any tested runtime this raises the error saying so: the tier runs on the wrong Spark.
    conf = lake_conf(HERE or FORMATS, warehouse=str(work / "iceberg"), ivy=IVY, base=session_conf())
    session = (SparkSession.builder.master("local[2]").appName("rmqsource-lake-tests")
               .config(map=conf)
               .config("spark.sql.warehouse.dir", str(work / "warehouse"))
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.python.worker.reuse", "true")
               # Not UTC on purpose: the day partitions are UTC days whatever the session's zone.
               .config("spark.sql.session.timeZone", "America/Los_Angeles")
               .config("spark.driver.memory", "2g")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def append_sample(store, count: int, first: int = 0) -> None:
    """Sample messages ``first .. first+count`` (JSON order bodies, one every SPACING_MS) appended to ``store``."""
    config = StoreConfig.from_mapping({"mappedFileSizeCommitLog": 16 * 1024 * 1024})
    with MessageStoreWriter(str(store), config) as writer:
        results = writer.put_arrow_batch(sample_table(count, first=first, spacing_ms=SPACING_MS))
        assert results.ok_count == count


def hashable(value):
    if isinstance(value, dict):
        return tuple(sorted((k, hashable(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(hashable(v) for v in value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def multiset(df, columns) -> Counter:
    return Counter(tuple(hashable(r[c]) for c in columns) for r in df.select(*columns).collect())


def direct(spark, store, **options):
    """The store read directly: every topic but RocketMQ's own, as the backfill reads it."""
    reader = spark.read.format("rmq").option("topicPattern", ".*")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(str(store))


def utc_days(df) -> Counter:
    """Rows per UTC day of storeTimestamp, computed here from epoch milliseconds (not by the helper's SQL)."""
    epoch = datetime.date(1970, 1, 1)
    return Counter(epoch + datetime.timedelta(days=r[0] // 86_400_000)
                   for r in df.selectExpr("unix_millis(storeTimestamp)").collect())


def delta_appends(path: Path) -> list[tuple[int, str, int]]:
    """(version, operation, rows added) of each commit in the Delta log, read from the log's JSON files."""
    commits = []
    for log in sorted((path / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        operation = next(a["commitInfo"]["operation"] for a in actions if "commitInfo" in a)
        rows = sum(json.loads(a["add"]["stats"])["numRecords"] for a in actions if "add" in a)
        commits.append((int(log.stem), operation, rows))
    return commits


def delta_rows_per_day(path: Path) -> Counter:
    """Rows per ``day`` partition value, from the Delta log's add actions (the files as written)."""
    days = Counter()
    for log in (path / "_delta_log").glob("*.json"):
        for line in log.read_text().splitlines():
            add = json.loads(line).get("add") if line.strip() else None
            if add:
                days[datetime.date.fromisoformat(add["partitionValues"]["day"])] += \
                    json.loads(add["stats"])["numRecords"]
    return days


def iceberg_appends(spark, table) -> list[tuple[str, int]]:
    return [(r["operation"], int(r["summary"]["added-records"]))
            for r in spark.sql(f"SELECT operation, summary FROM {table}.snapshots ORDER BY committed_at").collect()]


def iceberg_rows_per_day(spark, table) -> Counter:
    return Counter({r["partition"]["day"]: r["record_count"]
                    for r in spark.sql(f"SELECT partition, record_count FROM {table}.partitions").collect()})


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_backfill_appends_each_message_once_into_day_partitions(lake, fmt, tmp_path):
    require(fmt)
    store = tmp_path / "store"
    append_sample(store, FIRST)
    table = str(tmp_path / "delta-orders") if fmt == "delta" else f"lake.shop.orders_{os.getpid()}"
    run = dict(format=fmt, checkpoint=str(tmp_path / "checkpoint"), body_format="json", body_schema=ORDER_SCHEMA)
    read = (lambda: lake.read.format("delta").load(table)) if fmt == "delta" else (lambda: lake.table(table))

    first = backfill(lake, str(store), table, **run)
    assert first.rows == FIRST
    append_sample(store, MORE, first=FIRST)
    second = backfill(lake, str(store), table, **run)
    assert second.rows == MORE

    expected = direct(lake, store, bodyFormat="json", bodySchema=ORDER_SCHEMA)
    columns = expected.columns                      # every message column and the typed body columns
    got = read()
    assert multiset(got, columns) == multiset(expected, columns)
    assert got.count() == FIRST + MORE              # each message once (the multiset above has no repeats)
    assert dict(got.dtypes)["amount"] == "double" and dict(got.dtypes)["seq"] == "bigint"
    assert {r[0] for r in got.selectExpr("seq").collect()} == set(range(FIRST + MORE))

    third = backfill(lake, str(store), table, **run)        # nothing new: nothing appended
    assert third.rows == 0
    assert read().count() == FIRST + MORE
    # A run that died after the table's commit but before Spark recorded its batch as done: the next run
    # replays that batch (the same offsets), and the table's sink knows it has it already.
    commits = tmp_path / "checkpoint" / "commits"
    last = max(commits.glob("[0-9]*"), key=lambda p: int(p.name))
    last.unlink()
    (commits / f".{last.name}.crc").unlink(missing_ok=True)
    backfill(lake, str(store), table, **run)
    assert last.exists()                                    # the batch ran again ...
    assert read().count() == FIRST + MORE                   # ... and appended nothing

    days = utc_days(expected)
    assert len(days) >= 5
    if fmt == "delta":
        commits = [(op, rows) for _, op, rows in delta_appends(Path(table))]
        assert commits == [("STREAMING UPDATE", FIRST), ("STREAMING UPDATE", MORE)], commits
        assert lake.sql(f"DESCRIBE DETAIL delta.`{table}`").first()["partitionColumns"] == ["day"]
        assert delta_rows_per_day(Path(table)) == days
    else:
        assert iceberg_appends(lake, table) == [("append", FIRST), ("append", MORE)]
        assert iceberg_rows_per_day(lake, table) == days
    # The day column agrees with the partition it sits in.
    assert utc_days(got) == Counter({r["day"]: r["n"] for r in got.groupBy("day").count().withColumnRenamed(
        "count", "n").collect()})


@pytest.mark.parametrize("corpus", [pytest.param(c, id=c.name) for c in corpora()])
def test_golden_corpus_backfill_equals_its_direct_read(lake, corpus, tmp_path):
    """A real broker's store, read in place: the Delta and the Iceberg table each hold its direct read."""
    store = str(corpus / "store")
    expected = direct(lake, store)
    want = multiset(expected, expected.columns)
    assert sum(want.values()) > 0
    delta_path = str(tmp_path / "delta")
    iceberg = f"lake.golden.{corpus.name.replace('-', '_')}_{os.getpid()}"
    for fmt, table, read in (("delta", delta_path, lambda: lake.read.format("delta").load(delta_path)),
                             ("iceberg", iceberg, lambda: lake.table(iceberg))):
        if fmt not in HERE:
            continue
        done = backfill(lake, store, table, format=fmt, checkpoint=str(tmp_path / f"checkpoint-{fmt}"))
        assert done.rows == sum(want.values()), fmt
        assert multiset(read(), expected.columns) == want, fmt
