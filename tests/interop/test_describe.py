"""Describing a quorum across implementations: Kafka's kafka-metadata-quorum
(MetadataQuorumCommand --bootstrap-controller) describes a kraft quorum, and `kraft quorum
describe` describes a Kafka quorum, with --status and --replication."""

from __future__ import annotations

import json
import random

import pytest
from describe_compare import assert_same_replication, assert_same_status
from kafka_harness import (
    METADATA_QUORUM,
    Procs,
    kafka_nodes,
    kraft_cli,
    kraft_cluster,
    ports_for,
    run_tool,
    voters_string,
)
from polling import kraft_info, wait_for

from kraft.storage.meta_properties import generate_cluster_id

pytestmark = pytest.mark.interop


def _status_fields(output: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in output.splitlines():
        if ":" in line:
            key, value = line.split(":", 1)
            fields[key.strip()] = value.strip()
    return fields


def _replication_rows(output: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip().split("\t")]
        for line in output.splitlines()
        if line.strip()
    ]


REPLICATION_HEADER = [
    "NodeId",
    "DirectoryId",
    "LogEndOffset",
    "Lag",
    "LastFetchTimestamp",
    "LastCaughtUpTimestamp",
    "Status",
]


def test_kafka_metadata_quorum_command_describes_a_kraft_quorum(procs: Procs) -> None:
    cluster_id = generate_cluster_id(random.Random())
    voter_ports = ports_for([1, 2, 3])
    voters = voters_string(voter_ports)
    cluster = kraft_cluster(
        procs, {**voter_ports, **ports_for([4])}, voters, cluster_id, trace=False
    )
    cluster.start()
    lead = wait_for(
        "a kraft leader followed by every voter and the observer",
        lambda: _kraft_leader(cluster.addresses.values()),
    )
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in voter_ports.values())

    status = run_tool(
        procs.root, METADATA_QUORUM, ["--bootstrap-controller", bootstrap, "describe", "--status"]
    )
    assert status.returncode == 0, f"{status.stdout}\n{status.stderr}"
    fields = _status_fields(status.stdout)
    assert fields["ClusterId"] == cluster_id
    assert int(fields["LeaderId"]) == lead
    assert int(fields["LeaderEpoch"]) >= 1
    assert int(fields["HighWatermark"]) >= 1
    assert sorted(v["id"] for v in json.loads(fields["CurrentVoters"])) == [1, 2, 3]
    assert [o["id"] for o in json.loads(fields["CurrentObservers"])] == [4]

    ours = kraft_cli("quorum", "describe", "--bootstrap", bootstrap, "--status")
    assert ours.returncode == 0, ours.stderr
    assert_same_status(ours.stdout, status.stdout)

    repl = run_tool(
        procs.root,
        METADATA_QUORUM,
        ["--bootstrap-controller", bootstrap, "describe", "--replication"],
    )
    assert repl.returncode == 0, f"{repl.stdout}\n{repl.stderr}"
    rows = _replication_rows(repl.stdout)
    assert rows[0] == REPLICATION_HEADER
    statuses = {int(r[0]): r[6] for r in rows[1:]}
    assert statuses == {
        lead: "Leader",
        **{n: "Follower" for n in (1, 2, 3) if n != lead},
        4: "Observer",
    }
    ours = kraft_cli("quorum", "describe", "--bootstrap", bootstrap, "--replication")
    assert ours.returncode == 0, ours.stderr
    assert_same_replication(ours.stdout, repl.stdout)


def _kraft_leader(addresses: object) -> int | None:
    infos = [kraft_info(a) for a in addresses]  # type: ignore[attr-defined]
    leaders = [i for i in infos if i is not None and i.state == "Leader"]
    if len(leaders) != 1 or any(
        i is None or i.leader_id != leaders[0].node_id or i.epoch != leaders[0].epoch for i in infos
    ):
        return None
    return int(leaders[0].node_id)


def test_kraft_quorum_describe_describes_a_kafka_quorum(procs: Procs) -> None:
    cluster_id = generate_cluster_id(random.Random())
    ports = ports_for([1, 2, 3])
    kafka = kafka_nodes(procs, ports, voters_string(ports), cluster_id)
    for k in kafka.values():
        k.start()
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports.values())

    def described() -> dict[str, str] | None:
        done = kraft_cli("quorum", "describe", "--bootstrap", bootstrap, "--status")
        if done.returncode != 0:
            return None
        fields = _status_fields(done.stdout)
        # Every voter has fetched from the leader (the leader knows their end offsets).
        return fields if int(fields.get("MaxFollowerLag", "-1")) >= 0 else None

    fields = wait_for("kraft quorum describe --status to answer", described, timeout_s=90.0)
    assert fields["ClusterId"] == cluster_id
    leader = int(fields["LeaderId"])
    assert leader in kafka
    state = kafka[leader].quorum_state()
    assert state is not None
    assert int(fields["LeaderEpoch"]) >= int(state["leaderEpoch"])  # type: ignore[call-overload]
    assert int(fields["HighWatermark"]) >= 1
    assert sorted(v["id"] for v in json.loads(fields["CurrentVoters"])) == [1, 2, 3]
    assert json.loads(fields["CurrentObservers"]) == []

    repl = kraft_cli("quorum", "describe", "--bootstrap", bootstrap, "--replication")
    assert repl.returncode == 0, repl.stderr
    rows = _replication_rows(repl.stdout)
    assert rows[0] == REPLICATION_HEADER
    statuses = {int(r[0]): r[6] for r in rows[1:]}
    assert statuses[leader] == "Leader"
    assert sorted(statuses.values()) == ["Follower", "Follower", "Leader"]

    # Kafka's own tool on the same quorum, each right before ours: the same output but the
    # offsets and times the Kafka leader moves between the two runs.
    for flag, same in (
        ("--replication", assert_same_replication),
        ("--status", assert_same_status),
    ):
        theirs = run_tool(
            procs.root, METADATA_QUORUM, ["--bootstrap-controller", bootstrap, "describe", flag]
        )
        assert theirs.returncode == 0, f"{theirs.stdout}\n{theirs.stderr}"
        ours = kraft_cli("quorum", "describe", "--bootstrap", bootstrap, flag)
        assert ours.returncode == 0, ours.stderr
        same(ours.stdout, theirs.stdout, moving=True)
