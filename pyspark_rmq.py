"""Entry point Spark looks for: a top-level ``pyspark_*`` module exposing ``DefaultSource``.

With the package installed, ``spark.read.format("rmq")`` works without a
register call.
"""

from rmqsource.spark.source import RmqDataSource as DefaultSource

__all__ = ["DefaultSource"]
