"""The ``rmq`` PySpark Python Data Source (batch read side).

``spark.read.format("rmq").load("/path/to/store")`` works without a register
call once the package is installed (the top-level ``pyspark_rmq`` module
exposes ``DefaultSource``); ``spark.dataSource.register(RmqDataSource)`` works
too.  See :mod:`rmqsource.spark.options` for the options.

Filter pushdown (``DataSourceReader.pushFilters``) needs
``spark.sql.python.filterPushdown.enabled=true``.  PySpark refuses a reader
that implements ``pushFilters`` when that setting is off, so when Spark plans
the read without pushdown we hand it a reader without ``pushFilters``: the
query still works, Spark just evaluates every filter itself.  pyspark 4.0
has no Python filter pushdown at all (:mod:`rmqsource.spark.compat`): there
every read is unfiltered at the source.
"""

from __future__ import annotations

import functools
import sys
from typing import Iterator, List

from .compat import FILTER_PUSHDOWN, Filter, require_python_data_source  # first: an unsupported pyspark fails here

require_python_data_source()     # pyspark 3.5: one line saying the jar is required there

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..store.layout import StoreLayout
from .batch import ReadSpec, read_partition
from .options import parse_options
from .planning import RmqPartition, plan
from .pushdown import Pushed, push_filters
from .schema import SPARK_DDL, requested_columns


class RmqDataSource(DataSource):
    """Apache RocketMQ store directories (CommitLog + ConsumeQueue + IndexFile) as a table."""

    @classmethod
    def name(cls) -> str:
        return "rmq"

    def __init__(self, options):
        super().__init__(options)

    @functools.cached_property
    def read_options(self):
        # Parsed on first use: stream reads and writes have options of their own.
        opts = parse_options(self.options)
        for root in opts.paths:
            layout = StoreLayout.for_config(root, opts.store_config)
            layout.check_is_store()
        return opts

    def schema(self) -> str:
        if str(self.options.get("bodyFormat", self.options.get("bodyformat", ""))).strip():
            return _body_ddl(self.options)
        metadata = str(self.options.get("metadata", "")).strip().lower()
        if metadata:
            from .metadata import METADATA_SCHEMAS, metadata_ddl
            if metadata in METADATA_SCHEMAS:
                return metadata_ddl(metadata)
            return SPARK_DDL            # parse_options says why when the read is planned
        view = str(self.options.get("view", "")).strip().lower()
        if view == "timers":
            from .timers import TIMERS_DDL
            return TIMERS_DDL
        if view == "transactions":
            from .transactions import TRANSACTIONS_DDL
            return TRANSACTIONS_DDL
        if view in ("dlq", "retry", "trace"):
            from .views import view_ddl
            return view_ddl(view)
        return SPARK_DDL

    def streamReader(self, schema):
        from .stream import RmqStreamReader
        return RmqStreamReader(self.options, schema)

    def writer(self, schema, overwrite: bool):
        from .sink import RmqBatchWriter
        return RmqBatchWriter(self.options, schema, overwrite)

    def streamWriter(self, schema, overwrite: bool):
        from .sink import RmqStreamWriter
        return RmqStreamWriter(self.options, schema, overwrite)

    def reader(self, schema) -> DataSourceReader:
        body = self.read_options.body
        if body is not None:
            from .bodies.decode import arrow_schema
        columns = requested_columns(schema, self.read_options.view, self.read_options.metadata,
                                    arrow_schema(body) if body is not None else None)
        if not FILTER_PUSHDOWN or _planned_without_pushdown():
            return RmqReader(self.read_options, columns)
        return RmqPushdownReader(self.read_options, columns)


def _body_ddl(options) -> str:
    """The message columns, then the decoded ones (and _decodeError): bodyFormat is refused with a view or
    metadata when the read is planned."""
    from .bodies.ddl import struct_ddl
    from .bodies.spec import parse_body_options
    spec = parse_body_options({str(k).lower(): "" if v is None else str(v) for k, v in dict(options).items()})
    return SPARK_DDL + ", " + struct_ddl(spec.columns)


def _planned_without_pushdown() -> bool:
    """True when PySpark's non-pushdown planning worker is asking for the reader."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith("plan_data_source_read.py"):
            return True
        frame = frame.f_back
    return False


class RmqReader(DataSourceReader):
    def __init__(self, options, columns):
        self.options = options
        self.columns = tuple(columns)
        self.pushed = Pushed()

    def partitions(self) -> List[InputPartition]:
        if self.options.metadata:
            from .metadata import plan_metadata
            return plan_metadata(self.options)
        if self.options.view == "transactions":
            from .transactions import plan_transactions
            return plan_transactions(self.options)
        if self.options.view == "timers":
            from .timers import TimersPushed, plan_timers
            return plan_timers(self.options, self.pushed if isinstance(self.pushed, TimersPushed) else TimersPushed())
        return plan(self.options, self.pushed)

    def read(self, partition) -> Iterator:
        if not isinstance(partition, RmqPartition):
            return iter(())          # Spark's stand-in when the plan has no partition
        if self.options.metadata:
            from .metadata import metadata_batches
            return metadata_batches(self.columns, partition)
        view = self.options.view
        if view in ("dlq", "retry", "trace"):
            from .views import message_columns, view_batches
            spec = ReadSpec(self.options, self.pushed, message_columns(view, self.columns))
            return view_batches(view, self.columns, read_partition(spec, partition), self.options)
        body = self.options.body
        if body is not None:
            from .bodies.decode import decode_batches, message_columns
            spec = ReadSpec(self.options, self.pushed, message_columns(self.columns, body))
            return decode_batches(body, self.columns, read_partition(spec, partition))
        spec = ReadSpec(self.options, self.pushed, self.columns)
        return read_partition(spec, partition)


class RmqPushdownReader(RmqReader):
    def pushFilters(self, filters: List[Filter]):
        if self.options.metadata or self.options.view == "transactions":
            self.pushed = Pushed()
            return iter(filters)            # Spark filters the (few) rows
        if self.options.view == "timers":
            from .timers import push_timer_filters
            pushed, rejected = push_timer_filters(filters)
        elif self.options.view in ("dlq", "retry", "trace"):
            from .views import push_view_filters
            pushed, rejected = push_view_filters(self.options.view, filters, index_lookups=self.options.index_lookups)
        else:
            pushed, rejected = push_filters(filters, index_lookups=self.options.index_lookups)
        self.pushed = pushed
        return iter(rejected)
