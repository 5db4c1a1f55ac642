"""Reading a store back in tests, through the Python reader only (no Spark, no sink module), so test files
that run where the Python data source does not exist (pyspark 3.5, the jar alone) can share it."""

from __future__ import annotations

from rmqsource.store.reader import MessageStoreReader


def all_messages(root, topic):
    """Every record of ``topic`` in ``root``, queue by queue, in queue-offset order."""
    with MessageStoreReader(root) as rd:
        out = []
        for t, q in rd.queue_keys():
            if t != topic:
                continue
            for res in rd.get_loop("check", t, q, 0, 32):
                out.extend(m.record for m in res.messages)
        return out
