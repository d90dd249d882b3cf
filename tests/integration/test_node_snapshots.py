"""KIP-630 snapshots on a real node (in process, one voter, a tmp data directory): the policy
writes checkpoint files at committed offsets whose contents are the store's state there; a
restart loads the newest valid one and replays only the log after it; a corrupt newest
snapshot falls back to an older one; leftovers go at start; the core advances the log start
to a snapshot and older snapshots go (AdvanceLogStartOffset); a snapshot beyond the log end
makes the log start there (KIP-630); `kraft snapshots` lists them."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import pytest

from kraft.app.kv import KeyValueStore
from kraft.app.port import LeaderAndEpoch
from kraft.client import Address, ClientError
from kraft.client_read import get
from kraft.core.timing import QuorumTiming
from kraft.errors import ErrorCode, KraftError
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch
from kraft.metadata_records import feature_level_record, no_op_record
from kraft.server.applier import Applier
from kraft.server.config import NodeConfig, VoterAddress
from kraft.server.node import Node, StartupError
from kraft.server.snapshot_store import FileSnapshots
from kraft.storage.log_adapter import BatchReader
from kraft.storage.meta_properties import format_storage, generate_cluster_id
from kraft.storage.segmented_log import LOG_DIR_NAME, SegmentedLog
from kraft.storage.snapshot_directory import load_state_snapshot, snapshot_files
from kraft.storage.snapshot_files import (
    CheckpointWriter,
    SnapshotFileKind,
    check_snapshot,
)

BIG = 1 << 40
_LOOP_WAIT_S = 30.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(data_dir: Path, *, snapshot_bytes: int) -> NodeConfig:
    if not (data_dir / "meta.properties").exists():
        format_storage(data_dir, generate_cluster_id(random.Random(7)), 1)
    port = _free_port()
    return NodeConfig(
        node_id=NodeId(1),
        data_dir=data_dir,
        voters=(VoterAddress(NodeId(1), "127.0.0.1", port),),
        listener_host="127.0.0.1",
        listener_port=port,
        timing=QuorumTiming(election_timeout_ms=50),
        snapshot_max_new_record_bytes=snapshot_bytes,
        snapshot_max_interval_ms=0,
    )


async def _until(what: str, check: Callable[[], bool]) -> None:
    """Wait (on the node's own loop) until `check()` holds; a generous bound, not a claim."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _LOOP_WAIT_S
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def _append(node: Node, *records: tuple[bytes, bytes | None]) -> Offset:
    await _until("a leader", lambda: node.driver.replica.view().leader_id == 1)
    outcome = await node.driver.client_append(tuple(records), 10_000)
    assert outcome.error is ErrorCode.NONE, outcome
    assert outcome.last_offset is not None
    return outcome.last_offset


async def _idle(node: Node) -> None:
    await _until("the snapshot being written", lambda: not node.snapshotter.running)


def _run(config: NodeConfig, body: Callable[[Node], Awaitable[None]]) -> None:
    async def main() -> None:
        node = await Node.open(config)
        try:
            await body(node)
        finally:
            await node.close(graceful=True)

    asyncio.run(main())


def _partition(data_dir: Path) -> Path:
    return data_dir / LOG_DIR_NAME


def _checkpoints(data_dir: Path) -> list[OffsetAndEpoch]:
    return [
        f.snapshot_id
        for f in snapshot_files(_partition(data_dir))
        if f.kind is SnapshotFileKind.COMPLETE
    ]


def _log_start(data: Path) -> int:
    """Where the stopped node's log starts (a snapshot written after a test saw the log start
    may have moved it again before the node stopped)."""
    with SegmentedLog.open(data) as log_:
        return int(log_.start_offset)


def _replayed(data_dir: Path, upto: Offset) -> KeyValueStore:
    """The store as replaying the log from offset 0 up to `upto` makes it (no snapshot)."""
    store = KeyValueStore()
    with SegmentedLog.open(data_dir) as log_:
        applier = Applier(
            BatchReader(log_, verify=True), store, lambda: upto, lambda: LeaderAndEpoch(None, 0)
        )
        applier.catch_up()
    return store


def _loaded(path: Path) -> KeyValueStore:
    store = KeyValueStore()
    load_state_snapshot(path, store)
    return store


async def _write_history(node: Node) -> dict[bytes, bytes]:
    """Appends (one HWM move each, so the 1-byte policy snapshots at several offsets), and a
    suffix after the policy is relaxed: the state the node ends with."""
    expected: dict[bytes, bytes] = {}
    for i in range(12):
        key, value = f"k{i % 4}".encode(), f"v{i}".encode()
        await _append(node, (key, value))
        expected[key] = value
        await _idle(node)
    await _append(node, (b"k0", None))  # a delete, snapshotted too
    del expected[b"k0"]
    await _idle(node)
    node.snapshotter.policy = replace(node.snapshotter.policy, max_new_record_bytes=BIG)
    for i in range(3):
        await _append(node, (b"suffix", f"s{i}".encode()))
    expected[b"suffix"] = b"s2"
    return expected


def _keep_history(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is deleted on disk (the log start and the snapshots stay) though the core
    advances its log start: these tests check every snapshot the policy wrote against the
    log replayed from offset 0."""
    monkeypatch.setattr(SegmentedLog, "advance_start_offset", lambda self, offset: None)
    monkeypatch.setattr(FileSnapshots, "delete_older_than", lambda self, sid: [])


def test_policy_writes_valid_snapshots_at_committed_offsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _keep_history(monkeypatch)
    data = tmp_path / "n1"
    seen: dict[str, Offset] = {}

    async def body(node: Node) -> None:
        await _write_history(node)
        assert node.driver.high_watermark is not None
        seen["hwm"] = node.driver.high_watermark
        seen["end"] = node.driver.log.end_offset

    _run(_config(data, snapshot_bytes=1), body)
    ids = _checkpoints(data)
    assert len(ids) >= 3, ids
    assert ids == sorted(ids, key=lambda s: s.offset)  # one epoch: offsets increase
    for sid in ids:
        path = _partition(data) / f"{sid.offset:020d}-{sid.epoch:010d}.checkpoint"
        summary = check_snapshot(path)
        assert summary.snapshot_id == sid
        assert 0 < sid.offset <= seen["hwm"]
        reference = _replayed(data, sid.offset)
        assert reference.applied_offset == sid.offset  # the offset is a batch boundary
        assert reference.applied_epoch == sid.epoch  # the epoch of the last applied batch
        snap = _loaded(path)
        assert snap.items() == reference.items()
        assert snap.producers.batches() == reference.producers.batches()
    # The relaxed policy wrote nothing for the suffix.
    assert ids[-1].offset < seen["end"]


def test_log_start_advances_to_a_snapshot_and_older_ones_go(tmp_path: Path) -> None:
    data = tmp_path / "n1"
    seen: dict[str, int] = {}

    async def body(node: Node) -> None:
        for i in range(6):
            await _append(node, (b"k", f"v{i}".encode()))
            await _idle(node)
        await _until("the log start to move", lambda: node.driver.log.start_offset > 0)
        seen["written"] = len(node.snapshotter.written)
        seen["start"] = node.driver.log.start_offset

    # metadata.max.retention.bytes=0: every snapshot but the latest is beyond retention.
    _run(replace(_config(data, snapshot_bytes=1), retention_max_bytes=0), body)
    ids = _checkpoints(data)
    assert seen["written"] >= 3
    assert 0 < len(ids) < seen["written"]  # the core deleted those below the log start
    # A snapshot still being written when the log start was seen may have moved it again
    # before the node stopped: the oldest snapshot kept is where the log starts now.
    oldest = min(sid.offset for sid in ids)
    assert oldest >= seen["start"]
    assert [
        f for f in snapshot_files(_partition(data)) if f.kind is not SnapshotFileKind.COMPLETE
    ] == []

    async def again(node: Node) -> None:
        assert node.driver.log.start_offset == oldest
        await _until("a high watermark", lambda: node.driver.high_watermark is not None)
        assert (await get(Address(*node.address), b"k")).value == b"v5"

    _run(_config(data, snapshot_bytes=BIG), again)


def test_restart_loads_the_snapshot_and_replays_only_the_suffix(tmp_path: Path) -> None:
    data = tmp_path / "n1"
    state: dict[str, dict[bytes, bytes]] = {}

    async def first(node: Node) -> None:
        state["expected"] = await _write_history(node)

    _run(_config(data, snapshot_bytes=1), first)
    newest = _checkpoints(data)[-1]

    async def second(node: Node) -> None:
        applier = node.server.applier
        assert applier is not None
        # Before any read: the store holds the snapshot, at its end offset, with no replay.
        assert node.snapshotter.latest == newest
        assert applier.machine.applied_offset == newest.offset
        assert applier.first_read is None
        await _until("a leader", lambda: node.driver.replica.view().leader_id == 1)
        await _until("a high watermark", lambda: node.driver.high_watermark is not None)
        for key, value in state["expected"].items():
            got = await get(Address(*node.address), key)
            assert got.value == value, key
        assert not (await get(Address(*node.address), b"k0")).found
        assert applier.first_read == newest.offset  # replay started at the snapshot

    _run(_config(data, snapshot_bytes=BIG), second)


def test_corrupt_newest_snapshot_falls_back_to_an_older_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    _keep_history(monkeypatch)
    data = tmp_path / "n1"
    state: dict[str, dict[bytes, bytes]] = {}

    async def first(node: Node) -> None:
        state["expected"] = await _write_history(node)

    _run(_config(data, snapshot_bytes=1), first)
    ids = _checkpoints(data)
    assert len(ids) >= 2
    newest = _partition(data) / f"{ids[-1].offset:020d}-{ids[-1].epoch:010d}.checkpoint"
    os.chmod(newest, 0o644)
    raw = bytearray(newest.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    newest.write_bytes(bytes(raw))

    async def second(node: Node) -> None:
        applier = node.server.applier
        assert applier is not None
        assert node.snapshotter.latest == ids[-2]
        assert applier.machine.applied_offset == ids[-2].offset
        await _until("a high watermark", lambda: node.driver.high_watermark is not None)
        for key, value in state["expected"].items():
            assert (await get(Address(*node.address), key)).value == value
        assert applier.first_read == ids[-2].offset

    with caplog.at_level(logging.WARNING, logger="kraft.node"):
        _run(_config(data, snapshot_bytes=BIG), second)
    assert any(
        newest.name in r.getMessage() and "fails validation" in r.getMessage()
        for r in caplog.records
    )


def test_leftovers_removed_at_start(tmp_path: Path) -> None:
    data = tmp_path / "n1"
    config = _config(data, snapshot_bytes=BIG)
    part = _partition(data)
    part.mkdir(parents=True)
    partial = part / f"{5:020d}-{1:010d}-abc.checkpoint.part"
    deleted = part / f"{3:020d}-{1:010d}.checkpoint.deleted"
    partial.write_bytes(b"half a snapshot")
    deleted.write_bytes(b"gone")

    async def body(node: Node) -> None:
        assert not partial.exists()
        assert not deleted.exists()
        assert node.snapshotter.latest is None

    _run(config, body)


def test_snapshot_beyond_the_log_end_starts_the_log_there(tmp_path: Path) -> None:
    data = tmp_path / "n1"
    config = _config(data, snapshot_bytes=BIG)
    with CheckpointWriter(
        _partition(data),
        OffsetAndEpoch(Epoch(4), Offset(1000)),
        timestamp_ms=0,
        last_contained_log_timestamp=0,
    ) as w:
        w.append([(b"k", b"v")])
        w.freeze()

    async def body(node: Node) -> None:
        assert node.snapshotter.latest == OffsetAndEpoch(Epoch(4), Offset(1000))
        assert node.driver.log.start_offset == 1000
        await _until("a high watermark", lambda: node.driver.high_watermark is not None)
        assert (await get(Address(*node.address), b"k")).value == b"v"
        assert node.driver.log.start_offset == 1000
        assert node.driver.log.end_offset > 1000  # the leader's epoch record follows it

    _run(config, body)


def test_kraft_snapshots_lists_and_checks(tmp_path: Path) -> None:
    data = tmp_path / "n1"

    async def body(node: Node) -> None:
        for i in range(3):
            await _append(node, (b"k", f"v{i}".encode()))
            await _idle(node)

    _run(_config(data, snapshot_bytes=1), body)
    ids = _checkpoints(data)

    def listing() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kraft.cli", "snapshots", "--data-dir", str(data)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    shown = listing()
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "log start offset: 0 (log-start-offset-checkpoint)"
    assert lines[1].startswith("log segments: 1 (")
    lines = lines[2:]
    assert lines[0].split()[:2] == ["END", "OFFSET"]
    assert [int(line.split()[0]) for line in lines[1:]] == [s.offset for s in ids]
    assert all("valid" in line for line in lines[1:])
    oldest = _partition(data) / lines[1].split()[-1]
    os.chmod(oldest, 0o644)
    with open(oldest, "r+b") as f:
        f.truncate(oldest.stat().st_size - 3)
    broken = listing()
    assert broken.returncode == 1
    assert "invalid" in broken.stdout.splitlines()[3]
    assert oldest.name in broken.stderr


def test_three_nodes_snapshot_the_same_state_and_restart_from_it(tmp_path: Path) -> None:
    """Every node (followers too) runs the policy; a snapshot id two nodes both wrote holds
    the same records; a restarted follower starts from its snapshot and answers the same."""
    from cluster_harness import FAST, leader_of
    from polling import wait_for

    from kraft.cluster import LocalCluster, free_ports

    overrides = {**FAST, "metadata.log.max.record.bytes.between.snapshots": "1"}
    cluster = LocalCluster(tmp_path, free_ports(3), overrides=overrides)
    cluster.format()
    boot = ",".join(str(a) for a in cluster.addresses.values())

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kraft.cli", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def value_on(n: int) -> bytes | None:
        try:
            return asyncio.run(get(cluster.addresses[n], b"k")).value
        except (ClientError, OSError):
            return None

    cluster.start()
    try:
        wait_for("a leader", lambda: leader_of(cluster, cluster.node_ids))
        for i in range(5):
            done = cli("append", "--bootstrap", boot, f"k=v{i}", f"other{i}=x")
            assert done.returncode == 0, done.stderr
        for n in cluster.node_ids:
            wait_for(f"k on node {n}", lambda n=n: value_on(n) == b"v4")
            wait_for(f"a snapshot on node {n}", lambda n=n: _checkpoints(cluster.data_dir(n)))
    finally:
        cluster.stop_all()
    by_id: dict[OffsetAndEpoch, list[KeyValueStore]] = {}
    for n in cluster.node_ids:
        for sid in _checkpoints(cluster.data_dir(n)):
            path = (
                _partition(cluster.data_dir(n)) / f"{sid.offset:020d}-{sid.epoch:010d}.checkpoint"
            )
            by_id.setdefault(sid, []).append(_loaded(path))
    for stores in by_id.values():
        assert all(s.items() == stores[0].items() for s in stores)
    newest = _checkpoints(cluster.data_dir(2))[-1]
    cluster.start()
    try:
        wait_for("node 2 answers", lambda: value_on(2) == b"v4")  # from its snapshot
        wait_for("a leader", lambda: leader_of(cluster, cluster.node_ids))
        done = cli("append", "--bootstrap", boot, "k=v5")
        assert done.returncode == 0, done.stderr
        wait_for("node 2 replays the suffix", lambda: value_on(2) == b"v5")
    finally:
        cluster.stop_all()
    text = cluster.log_path(2).read_text()
    assert f"loaded from snapshot {newest.offset:020d}-{newest.epoch:010d}.checkpoint" in text
    assert f"replaying the log from offset {newest.offset}" in text


def test_a_log_start_without_its_snapshot_refuses_to_start(tmp_path: Path) -> None:
    """The log starts after offset 0 and the snapshot at its start is damaged: the state
    below the start is gone here, so the node does not start with a wrong state."""
    data = tmp_path / "n1"
    seen: dict[str, int] = {}

    async def body(node: Node) -> None:
        for i in range(4):
            await _append(node, (b"k", f"v{i}".encode()))
            await _idle(node)
        await _until("the log start to move", lambda: node.driver.log.start_offset > 0)
        seen["start"] = node.driver.log.start_offset

    _run(replace(_config(data, snapshot_bytes=1), retention_max_bytes=0), body)
    start = _log_start(data)
    assert start >= seen["start"] > 0
    for sid in _checkpoints(data):
        path = _partition(data) / f"{sid.offset:020d}-{sid.epoch:010d}.checkpoint"
        os.chmod(path, 0o644)
        path.write_bytes(b"damaged")

    async def main() -> None:
        with pytest.raises(StartupError, match=f"starts at offset {start}"):
            await Node.open(_config(data, snapshot_bytes=BIG))

    asyncio.run(main())


def test_a_log_start_at_a_snapshot_the_machine_cannot_load_says_so(tmp_path: Path) -> None:
    """The log starts after offset 0 at a valid checkpoint of Kafka metadata records (what a
    key-value node in a quorum with Kafka controllers holds after fetching a Kafka snapshot),
    and the node restarts with the key-value store: it does not start, and says that the file
    is valid but the configured state machine (`kraft.state.machine`) cannot load it, not that
    no valid snapshot exists."""
    data = tmp_path / "n1"
    seen: dict[str, int] = {}

    async def body(node: Node) -> None:
        for i in range(4):
            await _append(node, (b"k", f"v{i}".encode()))
            await _idle(node)
        await _until("the log start to move", lambda: node.driver.log.start_offset > 0)
        seen["start"] = node.driver.log.start_offset

    _run(replace(_config(data, snapshot_bytes=1), retention_max_bytes=0), body)
    start = _log_start(data)
    assert start >= seen["start"] > 0
    names = []
    for sid in _checkpoints(data):
        path = _partition(data) / f"{sid.offset:020d}-{sid.epoch:010d}.checkpoint"
        path.unlink()
        with CheckpointWriter(
            _partition(data), sid, timestamp_ms=1000, last_contained_log_timestamp=999
        ) as writer:
            writer.append([(None, feature_level_record("metadata.version", 30))])
            writer.append([(None, no_op_record())])
            assert writer.freeze() == path
        check_snapshot(path)  # a valid checkpoint file
        names.append(path.name)

    async def main() -> None:
        with pytest.raises(KraftError) as refused:
            await Node.open(_config(data, snapshot_bytes=BIG))
        text = str(refused.value)
        assert "no valid snapshot" not in text
        assert names[-1] in text and "valid" in text and "kraft.state.machine" in text
        assert f"starts at offset {start}" in text

    asyncio.run(main())
