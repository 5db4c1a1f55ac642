"""The Python read path agrees with contract.json, the file the JVM scan reads its columns and options from."""

from __future__ import annotations

import json

import pytest

from rmqsource.spark.options import OPTIONS, STREAM_OPTIONS
from rmqsource.spark.schema import ARROW_SCHEMA, _ddl_type
from rmqsource.store.config import _KEYS

from golden import CONTRACT_JSON as CONTRACT

pytestmark = pytest.mark.unit


def contract() -> dict:
    return json.loads(CONTRACT.read_text(encoding="utf-8"))


def test_columns_equal_arrow_schema():
    assert contract()["columns"] == [[f.name, _ddl_type(f.type)] for f in ARROW_SCHEMA]


def test_options_equal_python_options():
    assert contract()["options"] == OPTIONS


def test_stream_options_equal_python_stream_options():
    assert contract()["streamOptions"] == STREAM_OPTIONS


def test_store_config_keys_equal_python_keys():
    assert contract()["storeConfigKeys"] == list(_KEYS)


def test_sink_options_and_columns_equal_the_python_sinks():
    from rmqsource.spark.sink import SINK_OPTIONS, SPARK_SINK_OPTIONS, STORE_FIELD_COLUMNS, WRITABLE_COLUMNS
    assert contract()["sinkOptions"] == SINK_OPTIONS
    assert contract()["sparkSinkOptions"] == SPARK_SINK_OPTIONS
    assert contract()["sinkColumns"] == list(WRITABLE_COLUMNS)
    assert contract()["sinkStoreFieldColumns"] == list(STORE_FIELD_COLUMNS)


def test_sink_refusal_texts_equal_the_python_sinks():
    from rmqsource.spark.sink import SINK_ERRORS
    assert contract()["sinkErrors"] == SINK_ERRORS
