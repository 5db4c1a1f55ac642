"""Options of a stream read, ``spark.readStream.format("rmq")`` (the JVM twin: RmqStreamOptions.java;
the names are contract.json's streamOptions; see :mod:`rmqsource.spark.stream` for what they do)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Optional

from ..errors import OptionError
from .options import (EARLIEST, LATEST, STREAM, STREAM_OPTIONS, ReadOptions, apply_kafka_names, parse_bool,
                      parse_int, parse_offsets, parse_options)

GROUP = "group"
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000

# Options handled here (STREAM_OPTIONS); everything else goes to the batch option parser.
_BATCH_ONLY = ("endingoffsets", "endingtimestamp")


@dataclass(frozen=True)
class StreamOptions:
    read: ReadOptions
    starting: object = LATEST                 # "latest" | "earliest" | "group" | {topic: {qid: off}}
    starting_fallback: Optional[str] = None   # earliest | latest | none; None: fail if the group has no commit
    starting_timestamp: Optional[int] = None
    max_messages: Optional[int] = None
    max_bytes: Optional[int] = None
    min_messages: Optional[int] = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    sub_tags: Optional[frozenset] = None      # None = "*"
    sub_expression: str = "*"
    consumer_group: Optional[str] = None
    commit_offsets: bool = True               # with consumer_group: commit each batch's end (False: only read)
    report_latest: bool = True

    @property
    def commits(self) -> bool:
        """True when batches' ends are committed under consumerGroup."""
        return bool(self.consumer_group) and self.commit_offsets

    @property
    def root(self) -> str:
        return self.read.paths[0]

    @property
    def broker(self) -> str:
        return self.read.brokers[0]


def parse_duration_ms(name: str, value: str) -> int:
    """``500ms``, ``10s``, ``2m``, ``1h``, ``1d`` or a plain number of milliseconds."""
    text = str(value).strip().lower()
    m = re.fullmatch(r"([0-9]{1,15})\s*(ms|s|m|min|h|d)?", text)
    if not m:
        raise OptionError(f"option {name} must be a duration like 500ms, 10s, 2m, 1h (or milliseconds), "
                          f"got {value!r}")
    unit = {"ms": 1, None: 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}[m.group(2)]
    return int(m.group(1)) * unit


def parse_sub_expression(text: str) -> Optional[frozenset]:
    """RocketMQ ``FilterAPI.buildSubscriptionData``: ``*`` or empty = all, else tags split on ``||``."""
    expr = (text or "").strip()
    if not expr or expr == "*":
        return None
    tags = frozenset(t.strip() for t in expr.split("||") if t.strip())
    if not tags:
        raise OptionError(f"option subExpression {text!r} names no tag; use e.g. 'TagA || TagB' or '*'")
    return tags


def _positive_int(name: str, value: str) -> int:
    return parse_int(name, value, 1)


def parse_stream_options(options: Mapping[str, str]) -> StreamOptions:
    opts = {str(k).lower(): ("" if v is None else str(v)) for k, v in dict(options).items()}
    opts = apply_kafka_names(opts, STREAM)
    for key in _BATCH_ONLY:
        if key in opts:
            raise OptionError(f"option {key} is for batch reads; a stream has no end")
    ours = {k: opts.pop(k) for k in list(opts) if k in STREAM_OPTIONS}
    read = parse_options(opts, mode=STREAM)
    if len(read.paths) != 1:
        raise OptionError(f"a stream reads one store; got {len(read.paths)} paths ({', '.join(read.paths)})")
    if not read.topic_mode:
        raise OptionError("a stream needs one of the options topics, topicPattern or queues")
    kw: dict = {}
    if "startingoffsets" in ours:
        text = ours["startingoffsets"].strip()
        low = text.lower()
        kw["starting"] = low if low in (EARLIEST, LATEST, GROUP) else parse_offsets("startingOffsets", text)
    if "startingoffsetsfallback" in ours:
        fb = ours["startingoffsetsfallback"].strip().lower()
        if fb not in (EARLIEST, LATEST, "none"):
            raise OptionError(f"option startingOffsetsFallback must be earliest, latest or none, got {fb!r}")
        kw["starting_fallback"] = fb
    if "startingtimestamp" in ours:
        if "startingoffsets" in ours:
            raise OptionError("use either startingOffsets or startingTimestamp, not both")
        if read.starting_by_timestamp is not None:
            raise OptionError("use either startingOffsetsByTimestamp or startingTimestamp, not both")
        try:
            ts = int(ours["startingtimestamp"].strip())
        except ValueError:
            raise OptionError(f"option startingTimestamp must be epoch milliseconds, "
                              f"got {ours['startingtimestamp']!r}") from None
        if ts < 0:
            raise OptionError(f"option startingTimestamp must be >= 0, got {ts}")
        kw["starting_timestamp"] = ts
    if "maxmessagespertrigger" in ours:
        kw["max_messages"] = _positive_int("maxMessagesPerTrigger", ours["maxmessagespertrigger"])
    if "maxbytespertrigger" in ours:
        kw["max_bytes"] = _positive_int("maxBytesPerTrigger", ours["maxbytespertrigger"])
    if "minmessagespertrigger" in ours:
        kw["min_messages"] = _positive_int("minMessagesPerTrigger", ours["minmessagespertrigger"])
    if "maxtriggerdelay" in ours:
        if "minmessagespertrigger" not in ours:
            raise OptionError("option maxTriggerDelay needs minMessagesPerTrigger")
        kw["max_trigger_delay_ms"] = parse_duration_ms("maxTriggerDelay", ours["maxtriggerdelay"])
    if kw.get("min_messages") and kw.get("max_messages") and kw["min_messages"] > kw["max_messages"]:
        raise OptionError(f"minMessagesPerTrigger ({kw['min_messages']}) is larger than maxMessagesPerTrigger "
                          f"({kw['max_messages']})")
    if "subexpression" in ours:
        kw["sub_tags"] = parse_sub_expression(ours["subexpression"])
        kw["sub_expression"] = ours["subexpression"].strip() or "*"
    if "consumergroup" in ours:
        group = ours["consumergroup"].strip()
        if not group or "@" in group:
            raise OptionError(f"option consumerGroup must be a non-empty name without '@', got {group!r}")
        kw["consumer_group"] = group
    if "commitoffsets" in ours:
        kw["commit_offsets"] = parse_bool("commitOffsets", ours["commitoffsets"])
    if kw.get("starting") == GROUP and not kw.get("consumer_group"):
        raise OptionError("startingOffsets=group needs the option consumerGroup")
    if "reportlatestoffset" in ours:
        kw["report_latest"] = parse_bool("reportLatestOffset", ours["reportlatestoffset"])
    return StreamOptions(read=read, **kw)
