"""KIP-642 reassignment end to end on a real loopback cluster (issue #15): a dynamic quorum of
voters {1,2,3} and three observers 4, 5, 6; under a steady stream of appends, `kraft quorum
reassign --voters-from` (the new nodes' configuration files) moves the voters to {4,5,6} one
change at a time, the leader removed last. Afterwards the leader's DescribeQuorum names
exactly the new voters, every acknowledged record is on each of them, and the quorum still
accepts appends."""

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

from kraft.client import append, describe_quorum
from kraft.cluster import LocalCluster

OLD = [1, 2, 3]
NEW = [4, 5, 6]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with dynamic_cluster(tmp_path, observers=3) as c:
        yield c


def test_voters_123_are_reassigned_to_456_under_load_with_no_acknowledged_record_lost(
    cluster: LocalCluster,
) -> None:
    everyone = OLD + NEW
    wait_for("a leader", lambda: leader_of(cluster, OLD))
    for n in NEW:
        wait_for(
            f"node {n} to fetch as an observer",
            lambda n=n: (
                (i := kraft_info(cluster.addresses[n])) is not None and i.leader_id is not None
            ),
        )
    bootstrap = ",".join(str(cluster.addresses[n]) for n in OLD)
    configs = [str(cluster.config_path(n)) for n in NEW]

    dry = kraft_cli(
        "quorum", "reassign", "--bootstrap", bootstrap, "--dry-run", "--voters-from", *configs
    )
    assert dry.returncode == 0, dry.stderr
    plan = [line.strip() for line in dry.stdout.splitlines() if line.startswith("  ")]
    assert [p.split(" voter ")[0] for p in plan] == ["1. add", "2. add", "3. add"] + [
        f"{i}. remove" for i in (4, 5, 6)
    ]
    report = asyncio.run(describe_quorum([cluster.addresses[n] for n in OLD]))
    assert plan[-1].startswith(f"6. remove voter {report.description.leader_id} ")

    with BackgroundWriter([cluster.addresses[n] for n in everyone], prefix="r") as writer:
        wait_for("some appends", lambda: len(writer.acked) >= 20)
        done = kraft_cli("quorum", "reassign", "--bootstrap", bootstrap, "--voters-from", *configs)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Reassigned: the voters are 4, 5, 6" in done.stdout
        assert done.stdout.count(" committed in ") == 6
        before = len(writer.acked)
        wait_for("appends after the reassignment", lambda: len(writer.acked) >= before + 20)

    report = asyncio.run(describe_quorum([cluster.addresses[n] for n in NEW]))
    keys = {(r.replica.id, r.replica.directory_id) for r in report.description.voters}
    assert keys == {(n, cluster.directory_ids[n]) for n in NEW}
    assert report.description.leader_id in NEW

    assert_acknowledged_everywhere(cluster, NEW, writer.acked)
    # The new quorum alone still takes appends.
    ack = asyncio.run(append([cluster.addresses[n] for n in NEW], [b"after"], 10_000))
    assert ack.leader_id in NEW
    assert cluster.stop_all() == dict.fromkeys(everyone, 0)


def test_a_refused_step_stops_the_reassignment_with_the_step_named(cluster: LocalCluster) -> None:
    wait_for("a leader", lambda: leader_of(cluster, OLD))
    cluster.stop(4)  # node 4 does not fetch: the leader cannot add it
    bootstrap = ",".join(str(cluster.addresses[n]) for n in OLD)
    configs = [str(cluster.config_path(n)) for n in (2, 3, 4)]
    out = kraft_cli(
        "quorum",
        "reassign",
        "--bootstrap",
        bootstrap,
        "--timeout-ms",
        "3000",
        "--voters-from",
        *configs,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "step 1 (add voter 4 " in out.stderr
    # The step was shown as it started, never as committed.
    assert "Step 1/2: add voter 4 " in out.stdout
    assert " committed in " not in out.stdout
    report = asyncio.run(describe_quorum([cluster.addresses[n] for n in OLD]))
    assert {r.replica.id for r in report.description.voters} == set(OLD)
