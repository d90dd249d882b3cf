"""Kafka's kafka-metadata-quorum (MetadataQuorumCommand --bootstrap-controller) on a dynamic
kraft quorum led by kraft (KIP-853): `describe --status/--replication` prints what `kraft
quorum describe` prints, cell for cell but the times; `add-controller` (reading the kraft
node's configuration file and meta.properties, as it does for a Kafka controller) and
`remove-controller` change the kraft leader's voter set, exit 0 and print what they print
against a Kafka leader; Kafka's errors (DUPLICATE_VOTER, VOTER_NOT_FOUND) come back as Kafka's
exceptions with Kafka's texts (the voter set in Java's HashSet order). Its `remove-controller
--dry-run` prints byte for byte what ours prints. Last, Kafka's tool removes the kraft leader
itself: it answers once the change commits, resigns, and a new kraft leader takes over; the
tool adds it back.

One kraft cluster (three voters, one observer) and twelve runs of Kafka's tool (under a second
each on an idle machine)."""

from __future__ import annotations

import json
import subprocess

import pytest
from describe_compare import (
    REPLICATION_HEADER,
    assert_same_replication,
    assert_same_status,
    observer_ids,
    replication_rows,
    status_fields,
    voter_ids,
)
from kafka_harness import METADATA_QUORUM, Procs, kraft_cli, ports_for, quorum_timeouts, run_tool
from polling import wait_for

from kraft.cluster import LocalCluster
from kraft.core.java_order import voter_keys_text
from kraft.ids import NodeId, ReplicaKey
from kraft.protocol import uuid_to_base64

pytestmark = pytest.mark.interop

WAIT_S = 60.0


def _kafka(procs: Procs, bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_tool(procs.root, METADATA_QUORUM, ["--bootstrap-controller", bootstrap, *args])


def _ours(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return kraft_cli("quorum", *args, "--bootstrap", bootstrap)


def _settled(bootstrap: str, voters: list[int], observers: list[int]) -> dict[str, str] | None:
    """Our --status once the leader has these voters and observers, every one of them has
    fetched (no -1 timestamps that a fetch could turn into a time between two runs) and all
    are caught up (an idle kraft quorum's offsets then stay put)."""
    status = _ours(bootstrap, "describe", "--status")
    repl = _ours(bootstrap, "describe", "--replication")
    if status.returncode != 0 or repl.returncode != 0:
        return None
    fields = status_fields(status.stdout)
    if voter_ids(fields) != voters or observer_ids(fields) != observers:
        return None
    rows = [[c.strip() for c in row] for row in replication_rows(repl.stdout)[1:]]
    if any(r[3] != "0" or r[4] == "-1" or r[5] == "-1" for r in rows):
        return None
    return fields


def _compare_describe(procs: Procs, bootstrap: str, *flags: str) -> None:
    """Both tools on the same quorum, Kafka's first, ours right after (each of `flags` the
    options of one run)."""
    for flag in flags:
        theirs = _kafka(procs, bootstrap, "describe", *flag.split())
        assert theirs.returncode == 0, f"{theirs.stdout}\n{theirs.stderr}"
        ours = _ours(bootstrap, "describe", *flag.split())
        assert ours.returncode == 0, ours.stderr
        same = assert_same_status if flag == "--status" else assert_same_replication
        same(ours.stdout, theirs.stdout)


def _add_line(node: int, directory: str, port: int) -> str:
    return (
        f"Added controller {node} with directory id {directory} and endpoints: "
        f"CONTROLLER://127.0.0.1:{port}\n"
    )


def test_kafka_metadata_quorum_describes_adds_and_removes_on_a_kraft_leader(
    procs: Procs,
) -> None:
    ports = ports_for([1, 2, 3, 4])
    cluster = LocalCluster(
        procs.root / "kraft",
        [ports[n] for n in (1, 2, 3)],
        dynamic=True,
        # Timeouts generous enough that no election happens between two runs on a busy
        # machine (the tables compare the leader's epoch exactly). The configuration files
        # as LocalCluster writes them are what Kafka's add-controller reads.
        overrides=quorum_timeouts(1500, 3000, kraft=True),
    )
    procs.track(cluster)
    assert cluster.add_observer(ports[4]) == 4
    cluster.format()
    cluster.start()
    directory = {n: uuid_to_base64(d) for n, d in cluster.directory_ids.items()}
    everyone = ",".join(str(cluster.addresses[n]) for n in (1, 2, 3))

    fields = wait_for(
        "a kraft leader with voters 1-3 and observer 4, all caught up",
        lambda: _settled(everyone, [1, 2, 3], [4]),
        WAIT_S,
    )
    assert fields["ClusterId"] == cluster.cluster_id
    _compare_describe(procs, everyone, "--status", "--replication")

    # --dry-run: ours prints what Kafka's add-controller prints, and for remove-controller
    # exactly what Kafka's --dry-run prints.
    config4 = str(cluster.config_path(4))
    add4 = ["add-controller", "--command-config", config4, "--dry-run"]
    ours_dry = kraft_cli("quorum", *add4, "--bootstrap", everyone)
    assert ours_dry.returncode == 0, ours_dry.stderr
    dry_add = "DRY RUN of adding" + _add_line(4, directory[4], ports[4]).removeprefix("Added")
    assert ours_dry.stdout == dry_add
    remove4 = ["remove-controller", "--controller-id", "4", "--controller-directory-id"]
    kafka_dry = _kafka(procs, everyone, *remove4, directory[4], "--dry-run")
    ours_dry = kraft_cli("quorum", *remove4, directory[4], "--bootstrap", everyone, "--dry-run")
    assert kafka_dry.returncode == ours_dry.returncode == 0, kafka_dry.stderr + ours_dry.stderr
    assert ours_dry.stdout == kafka_dry.stdout

    # add-controller through a follower or the observer alone: Kafka's admin client finds
    # the kraft leader through DescribeCluster.
    leader = int(fields["LeaderId"])
    follower = next(n for n in (1, 2, 3) if n != leader)
    added = _kafka(procs, str(cluster.addresses[4]), "--command-config", config4, "add-controller")
    assert added.returncode == 0, f"{added.stdout}\n{added.stderr}"
    assert added.stdout == _add_line(4, directory[4], ports[4])
    wait_for("voters 1-4, caught up", lambda: _settled(everyone, [1, 2, 3, 4], []), WAIT_S)
    _compare_describe(procs, str(cluster.addresses[follower]), "--status")

    # Kafka's refusals from a kraft leader: Kafka's exceptions with Kafka's text (the voter
    # set in its HashSet's order), exit 1.
    def replica(n: int, d: str) -> str:
        return f"ReplicaKey(id={n}, directoryId={d})"

    voters = voter_keys_text(ReplicaKey(NodeId(n), cluster.directory_ids[n]) for n in (1, 2, 3, 4))
    again = _kafka(procs, everyone, "--command-config", config4, "add-controller")
    assert again.returncode == 1, again.stderr
    assert again.stderr.splitlines()[0] == (
        "org.apache.kafka.common.errors.DuplicateVoterException: The voter id for "
        f"{replica(4, directory[4])} is already part of the set of voters {voters}."
    )
    wrong = _kafka(procs, everyone, *remove4, directory[1])
    assert wrong.returncode == 1, wrong.stderr
    assert wrong.stderr.splitlines()[0] == (
        "org.apache.kafka.common.errors.VoterNotFoundException: Cannot remove voter "
        f"{replica(4, directory[1])} from the set of voters {voters}"
    )

    removed = _kafka(procs, everyone, *remove4, directory[4])
    assert removed.returncode == 0, f"{removed.stdout}\n{removed.stderr}"
    # Kafka's text, its two spaces included.
    assert removed.stdout == f"Removed  KRaft controller 4 with directory id {directory[4]}\n"
    wait_for("voters 1-3 and observer 4 again", lambda: _settled(everyone, [1, 2, 3], [4]), WAIT_S)
    _compare_describe(procs, everyone, "--replication --human-readable")

    # The kraft leader removed by Kafka's tool: answered once committed; it resigns and
    # another kraft node leads; the tool adds it back (an observer now, caught up).
    gone = _kafka(
        procs,
        str(cluster.addresses[follower]),
        "remove-controller",
        "-i",
        str(leader),
        "-d",
        directory[leader],
    )
    assert gone.returncode == 0, f"{gone.stdout}\n{gone.stderr}"
    rest = sorted(n for n in (1, 2, 3) if n != leader)
    after = wait_for(
        f"a new leader among {rest}, node {leader} an observer",
        lambda: _settled(everyone, rest, sorted([leader, 4])),
        WAIT_S,
    )
    assert int(after["LeaderId"]) in rest
    assert int(after["LeaderEpoch"]) > int(fields["LeaderEpoch"])
    _compare_describe(procs, everyone, "--status")
    back = _kafka(
        procs, everyone, "--command-config", str(cluster.config_path(leader)), "add-controller"
    )
    assert back.returncode == 0, f"{back.stdout}\n{back.stderr}"
    assert back.stdout == _add_line(leader, directory[leader], ports[leader])
    final = wait_for("voters 1-3 again", lambda: _settled(everyone, [1, 2, 3], [4]), WAIT_S)
    # In id order, as a Kafka leader's VoterSet lists them, not the re-added voter last.
    assert [v["id"] for v in json.loads(final["CurrentVoters"])] == [1, 2, 3]
    assert cluster.stop_all() == {1: 0, 2: 0, 3: 0, 4: 0}


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return "".join(
        "".join(f"{x:<{w}}\t" for x, w in zip(r, widths, strict=True)) + "\n" for r in rows
    )


def test_describe_compare_catches_a_difference() -> None:
    """The comparison is not vacuous: a changed id, a reordered row or a lost pad fails,
    a moved time does not."""
    status = "".join(
        f"{k + ':':<24}{v}\n"
        for k, v in [
            ("ClusterId", "c"),
            ("LeaderId", "1"),
            ("LeaderEpoch", "2"),
            ("HighWatermark", "3"),
            ("MaxFollowerLag", "0"),
            ("MaxFollowerLagTimeMs", "5"),
            ("CurrentVoters", '[{"id": 1}]'),
            ("CurrentObservers", "[]"),
        ]
    )
    assert_same_status(status, status.replace("TimeMs:   5", "TimeMs:   7"))
    for broken in (
        status.replace('"id": 1', '"id": 2'),
        status.replace("LeaderId:               1", "LeaderId: 1"),
        status.replace("TimeMs:   5", "TimeMs:   -1"),
    ):
        with pytest.raises(AssertionError):
            assert_same_status(status, broken)
    header = list(REPLICATION_HEADER)
    leader = ["1", "AA", "3", "0", "100", "100", "Leader"]
    follower = ["2", "BB", "3", "0", "200", "200", "Follower"]
    table = _table([header, leader, follower])
    assert_same_replication(
        table, _table([header, leader, [*follower[:4], "300", "300", "Follower"]])
    )
    for broken in (
        _table([header, leader, [follower[0], "CC", *follower[2:]]]),
        _table([header, follower, leader]),
        table.replace("Leader  \t", "Leader\t"),
        _table([header, leader, [*follower[:4], "-1", "200", "Follower"]]),
        _table([header, leader, [*follower[:4], "200 ms ago", "200", "Follower"]]),
    ):
        with pytest.raises(AssertionError):
            assert_same_replication(table, broken)
