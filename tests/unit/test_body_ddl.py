"""The JVM-free Spark DDL / JSON schema parser of typed bodies (rmqsource.spark.bodies.ddl)."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, ByteType, DateType, DecimalType, DoubleType,
                               FloatType, IntegerType, LongType, MapType, ShortType, StringType, StructField,
                               StructType, TimestampNTZType, TimestampType)

from rmqsource.errors import OptionError
from rmqsource.spark.bodies.ddl import as_nullable, parse_ddl, parse_spark_schema, struct_ddl

pytestmark = pytest.mark.unit


def types(text):
    return [(f.name, f.dataType) for f in parse_ddl(text).fields]


def test_simple_types_and_synonyms_case_insensitively():
    assert types("a boolean, b TINYINT, c byte, d SmallInt, e short, f INT, g integer, h BIGINT, i long, "
                 "j float, k real, l double, m string, n binary, o date, p timestamp, q timestamp_ltz, "
                 "r TIMESTAMP_NTZ") == [
        ("a", BooleanType()), ("b", ByteType()), ("c", ByteType()), ("d", ShortType()), ("e", ShortType()),
        ("f", IntegerType()), ("g", IntegerType()), ("h", LongType()), ("i", LongType()), ("j", FloatType()),
        ("k", FloatType()), ("l", DoubleType()), ("m", StringType()), ("n", BinaryType()), ("o", DateType()),
        ("p", TimestampType()), ("q", TimestampType()), ("r", TimestampNTZType())]


def test_decimals_and_char_types():
    assert types("a decimal, b DECIMAL(5), c dec(7, 2), d numeric(38,10), e varchar(3), f char(2)") == [
        ("a", DecimalType(10, 0)), ("b", DecimalType(5, 0)), ("c", DecimalType(7, 2)), ("d", DecimalType(38, 10)),
        ("e", StringType()), ("f", StringType())]


def test_nested_types_both_struct_field_forms():
    assert types("a array<int>, m MAP<string, array<double>>, s struct<x: int, y string, `z w`: struct<q:date>>") == [
        ("a", ArrayType(IntegerType(), True)),
        ("m", MapType(StringType(), ArrayType(DoubleType(), True), True)),
        ("s", StructType([StructField("x", IntegerType()), StructField("y", StringType()),
                          StructField("z w", StructType([StructField("q", DateType())]))]))]


def test_back_quoted_names_not_null_and_comments():
    schema = parse_ddl("`order` BIGINT NOT NULL COMMENT 'the order', `a``b` string comment \"x, y\"")
    assert [f.name for f in schema.fields] == ["order", "a`b"]
    assert not schema.fields[0].nullable and schema.fields[0].metadata == {"comment": "the order"}
    assert schema.fields[1].nullable and schema.fields[1].metadata == {"comment": "x, y"}


@pytest.mark.parametrize("text", ["", "a", "a int,", "a int b", "a array<int", "a decimal(40, 2)",
                                  "a decimal(5, 6)", "a interval", "a map<string>", "a int NOT", "a int ;",
                                  "a varchar"])
def test_malformed_schemas_are_option_errors(text):
    with pytest.raises(OptionError, match="schema"):
        parse_ddl(text)


def test_spark_json_form():
    schema = StructType([StructField("a", LongType()), StructField("b", ArrayType(StringType()))])
    assert parse_spark_schema(schema.json()) == schema
    with pytest.raises(OptionError, match="struct"):
        parse_spark_schema('{"type": "array"}')
    with pytest.raises(OptionError):
        parse_spark_schema('{not json')


def test_ddl_round_trip_and_nullable():
    text = "`a b` bigint, s struct<x: int NOT NULL, `y`: map<string, decimal(5,2)>>, t timestamp_ntz, v array<binary>"
    schema = parse_ddl(text)
    assert parse_ddl(struct_ddl(schema)) == schema
    nullable = as_nullable(parse_ddl("a int NOT NULL, s struct<x: int NOT NULL>"))
    assert all(f.nullable for f in nullable.fields) and nullable.fields[1].dataType.fields[0].nullable
