"""``rmq demo``: write a sample store, then query it with Spark through the ``rmq`` source.

The whole job runs on an embedded default (a temporary directory, local[*]
Spark) so a fresh checkout can see the product work end to end.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Optional

PRESET = Path(__file__).resolve().parents[1] / "spark_conf" / "spark-defaults.local.conf"


def spark_defaults(path: Path = PRESET) -> dict[str, str]:
    """``spark-defaults.conf`` entries (``key value`` lines, ``#`` comments)."""
    conf: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, value = line.partition(" ")
                conf[key.strip()] = value.strip()
    return conf


def local_session(app_name: str = "rmq-demo"):
    """A local[*] session whose Python workers run this interpreter (so they import rmqsource).

    The preset plus ``session_conf()``: the JVM scan's jar when it is built,
    and Python filter pushdown while batches are read in Python (every
    filtered query here starts from its own ``load()``, see the README).
    Started quietly (:mod:`rmqsource.spark.quiet`): warnings that show are real.
    """
    import os
    import sys

    from .spark.jar import session_conf
    from .spark.quiet import start_local_session
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return start_local_session("local[*]", app_name, {**spark_defaults(), **session_conf()})


def run_demo(directory: Optional[str] = None, messages: int = 200_000, keep: bool = False, out=print) -> int:
    from .sample import write_sample_store

    workdir = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="rmq-demo-"))
    store = workdir / "store"
    try:
        t0 = time.perf_counter()
        write_sample_store(store, messages)
        out(f"wrote {messages:,} messages to {store} in {time.perf_counter() - t0:.1f} s")

        from .spark.jar import BUILD_HINT, MODE_ENV, jar_path, scan_kind, session_jar
        jar = session_jar()
        how = (f"jar {jar}" if jar else f"{MODE_ENV}=python: no jar" if jar_path()
               else f"the JVM scan's jar is not built: {BUILD_HINT}")
        out(f"starting Spark (local[*]; {how}) ...")
        t0 = time.perf_counter()
        spark = local_session()
        out(f"Spark {spark.version} up in {time.perf_counter() - t0:.1f} s")
        from pyspark.sql import functions as F

        df = spark.read.format("rmq").load(str(store))
        out(f"format(\"rmq\") reads with the {scan_kind(df)}")
        out("\nschema:")
        out(df._jdf.schema().treeString())
        t0 = time.perf_counter()
        out("messages per topic (whole-store read: one partition per CommitLog segment range):")
        for row in df.groupBy("topic").count().orderBy("topic").collect():
            out(f"  {row['topic']:<16} {row['count']:>10,}")
        out(f"  ({time.perf_counter() - t0:.1f} s)")

        paid = (spark.read.format("rmq").option("topics", "PaymentEvents").load(str(store))
                .where(F.col("tags") == "paid"))
        t0 = time.perf_counter()
        n_paid = paid.count()
        out(f"\nPaymentEvents with tag 'paid': {n_paid:,} ({time.perf_counter() - t0:.1f} s); "
            "the tag filter runs on ConsumeQueue tag hashes:")
        mode = spark._jvm.org.apache.spark.sql.execution.ExplainMode.fromString("formatted")
        plan = paid._jdf.queryExecution().explainString(mode)
        for line in plan.splitlines():
            if line.strip().startswith("PushedFilters"):
                out("  " + line.strip())

        # collect() rather than first(): a LIMIT stops Spark's Python workers mid-read, which
        # pyspark's worker daemon reports as a BrokenPipeError on stderr.
        sample = paid.select("msgId", "uniqKey", "queueId", "queueOffset").collect()[0]
        t0 = time.perf_counter()
        # A fresh DataFrame per filtered query: Spark 4.3 keeps a pushed-down scan for
        # later queries of the same DataFrame (see the README).
        by_id = spark.read.format("rmq").load(str(store)).where(F.col("msgId") == sample["msgId"]).select("topic", "queueId", "queueOffset", "tags",
                                                                  "body").collect()
        out(f"\nlookup by msgId {sample['msgId']}: {len(by_id)} row in {time.perf_counter() - t0:.2f} s")
        for row in by_id:
            out(f"  {row['topic']}/{row['queueId']}@{row['queueOffset']} tags={row['tags']} "
                f"body={row['body'][:60].decode('utf-8', 'replace')}")

        out("\nmessages per minute per topic (first minutes):")
        minutes = (spark.read.format("rmq").load(str(store))
                   .groupBy(F.date_trunc("minute", "storeTimestamp").alias("minute"), "topic").count()
                   .orderBy("minute", "topic").collect())   # small: one row per minute and topic
        for row in minutes[:8 * 4]:
            out(f"  {row['minute']}  {row['topic']:<16} {row['count']:>8,}")
        spark.stop()
        return 0
    finally:
        if not keep and directory is None:
            shutil.rmtree(workdir, ignore_errors=True)
