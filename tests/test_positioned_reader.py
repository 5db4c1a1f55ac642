"""The JVM scan's positioned-read reader (the one that reads object stores and HDFS) on local files.

``spark.rmq.io.mode=positioned`` reads a local store through Hadoop's local FileSystem by
positioned reads, as ``s3a://`` and ``hdfs://`` stores are read, instead of mapping it.  The
golden-corpus, crash-case, lookup, count, live-store and error tests of the batch scan run here
again with it, and with a window small enough (64 KiB) that records straddle window ends: same
answers, same errors as the mapped reader.
"""

from __future__ import annotations

import re

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

from test_read_regressions import (  # noqa: F401
    g1_store,
    test_a_segment_file_longer_than_its_segment_reads_no_record_twice,
    test_consumequeue_gap_is_refused_at_planning_naming_the_missing_file,
    test_offset_bound_inside_a_record_narrows_to_whole_records,
    test_queue_offset_at_int64_max_is_a_row,
    test_read_of_a_store_whose_segment_grew_returns_every_row,
    test_tags_code_of_units_after_a_truncated_consume_queue_file,
    test_topic_read_past_a_truncated_consume_queue_file_names_that_file,
)
from test_spark_jvm_scan import (  # noqa: F401
    test_count_pushdown_equals_engine_and_full_read,
    test_decompress_zlib_lz4_zstd_with_a_cap,
    test_explain_shows_jvm_scan_with_pushed_filters_and_pruned_columns,
    test_point_lookup_is_answered_on_the_driver_without_a_job,
    test_store_being_written_shows_only_dispatched_records,
    test_whole_store_count_from_consume_queue_offsets,
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


@pytest.fixture
def jvm(spark):
    """test_spark_jvm_scan's session fixture, here with this module's positioned `spark`."""
    return spark


def _file_bytes_read(spark) -> int:
    """Bytes Hadoop's local file system has read in this JVM (the positioned reader's; maps bypass it)."""
    return sum(s.getBytesRead() for s in spark._jvm.org.apache.hadoop.fs.FileSystem.getAllStatistics()
               if s.getScheme() == "file")


def test_positioned_mode_reads_through_hadoop_and_mapped_mode_does_not(spark):
    from test_spark_batch import CORPORA, rmq
    corpus = CORPORA[0]
    store_bytes = sum(f.stat().st_size for f in (corpus / "store" / "commitlog").iterdir())
    before = _file_bytes_read(spark)
    n, record_bytes = rmq(spark, corpus).selectExpr("count(body)", "sum(storeSize)").collect()[0]
    read = _file_bytes_read(spark) - before
    assert n > 0 and record_bytes <= read <= store_bytes + (1 << 20), (read, record_bytes, store_bytes)
    spark.conf.unset(MODE)
    before = _file_bytes_read(spark)
    assert rmq(spark, corpus).selectExpr("count(body)").collect()[0][0] == n
    assert _file_bytes_read(spark) - before < record_bytes
    with pytest.raises(Exception, match="spark.rmq.io.mode must be auto or positioned, got 'mapped'"):
        spark.conf.set(MODE, "mapped")
        rmq(spark, corpus).count()


def _error_text(run) -> str:
    with pytest.raises(Exception) as exc:
        run()
    text = str(exc.value)
    assert "CorruptRecordError" in text, text[-2000:]
    return next(line for line in text.splitlines() if "CorruptRecordError" in line)


@pytest.mark.parametrize("read_path", [{}, {"topicPattern": ".*"}], ids=["whole_store", "topics"])
def test_truncated_segment_fails_with_the_mapped_readers_error(spark, tmp_path, read_path):
    """A segment cut short (a sync that stopped half way) fails the read naming file and offset, as mapped."""
    from golden import copy_store
    from test_spark_batch import CORPORA, rmq
    corpus = CORPORA[0]
    store = copy_store(corpus / "store", tmp_path / "store")
    first = sorted((store / "commitlog").iterdir())[0]
    size = first.stat().st_size
    with open(first, "r+b") as f:
        f.truncate(size // 2 + 7)                 # inside a record
    run = lambda: rmq(spark, corpus, store, **read_path).selectExpr("max(storeTimestamp)").collect()  # noqa: E731
    positioned = _error_text(run)
    spark.conf.unset(MODE)
    mapped = _error_text(run)
    positioned, mapped = (t.split("CorruptRecordError: ", 1)[1] for t in (positioned, mapped))
    assert positioned.startswith(f"{first}, offset ")
    if not read_path:
        assert positioned == mapped
    else:     # (the task of whichever queue meets the cut first fails the query)
        assert re.sub(r"\d+", "N", positioned) == re.sub(r"\d+", "N", mapped)
        assert int(re.search(r"offset (\d+)", positioned).group(1)) >= size // 2 + 7
