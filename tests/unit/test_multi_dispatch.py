"""The copies a record's multi-dispatch writes (INNER_MULTI_DISPATCH / INNER_MULTI_QUEUE_OFFSET), as the readers'
tail dispatch and verify find them: Python (rocksdb_tail.multi_dispatch_copies) and its JVM twin
(RocksDbTail.multiDispatchCopies) give the same copies, offsets parsed as the broker's ``Long.parseLong``."""

from __future__ import annotations

import pytest

from rmqsource.store.rocksdb_tail import multi_dispatch_copies

pytestmark = pytest.mark.unit

CASES = [
    ("%LMQ%a,%LMQ%b", "3,4", 2, [("%LMQ%a", 0, 3), ("%LMQ%b", 0, 4)]),
    ("%LMQ%a,plain", "+3,-1", 5, [("%LMQ%a", 0, 3), ("plain", 5, -1)]),
    ("%LMQ%a,%LMQ%b", "3", 1, []),                                  # counts differ: the broker skips the record
    ("%LMQ%a,%LMQ%b,%LMQ%c,%LMQ%d", "1_0, 5,x,9223372036854775808", 1, []),   # not a Java long: each skipped
    ("%LMQ%a,%LMQ%b", "9223372036854775807,-9223372036854775808", 1,
     [("%LMQ%a", 0, 9223372036854775807), ("%LMQ%b", 0, -9223372036854775808)]),
    ("%LMQ%a,,%LMQ%c", "1,2,", 1, [("%LMQ%a", 0, 1), ("", 1, 2)]),
    ("", "1", 1, []),
    (None, "1", 1, []),
]


@pytest.fixture(params=["python", pytest.param("jvm", marks=pytest.mark.spark)])
def copies_impl(request):
    if request.param == "python":
        return multi_dispatch_copies
    from jvm_twins import jvm_or_skip
    jvm = jvm_or_skip(request)
    tail = jvm.io.rmqsource.store.RocksDbTail

    def jvm_copies(names, offsets, queue_id):
        return [(c[0], int(c[1]), int(c[2])) for c in tail.multiDispatchCopies(names, offsets, queue_id)]
    return jvm_copies


@pytest.mark.parametrize("names, offsets, queue_id, expected", CASES)
def test_copies_of_a_record(copies_impl, names, offsets, queue_id, expected):
    assert copies_impl(names, offsets, queue_id) == expected
