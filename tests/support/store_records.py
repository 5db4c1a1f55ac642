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


def write_lagging_index_store(root, indexed: int = 3000, tail: int = 600) -> tuple[int, int]:
    """A sample store whose IndexFiles end before its CommitLog, as on a live broker or one that crashed
    before its index caught up: ``indexed`` messages written with the IndexFile dispatch, then ``tail``
    more (another seed: other UNIQ_KEYs and keys) with it off.  Returns (endPhyOffset of the IndexFile,
    CommitLog max offset)."""
    from rmqsource.sample import write_sample_store
    from rmqsource.store.config import StoreConfig
    from rmqsource.store.index_service import open_index_service_for_read

    size = {"mappedFileSizeCommitLog": 1024 * 1024}
    write_sample_store(root, indexed, config=StoreConfig.from_mapping(size))
    end = write_sample_store(root, tail, seed=43,
                             config=StoreConfig.from_mapping({**size, "messageIndexEnable": "false"}))
    c = StoreConfig.from_mapping(size)
    index = open_index_service_for_read(f"{root}/index", c.max_hash_slot_num, c.max_index_num)
    try:
        covered = index.last_file.header.end_phy_offset
    finally:
        index.close()
    assert covered < end
    return covered, end
