"""The JVM scan's positioned-read reader (the one that reads object stores and HDFS) on local files.

``spark.rmq.io.mode=positioned`` reads a local store through Hadoop's local FileSystem by
positioned reads, as ``s3a://`` and ``hdfs://`` stores are read, instead of mapping it.  The
golden-corpus, crash-case, lookup, count and error tests of the batch scan run here again with it,
and with a window small enough (64 KiB) that records straddle window ends: same answers, same
errors as the mapped reader.
"""

from __future__ import annotations

import pytest

from rmqsource.spark.jar import session_jar

# The tests below are the mapped reader's; here they run through the `spark` fixture of this module.
from test_spark_batch import (  # noqa: F401
    test_crash_stores_read_as_recovered_view,
    test_data_loss,
    test_hostile_record_names_file_and_offset,
    test_msgid_pushdown_reads_one_record,
    test_reads_equal_engine_get,
    test_several_stores_in_one_read,
    test_tag_filtered_reads_equal_engine_get_tag,
    test_timestamp_options_follow_store_time,
    test_topic_options_and_offsets,
    test_uniqkey_pushdown_uses_index,
)

pytestmark = [pytest.mark.spark,
              pytest.mark.skipif(session_jar() is None, reason="the positioned reader is the JVM scan's (no jar)")]

MODE = "spark.rmq.io.mode"
WINDOW = "spark.rmq.io.windowBytes"


@pytest.fixture
def spark(spark):
    """The session's reads go through the positioned reader with 64 KiB windows while a test runs."""
    spark.conf.set(MODE, "positioned")
    spark.conf.set(WINDOW, str(64 * 1024))
    try:
        yield spark
    finally:
        spark.conf.unset(MODE)
        spark.conf.unset(WINDOW)
