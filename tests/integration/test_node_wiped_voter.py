"""Issue #15's data-loss scenario on a real 3-node loopback cluster with a dynamic quorum
(formatted with `kraft format --initial-controllers`, KIP-853): records are acknowledged by
two voters while the third is down (it goes stale); then one of the two has its data
directory wiped and reformatted (a new directory id) and the other is stopped. The wiped node
and the stale one are two of three ids: as voters they would elect the stale node and lose the
acknowledged records. The wiped node is an observer, never the voter it was, so the quorum
stays unavailable until the node holding the records returns, and then nothing acknowledged
is lost."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_harness import FAST, assert_acknowledged_everywhere, leader_of
from polling import kraft_info, wait_for

from kraft.client import Address, AppendAck, ClientError, append, describe_quorum
from kraft.cluster import LocalCluster, free_ports
from kraft.protocol import uuid_to_base64
from kraft.storage.bootstrap import stated_voters
from kraft.storage.meta_properties import read_meta_properties
from kraft.storage.segmented_log import LOG_DIR_NAME, SegmentedLog
from kraft.storage.snapshot_directory import latest_snapshot

# Node n's directory id as --initial-controllers gives it.
DIRECTORIES = {n: uuid.UUID(int=(0xD1 << 64) | n, version=4) for n in (1, 2, 3)}


def _format(cluster: LocalCluster, node: int, *extra: str) -> None:
    args = [
        "format",
        "--data-dir",
        str(cluster.data_dir(node)),
        "--node-id",
        str(node),
        "--cluster-id",
        cluster.cluster_id,
        *extra,
    ]
    done = subprocess.run(
        [sys.executable, "-m", "kraft.cli", *args], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """Formatted through `kraft format --initial-controllers` (the command line), configured
    with static voters' addresses too: the storage's voter set must win over them."""
    c = LocalCluster(tmp_path, free_ports(3), overrides=FAST)
    controllers = ",".join(
        f"{n}@{a.host}:{a.port}:{uuid_to_base64(DIRECTORIES[n])}" for n, a in c.addresses.items()
    )
    for n in c.node_ids:
        _format(c, n, "--initial-controllers", controllers)
    c.format()  # writes the configuration files; every directory is formatted already
    c.start()
    try:
        yield c
    finally:
        c.stop_all()


def _append(bootstrap: list[Address], prefix: str, n: int, acked: dict[int, bytes]) -> None:
    async def run() -> None:
        for i in range(n):
            value = f"{prefix}-{i}".encode()
            ack: AppendAck = await append(bootstrap, [value], timeout_ms=8000)
            acked[ack.base_offset] = value

    asyncio.run(run())


def _leads(cluster: LocalCluster, node: int) -> bool:
    info = kraft_info(cluster.addresses[node])
    return info is not None and info.state == "Leader"


def test_a_wiped_and_reformatted_voter_cannot_help_a_stale_voter_lose_records(
    cluster: LocalCluster,
) -> None:
    nodes = list(cluster.node_ids)
    first = wait_for("a leader", lambda: leader_of(cluster, nodes))
    info = kraft_info(cluster.addresses[1])
    assert info is not None and info.directory_id == DIRECTORIES[1]
    acked: dict[int, bytes] = {}
    _append(list(cluster.addresses.values()), "all", 10, acked)

    # A voter goes down; two voters acknowledge more records without it.
    stale = next(n for n in nodes if n != first.node_id)
    assert cluster.stop(stale) == 0
    pair = [n for n in nodes if n != stale]
    lead = wait_for("a leader of the two", lambda: leader_of(cluster, pair))
    _append([cluster.addresses[n] for n in pair], "pair", 30, acked)
    holder = lead.node_id
    wiped = next(n for n in pair if n != holder)

    # The follower of the two loses its disk: reformatted (no bootstrap: a new directory id).
    assert cluster.stop(wiped) == 0
    shutil.rmtree(cluster.data_dir(wiped))
    _format(cluster, wiped)
    new_directory = read_meta_properties(cluster.data_dir(wiped)).directory_id
    assert new_directory != DIRECTORIES[wiped]
    # The node holding the records stops; the wiped node and the stale one come (back) up.
    assert cluster.stop(holder) == 0
    cluster.start(stale)
    cluster.start(wiped)
    wait_for(
        "both nodes to answer",
        lambda: all(kraft_info(cluster.addresses[n]) is not None for n in (stale, wiped)),
    )
    wiped_info = kraft_info(cluster.addresses[wiped])
    assert wiped_info is not None and wiped_info.directory_id == new_directory
    # Two of three ids, but one voter: no leader may be elected among them. Watched over many
    # election timeouts (300 ms): with the wiped node taken for voter `wiped`, the stale node
    # wins its first election.
    watch_until = time.monotonic() + 6.0
    while time.monotonic() < watch_until:
        assert not _leads(cluster, stale) and not _leads(cluster, wiped)
        time.sleep(0.1)
    with pytest.raises((ClientError, OSError, TimeoutError)):
        asyncio.run(append([cluster.addresses[stale]], [b"never"], timeout_ms=1000))

    # The holder returns: the quorum is whole again, with every acknowledged record.
    cluster.start(holder)
    wait_for("a leader", lambda: leader_of(cluster, [holder, stale]), timeout_s=30)
    _append([cluster.addresses[n] for n in nodes], "after", 5, acked)
    assert_acknowledged_everywhere(cluster, nodes, acked)
    # The leader counts the wiped node among its observers, under its new directory id.
    report = asyncio.run(describe_quorum([cluster.addresses[holder]]))
    observers = {(r.replica.id, r.replica.directory_id) for r in report.description.observers}
    assert (wiped, new_directory) in observers
    # The voters, named with the directory ids of the log's voter set (KIP-853).
    voter_keys = {(r.replica.id, r.replica.directory_id) for r in report.description.voters}
    assert voter_keys == {(n, DIRECTORIES[n]) for n in nodes}
    codes = cluster.stop_all()
    assert codes == dict.fromkeys(nodes, 0)


def test_snapshots_of_a_dynamic_quorum_carry_its_voter_set(tmp_path: Path) -> None:
    """Once snapshots and the log start move past the bootstrap checkpoint and the leader's
    Voters record, the voter set (with directory ids) is still stated by the storage: every
    snapshot carries it (KRaftVersion 1 and Voters in its header batch)."""
    small = {
        **FAST,
        "metadata.log.max.record.bytes.between.snapshots": "4096",
        "metadata.log.segment.bytes": "8192",
        # Retention moves the log start to the newest snapshot at once.
        "metadata.max.retention.bytes": "0",
    }
    c = LocalCluster(tmp_path, free_ports(3), overrides=small, dynamic=True)
    c.format()  # bootstrap checkpoints; controller.quorum.bootstrap.servers only
    assert "controller.quorum.voters" not in c.config_path(1).read_text(encoding="utf-8")
    c.start()
    try:
        lead = wait_for("a leader", lambda: leader_of(c, c.node_ids))
        acked: dict[int, bytes] = {}
        _append(list(c.addresses.values()), "x" * 200, 150, acked)
        wait_for(
            "the leader's log start to advance",
            lambda: (
                (i := kraft_info(c.addresses[lead.node_id])) is not None and i.log_start_offset > 0
            ),
        )
        assert c.stop(lead.node_id) == 0
        partition = c.data_dir(lead.node_id) / LOG_DIR_NAME
        # quorum-state as Kafka writes it for kraft.version 1 (the voted directory id).
        state = json.loads((partition / "quorum-state").read_text(encoding="utf-8"))
        assert state["data_version"] == 1 and "votedDirectoryId" in state
        snapshot = latest_snapshot(partition)
        assert snapshot is not None and snapshot.snapshot_id.offset > 0
        assert snapshot.kraft_version == 1 and snapshot.voters is not None
        keys = {(v.voter_id, v.voter_directory_id) for v in snapshot.voters.voters}
        assert keys == {(n, c.directory_ids[n]) for n in c.node_ids}
        with SegmentedLog.open(c.data_dir(lead.node_id)) as log_:
            stated = stated_voters(snapshot, log_)
            assert log_.start_offset > 0
        assert stated.latest is not None and stated.kraft_version == 1
        # It starts again from that storage and rejoins the quorum.
        c.start(lead.node_id)
        wait_for("the quorum whole again", lambda: leader_of(c, c.node_ids), timeout_s=30)
    finally:
        c.stop_all()
