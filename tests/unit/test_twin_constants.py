"""The on-disk format constants the Python and Java twins both state agree.

The Java sources are parsed, not run: every ``static final`` field of the Java ``format`` package
(found by globbing ``rmqsource/**/format/*.java``, so this works wherever the sources sit) with a
literal value (numbers, hex, shifts and products of them, char/byte literals, strings, ``byte[]``
and ``String[]`` literal arrays, ``List.of`` / ``Map.of`` of literals, references to other constants) is
compared with the Python attribute the table pairs it with.  Every such Java field must be either in :data:`FORMAT_PAIRS` or
in :data:`NOT_SHARED` (with the reason), so the table cannot shrink unnoticed and a new constant
on the Java side must be classified.  :data:`RESTATED_PAIRS` covers format constants and limits that
other Java classes restate (found by class name anywhere under ``rmqsource/``).
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "rmqsource"


def _bytes(s: str) -> bytes:
    return s.encode("utf-8")


def _tx_names(table: dict) -> list:
    # Java indexes the names by transaction type >> 2; Python maps the type to its name.
    return [table[k] for k in sorted(table)]


def _word(s: str) -> int:
    # the 8 bytes of a name read as one big-endian long (how the Java verifier spots it)
    return int.from_bytes(s.encode("ascii")[:8], "big", signed=True)


# (Java class, Java field) -> (Python module, attribute[, transform of the Python value])
FORMAT_PAIRS: dict[tuple[str, str], tuple] = {
    # checkpoint
    ("Checkpoint", "FILE_SIZE"): ("rmqsource.format.checkpoint", "CHECKPOINT_FILE_SIZE"),
    # compression types, (sysFlag >> 8) & 7
    ("Compression", "ZLIB_LEGACY"): ("rmqsource.format.compression", "ZLIB_LEGACY"),
    ("Compression", "LZ4"): ("rmqsource.format.compression", "LZ4"),
    ("Compression", "ZSTD"): ("rmqsource.format.compression", "ZSTD"),
    ("Compression", "ZLIB"): ("rmqsource.format.compression", "ZLIB"),
    # ConsumeQueue
    ("ConsumeQueue", "UNIT_SIZE"): ("rmqsource.format.consumequeue", "CQ_UNIT_SIZE"),
    ("ConsumeQueue", "PRE_BLANK_SIZE"): ("rmqsource.format.consumequeue", "PRE_BLANK_SIZE"),
    # DLedger entry header, blank and entry index
    ("DLedgerFormat", "ENTRY_HEADER_BYTES"): ("rmqsource.format.dledger", "ENTRY_HEADER_BYTES"),
    ("DLedgerFormat", "ENTRY_MAGIC"): ("rmqsource.format.dledger", "ENTRY_MAGIC"),
    ("DLedgerFormat", "BLANK_MAGIC"): ("rmqsource.format.dledger", "BLANK_MAGIC"),
    ("DLedgerFormat", "INDEX_ENTRY_BYTES"): ("rmqsource.format.dledger", "INDEX_ENTRY_BYTES"),
    # config/*.json parser limits
    ("FastJson", "DEFAULT_MAX_DEPTH"): ("rmqsource.format.configjson", "DEFAULT_MAX_DEPTH"),
    ("FastJson", "MAX_NUMBER_CHARS"): ("rmqsource.format.configjson", "MAX_NUMBER_CHARS"),
    # IndexFile
    ("IndexFile", "HEADER_SIZE"): ("rmqsource.format.indexfile", "INDEX_HEADER_SIZE"),
    ("IndexFile", "HASH_SLOT_SIZE"): ("rmqsource.format.indexfile", "HASH_SLOT_SIZE"),
    ("IndexFile", "ENTRY_SIZE"): ("rmqsource.format.indexfile", "INDEX_ENTRY_SIZE"),
    # properties
    ("Properties", "NAME_VALUE_SEPARATOR"): ("rmqsource.format.properties", "NAME_VALUE_SEPARATOR", ord),
    ("Properties", "PROPERTY_SEPARATOR"): ("rmqsource.format.properties", "PROPERTY_SEPARATOR", ord),
    ("Properties", "TAGS"): ("rmqsource.format.properties", "TAGS", _bytes),
    ("Properties", "KEYS"): ("rmqsource.format.properties", "KEYS", _bytes),
    ("Properties", "UNIQ_KEY"): ("rmqsource.format.properties", "UNIQ_KEY", _bytes),
    ("Properties", "DELAY"): ("rmqsource.format.properties", "DELAY", _bytes),
    ("Properties", "TAGS_NAME"): ("rmqsource.format.properties", "TAGS"),
    ("Properties", "KEYS_NAME"): ("rmqsource.format.properties", "KEYS"),
    ("Properties", "UNIQ_KEY_NAME"): ("rmqsource.format.properties", "UNIQ_KEY"),
    ("Properties", "DELAY_NAME"): ("rmqsource.format.properties", "DELAY"),
    ("Properties", "CRC32_NAME"): ("rmqsource.format.properties", "CRC32"),
    ("Properties", "REAL_TOPIC_NAME"): ("rmqsource.format.properties", "REAL_TOPIC"),
    ("Properties", "REAL_QID_NAME"): ("rmqsource.format.properties", "REAL_QID"),
    # CommitLog record: magic codes, sysFlag bits, sizes
    ("Record", "MAGIC_V1"): ("rmqsource.format.record", "MAGIC_V1"),
    ("Record", "MAGIC_V2"): ("rmqsource.format.record", "MAGIC_V2"),
    ("Record", "BLANK_MAGIC"): ("rmqsource.format.record", "BLANK_MAGIC"),
    ("Record", "COMPRESSED_FLAG"): ("rmqsource.format.record", "COMPRESSED_FLAG"),
    ("Record", "TRANSACTION_MASK"): ("rmqsource.format.record", "TRANSACTION_MASK"),
    ("Record", "TRANSACTION_PREPARED_TYPE"): ("rmqsource.format.record", "TRANSACTION_PREPARED_TYPE"),
    ("Record", "TRANSACTION_ROLLBACK_TYPE"): ("rmqsource.format.record", "TRANSACTION_ROLLBACK_TYPE"),
    ("Record", "BORNHOST_V6_FLAG"): ("rmqsource.format.record", "BORNHOST_V6_FLAG"),
    ("Record", "STOREHOST_V6_FLAG"): ("rmqsource.format.record", "STOREHOST_V6_FLAG"),
    ("Record", "MIN_RECORD_BYTES"): ("rmqsource.limits", "MIN_RECORD_BYTES"),
    ("Record", "MAX_RECORD_BYTES_READ"): ("rmqsource.limits", "MAX_RECORD_BYTES_READ"),
    ("Record", "TRANSACTION_TYPE_NAMES"): ("rmqsource.format.record", "TRANSACTION_TYPE_NAMES", _tx_names),
    # record encoding: the 5.2+ CRC property placeholder, the end-of-file blank's header
    ("RecordEncoder", "CRC_PLACEHOLDER"): ("rmqsource.store.put_checks", "CRC_PLACEHOLDER"),
    ("RecordEncoder", "BLANK_HEADER_BYTES"): ("rmqsource.limits", "END_FILE_MIN_BLANK_BYTES"),
    # tagsCode
    ("TagsCode", "SCHEDULE_TOPIC"): ("rmqsource.format.tagscode", "SCHEDULE_TOPIC"),
    # consumer offsets in RocksDB (config v2 typed keys, 5.2 layout column families)
    ("RocksDbConfig", "TABLE_PREFIX"): ("rmqsource.format.rocksdb_config", "TABLE_PREFIX"),
    ("RocksDbConfig", "CTRL_1"): ("rmqsource.format.rocksdb_config", "CTRL_1"),
    ("RocksDbConfig", "CTRL_2"): ("rmqsource.format.rocksdb_config", "CTRL_2"),
    ("RocksDbConfig", "DATA_VERSION_KEY"): ("rmqsource.format.rocksdb_config", "DATA_VERSION_KEY"),
    ("RocksDbConfig", "MAX_NAME_BYTES"): ("rmqsource.format.rocksdb_config", "MAX_NAME_BYTES"),
    ("RocksDbConfig", "SERIALIZATION_JSON"): ("rmqsource.format.rocksdb_config", "SERIALIZATION_JSON"),
    ("RocksDbConfig", "RECORD_DATA"): ("rmqsource.format.rocksdb_config", "RecordPrefix.DATA", int),
    ("RocksDbConfig", "RECORD_DATA_VERSION"): ("rmqsource.format.rocksdb_config", "RecordPrefix.DATA_VERSION", int),
    ("RocksDbConfig", "TABLE_CONSUMER_OFFSET"): ("rmqsource.format.rocksdb_config", "TableId.CONSUMER_OFFSET", int),
    ("RocksDbConfig", "TABLE_PULL_OFFSET"): ("rmqsource.format.rocksdb_config", "TableId.PULL_OFFSET", int),
    ("RocksDbConfig", "TABLE_TOPIC"): ("rmqsource.format.rocksdb_config", "TableId.TOPIC", int),
    ("RocksDbConfig", "TABLE_SUBSCRIPTION_GROUP"): ("rmqsource.format.rocksdb_config", "TableId.SUBSCRIPTION_GROUP", int),
    ("RocksDbConfig", "V1_DATA_VERSION_CF"): ("rmqsource.format.rocksdb_config", "V1_DATA_VERSION_CF"),
    ("RocksDbConfig", "V1_DATA_VERSION_KEY"): ("rmqsource.format.rocksdb_config", "V1_DATA_VERSION_KEY"),
    ("RocksDbConfig", "V1_SINGLE_DB_OFFSET_CF"): ("rmqsource.format.rocksdb_config", "V1_SINGLE_DB_OFFSET_CF"),
    ("RocksDbConfig", "V1_SINGLE_DB_VERSION_CF"): ("rmqsource.format.rocksdb_config", "V1_SINGLE_DB_VERSION_CF"),
    # RocketMQ's own topics (what a whole-store read leaves out by default)
    ("SystemTopics", "SYSTEM_TOPICS"): ("rmqsource.format.system_topics", "SYSTEM_TOPICS", list),
    ("SystemTopics", "SYSTEM_TOPIC_PREFIX"): ("rmqsource.format.system_topics", "SYSTEM_TOPIC_PREFIX"),
    ("SystemTopics", "RETRY_GROUP_TOPIC_PREFIX"): ("rmqsource.names", "RETRY_GROUP_TOPIC_PREFIX"),
    ("SystemTopics", "DLQ_GROUP_TOPIC_PREFIX"): ("rmqsource.names", "DLQ_GROUP_TOPIC_PREFIX"),
    ("SystemTopics", "INTERNAL_TOPIC_PREFIXES"): ("rmqsource.format.system_topics", "INTERNAL_TOPIC_PREFIXES", list),
    # RocksDB ConsumeQueues (storeType=defaultRocksDB: unit and per-queue offset keys and values)
    ("RocksDbQueue", "DEFAULT_CF"): ("rmqsource.format.rocksdb_queue", "DEFAULT_CF"),
    ("RocksDbQueue", "OFFSET_CF"): ("rmqsource.format.rocksdb_queue", "OFFSET_CF"),
    ("RocksDbQueue", "CTRL_0"): ("rmqsource.format.rocksdb_queue", "CTRL_0"),
    ("RocksDbQueue", "CTRL_1"): ("rmqsource.format.rocksdb_queue", "CTRL_1"),
    ("RocksDbQueue", "CTRL_2"): ("rmqsource.format.rocksdb_queue", "CTRL_2"),
    ("RocksDbQueue", "CHECKPOINT_TOPIC"): ("rmqsource.format.rocksdb_queue", "CHECKPOINT_TOPIC"),
    ("RocksDbQueue", "CQ_VALUE_SIZE"): ("rmqsource.format.rocksdb_queue", "CQ_VALUE_SIZE"),
    ("RocksDbQueue", "CQ_KEY_FIXED_BYTES"): ("rmqsource.format.rocksdb_queue", "CQ_KEY_FIXED_BYTES"),
    ("RocksDbQueue", "OFFSET_KEY_FIXED_BYTES"): ("rmqsource.format.rocksdb_queue", "OFFSET_KEY_FIXED_BYTES"),
    ("RocksDbQueue", "OFFSET_VALUE_SIZE"): ("rmqsource.format.rocksdb_queue", "OFFSET_VALUE_SIZE"),
    ("RocksDbQueue", "MAX_TAG"): ("rmqsource.format.rocksdb_queue", "MAX_TAG"),
    ("RocksDbQueue", "MIN_TAG"): ("rmqsource.format.rocksdb_queue", "MIN_TAG"),
    # trace message bodies (TraceDataEncoder's separators)
    ("TraceData", "FIELD_SPLITOR"): ("rmqsource.format.trace", "FIELD_SPLITOR"),
    ("TraceData", "CONTENT_SPLITOR"): ("rmqsource.format.trace", "CONTENT_SPLITOR"),
    ("TraceData", "MESSAGE_TYPES"): ("rmqsource.format.trace", "MESSAGE_TYPES", list),
    ("TraceData", "TRANSACTION_STATES"): ("rmqsource.format.trace", "TRANSACTION_STATES", list),
    ("TraceData", "MIN_FIELDS"): ("rmqsource.format.trace", "MIN_FIELDS", dict),
}

# Java format fields with no Python value to compare (the reason says why).
NOT_SHARED: dict[tuple[str, str], str] = {
    ("DLedgerFormat", "ENTRY"): "Java int code of Python's string-valued enum EntryKind (names: test below)",
    ("DLedgerFormat", "BLANK"): "Java int code of Python's string-valued enum EntryKind (names: test below)",
    ("DLedgerFormat", "END"): "Java int code of Python's string-valued enum EntryKind (names: test below)",
    ("Record", "MESSAGE"): "Java int code of Python's string-valued enum Kind (names: test below)",
    ("Record", "BLANK"): "Java int code of Python's string-valued enum Kind (names: test below)",
    ("Record", "END"): "Java int code of Python's string-valued enum Kind (names: test below)",
    ("Record", "CORRUPT"): "Java int code of Python's string-valued enum Kind (names: test below)",
    ("FastJson", "serialVersionUID"): "Java serialization id of an exception class",
    ("JavaHash", "POW31"): "a table of powers of 31 computed at class load (Python computes them inline)",
    ("MsgId", "HEX"): "hex digits for encoding (Python uses bytes.hex().upper())",
    ("SystemTopics", "SYSTEM_TOPIC_SET"): "a lookup set built from SYSTEM_TOPICS (Python: a frozenset of it)",
}

# Format constants and limits restated by Java classes outside the format package (found by class name).
RESTATED_PAIRS: dict[tuple[str, str], tuple] = {
    ("PutChecks", "TOPIC_MAX_BYTES_V1"): ("rmqsource.limits", "TOPIC_MAX_BYTES_V1"),
    ("PutChecks", "TOPIC_MAX_BYTES_V2"): ("rmqsource.limits", "TOPIC_MAX_BYTES_V2"),
    ("PutChecks", "PROPS_MAX"): ("rmqsource.limits", "PROPERTIES_MAX_BYTES"),
    ("PutChecks", "RECORD_HEADROOM_BYTES"): ("rmqsource.limits", "RECORD_HEADROOM_BYTES"),
    ("PutChecks", "END_FILE_MIN_BLANK_BYTES"): ("rmqsource.limits", "END_FILE_MIN_BLANK_BYTES"),
    ("PutChecks", "MAX_PORT"): ("rmqsource.store.put_checks", "MAX_PORT"),
    ("PutChecks", "TRANSACTION_NOT_TYPE"): ("rmqsource.format.record", "TRANSACTION_NOT_TYPE"),
    ("PutChecks", "TRANSACTION_COMMIT_TYPE"): ("rmqsource.format.record", "TRANSACTION_COMMIT_TYPE"),
    ("StoreFileSizes", "INDEX_HEADER_BYTES"): ("rmqsource.format.indexfile", "INDEX_HEADER_SIZE"),
    ("StoreFileSizes", "INDEX_SLOT_BYTES"): ("rmqsource.format.indexfile", "HASH_SLOT_SIZE"),
    ("StoreFileSizes", "INDEX_ENTRY_BYTES"): ("rmqsource.format.indexfile", "INDEX_ENTRY_SIZE"),
    ("ConsumeQueueFiles", "DEFAULT_FILE_SIZE"): ("rmqsource.store.consumequeue", "DEFAULT_CQ_FILE_SIZE"),
    ("StreamAdmission", "MIN_RECORD_BYTES"): ("rmqsource.limits", "MIN_RECORD_BYTES"),
    ("AppendedRows", "CRC_ENTRY_CHARS"): ("rmqsource.format.record", "CRC_PROPERTY_BYTES"),
    ("CommitLogWalk", "CRC_PROP_WORD"): ("rmqsource.format.properties", "CRC32", _word),
    ("IndexService", "MAX_CHAIN_STEPS"): ("rmqsource.limits", "MAX_INDEX_CHAIN_STEPS"),
    ("Segments", "MAX_SEGMENTS"): ("rmqsource.limits", "MAX_SEGMENTS"),
    ("StoreLockState", "BROKER_LOCK_BYTE"): ("rmqsource.io.lock", "BROKER_LOCK_BYTE"),
    ("StoreLockState", "RMQSOURCE_MARK_BYTE"): ("rmqsource.io.lock", "RMQSOURCE_MARK_BYTE"),
    ("RmqOptions", "DEFAULT_MAX_INFLATED_BODY_BYTES"): ("rmqsource.limits", "DEFAULT_MAX_INFLATED_BODY_BYTES"),
}


# --------------------------------------------------------------------------- Java parsing

class Unevaluable(Exception):
    pass


_COMMENT_OR_LITERAL = re.compile(r'("(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')|(/\*.*?\*/|//[^\n]*)', re.S)
_DECL = re.compile(r"((?:\b(?:public|private|protected|static|final|transient|volatile)\s+)+)"
                   r"([A-Za-z_][\w.]*(?:\s*<[^;=(){}]*?>)?(?:\s*\[\s*\])*)\s+([A-Za-z_]\w*)\s*=")
_WIDTH = {"byte": 8, "short": 16, "int": 32, "long": 64}


def strip_comments(text: str) -> str:
    """Java source without comments (string and char literals kept as they are)."""
    return _COMMENT_OR_LITERAL.sub(lambda m: m.group(1) if m.group(1) else " ", text)


def _initializer_end(text: str, i: int) -> tuple[int, list[int]]:
    """End of the initializer starting at ``text[i]`` (index of the ';') and the top-level commas in it."""
    depth = 0
    commas = []
    while i < len(text):
        c = text[i]
        if c in "\"'":
            j = i + 1
            while text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif c == "," and depth == 0:
            commas.append(i)
        elif c == ";" and depth == 0:
            return i, commas
        i += 1
    raise ValueError("unterminated declaration")


def java_static_finals(path: Path) -> dict[str, tuple[str, str]]:
    """name -> (Java type, initializer text) of every ``static final`` field declared in a file."""
    text = strip_comments(path.read_text(encoding="utf-8"))
    out: dict[str, tuple[str, str]] = {}
    for m in _DECL.finditer(text):
        mods = m.group(1).split()
        if "static" not in mods or "final" not in mods:
            continue
        jtype = re.sub(r"\s+", "", m.group(2))
        end, commas = _initializer_end(text, m.end())
        # ``int A = 0, B = 1;`` declares several fields of one type
        parts, start = [], m.end()
        for c in commas:
            parts.append(text[start:c])
            start = c + 1
        parts.append(text[start:end])
        out.setdefault(m.group(3), (jtype, parts[0].strip()))
        for extra in parts[1:]:
            name, eq, init = extra.partition("=")
            if eq and re.fullmatch(r"\s*[A-Za-z_]\w*\s*", name):
                out.setdefault(name.strip(), (jtype, init.strip()))
    return out


def _unescape(body: str) -> str:
    out, i = [], 0
    simple = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "0": "\0", "'": "'", '"': '"', "\\": "\\"}
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt == "u":
            j = i + 1
            while body[j] == "u":
                j += 1
            out.append(chr(int(body[j:j + 4], 16)))
            i = j + 4
        elif nxt in simple:
            out.append(simple[nxt])
            i += 2
        else:
            raise Unevaluable(f"escape \\{nxt}")
    return "".join(out)


_STRING = re.compile(r'"((?:\\.|[^"\\])*)"')
_CHAR = re.compile(r"'((?:\\.|[^'\\])+)'")
_GET_BYTES = re.compile(r'^"((?:\\.|[^"\\])*)"\s*\.\s*getBytes\s*\(.*\)$', re.S)
_JAVA_LIMITS = {"Integer.MAX_VALUE": (1 << 31) - 1, "Integer.MIN_VALUE": -(1 << 31),
                "Long.MAX_VALUE": (1 << 63) - 1, "Long.MIN_VALUE": -(1 << 63),
                "Short.MAX_VALUE": (1 << 15) - 1, "Byte.MAX_VALUE": 127}


def _wrap(value: int, jtype: str) -> int:
    if jtype == "char":
        return value & 0xFFFF
    bits = _WIDTH.get(jtype)
    if bits is None:
        return value
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _eval_int(expr: str, resolve: Callable[[str], Any]) -> int:
    e = _CHAR.sub(lambda m: str(ord(_unescape(m.group(1)))), expr)
    e = re.sub(r"\((?:int|long|short|byte|char)\)", "", e)                 # casts: wrapped at the end
    e = re.sub(r"\b((?:0[xX][0-9a-fA-F_]+)|(?:\d[\d_]*))[lL]\b", r"\1", e)  # long suffix

    def ident(m: re.Match) -> str:
        name = m.group(0)
        if name in _JAVA_LIMITS:
            return str(_JAVA_LIMITS[name])
        v = resolve(name)
        if not isinstance(v, int):
            raise Unevaluable(f"{name} is not an integer constant")
        return f"({v})"

    e = re.sub(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", ident, e)
    try:
        tree = ast.parse(e.strip(), mode="eval")
    except SyntaxError as exc:
        raise Unevaluable(f"not a constant expression: {expr}") from exc
    ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b, ast.BitOr: lambda a, b: a | b,
           ast.BitAnd: lambda a, b: a & b, ast.BitXor: lambda a, b: a ^ b,
           ast.Div: lambda a, b: int(a / b), ast.Mod: lambda a, b: a % b}

    def ev(n):
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd, ast.Invert)):
            v = ev(n.operand)
            return -v if isinstance(n.op, ast.USub) else (~v if isinstance(n.op, ast.Invert) else v)
        if isinstance(n, ast.BinOp) and type(n.op) in ops:
            return ops[type(n.op)](ev(n.left), ev(n.right))
        raise Unevaluable(f"not a constant expression: {expr}")

    return ev(tree.body)


def java_value(jtype: str, init: str, resolve: Callable[[str], Any]):
    """The value of a constant initializer; Unevaluable when it is not built from literals and constants."""
    init = init.strip()
    if jtype == "String":
        m = _STRING.fullmatch(init)
        if not m:
            raise Unevaluable(f"not a string literal: {init}")
        return _unescape(m.group(1))
    if jtype == "byte[]":
        m = _GET_BYTES.match(init)
        if m:
            return _unescape(m.group(1)).encode("latin-1")
    if jtype.endswith("[]"):
        if not (init.startswith("{") and init.endswith("}")):
            raise Unevaluable(f"not an array literal: {init[:40]}")
        elem = jtype[:-2]
        items = [x for x in _split_top(init[1:-1]) if x.strip()]
        values = [java_value(elem, x, resolve) for x in items]
        return bytes(v & 0xFF for v in values) if elem == "byte" else values
    if jtype in _WIDTH or jtype == "char":
        return _wrap(_eval_int(init, resolve), jtype)
    generic = re.fullmatch(r"(List|Map)<(\w+)(?:,(\w+))?>", jtype)
    if generic and init.startswith(f"{generic.group(1)}.of(") and init.endswith(")"):
        items = [x for x in _split_top(init[len(generic.group(1)) + 4:-1]) if x.strip()]
        boxed = {"Integer": "int", "Long": "long", "Short": "short", "Byte": "byte", "Character": "char"}
        kinds = [boxed.get(t, t) for t in generic.group(2, 3) if t]
        if generic.group(1) == "List":           # List.of(a, b, ...)
            return [java_value(kinds[0], x, resolve) for x in items]
        return {java_value(kinds[0], k, resolve): java_value(kinds[1], v, resolve)     # Map.of(k1, v1, ...)
                for k, v in zip(items[::2], items[1::2])}
    raise Unevaluable(f"type {jtype}")


def _split_top(text: str) -> list[str]:
    """The top-level comma-separated parts of an array initializer's body."""
    end, commas = _initializer_end(text + ";", 0)
    bounds = [-1, *commas, end]
    return [text[lo + 1:hi] for lo, hi in zip(bounds, bounds[1:])]


class JavaConstants:
    """Constants of the Java classes, by (class name, field), evaluated on demand."""

    def __init__(self, files: dict[str, Path]):
        self.files = files
        self.decls = {cls: java_static_finals(p) for cls, p in files.items()}
        self._cache: dict[tuple[str, str], Any] = {}

    def value(self, cls: str, name: str):
        key = (cls, name)
        if key not in self._cache:
            if cls not in self.decls:
                self.load(cls)
            if name not in self.decls[cls]:
                raise KeyError(f"{self.files[cls].relative_to(ROOT)} declares no static final {name}")
            jtype, init = self.decls[cls][name]

            def resolve(ref: str):
                if "." in ref:
                    c, _, n = ref.rpartition(".")
                    return self.value(c.rpartition(".")[2], n)
                return self.value(cls, ref)

            self._cache[key] = java_value(jtype, init, resolve)
        return self._cache[key]

    def load(self, cls: str) -> None:
        self.files[cls] = java_class_file(cls)
        self.decls[cls] = java_static_finals(self.files[cls])


def java_class_file(cls: str) -> Path:
    found = sorted(PKG.glob(f"**/{cls}.java"))
    assert len(found) == 1, (f"expected one {cls}.java under rmqsource/, found "
                             f"{[str(p.relative_to(ROOT)) for p in found] or 'none'}")
    return found[0]


def format_java_files() -> dict[str, Path]:
    files = sorted(PKG.glob("**/format/*.java"))
    by_class: dict[str, Path] = {}
    for p in files:
        assert p.stem not in by_class, f"two format classes named {p.stem}: {by_class[p.stem]} and {p}"
        by_class[p.stem] = p
    return by_class


FORMAT_FILES = format_java_files()
pytestmark = [pytest.mark.unit,
              pytest.mark.skipif(not FORMAT_FILES, reason="no Java format sources under rmqsource/**/format/")]


def python_value(pair: tuple):
    module, attr = pair[0], pair[1]
    value: Any = importlib.import_module(module)
    for part in attr.split("."):
        value = getattr(value, part)
    return pair[2](value) if len(pair) > 2 else value


def _compare(java: JavaConstants, table: dict) -> list[str]:
    bad = []
    for (cls, name), pair in table.items():
        try:
            jv = java.value(cls, name)
        except (KeyError, Unevaluable) as exc:
            bad.append(f"{cls}.{name}: {exc}")
            continue
        try:
            pv = python_value(pair)
        except (ImportError, AttributeError) as exc:
            bad.append(f"{cls}.{name} <-> {pair[0]}.{pair[1]}: Python side missing ({exc})")
            continue
        if type(jv) is not type(pv) or jv != pv:
            where = java.files[cls].relative_to(ROOT)
            bad.append(f"{cls}.{name} = {jv!r} ({where}) but {pair[0]}.{pair[1]} = {pv!r}")
    return bad


# --------------------------------------------------------------------------- tests

def test_format_constants_agree():
    bad = _compare(JavaConstants(dict(FORMAT_FILES)), FORMAT_PAIRS)
    assert not bad, "Java and Python format constants disagree:\n  " + "\n  ".join(bad)


def test_restated_format_constants_agree():
    bad = _compare(JavaConstants({}), RESTATED_PAIRS)
    assert not bad, "Java and Python constants disagree:\n  " + "\n  ".join(bad)


def test_every_java_format_constant_is_classified():
    """Each ``static final`` of the Java format package is paired or listed as not shared, no stale entries."""
    declared = {(cls, name) for cls, p in FORMAT_FILES.items() for name in java_static_finals(p)}
    table = set(FORMAT_PAIRS) | set(NOT_SHARED)
    missing = sorted(declared - table)
    assert not missing, ("Java format constants in neither FORMAT_PAIRS nor NOT_SHARED (pair each with its "
                         "Python counterpart, or say why it has none): "
                         + ", ".join(f"{c}.{n} ({FORMAT_FILES[c].relative_to(ROOT)})" for c, n in missing))
    stale = sorted(table - declared)
    assert not stale, "table entries the Java format sources no longer declare: " + \
        ", ".join(f"{c}.{n}" for c, n in stale)
    assert not set(FORMAT_PAIRS) & set(NOT_SHARED)


def test_not_shared_constants_have_no_python_namesake():
    """A Java format constant listed as not shared has no same-named constant in the Python format modules."""
    modules = ["rmqsource.limits"] + sorted(
        f"rmqsource.format.{p.stem}" for p in (PKG / "format").glob("*.py") if p.stem != "__init__")
    clash = []
    for cls, name in NOT_SHARED:
        for mod in modules:
            if hasattr(importlib.import_module(mod), name):
                clash.append(f"{cls}.{name} vs {mod}.{name}")
    assert not clash, "listed as not shared, but Python has a namesake (pair them in FORMAT_PAIRS): " + \
        ", ".join(clash)


def test_java_kind_codes_name_the_python_enum_members():
    from rmqsource.format.dledger import EntryKind
    from rmqsource.format.record import Kind
    java = JavaConstants(dict(FORMAT_FILES))
    for cls, enum in (("Record", Kind), ("DLedgerFormat", EntryKind)):
        codes = {name: java.value(cls, name) for c, name in NOT_SHARED if c == cls}
        assert sorted(codes) == sorted(m.name for m in enum), (cls, sorted(codes), [m.name for m in enum])
        assert sorted(codes.values()) == list(range(len(codes))), (cls, codes)


def test_the_parser_reads_what_the_table_needs():
    # guards the parser itself: hex int overflow, long suffix, shifts, references, arrays, escapes
    def ev(jtype, init, env=None):
        return java_value(jtype, init, lambda n: (env or {})[n])
    assert ev("int", "0xDAA320A7") == -626843481
    assert ev("long", "0x5F5F435243333223L") == 0x5F5F435243333223
    assert ev("int", "1 << 30") == 1 << 30 and ev("long", "64L << 20") == 64 << 20
    assert ev("long", "300_000L * ConsumeQueue.UNIT_SIZE", {"ConsumeQueue.UNIT_SIZE": 20}) == 6_000_000
    assert ev("byte[]", "{'T', 'A', 'G', 'S'}") == b"TAGS"
    assert ev("byte[]", '"__CRC32#\\u00010000000000\\u0002".getBytes(US_ASCII)') == b"__CRC32#\x010000000000\x02"
    assert ev("String[]", '{"A", "B,C"}') == ["A", "B,C"]
    assert ev("byte", "1") == 1 and ev("int", "-1") == -1 and ev("int", "0x7FFFFFFF") == 2**31 - 1
    with pytest.raises(Unevaluable):
        ev("int[]", "new int[256]")
    decls = java_static_finals(FORMAT_FILES["Record"])
    assert decls["MAGIC_V1"] == ("int", "0xDAA320A7")
