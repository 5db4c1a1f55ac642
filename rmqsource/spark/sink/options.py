"""The sink's options (the JVM twin: SinkOptions.java; the names are contract.json's sinkOptions and
sparkSinkOptions)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping, Optional

from ...errors import OptionError
from ...store.config import StoreConfig
from ...store.file_sizes import fit_config_to_files, given_keys
from ...store.queue_select import DEFAULT_QUEUE_NUMS, read_topic_queue_nums
from ..options import SQL_TABLE_HINT, store_path

DEFAULT_LOCK_TIMEOUT_S = 120.0

SINK_OPTIONS = {
    "path": "path",
    "config": "config",
    "queuenums": "queueNums",
    "locktimeout": "lockTimeout",
    "checkpointlocation": "checkpointLocation",
    "writeid": "writeId",
    "preservestorefields": "preserveStoreFields",
}
# Options Spark's own writers put among a sink's options (DataStreamWriter.queryName travels as option
# "queryName" in every Spark from 3.5 on, classic and Connect): accepted and ignored, so that the check
# above still refuses typos.  contract.json's sparkSinkOptions, which the JVM sink reads.
SPARK_SINK_OPTIONS = {
    "queryname": "queryName",
}
MAX_WRITE_ID_CHARS = 200


@dataclass(frozen=True)
class SinkOptions:
    root: str
    config: StoreConfig
    queue_nums: Optional[int] = None                  # None: topics.json, else DEFAULT_QUEUE_NUMS
    topic_queue_nums: Mapping[str, int] = field(default_factory=dict)
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S
    write_id: Optional[str] = None                    # batch sink: names the write across jobs (re-runs)
    preserve_store_fields: bool = False               # store fields as given, no stamps (golden replays)

    def queues_of(self, topic: str) -> int:
        if self.queue_nums is not None:
            return self.queue_nums
        return self.topic_queue_nums.get(topic, DEFAULT_QUEUE_NUMS)


def _duration_s(name: str, value: str) -> float:
    from ..stream_options import parse_duration_ms
    return parse_duration_ms(name, value) / 1000.0


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    from ..options import _STORE_KEYS
    opts = {str(k).lower(): ("" if v is None else str(v)) for k, v in dict(options).items()}
    overrides = {}
    for key, value in opts.items():
        if key in SINK_OPTIONS or key in SPARK_SINK_OPTIONS:
            continue
        if key in _STORE_KEYS:
            overrides[_STORE_KEYS[key]] = value
            continue
        raise OptionError(f"unknown option {key!r} for the rmq sink; options are: "
                          f"{', '.join(sorted(SINK_OPTIONS.values()))}, plus RocketMQ MessageStoreConfig keys")
    root = opts.get("path", "").strip()
    if not root:
        raise OptionError("no store path: use df.write.format('rmq').mode('append').save('/path/to/store')"
                          + SQL_TABLE_HINT)
    if "," in root:
        raise OptionError(f"the rmq sink writes one store; got {root!r}")
    root = store_path(root, write=True)      # plain path or file:// URI
    if opts.get("config"):
        if not os.path.isfile(opts["config"]):
            raise OptionError(f"option config: {opts['config']} is not a file")
        config = StoreConfig.from_properties_file(opts["config"], overrides or None)
    else:
        config = StoreConfig().with_overrides(overrides)
    # An existing store's segment sizes unless given (a given size that differs from the files fails).
    config = fit_config_to_files(config, root, given_keys(opts.get("config"), overrides))
    queue_nums = None
    if opts.get("queuenums"):
        try:
            queue_nums = int(opts["queuenums"])
        except ValueError:
            raise OptionError(f"option queueNums must be a positive integer, got {opts['queuenums']!r}") from None
        if not 1 <= queue_nums <= 65535:
            raise OptionError(f"option queueNums must be in [1, 65535], got {queue_nums}")
    lock_timeout = DEFAULT_LOCK_TIMEOUT_S
    if opts.get("locktimeout"):
        lock_timeout = _duration_s("lockTimeout", opts["locktimeout"])
    if os.path.exists(root) and not os.path.isdir(root):
        raise OptionError(f"store path {root} exists and is not a directory")
    write_id = opts.get("writeid") or None
    if write_id is not None and (len(write_id) > MAX_WRITE_ID_CHARS or not write_id.isprintable()):
        raise OptionError(f"option writeId must be at most {MAX_WRITE_ID_CHARS} printable characters, "
                          f"got {write_id[:80]!r}")
    preserve = opts.get("preservestorefields", "").strip().lower()
    if preserve not in ("", "true", "false"):
        raise OptionError(f"option preserveStoreFields must be true or false, got {opts['preservestorefields']!r}")
    return SinkOptions(root=root, config=config, queue_nums=queue_nums,
                       topic_queue_nums=read_topic_queue_nums(root), lock_timeout_s=lock_timeout,
                       write_id=write_id, preserve_store_fields=preserve == "true")
