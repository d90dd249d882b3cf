"""Real nodes' traces checked against the spec: a 3-node cluster on loopback elects, takes
appends, loses its leader to SIGKILL, elects another, takes more appends and gets the old
leader back; the three nodes' traces, merged in causal order, must be accepted by TLC's
trace validation (spec/TraceKRaft.tla, spec/README.md "Trace validation")."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from cluster_harness import FAST, kraft_cli, leader_of, make_cluster
from polling import kraft_info, wait_for

from kraft.client import Address, append
from kraft.cluster import LocalCluster, free_ports
from kraft.protocol import uuid_to_base64
from refinement.traces import merge_traces, validate_trace


def _leader(cluster: LocalCluster, nodes: list[int]) -> int:
    lead = wait_for("a leader", lambda: leader_of(cluster, nodes), 10.0)
    return lead.node_id  # type: ignore[attr-defined, no-any-return]


def _append_all(bootstrap: list[Address], prefix: str, n: int) -> int:
    """n single-record appends, a few at a time; the highest committed offset + 1."""

    async def run() -> int:
        end = 0
        for start in range(0, n, 5):
            acks = await asyncio.gather(
                *(
                    append(bootstrap, [f"{prefix}-{i}".encode()], timeout_ms=8000)
                    for i in range(start, min(start + 5, n))
                )
            )
            end = max(end, *(a.last_offset + 1 for a in acks))
        return end

    return asyncio.run(run())


@pytest.mark.tlc
def test_merged_traces_of_a_crash_and_restart_are_accepted_by_tlc(tmp_path: Path) -> None:
    t0 = time.monotonic()
    cluster = make_cluster(tmp_path, trace=True)
    nodes = list(cluster.node_ids)
    cluster.start()
    try:
        bootstrap = list(cluster.addresses.values())
        first = _leader(cluster, nodes)
        _append_all(bootstrap, "before", 20)

        cluster.kill(first)
        survivors = [n for n in nodes if n != first]
        second = _leader(cluster, survivors)
        assert second != first
        end = _append_all([cluster.addresses[n] for n in survivors], "after", 10)

        cluster.start(first)
        wait_for(
            "the restarted node to catch up",
            lambda: all(
                (i := kraft_info(cluster.addresses[n])) is not None
                and i.high_watermark is not None
                and i.high_watermark >= end
                for n in nodes
            ),
            timeout_s=15.0,
        )
    finally:
        codes = cluster.stop_all()
    assert codes == dict.fromkeys(nodes, 0)
    run_s = time.monotonic() - t0

    events = merge_traces(cluster.trace_path(n) for n in nodes)
    assert [e.index for e in events] == list(range(len(events)))
    # The SIGKILL left no line; the merge stands a Crash right before the Restart.
    restart = next(i for i, e in enumerate(events) if e.actions[:1] == ("Restart",))
    assert events[restart - 1].action == "Crash"
    assert events[restart - 1].node == events[restart].node == first

    res = validate_trace(events, timeout_s=120.0, voters=nodes)
    assert res.accepted, (
        f"first_unmatched={res.first_unmatched}\nevent={res.event}\n"
        f"state_before=\n{res.state_before}\n(cluster run {run_s:.1f} s)"
    )


# Snapshots every 4 KiB of records: a follower stopped early is left behind the leader's log
# start and catches up by FetchSnapshot.
SNAPSHOT_OVERRIDES = {
    **FAST,
    "metadata.log.max.record.bytes.between.snapshots": "4096",
    "metadata.log.segment.bytes": "8192",
    # Retention moves the log start to the newest snapshot at once.
    "metadata.max.retention.bytes": "0",
}


@pytest.mark.tlc
def test_merged_traces_of_a_snapshot_catch_up_are_accepted_by_tlc(tmp_path: Path) -> None:
    t0 = time.monotonic()
    cluster = LocalCluster(tmp_path, free_ports(3), overrides=SNAPSHOT_OVERRIDES, trace=True)
    cluster.format()
    nodes = list(cluster.node_ids)
    cluster.start()
    try:
        bootstrap = list(cluster.addresses.values())
        lead = _leader(cluster, nodes)
        _append_all(bootstrap, "first", 5)
        victim = next(n for n in nodes if n != lead)
        behind = kraft_info(cluster.addresses[victim])
        assert behind is not None
        assert cluster.stop(victim) == 0
        survivors = [n for n in nodes if n != victim]
        _append_all([cluster.addresses[n] for n in survivors], "x" * 200, 60)
        wait_for(
            "the leader's log start to pass the stopped follower's end",
            lambda: (
                (i := kraft_info(cluster.addresses[lead])) is not None
                and i.log_start_offset > behind.end_offset
            ),
            timeout_s=15.0,
        )
        cluster.start(victim)
        wait_for(
            "the restarted follower to install a snapshot",
            lambda: (
                (i := kraft_info(cluster.addresses[victim])) is not None
                and i.log_start_offset > behind.end_offset
            ),
            timeout_s=15.0,
        )
    finally:
        codes = cluster.stop_all()
    assert codes == dict.fromkeys(nodes, 0)
    run_s = time.monotonic() - t0

    events = merge_traces(cluster.trace_path(n) for n in nodes)
    taken = {a for e in events for a in e.actions}
    assert {"CreateSnapshot", "AdvanceLogStartOffset", "HandleFetchSnapshotResponse"} <= taken
    assert "InstallSnapshot" in taken
    res = validate_trace(events, timeout_s=300.0, voters=nodes)
    assert res.accepted, (
        f"first_unmatched={res.first_unmatched}\nevent={res.event}\n"
        f"state_before=\n{res.state_before}\n(cluster run {run_s:.1f} s)"
    )


@pytest.mark.tlc
@pytest.mark.slow
def test_merged_traces_of_voter_changes_are_accepted_by_tlc(tmp_path: Path) -> None:
    """KIP-853 on real nodes (how tests/refinement/fixtures/trace-node-voter-changes.ndjson
    was made): a dynamic quorum of 1, 2, 3 and node 4 observing through its bootstrap servers;
    `kraft quorum add-voter` makes 4 a voter, `remove-voter` removes the leader, which resigns
    once that commits; a leader of {1, 2, 4} is elected. The merged traces validate against
    KRaft.tla with Dynamic and VoterChanges (spec/README.md, "Trace validation")."""
    ports = free_ports(4)
    cluster = LocalCluster(tmp_path, ports[:3], overrides=FAST, dynamic=True, trace=True)
    cluster.add_observer(ports[3])
    cluster.format()
    voters, everyone = [1, 2, 3], [1, 2, 3, 4]
    cluster.start()
    try:
        _leader(cluster, voters)
        _append_all([cluster.addresses[n] for n in voters], "before", 3)
        wait_for(
            "node 4 to find the leader",
            lambda: (i := kraft_info(cluster.addresses[4])) is not None and i.leader_id is not None,
        )
        bootstrap = ",".join(str(cluster.addresses[n]) for n in voters)
        config = str(cluster.config_path(4))
        added = kraft_cli(
            "quorum", "add-voter", "--bootstrap", bootstrap, "--command-config", config
        )
        assert added.returncode == 0, added.stderr
        wait_for("four voters everywhere", lambda: _voters_are(cluster, everyone, everyone))
        gone = _leader(cluster, everyone)
        directory = uuid_to_base64(cluster.directory_ids[gone])
        removed = kraft_cli(
            "quorum", "remove-voter", "--bootstrap", bootstrap,
            "--controller-id", str(gone), "--controller-directory-id", directory,
        )  # fmt: skip
        assert removed.returncode == 0, removed.stderr
        rest = [n for n in everyone if n != gone]
        wait_for("three voters everywhere", lambda: _voters_are(cluster, everyone, rest), 20.0)
        assert _leader(cluster, rest) != gone
        _append_all([cluster.addresses[n] for n in rest], "after", 2)
    finally:
        codes = cluster.stop_all()
    assert codes == dict.fromkeys(everyone, 0)

    events = merge_traces(cluster.trace_path(n) for n in everyone)
    taken = {a for e in events for a in e.actions}
    assert {"AddVoter", "RemoveVoter", "Resign"} <= taken
    res = validate_trace(events, timeout_s=300.0, voters=voters)
    assert res.accepted, res.summary()


def _voters_are(cluster: LocalCluster, nodes: list[int], voters: list[int]) -> bool:
    infos = [kraft_info(cluster.addresses[n]) for n in nodes]
    return all(i is not None and sorted(i.voters) == voters for i in infos)
