"""The rmq catalog (docs/catalog.md): ``spark.sql.catalog.rmq=io.rmqsource.spark.RmqCatalog``, stores as
namespaces, topics as tables, metadata tables as tables.

Judged by the real stores read in place (the engine corpora and the real broker's runs): the namespaces are
the configured names, the tables the store's topics that ``rmq topics`` lists and RocketMQ does not own, a
topic's table reads the rows of ``load(path)`` with ``option("topics", T)`` (batch and stream), and each
metadata table the rows of ``option("metadata", ...)``. The catalog is a JVM plugin: without the jar on
``spark.jars`` (RMQ_SPARK_MODE=python) the module is skipped. Spark loads a catalog on its first use, so each
catalog here is configured with ``spark.conf.set`` on the shared session under a name of its own.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from golden import broker_corpora, corpora
from rmqsource.format.system_topics import is_internal_topic
from rmqsource.spark.jar import session_jar

pytestmark = [pytest.mark.spark,
              pytest.mark.skipif(session_jar() is None,     # decided without starting Spark
                                 reason="the rmq catalog needs the rmq jar on spark.jars (RMQ_SPARK_MODE=python)")]

CONTRACT = Path(__file__).resolve().parents[2] / "rmqsource" / "jvm" / "io" / "rmqsource" / "spark" / "contract.json"
CATALOG_CLASS = "io.rmqsource.spark.RmqCatalog"
READ_ONLY = 'the rmq catalog is read-only: write with df.write.format("rmq")'


def _store_name(run: Path) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", run.name)


ENGINE = {_store_name(p): p / "store" for p in corpora()}
BROKER = {_store_name(p): p / "store" for p in broker_corpora()}
STORES = {**ENGINE, **BROKER}
STORE_PARAMS = [pytest.param(n, id=n) for n in STORES]
BROKER_PARAMS = [pytest.param(n, id=n) for n in BROKER] or [
    pytest.param(None, marks=pytest.mark.skip(reason="no real-broker corpora"))]


@pytest.fixture(scope="module")
def spark(spark):
    """The shared session with catalog ``rmq`` of every golden store."""
    configure(spark, "rmq", stores=",".join(f"{n}:{p}" for n, p in STORES.items()))
    return spark


def configure(spark, catalog: str, **settings) -> None:
    """Catalog ``catalog`` with these settings (before its first use: Spark loads it then, once)."""
    spark.conf.set(f"spark.sql.catalog.{catalog}", CATALOG_CLASS)
    for key, value in settings.items():
        spark.conf.set(f"spark.sql.catalog.{catalog}.{key.replace('__', '.')}", value)


def quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def topics_of(store: Path) -> list[dict]:
    """``rmq topics STORE --json``: every topic with a ConsumeQueue."""
    out = subprocess.run([sys.executable, "-m", "rmqsource", "topics", str(store), "--json"], check=True,
                         capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def user_topics(store: Path) -> list[str]:
    return sorted(t["topic"] for t in topics_of(store) if not is_internal_topic(t["topic"]))


def rows(df) -> list:
    cols = [c for c in df.columns]
    return sorted((tuple(r) for r in df.select(*cols).collect()), key=repr)


def load(spark, store: Path, **options):
    reader = spark.read.format("rmq")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(store))


def rmq_error(exc) -> tuple[str, str]:
    """The rmq error (class name, message) a Java exception raised through py4j carries, itself or as a cause."""
    java = getattr(exc, "java_exception", None)
    while java is not None:
        name = java.getClass().getName()
        if name.startswith("io.rmqsource.errors."):
            return name.rsplit(".", 1)[1], java.getMessage()
        java = java.getCause()
    return type(exc).__name__, str(exc)


def test_namespaces_are_the_configured_stores(spark):
    assert sorted(r[0] for r in spark.sql("SHOW NAMESPACES IN rmq").collect()) == sorted(STORES)
    name, store = next(iter(STORES.items()))
    info = {r.info_name: r.info_value for r in spark.sql(f"DESCRIBE NAMESPACE rmq.{name}").collect()}
    assert info["Location"] == str(store)


@pytest.mark.parametrize("name", STORE_PARAMS)
def test_tables_are_the_stores_own_topics(spark, name):
    shown = sorted(r.tableName for r in spark.sql(f"SHOW TABLES IN rmq.{name}").collect())
    assert shown and shown == user_topics(STORES[name])


@pytest.mark.parametrize("name", STORE_PARAMS)
def test_a_topic_reads_as_load_with_its_topic(spark, name):
    store = STORES[name]
    topics = user_topics(store)
    for t in topics:
        want = load(spark, store, topics=t).count()
        assert spark.sql(f"SELECT count(*) FROM rmq.{name}.{quoted(t)}").collect()[0][0] == want, t
    largest = max(topics, key=lambda t: load(spark, store, topics=t).count())
    got = rows(spark.table(f"rmq.{name}.{quoted(largest)}"))
    assert got and got == rows(load(spark, store, topics=largest))
    # a filter is pushed as in a load() (the JVM scan's pushed filters show in the plan)
    df = spark.sql(f"SELECT queueOffset FROM rmq.{name}.{quoted(largest)} WHERE queueId = 0 AND queueOffset >= 1")
    want = load(spark, store, topics=largest).where("queueId = 0 AND queueOffset >= 1").select("queueOffset")
    assert sorted(df.collect()) == sorted(want.collect())
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "PushedFilters" in plan and "queueId" in plan.split("PushedFilters", 1)[1], plan


def test_describe_gives_the_message_columns(spark):
    columns = [c[0] for c in json.loads(CONTRACT.read_text(encoding="utf-8"))["columns"]]
    name = next(iter(ENGINE))
    topic = user_topics(ENGINE[name])[0]
    described = [r.col_name for r in spark.sql(f"DESCRIBE rmq.{name}.{quoted(topic)}").collect()]
    assert described == columns


@pytest.mark.parametrize("name", STORE_PARAMS)
def test_a_topics_queues_are_its_metadata_rows(spark, name):
    store = STORES[name]
    queues = load(spark, store, metadata="queues")
    for t in user_topics(store):
        got = rows(spark.table(f"rmq.{name}.{quoted(t)}.queues"))
        assert got and got == rows(queues.where(queues.topic == t)), t


@pytest.mark.parametrize("name", STORE_PARAMS)
def test_store_metadata_tables_are_option_metadata(spark, name):
    store = STORES[name]
    for table in ("segments", "indexes", "topics", "queues"):
        got = rows(spark.table(f"rmq.{name}.{table}"))
        assert got == rows(load(spark, store, metadata=table)), table
    assert spark.table(f"rmq.{name}.segments").count() > 0


@pytest.mark.parametrize("name", BROKER_PARAMS)
def test_a_topics_groups_on_a_brokers_store(spark, name):
    store = STORES[name]
    groups = load(spark, store, metadata="groups")
    read = 0
    for t in user_topics(store):
        want = rows(groups.where(groups.topic == t))
        assert rows(spark.table(f"rmq.{name}.{quoted(t)}.groups")) == want, t
        read += len(want)
    assert read > 0
    assert rows(spark.table(f"rmq.{name}.groups")) == rows(groups)


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in list(STORES)[:1] + list(BROKER)[:1]])
def test_read_stream_table_reads_the_topic(spark, name, tmp_path):
    store = STORES[name]
    topic = user_topics(store)[0]
    query_name = f"rmq_catalog_{name}"
    # a stream starts at the end unless told (startingOffsets, as for readStream.format("rmq"))
    q = (spark.readStream.option("startingOffsets", "earliest").table(f"rmq.{name}.{quoted(topic)}").writeStream.format("memory").queryName(query_name)
         .trigger(availableNow=True).option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        q.awaitTermination(300)
        assert q.exception() is None
        got = spark.sql(f"SELECT topic, queueId, queueOffset FROM {query_name}").collect()
    finally:
        q.stop()
        spark.sql(f"DROP VIEW IF EXISTS {query_name}")
    want = load(spark, store, topics=topic).select("topic", "queueId", "queueOffset").collect()
    assert len(got) == len(want) > 0 and sorted(got) == sorted(want)


def test_a_metadata_table_is_no_stream(spark):
    name = next(iter(STORES))
    with pytest.raises(Exception, match="(?i)micro-batch|streaming|does not support"):
        spark.readStream.table(f"rmq.{name}.segments").writeStream.format("memory").queryName("rmq_no_stream").start()


def test_internal_topics_load_by_name_and_list_when_asked(spark):
    name, store = next(iter(ENGINE.items()))
    internal = sorted(t["topic"] for t in topics_of(store) if is_internal_topic(t["topic"]))
    assert internal
    for t in internal:
        assert spark.table(f"rmq.{name}.{quoted(t)}").count() == load(spark, store, topics=t).count(), t
    configure(spark, "rmq_internal", stores=f"{name}:{store}", includeInternalTopics="true")
    shown = sorted(r.tableName for r in spark.sql(f"SHOW TABLES IN rmq_internal.{name}").collect())
    assert shown == sorted(t["topic"] for t in topics_of(store))


def test_unknown_store_and_topic_fail(spark):
    name, store = next(iter(ENGINE.items()))
    with pytest.raises(Exception, match=r"TABLE_OR_VIEW_NOT_FOUND.*`rmq`\.`no_such_store`\.`TopicTest`"):
        spark.sql("SELECT * FROM rmq.no_such_store.TopicTest").collect()
    with pytest.raises(Exception, match=r"TABLE_OR_VIEW_NOT_FOUND.*`rmq`\.`" + name + r"`\.`NoSuchTopic`"):
        spark.sql(f"SELECT * FROM rmq.{name}.NoSuchTopic").collect()
    with pytest.raises(Exception, match=r"TABLE_OR_VIEW_NOT_FOUND"):
        spark.sql(f"SELECT * FROM rmq.{name}.NoSuchTopic.queues").collect()
    with pytest.raises(Exception, match=r"(?s)SCHEMA_NOT_FOUND.*no store no_such_store in the rmq catalog rmq; "
                                        r"its stores are " + ", ".join(STORES)):
        spark.sql("SHOW TABLES IN rmq.no_such_store").collect()
    # the catalog's own messages, as a caller of the catalog API sees them
    catalog = spark._jsparkSession.sessionState().catalogManager().catalog("rmq")
    namespace = spark._sc._gateway.new_array(spark._jvm.java.lang.String, 1)
    namespace[0] = name
    ident = spark._jvm.org.apache.spark.sql.connector.catalog.Identifier.of(namespace, "NoSuchTopic")
    with pytest.raises(Exception, match=f"store {name} .* has no topic NoSuchTopic"):
        catalog.loadTable(ident)


def test_the_catalog_is_read_only(spark):
    name, store = next(iter(ENGINE.items()))
    topic = user_topics(store)[0]
    for statement in (f"CREATE TABLE rmq.{name}.new_topic (a INT)",
                      f"INSERT INTO rmq.{name}.{quoted(topic)} SELECT * FROM rmq.{name}.{quoted(topic)} LIMIT 1",
                      f"DROP TABLE rmq.{name}.{quoted(topic)}",
                      f"ALTER TABLE rmq.{name}.{quoted(topic)} ADD COLUMNS (x INT)",
                      "CREATE NAMESPACE rmq.new_store",
                      f"DROP NAMESPACE rmq.{name}"):
        with pytest.raises(Exception, match=re.escape(READ_ONLY)):
            spark.sql(statement).collect()
    with pytest.raises(Exception, match=re.escape(READ_ONLY)):
        spark.table(f"rmq.{name}.{quoted(topic)}").limit(1).writeTo(f"rmq.{name}.{quoted(topic)}").append()
    assert spark.table(f"rmq.{name}.{quoted(topic)}").count() == load(spark, store, topics=topic).count()


def test_stores_file_and_store_options(spark, tmp_path):
    (engine, engine_store), = list(ENGINE.items())[:1]
    stores_file = tmp_path / "stores.properties"
    stores_file.write_text(f"# the stores of the catalog\n\n{engine} = {engine_store}\n", encoding="utf-8")
    broker = next(iter(BROKER), None)
    settings = {"storesFile": str(stores_file), f"store__{engine}__brokerName": "broker-a"}
    if broker:
        settings["stores"] = f"{broker}:{BROKER[broker]}"
    configure(spark, "rmq_file", **settings)
    shown = sorted(r[0] for r in spark.sql("SHOW NAMESPACES IN rmq_file").collect())
    assert shown == sorted([engine] + ([broker] if broker else []))
    topic = user_topics(engine_store)[0]
    df = spark.table(f"rmq_file.{engine}.{quoted(topic)}")
    assert df.count() == load(spark, engine_store, topics=topic).count()
    assert {r.broker for r in df.select("broker").distinct().collect()} == {"broker-a"}
    assert {r.broker for r in spark.table(f"rmq_file.{engine}.segments").collect()} == {"broker-a"}
    if broker:     # the other store keeps its own broker name (its folder's)
        brokers = {r.broker for r in spark.table(f"rmq_file.{broker}.segments").collect()}
        assert brokers == {r.broker for r in load(spark, BROKER[broker], metadata="segments").collect()}


def test_a_store_that_is_no_store_fails_as_load_does(spark, tmp_path):
    name, store = next(iter(ENGINE.items()))
    missing = tmp_path / "no-store"
    configure(spark, "rmq_bad", stores=f"bad:{missing},{name}:{store}")
    with pytest.raises(Exception) as by_load:
        load(spark, missing, topics="TopicTest").count()
    with pytest.raises(Exception) as by_catalog:
        spark.sql("SHOW TABLES IN rmq_bad.bad").collect()
    want = rmq_error(by_load.value)
    assert want[0] == "NotAStoreError" and str(missing) in want[1], want
    assert rmq_error(by_catalog.value) == want
    assert spark.sql(f"SHOW TABLES IN rmq_bad.{name}").count() == len(user_topics(store))


@pytest.mark.parametrize("catalog, setting, message", [
    ("rmq_conf_name", {"stores": "a/b:/x"}, "store name 'a/b' is not a SQL identifier"),
    ("rmq_conf_pair", {"stores": "justapath"}, "'justapath' is not NAME:PATH"),
    ("rmq_conf_store", {"stores": "a:/x", "store__b__brokerName": "n"}, "store.b.brokerName names no configured store"),
    ("rmq_conf_set", {"stores": "a:/x", "store__a__topics": "T"}, "the catalog sets topics itself"),
    ("rmq_conf_stream", {"stores": "a:/x", "store__a__maxMessagesPerTrigger": "5"},
     "maxMessagesPerTrigger is a stream option"),
    ("rmq_conf_key", {"stores": "a:/x", "storeFile": "/x"}, "unknown setting spark.sql.catalog.rmq_conf_key.storeFile"),
    ("rmq_conf_none", {}, "has no stores"),
])
def test_malformed_settings_fail_the_catalogs_first_use(spark, catalog, setting, message):
    configure(spark, catalog, **setting)
    with pytest.raises(Exception, match=re.escape(message)):
        spark.sql(f"SHOW NAMESPACES IN {catalog}").collect()


def test_a_topic_named_as_a_metadata_table_wins(spark, tmp_path):
    """A store (written here) with topics named segments and queues: rmq.<store>.<name> is always the topic."""
    from pyspark.sql import functions as F
    store = tmp_path / "store"
    (spark.range(6).select(F.when(F.col("id") < 2, F.lit("segments")).when(F.col("id") < 5, F.lit("queues"))
                           .otherwise(F.lit("Orders")).alias("topic"),
                           F.col("id").cast("string").cast("binary").alias("body"))
     .write.format("rmq").mode("append").save(str(store)))
    configure(spark, "rmq_names", stores=f"w:{store}")
    assert sorted(r.tableName for r in spark.sql("SHOW TABLES IN rmq_names.w").collect()) == [
        "Orders", "queues", "segments"]
    assert spark.table("rmq_names.w.segments").columns == spark.table("rmq_names.w.Orders").columns
    assert sorted(r.body for r in spark.table("rmq_names.w.segments").collect()) == [b"0", b"1"]
    assert spark.table("rmq_names.w.queues").count() == 3
    # the other metadata tables stay the store's, and the topics' own metadata tables are theirs
    assert rows(spark.table("rmq_names.w.indexes")) == rows(load(spark, store, metadata="indexes"))
    assert {r.topic for r in spark.table("rmq_names.w.queues.queues").collect()} == {"queues"}
    assert sum(r.messages for r in spark.table("rmq_names.w.segments.queues").collect()) == 2
