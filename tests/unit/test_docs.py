"""The documentation site: it builds with ``mkdocs build --strict``, and its options reference
(docs/options.md) lists exactly the options of contract.json, where each is accepted, and the
defaults the option parsers use."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from golden import CONTRACT_JSON

pytestmark = pytest.mark.unit


def project_root() -> Path:
    """The checkout: the nearest folder above this file that holds mkdocs.yml."""
    for parent in Path(__file__).resolve().parents:
        if (parent / "mkdocs.yml").is_file():
            return parent
    raise AssertionError(f"no mkdocs.yml above {__file__}")


ROOT = project_root()
OPTIONS_PAGE = ROOT / "docs" / "options.md"




@lru_cache(maxsize=1)
def contract() -> dict:
    return json.loads(CONTRACT_JSON.read_text(encoding="utf-8"))


def _cells(line: str) -> list[str]:
    """The cells of one Markdown table row: a ``|`` inside a code span or escaped (``\\|``) is not a separator."""
    cells, cell, in_code, prev = [], "", False, ""
    for ch in line.strip().strip("|"):
        if ch == "`":
            in_code = not in_code
        if ch == "|" and not in_code and prev != "\\":
            cells.append(cell.strip())
            cell = ""
        else:
            cell += ch
        prev = ch
    return cells + [cell.strip()]


def page_tables(text: str) -> dict[str, list[dict[str, str]]]:
    """Every table of a page by the text of its first header cell: a list of rows, each a dict by header."""
    tables: dict[str, list[dict[str, str]]] = {}
    block: list[str] = []
    for line in text.splitlines() + [""]:
        if line.lstrip().startswith("|"):
            block.append(line)
            continue
        if len(block) >= 2:
            header = _cells(block[0])
            rows = [dict(zip(header, _cells(row))) for row in block[2:]]
            assert header[0] not in tables, f"two tables of {OPTIONS_PAGE.name} start with {header[0]!r}"
            tables[header[0]] = rows
        block = []
    return tables


def names_in(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


@lru_cache(maxsize=1)
def option_rows() -> dict[str, dict[str, str]]:
    """The rows of the source and sink options table, by option name."""
    rows = {}
    for row in page_tables(OPTIONS_PAGE.read_text(encoding="utf-8"))["Option"]:
        (name,) = names_in(row["Option"])
        assert name not in rows, f"option {name} has two rows"
        rows[name] = row
    return rows


@lru_cache(maxsize=1)
def store_key_rows() -> dict[str, dict[str, str]]:
    rows = {}
    for row in page_tables(OPTIONS_PAGE.read_text(encoding="utf-8"))["Store key"]:
        (name,) = names_in(row["Store key"])
        assert name not in rows, f"store key {name} has two rows"
        rows[name] = row
    return rows


def contract_options() -> set[str]:
    c = contract()
    return (set(c["options"].values()) | set(c["streamOptions"].values()) | set(c["sinkOptions"].values())
            | set(c["sparkSinkOptions"].values()))


def test_every_contract_option_has_a_row():
    missing = sorted(contract_options() - set(option_rows()))
    assert not missing, f"{OPTIONS_PAGE.relative_to(ROOT)} has no row for {missing} ({CONTRACT_JSON.name})"


def test_the_page_lists_no_option_the_contract_lacks():
    extra = sorted(set(option_rows()) - contract_options())
    assert not extra, f"{OPTIONS_PAGE.relative_to(ROOT)} lists {extra}, which {CONTRACT_JSON} does not have"


def test_every_store_config_key_has_a_row_and_no_other():
    keys, rows = set(contract()["storeConfigKeys"]), set(store_key_rows())
    assert not keys - rows, f"{OPTIONS_PAGE.relative_to(ROOT)} has no row for store keys {sorted(keys - rows)}"
    assert not rows - keys, f"{OPTIONS_PAGE.relative_to(ROOT)} lists store keys {sorted(rows - keys)} " \
                            f"that contract.json does not have"


def test_applies_to_says_where_each_option_is_accepted():
    from rmqsource.spark.options import BATCH_ONLY_OPTIONS
    c = contract()
    for name, row in option_rows().items():
        low = name.lower()
        if name not in contract_options():
            continue                  # test_the_page_lists_no_option_the_contract_lacks says so
        expected = set()
        if low in c["options"]:
            expected.add("batch")
        if low in c["streamOptions"] or (low in c["options"] and low not in BATCH_ONLY_OPTIONS):
            expected.add("stream")
        if low in c["sinkOptions"] or low in c["sparkSinkOptions"]:
            expected.add("sink")
        shown = {t.strip() for t in row["Applies to"].split(",")}
        assert shown == expected, f"option {name}: 'Applies to' says {sorted(shown)}, the parsers {sorted(expected)}"


def _shown(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _duration(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(w.capitalize() for w in rest)


def assert_defaults(expected: dict[str, list[str]]) -> None:
    rows = option_rows()          # an option without a row fails test_every_contract_option_has_a_row
    wrong = [f"{name}: the parser's default is `{value}`, the page says {rows[name]['Default']!r}"
             for name, values in expected.items() if name in rows
             for value in values if f"`{value}`" not in rows[name]["Default"]]
    assert not wrong, "\n".join(wrong)


def test_batch_defaults_are_the_parsers():
    from rmqsource.spark.options import ReadOptions
    documented = set(contract()["options"].values())
    expected: dict[str, list[str]] = {}
    for f in dataclasses.fields(ReadOptions):
        if _camel(f.name) in documented and isinstance(f.default, (bool, int, str)):
            expected.setdefault(_camel(f.name), []).append(_shown(f.default))
    assert len(expected) >= 10, expected          # the parser's fields still map to option names
    assert_defaults(expected)


def test_stream_and_sink_defaults_are_the_parsers():
    pytest.importorskip("pyspark.sql.datasource", reason="the stream and sink parsers need pyspark 4's data sources")
    from rmqsource.spark.sink import SinkOptions
    from rmqsource.spark.stream import StreamOptions
    from rmqsource.store.queue_select import DEFAULT_QUEUE_NUMS
    stream = {f.name: f.default for f in dataclasses.fields(StreamOptions)}
    sink = {f.name: f.default for f in dataclasses.fields(SinkOptions)}
    assert sink["lock_timeout_s"] == int(sink["lock_timeout_s"])
    assert_defaults({
        "startingOffsets": [_shown(stream["starting"])],
        "maxTriggerDelay": [_duration(stream["max_trigger_delay_ms"])],
        "subExpression": [stream["sub_expression"]],
        "reportLatestOffset": [_shown(stream["report_latest"])],
        "commitOffsets": [_shown(stream["commit_offsets"])],
        "lockTimeout": [f"{int(sink['lock_timeout_s'])}s"],
        "queueNums": [str(DEFAULT_QUEUE_NUMS)],
        "preserveStoreFields": [_shown(sink["preserve_store_fields"])],
    })


def test_store_key_defaults_are_the_store_configs():
    from rmqsource.store.config import StoreConfig
    rows = store_key_rows()
    defaults = StoreConfig().to_properties()
    wrong = [f"{key}: StoreConfig's default is `{defaults[key]}`, the page says {rows[key]['Default']!r}"
             for key in contract()["storeConfigKeys"]
             if key in defaults and key in rows and f"`{defaults[key]}`" not in rows[key]["Default"]]
    assert not wrong, "\n".join(wrong)


def test_every_kafka_option_name_is_listed():
    kafka = json.loads((ROOT / "rmqsource" / "spark" / "kafka_options.json").read_text(encoding="utf-8"))
    listed = {n for row in page_tables(OPTIONS_PAGE.read_text(encoding="utf-8"))["Kafka option"]
              for n in names_in(row["Kafka option"])}
    missing = sorted(e["kafka"] for e in kafka["options"] if e["kafka"] not in listed)
    assert not missing, f"{OPTIONS_PAGE.relative_to(ROOT)}: Kafka option names without a row: {missing}"


def test_readme_is_a_short_front_door_whose_links_into_docs_exist():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = len(readme.splitlines())
    assert lines <= 250, f"README.md has {lines} lines: keep the front door short, move details into docs/"
    for command in ("scripts/demo.sh", "scripts/test.sh"):
        assert command in readme, f"README.md lost the set-up command {command}"
    links = re.findall(r"\]\((docs/[^)#\s]+)", readme)
    assert links, "README.md links into docs/"
    missing = sorted({link for link in links if not (ROOT / link).is_file()})
    assert not missing, f"README.md links to missing files {missing}"


def test_mkdocs_build_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (the docs extra: pip install -e '.[docs]')")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    assert (tmp_path / "site" / "options" / "index.html").is_file()
