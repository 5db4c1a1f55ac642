"""The JVM scan's positioned-read reader (the one that reads object stores and HDFS) on local files.

``spark.rmq.io.mode=positioned`` reads a local store through Hadoop's local FileSystem by
positioned reads, as ``s3a://`` and ``hdfs://`` stores are read, instead of mapping it.  The
golden-corpus, crash-case, lookup, count, live-store and error tests of the batch scan run here
again with it, and with a window small enough (64 KiB) that records straddle window ends: same
answers, same errors as the mapped reader.  So do the JVM stream's key tests (golden streams equal
batch reads, AvailableNow, consumer-group commits, DLedger crash cases), a stream following a
writer, and one following a sync job that replaces files with longer ones.  Those copies run in the
object-store tier; the default run keeps this module's own tests (the two readers' bytes, errors and
refusals side by side, records across window ends, streams over growing files).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from rmqsource.spark.jar import session_jar

from golden import written_prefix

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
from test_layouts import variant  # noqa: F401
from test_spark_stream_jvm import (  # noqa: F401
    jvm_spark,
    test_available_now_runs_natively_and_its_lag_metrics_match_rmq_lag,
    test_group_commit_from_the_jvm_is_read_by_the_python_engine,
    test_stream_admits_what_the_engine_serves_after_a_dledger_crash,
    test_stream_rows_equal_the_batch_scan_column_for_column,
)
from test_spark_jvm_scan import (  # noqa: F401
    test_count_pushdown_equals_engine_and_full_read,
    test_decompress_zlib_lz4_zstd_with_a_cap,
    test_explain_shows_jvm_scan_with_pushed_filters_and_pruned_columns,
    test_point_lookup_is_answered_on_the_driver_without_a_job,
    test_store_being_written_shows_only_dispatched_records,
    test_whole_store_count_from_consume_queue_offsets,
)

# The imported copies' tier (tests/conftest.py marks them): scripts/test_objectstore.sh, whose stores all take
# this reader.
RERUN_MARKER = "objectstore"

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


# Layouts read by neither reader: the positioned reader finds them from listings (no request per
# folder it checks) and refuses them as the mapped reader does. (consumequeue/ holding a RocksDB database
# is read from local folders and refused elsewhere: tests/golden/test_rocksdb_queues.py.)
NOT_READ = ["rocksdb-consumequeue_rocksdb", "batchconsumequeue", "consumequeue_ext",
            "compaction", "tiered", "multi-path-commitlog", "readOnlyCommitLogStorePaths",
            "commitlog-beside-storePathCommitLog"]


@pytest.mark.parametrize("variant", NOT_READ, indirect=True, ids=NOT_READ)
def test_other_layouts_are_refused_as_by_the_mapped_reader(spark, variant):
    store, overrides, folder, words = variant

    def refusal() -> str:
        r = spark.read.format("rmq")
        for k, v in (o.split("=", 1) for o in overrides):
            r = r.option(k, v)
        with pytest.raises(Exception) as e:
            r.load(str(store)).count()
        return next(line for line in str(e.value).splitlines() if "UnsupportedLayoutError" in line)

    positioned = refusal()
    spark.conf.unset(MODE)
    assert positioned == refusal()
    assert f"{folder}: " in positioned and words in positioned


# --------------------------------------------------------------------------- streams

def _follow(spark, root, tmp_path, between, total, **options):
    """Rows (queueId, queueOffset, body, storeSize) of a stream over ``root`` until ``total`` arrived;
    ``between()`` runs once, after the first batch (before the next trigger)."""
    import time
    rows = []

    def each(batch_df, batch_id):
        rows.extend(tuple(r) for r in batch_df.collect())
        if batch_id == 0:
            between()

    reader = spark.readStream.format("rmq").option("topics", "T").option("startingOffsets", "earliest")
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (reader.load(str(root)).select("queueId", "queueOffset", "body", "storeSize").writeStream
         .foreachBatch(each).option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(processingTime="300 milliseconds").start())
    try:
        deadline = time.monotonic() + 180
        while len(rows) < total and q.exception() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert q.exception() is None, str(q.exception())
    finally:
        q.stop()
    assert q.recentProgress[-1]["sources"][0]["description"].startswith("RmqMicroBatchStream(JVM)")
    return rows


def test_a_stream_reads_through_hadoop_and_follows_a_writer(spark, tmp_path):
    """Positioned mode streams through Hadoop's file system (the CommitLog's record bytes, at least, are
    read by it), and units written into the same full-size ConsumeQueue files between triggers are read."""
    from test_spark_stream import fill
    root = tmp_path / "store"
    fill(root, 200, body_size=1000)
    before = _file_bytes_read(spark)
    rows = _follow(spark, root, tmp_path, lambda: fill(root, 100, start=200, body_size=1000), 300)
    read = _file_bytes_read(spark) - before
    keys = [(r[0], r[1]) for r in rows]
    assert len(keys) == len(set(keys)) == 300
    assert sorted(keys) == sorted((i % 4, i // 4) for i in range(300))
    assert sorted(bytes(r[2]) for r in rows) == sorted(str(i).encode().ljust(1000, b".") for i in range(300))
    assert read >= sum(r[3] for r in rows), (read, sum(r[3] for r in rows))


def test_a_stream_follows_files_replaced_by_longer_ones(spark, tmp_path):
    """A sync job replaces the last CommitLog and ConsumeQueue files with longer ones (a new file renamed
    over the old, as object stores replace, never append): the next trigger reads the records they
    gained, once each."""
    import os
    from rmqsource.store.config import StoreConfig
    from test_spark_stream import fill
    config = StoreConfig().with_overrides({"mappedFileSizeCommitLog": str(64 * 1024),
                                           "mappedFileSizeConsumeQueue": str(300 * 20)})
    props = tmp_path / "store.properties"
    props.write_text("mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=6000\n")
    source, mirror = tmp_path / "source", tmp_path / "mirror"
    synced: dict = {}

    def sync() -> list:
        changed = []
        for rel, data in written_prefix(source, config).items():
            if synced.get(rel) == data:
                continue
            target = mirror / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            part = target.with_name(target.name + ".part")       # (not a segment name: listings skip it)
            part.write_bytes(data)
            os.replace(part, target)
            synced[rel] = data
            changed.append(rel)
        return changed

    fill(source, 300, config=config, body_size=200)          # past the first 64 KiB segment
    sync()
    changed = []

    def more():
        fill(source, 120, start=300, config=config, body_size=200)
        changed.extend(sync())

    rows = _follow(spark, mirror, tmp_path, more, 420, config=str(props))
    assert any(c.startswith("commitlog/") for c in changed) and any(c.startswith("consumequeue/") for c in changed)
    keys = [(r[0], r[1]) for r in rows]
    assert len(keys) == len(set(keys)) == 420
    assert sorted(keys) == sorted((i % 4, i // 4) for i in range(420))
    assert sorted(bytes(r[2]) for r in rows) == sorted(str(i).encode().ljust(200, b".") for i in range(420))


# --------------------------------------------------------------------------- remote read shape

@pytest.mark.parametrize("window", [64 * 1024, 8 << 20], ids=["64KiB-windows", "8MiB-windows"])
def test_tag_reads_over_every_queue_pick_the_mapped_readers_rows(spark, window):
    """A tag filter over every queue is read in CommitLog order, records merged within the gap rule or
    read by whole windows where dense (each tag of the golden stores, rare and common): the rows are
    the mapped reader's."""
    from test_spark_batch import CORPORA, rmq
    spark.conf.set(WINDOW, str(window))
    for corpus in CORPORA:
        tags = [r.tags for r in rmq(spark, corpus).where("tags IS NOT NULL").groupBy("tags").count()
                .orderBy("count").collect()]
        assert tags, corpus
        for chosen in {tags[0], tags[len(tags) // 2], tags[-1]}:
            cols = ["topic", "queueId", "queueOffset", "commitLogOffset", "body", "tags"]
            positioned = sorted(tuple(r) for r in rmq(spark, corpus).where(f"tags = '{chosen}'").select(*cols).collect())
            spark.conf.unset(MODE)
            try:
                mapped = sorted(tuple(r) for r in rmq(spark, corpus).where(f"tags = '{chosen}'").select(*cols).collect())
            finally:
                spark.conf.set(MODE, "positioned")
            assert positioned == mapped and mapped, (corpus.name, chosen)


def test_a_record_claiming_more_than_64_MiB_is_refused_before_it_is_read(spark, tmp_path):
    """A hostile header inside the valid CommitLog claims 70 MiB: the positioned reader fails with a
    CorruptRecordError naming file and offset instead of allocating what it claims."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import bench_spark_read
    store = tmp_path / "store"
    bench_spark_read.generate(store, 170_000)            # ~72 MiB of records in one 1 GiB (sparse) segment
    read = lambda: spark.read.format("rmq").load(str(store))  # noqa: E731
    phy, msg_id = read().where("topic = 'BenchA' AND queueId = 0 AND queueOffset = 0") \
        .select("commitLogOffset", "msgId").collect()[0]
    segment = store / "commitlog" / f"{0:020d}"
    with open(segment, "r+b") as f:
        f.seek(phy)
        f.write((70 << 20).to_bytes(4, "big"))
    text = _error_text(lambda: read().where(f"msgId = '{msg_id}'").select("body").collect())
    assert f"{segment}, offset {phy}" in text
    assert "record of 73400320 bytes claimed" in text and "more than the 67108864 bytes" in text
