"""The query compared between local mode and a standalone cluster."""

from __future__ import annotations

import zlib


def query_rows(spark, store: str, config: str) -> dict:
    from pyspark.sql import functions as F

    from rmqsource.spark.jar import relation_classes

    whole = spark.read.format("rmq").option("config", config).load(store)
    by_topic = spark.read.format("rmq").option("config", config).option("topics", "TopicTest,OrderTopic") \
        .load(store).where(F.col("tags").isin("TagA", "TagB"))
    rows = sorted((r["topic"], r["queueId"], r["queueOffset"], r["commitLogOffset"],
                   zlib.crc32(r["body"] or b""), r["tags"])
                  for r in whole.select("topic", "queueId", "queueOffset", "commitLogOffset", "body", "tags")
                  .collect())
    tagged = sorted((r["topic"], r["queueId"], r["queueOffset"])
                    for r in by_topic.select("topic", "queueId", "queueOffset").collect())
    per_topic = {r["topic"]: r["n"] for r in whole.groupBy("topic").agg(F.count("*").alias("n")).collect()}
    return {"rows": [list(r) for r in rows], "tagged": [list(r) for r in tagged], "perTopic": per_topic,
            "relations": [list(r) for r in relation_classes(whole) + relation_classes(by_topic)]}
