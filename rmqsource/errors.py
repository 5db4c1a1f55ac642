"""One error hierarchy for the whole package.

Every error that comes from bytes on disk names the file and the byte offset
inside it, and says what was expected and what was found, so a user can open
the file at that offset and see the problem.
"""

from __future__ import annotations

import os
from typing import Optional


# Messages longer than this are cut: an error quoting bytes from a hostile file or input must stay readable.
MAX_MESSAGE_CHARS = 2000


def bounded_message(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit - 200]} ... [{len(text) - limit + 160} characters cut] ... {text[-120:]}"


class RmqError(Exception):
    """Base class of every error raised on purpose by rmqsource."""

    def __init__(self, *args):
        super().__init__(*(bounded_message(a) if isinstance(a, str) else a for a in args))


class FormatError(RmqError):
    """Bytes on disk do not follow the RocketMQ store format.

    ``file`` is the path of the file (or a short description when the bytes did
    not come from a file) and ``offset`` the byte position inside that file.
    """

    def __init__(self, message: str, *, file: Optional[str | os.PathLike] = None,
                 offset: Optional[int] = None):
        self.file = os.fspath(file) if file is not None else None
        self.offset = offset
        self.reason = message = bounded_message(message)
        where = []
        if self.file is not None:
            where.append(str(self.file))
        if offset is not None:
            where.append(f"offset {offset}")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)

    def __reduce__(self):  # picklable across Spark workers
        return (_rebuild_format_error, (type(self), self.reason, self.file, self.offset))


def _rebuild_format_error(cls, reason, file, offset):
    return cls(reason, file=file, offset=offset)


class CorruptRecordError(FormatError):
    """A CommitLog record, ConsumeQueue unit or IndexFile entry is damaged."""


class UnsupportedLayoutError(FormatError):
    """The directory holds a store layout rmqsource does not read (RocksDB CQ, DLedger, ...)."""


class DecompressionError(FormatError):
    """A compressed body could not be inflated, or would inflate past the size cap."""


class BodyDecodeError(RmqError):
    """A message body could not be decoded as the read's ``bodyFormat`` asks (docs/bodies.md), under
    ``onBadRecord=fail``. Names the message (topic, queue, queue offset, CommitLog offset) and the reason."""

    def __init__(self, reason: str, *, body_format: str, topic: str, queue_id: int, queue_offset: int,
                 commit_log_offset: int):
        self.reason = bounded_message(reason)
        self.body_format = body_format
        self.topic, self.queue_id, self.queue_offset = topic, queue_id, queue_offset
        self.commit_log_offset = commit_log_offset
        super().__init__(body_decode_message(self.reason, body_format, topic, queue_id, queue_offset,
                                             commit_log_offset))

    def __reduce__(self):  # picklable across Spark workers
        return (_rebuild_body_decode_error, (self.reason, self.body_format, self.topic, self.queue_id,
                                             self.queue_offset, self.commit_log_offset))


def body_decode_message(reason, body_format, topic, queue_id, queue_offset, commit_log_offset) -> str:
    """The text of a BodyDecodeError (the JVM's BodyDecodeError says the same)."""
    return (f"cannot decode the body of the message at {topic} queue {queue_id} offset {queue_offset} "
            f"(commitLogOffset {commit_log_offset}) as {body_format}: {reason}")


def _rebuild_body_decode_error(reason, body_format, topic, queue_id, queue_offset, commit_log_offset):
    return BodyDecodeError(reason, body_format=body_format, topic=topic, queue_id=queue_id,
                           queue_offset=queue_offset, commit_log_offset=commit_log_offset)


class StoreError(RmqError):
    """The store as a whole cannot be used as asked (not a store, locked, shut down ...)."""


class NotAStoreError(StoreError):
    """The path is not a RocketMQ store root."""


class StoreLockedError(StoreError):
    """Another process holds the store's writer lock."""


class DataLossError(StoreError):
    """Requested offsets point at data that retention (or damage) removed."""


class OptionError(RmqError, ValueError):
    """A user-supplied option or argument is malformed or names something that does not exist."""


class UnsupportedMessageError(OptionError):
    """A message the writer cannot store the way a broker would (a timer message): refused before anything
    of its batch is written."""
