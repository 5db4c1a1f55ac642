"""Child process for crash tests: appends the workload and reports each acknowledged batch.

usage: writer_child.py STORE SEED COUNT BATCH FLUSH_TYPE SEGMENT_BYTES [SLEEP_S]
After every put_messages call it prints the number of messages acknowledged
PUT_OK so far (in order), then flushes stdout: the parent knows exactly what
was acknowledged when it kills this process.
"""

import sys
import time

from rmqsource.store.config import StoreConfig
from rmqsource.store.writer import MessageStoreWriter

from workload import make_message


def main() -> None:
    store, seed, count, batch, flush_type, segment_bytes = sys.argv[1:7]
    pause_s = float(sys.argv[7]) if len(sys.argv) > 7 else 0.0
    seed, count, batch, segment_bytes = int(seed), int(count), int(batch), int(segment_bytes)
    config = StoreConfig.from_mapping({"flushDiskType": flush_type, "mappedFileSizeCommitLog": segment_bytes,
                                       "mappedFileSizeConsumeQueue": 6000, "maxHashSlotNum": 4096,
                                       "maxIndexNum": 16384})
    acked = 0
    with MessageStoreWriter(store, config, lock_timeout_s=5) as writer:
        for start in range(0, count, batch):
            msgs = [make_message(seed, i) for i in range(start, min(count, start + batch))]
            results = writer.put_messages(msgs)
            for r in results:
                if not r.ok:
                    print(f"FAILED {r.status}", flush=True)
                    return
            acked += len(results)
            print(acked, flush=True)
            if pause_s:
                time.sleep(pause_s)
    print("CLOSED", flush=True)


if __name__ == "__main__":
    main()
