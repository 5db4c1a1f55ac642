"""``rmq snapshot`` into HDFS over WebHDFS (``webhdfs://``, rmqsource/io/webhdfs.py: HTTP only, no libhdfs).

The HDFS is Hadoop's mini cluster (a NameNode and a DataNode in a child JVM, tests/support/hdfs.py); the
destination talks to its NameNode's HTTP port. The judges: the cluster's own listing (every file of the
manifest there with its size, nothing else), the JVM scan reading the snapshot through ``hdfs://`` (Hadoop's
HDFS client) equal to the source read from the local disk below the manifest's ``validEnd``, and a copy
fetched back over WebHDFS that verifies clean and reads as the source (tests/support/snapshot_checks.py);
first, and after an incremental run. (Spark's ``webhdfs://`` reader is not tried: pyspark's shaded Hadoop
client lacks the Jersey runtime Hadoop's WebHdfsFileSystem parses answers with.)
Marker ``objectstore``: run by scripts/test_objectstore.sh.
"""

from __future__ import annotations

import getpass
import io
import json
import urllib.request
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from rmqsource import cli
from rmqsource.commands.output import EXIT_STORE_ERROR
from rmqsource.errors import StoreError
from rmqsource.io.destination_uri import open_destination
from rmqsource.sample import write_sample_store
from rmqsource.store.config import StoreConfig
from rmqsource.store.snapshot import snapshot_store
from rmqsource.store.snapshot_manifest import MANIFEST_NAME, manifest_bytes

from hdfs import jvm_session_or_skip, started_cluster
from objectstore import free_port
from snapshot_checks import assert_snapshot_matches

pytestmark = [pytest.mark.objectstore, pytest.mark.spark]

CONFIG = {"mappedFileSizeCommitLog": 256 * 1024, "mappedFileSizeConsumeQueue": 6000}
COLUMNS = ["topic", "queueId", "queueOffset", "commitLogOffset", "msgId"]


@pytest.fixture(scope="module")
def jvm_spark(spark):
    return jvm_session_or_skip(spark)


@pytest.fixture(scope="module")
def hdfs(jvm_spark):
    with started_cluster() as cluster:
        yield cluster


def webhdfs(hdfs, path: str) -> str:
    return f"webhdfs://127.0.0.1:{hdfs.http_port}/{path.strip('/')}"


def listing(uri: str) -> dict[str, int]:
    """Every file under ``uri`` with its length, as the NameNode lists them."""
    dest = open_destination(uri)
    try:
        return dict(dest.list_files())
    finally:
        dest.close()


def fetch(uri: str, local: Path) -> Path:
    """The folder ``uri`` downloaded (WebHDFS OPEN) into ``local``."""
    dest = open_destination(uri)
    try:
        for rel, _ in dest.list_files():
            path = local / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(dest.read_bytes(rel))
    finally:
        dest.close()
    return local


def scan_rows(spark, path, below: int | None = None) -> list[tuple]:
    df = spark.read.format("rmq").load(str(path))
    if below is not None:
        df = df.where(F.col("commitLogOffset") < below)
    return sorted(tuple(r) for r in df.select(*COLUMNS, F.sha2(F.col("body"), 256)).collect())


def assert_snapshot_in_hdfs(spark, hdfs, source: Path, path: str, manifest: dict, config, local: Path) -> None:
    files = listing(webhdfs(hdfs, path))
    assert files == {MANIFEST_NAME: len(manifest_bytes(manifest)),
                     **{rel: f["size"] for rel, f in manifest["files"].items()}}
    want = scan_rows(spark, source, below=manifest["validEnd"])
    assert want
    assert scan_rows(spark, hdfs.uri(path)) == want
    got = fetch(webhdfs(hdfs, path), local)
    assert json.loads((got / MANIFEST_NAME).read_text()) == manifest
    assert_snapshot_matches(source, got, config, manifest)


def test_snapshot_into_hdfs_over_webhdfs(jvm_spark, hdfs, tmp_path):
    config = StoreConfig.from_mapping(CONFIG)
    source = tmp_path / "store"
    write_sample_store(str(source), 3000, config=config)
    dest = webhdfs(hdfs, "snapshots/a")
    first = snapshot_store(source, dest, config)
    assert first["counts"]["commitlog"]["files"] > 1 and first["counts"]["index"]["files"] >= 1
    assert_snapshot_in_hdfs(jvm_spark, hdfs, source, "snapshots/a", first, config, tmp_path / "got1")

    write_sample_store(str(source), 1500, config=config, seed=3)
    second = snapshot_store(source, dest, config)
    assert first["validEnd"] < second["validEnd"]
    # Incremental: the sealed CommitLog segments of the first run are kept, not sent again.
    sealed = [rel for rel, f in first["files"].items() if f["kind"] == "commitlog" and f["sealed"]]
    assert sealed and second["counts"]["commitlog"]["copied"] < second["counts"]["commitlog"]["files"]
    assert second["bytesCopied"] < sum(f["size"] for f in second["files"].values())
    assert_snapshot_in_hdfs(jvm_spark, hdfs, source, "snapshots/a", second, config, tmp_path / "got2")


def test_webhdfs_refusals_name_the_uri(hdfs, tmp_path, capsys):
    config = StoreConfig.from_mapping(CONFIG)
    source = tmp_path / "store"
    write_sample_store(str(source), 50, config=config)
    # Nothing listens there: one line, the URI in it, exit code 1.
    port = free_port()
    dest = f"webhdfs://127.0.0.1:{port}/snapshots/b"
    code = cli.main(["snapshot", str(source), dest], stdout=io.StringIO())
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_STORE_ERROR and len(err) == 1, err
    assert dest in err[0] and "refused" in err[0].lower(), err
    # The NameNode refuses a folder under a file: its RemoteException, with the URI.
    open_destination(webhdfs(hdfs, "plain")).close()
    file_uri = webhdfs(hdfs, "plain/file")
    d = open_destination(webhdfs(hdfs, "plain"))
    d.put_bytes("file", b"not a folder")
    d.close()
    with pytest.raises(StoreError) as e:
        snapshot_store(source, f"{file_uri}/snap", config)
    assert file_uri in str(e.value) and "Exception" in str(e.value), str(e.value)


def test_user_name_comes_from_the_uri_then_the_environment(hdfs, tmp_path, monkeypatch):
    """WebHDFS's simple authentication: the user named is the one the NameNode checks permissions for (its
    root belongs to the user that started it; another user may not write there)."""
    config = StoreConfig.from_mapping(CONFIG)
    source = tmp_path / "store"
    write_sample_store(str(source), 50, config=config)
    monkeypatch.setenv("HADOOP_USER_NAME", "mallory")
    for uri, user in ((f"webhdfs://alice@127.0.0.1:{hdfs.http_port}/users/alice", "alice"),
                      (webhdfs(hdfs, "users/mallory"), "mallory")):
        with pytest.raises(StoreError) as e:
            snapshot_store(source, uri, config)
        assert uri in str(e.value) and "AccessControlException" in str(e.value), str(e.value)
        assert f"user={user}" in str(e.value), str(e.value)
    monkeypatch.delenv("HADOOP_USER_NAME")
    dest = open_destination(webhdfs(hdfs, "users/me"))
    try:
        dest.put_bytes("f", b"x")
        assert dest.status("f")["owner"] == getpass.getuser()
    finally:
        dest.close()


def test_namenode_renames_over_a_file_in_one_step(hdfs):
    """What publishing rests on: the NameNode's RENAME with ``renameoptions=OVERWRITE`` (its rename2) replaces
    an existing file and answers with an empty body, where a plain RENAME answers ``false``."""
    base = f"http://127.0.0.1:{hdfs.http_port}/webhdfs/v1/rename"
    user = f"user.name={getpass.getuser()}"
    dest = open_destination(webhdfs(hdfs, "rename"))
    try:
        dest.put_bytes("old", b"old bytes")
        dest.put_bytes("new", b"new bytes")
        plain = urllib.request.Request(f"{base}/new?op=RENAME&destination=/rename/old&{user}", method="PUT")
        with urllib.request.urlopen(plain) as resp:
            assert json.loads(resp.read()) == {"boolean": False}
        over = urllib.request.Request(f"{base}/new?op=RENAME&destination=/rename/old&renameoptions=OVERWRITE&"
                                      f"{user}", method="PUT")
        with urllib.request.urlopen(over) as resp:
            assert resp.status == 200 and resp.read().strip() == b""
        assert dest.read_bytes("old") == b"new bytes" and dest.read_bytes("new") is None
    finally:
        dest.close()
