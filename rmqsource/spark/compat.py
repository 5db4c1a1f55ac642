"""What the running pyspark's Python Data Source API offers: the one place that knows.

Supported: pyspark 4.0 to 4.x. The API grew between those versions, so each
feature is decided here once, by looking for it (never by version strings),
and the rest of the package imports the names below:

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

SUPPORTED = "pyspark 4.0 to 4.x (Spark 4.0, 4.1, 4.2, 4.3)"
JAR_HINT = "load the rmq jar instead (spark.jars = the path `rmq jar` prints)"


class UnsupportedSparkError(RmqError):
    """The installed pyspark lacks the Python Data Source API rmqsource needs."""


def pyspark_version() -> str:
    try:
        import pyspark
    except ImportError:
        return "none installed"
    return getattr(pyspark, "__version__", "of unknown version")


def check_supported() -> None:
    """One line naming the found and the supported pyspark when the data source API is missing."""
    if importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyspark.sql.datasource") is None \
            or not hasattr(importlib.import_module("pyspark.sql.datasource"), "DataSourceStreamReader"):
        raise UnsupportedSparkError(f"rmqsource needs {SUPPORTED}; found pyspark {pyspark_version()}, which has "
                                    f"no Python Data Source API")
    import pyspark
    major = str(getattr(pyspark, "__version__", "4")).split(".")[0]
    if major.isdigit() and int(major) >= 5:
        raise UnsupportedSparkError(f"rmqsource supports {SUPPORTED}; found pyspark {pyspark.__version__}")


check_supported()

from pyspark.sql import datasource as _ds  # noqa: E402  (after the check: its error is the one line users see)

# --------------------------------------------------------------------------- filter pushdown (4.1+)

FILTER_PUSHDOWN = hasattr(_ds, "Filter") and hasattr(_ds.DataSourceReader, "pushFilters")

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

ADMISSION_CONTROL = importlib.util.find_spec("pyspark.sql.streaming.datasource") is not None

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

if hasattr(_ds, "DataSourceStreamArrowWriter"):
    DataSourceStreamArrowWriter = _ds.DataSourceStreamArrowWriter
else:
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
    have = {"filter pushdown": FILTER_PUSHDOWN, "stream admission control": ADMISSION_CONTROL,
            "Arrow stream writer": hasattr(_ds, "DataSourceStreamArrowWriter")}
    return f"pyspark {pyspark_version()}: " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in have.items())
