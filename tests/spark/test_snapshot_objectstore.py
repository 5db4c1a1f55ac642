"""``rmq snapshot`` into an S3 bucket: s3proxy (a real S3 API server, tests/support/objectstore.py) through
``pyarrow.fs.S3FileSystem`` with the endpoint given as ``-O`` options.  The objects, fetched back, are a
snapshot that verifies and reads equal to its source, first and after an incremental run; every file is one
whole upload.  Marker ``objectstore``: run by scripts/test_objectstore.sh (boto3 is installed there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmqsource.store.config import StoreConfig
from rmqsource.store.snapshot import snapshot_store
from rmqsource.store.writer import MessageStoreWriter

from snapshot_checks import assert_snapshot_matches
from workload import make_message

pytestmark = pytest.mark.objectstore

SMALL = {"mappedFileSizeCommitLog": 64 * 1024, "mappedFileSizeConsumeQueue": 6000, "maxHashSlotNum": 512,
         "maxIndexNum": 2048}


@pytest.fixture(scope="module")
def s3():
    try:
        import boto3  # noqa: F401
    except ImportError as e:       # a failure, not a skip: the tier would pass without writing a byte
        pytest.fail(f"{e.name} is missing: scripts/test_objectstore.sh installs boto3")
    from objectstore import S3Server
    server = S3Server()
    try:
        yield server
    finally:
        server.stop()


def options(server) -> dict[str, str]:
    from objectstore import ACCESS_KEY, REGION, SECRET_KEY
    host = server.endpoint.split("://", 1)[1]
    return {"endpoint_override": host, "scheme": "http", "access_key": ACCESS_KEY, "secret_key": SECRET_KEY,
            "region": REGION}


def uploads(server) -> int:
    """Objects written so far: single PUTs and completed multipart uploads (pyarrow's output streams use those;
    the object appears only when the upload completes)."""
    counts = server.requests()
    return counts.get("PutObject", 0) + counts.get("CompleteMultipartUpload", 0)


def fetch(server, prefix: str, local: Path) -> Path:
    for key in server.keys(prefix + "/"):
        if key.endswith("/"):
            continue                # a folder marker
        path = local / key[len(prefix) + 1:]
        path.parent.mkdir(parents=True, exist_ok=True)
        server.client.download_file(server.bucket, key, str(path))
    return local


def write(store: Path, first: int, count: int, config: StoreConfig) -> None:
    with MessageStoreWriter(store, config) as writer:
        for start in range(first, first + count, 64):
            assert all(r.ok for r in writer.put_messages([make_message(3, i)
                                                          for i in range(start, min(first + count, start + 64))]))


def test_snapshot_into_s3(s3, tmp_path):
    config = StoreConfig.from_mapping(SMALL)
    store = tmp_path / "store"
    write(store, 0, 1200, config)
    dest = f"s3://{s3.bucket}/snap"
    before = uploads(s3)
    first = snapshot_store(store, dest, config, dest_options=options(s3))
    copied = sum(c["copied"] for c in first["counts"].values())
    # Every copied file, the pending marker and the manifest: one whole upload each; nothing else but the
    # empty folder marker pyarrow leaves when it deletes the last object under a prefix (the pending marker).
    markers = [k for k in s3.keys("snap/") if k.endswith("/")]
    assert uploads(s3) - before == copied + 2 + len(markers)
    assert_snapshot_matches(store, fetch(s3, "snap", tmp_path / "got1"), config, first)
    write(store, 1200, 800, config)
    second = snapshot_store(store, dest, config, dest_options=options(s3))
    assert second["validEnd"] > first["validEnd"]
    assert not [k for k in s3.keys("snap/") if k.endswith("pending.json")]
    got = fetch(s3, "snap", tmp_path / "got2")
    assert json.loads((got / "rmq-snapshot.json").read_text()) == second
    assert_snapshot_matches(store, got, config, second)


def test_rocksdb_queue_store_snapshot_into_s3(s3, tmp_path):
    """A store whose ConsumeQueues are a RocksDB database (the golden broker corpus, read in place): its
    database's files go up as objects (table files sent straight from their copy), and the objects, fetched
    back, open and read as the source."""
    pytest.importorskip("rocksdict")
    from golden import GOLDEN_BROKER_ROOT
    corpus = GOLDEN_BROKER_ROOT / "rmq550-b2-rocksdb-v2-lmq"
    if not (corpus / "store").is_dir():
        pytest.skip(f"no {corpus}")
    config = StoreConfig.from_properties_file(corpus / "broker.properties")
    manifest = snapshot_store(corpus / "store", f"s3://{s3.bucket}/rocksdb", config, dest_options=options(s3))
    assert any(rel.endswith(".sst") for rel in manifest["files"])
    got = fetch(s3, "rocksdb", tmp_path / "got")
    assert_snapshot_matches(corpus / "store", got, config, manifest, strict_verify=False)
