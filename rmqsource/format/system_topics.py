"""RocketMQ's own topics: what a whole-store read leaves out unless ``excludeInternalTopics=false``
(the JVM twin: SystemTopics.java).

A broker writes its own records into the CommitLog beside the users': delay and timer parking
(``SCHEDULE_TOPIC_XXXX``, ``rmq_sys_wheel_timer``), transaction halves and op records, the POP revive
log (``rmq_sys_REVIVE_LOG_<cluster>``), message traces, and copies for consumer groups in retry
(``%RETRY%<group>``) and dead-letter (``%DLQ%<group>``) topics.

The names are RocketMQ's: the system topics of ``TopicValidator`` (common/.../topic/TopicValidator.java,
``SYSTEM_TOPIC_SET`` and ``SYSTEM_TOPIC_PREFIX``; ``SCHEDULE_TOPIC_XXXX_V2`` is in 4.9.x's set,
``CHECKPOINT_TOPIC`` in 5.x's, both kept) and the group topic prefixes of ``MixAll``
(``RETRY_GROUP_TOPIC_PREFIX``, ``DLQ_GROUP_TOPIC_PREFIX``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..names import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

# TopicValidator.SYSTEM_TOPIC_SET, in its order (union of the 4.9 and 5.x sets).
SYSTEM_TOPICS = (
    "TBW102",                       # AUTO_CREATE_TOPIC_KEY_TOPIC
    "SCHEDULE_TOPIC_XXXX",          # RMQ_SYS_SCHEDULE_TOPIC: delay-level parking
    "BenchmarkTest",                # RMQ_SYS_BENCHMARK_TOPIC
    "RMQ_SYS_TRANS_HALF_TOPIC",     # transaction halves
    "RMQ_SYS_TRACE_TOPIC",          # message traces
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",  # transaction op records
    "TRANS_CHECK_MAX_TIME_TOPIC",   # halves checked too often
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
    "CHECKPOINT_TOPIC",             # RMQ_SYS_ROCKSDB_OFFSET_TOPIC (5.x)
    "SCHEDULE_TOPIC_XXXX_V2",       # RMQ_SYS_SCHEDULE_TOPIC_V2 (4.9.x)
)
# TopicValidator.SYSTEM_TOPIC_PREFIX: every topic starting with it is a system topic.
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
# Topic names that start with one of these are RocketMQ's own.
INTERNAL_TOPIC_PREFIXES = (SYSTEM_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)

_SYSTEM_TOPIC_SET = frozenset(SYSTEM_TOPICS)


def is_internal_topic(topic: str) -> bool:
    """A topic RocketMQ writes for itself: a TopicValidator system topic, a retry or a dead-letter topic."""
    return topic in _SYSTEM_TOPIC_SET or topic.startswith(INTERNAL_TOPIC_PREFIXES)


def internal_topic_mask(topics: pa.Array) -> np.ndarray:
    """``is_internal_topic`` of each value of a string array (null: False), vectorized.

    The predicate runs once per distinct topic (a dictionary encoding), so a batch of a whole-store read
    costs one hash pass over its topics.
    """
    if len(topics) == 0:
        return np.zeros(0, dtype=bool)
    enc = topics if pa.types.is_dictionary(topics.type) else pc.dictionary_encode(topics)
    per_value = np.fromiter((is_internal_topic(t) for t in enc.dictionary.to_pylist()), dtype=bool,
                            count=len(enc.dictionary))
    if not per_value.any():
        return np.zeros(len(topics), dtype=bool)
    idx = enc.indices
    valid = np.asarray(idx.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    codes = np.asarray(idx.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    return per_value[codes] & valid
