"""What the running pyspark offers rmqsource: the one place that knows.

Supported: pyspark 4.0 to 4.x, and pyspark 3.5 with the rmq jar. The Python
Data Source API (4.0+) grew between those versions, so each feature is decided
here once, by looking for it (never by version strings), and the rest of the
package imports the names below:

* ``PYTHON_DATA_SOURCE`` (4.0+: ``pyspark.sql.datasource``). Without it
  (pyspark 3.5) only the jar serves ``format("rmq")``: the Python data source,
  its sinks and ``RMQ_SPARK_MODE=python`` fail in one line
  (:func:`require_python_data_source`), sessions made here get the jar and the
  session catalog that serves ``USING rmq`` tables (``JAR_SESSION_CONF``), and
  the codecs and planner the CLI shares with the source still import (the
  ``InputPartition`` stand-in below).
* ``FILTER_PUSHDOWN`` (4.1+: ``DataSourceReader.pushFilters`` and the filter
  classes). Without it the filter classes below are stand-ins no filter is an
  instance of, and Spark evaluates every filter itself (reads are unfiltered
  at the source).
* ``ADMISSION_CONTROL`` (4.2+: ``latestOffset(start, limit)``, ``ReadLimit``,
  ``SupportsTriggerAvailableNow``). Without it the stream reader gets
  ``latestOffset()`` with no arguments; it then tracks where the last batch
  ended itself and bounds the offsets it returns by maxMessagesPerTrigger /
  maxBytesPerTrigger (the ReadLimit stand-ins below carry those), and
  Trigger.AvailableNow runs through Spark's own wrapper: one batch up to the
  offsets present when the query starts.
* ``DataSourceStreamArrowWriter`` (4.1+). pyspark 4.0 hands Arrow batches to
  any ``DataSourceArrowWriter``, streaming or not, so there the stream sink is
  both a stream writer and an Arrow writer.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from ..errors import RmqError

SUPPORTED = "pyspark 4.0 to 4.x (Spark 4.0, 4.1, 4.2, 4.3), or 3.5 with the rmq jar"
JAR_HINT = "load the rmq jar instead (spark.jars = the path `rmq jar` prints)"
# The jar-only Spark: it has the DataSource V2 API the jar uses but no Python Data Source API.
JAR_ONLY_SPARK = "3.5"


class UnsupportedSparkError(RmqError):
    """The installed pyspark lacks what rmqsource (or the asked-for mode) needs."""


def pyspark_version() -> str:
    try:
        import pyspark
    except ImportError:
        return "none installed"
    return getattr(pyspark, "__version__", "of unknown version")


def _has_python_data_source() -> bool:
    return importlib.util.find_spec("pyspark") is not None \
        and importlib.util.find_spec("pyspark.sql.datasource") is not None \
        and hasattr(importlib.import_module("pyspark.sql.datasource"), "DataSourceStreamReader")


PYTHON_DATA_SOURCE = _has_python_data_source()


def check_supported() -> None:
    """One line naming the found and the supported pyspark when neither the data source API nor the jar's
    Spark (3.5: the jar alone serves ``rmq`` there) is found."""
    version = pyspark_version()
    major = version.split(".")[0]
    if PYTHON_DATA_SOURCE:
        if major.isdigit() and int(major) >= 5:
            raise UnsupportedSparkError(f"rmqsource supports {SUPPORTED}; found pyspark {version}")
        return
    if version.split(".")[:2] != JAR_ONLY_SPARK.split("."):
        raise UnsupportedSparkError(f"rmqsource needs {SUPPORTED}; found pyspark {version}, which has "
                                    f"no Python Data Source API")


def require_python_data_source() -> None:
    """One line when the Python data source is asked for on a pyspark without the API (3.5: jar only)."""
    if not PYTHON_DATA_SOURCE:
        raise UnsupportedSparkError(f"the rmq jar is required on Spark {JAR_ONLY_SPARK}: pyspark {pyspark_version()} "
                                    f"has no Python Data Source API, so only the jar serves format(\"rmq\") "
                                    f"(spark.jars = the path `rmq jar` prints; RMQ_SPARK_MODE=python needs "
                                    f"pyspark 4.0+)")


check_supported()

# Spark settings a session with the jar needs here. Spark 3.5's session catalog reads every table through
# the V1 API, which the jar's V2-only provider lacks: its catalog extension serves USING rmq tables.
# On every Spark, its session extension turns array filters on keys into IndexFile lookups (docs/reading.md).
JAR_SESSION_CONF: dict[str, str] = ({} if PYTHON_DATA_SOURCE else {
    "spark.sql.catalog.spark_catalog": "io.rmqsource.spark.RmqSessionCatalog"}) | {
    "spark.sql.extensions": "io.rmqsource.spark.RmqExtensions"}

if PYTHON_DATA_SOURCE:
    from pyspark.sql import datasource as _ds  # noqa: E402  (after the check: its error is the one line users see)
    from pyspark.sql.datasource import InputPartition
else:
    _ds = None

    class InputPartition:
        """Stand-in (pyspark 3.5): the planner's partitions, used by ``rmq export`` without Spark."""

        def __init__(self, value) -> None:
            self.value = value

# --------------------------------------------------------------------------- filter pushdown (4.1+)

FILTER_PUSHDOWN = PYTHON_DATA_SOURCE and hasattr(_ds, "Filter") and hasattr(_ds.DataSourceReader, "pushFilters")

if FILTER_PUSHDOWN:
    from pyspark.sql.datasource import (EqualTo, Filter, GreaterThan, GreaterThanOrEqual, In, LessThan,
                                        LessThanOrEqual)
else:
    class Filter:
        """Stand-in: this pyspark never hands filters to a Python source."""

    class EqualTo(Filter): pass                 # noqa: E701
    class GreaterThan(Filter): pass             # noqa: E701
    class GreaterThanOrEqual(Filter): pass      # noqa: E701
    class In(Filter): pass                      # noqa: E701
    class LessThan(Filter): pass                # noqa: E701
    class LessThanOrEqual(Filter): pass         # noqa: E701

# --------------------------------------------------------------------------- stream admission control (4.2+)

ADMISSION_CONTROL = PYTHON_DATA_SOURCE and importlib.util.find_spec("pyspark.sql.streaming.datasource") is not None

if ADMISSION_CONTROL:
    from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxBytes, ReadMaxRows,
                                                  ReadMinRows, SupportsTriggerAvailableNow)
else:
    class ReadLimit:
        """Stand-in: what the options ask of a micro-batch (this pyspark has no ReadLimit)."""

    @dataclass
    class ReadAllAvailable(ReadLimit):
        pass

    @dataclass
    class ReadMaxRows(ReadLimit):
        max_rows: int

    @dataclass
    class ReadMaxBytes(ReadLimit):
        max_bytes: int

    @dataclass
    class ReadMinRows(ReadLimit):
        min_rows: int

    class SupportsTriggerAvailableNow:
        """Stand-in: Spark's AvailableNow wrapper calls ``latestOffset()`` once, at the start."""

# --------------------------------------------------------------------------- sinks (Arrow stream writer: 4.1+)

# (none without the Python data source: the sink module stops at require_python_data_source() first)
if PYTHON_DATA_SOURCE and hasattr(_ds, "DataSourceStreamArrowWriter"):
    DataSourceStreamArrowWriter = _ds.DataSourceStreamArrowWriter
elif PYTHON_DATA_SOURCE:
    class DataSourceStreamArrowWriter(_ds.DataSourceStreamWriter, _ds.DataSourceArrowWriter):
        """pyspark 4.0's write worker passes Arrow batches to any ``DataSourceArrowWriter``."""


# --------------------------------------------------------------------------- Spark -> Arrow schema

def to_arrow_schema(spark_schema):
    """Spark's own Spark-to-Arrow schema conversion, timestamps in UTC (4.2+: ``timezone=``,
    before: ``timestamp_utc=``)."""
    import inspect

    from pyspark.sql.pandas.types import to_arrow_schema as convert
    if "timezone" in inspect.signature(convert).parameters:
        return convert(spark_schema, timezone="UTC")
    return convert(spark_schema, timestamp_utc=True)


def describe() -> str:
    """One line for ``rmq jar`` / diagnostics: which optional API features this pyspark has."""
    have = {"Python data source": PYTHON_DATA_SOURCE, "filter pushdown": FILTER_PUSHDOWN,
            "stream admission control": ADMISSION_CONTROL,
            "Arrow stream writer": hasattr(_ds, "DataSourceStreamArrowWriter")}
    return f"pyspark {pyspark_version()}: " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in have.items())
