"""A store's ConsumeQueues whatever keeps them: queue files, or the broker's RocksDB database continued by the
CommitLog's tail (:mod:`rmqsource.store.rocksdb_queue`).  Above the layout (which only knows paths), so
the planner, streams and lag open queues without knowing which kind they got; the reader keeps its own
RocksDB view (:class:`~rmqsource.store.reader.MessageStoreReader`).  Twin: StoreLayout.listQueues and
StoreLayout.rocksDbQueueStore in StoreLayout.java.
"""

from __future__ import annotations

from typing import Optional

from .layout import StoreLayout


def list_queues(layout: StoreLayout) -> list[tuple[str, int]]:
    """(topic, queueId) of every queue of the store, sorted."""
    if layout.rocksdb_queues:
        from .rocksdb_queue import RocksDbQueueStore
        return RocksDbQueueStore(layout).list_queues()
    return layout.list_queues()


def open_queue(layout: StoreLayout, topic: str, queue_id: int, file_size: Optional[int] = None):
    """The queue's units (a ConsumeQueueBase) from its files or the RocksDB database; None when it has none.

    For file queues the queue is opened even when its folder is missing (no segments: an empty queue).
    """
    if layout.rocksdb_queues:
        from .rocksdb_queue import RocksDbQueueStore
        return RocksDbQueueStore(layout).queue(topic, queue_id)
    from .consumequeue import ConsumeQueue
    return ConsumeQueue(layout.queue_dir(topic, queue_id), topic, int(queue_id), file_size)
