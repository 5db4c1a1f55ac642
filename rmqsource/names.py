"""Topic, group and queue-id validation, safe paths under the store root, and store URIs.

Topic names follow RocketMQ's TopicValidator: characters ``[%|a-zA-Z0-9_-]``,
at most 127 bytes (255 for ``%RETRY%`` topics on 5.x).  Because topics become
directory names, a topic that passes here can never escape the store root.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from pathlib import Path

from . import limits
from .errors import OptionError

_TOPIC_CHARS = re.compile(r"^[%|a-zA-Z0-9_-]+$")
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"


def topic_problem(topic: str, *, allow_long_retry: bool = False) -> str | None:
    """Why ``topic`` is not a valid topic name, or None when it is."""
    if not isinstance(topic, str) or not topic:
        return "topic is empty"
    if not _TOPIC_CHARS.match(topic):
        return f"topic {topic!r} has characters outside [%|a-zA-Z0-9_-]"
    size = len(topic.encode("utf-8"))
    limit = limits.TOPIC_MAX_BYTES_V1
    if allow_long_retry and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        limit = limits.TOPIC_MAX_BYTES_V2
    if size > limit:
        return f"topic is {size} bytes, more than {limit}"
    return None


def validate_topic(topic: str, *, allow_long_retry: bool = False) -> str:
    problem = topic_problem(topic, allow_long_retry=allow_long_retry)
    if problem:
        raise OptionError(problem)
    return topic


def is_safe_dir_name(name: str) -> bool:
    """A directory entry we may treat as a topic or queue directory (no traversal)."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name and "\0" not in name


def safe_join(root: str | os.PathLike, *parts: str) -> Path:
    """Join ``parts`` under ``root`` and refuse any result outside it.

    The result keeps ``root`` as given (symlinks in it unresolved), so paths name files relative
    to the root the caller chose; only the containment check resolves.
    """
    base = Path(root).resolve()
    for part in parts:
        if not is_safe_dir_name(str(part)):
            raise OptionError(f"unsafe path component {part!r}")
    path = Path(root).joinpath(*parts)
    resolved = path.resolve()
    if resolved != base and base not in resolved.parents:
        raise OptionError(f"path {path} escapes the store root {base}")
    return path


def validate_queue_id(queue_id) -> int:
    try:
        value = int(queue_id)
    except (TypeError, ValueError) as exc:
        raise OptionError(f"queueId must be an integer, got {queue_id!r}") from exc
    if value < 0 or value > 0x7FFFFFFF:
        raise OptionError(f"queueId {value} out of range")
    return value


_URI_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")   # two characters at least: C:\ is a path


def local_file_path(text: str, name: str) -> str:
    """A file named by an option: a plain path or a ``file:`` URI on this machine (a URI naming another host is
    refused, naming ``name``), ``~`` expanded."""
    p = str(text).strip()
    if re.match(r"^file:", p, re.IGNORECASE):
        u = urllib.parse.urlparse(p)
        if u.netloc not in ("", "localhost"):
            raise OptionError(f"{name} {p!r} names host {u.netloc!r}; file URIs must be file:///path")
        p = urllib.parse.unquote(u.path)
    return os.path.expanduser(p)


def remote_scheme(path) -> str | None:
    """The scheme of a store URI that is not on a local file system (``s3a``, ``hdfs``, ``abfss``,
    ``gs``, ``dbfs`` ...), lower-cased; None for plain paths and ``file:`` URIs."""
    m = _URI_SCHEME.match(str(path).strip())
    if not m or m.group(1).lower() == "file":
        return None
    return m.group(1).lower()
