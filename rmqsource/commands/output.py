"""What every ``rmq`` command shares: exit codes, the buffered ``Output``, aligned tables,
time and body formatting, and opening the store's config and reader from the parsed arguments."""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
import unicodedata
from typing import TYPE_CHECKING, Any, Iterable, Optional, Sequence, TextIO

from ..errors import OptionError, RmqError

if TYPE_CHECKING:
    from ..store.config import StoreConfig

PROG = "rmq"
DEFAULT_GROUP = "rmq-cli"
JAVA_LONG_MAX = (1 << 63) - 1
EXIT_OK, EXIT_STORE_ERROR, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class Output:
    """Buffered writer over the command's stdout (one ``write`` per chunk)."""

    def __init__(self, stream: TextIO, json_mode: bool):
        self.stream = stream
        self.json = json_mode
        self._buf: list[str] = []
        self._size = 0

    def line(self, text: str = "") -> None:
        self._buf.append(text)
        self._buf.append("\n")
        self._size += len(text) + 1
        if self._size >= (1 << 16):
            self.flush()

    def json_line(self, obj: Any) -> None:
        self.line(_dumps(obj))

    def raw(self, data: bytes) -> None:
        """UTF-8 bytes that already hold whole lines (bulk-rendered JSON lines)."""
        self.flush()
        binary = getattr(self.stream, "buffer", None)
        if binary is not None:
            binary.write(data)      # no decode/encode round trip through the text layer
            binary.flush()
        else:
            self.stream.write(data.decode("utf-8"))

    def lines(self, texts: Iterable[str]) -> None:
        for t in texts:
            self.line(t)

    def flush(self) -> None:
        if self._buf:
            data = "".join(self._buf)
            self._buf.clear()
            self._size = 0
            self.stream.write(data)
        self.stream.flush()


def _char_width(ch: str) -> int:
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def display_width(text: str) -> int:
    if text.isascii():
        return len(text)
    return sum(_char_width(c) for c in text)


def _pad(text: str, width: int, right: bool) -> str:
    gap = width - display_width(text)
    if gap <= 0:
        return text
    return (" " * gap + text) if right else (text + " " * gap)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]],
                 numeric: Optional[Sequence[bool]] = None, *, widths: Optional[list[int]] = None,
                 header: bool = True) -> list[str]:
    """Aligned columns; numeric columns right-aligned, the last column not padded.

    ``widths`` (updated in place) carries column widths across calls, so a
    long listing can be printed in chunks with one header and stable columns.
    """
    cells = [[cell(v) for v in row] for row in rows]
    n = len(headers)
    if numeric is None:
        numeric = [all(isinstance(row[i], int) and not isinstance(row[i], bool) for row in rows) and bool(rows)
                   for i in range(n)]
    if widths is None:
        widths = []
    if not widths:
        widths.extend(display_width(h) for h in headers)
        for row in cells:
            for i, c in enumerate(row):
                widths[i] = max(widths[i], display_width(c))
    out = []

    def render(row: Sequence[str]) -> str:
        parts = []
        for i, c in enumerate(row):
            last = i == n - 1
            parts.append(_pad(c, widths[i], numeric[i]) if not (last and not numeric[i]) else c)
        return "  ".join(parts).rstrip()

    if header:
        out.append(render(list(headers)))
        out.append("  ".join("-" * w for w in widths))
    out.extend(render(row) for row in cells)
    return out


def short_topic(topic: str, limit: int = 48) -> str:
    """Long topic names shortened for tables (``--json`` always prints them whole)."""
    if len(topic) <= limit:
        return topic
    return f"{topic[:limit - 22]}…{topic[-8:]} ({len(topic)} chars)"


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = str(value)
    if not text.isprintable():
        text = _escape_controls(text)
    return text


def _escape_controls(text: str) -> str:
    out = []
    for ch in text:
        if ch.isprintable():
            out.append(ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return "".join(out)


def truncate(text: str, limit: int) -> str:
    if limit <= 0 or display_width(text) <= limit:
        return text
    out, w = [], 0
    for ch in text:
        cw = _char_width(ch)
        if w + cw > limit - 1:
            break
        out.append(ch)
        w += cw
    return "".join(out) + "…"


def body_preview(body: Optional[bytes], sys_flag: int = 0, limit: int = 60) -> str:
    """Body as text when it is printable UTF-8 (inflated when compressed), else hex."""
    if not body:
        return ""
    prefix = ""
    data = body
    from ..format.compression import is_compressed, inflate_body
    if is_compressed(sys_flag):
        try:
            data = inflate_body(body, sys_flag, max_bytes=1 << 20)
            prefix = "[inflated] "
        except (RmqError, Exception):  # noqa: BLE001 - a preview never fails the command
            data = body
            prefix = "[compressed] "
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and all(c.isprintable() or c in "\n\r\t" for c in text):
        return prefix + truncate(_escape_controls(text), limit)
    hex_chars = max(8, (limit - 16) // 2 * 2)
    shown = data[:hex_chars // 2].hex()
    more = "…" if len(data) > hex_chars // 2 else ""
    return f"{prefix}hex:{shown}{more} ({len(data)} B)"


def format_ms(ms: Optional[int]) -> str:
    """Epoch milliseconds as ``YYYY-MM-DD HH:MM:SS.mmm`` (UTC); raw number if out of range."""
    if ms is None:
        return "-"
    try:
        t = _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"


def parse_time_ms(text: str, what: str) -> int:
    """Epoch ms (integer) or an ISO-8601 date/time (UTC when no zone is given)."""
    t = text.strip()
    try:
        return int(t)
    except ValueError:
        pass
    try:
        d = _dt.datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise OptionError(f"{what} {text!r} is neither epoch milliseconds nor an ISO-8601 time") from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=_dt.timezone.utc)
    return int(d.timestamp() * 1000)



def one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


# --------------------------------------------------------------- config / store

def load_config(args) -> "StoreConfig":
    from ..store.config import StoreConfig, parse_override_args
    overrides = parse_override_args(args.config_overrides or [])
    if args.config:
        return StoreConfig.from_properties_file(args.config, overrides)
    try:
        return StoreConfig.from_mapping(overrides)
    except OptionError as e:
        raise OptionError(f"-C: {e}") from None


def load_writer_config(args, strict: bool = True) -> "StoreConfig":
    """load_config, with every segment size not given taken from the store's files (put, recover).

    ``strict``: files of one kind that differ in size are an error (put); recover leaves that to recovery.
    """
    from ..store.file_sizes import fit_config_to_files, given_keys
    from ..store.config import parse_override_args
    given = given_keys(args.config, parse_override_args(args.config_overrides or []))
    return fit_config_to_files(load_config(args), args.store, given, strict=strict)


def open_reader(args):
    from ..store.reader import MessageStoreReader
    return MessageStoreReader(args.store, load_config(args))


def refuse_read_only_store(store: str, command: str) -> None:
    """``put``/``recover`` write in place: refuse a store whose root has no write permission bits.

    Running as root ignores permissions, so a read-only reference store (a
    golden corpus) would otherwise be modified; the mode bits state the intent.
    """
    import stat
    from ..errors import StoreError
    try:
        mode = os.stat(store).st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise StoreError(f"{store}: {e.strerror or e}") from None
    if stat.S_ISDIR(mode) and not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise StoreError(f"{store} is read-only (mode {stat.filemode(mode)}); {command} writes in place - "
                         f"work on a copy (cp -r) or make it writable")



def note_live_broker(reader) -> None:
    if reader.broker_note():
        print(f"{PROG}: note: {reader.broker_note()}", file=sys.stderr)
