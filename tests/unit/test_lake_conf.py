"""rmqsource.spark.lake's settings and refusals, without Spark (the backfill itself: tests/spark/test_lake.py)."""

from __future__ import annotations

import pytest

from rmqsource.errors import OptionError
from rmqsource.spark.compat import UnsupportedSparkError
from rmqsource.spark.lake import (DELTA_CATALOG, DELTA_EXTENSION, ICEBERG_CATALOG, ICEBERG_EXTENSION, backfill,
                                  lake_conf, runtime_packages, runtime_formats)


def test_runtime_packages_of_the_tested_pair():
    assert runtime_packages(spark_version="4.1.4") == [
        "io.delta:delta-spark_2.13:4.3.1", "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0"]
    assert runtime_packages(["iceberg"], spark_version="4.1.0") == [
        "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0"]


    assert runtime_packages(["delta"], spark_version="4.2.1") == ["io.delta:delta-spark_2.13:4.4.0"]
    assert runtime_formats("4.1.4") == ["delta", "iceberg"] and runtime_formats("4.2.1") == ["delta"]
    assert runtime_formats("4.3.0") == [] == runtime_formats("3.5.9")


@pytest.mark.parametrize("version, missing, why", [("4.3.0", "delta/iceberg", "NoSuchMethodError"),
                                                   ("4.2.1", "iceberg", "View"),
                                                   ("3.5.9", "delta/iceberg", "not tested")])
def test_runtime_packages_refuse_a_spark_without_a_tested_pair(version, missing, why):
    with pytest.raises(UnsupportedSparkError) as e:
        runtime_packages(spark_version=version)
    said = str(e.value)
    assert f"no tested {missing} runtime for pyspark {version}" in said and why in said
    assert "Spark 4.1: io.delta:delta-spark_2.13:4.3.1" in said


def test_lake_conf_adds_to_the_rmq_session_settings():
    base = {"spark.jars": "/x/rmqsource-spark.jar", "spark.sql.extensions": "io.rmqsource.spark.RmqExtensions"}
    conf = lake_conf(warehouse="/w", ivy="/ivy", packages=["g:a:1"], base=base)
    assert conf["spark.jars"] == "/x/rmqsource-spark.jar"
    assert conf["spark.sql.extensions"].split(",") == ["io.rmqsource.spark.RmqExtensions", DELTA_EXTENSION,
                                                       ICEBERG_EXTENSION]
    assert conf["spark.jars.packages"] == "g:a:1" and conf["spark.jars.ivy"] == "/ivy"
    assert conf["spark.sql.catalog.spark_catalog"] == DELTA_CATALOG
    assert (conf["spark.sql.catalog.lake"], conf["spark.sql.catalog.lake.type"],
            conf["spark.sql.catalog.lake.warehouse"]) == (ICEBERG_CATALOG, "hadoop", "/w")
    assert lake_conf(warehouse="/w", ivy="/ivy", packages=["g:a:1"], base=conf) == conf    # merging twice adds nothing
    delta_only = lake_conf(["delta"], packages=["g:a:1"])
    assert "spark.sql.catalog.lake" not in delta_only and "spark.jars.ivy" not in delta_only


def test_refusals():
    with pytest.raises(OptionError, match="warehouse"):
        lake_conf(["iceberg"], packages=[])
    with pytest.raises(OptionError, match="parquet: expected delta or iceberg"):
        lake_conf(["parquet"], packages=[])
    with pytest.raises(OptionError, match="/t/x: an Iceberg table is named in its catalog"):
        backfill(None, "/store", "/t/x", format="iceberg", checkpoint="/c")
    rmq_catalog = {"spark.sql.catalog.spark_catalog": "io.rmqsource.spark.RmqSessionCatalog"}     # Spark 3.5's
    with pytest.raises(OptionError, match="RmqSessionCatalog in base; Delta's session catalog"):
        lake_conf(["delta"], packages=[], base=rmq_catalog)
    assert lake_conf(["iceberg"], warehouse="/w", packages=[], base=rmq_catalog)[
        "spark.sql.catalog.spark_catalog"] == "io.rmqsource.spark.RmqSessionCatalog"
