"""A store whose topics hold JSON, Avro and text bodies, good and bad, for the typed-body tests (docs/bodies.md).

Every message carries a property ``bad`` (``1`` when its body is one a decoder must refuse, else ``0``), so a
test knows which rows are bad records from how the store was written, not from either decoder.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from pathlib import Path

from rmqsource.format.message import MessageExtBrokerInner
from rmqsource.store.config import StoreConfig
from rmqsource.store.writer import MessageStoreWriter

JSON_TOPIC = "JsonOrders"
JSON_OTHER_TOPIC = "JsonRefunds"       # a second JSON schema, for bodySchemaByTopic
AVRO_TOPIC = "AvroOrders"
AVRO_CONFLUENT_TOPIC = "AvroConfluent"
TEXT_TOPIC = "TextNotes"

JSON_DDL = ("id BIGINT, amount DOUBLE, price DECIMAL(10,2), event STRING, paid BOOLEAN, qty INT, "
            "at TIMESTAMP, day DATE, labels ARRAY<STRING>, buyer STRUCT<name: STRING, level: INT>, "
            "attrs MAP<STRING, STRING>, note STRING")
REFUND_DDL = "id BIGINT, reason STRING, refunded DOUBLE"

AVRO_SCHEMA = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "event", "type": "string"},
        {"name": "paid", "type": "boolean"},
        {"name": "qty", "type": "int"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {"name": "lines", "type": {"type": "array", "items": {
            "type": "record", "name": "Line", "fields": [{"name": "sku", "type": "string"},
                                                       {"name": "n", "type": "int"}]}}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "raw", "type": "bytes"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "choice", "type": ["null", "int", "string"], "default": None},
    ],
}

BASE_MS = 1_764_000_000_000


def json_bodies() -> list[tuple[bytes, bool]]:
    """(body, bad) pairs: every column type, nulls, missing and unknown fields, coercions, then bad ones."""
    good = []
    for i in range(40):
        d = {"id": i, "amount": i * 1.25, "price": round(i * 3.1, 2), "event": ["pay", "ship", "refund"][i % 3],
             "paid": i % 2 == 0, "qty": i % 7, "at": f"2026-11-{1 + i % 28:02d}T10:{i % 60:02d}:00Z",
             "day": f"2026-10-{1 + i % 28:02d}", "labels": [f"t{i % 4}", "x"], "buyer": {"name": f"u{i}", "level": i % 3},
             "attrs": {"k": str(i)}, "note": None if i % 5 == 0 else f"n{i}", "unknown": [1, 2]}
        if i % 6 == 1:
            del d["price"], d["buyer"]                   # missing fields: null
        if i % 9 == 2:
            d["note"] = 12.5 if i % 2 else {"a": [1, True]}  # a string column takes any value as its JSON text
        if i % 8 == 3:
            d["amount"] = i                          # an integral number in a double column
        good.append((json.dumps(d).encode(), False))
    good.append((b'{"id": 100, "amount": "NaN", "event": "\\u00e9v\\u00e9nement \xe2\x9c\x93"}', False))
    good.append((b'  {"id": 101}  ', False))
    bad = [b'{"id": 1, "amount": ', b'not json', b'[{"id": 1}]', b'{"id": "seven"}',
           b'{"id": 99999999999999999999999}', b'{"qty": 3000000000}', b'{"paid": "yes"}', b'\xff\xfe{"id": 1}']
    return good + [(b, True) for b in bad]


def refund_bodies() -> list[tuple[bytes, bool]]:
    return [(json.dumps({"id": 1000 + i, "reason": f"r{i}", "refunded": i / 4}).encode(), False) for i in range(10)]


def avro_records() -> list[dict]:
    return [{"id": i, "amount": i / 8, "event": f"e{i}", "paid": i % 2 == 1, "qty": i,
             "note": None if i % 3 == 0 else f"note {i}", "status": ["NEW", "PAID", "SHIPPED"][i % 3],
             "lines": [{"sku": f"s{j}", "n": j} for j in range(i % 3)], "attrs": {"a": i, "b": -i},
             "raw": bytes([i % 256, 0, 255]), "at": BASE_MS + i * 1000, "day": 20_000 + i,
             "choice": [None, i, f"c{i}"][i % 3]} for i in range(30)]


def avro_datum(record: dict) -> bytes:
    import fastavro
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(AVRO_SCHEMA), record)
    return out.getvalue()


def avro_bodies() -> list[tuple[bytes, bool]]:
    good = [(avro_datum(r), False) for r in avro_records()]
    whole = good[5][0]
    bad = [whole[:3], b"", b"\x02\x04\x06"]            # ends early: a truncated datum, an empty one, a stub
    return good + [(b, True) for b in bad]


def confluent_bodies() -> list[tuple[bytes, bool]]:
    good = [(b"\x00" + struct.pack(">i", 7) + avro_datum(r), False) for r in avro_records()[:10]]
    bad = [avro_datum(avro_records()[0]), b"\x01\x00\x00\x00\x07" + avro_datum(avro_records()[1]), b"\x00\x00"]
    return good + [(b, True) for b in bad]


def text_bodies() -> list[tuple[bytes, bool]]:
    good = [(f"note {i}: caf\u00e9 \u2713".encode(), False) for i in range(10)] + [(b"", False)]
    return good + [(b"\xc3\x28 broken", True), (b"\xff", True)]


def topics_and_bodies() -> dict[str, list[tuple[bytes, bool]]]:
    return {JSON_TOPIC: json_bodies(), JSON_OTHER_TOPIC: refund_bodies(), AVRO_TOPIC: avro_bodies(),
            AVRO_CONFLUENT_TOPIC: confluent_bodies(), TEXT_TOPIC: text_bodies()}


def write_body_store(root: Path, *, compressed_json: bool = True) -> dict[str, list[tuple[bytes, bool]]]:
    """Writes the store (2 queues a topic); one JSON body is stored zlib-compressed (sysFlag bit 0), as the
    client sends large bodies. Returns the bodies by topic."""
    bodies = topics_and_bodies()
    messages = []
    for topic, pairs in bodies.items():
        for i, (body, bad) in enumerate(pairs):
            compress = compressed_json and topic == JSON_TOPIC and i == 4
            messages.append(MessageExtBrokerInner(
                topic=topic, queue_id=i % 2, body=zlib.compress(body) if compress else body,
                sys_flag=1 if compress else 0, keys=f"k{i}", tags="t",
                properties={"bad": "1" if bad else "0", "i": str(i)},
                born_timestamp_ms=BASE_MS + i, store_timestamp_ms=BASE_MS + 10 + i))
    config = StoreConfig.from_mapping({"mappedFileSizeCommitLog": 1024 * 1024})
    with MessageStoreWriter(root, config) as writer:
        results = writer.put_messages(messages)
        assert all(r.ok for r in results), next(r for r in results if not r.ok)
    return bodies
