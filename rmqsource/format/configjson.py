"""fastjson-1.x-compatible JSON for RocketMQ's ``{root}/config/*.json`` (spec §8.1).

The broker persists its config managers with
``JSON.toJSONString(obj, SerializerFeature.PrettyFormat)`` (fastjson 1.2.69 in
4.9.x, 1.2.83 in 5.x).  That output is *not* strict JSON: maps with integer
keys are written with bare keys (``{0:6,1:3}``).  Layout of the pretty form:

* ``{`` then, for every **string** key, newline + one tab per nesting level +
  ``"key":value``; entries are separated by ``,`` (no spaces anywhere);
* entries with **integer** keys get no newline, so they stay on the line of
  the ``{``: ``"TopicTest@g1":{0:6,1:3,2:3,3:2`` ... ;
* a non-empty object closes with newline + indent of its own level + ``}``;
  an empty one is ``{}``;
* bean fields come out sorted by name (Java ``String.compareTo``), ``null``
  map values are skipped;
* a ``java.util.List`` is pretty-printed one item per line, any other
  collection (``Set``; what RocketMQ's managers hold) compactly as ``[a,b]``;
* no newline after the last ``}``.

:func:`loads_fastjson` reads that form, quoted-key JSON and any strict JSON
(e.g. the gson-written ``{"offsetTable": {}}`` of the golden corpus).  It is
a bounded recursive-descent parser: nesting depth and number length are
capped so hostile text ends in :class:`FormatError`, never a crash or hang.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from decimal import Decimal
from enum import Enum
from typing import Any, Optional

from ..errors import FormatError, OptionError

DEFAULT_MAX_DEPTH = 64
# Longest number token accepted (Python refuses int() of > 4300 digits anyway).
MAX_NUMBER_CHARS = 400

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "JavaList",
    "dumps_fastjson",
    "loads_fastjson",
    "loads_fastjson_value",
]


class JavaList(list):
    """A list emitted like fastjson's ``ListSerializer`` (one item per line).

    Plain ``list``/``tuple`` values are emitted like a ``java.util.Set``
    (``CollectionCodec``): ``["a","b"]`` on one line.  RocketMQ's config files
    hold sets (``groupTopicMap``, ``subscriptionDataSet``), hence the default.
    """

    __slots__ = ()


# ---------------------------------------------------------------- reading

# fastjson's lexer treats these as whitespace (JSONLexerBase.isWhitespace).
_WS = re.compile(r"[ \t\n\r\f\b]*")
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_STR_CHUNK = re.compile(r'[^"\\]*')
_HEX4 = re.compile(r"[0-9A-Fa-f]{4}")
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f",
                   "n": "\n", "r": "\r", "t": "\t"}


class _Parser:
    """Recursive descent over ``text``; ``pos`` is a character index."""

    def __init__(self, text: str, file: Optional[str], max_depth: int):
        self.text = text
        self.n = len(text)
        self.file = file
        self.max_depth = max_depth
        self.pos = 1 if text.startswith("\ufeff") else 0   # Java keeps a BOM; skip it

    # -- helpers
    def fail(self, message: str, pos: Optional[int] = None) -> FormatError:
        at = self.pos if pos is None else pos
        byte_offset = len(self.text[:at].encode("utf-8", "surrogatepass"))
        return FormatError(f"config JSON: {message}", file=self.file or "<config json>",
                           offset=byte_offset)

    def found(self) -> str:
        if self.pos >= self.n:
            return "end of text"
        return repr(self.text[self.pos])

    def skip_ws(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()

    def expect(self, ch: str, what: str) -> None:
        self.skip_ws()
        if self.pos >= self.n or self.text[self.pos] != ch:
            raise self.fail(f"expected {what}, found {self.found()}")
        self.pos += 1

    # -- grammar
    def document(self) -> Any:
        value = self.value(0)
        self.skip_ws()
        if self.pos != self.n:
            raise self.fail(f"unexpected {self.found()} after the end of the JSON value")
        return value

    def value(self, depth: int) -> Any:
        self.skip_ws()
        if self.pos >= self.n:
            raise self.fail("expected a value, found end of text")
        ch = self.text[self.pos]
        if ch == "{":
            return self.obj(depth + 1)
        if ch == "[":
            return self.array(depth + 1)
        if ch == '"':
            return self.string()
        if ch == "-" or "0" <= ch <= "9":
            return self.number(integer_only=False)
        m = _IDENT.match(self.text, self.pos)
        if m:
            word = m.group()
            literals = {"true": True, "false": False, "null": None}
            if word in literals:
                self.pos = m.end()
                return literals[word]
            raise self.fail(f"unexpected word {word[:40]!r} where a value was expected")
        raise self.fail(f"expected a value, found {self.found()}")

    def check_depth(self, depth: int) -> None:
        if depth > self.max_depth:
            raise self.fail(f"nesting deeper than {self.max_depth} levels")

    def obj(self, depth: int) -> dict:
        self.check_depth(depth)
        self.pos += 1  # '{'
        result: dict = {}
        self.skip_ws()
        if self.pos < self.n and self.text[self.pos] == "}":
            self.pos += 1
            return result
        # Every entry consumes at least 4 characters, so n iterations bound the loop.
        for _ in range(self.n + 1):
            key = self.key()
            self.expect(":", "':' after an object key")
            result[key] = self.value(depth)
            self.skip_ws()
            if self.pos >= self.n:
                raise self.fail("unterminated object: expected ',' or '}', found end of text")
            ch = self.text[self.pos]
            self.pos += 1
            if ch == "}":
                return result
            if ch != ",":
                raise self.fail(f"expected ',' or '}}' after an object entry, found {ch!r}",
                                self.pos - 1)
            self.skip_ws()
        raise self.fail("object does not end")  # unreachable: bounded by text length

    def key(self) -> str | int:
        """A quoted string, a bare integer (``{0:12}``) or a bare identifier."""
        self.skip_ws()
        if self.pos >= self.n:
            raise self.fail("expected an object key, found end of text")
        ch = self.text[self.pos]
        if ch == '"':
            return self.string()
        if ch == "-" or "0" <= ch <= "9":
            return self.number(integer_only=True)
        m = _IDENT.match(self.text, self.pos)
        if m:  # fastjson's AllowUnQuotedFieldNames (default on)
            self.pos = m.end()
            return m.group()
        raise self.fail(f"expected an object key, found {self.found()}")

    def array(self, depth: int) -> list:
        self.check_depth(depth)
        self.pos += 1  # '['
        result: list = []
        self.skip_ws()
        if self.pos < self.n and self.text[self.pos] == "]":
            self.pos += 1
            return result
        for _ in range(self.n + 1):
            result.append(self.value(depth))
            self.skip_ws()
            if self.pos >= self.n:
                raise self.fail("unterminated array: expected ',' or ']', found end of text")
            ch = self.text[self.pos]
            self.pos += 1
            if ch == "]":
                return result
            if ch != ",":
                raise self.fail(f"expected ',' or ']' after an array item, found {ch!r}",
                                self.pos - 1)
        raise self.fail("array does not end")  # unreachable: bounded by text length

    def string(self) -> str:
        start = self.pos
        self.pos += 1  # opening quote
        parts: list[str] = []
        text = self.text
        for _ in range(self.n + 1):
            m = _STR_CHUNK.match(text, self.pos)
            parts.append(m.group())
            self.pos = m.end()
            if self.pos >= self.n:
                raise self.fail("unterminated string", start)
            ch = text[self.pos]
            self.pos += 1
            if ch == '"':
                return "".join(parts)
            # backslash escape
            if self.pos >= self.n:
                raise self.fail("unterminated escape in string", start)
            esc = text[self.pos]
            self.pos += 1
            if esc in _SIMPLE_ESCAPES:
                parts.append(_SIMPLE_ESCAPES[esc])
            elif esc == "u":
                code = self.hex4()
                if 0xD800 <= code <= 0xDBFF and text.startswith("\\u", self.pos):
                    save = self.pos
                    self.pos += 2
                    low = self.hex4()
                    if 0xDC00 <= low <= 0xDFFF:
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    else:
                        self.pos = save
                parts.append(chr(code))
            else:
                raise self.fail(f"invalid escape '\\{esc}' in string", self.pos - 2)
        raise self.fail("unterminated string", start)  # unreachable

    def hex4(self) -> int:
        m = _HEX4.match(self.text, self.pos)
        if not m:
            raise self.fail("'\\u' must be followed by 4 hex digits")
        self.pos = m.end()
        return int(m.group(), 16)

    def number(self, *, integer_only: bool) -> int | float:
        start = self.pos
        m = _NUMBER.match(self.text, self.pos)
        if not m:
            raise self.fail(f"malformed number at {self.found()}")
        token = m.group()
        if len(token) > MAX_NUMBER_CHARS:
            raise self.fail(f"number longer than {MAX_NUMBER_CHARS} characters", start)
        is_integer = m.group(1) is None and m.group(2) is None
        if integer_only and not is_integer:
            raise self.fail(f"bare object key {token!r} is not an integer", start)
        self.pos = m.end()
        if is_integer:
            return int(token)
        value = float(token)
        if not math.isfinite(value):
            raise self.fail(f"number {token[:40]!r} is out of range", start)
        return value


def loads_fastjson_value(text: str | bytes, *, file: Optional[str | os.PathLike] = None,
                         max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """Parse one JSON value (any type) written by fastjson, gson or anything strict.

    Bare integer keys become ``int`` keys, quoted keys stay ``str`` (callers
    that expect an integer-keyed map convert ``"0"`` themselves, as fastjson
    does when reading into ``Map<Integer, Long>``).  Duplicate keys: the last
    one wins.  Bytes are decoded as UTF-8.
    """
    name = os.fspath(file) if file is not None else None
    if isinstance(text, (bytes, bytearray, memoryview)):
        raw = bytes(text)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise FormatError(f"config JSON is not UTF-8 ({e.reason})",
                              file=name or "<config json>", offset=e.start) from None
    if not isinstance(text, str):
        raise OptionError(f"loads_fastjson expects str or bytes, got {type(text).__name__}")
    if max_depth < 1:
        raise OptionError("max_depth must be >= 1")
    return _Parser(text, name, max_depth).document()


def loads_fastjson(text: str | bytes, *, file: Optional[str | os.PathLike] = None,
                   max_depth: int = DEFAULT_MAX_DEPTH) -> dict:
    """Parse a RocketMQ config document; the top level must be an object."""
    value = loads_fastjson_value(text, file=file, max_depth=max_depth)
    if not isinstance(value, dict):
        raise FormatError(f"config JSON: top level is a {type(value).__name__}, expected an object",
                          file=os.fspath(file) if file is not None else "<config json>", offset=0)
    return value


# ---------------------------------------------------------------- writing

def _escape_char(ch: str) -> str:
    code = ord(ch)
    short = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n",
             "\f": "\\f", "\r": "\\r"}
    if ch in short:
        return short[ch]
    return f"\\u{code:04X}"


# fastjson escapes '"', '\\', C0 controls, 0x7F-0x9F and U+2028/U+2029 (upper-case
# hex).  Lone surrogates are escaped too so the output is always valid UTF-8.
_NEEDS_ESCAPE = re.compile('["\\\\\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]')


def _quote(s: str) -> str:
    return '"' + _NEEDS_ESCAPE.sub(lambda m: _escape_char(m.group()), s) + '"'


def _java_double(v: float) -> str:
    """Java ``Double.toString`` form (shortest digits, ``1.0E-5`` style)."""
    if not math.isfinite(v):
        raise OptionError(f"cannot write {v!r} as JSON (fastjson writes null; refusing)")
    if v == 0.0:
        return "-0.0" if math.copysign(1.0, v) < 0 else "0.0"
    digits, exp = _shortest_digits(abs(v))
    sign = "-" if v < 0 else ""
    # value = 0.d1d2... * 10**exp
    if 1e-3 <= abs(v) < 1e7:
        if exp <= 0:
            return sign + "0." + "0" * (-exp) + digits
        if exp >= len(digits):
            return sign + digits + "0" * (exp - len(digits)) + ".0"
        return sign + digits[:exp] + "." + digits[exp:]
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return f"{sign}{mantissa}E{exp - 1}"


def _shortest_digits(v: float) -> tuple[str, int]:
    """Shortest round-trip digits of ``v > 0`` and ``exp`` with ``v = 0.DIGITS * 10**exp``."""
    t = Decimal(repr(v)).normalize().as_tuple()
    digits = "".join(str(d) for d in t.digits)
    return digits, len(digits) + int(t.exponent)


def _key_order(item: tuple[Any, Any]) -> tuple:
    key = item[0]
    if isinstance(key, str):
        # Java String.compareTo orders by UTF-16 code units.
        return (1, key.encode("utf-16-be", "surrogatepass"))
    return (0, key)


class _Emitter:
    def __init__(self, sort_keys: bool, max_depth: int):
        self.sort_keys = sort_keys
        self.max_depth = max_depth
        self.out: list[str] = []

    def newline(self, indent: int) -> None:
        self.out.append("\n" + "\t" * indent)

    def value(self, v: Any, indent: int, depth: int) -> None:
        out = self.out
        if depth > self.max_depth:
            raise OptionError(f"value nests deeper than {self.max_depth} levels")
        if v is None:
            out.append("null")
        elif v is True:
            out.append("true")
        elif v is False:
            out.append("false")
        elif isinstance(v, Enum):
            out.append(_quote(v.name))          # WriteEnumUsingName
        elif isinstance(v, int):
            out.append(str(int(v)))
        elif isinstance(v, float):
            out.append(_java_double(v))
        elif isinstance(v, str):
            out.append(_quote(v))
        elif isinstance(v, Mapping):
            self.obj(v, indent, depth + 1)
        elif isinstance(v, JavaList):
            self.pretty_list(v, indent, depth + 1)
        elif isinstance(v, (list, tuple)):
            self.compact_collection(list(v), indent, depth + 1)
        elif isinstance(v, (set, frozenset)):
            items = list(v)
            if all(isinstance(x, str) for x in items):
                items.sort(key=lambda s: s.encode("utf-16-be", "surrogatepass"))
            elif all(isinstance(x, int) and not isinstance(x, bool) for x in items):
                items.sort()
            self.compact_collection(items, indent, depth + 1)
        else:
            raise OptionError(f"cannot write a {type(v).__name__} as fastjson config JSON")

    def obj(self, m: Mapping, indent: int, depth: int) -> None:
        items = list(m.items())
        for key, _ in items:
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise OptionError(f"config JSON keys must be str or int, got {type(key).__name__}")
        if self.sort_keys:
            items.sort(key=_key_order)
        out = self.out
        out.append("{")
        first = True
        for key, val in items:
            if val is None:          # fastjson drops null map values
                continue
            if not first:
                out.append(",")
            if isinstance(key, str):
                self.newline(indent + 1)
                out.append(_quote(key))
            else:
                out.append(str(int(key)))
            out.append(":")
            self.value(val, indent + 1, depth)
            first = False
        if items:                    # MapSerializer: println when map.size() > 0
            self.newline(indent)
        out.append("}")

    def pretty_list(self, items: list, indent: int, depth: int) -> None:
        if not items:
            self.out.append("[]")
            return
        self.out.append("[")
        for i, item in enumerate(items):
            if i:
                self.out.append(",")
            self.newline(indent + 1)
            self.value(item, indent + 1, depth)
        self.newline(indent)
        self.out.append("]")

    def compact_collection(self, items: list, indent: int, depth: int) -> None:
        self.out.append("[")
        for i, item in enumerate(items):
            if i:
                self.out.append(",")
            self.value(item, indent, depth)
        self.out.append("]")


def dumps_fastjson(obj: Any, *, sort_keys: bool = True, max_depth: int = DEFAULT_MAX_DEPTH) -> str:
    """Serialize like fastjson ``PrettyFormat`` (see module docstring).

    ``sort_keys=True`` orders every object's keys: integer keys ascending (the
    iteration order of Java's hash maps for small non-negative ints), string
    keys by UTF-16 code units (fastjson's bean field order; for string-keyed
    *maps* Java's hash order is not reproducible and readers do not care).
    ``sort_keys=False`` keeps each dict's insertion order, for re-emitting a
    parsed document as it was.  Returns text without a trailing newline.
    """
    emitter = _Emitter(sort_keys, max_depth)
    emitter.value(obj, 0, 0)
    return "".join(emitter.out)
