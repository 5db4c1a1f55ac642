"""Stores in use: a crashed store on a read-only mount reads without any write; a store held by a
running broker is detected and its config/ is never written."""

from __future__ import annotations

import io
import logging
import os
import shutil
import subprocess
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from rmqsource.cli import main
from rmqsource.errors import StoreLockedError
from rmqsource.io.lock import StoreLock, store_lock_state
from rmqsource.spark.options import parse_options
from rmqsource.spark.planning import plan
from rmqsource.spark.pushdown import Pushed
from rmqsource.spark.stream import RmqStreamReader
from rmqsource.store.consumer_offsets import ConsumerOffsets
from rmqsource.store.lag import group_lag
from rmqsource.store.layout import StoreLayout
from rmqsource.store.reader import GetMessageStatus, MessageStoreReader

from fuzz_stores import no_writes_under, read_whole_store
from golden import copy_store, corpora, is_dledger, load_config

pytestmark = [pytest.mark.unit, pytest.mark.skipif(not corpora(), reason="no golden corpus")]

CORPUS = corpora()[0] if corpora() else None

# Java's FileChannel.tryLock(0, 1, false) is an fcntl(F_SETLK) write lock of byte 0 on Linux; this child
# takes exactly that lock and keeps it until its stdin closes.
BROKER_LIKE_CHILD = textwrap.dedent("""
    import fcntl, os, sys
    fd = os.open(os.path.join(sys.argv[1], "lock"), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
    os.pwrite(fd, b"lock", 0)
    print("locked", flush=True)
    sys.stdin.read()
""")
RMQSOURCE_WRITER_CHILD = textwrap.dedent("""
    import sys
    from rmqsource.io.lock import StoreLock
    lock = StoreLock(sys.argv[1]).acquire()
    print("locked", flush=True)
    sys.stdin.read()
""")
JAVA_BROKER_LOCK = textwrap.dedent("""
    import java.io.RandomAccessFile;
    import java.nio.channels.FileLock;
    public class HoldLock {
        public static void main(String[] a) throws Exception {
            RandomAccessFile f = new RandomAccessFile(a[0] + "/lock", "rw");
            FileLock l = f.getChannel().tryLock(0, 1, false);   // DefaultMessageStore.start()
            System.out.println(l == null ? "busy" : "locked");
            System.out.flush();
            System.in.read();
        }
    }
""")


@pytest.fixture(params=["python", pytest.param("jvm", marks=pytest.mark.spark)])
def impl(request):
    """The stream reader and consumer-offset file of one implementation (the JVM's through py4j)."""
    if request.param == "python":
        return SimpleNamespace(reader=RmqStreamReader, offsets=ConsumerOffsets)
    from jvm_twins import JvmConsumerOffsets, JvmStreamReader, jvm_or_skip
    jvm = jvm_or_skip(request)
    return SimpleNamespace(
        reader=lambda options: JvmStreamReader(jvm, options["path"], **{k: v for k, v in options.items() if k != "path"}),
        offsets=lambda root, config=None: JvmConsumerOffsets(jvm, root, config=config))


@pytest.fixture
def store(tmp_path):
    return copy_store(CORPUS / "store", tmp_path / "store")


@contextmanager
def holding_lock(cmd: list):
    child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline().strip()
        assert line == "locked", (line, child.stderr.read() if child.poll() is not None else "")
        yield child.pid
    finally:
        child.stdin.close()
        child.wait(timeout=30)


def read_everything(store: Path) -> int:
    """Every reader entry point; returns the number of messages getMessage served."""
    config = load_config(CORPUS)
    served = 0
    with MessageStoreReader(store, config) as reader:
        infos = reader.queue_infos()
        assert infos
        for topic, qid in reader.queue_keys():
            for result in reader.get_loop("g", topic, qid, 0, 32):
                served += len(result.messages)
        first = next(r for r in reader.get_loop("g", "TopicTest", 0, 0, 1) if r.messages).messages[0]
        assert reader.view(first.record.msg_id).message is not None
        reader.query("TopicTest", first.record.keys.split(" ")[0] if first.record.keys else "k", 32)
    assert read_whole_store(store, CORPUS) > 0
    assert read_whole_store(store, CORPUS, topicPattern=".*") > 0
    ConsumerOffsets(store, config=config).load()
    group_lag(store, config)
    return served


# --------------------------------------------------------------------------- read-only

def test_reading_a_crashed_store_opens_no_store_file_for_writing(store):
    """Seam: every os.open/open of a file under the store with a writing mode fails while the reads run.

    Proves no read path asks for write access anywhere in the store (the lock file included), which is
    what makes reads work on a read-only mount whatever the user's privileges.
    """
    (store / "abort").write_bytes(b"")          # crashed: readers must still only test the lock
    (store / "lock").write_bytes(b"lock")
    with no_writes_under(store):
        assert read_everything(store) > 0


HERE = Path(__file__).resolve().parent
SUPPORT = HERE.parent / "support"
MOUNT_CHILD = textwrap.dedent("""
    import sys
    sys.path[:0] = sys.argv[2:4]        # this test's module and the support modules it imports
    import test_live_store as t
    from pathlib import Path
    print("served", t.read_everything(Path(sys.argv[1])), flush=True)
""")


def _can_make_read_only_mounts() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount --bind / /mnt && mount -o remount,bind,ro /mnt"],
                           capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _can_make_read_only_mounts(), reason="needs unshare + mount (a private mount namespace)")
def test_crashed_store_on_a_read_only_mount_reads(store):
    """A real read-only bind mount (private mount namespace): root cannot write there either."""
    (store / "abort").write_bytes(b"")
    (store / "lock").write_bytes(b"lock")
    script = (f'mount --bind "{store}" "{store}" && mount -o remount,bind,ro "{store}" '
              f'&& ! touch "{store}/probe" 2>/dev/null '
              f'&& exec "{sys.executable}" -c "$0" "{store}" "{HERE}" "{SUPPORT}"')
    done = subprocess.run(["unshare", "-m", "sh", "-c", script, MOUNT_CHILD], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("served ") and int(done.stdout.split()[1]) > 0


# --------------------------------------------------------------------------- live broker

def test_lock_held_by_another_process_is_a_broker_unless_it_is_an_rmqsource_writer(store):
    assert not store_lock_state(store).held
    with holding_lock([sys.executable, "-c", BROKER_LIKE_CHILD, str(store)]) as pid:
        state = store_lock_state(store)
        assert state.held and state.by_broker and state.pid == pid
    with holding_lock([sys.executable, "-c", RMQSOURCE_WRITER_CHILD, str(store)]):
        state = store_lock_state(store)
        assert state.held and not state.by_broker
    with StoreLock(store):
        state = store_lock_state(store)
        assert state.held and state.in_this_process and not state.by_broker
    assert not store_lock_state(store).held


@pytest.mark.skipif(shutil.which("java") is None, reason="no java on PATH")
def test_a_java_filechannel_lock_is_seen_as_a_broker(store, tmp_path):
    src = tmp_path / "HoldLock.java"
    src.write_text(JAVA_BROKER_LOCK)
    with holding_lock(["java", str(src), str(store)]) as pid:
        state = store_lock_state(store)
        assert state.by_broker and state.pid == pid


def test_topics_queues_and_planning_say_a_broker_holds_the_store(store, caplog, capsys):
    (store / "abort").write_bytes(b"")
    with holding_lock([sys.executable, "-c", BROKER_LIKE_CHILD, str(store)]):
        for command in (["topics", str(store)], ["queues", str(store)]):
            out = io.StringIO()
            assert main([*command, "--config", str(CORPUS / "store.properties")], stdout=out) == 0
            err = capsys.readouterr().err
            assert "running broker" in err and "TopicTest" in out.getvalue()
        with caplog.at_level(logging.WARNING, logger="rmqsource"):
            opts = parse_options({"path": str(store), "config": str(CORPUS / "store.properties")})
            assert plan(opts, Pushed())
        assert any("running broker" in r.getMessage() for r in caplog.records)
        # reads are still allowed
        with MessageStoreReader(store, load_config(CORPUS)) as reader:
            assert reader.get_message("g", "TopicTest", 0, 0, 4).status is GetMessageStatus.FOUND


def test_group_commit_into_a_live_broker_store_is_refused(store, impl):
    offsets_file = store / "config" / "consumerOffset.json"
    before = offsets_file.read_bytes() if offsets_file.exists() else None
    options = {"path": str(store), "config": str(CORPUS / "store.properties"), "topics": "TopicTest",
               "consumerGroup": "analytics", "startingOffsets": "earliest"}
    with holding_lock([sys.executable, "-c", BROKER_LIKE_CHILD, str(store)]):
        reader = impl.reader(options)
        with pytest.raises(StoreLockedError) as info:
            reader.initialOffset()
        message = str(info.value)
        assert "running broker" in message and "consumerGroup" in message and "mqadmin" in message
        with pytest.raises(StoreLockedError):
            impl.offsets(store, config=load_config(CORPUS)).commit("analytics", {"TopicTest": {0: 5}})
        with pytest.raises(StoreLockedError):
            reader.commit({"TopicTest": {"0": 5}})
        reader.stop()
    after = offsets_file.read_bytes() if offsets_file.exists() else None
    assert after == before


def test_group_commit_while_an_rmqsource_writer_holds_the_store_is_allowed(store, impl):
    with holding_lock([sys.executable, "-c", RMQSOURCE_WRITER_CHILD, str(store)]):
        done = impl.offsets(store, config=load_config(CORPUS)).commit("analytics", {"TopicTest": {0: 5}})
    assert done == {"TopicTest": {0: 5}}
    assert ConsumerOffsets(store).offsets_for_group("analytics") == {"TopicTest": {0: 5}}


@pytest.mark.parametrize("corpus", [c for c in corpora() if is_dledger(c)], ids=lambda c: c.name)
def test_a_running_dledger_broker_serves_what_dispatch_has_seen(corpus, tmp_path):
    """A DLedger store whose broker is running (its lock held, the abort file present) and whose last
    ConsumeQueue units are not written yet: the reader's max offset stops at what the queues point at,
    as for a normal CommitLog and as the JVM reader does (it was the DLedger data's end)."""
    store = copy_store(corpus / "store", tmp_path / "store")
    config = load_config(corpus)
    with MessageStoreReader(store, config) as reader:
        full = reader.commit_log_max_offset
        ends = {key: reader.consume_queue(*key).max_physic_offset for key in reader.queue_keys()}
    key = max(ends, key=ends.get)                          # the queue holding the last record
    qfile = sorted(StoreLayout.for_root(store).queue_dir(*key).iterdir())[-1]
    raw = bytearray(qfile.read_bytes())
    last = max(i for i in range(len(raw) // 20) if raw[i * 20:(i + 1) * 20] != bytes(20))
    raw[last * 20:(last + 1) * 20] = bytes(20)             # its last unit not written yet
    qfile.write_bytes(bytes(raw))
    (store / "abort").write_bytes(b"")
    with holding_lock([sys.executable, "-c", BROKER_LIKE_CHILD, str(store)]):
        with MessageStoreReader(store, config) as reader:
            capped = reader.commit_log_max_offset
            dispatched = max(reader.consume_queue(*k).max_physic_offset for k in reader.queue_keys())
    assert capped == dispatched < full
