"""Issue #15's disk-failure recovery (KIP-856, done with KIP-853's voter changes) end to end on
a real loopback cluster, driven through the `kraft` command line exactly as the README's runbook
"Replacing a failed controller's disk" tells an operator: a dynamic quorum of three voters
under a steady stream of appends; voter 3's disk is replaced (stopped, wiped, `kraft format
--no-initial-controllers` with the same cluster id and node id: a new directory id); it restarts
as an observer and catches up; `kraft quorum remove-voter` removes the old identity (3, OLD),
then `kraft quorum add-voter` adds (3, NEW). Adding first is refused (DUPLICATE_VOTER: a voter
set holds one voter per id, as Kafka's VoterSet.addVoter). The quorum ends as {1, 2, (3, NEW)},
every acknowledged record is on every node and it accepts appends."""

from __future__ import annotations

import asyncio
import shutil
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
from kraft.protocol import uuid_to_base64
from kraft.storage.meta_properties import read_meta_properties

NODES = [1, 2, 3]
REPLACED = 3


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with dynamic_cluster(tmp_path) as c:
        yield c


def _replication(bootstrap: str) -> list[tuple[int, str, int, str]]:
    """`kraft quorum describe --replication` rows: (node id, directory id, lag, status)."""
    done = kraft_cli("quorum", "describe", "--bootstrap", bootstrap, "--replication")
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()[1:] if line.strip()]
    return [(int(r[0]), r[1], int(r[3]), r[-1]) for r in rows]


def _rows_of(bootstrap: str, node: int) -> list[tuple[str, int, str]]:
    return [(d, lag, s) for n, d, lag, s in _replication(bootstrap) if n == node]


def test_a_voter_whose_disk_is_replaced_rejoins_under_its_new_directory_id(
    cluster: LocalCluster,
) -> None:
    bootstrap = ",".join(str(cluster.addresses[n]) for n in NODES)
    old = uuid_to_base64(cluster.directory_ids[REPLACED])
    wait_for("a leader", lambda: leader_of(cluster, NODES))
    with BackgroundWriter([cluster.addresses[n] for n in NODES]) as writer:
        wait_for("some appends", lambda: len(writer.acked) >= 20)

        # 1. The disk fails: the node stops, its data directory is gone.
        assert cluster.stop(REPLACED) == 0
        shutil.rmtree(cluster.data_dir(REPLACED))
        wait_for("appends without it", lambda: len(writer.acked) >= 40)

        # 2. The new disk is formatted to join the existing quorum: same cluster id and node
        # id, no bootstrap voters (a new directory id).
        formatted = kraft_cli(
            "format",
            "--data-dir",
            str(cluster.data_dir(REPLACED)),
            "--cluster-id",
            cluster.cluster_id,
            "--node-id",
            str(REPLACED),
            "--no-initial-controllers",
        )
        assert formatted.returncode == 0, formatted.stderr
        new = uuid_to_base64(read_meta_properties(cluster.data_dir(REPLACED)).directory_id)
        assert new != old

        # 3. It starts as an observer and catches up; the old identity is still a voter.
        cluster.start(REPLACED)
        wait_for(
            "node 3 to observe with its new directory id, caught up",
            lambda: (new, 0, "Observer") in _rows_of(bootstrap, REPLACED),
        )
        assert (old, "Follower") in {(d, s) for d, _, s in _rows_of(bootstrap, REPLACED)}
        info = kraft_info(cluster.addresses[REPLACED])
        assert info is not None and info.state not in ("Leader", "Candidate")

        # Adding first is refused: one voter per id, and id 3 is still a voter (old identity).
        early = kraft_cli(
            "quorum", "add-voter", "--bootstrap", bootstrap, "--command-config",
            str(cluster.config_path(REPLACED)),
        )  # fmt: skip
        assert early.returncode != 0
        assert "DUPLICATE_VOTER" in early.stderr + early.stdout

        # 4. The old identity is removed (it is down: {1, 2} keep a majority) ...
        removed = kraft_cli(
            "quorum", "remove-voter", "--bootstrap", bootstrap,
            "--controller-id", str(REPLACED), "--controller-directory-id", old,
        )  # fmt: skip
        assert removed.returncode == 0, removed.stderr
        assert removed.stdout.startswith(
            f"Removed  KRaft controller {REPLACED} with directory id {old}"
        )
        # ... and 5. the new one added.
        added = kraft_cli(
            "quorum", "add-voter", "--bootstrap", bootstrap, "--command-config",
            str(cluster.config_path(REPLACED)),
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        assert added.stdout.startswith(f"Added controller {REPLACED} with directory id {new}")

        wait_for(
            "three voters on every node",
            lambda: all(
                (i := kraft_info(cluster.addresses[n])) is not None and sorted(i.voters) == NODES
                for n in NODES
            ),
        )
        count = len(writer.acked)
        wait_for("appends to the new quorum", lambda: len(writer.acked) >= count + 20)

    # The voter set is {1, 2, (3, NEW)}. (The leader may still list (3, OLD) among its observers
    # until that replica state expires, as Kafka's LeaderState keeps a removed voter's.)
    report = asyncio.run(describe_quorum([cluster.addresses[n] for n in NODES]))
    voters = {
        (r.replica.id, uuid_to_base64(r.replica.directory_id)) for r in report.description.voters
    }
    kept = {(n, uuid_to_base64(cluster.directory_ids[n])) for n in NODES if n != REPLACED}
    assert voters == {*kept, (REPLACED, new)}
    observers = {
        (r.replica.id, uuid_to_base64(r.replica.directory_id)) for r in report.description.observers
    }
    assert (REPLACED, new) not in observers

    # The cluster still accepts appends, and every acknowledged record is on every node.
    last = asyncio.run(append([cluster.addresses[n] for n in NODES], [b"after"], 8000))
    acked = {**writer.acked, last.base_offset: b"after"}
    assert_acknowledged_everywhere(cluster, NODES, acked)
    assert cluster.stop_all() == dict.fromkeys(NODES, 0)
