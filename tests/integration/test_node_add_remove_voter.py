"""Voter changes end to end on a real loopback cluster (KIP-853, issue #15): a dynamic quorum
of three voters and a fourth node that knows only `controller.quorum.bootstrap.servers` (an
observer). Under a steady stream of appends, `kraft quorum add-voter` (given the fourth node's
configuration file, as kafka-metadata-quorum add-controller is) makes it a voter, then
`kraft quorum remove-voter` takes a follower out. Every node ends with the voter set the log
states, the leader's DescribeQuorum agrees, and no acknowledged record is lost on any node."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_harness import (
    BackgroundWriter,
    assert_acknowledged_everywhere,
    dynamic_cluster,
    kraft_cli,
    leader_of,
)
from polling import kraft_info, wait_for

from kraft.client import describe_quorum
from kraft.cluster import LocalCluster
from kraft.protocol import uuid_to_base64


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with dynamic_cluster(tmp_path, observers=1) as c:
        yield c


def _voters_everywhere(cluster: LocalCluster, nodes: list[int], voters: list[int]) -> bool:
    infos = [kraft_info(cluster.addresses[n]) for n in nodes]
    return all(i is not None and sorted(i.voters) == voters for i in infos)


def test_an_observer_is_added_and_a_voter_removed_with_no_acknowledged_record_lost(
    cluster: LocalCluster,
) -> None:
    voters = [1, 2, 3]
    everyone = [1, 2, 3, 4]
    lead = wait_for("a leader", lambda: leader_of(cluster, voters))
    with BackgroundWriter([cluster.addresses[n] for n in voters]) as writer:
        wait_for("some appends", lambda: len(writer.acked) >= 20)
        # Node 4 observes: it found the leader through its bootstrap servers.
        wait_for(
            "node 4 to fetch as an observer",
            lambda: (i := kraft_info(cluster.addresses[4])) is not None and i.leader_id is not None,
        )
        bootstrap = ",".join(str(cluster.addresses[n]) for n in voters)
        added = kraft_cli(
            "quorum",
            "add-voter",
            "--bootstrap",
            bootstrap,
            "--command-config",
            str(cluster.config_path(4)),
        )
        assert added.returncode == 0, added.stderr
        assert added.stdout.startswith(
            f"Added controller 4 with directory id {uuid_to_base64(cluster.directory_ids[4])}"
        )
        wait_for(
            "four voters on every node", lambda: _voters_everywhere(cluster, everyone, everyone)
        )
        info = kraft_info(cluster.addresses[4])
        assert info is not None and info.state in ("Follower", "Leader")

        leader_now = wait_for("a leader of four", lambda: leader_of(cluster, everyone))
        gone = next(n for n in voters if n != leader_now.node_id)
        removed = kraft_cli(
            "quorum",
            "remove-voter",
            "--bootstrap",
            bootstrap,
            "--controller-id",
            str(gone),
            "--controller-directory-id",
            uuid_to_base64(cluster.directory_ids[gone]),
        )
        assert removed.returncode == 0, removed.stderr
        rest = [n for n in everyone if n != gone]
        wait_for("three voters on every node", lambda: _voters_everywhere(cluster, everyone, rest))
        wait_for("more appends", lambda: len(writer.acked) >= 60, timeout_s=60)
    assert lead is not None

    report = asyncio.run(describe_quorum([cluster.addresses[n] for n in rest]))
    keys = {(r.replica.id, r.replica.directory_id) for r in report.description.voters}
    assert keys == {(n, cluster.directory_ids[n]) for n in rest}
    assert gone in {r.replica.id for r in report.description.observers}

    assert_acknowledged_everywhere(cluster, everyone, writer.acked)
    assert cluster.stop_all() == dict.fromkeys(everyone, 0)
