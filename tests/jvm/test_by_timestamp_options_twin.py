"""Kafka's startingOffsetsByTimestamp, endingOffsetsByTimestamp and startingOffsetsByTimestampStrategy as both
option parsers take them (rmqsource/spark/options.py, stream_options.py and their Java twins RmqOptions.java,
stream/RmqStreamOptions.java): what one accepts the other accepts with the same timestamps, and what one refuses
the other refuses with the same text."""

from __future__ import annotations

import pytest
from py4j.java_gateway import get_field

from rmqsource.errors import OptionError
from rmqsource.spark.options import parse_options
from rmqsource.spark.stream_options import parse_stream_options
from tests.support.jvm_twins import _Call, jvm_or_skip

pytestmark = pytest.mark.jvm

CASES = [
    {"startingOffsetsByTimestamp": '{"T": {"0": 5, "2": 7}}', "endingOffsetsByTimestamp": '{"T": {"1": 9}}'},
    {"startingOffsetsByTimestamp": '{"T": {"0": 5}}', "startingOffsetsByTimestampStrategy": " LATEST "},
    {"startingOffsetsByTimestamp": '{"T": {"0": -1}}'},
    {"startingOffsetsByTimestamp": '{"T": {"0": "12"}}'},
    {"startingOffsetsByTimestamp": '{"T": {"0": 1.5}}'},
    {"startingOffsetsByTimestamp": '{"T": {"0": true}}'},
    {"startingOffsetsByTimestamp": '{"T": {"x": 1}}'},
    {"startingOffsetsByTimestamp": '{"T": {}}'},
    {"startingOffsetsByTimestamp": '{"T": ["a", 1]}'},
    {"startingOffsetsByTimestamp": '{}'},
    {"startingOffsetsByTimestamp": '[1]'},
    {"startingOffsetsByTimestamp": '{"T": {"0": 1}}', "startingTimestamp": "1"},
    {"endingOffsetsByTimestamp": '{"T": {"0": 1}}', "endingTimestamp": "1"},
    {"startingOffsetsByTimestampStrategy": "earliest"},
    {"startingOffsetsByTimestamp": '{"T": {"0": 1}}', "topics": None},
    {"endingOffsetsByTimestamp": '{"T": {"0": 1}}', "topics": None},
]


def _python(options, stream):
    try:
        o = parse_stream_options(options).read if stream else parse_options(options)
    except OptionError as e:
        return ("error", str(e))
    return ("ok", o.starting_by_timestamp, o.ending_by_timestamp, o.by_timestamp_strategy)


def _by_ts(spec):
    if spec is None:
        return None
    return {str(t): {int(q): int(v) for q, v in qs.items()} for t, qs in spec.items()}


def _jvm(jvm, options, stream):
    m = jvm.java.util.LinkedHashMap()
    for k, v in options.items():
        m.put(k, v)
    try:
        with _Call():
            if stream:
                o = get_field(jvm.io.rmqsource.spark.stream.RmqStreamOptions.parse(m), "read")
            else:
                o = jvm.io.rmqsource.spark.RmqOptions.parse(m)
    except OptionError as e:
        return ("error", str(e))
    return ("ok", _by_ts(get_field(o, "startingByTimestamp")), _by_ts(get_field(o, "endingByTimestamp")),
            get_field(o, "byTimestampStrategy"))


@pytest.mark.parametrize("stream", [False, True], ids=["batch", "stream"])
@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_both_parsers_agree(request, tmp_path, case, stream):
    jvm = jvm_or_skip(request)
    options = {"path": str(tmp_path), "topics": "T", **case}
    options = {k: v for k, v in options.items() if v is not None}
    expected = _python(options, stream)
    got = _jvm(jvm, options, stream)
    if expected[0] == "error" and "cannot parse" in expected[1]:
        # the JSON parsers' own reasons differ; the text up to them is the same
        assert got[0] == "error" and got[1].split("cannot parse")[0] == expected[1].split("cannot parse")[0]
    else:
        assert got == expected
