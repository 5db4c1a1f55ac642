"""A store's topics materialized into a lake table: Delta Lake or Apache Iceberg (docs/lake.md).

:func:`backfill` runs ``spark.readStream.format("rmq")`` once with ``Trigger.AvailableNow`` into the table,
partitioned by ``day`` (the UTC day of ``storeTimestamp``). The checkpoint holds the queue offsets written:
the next run starts there and appends only what the store gained since, each message once.

:func:`lake_conf` gives the session settings users add for the runtimes: ``spark.jars.packages`` (Ivy
resolves them from Maven Central) for the installed Spark's tested pair, the session extensions, Delta's
session catalog and an Iceberg catalog of type ``hadoop`` over a warehouse folder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence

from ..errors import OptionError
from .compat import UnsupportedSparkError, pyspark_version

FORMATS = ("delta", "iceberg")
DAY_COLUMN = "day"
# The UTC day, whatever the session time zone (to_date would take the session's): a re-run from another
# session puts a message in the same partition, and Iceberg's days() transform agrees.
DAY_EXPR = "date_from_unix_date(CAST(floor(unix_millis(storeTimestamp) / 86400000) AS INT))"

# Runtime packages tested with this Spark line: Spark minor -> format -> coordinates. scripts/test_lake.sh runs
# 4.1 by default, 4.2 with RMQ_LAKE_PYSPARK=4.2.1.
TESTED_RUNTIMES: Mapping[str, Mapping[str, str]] = {
    "4.1": {"delta": "io.delta:delta-spark_2.13:4.3.1",
            "iceberg": "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0"},
    "4.2": {"delta": "io.delta:delta-spark_2.13:4.4.0"},
}
# What was seen where no pair is tested (measured; the error below repeats it).
UNTESTED_BECAUSE = {
    "4.2": "no Iceberg runtime is built for Spark 4.2; iceberg-spark-runtime-4.1 fails there (SparkView cannot "
           "implement Spark 4.2's View)",
    "4.3": "Delta 4.4.0 (built for Spark 4.2) writes but fails to read on Spark 4.3 (NoSuchMethodError "
           "LogicalRDD.<init>), and no Iceberg runtime is built for Spark 4.2+",
}

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
ICEBERG_EXTENSION = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
ICEBERG_CATALOG = "org.apache.iceberg.spark.SparkCatalog"


def runtime_formats(spark_version: Optional[str] = None) -> list[str]:
    """The formats with a tested runtime on this Spark (the installed pyspark)."""
    return [f for f in FORMATS if f in TESTED_RUNTIMES.get(_line(spark_version or pyspark_version()), {})]


def runtime_packages(formats: Iterable[str] = FORMATS, spark_version: Optional[str] = None) -> list[str]:
    """Maven coordinates of the tested runtimes for ``formats`` on this Spark (the installed pyspark)."""
    formats = _checked_formats(formats)
    version = spark_version or pyspark_version()
    tested = TESTED_RUNTIMES.get(_line(version), {})
    missing = [f for f in formats if f not in tested]
    if missing:
        pairs = "; ".join(f"Spark {s}: " + ", ".join(p.values()) for s, p in TESTED_RUNTIMES.items())
        why = UNTESTED_BECAUSE.get(_line(version), "not tested")
        raise UnsupportedSparkError(f"no tested {'/'.join(missing)} runtime for pyspark {version} ({why}); "
                                    f"tested pairs: {pairs}; pass packages= to choose one yourself")
    return [tested[f] for f in formats]


def lake_conf(formats: Iterable[str] = FORMATS, *, warehouse: Optional[str] = None, catalog: str = "lake",
              ivy: Optional[str] = None, packages: Optional[Sequence[str]] = None,
              base: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """Session settings for writing ``formats``, merged into ``base`` (e.g. ``session_conf()``).

    Delta: its extension and session catalog (tables by name or path). Iceberg: its extension and the
    catalog ``catalog`` of type ``hadoop`` over ``warehouse`` (required). ``ivy``: the folder Ivy resolves
    ``spark.jars.packages`` into (Spark's default: ``~/.ivy2``). Extensions already in ``base`` (the rmq
    jar's) are kept.
    """
    formats = _checked_formats(formats)
    conf = dict(base or {})
    wanted = list(packages) if packages is not None else runtime_packages(formats)
    conf["spark.jars.packages"] = _joined(conf.get("spark.jars.packages"), wanted)
    if ivy:
        conf["spark.jars.ivy"] = ivy
    extensions = []
    if "delta" in formats:
        session_catalog = conf.get("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
        if session_catalog != DELTA_CATALOG:
            # Spark 3.5 with the rmq jar: its session catalog serves USING rmq tables; one catalog only.
            raise OptionError(f"spark.sql.catalog.spark_catalog is {session_catalog} in base; Delta's session "
                              f"catalog ({DELTA_CATALOG}) would replace it")
        extensions.append(DELTA_EXTENSION)
        conf["spark.sql.catalog.spark_catalog"] = DELTA_CATALOG
    if "iceberg" in formats:
        if not warehouse:
            raise OptionError("an Iceberg catalog of type hadoop needs a warehouse folder (warehouse=...)")
        extensions.append(ICEBERG_EXTENSION)
        conf[f"spark.sql.catalog.{catalog}"] = ICEBERG_CATALOG
        conf[f"spark.sql.catalog.{catalog}.type"] = "hadoop"
        conf[f"spark.sql.catalog.{catalog}.warehouse"] = warehouse
    conf["spark.sql.extensions"] = _joined(conf.get("spark.sql.extensions"), extensions)
    return conf


@dataclass(frozen=True)
class Backfill:
    """What one run appended: rows and micro-batches, and the finished query (its ``recentProgress``)."""
    rows: int
    batches: int
    query: object


def with_day(df):
    """``df`` with the ``day`` column (DATE): the UTC day of ``storeTimestamp``."""
    from pyspark.sql import functions as F
    return df.withColumn(DAY_COLUMN, F.expr(DAY_EXPR))


def backfill(spark, store: str, table: str, *, format: str, checkpoint: str,
             topics: Optional[Sequence[str] | str] = None, body_format: Optional[str] = None,
             body_schema: Optional[str] = None, options: Optional[Mapping[str, str]] = None,
             timeout_s: Optional[float] = None) -> Backfill:
    """Append what ``store`` holds past ``checkpoint`` to ``table`` (partitioned by ``day``) and wait.

    ``table``: a table name (``toTable``: created on the first run; for Iceberg ``catalog.db.name``), or for
    Delta a path (``/...`` or a URI). ``topics``: names (default: every topic but RocketMQ's own, including
    topics created later). ``body_format`` / ``body_schema``: typed body columns (docs/bodies.md).
    ``options``: more stream options (``maxMessagesPerTrigger``, ``subExpression`` ...). The first run
    reads from the earliest offsets; later runs from the checkpoint, up to what is present when they start.
    """
    format = _checked_formats([format])[0]
    if _is_path(table) and format != "delta":
        raise OptionError(f"{table}: an Iceberg table is named in its catalog (catalog.db.table), not by path")
    reader = spark.readStream.format("rmq").option("startingOffsets", "earliest")
    if topics is None:
        reader = reader.option("topicPattern", ".*")
    else:
        reader = reader.option("topics", topics if isinstance(topics, str) else ",".join(topics))
    if body_format is not None:
        reader = reader.option("bodyFormat", body_format)
    if body_schema is not None:
        reader = reader.option("bodySchema", body_schema)
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    writer = (with_day(reader.load(store)).writeStream.format(format).outputMode("append")
              .partitionBy(DAY_COLUMN).option("checkpointLocation", checkpoint)
              .trigger(availableNow=True))
    query = writer.start(table) if _is_path(table) else writer.toTable(table)
    query.awaitTermination(timeout_s)
    if query.isActive:
        query.stop()
        raise TimeoutError(f"backfill of {store} into {table} did not finish in {timeout_s} s (stopped; "
                           f"the next run resumes from {checkpoint})")
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    return Backfill(rows=sum(p["numInputRows"] for p in progress), batches=len(progress), query=query)


def _line(spark_version: str) -> str:
    """``4.1.4`` -> ``4.1``: runtimes are built per Spark minor line."""
    return ".".join(spark_version.split(".")[:2])


def _checked_formats(formats: Iterable[str]) -> list[str]:
    chosen = [f.strip().lower() for f in ([formats] if isinstance(formats, str) else formats)]
    unknown = [f for f in chosen if f not in FORMATS]
    if unknown or not chosen:
        raise OptionError(f"lake format {', '.join(unknown) or '(none)'}: expected delta or iceberg")
    return chosen


def _joined(existing: Optional[str], more: Sequence[str]) -> str:
    items = [s for s in (existing or "").split(",") if s.strip()]
    return ",".join(items + [m for m in more if m not in items])


def _is_path(table: str) -> bool:
    return table.startswith("/") or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", table) is not None
