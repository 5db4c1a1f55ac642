"""``StoreConfig``: the MessageStoreConfig settings rmqsource uses (spec §1.2, §2.8, §2.10).

Keys are RocketMQ's own (``mappedFileSizeCommitLog`` ...), read from a Java
``.properties`` file (the broker's ``broker.conf`` or a corpus's
``store.properties``) plus ``-C key=value`` overrides.  One extra key is not a
RocketMQ setting: ``engineVersion`` (``4.9.7``, ``5.3.3`` ...), the engine
generation whose bytes a writer must reproduce.  Keys rmqsource does not model
are kept verbatim in ``extra`` (a broker config has dozens); they never fail.

Values are parsed like ``MixAll.properties2Object`` (``Integer.parseInt``,
``Boolean.parseBoolean``), except that malformed values raise OptionError
naming the key instead of being ignored, and getters with side rules are
applied once: ``mappedFileSizeConsumeQueue`` is rounded up to a multiple of 20
(``getMappedFileSizeConsumeQueue``).
"""

from __future__ import annotations

import dataclasses
import enum
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..errors import OptionError

__all__ = [
    "BrokerRole",
    "DEFAULT_ENGINE_VERSION",
    "DEFAULT_MESSAGE_DELAY_LEVEL",
    "FlushDiskType",
    "FrozenMap",
    "StoreConfig",
    "format_message_delay_level",
    "parse_engine_version",
    "parse_java_properties",
    "parse_message_delay_level",
    "parse_override_args",
]

JAVA_INT_MAX = 2**31 - 1
JAVA_LONG_MAX = 2**63 - 1
CQ_STORE_UNIT_SIZE = 20
INDEX_HEADER_SIZE = 40
INDEX_HASH_SLOT_SIZE = 4
INDEX_ENTRY_SIZE = 20
DEFAULT_ENGINE_VERSION = "5.3.3"
DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
# ScheduleMessageService.parseDelayLevel's unit table.
_DELAY_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_MAX_DELAY_LEVELS = 1000
_MAX_PROPERTIES_CHARS = 16 * 1024 * 1024


class FlushDiskType(str, enum.Enum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


class BrokerRole(str, enum.Enum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


class FrozenMap(Mapping):
    """Immutable, hashable, picklable ``str -> str`` mapping (``StoreConfig.extra``)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, str] | Iterable[tuple[str, str]] = ()):
        pairs = dict(items.items() if isinstance(items, Mapping) else items)
        object.__setattr__(self, "_items", pairs)

    def __setattr__(self, name, value):
        raise AttributeError("FrozenMap is immutable")

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __repr__(self) -> str:
        return f"FrozenMap({self._items!r})"

    def __reduce__(self):
        return (FrozenMap, (tuple(self._items.items()),))


# ------------------------------------------------------------ value parsers

def parse_message_delay_level(text: str) -> tuple[int, ...]:
    """``"1s 5s 1m 2h 1d"`` -> delay of each level (1-based in RocketMQ) in ms."""
    tokens = str(text).split()
    if not tokens:
        raise OptionError("messageDelayLevel is empty; expected e.g. '1s 5s 10s 30s 1m'")
    if len(tokens) > _MAX_DELAY_LEVELS:
        raise OptionError(f"messageDelayLevel has {len(tokens)} levels, more than {_MAX_DELAY_LEVELS}")
    levels = []
    for i, tok in enumerate(tokens, start=1):
        m = re.fullmatch(r"([0-9]{1,18})([smhd])", tok)
        if not m:
            raise OptionError(f"messageDelayLevel: level {i} is {tok!r}; expected a number "
                              f"followed by one of s, m, h, d (e.g. '30s', '2h')")
        ms = int(m.group(1)) * _DELAY_UNIT_MS[m.group(2)]
        if ms > JAVA_LONG_MAX:
            raise OptionError(f"messageDelayLevel: level {i} ({tok}) overflows a Java long of ms")
        levels.append(ms)
    return tuple(levels)


def format_message_delay_level(levels_ms: Iterable[int]) -> str:
    """Inverse of :func:`parse_message_delay_level`, each level in its largest exact unit."""
    out = []
    for ms in levels_ms:
        for unit in ("d", "h", "m", "s"):
            if ms % _DELAY_UNIT_MS[unit] == 0:
                out.append(f"{ms // _DELAY_UNIT_MS[unit]}{unit}")
                break
        else:
            raise OptionError(f"delay {ms} ms is not a whole number of seconds")
    return " ".join(out)


_VERSION = re.compile(r"(\d{1,4})\.(\d{1,4})\.(\d{1,4})(?:[-.+][0-9A-Za-z.+-]{0,64})?")


def parse_engine_version(text: str) -> tuple[int, int, int]:
    """``"4.9.7"`` / ``"5.3.4-SNAPSHOT"`` -> ``(major, minor, patch)``; only 4.x and 5.x."""
    m = _VERSION.fullmatch(str(text).strip())
    if not m:
        raise OptionError(f"engineVersion {text!r} is not a version like '4.9.7' or '5.3.3'")
    version = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
    if version[0] not in (4, 5):
        raise OptionError(f"engineVersion {text!r}: only RocketMQ 4.x and 5.x stores are supported")
    return version


def _int_value(key: str, raw: Any, *, minimum: int, maximum: int = JAVA_INT_MAX) -> int:
    if isinstance(raw, bool):
        raise OptionError(f"{key}: expected an integer, got a boolean")
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, str):
        text = raw.strip()
        if not re.fullmatch(r"[+-]?[0-9]{1,19}", text):   # Integer.parseInt syntax
            raise OptionError(f"{key}={raw!r} is not an integer")
        value = int(text)
    else:
        raise OptionError(f"{key}: expected an integer, got {type(raw).__name__}")
    if not minimum <= value <= maximum:
        raise OptionError(f"{key}={value} is out of range [{minimum}, {maximum}]")
    return value


def _bool_value(key: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise OptionError(f"{key}={raw!r} is not a boolean (true or false)")


def _enum_value(key: str, raw: Any, kind: type[enum.Enum]) -> Any:
    if isinstance(raw, kind):
        return raw
    if isinstance(raw, str):
        name = raw.strip().upper()
        if name in kind.__members__:
            return kind[name]
    allowed = ", ".join(kind.__members__)
    raise OptionError(f"{key}={raw!r} is not one of {allowed}")


def _delay_value(key: str, raw: Any) -> tuple[int, ...]:
    if isinstance(raw, str):
        return parse_message_delay_level(raw)
    if isinstance(raw, (tuple, list)):
        levels = tuple(raw)
        if not levels:
            raise OptionError(f"{key}: at least one delay level is needed")
        for ms in levels:
            _int_value(key, ms, minimum=0, maximum=JAVA_LONG_MAX)
        format_message_delay_level(levels)     # whole seconds only
        return levels
    raise OptionError(f"{key}: expected a string like '1s 5s 1m', got {type(raw).__name__}")


def _str_value(key: str, raw: Any, *, optional: bool) -> Optional[str]:
    if raw is None and optional:
        return None
    if isinstance(raw, os.PathLike):
        raw = os.fspath(raw)
    if not isinstance(raw, str):
        raise OptionError(f"{key}: expected a string, got {type(raw).__name__}")
    text = raw.strip()                          # properties2Object trims String values
    if optional and not text:
        return None
    return text


def _config_manager_version(key: str, raw: Any) -> Optional[str]:
    # The broker compares with "v2" exactly and takes anything else for v1: a typo must not pass as v1.
    text = _str_value(key, raw, optional=True)
    if text not in (None, "v1", "v2"):
        raise OptionError(f"{key}={raw!r} is not v1 or v2")
    return text


def _version_value(key: str, raw: Any) -> str:
    text = _str_value(key, raw, optional=False)
    parse_engine_version(text)
    return text


@dataclass(frozen=True)
class _Key:
    attr: str
    parse: Callable[[str, Any], Any]


def _pos(key: str, raw: Any) -> int:
    return _int_value(key, raw, minimum=1)


def _nonneg(key: str, raw: Any) -> int:
    return _int_value(key, raw, minimum=0)


def _cq_size(key: str, raw: Any) -> int:
    value = _int_value(key, raw, minimum=1)
    # getMappedFileSizeConsumeQueue(): ceil(size / 20) * 20.
    rounded = -(-value // CQ_STORE_UNIT_SIZE) * CQ_STORE_UNIT_SIZE
    if rounded > JAVA_INT_MAX:
        raise OptionError(f"{key}={value} rounds up past a Java int")
    return rounded


_KEYS: dict[str, _Key] = {
    "mappedFileSizeCommitLog": _Key("mapped_file_size_commit_log_bytes", _pos),
    "mappedFileSizeConsumeQueue": _Key("mapped_file_size_consume_queue_bytes", _cq_size),
    "maxHashSlotNum": _Key("max_hash_slot_num", _pos),
    "maxIndexNum": _Key("max_index_num", _pos),
    "flushDiskType": _Key("flush_disk_type", lambda k, v: _enum_value(k, v, FlushDiskType)),
    "brokerRole": _Key("broker_role", lambda k, v: _enum_value(k, v, BrokerRole)),
    "messageDelayLevel": _Key("message_delay_levels_ms", _delay_value),
    "checkCRCOnRecover": _Key("check_crc_on_recover", _bool_value),
    "messageIndexEnable": _Key("message_index_enable", _bool_value),
    "messageIndexSafe": _Key("message_index_safe", _bool_value),
    "maxMsgsNumBatch": _Key("max_msgs_num_batch", _pos),
    "maxTransferCountOnMessageInMemory": _Key("max_transfer_count_on_message_in_memory", _pos),
    "maxTransferBytesOnMessageInMemory": _Key("max_transfer_bytes_on_message_in_memory", _pos),
    "maxMessageSize": _Key("max_message_size_bytes", _pos),
    "enableConsumeQueueExt": _Key("enable_consume_queue_ext", _bool_value),
    "enabledAppendPropCRC": _Key("enabled_append_prop_crc", _bool_value),
    "autoMessageVersionOnTopicLen": _Key("auto_message_version_on_topic_len", _bool_value),
    "brokerPutHooks": _Key("broker_put_hooks", _bool_value),
    "storePathRootDir": _Key("store_path_root_dir", lambda k, v: _str_value(k, v, optional=True)),
    "storePathCommitLog": _Key("store_path_commit_log", lambda k, v: _str_value(k, v, optional=True)),
    "readOnlyCommitLogStorePaths": _Key("read_only_commit_log_store_paths",
                                        lambda k, v: _str_value(k, v, optional=True)),
    "enableDLegerCommitLog": _Key("enable_dleger_commit_log", _bool_value),
    "storePathDLedgerCommitLog": _Key("store_path_dledger_commit_log",
                                      lambda k, v: _str_value(k, v, optional=True)),
    "dLegerSelfId": _Key("dleger_self_id", lambda k, v: _str_value(k, v, optional=True)),
    "fileReservedTime": _Key("file_reserved_time_hours", _nonneg),
    "deleteWhen": _Key("delete_when", lambda k, v: _str_value(k, v, optional=False)),
    "diskMaxUsedSpaceRatio": _Key("disk_max_used_space_ratio_percent", _nonneg),
    "flushIntervalCommitLog": _Key("flush_interval_commit_log_ms", _pos),
    "flushCommitLogTimed": _Key("flush_commit_log_timed", _bool_value),
    "maxFilterMessageSize": _Key("max_filter_message_size_bytes", _pos),
    "engineVersion": _Key("engine_version", _version_value),
    "configManagerVersion": _Key("config_manager_version", _config_manager_version),
}
_ATTR_TO_KEY = {spec.attr: key for key, spec in _KEYS.items()}


@dataclass(frozen=True)
class StoreConfig:
    """MessageStoreConfig subset (RocketMQ key in the comment), defaults as in 4.9.7/5.3.3."""

    mapped_file_size_commit_log_bytes: int = 1024 * 1024 * 1024          # mappedFileSizeCommitLog
    mapped_file_size_consume_queue_bytes: int = 300_000 * CQ_STORE_UNIT_SIZE  # mappedFileSizeConsumeQueue
    max_hash_slot_num: int = 5_000_000                                   # maxHashSlotNum
    max_index_num: int = 5_000_000 * 4                                   # maxIndexNum
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH           # flushDiskType
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER                    # brokerRole
    message_delay_levels_ms: tuple[int, ...] = parse_message_delay_level(DEFAULT_MESSAGE_DELAY_LEVEL)
    check_crc_on_recover: bool = True                                    # checkCRCOnRecover
    message_index_enable: bool = True                                    # messageIndexEnable
    message_index_safe: bool = False                                     # messageIndexSafe
    max_msgs_num_batch: int = 64                                         # maxMsgsNumBatch
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_message_size_bytes: int = 4 * 1024 * 1024                        # maxMessageSize
    enable_consume_queue_ext: bool = False                               # enableConsumeQueueExt
    enabled_append_prop_crc: bool = False                                # enabledAppendPropCRC (5.2+)
    auto_message_version_on_topic_len: bool = True                       # autoMessageVersionOnTopicLen
    # rmqsource's own: what a 5.x broker does before its store (HookUtils.handleScheduleMessage): DELAY parked
    # in SCHEDULE_TOPIC_XXXX, timer properties refused. false = the bare store engine (the golden corpora).
    broker_put_hooks: bool = True                                        # brokerPutHooks
    store_path_root_dir: Optional[str] = None                            # storePathRootDir ($HOME/store)
    store_path_commit_log: Optional[str] = None                          # storePathCommitLog (root/commitlog)
    # Layout keys: they name the data folders of a layout (layout.py, "Store layouts" in the README).
    read_only_commit_log_store_paths: Optional[str] = None               # readOnlyCommitLogStorePaths
    enable_dleger_commit_log: bool = False                               # enableDLegerCommitLog
    store_path_dledger_commit_log: Optional[str] = None                  # storePathDLedgerCommitLog (5.x)
    dleger_self_id: Optional[str] = None                                 # dLegerSelfId (which dledger-<id>/)
    file_reserved_time_hours: int = 72                                   # fileReservedTime
    delete_when: str = "04"                                              # deleteWhen
    disk_max_used_space_ratio_percent: int = 75                          # diskMaxUsedSpaceRatio
    flush_interval_commit_log_ms: int = 500                              # flushIntervalCommitLog
    flush_commit_log_timed: bool = True                                  # flushCommitLogTimed
    max_filter_message_size_bytes: int = 16000                           # maxFilterMessageSize (5.x)
    engine_version: str = DEFAULT_ENGINE_VERSION                         # engineVersion (not RocketMQ)
    # A BrokerConfig key: where the broker keeps topics, groups and offsets (v2: RocksDB config/rdb/, 5.3.2+);
    # None: as the store shows (config/rdb/ there or not).
    config_manager_version: Optional[str] = None                         # configManagerVersion
    extra: Mapping[str, str] = field(default_factory=FrozenMap)          # every other key, verbatim

    def __post_init__(self) -> None:
        # Validate (and normalize) every field, also when constructed directly.
        for key, spec in _KEYS.items():
            value = getattr(self, spec.attr)
            if isinstance(value, enum.Enum) or value is None or isinstance(value, (bool, int, tuple, list, str)):
                checked = spec.parse(key, value)
                if checked != value or type(checked) is not type(value):
                    object.__setattr__(self, spec.attr, checked)
            else:
                raise OptionError(f"{key}: unsupported value type {type(value).__name__}")
        extra = self.extra
        if not isinstance(extra, FrozenMap):
            if not isinstance(extra, Mapping):
                raise OptionError("extra must be a mapping of str to str")
            extra = FrozenMap(extra)
        for k, v in extra.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise OptionError(f"extra entry {k!r}: keys and values must be strings")
            if k in _KEYS:
                raise OptionError(f"{k} is a modelled setting; it cannot also be in extra")
        object.__setattr__(self, "extra", extra)
        if self.config_manager_version == "v2" and self.engine_version_tuple < (5, 3, 2):
            raise OptionError(f"configManagerVersion=v2 needs a 5.3.2+ broker; engineVersion is {self.engine_version}")
        size = self.index_file_size_bytes
        if size > JAVA_INT_MAX:
            raise OptionError(f"maxHashSlotNum={self.max_hash_slot_num} / maxIndexNum={self.max_index_num} "
                              f"give a {size}-byte IndexFile, larger than a Java int")

    # ---------------------------------------------------------- construction

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> "StoreConfig":
        """Build from RocketMQ keys; values are strings (as in a .properties file) or typed."""
        return cls().with_overrides(mapping)

    @classmethod
    def from_properties_file(cls, path: str | os.PathLike,
                             overrides: Optional[Mapping[str, Any]] = None) -> "StoreConfig":
        """Load a Java ``.properties`` file, then apply ``-C key=value`` style overrides."""
        name = os.fspath(path)
        try:
            with open(name, "rb") as f:
                data = f.read(_MAX_PROPERTIES_CHARS + 1)
        except OSError as e:
            raise OptionError(f"cannot read store config {name}: {e.strerror or e}") from e
        if len(data) > _MAX_PROPERTIES_CHARS:
            raise OptionError(f"{name}: larger than {_MAX_PROPERTIES_CHARS} bytes; not a config file")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("latin-1")      # Properties.load(InputStream) is ISO-8859-1
        try:
            config = cls.from_mapping(parse_java_properties(text, file=name))
        except OptionError as e:
            raise OptionError(f"{name}: {e}") from None
        if overrides:
            try:
                config = config.with_overrides(overrides)
            except OptionError as e:
                raise OptionError(f"override: {e}") from None
        return config

    def with_overrides(self, overrides: Mapping[str, Any]) -> "StoreConfig":
        """A copy with RocketMQ keys replaced; unknown keys go to ``extra``."""
        changes: dict[str, Any] = {}
        extra = dict(self.extra)
        for key, raw in overrides.items():
            if not isinstance(key, str):
                raise OptionError(f"config keys are strings, got {key!r}")
            key = key.strip()
            spec = _KEYS.get(key)
            if spec is not None:
                changes[spec.attr] = spec.parse(key, raw)
            else:
                extra[key] = raw if isinstance(raw, str) else str(raw)
        return dataclasses.replace(self, extra=FrozenMap(extra), **changes)

    def to_properties(self) -> dict[str, str]:
        """Every setting as RocketMQ ``key -> string`` (modelled keys first, then ``extra``)."""
        out: dict[str, str] = {}
        for key, spec in _KEYS.items():
            value = getattr(self, spec.attr)
            if value is None:
                continue
            if isinstance(value, bool):
                out[key] = "true" if value else "false"
            elif isinstance(value, enum.Enum):
                out[key] = value.value
            elif isinstance(value, tuple):
                out[key] = format_message_delay_level(value)
            else:
                out[key] = str(value)
        out.update(self.extra)
        return out

    # ---------------------------------------------------------- derived values

    @property
    def engine_version_tuple(self) -> tuple[int, int, int]:
        return parse_engine_version(self.engine_version)

    @property
    def is_v5(self) -> bool:
        return self.engine_version_tuple[0] >= 5

    @property
    def trailing_property_separator(self) -> bool:
        """Whether the engine ends the properties string with 0x02 (spec §2.8).

        Yes up to 4.9.0, no for 4.9.1 ... 5.1.4, yes from 5.2.0.
        """
        v = self.engine_version_tuple
        return v <= (4, 9, 0) or v >= (5, 2, 0)

    @property
    def supports_message_version_v2(self) -> bool:
        """Magic v2 (2-byte topic length) exists since 5.1.0 (spec §2.2)."""
        return self.engine_version_tuple >= (5, 1, 0)

    @property
    def supports_append_prop_crc(self) -> bool:
        """The ``__CRC32#`` property exists since 5.2.0 (spec §2.12)."""
        return self.engine_version_tuple >= (5, 2, 0)

    @property
    def append_prop_crc(self) -> bool:
        """``enabledAppendPropCRC`` as the engine applies it (ignored before 5.2.0)."""
        return self.enabled_append_prop_crc and self.supports_append_prop_crc

    @property
    def index_file_size_bytes(self) -> int:
        """40-byte header + maxHashSlotNum x 4 + maxIndexNum x 20 (spec §5.1)."""
        return (INDEX_HEADER_SIZE + self.max_hash_slot_num * INDEX_HASH_SLOT_SIZE
                + self.max_index_num * INDEX_ENTRY_SIZE)

    @property
    def consume_queue_units_per_file(self) -> int:
        return self.mapped_file_size_consume_queue_bytes // CQ_STORE_UNIT_SIZE

    @property
    def max_delay_level(self) -> int:
        return len(self.message_delay_levels_ms)

    @property
    def message_delay_level(self) -> str:
        """``messageDelayLevel`` as RocketMQ writes it (``"1s 5s ... 2h"``)."""
        return format_message_delay_level(self.message_delay_levels_ms)

    def delay_level_ms(self, level: int) -> int:
        """Delay of ``DELAY=level``; levels above the maximum are clamped to it (spec §10.2)."""
        if isinstance(level, bool) or not isinstance(level, int) or level < 1:
            raise OptionError(f"delay level {level!r} must be an int >= 1")
        return self.message_delay_levels_ms[min(level, self.max_delay_level) - 1]

    @property
    def disk_max_used_space_ratio_effective_percent(self) -> int:
        """``getDiskMaxUsedSpaceRatio`` clamps to [10, 95]."""
        return min(95, max(10, self.disk_max_used_space_ratio_percent))

    def store_root(self, root: Optional[str | os.PathLike] = None) -> str:
        """``root`` if given, else ``storePathRootDir``, else RocketMQ's ``$HOME/store``."""
        if root is not None:
            return os.fspath(root)
        if self.store_path_root_dir:
            return self.store_path_root_dir
        return os.path.join(os.path.expanduser("~"), "store")

    def commit_log_dirs(self, root: Optional[str | os.PathLike] = None) -> tuple[str, ...]:
        """``storePathCommitLog`` split on ``,`` (spec §1.5), else ``{root}/commitlog``."""
        if self.store_path_commit_log:
            dirs = tuple(p.strip() for p in self.store_path_commit_log.split(",") if p.strip())
            if dirs:
                return dirs
        return (os.path.join(self.store_root(root), "commitlog"),)


# ------------------------------------------------------- .properties syntax

_PROP_WS = " \t\f"


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Java ``Properties.LineReader``: (line number, logical line) without comments/blanks."""
    natural = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    n = len(natural)
    while i < n:                       # each round consumes >= 1 natural line
        lineno = i + 1
        line = natural[i].lstrip(_PROP_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        for _ in range(n + 1):         # continuation lines
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 1:
                parts.append(line[:-1])
                if i >= n:
                    line = ""
                    break
                line = natural[i].lstrip(_PROP_WS)
                i += 1
            else:
                break
        parts.append(line)
        yield lineno, "".join(parts)


def _unescape(s: str, file: str, lineno: int) -> str:
    """``Properties.loadConvert``: ``\\uXXXX``, ``\\t \\n \\r \\f``, ``\\x`` -> ``x``."""
    if "\\" not in s:
        return s
    out = []
    i = 0
    n = len(s)
    while i < n:                       # each round consumes >= 1 char
        ch = s[i]
        i += 1
        if ch != "\\":
            out.append(ch)
            continue
        if i >= n:
            break                      # lone trailing backslash: dropped
        ch = s[i]
        i += 1
        if ch == "u":
            hex4 = s[i:i + 4]
            if not re.fullmatch(r"[0-9A-Fa-f]{4}", hex4):
                raise OptionError(f"{file}:{lineno}: malformed \\uxxxx escape")
            out.append(chr(int(hex4, 16)))
            i += 4
        else:
            out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(ch, ch))
    return "".join(out)


def parse_java_properties(text: str, *, file: str = "<properties>") -> dict[str, str]:
    """Java ``Properties.load`` semantics: ``#``/``!`` comments, ``key=value``,
    ``key: value``, ``key value``, backslash continuation and escapes; the last
    duplicate key wins.  Values keep trailing whitespace (typed parsers strip)."""
    result: dict[str, str] = {}
    for lineno, line in _logical_lines(text):
        n = len(line)
        key_len = 0
        value_start = n
        has_sep = False
        backslash = False
        while key_len < n:
            c = line[key_len]
            if c in "=:" and not backslash:
                value_start = key_len + 1
                has_sep = True
                break
            if c in _PROP_WS and not backslash:
                value_start = key_len + 1
                break
            backslash = (not backslash) if c == "\\" else False
            key_len += 1
        while value_start < n:
            c = line[value_start]
            if c not in _PROP_WS:
                if not has_sep and c in "=:":
                    has_sep = True
                else:
                    break
            value_start += 1
        key = _unescape(line[:key_len], file, lineno)
        value = _unescape(line[value_start:], file, lineno)
        result[key] = value
    return result


def parse_override_args(args: Iterable[str]) -> dict[str, str]:
    """``["mappedFileSizeCommitLog=262144", ...]`` (``-C`` arguments) -> mapping."""
    out: dict[str, str] = {}
    for arg in args:
        key, sep, value = str(arg).partition("=")
        if not sep or not key.strip():
            raise OptionError(f"config override {arg!r} is not of the form key=value")
        out[key.strip()] = value
    return out
