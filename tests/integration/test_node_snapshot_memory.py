"""Snapshots move streamed (issue #14): a 64 MiB snapshot goes from a real leader to a wiped
observer (two nodes in this process, loopback TCP, Kafka's wire protocol) while the memory the
process allocates (tracemalloc: every Python allocation, on every thread, of both nodes) stays
within a bound four times smaller than the snapshot.

Two phases, each bounded by sizes, not by time:
- the transfer: the leader serves the chunks, the observer writes them into its `.part` file
  and validates it (on a worker thread), up to the moment the state machine is handed the
  file: the peak over that phase, above what the process held when it began;
- the install: the state machine is handed the snapshot as a stream of batches: it keeps the
  state (its 64 MiB of values, measured), and the peak may exceed what it keeps by the bound
  only (a reader that held the file, or a second copy of it, would not fit).
"""

from __future__ import annotations

import asyncio
import gc
import random
import socket
import tracemalloc
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from kraft.core.timing import QuorumTiming
from kraft.errors import ErrorCode
from kraft.ids import NodeId
from kraft.server.config import NodeConfig, VoterAddress
from kraft.server.node import Node
from kraft.server.snapshots import Snapshotter
from kraft.storage.meta_properties import format_storage, generate_cluster_id

MIB = 1 << 20
SNAPSHOT_BYTES = 64 * MIB
BOUND = 16 * MIB
VALUE = 64 * 1024
PER_APPEND = 8  # records of VALUE bytes per client append (a 512 KiB batch)
_WAIT_S = 120.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(data_dir: Path, node_id: int, leader: VoterAddress, port: int) -> NodeConfig:
    return NodeConfig(
        node_id=NodeId(node_id),
        data_dir=data_dir,
        voters=(leader,),
        listener_host="127.0.0.1",
        listener_port=port,
        timing=QuorumTiming(election_timeout_ms=50),
        snapshot_max_new_record_bytes=1 << 40,
        snapshot_max_interval_ms=0,
        # Retention moves the log start to the newest snapshot at once.
        retention_max_bytes=0,
    )


async def _until(what: str, check: Callable[[], bool]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _WAIT_S
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def test_a_64_mib_snapshot_moves_within_16_mib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster_id = generate_cluster_id(random.Random(11))
    port = _free_port()
    leader_address = VoterAddress(NodeId(1), "127.0.0.1", port)
    format_storage(tmp_path / "n1", cluster_id, 1)
    format_storage(tmp_path / "n2", cluster_id, 2)
    leader_config = _config(tmp_path / "n1", 1, leader_address, port)
    observer_config = _config(tmp_path / "n2", 2, leader_address, _free_port())

    # The phase boundary: when the driver hands the fetched snapshot to the state machine.
    marks: dict[str, int] = {}
    installed = Snapshotter.snapshot_installed

    def snapshot_installed(self: Snapshotter, path: Path) -> None:  # type: ignore[type-arg]
        marks["transfer_peak"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        marks["install_start"] = tracemalloc.get_traced_memory()[0]
        installed(self, path)
        current, peak = tracemalloc.get_traced_memory()
        marks["install_peak"], marks["install_end"] = peak, current

    monkeypatch.setattr(Snapshotter, "snapshot_installed", snapshot_installed)

    async def main() -> None:
        leader = await Node.open(leader_config)
        observer: Node | None = None
        try:
            await _until("a leader", lambda: leader.driver.replica.view().leader_id == 1)
            for i in range(SNAPSHOT_BYTES // (VALUE * PER_APPEND)):
                records = tuple(
                    (f"key-{i:04d}-{j}".encode(), bytes([(i + j) % 256]) * VALUE)
                    for j in range(PER_APPEND)
                )
                outcome = await leader.driver.client_append(records, 30_000)
                assert outcome.error is ErrorCode.NONE, outcome
            snapshotter = leader.snapshotter
            snapshotter.policy = replace(snapshotter.policy, max_new_record_bytes=1)
            assert (await leader.driver.client_append(((b"last", b"x"),), 30_000)).error is (
                ErrorCode.NONE
            )
            # Kafka's retention keeps the latest snapshot and moves the log start to the
            # oldest one kept, so a second snapshot lets the log start pass the first.
            await _until("the first snapshot", lambda: len(snapshotter.written) >= 1)
            await _until("the snapshot written", lambda: not snapshotter.running)
            assert (await leader.driver.client_append(((b"later", b"y"),), 30_000)).error is (
                ErrorCode.NONE
            )
            # Written, held by the core, and the log starts after it (no live follower).
            await _until(
                "the leader's log start to move", lambda: leader.driver.log.start_offset > 0
            )
            await _until("the snapshot written", lambda: not snapshotter.running)
            written = snapshotter.written[-1].stat().st_size
            assert written > SNAPSHOT_BYTES

            gc.collect()
            tracemalloc.start()
            start = tracemalloc.get_traced_memory()[0]
            observer = await Node.open(observer_config)
            store = observer.snapshotter._applier.machine
            await _until("the observer's install", lambda: "install_end" in marks)
            await _until("the observer's state", lambda: store.applied_offset > 0)
            assert store.get(b"key-0000-0") == bytes([0]) * VALUE
            assert len(store) == SNAPSHOT_BYTES // VALUE + 2  # + "last" and "later"

            transfer = marks["transfer_peak"] - start
            kept = marks["install_end"] - marks["install_start"]
            install = marks["install_peak"] - marks["install_end"]
            assert kept >= SNAPSHOT_BYTES  # the state machine's values: the measure sees them
            assert transfer < BOUND, f"transfer peak {transfer / MIB:.1f} MiB"
            assert install < BOUND, f"install peak {install / MIB:.1f} MiB above the state"
        finally:
            tracemalloc.stop()
            if observer is not None:
                await observer.close(graceful=False)
            await leader.close(graceful=False)

    asyncio.run(main())
