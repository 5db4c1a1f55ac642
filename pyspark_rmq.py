"""Entry point Spark looks for: a top-level ``pyspark_*`` module exposing ``DefaultSource``.

With the package installed, ``spark.read.format("rmq")`` works without a
register call.

When the source cannot be imported (an unsupported pyspark, a broken
install), Spark's lookup would only log the cause as a warning and then say
the source does not exist (with the jar: "set PYSPARK_PYTHON"). So the module
then exposes a stand-in ``rmq`` source whose first use fails with the cause.

A pyspark without Python data sources (3.5) never looks for this module; there
it exposes nothing (the rmq jar serves ``format("rmq")``).
"""

import importlib.util

if importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyspark.sql.datasource") is None:
    __all__ = []
else:
    try:
        from rmqsource.spark.source import RmqDataSource as DefaultSource
    except Exception as _cause:          # noqa: BLE001 - every cause is reported at first use
        from pyspark.sql.datasource import DataSource as _DataSource

        class DefaultSource(_DataSource):
            """``rmq`` whose import failed: its first use raises the reason."""

            reason = f"the rmq data source could not be imported: {type(_cause).__name__}: {_cause}"

            @classmethod
            def name(cls) -> str:
                return "rmq"

            def __init__(self, options):
                raise ImportError(self.reason)

            def schema(self):
                raise ImportError(self.reason)

    __all__ = ["DefaultSource"]
