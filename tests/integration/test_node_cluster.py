"""A real 3-node cluster: election, committed appends, leader crash, restart, no loss."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_harness import (
    FAST,
    assert_acknowledged_everywhere,
    committed_records,
    leader_of,
    make_cluster,
)
from polling import kraft_info, wait_for

from kraft.client import Address, AppendAck, ClientError, append
from kraft.client_read import read
from kraft.cluster import LocalCluster, free_ports
from kraft.trace_format import read_trace


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = make_cluster(tmp_path, trace=True)
    c.start()
    try:
        yield c
    finally:
        c.stop_all()


def _leader(cluster: LocalCluster, nodes: list[int], timeout_s: float = 10.0) -> int:
    lead = wait_for("a leader", lambda: leader_of(cluster, nodes), timeout_s)
    return lead.node_id  # type: ignore[attr-defined, no-any-return]


async def _append_many(
    bootstrap: list[Address], prefix: str, n: int, acked: dict[int, bytes]
) -> list[str]:
    """Append n single-record batches concurrently; record what was acknowledged."""

    async def one(i: int) -> None:
        value = f"{prefix}-{i}".encode()
        ack: AppendAck = await append(bootstrap, [value], timeout_ms=8000)
        assert ack.base_offset == ack.last_offset
        acked[ack.base_offset] = value

    results = await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)
    return [str(r) for r in results if isinstance(r, BaseException)]


def test_elect_append_kill_leader_restart_and_nothing_acknowledged_is_lost(
    cluster: LocalCluster,
) -> None:
    nodes = list(cluster.node_ids)
    bootstrap = list(cluster.addresses.values())
    first = _leader(cluster, nodes)

    acked: dict[int, bytes] = {}
    failures = asyncio.run(_append_many(bootstrap, "before", 30, acked))
    assert failures == []
    assert len(acked) == 30

    # Crash the leader while appends are in flight: some may fail, none may be falsely acked.
    async def appends_during_crash() -> list[str]:
        task = asyncio.create_task(_append_many(bootstrap, "during", 20, acked))
        await asyncio.sleep(0.05)
        cluster.kill(first)
        return await task

    asyncio.run(appends_during_crash())
    survivors = [n for n in nodes if n != first]
    # The wait only bounds a run that cannot elect (a failover takes about a second here).
    second = _leader(cluster, survivors, timeout_s=30.0)
    assert second != first

    live = [cluster.addresses[n] for n in survivors]
    assert asyncio.run(_append_many(live, "after", 20, acked)) == []

    cluster.start(first)
    assert_acknowledged_everywhere(cluster, nodes, acked)
    logs = {n: committed_records(cluster, n) for n in nodes}
    # The committed prefixes agree record for record (LogMatching on what was read).
    shortest = min(len(r) for r in logs.values())
    prefixes = [sorted(r.items())[:shortest] for r in logs.values()]
    assert prefixes[0] == prefixes[1] == prefixes[2]

    # Every node wrote a trace the simulator's trace reader accepts; the first leader's shows
    # its election, and (restarted) its return as a follower of the new leader.
    events = read_trace(cluster.trace_path(first))
    assert [e.index for e in events] == list(range(len(events)))
    assert events[0].action == "Start"
    assert [e.action for e in events].count("Restart") == 1
    actions = {a for e in events for a in e.actions}
    assert {"ElectionTimeout", "BecomeLeader", "ClientAppend", "HandleFetchRequest"} <= actions
    assert {"HandleFetchResponse"} <= actions
    last = events[-1].state
    assert last is not None and last["leader"] == second
    assert set(last) == {
        "state", "epoch", "votedFor", "leader", "endOffset", "lastEpoch", "hwm", "logStartOffset"
    }  # fmt: skip

    codes = cluster.stop_all()
    assert codes == dict.fromkeys(nodes, 0)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kraft.cli", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_quorum_describe_prints_kafka_fields(cluster: LocalCluster) -> None:
    nodes = list(cluster.node_ids)
    leader = _leader(cluster, nodes)
    boot = ",".join(str(a) for a in cluster.addresses.values())
    done = _cli("append", "--bootstrap", boot, "a", "b")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("committed offsets ")

    status = _cli("quorum", "describe", "--bootstrap", boot, "--status")
    assert status.returncode == 0, status.stderr
    fields = dict(line.split(":", 1) for line in status.stdout.splitlines())
    assert list(fields) == [
        "ClusterId",
        "LeaderId",
        "LeaderEpoch",
        "HighWatermark",
        "MaxFollowerLag",
        "MaxFollowerLagTimeMs",
        "CurrentVoters",
        "CurrentObservers",
    ]
    assert fields["ClusterId"].strip() == cluster.cluster_id
    assert int(fields["LeaderId"]) == leader
    assert int(fields["HighWatermark"]) >= 3  # LeaderChange + the two records
    assert [v["id"] for v in json.loads(fields["CurrentVoters"])] == nodes
    assert json.loads(fields["CurrentObservers"]) == []
    # Kafka pads every label to 24 characters.
    assert all(line[23] != " " or line.index(":") < 23 for line in status.stdout.splitlines())

    repl = _cli("quorum", "describe", "--bootstrap", boot, "--replication")
    assert repl.returncode == 0, repl.stderr
    rows = [line.rstrip("\t").split("\t") for line in repl.stdout.splitlines()]
    assert [c.strip() for c in rows[0]] == [
        "NodeId",
        "DirectoryId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    statuses = {int(r[0]): r[6].strip() for r in rows[1:]}
    assert statuses[leader] == "Leader"
    assert sorted(statuses.values()) == ["Follower", "Follower", "Leader"]

    read_out = _cli("read", "--bootstrap", str(cluster.addresses[leader]), "--from", "0")
    assert read_out.returncode == 0, read_out.stderr
    assert read_out.stdout.splitlines()[-2:] == ["1\ta", "2\tb"]


def test_graceful_leader_shutdown_hands_over_by_end_quorum_epoch(tmp_path: Path) -> None:
    # Followers here would wait ten minutes before a missing leader's silence makes them
    # stand, so a new leader within the wait below can only come from the EndQuorumEpoch a
    # leader sends when it shuts down cleanly (elections from scratch use the 300 ms timeout).
    patient = {**FAST, "controller.quorum.fetch.timeout.ms": "600000"}
    cluster = LocalCluster(tmp_path, free_ports(3), overrides=patient)
    cluster.format()
    cluster.start()
    try:
        _hand_over(cluster)
    finally:
        cluster.stop_all()


def _hand_over(cluster: LocalCluster) -> None:
    nodes = list(cluster.node_ids)
    first = _leader(cluster, nodes)
    assert cluster.stop(first) == 0
    survivors = [n for n in nodes if n != first]
    second = _leader(cluster, survivors, timeout_s=60.0)
    assert second != first
    ack = asyncio.run(append([cluster.addresses[n] for n in survivors], [b"x"], timeout_ms=5000))
    assert ack.leader_id == second


def test_a_follower_redirects_appends_and_reads_only_committed(cluster: LocalCluster) -> None:
    nodes = list(cluster.node_ids)
    leader = _leader(cluster, nodes)
    follower = next(n for n in nodes if n != leader)
    ack = asyncio.run(append([cluster.addresses[follower]], [b"v1", b"v2"], timeout_ms=5000))
    assert ack.leader_id == leader
    assert ack.last_offset == ack.base_offset + 1
    wait_for(
        "the follower to learn the new high watermark",
        lambda: (
            (i := kraft_info(cluster.addresses[follower])) is not None
            and (i.high_watermark or 0) > ack.last_offset
        ),
    )
    got = asyncio.run(read(cluster.addresses[follower], ack.base_offset))
    assert got.records == ((ack.base_offset, b"v1"), (ack.last_offset, b"v2"))
    with pytest.raises(ClientError, match="OFFSET_OUT_OF_RANGE"):
        asyncio.run(read(cluster.addresses[follower], 10_000))


def test_a_second_node_on_a_live_data_directory_refuses_to_start(cluster: LocalCluster) -> None:
    _leader(cluster, list(cluster.node_ids))
    done = _cli("start", "--config", str(cluster.config_path(1)), "--listener", "127.0.0.1:0")
    assert done.returncode == 1
    assert "is in use by another process" in done.stderr
    assert kraft_info(cluster.addresses[1]) is not None
