"""fastjson-compatible config JSON codec (spec §8.1)."""

from __future__ import annotations

import random
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from rmqsource.errors import FormatError, OptionError
from rmqsource.format.configjson import JavaList, dumps_fastjson, loads_fastjson, loads_fastjson_value

pytestmark = pytest.mark.unit

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
GOLDEN = SHARED / "golden"
SPEC = SHARED / "spec" / "STORE_FORMAT.md"

# Spec §8.2, [4.9] example: the exact fastjson PrettyFormat bytes.
SPEC_49_EXAMPLE = (
    "{\n"
    "\t\"offsetTable\":{\n"
    "\t\t\"%RETRY%please_rename_unique_group_name@please_rename_unique_group_name\":{0:0\n"
    "\t\t},\n"
    "\t\t\"TopicTest@please_rename_unique_group_name\":{0:6,1:3,2:3,3:2\n"
    "\t\t}\n"
    "\t}\n"
    "}"
)

# Spec §8.2, [5.x] example (line breaks of int-keyed maps normalized by the spec's author).
SPEC_5X_EXAMPLE = (
    "{\n"
    "\t\"dataVersion\":{\n"
    "\t\t\"counter\":1448,\n"
    "\t\t\"stateVersion\":0,\n"
    "\t\t\"timestamp\":1736661762584\n"
    "\t},\n"
    "\t\"groupTopicMap\":{\n"
    "\t\t\"groupA\":[\"%RETRY%groupA\",\"TopicTest\"]\n"
    "\t},\n"
    "\t\"offsetTable\":{\n"
    "\t\t\"TopicTest@groupA\":{0:37960,1:37961,2:37959,3:37959},\n"
    "\t\t\"%RETRY%groupA@groupA\":{0:0}\n"
    "\t}\n"
    "}"
)

# What fastjson itself writes for the 5.x document (closing braces on their own lines).
SPEC_5X_AS_FASTJSON = (
    "{\n"
    "\t\"dataVersion\":{\n"
    "\t\t\"counter\":1448,\n"
    "\t\t\"stateVersion\":0,\n"
    "\t\t\"timestamp\":1736661762584\n"
    "\t},\n"
    "\t\"groupTopicMap\":{\n"
    "\t\t\"groupA\":[\"%RETRY%groupA\",\"TopicTest\"]\n"
    "\t},\n"
    "\t\"offsetTable\":{\n"
    "\t\t\"TopicTest@groupA\":{0:37960,1:37961,2:37959,3:37959\n"
    "\t\t},\n"
    "\t\t\"%RETRY%groupA@groupA\":{0:0\n"
    "\t\t}\n"
    "\t}\n"
    "}"
)

SPEC_DELAY_EXAMPLE = "{\n\t\"offsetTable\":{1:1,2:0,3:27\n\t}\n}"


@pytest.fixture(params=["python", pytest.param("jvm", marks=pytest.mark.spark)])
def codec(request):
    """configjson, or its JVM twin FastJson (py4j): one format, two implementations."""
    if request.param == "python":
        return SimpleNamespace(loads=loads_fastjson, dumps=dumps_fastjson, loads_value=loads_fastjson_value,
                               reemit=lambda text: dumps_fastjson(loads_fastjson(text), sort_keys=False),
                               carries_lone_surrogates=True)
    from jvm_twins import JvmFastJson, jvm_or_skip
    return JvmFastJson(jvm_or_skip(request))


def _spec_code_block_after(marker: str) -> str:
    text = SPEC.read_text(encoding="utf-8")
    start = text.index(marker)
    m = re.compile(r"```\n(.*?)\n```", re.S).search(text, start)
    assert m, f"no code block after {marker!r} in the spec"
    return m.group(1)


# ------------------------------------------------------------ spec examples

def test_spec_49_example_parses_to_int_keyed_maps(codec):
    doc = codec.loads(SPEC_49_EXAMPLE)
    assert doc == {"offsetTable": {
        "%RETRY%please_rename_unique_group_name@please_rename_unique_group_name": {0: 0},
        "TopicTest@please_rename_unique_group_name": {0: 6, 1: 3, 2: 3, 3: 2},
    }}
    queue_ids = list(doc["offsetTable"]["TopicTest@please_rename_unique_group_name"])
    assert all(type(q) is int for q in queue_ids)


def test_spec_49_example_reemits_byte_identical(codec):
    assert codec.dumps(codec.loads(SPEC_49_EXAMPLE)) == SPEC_49_EXAMPLE
    assert codec.dumps(codec.loads(SPEC_49_EXAMPLE), sort_keys=False) == SPEC_49_EXAMPLE


@pytest.mark.skipif(not SPEC.is_file(), reason="spec not checked out next to the project")
def test_hardcoded_examples_match_the_spec_text():
    assert _spec_code_block_after("[4.9]:\n```") == SPEC_49_EXAMPLE
    assert _spec_code_block_after("adds `dataVersion` and the derived `groupTopicMap`") == SPEC_5X_EXAMPLE
    assert _spec_code_block_after("### 8.5 delayOffset.json") == SPEC_DELAY_EXAMPLE


def test_spec_5x_example_parses_and_reemits_in_fastjson_form(codec):
    doc = codec.loads(SPEC_5X_EXAMPLE)
    assert doc["dataVersion"] == {"counter": 1448, "stateVersion": 0, "timestamp": 1736661762584}
    assert doc["groupTopicMap"] == {"groupA": ["%RETRY%groupA", "TopicTest"]}
    assert doc["offsetTable"]["TopicTest@groupA"] == {0: 37960, 1: 37961, 2: 37959, 3: 37959}
    # insertion order kept: the broker's hash order, not alphabetical
    assert codec.dumps(doc, sort_keys=False) == SPEC_5X_AS_FASTJSON
    assert codec.loads(SPEC_5X_AS_FASTJSON) == doc


def test_spec_delay_offset_example_round_trips(codec):
    doc = codec.loads(SPEC_DELAY_EXAMPLE)
    assert doc == {"offsetTable": {1: 1, 2: 0, 3: 27}}
    assert codec.dumps(doc) == SPEC_DELAY_EXAMPLE


def test_golden_delay_offset_json_parses(codec):
    corpora = sorted(p for p in GOLDEN.iterdir() if p.is_dir())
    assert corpora, f"no corpora under {GOLDEN}"
    found = 0
    for corpus in corpora:
        path = corpus / "store" / "config" / "delayOffset.json"
        if path.is_file():
            found += 1
            doc = codec.loads(path.read_bytes(), file=path)
            assert isinstance(doc["offsetTable"], dict)
    assert (GOLDEN / "rmq497-g1" / "store" / "config" / "delayOffset.json").is_file()
    assert codec.loads((GOLDEN / "rmq497-g1" / "store" / "config" / "delayOffset.json").read_text()) \
        == {"offsetTable": {}}
    assert found >= 1


# ------------------------------------------------------------ parser details

def test_bare_and_quoted_keys(codec):
    assert codec.loads('{0:12,1:7}') == {0: 12, 1: 7}
    assert codec.loads('{"0":12}') == {"0": 12}
    assert codec.loads('{-3:1, 2147483648:2}') == {-3: 1, 2147483648: 2}
    assert codec.loads('{abc:1,$x_1:2}') == {"abc": 1, "$x_1": 2}


def test_digits_inside_strings_are_not_touched(codec):
    text = '{"a:0,1:2":"x{3:4,5:6}","b":["{7:8}",9]}'
    assert codec.loads(text) == {"a:0,1:2": "x{3:4,5:6}", "b": ["{7:8}", 9]}
    assert codec.loads('{"k":"\\"{0:1}\\""}') == {"k": '"{0:1}"'}


def test_scalars_and_whitespace(codec):
    doc = codec.loads(' \r\n{ "t" : true ,"f":false,"n":null,"x":-1.5e3,"y":0.25,"s":"" } \n')
    assert doc == {"t": True, "f": False, "n": None, "x": -1500.0, "y": 0.25, "s": ""}
    assert codec.loads("\ufeff{\"a\":1}") == {"a": 1}
    assert codec.loads_value("[1,[2,[3]]]") == [1, [2, [3]]]


def test_string_escapes_and_surrogates(codec):
    doc = codec.loads(r'{"s":"a\"b\\c\/d\b\f\n\r\t\u0041\ud83d\ude00\u00e9"}')
    assert doc["s"] == 'a"b\\c/d\b\f\n\r\tA\U0001F600\u00e9'
    # a lone surrogate is kept (checked inside each implementation: py4j's UTF-8 transport cannot carry one)
    assert codec.reemit('{"s":"\\ud800x"}') == '{\n\t"s":"\\uD800x"\n}'
    if codec.carries_lone_surrogates:
        assert codec.loads('{"s":"\\ud800x"}')["s"] == "\ud800x"


def test_duplicate_keys_last_wins(codec):
    assert codec.loads('{"a":1,"a":2}') == {"a": 2}


HOSTILE = [
    "", "   ", "{", "}", "{\"a\"", "{\"a\":", "{\"a\":}", "{\"a\" 1}", "{\"a\":1,}", "{\"a\":1 \"b\":2}",
    "[1,]", "[1 2]", "{0.5:1}", "{1e3:1}", "{\"a\":01x}", "{'a':1}", "{\"a\":NaN}", "{\"a\":1e999}",
    "{\"a\":\"unterminated}", "{\"a\":\"bad\\x\"}", "{\"a\":\"\\u12\"}", "{\"a\":\"\\", "{} {}",
    "{\"a\":tru}", "{\"a\":nulll}", "{\"a\":-}", "{:1}", "{\"a\":[}", "[" * 100000, "{\"a\":" * 5000,
    "{\"a\":" + "9" * 5000 + "}", "{" + "9" * 5000 + ":1}", "[1]", "\"str\"", "42",
]


@pytest.mark.parametrize("text", HOSTILE, ids=lambda t: repr(t[:30]))
def test_hostile_text_raises_format_error(text, codec):
    with pytest.raises(FormatError) as info:
        codec.loads(text, file="config/consumerOffset.json")
    err = info.value
    assert err.file == "config/consumerOffset.json"
    assert err.offset is not None and err.offset >= 0
    assert "config/consumerOffset.json" in str(err)


def test_error_offset_is_a_byte_offset(codec):
    with pytest.raises(FormatError) as info:
        codec.loads('{"é":x}')
    assert info.value.offset == len('{"é":'.encode("utf-8"))


def test_invalid_utf8_bytes_raise_format_error(codec):
    with pytest.raises(FormatError) as info:
        codec.loads(b'{"a":"\xff"}', file="f.json")
    assert info.value.offset == 6


def test_nesting_limit_is_configurable(codec):
    deep = "[" * 10 + "]" * 10
    assert codec.loads_value(deep, max_depth=10) == [[[[[[[[[[]]]]]]]]]]
    with pytest.raises(FormatError):
        codec.loads_value(deep, max_depth=9)


def test_mutated_documents_never_crash(codec):
    rng = random.Random(20240101)
    base = SPEC_5X_EXAMPLE
    alphabet = '{}[]:,"\\0123456789-.eE \t\nabcnulltrue@%'
    outcomes = {"ok": 0, "error": 0}
    for _ in range(1500):
        chars = list(base)
        for _ in range(rng.randint(1, 4)):
            op = rng.random()
            pos = rng.randrange(len(chars) + 1)
            if op < 0.4 and chars:
                del chars[min(pos, len(chars) - 1)]
            elif op < 0.8:
                chars.insert(pos, rng.choice(alphabet))
            elif chars:
                chars[min(pos, len(chars) - 1)] = rng.choice(alphabet)
        try:
            codec.loads("".join(chars))
            outcomes["ok"] += 1
        except FormatError:
            outcomes["error"] += 1
    assert outcomes["error"] > 100 and sum(outcomes.values()) == 1500


# ------------------------------------------------------------ emitter details

def test_emitter_layout_rules(codec):
    assert codec.dumps({}) == "{}"
    assert codec.dumps({"a": {}}) == '{\n\t"a":{}\n}'
    assert codec.dumps({"b": 1, "a": None}) == '{\n\t"b":1\n}'          # null map values dropped
    assert codec.dumps({"a": [1, "x"], "s": {"q", "p"}}) == '{\n\t"a":[1,"x"],\n\t"s":["p","q"]\n}'
    assert codec.dumps({"l": JavaList([{"x": 1}, 2])}) == \
        '{\n\t"l":[\n\t\t{\n\t\t\t"x":1\n\t\t},\n\t\t2\n\t]\n}'
    assert codec.dumps({"l": JavaList()}) == '{\n\t"l":[]\n}'
    assert codec.dumps({"m": {2: 20, 1: 10}}) == '{\n\t"m":{1:10,2:20\n\t}\n}'
    assert codec.dumps({"m": {2: 20, 1: 10}}, sort_keys=False) == '{\n\t"m":{2:20,1:10\n\t}\n}'
    assert codec.dumps({1: {"x": True}}) == '{1:{\n\t\t"x":true\n\t}\n}'
    assert codec.dumps({"f": 1.5, "g": 1e-05, "h": 2.0}) == '{\n\t"f":1.5,\n\t"g":1.0E-5,\n\t"h":2.0\n}'


def test_emitter_sorts_like_java_string_compare(codec):
    # U+1F600 is the surrogate pair D83D DE00, which Java sorts before U+FFFF.
    out = codec.dumps({"\uffff": 1, "\U0001F600": 2, "B": 3, "a": 4})
    keys = re.findall(r'"(.*?)":', out)
    assert keys == ["B", "a", "\U0001F600", "\uffff"]


def test_emitter_escapes_like_fastjson_and_round_trips(codec):
    s = 'q"b\\s\b\t\n\f\r\x01\x0b\x7f\x9f\u2028\u2029é😀\ud800/'
    expected = ('{\n\t"k":"q\\"b\\\\s\\b\\t\\n\\f\\r\\u0001\\u000B\\u007F\\u009F'
                '\\u2028\\u2029é😀\\uD800/"\n}')
    assert codec.reemit(expected) == expected          # parsed and written inside the implementation
    if not codec.carries_lone_surrogates:              # py4j cannot send the lone surrogate itself
        s, expected = s.replace("\ud800", ""), expected.replace("\\uD800", "")
    out = codec.dumps({"k": s})
    assert out == expected
    out.encode("utf-8")                   # always encodable
    assert codec.loads(out) == {"k": s}


def test_emitter_rejects_unserializable_values(codec):
    with pytest.raises(OptionError):
        codec.dumps({"a": object()})
    with pytest.raises(OptionError):
        codec.dumps({(1, 2): 1})
    with pytest.raises(OptionError):
        codec.dumps({True: 1})
    with pytest.raises(OptionError):
        codec.dumps({"a": float("nan")})
    nested: dict = {}
    cur = nested
    for _ in range(100):
        cur["a"] = {}
        cur = cur["a"]
    with pytest.raises(OptionError):
        codec.dumps(nested)


def test_round_trip_of_random_documents(codec):
    rng = random.Random(7)

    def gen(depth):
        kind = rng.randrange(6 if depth < 4 else 3)
        if kind == 0:
            return rng.randrange(-10**12, 10**12)
        if kind == 1:
            return "".join(rng.choice('ab"\\\n{}:,0 é') for _ in range(rng.randrange(6)))
        if kind == 2:
            return rng.choice([True, False])
        if kind == 3:
            return [gen(depth + 1) for _ in range(rng.randrange(4))]
        if kind == 4:
            return {rng.randrange(100): gen(depth + 1) for _ in range(rng.randrange(4))}
        return {f"k{rng.randrange(100)}": gen(depth + 1) for _ in range(rng.randrange(4))}

    for _ in range(300):
        doc = {"root": gen(0)}
        text = codec.dumps(doc, sort_keys=False)
        assert codec.loads(text) == doc
        assert codec.dumps(codec.loads(text), sort_keys=False) == text
