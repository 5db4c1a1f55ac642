#!/usr/bin/env python
"""Benchmark: reading a topic's history from the store vs draining it from a real broker with a consumer.

One run:
1. Builds the real-broker harness (tests/support/broker_harness.py, the broker tier's build) for --version and
   starts Apache RocketMQ's NameServer and Broker (harness class BrokerBench, mode ``serve``) with the default
   file sizes (1 GiB CommitLog files, 300,000-unit ConsumeQueue files) and the per-pull limits raised for the
   tuned consumer (maxTransferCount/BytesOnMessageInMemory/InDisk); a client JVM (mode ``client``) creates one
   topic of 8 queues and loads --messages messages, 256-byte bodies, tags TagA..TagD round-robin, through batch
   sends (128 per batch, 2 threads), then waits until every message is in its ConsumeQueue. No more sends.
2. With the broker still running (idle), times the same aggregate (count, sum of body lengths, count per tag) on:
   jvm      the JVM scan: Spark local[2] with the rmq jar, spark.read.format("rmq").option("topics", T).load(store)
   python   the Python data source (no jar), in the same Spark session under the name "rmq_python"
   default  DefaultLitePullConsumer with its default settings (pullBatchSize 10), from the first offset
   lite32   the same with pullBatchSize 32 (the push consumer's default and the broker's default per-pull cap)
   tuned    DefaultMQPullConsumer, 4 threads (2 queues each), 2000 messages per pull
   Each consumer run is a fresh group in the client JVM (its time: from the consumer's start to the last message);
   runs interleaved, the first round a warm-up (the JVM scan and the tuned consumer: --warmup seconds each), then the
   median of --repeat rounds (python: the first --python-runs of them), each timed run after --settle seconds of rest.
   The answers are asserted equal.
3. Stops the broker (clean shutdown) and times the JVM scan again on its store (--no-stopped: not); with
   --profile, then times queries reading less or more of each record (count(*), sum(length(body)), per tag, every
   column to the noop sink) to show where the scan's time goes.
4. Prints msgs/s per reader and the ratios scan/tuned, scan/default, python/default against the targets
   (JVM scan >= 3x tuned and >= 10x default; pure Python >= 1x default), with the load average beside each line.

Usage: bench_broker_read.py [--messages 300000] [--version 5.5.0] [--dir /tmp/rmq-bench-broker] [--repeat 5]
                            [--warmup 30] [--python-runs 2] [--skip-python] [--only jvm,python,default,lite32,tuned]
                            [--settle 3] [--no-stopped] [--profile] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "support"))

from broker_harness import DEFAULT_VERSION, JVM_OPENS, build_harness, java  # noqa: E402

TOPIC = "BenchHistory"
QUEUES = 8
TAGS = 4
BODY = 256
BATCH = 128
SEND_THREADS = 2
READERS = ("jvm", "python", "default", "lite32", "tuned")
# The tuned consumer's broker: per-pull limits above its 2000 messages (~0.75 MB) a pull.
TUNED_BROKER = {"maxTransferCountOnMessageInMemory": 4000, "maxTransferBytesOnMessageInMemory": 8 << 20,
                "maxTransferCountOnMessageInDisk": 4000, "maxTransferBytesOnMessageInDisk": 8 << 20}


class Jvm:
    """A harness JVM driven by lines on stdin; answers are its ``@@ <json>`` stdout lines, the rest goes to a log."""

    def __init__(self, classpath: str, mode: str, args: list[str], log: Path, home: Path, heap: str = "1g"):
        self.log_path = log
        cmd = [java(), f"-Xms{heap}", f"-Xmx{heap}", *JVM_OPENS, f"-Duser.home={home}", "-cp", classpath,
               "io.rmqsource.brokertest.BrokerBench", mode, *args]
        self.log = open(log, "w")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     bufsize=1, start_new_session=True)
        self.answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith("@@ "):
                self.answers.put(json.loads(line[3:]))
            else:
                self.log.write(line)
        self.answers.put(None)

    def answer(self, timeout: float = 900) -> dict:
        try:
            got = self.answers.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"no answer from the harness in {timeout:.0f} s; see {self.log_path}") from None
        if got is None:
            raise RuntimeError(f"the harness exited ({self.proc.wait()}); see {self.log_path}")
        if "error" in got:
            raise RuntimeError(f"the harness: {got['error']}; see {self.log_path}")
        return got

    def ask(self, line: str, timeout: float = 900) -> dict:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.answer(timeout)

    def close(self, last: str | None = None, timeout: float = 120) -> dict | None:
        got = None
        try:
            if self.proc.poll() is None and last is not None:
                got = self.ask(last, timeout)
        finally:
            try:
                self.proc.stdin.close()                  # a client's end of commands
            except OSError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
            self.log.close()
        return got


def load_avg() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--version", default=DEFAULT_VERSION, help="Apache RocketMQ version of the broker and clients")
    ap.add_argument("--dir", default="/tmp/rmq-bench-broker")
    ap.add_argument("--repeat", type=int, default=5, help="timed rounds after the warm-up round")
    ap.add_argument("--warmup", type=float, default=30,
                    help="seconds the JVM scan and the tuned consumer each run again and again in the warm-up round")
    ap.add_argument("--python-runs", type=int, default=2, help="timed Python data source runs (the first rounds)")
    ap.add_argument("--skip-python", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated readers, of " + ",".join(READERS) + " (default: all)")
    ap.add_argument("--settle", type=float, default=3,
                    help="seconds of rest before each timed run, so that one reader's aftermath (the broker "
                         "persisting offsets after a drain, a JVM collecting garbage) is not timed as the next one's")
    ap.add_argument("--keep", action="store_true", help="keep the store after the run")
    ap.add_argument("--no-stopped", action="store_true", help="do not time the JVM scan again once the broker stopped")
    ap.add_argument("--profile", action="store_true",
                    help="once the broker stopped, time JVM-scan queries that read less or more of each record")
    args = ap.parse_args()
    readers = [r for r in READERS if r in ({s.strip() for s in args.only.split(",") if s.strip()} or READERS)]
    if args.skip_python and "python" in readers:
        readers.remove("python")
    n = args.messages

    from rmqsource.spark.jar import build_jar
    jar = build_jar()
    classpath = build_harness(args.version)
    run = Path(args.dir) / f"run-{n}"
    shutil.rmtree(run, ignore_errors=True)
    (run / "home").mkdir(parents=True)
    store = run / "store"

    print(f"load at start {load_avg()} (uptime: {os.popen('uptime').read().strip()})", flush=True)
    broker = Jvm(classpath, "serve", ["--store", str(store), "--out", str(run),
                                      "--topic", TOPIC, "--queues", str(QUEUES),
                                      *[a for k, v in TUNED_BROKER.items() for a in ("--set", f"{k}={v}")]],
                 run / "broker.log", run / "home", heap="2g")
    client = None
    spark = None
    try:
        ready = broker.answer(180)
        print(f"RocketMQ {ready['version']} broker {ready['brokerAddr']}, store {store}; per-pull limits "
              f"{ready['maxTransferCountOnMessageInMemory']} msgs / {ready['maxTransferBytesOnMessageInMemory']} B",
              flush=True)
        client = Jvm(classpath, "client", ["--ns", ready["nsAddr"], "--broker", ready["brokerAddr"]],
                     run / "client.log", run / "home")
        loaded = client.ask(f"load {TOPIC} {QUEUES} {n} {BODY} {TAGS} {BATCH} {SEND_THREADS}")
        assert loaded["sent"] == n and loaded["dispatched"] == n, loaded
        print(f"loaded {n:,} messages ({BODY}-byte bodies, {QUEUES} queues, {TAGS} tags) by batch sends in "
              f"{loaded['sendMs'] / 1000:.1f} s ({n / loaded['sendMs'] * 1000:,.0f} msgs/s), dispatched after "
              f"{loaded['loadMs'] / 1000:.1f} s; load {load_avg()}", flush=True)

        spark, sources = spark_session(jar, store) if {"jvm", "python"} & set(readers) else (None, {})

        def scan(kind: str) -> dict:
            from pyspark.sql import functions as F
            t = time.perf_counter()
            rows = sources[kind]().groupBy("tags").agg(F.count("*").alias("n"),
                                                        F.sum(F.length("body")).alias("b")).collect()
            ms = (time.perf_counter() - t) * 1000
            tags = {r["tags"]: r["n"] for r in rows}
            return {"ms": ms, "count": sum(tags.values()), "bodyBytes": sum(r["b"] for r in rows), "tags": tags}

        def drain(kind: str) -> dict:
            return client.ask(f"drain {kind} {TOPIC} {n}")

        times: dict[str, list[float]] = {r: [] for r in readers}
        extra: dict[str, list[dict]] = {r: [] for r in readers}
        answers: dict[str, tuple] = {}
        loads: list[float] = []
        for i in range(args.repeat + 1):
            line = [f"round {i}{' (warm-up, last run shown)' if i == 0 else ''}:"]
            for kind in readers:
                if kind == "python" and i > args.python_runs:
                    continue
                # The fast readers warm up longer: the JVM scan needs tens of runs to reach its steady speed.
                until = time.monotonic() + (args.warmup if i == 0 and kind in ("jvm", "tuned") else 0)
                if i > 0:
                    time.sleep(args.settle)
                got = scan(kind) if kind in ("jvm", "python") else drain(kind)
                while time.monotonic() < until:
                    got = scan(kind) if kind in ("jvm", "python") else drain(kind)
                answers[kind] = (got["count"], got["bodyBytes"], tuple(sorted(got["tags"].items())))
                if i > 0:
                    times[kind].append(got["ms"])
                    extra[kind].append(got)
                line.append(f"{kind} {got['ms']:,.0f} ms")
            loads.append(os.getloadavg()[0])
            print("  ".join(line) + f"   load {load_avg()}", flush=True)
        distinct = set(answers.values())
        assert len(distinct) == 1, f"the readers disagree: {answers}"
        count, body_bytes, tags = distinct.pop()
        assert count == n and body_bytes == n * BODY, (count, body_bytes)
        print(f"every reader: {count:,} messages, {body_bytes:,} body bytes, per tag {dict(tags)}")

        rate = {k: n / (statistics.median(v) / 1000) for k, v in times.items() if v}
        print(f"\n{n:,} messages, RocketMQ {ready['version']}, broker running (idle) during the scans; medians of "
              f"{args.repeat} rounds after a warm-up (python: {min(args.python_runs, args.repeat)}); load during "
              f"the rounds {min(loads):.1f}-{max(loads):.1f}")
        label = {"jvm": "JVM scan (Spark local[2], rmq jar)", "python": "Python data source (Spark local[2])",
                 "default": "DefaultLitePullConsumer, defaults", "lite32": "DefaultLitePullConsumer, pullBatchSize 32",
                 "tuned": "DefaultMQPullConsumer, 4 threads x 2000"}
        for k in readers:
            if k not in rate:
                continue
            note = ""
            if k in ("default", "lite32", "tuned") and extra[k]:
                e = extra[k][-1]
                calls = e.get("pulls", e.get("polls"))
                note = (f"   (consumer start {statistics.median(x['startMs'] for x in extra[k]):.0f} ms; "
                        f"{'pulls' if 'pulls' in e else 'polls'} {calls:,}; {e['settings']})")
            print(f"  {label[k]:<44} {statistics.median(times[k]):9,.0f} ms  {rate[k]:11,.0f} msgs/s   "
                  f"(best {n / min(times[k]) * 1000:11,.0f} msgs/s){note}")
            print(f"  {'':<44} runs {', '.join(f'{t:,.0f}' for t in times[k])} ms")
        best = {k: n / (min(v) / 1000) for k, v in times.items() if v}
        print("\nratios of the medians (of the best runs):")
        for a, b, target in (("jvm", "tuned", 3), ("jvm", "default", 10), ("jvm", "lite32", None),
                             ("python", "default", 1), ("python", "lite32", None)):
            if a in rate and b in rate:
                r = rate[a] / rate[b]
                verdict = "" if target is None else f"  target >= {target}x: {'met' if r >= target else 'NOT met'}"
                print(f"  {a}/{b}: {r:5.2f}x ({best[a] / best[b]:5.2f}x){verdict}")
        print(f"load at end {load_avg()}")

        if "jvm" in readers and not args.no_stopped:
            client.close()
            client = None
            stopped = broker.close("stop")
            print(f"\nbroker stopped cleanly in {stopped['shutdownMs']} ms; "
                  "the JVM scan of the stopped broker's store:")
            ms = []
            for _ in range(args.repeat):
                got = scan("jvm")
                assert (got["count"], got["bodyBytes"], tuple(sorted(got["tags"].items()))) == answers["jvm"], got
                ms.append(got["ms"])
            med = statistics.median(ms)
            print(f"  {'JVM scan, broker stopped':<44} {med:9,.0f} ms  {n / med * 1000:11,.0f} msgs/s   "
                  f"(runs {', '.join(f'{m:,.0f}' for m in ms)} ms; load {load_avg()})")
            if args.profile:
                profile(spark, sources["jvm"], args.repeat, n)
    finally:
        if spark is not None:
            spark.stop()
        if client is not None:
            client.close()
        stopped = broker.close("stop")
        if stopped:
            print(f"broker stopped cleanly in {stopped['shutdownMs']} ms")
        if not args.keep:
            shutil.rmtree(run, ignore_errors=True)


def profile(spark, load, repeat: int, n: int) -> None:
    """Where the JVM scan's time goes: the same store read by queries that need less or more of each record."""
    from pyspark.sql import functions as F
    queries = {
        "Spark floor: spark.range(2) count in 2 tasks": lambda: spark.range(0, 2, 1, 2).count(),
        "count(*) (no column read)": lambda: load().count(),
        "count(queueOffset) (CQ unit only)": lambda: load().selectExpr("count(queueOffset)").collect(),
        "sum(length(body))": lambda: load().selectExpr("sum(length(body))").collect(),
        "groupBy(tags).count()": lambda: load().groupBy("tags").count().collect(),
        "groupBy(tags): count, sum(length(body)) (the bench's)": lambda: load().groupBy("tags").agg(
            F.count("*"), F.sum(F.length("body"))).collect(),
        "every column to the noop sink": lambda: load().write.format("noop").mode("overwrite").save(),
    }

    def one_shuffle_partition():
        spark.conf.set("spark.sql.shuffle.partitions", "1")
        try:
            return queries["groupBy(tags): count, sum(length(body)) (the bench's)"]()
        finally:
            spark.conf.unset("spark.sql.shuffle.partitions")
    queries["the bench's, spark.sql.shuffle.partitions=1"] = one_shuffle_partition
    times = {k: [] for k in queries}
    for _ in range(repeat):
        for k, q in queries.items():
            t = time.perf_counter()
            q()
            times[k].append(time.perf_counter() - t)
    print(f"\nprofile of the JVM scan ({n:,} messages, {load().rdd.getNumPartitions()} input partitions, medians of "
          f"{repeat} interleaved runs, load {load_avg()}):")
    for k, v in times.items():
        med = statistics.median(v)
        print(f"  {k:<56} {med * 1000:8,.0f} ms  {n / med:12,.0f} rows/s")


def spark_session(jar: str, store: Path):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("bench_broker_read")
             .config("spark.jars", jar)
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.memory", "2g")
             .config("spark.python.worker.reuse", "true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from rmqsource.spark.source import RmqDataSource

    class PythonRmq(RmqDataSource):
        """The Python data source under another name, to time it in the same session as the JVM scan."""

        @classmethod
        def name(cls) -> str:
            return "rmq_python"

    spark.dataSource.register(PythonRmq)
    return spark, {"jvm": lambda: spark.read.format("rmq").option("topics", TOPIC).load(str(store)),
                   "python": lambda: spark.read.format("rmq_python").option("topics", TOPIC).load(str(store))}


if __name__ == "__main__":
    main()
