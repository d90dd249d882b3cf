"""A node that knows only `controller.quorum.bootstrap.servers` finds a dynamic quorum
(KIP-853): its storage states no voter set (formatted without --initial-controllers), so it
starts with no voter, fetches from a bootstrap server, learns the leader and its endpoint from
the answer, then fetches from the leader as an observer and learns the voter set from the
Voters record in the log. The leader's DescribeQuorum lists it as an observer; both describe
outputs print it as Kafka's tool does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_harness import FAST, dynamic_cluster, leader_of
from polling import kraft_info, wait_for

from kraft.cli import main as kraft_main
from kraft.client import append, describe_quorum
from kraft.client_voters import kraft_version_range
from kraft.cluster import LocalCluster, free_ports
from kraft.errors import ErrorCode


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with dynamic_cluster(tmp_path, observers=1, start=False) as c:
        yield c


def test_a_node_with_only_bootstrap_servers_observes_the_quorum(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    voters = (1, 2, 3)
    cluster.start()
    lead = wait_for("a leader", lambda: leader_of(cluster, voters), 60.0)
    ack = asyncio.run(
        append([cluster.addresses[n] for n in voters], [b"before"], timeout_ms=10_000)
    )
    observer = wait_for(
        "node 4 to follow the leader with the record",
        lambda: (
            (i := kraft_info(cluster.addresses[4])) is not None
            and i.leader_id == lead.node_id
            and i.end_offset > ack.last_offset
            and i
        ),
        60.0,
    )
    assert observer.state == "Follower"
    # It learned the voter set from the log, not from its configuration (which names none).
    assert sorted(observer.voters) == [1, 2, 3]
    # What a leader asked to add it probes (ApiVersions): it supports kraft.version 0 to 1.
    assert asyncio.run(kraft_version_range(cluster.addresses[4])) == (ErrorCode.NONE, (0, 1))

    report = asyncio.run(describe_quorum([cluster.addresses[1]]))
    assert [o.replica.id for o in report.description.observers] == [4]
    assert report.description.observers[0].replica.directory_id == cluster.directory_ids[4]

    capsys.readouterr()
    assert (
        kraft_main(["quorum", "describe", "--bootstrap", str(cluster.addresses[2]), "--status"])
        == 0
    )
    fields = {
        k.strip(): v.strip()
        for k, _, v in (line.partition(":") for line in capsys.readouterr().out.splitlines())
    }
    assert [o["id"] for o in json.loads(fields["CurrentObservers"])] == [4]
    assert sorted(v["id"] for v in json.loads(fields["CurrentVoters"])) == [1, 2, 3]

    # A leader change: the observer follows the next leader (found among the voters now).
    cluster.stop(lead.node_id)
    rest = tuple(n for n in voters if n != lead.node_id)
    second = wait_for("a new leader", lambda: leader_of(cluster, rest), 60.0)
    ack2 = asyncio.run(append([cluster.addresses[n] for n in rest], [b"after"], timeout_ms=10_000))
    wait_for(
        "node 4 to follow the new leader",
        lambda: (
            (i := kraft_info(cluster.addresses[4])) is not None
            and i.leader_id == second.node_id
            and i.end_offset > ack2.last_offset
        ),
        60.0,
    )


def test_an_observer_learns_the_voters_from_the_snapshot_it_installs(tmp_path: Path) -> None:
    """The leader's log starts past its Voters record (snapshots, retention at once): the
    bootstrap-only node fetches a snapshot (KIP-630) and takes the voter set, with the voters'
    endpoints, from it; it then finds the next leader among those voters by itself."""
    small = {
        **FAST,
        "metadata.log.max.record.bytes.between.snapshots": "4096",
        "metadata.log.segment.bytes": "8192",
        "metadata.max.retention.bytes": "0",
    }
    ports = free_ports(4)
    c = LocalCluster(tmp_path, ports[:3], overrides=small, dynamic=True)
    c.add_observer(ports[3])
    c.format()
    voters = (1, 2, 3)
    for n in voters:
        c.start(n)
    try:
        lead = wait_for("a leader", lambda: leader_of(c, voters), 60.0)

        async def fill() -> int:
            last = 0
            for i in range(150):
                ack = await append([c.addresses[n] for n in voters], [b"x" * 200 + b"%d" % i])
                last = ack.last_offset
            return last

        last = asyncio.run(fill())
        wait_for(
            "the leader's log start to pass its Voters record",
            lambda: (
                (i := kraft_info(c.addresses[lead.node_id])) is not None and i.log_start_offset > 10
            ),
        )
        c.start(4)
        info = wait_for(
            "node 4 to install a snapshot and follow the leader",
            lambda: (
                (i := kraft_info(c.addresses[4])) is not None
                and i.leader_id == lead.node_id
                and i.log_start_offset > 0
                and i.end_offset > last
                and i
            ),
            60.0,
        )
        assert sorted(info.voters) == [1, 2, 3]
        c.stop(lead.node_id)
        rest = tuple(n for n in voters if n != lead.node_id)
        second = wait_for("a new leader", lambda: leader_of(c, rest), 60.0)
        wait_for(
            "node 4 to follow the new leader",
            lambda: (i := kraft_info(c.addresses[4])) is not None and i.leader_id == second.node_id,
            60.0,
        )
    finally:
        c.stop_all()
