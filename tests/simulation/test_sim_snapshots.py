"""KIP-630 in the simulator: the "snapshots" profile runs seeds 0-49 with every checker on and
no violation, and replicas catch up by FetchSnapshot; every snapshot checker (SnapshotMatchesLog
with its committed clause, LogStartAtSnapshot, SnapshotIntact, LogStartBelowLiveReplicas) fires
on hand-built violations and passes correct states; the history a snapshot carries and a log
starting after it read back as one. (The other snapshot profiles: test_sim_snapshot_profiles;
the mutants: test_sim_mutants.)"""

from __future__ import annotations

import dataclasses

import pytest
from memory_logs import build_log
from test_invariants import cache, cluster, node

from kraft.control_records import VotersRecord
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch
from kraft.storage.memory_log import MemoryLog
from kraft.storage.memory_snapshots import snapshot_problem
from refinement import invariants as inv
from refinement.faults import PROFILES
from refinement.invariants import NodeState
from refinement.sim import SimConfig, SimResult, simulate
from refinement.sim_snapshots import combined_epochs, decode_history, encode_history

SID = OffsetAndEpoch(offset=Offset(6), epoch=Epoch(2))


def with_snapshots(n: NodeState, *held: tuple[OffsetAndEpoch, inv.EpochCache]) -> NodeState:
    return dataclasses.replace(n, snapshots=held)


# --------------------------------------------------------------------------- the sweep


def run(seed: int) -> SimResult:
    return simulate(SimConfig(seed=seed, profile=PROFILES["snapshots"]))


@pytest.mark.parametrize("first", range(0, 50, 10))
def test_the_snapshots_profile_holds_every_invariant_and_transfers_snapshots(first: int) -> None:
    results = [run(seed) for seed in range(first, first + 10)]
    for r in results:
        assert r.ok, r.summary()
        assert r.snapshots_written > 0, r.summary()
    # Replicas that fell behind caught up from a snapshot fetched chunk by chunk.
    assert sum(r.snapshots_installed for r in results) > 0


def test_other_profiles_take_no_snapshots() -> None:
    r = simulate(SimConfig(seed=0, profile=PROFILES["mixed"], max_events=300))
    assert r.ok and r.snapshots_written == 0 and r.snapshots_installed == 0


# --------------------------------------------------------------------------- history codec


def test_a_snapshot_carries_its_history_in_kafkas_layout() -> None:
    history = cache((1, 0), (2, 4))
    data = encode_history(SID, history)
    assert snapshot_problem(SID, data) is None
    assert decode_history(data) == history


def test_a_log_after_a_snapshot_reads_back_as_one_history() -> None:
    log: MemoryLog = build_log([(1, 4), (2, 2), (2, 3)])
    log.advance_start_offset(Offset(6))
    assert combined_epochs(log, cache((1, 0), (2, 4))) == cache((1, 0), (2, 4))
    assert combined_epochs(build_log([(1, 3)]), ()) == cache((1, 0))


# --------------------------------------------------------------------------- SnapshotMatchesLog


def test_snapshot_matches_log_passes_a_consistent_state() -> None:
    history = cache((1, 0), (2, 4))
    a = with_snapshots(node(1, epochs=history, end=9, hwm=9), (SID, history))
    b = with_snapshots(node(2, epochs=history, end=9, hwm=7), (SID, history))
    assert inv.snapshot_matches_log(cluster(a, b)) is None


def test_snapshot_matches_log_fires_on_one_id_with_two_histories() -> None:
    a = with_snapshots(node(1, epochs=cache((1, 0), (2, 4)), end=9), (SID, cache((1, 0), (2, 4))))
    b = with_snapshots(node(2, epochs=cache((1, 0), (2, 3)), end=9), (SID, cache((1, 0), (2, 3))))
    found = inv.snapshot_matches_log(cluster(a, b))
    assert found is not None and found.name == inv.SNAPSHOT_MATCHES_LOG


def test_snapshot_matches_log_fires_when_a_snapshot_disagrees_with_committed_records() -> None:
    snap = cache((1, 0), (2, 4))
    a = with_snapshots(node(1, epochs=snap, end=6), (SID, snap))
    # Node 2 committed offsets 0-4 in epoch 1 only: offset 4 differs from the snapshot.
    b = node(2, epochs=cache((1, 0)), end=9, hwm=5)
    found = inv.snapshot_matches_log(cluster(a, b))
    assert found is not None and found.name == inv.SNAPSHOT_MATCHES_LOG
    # Above node 2's HWM the records are not committed: no violation.
    assert inv.snapshot_matches_log(cluster(a, dataclasses.replace(b, high_watermark=4))) is None


def test_snapshot_matches_log_fires_on_a_snapshot_ending_in_another_epoch() -> None:
    snap = cache((1, 0))  # offset 5 in epoch 1, but the id says epoch 2
    a = with_snapshots(node(1, epochs=snap, end=6), (SID, snap))
    found = inv.snapshot_matches_log(cluster(a))
    assert found is not None and found.name == inv.SNAPSHOT_MATCHES_LOG


def test_log_mirror_fires_on_a_log_start_the_replica_does_not_know() -> None:
    n = dataclasses.replace(node(1), log_start_offset=Offset(4))
    found = inv.log_mirror(cluster(n))
    assert found is not None and found.name == inv.LOG_MIRROR


def test_a_transfer_that_corrupts_the_history_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mutant driver: the snapshot's bytes move the start of its last epoch one offset
    later than the log it was taken from (the record there has the previous epoch). The
    snapshot still ends in its id's epoch; SnapshotMatchesLog fires against the logs."""
    from refinement import sim_snapshots

    real = sim_snapshots.encode_history

    def shifted(
        sid: OffsetAndEpoch,
        epochs: inv.EpochCache,
        padding: int = 0,
        voters: VotersRecord | None = None,
    ) -> bytes:
        if len(epochs) > 1:
            last, start = epochs[-1]
            epochs = (*epochs[:-1], (last, Offset(start + 1)))
        return real(sid, epochs, padding, voters)

    monkeypatch.setattr(sim_snapshots, "encode_history", shifted)
    names = {v.name for seed in range(10) for v in run(seed).violations}
    assert inv.SNAPSHOT_MATCHES_LOG in names


# --------------------------------------------------------------------------- LogStartAtSnapshot


def test_log_start_at_snapshot_fires_on_a_log_start_without_a_snapshot() -> None:
    history = cache((1, 0), (2, 4))
    ok = with_snapshots(
        dataclasses.replace(node(1, epochs=history, end=9), log_start_offset=Offset(6)),
        (SID, history),
    )
    assert inv.log_start_at_snapshot(cluster(ok)) is None
    assert inv.log_start_at_snapshot(cluster(node(2))) is None  # a log from 0 needs none
    broken = dataclasses.replace(ok, log_start_offset=Offset(7))
    found = inv.log_start_at_snapshot(cluster(broken))
    assert found is not None and found.name == inv.LOG_START_AT_SNAPSHOT
    gone = dataclasses.replace(ok, snapshots=())
    found = inv.log_start_at_snapshot(cluster(gone))
    assert found is not None and found.name == inv.LOG_START_AT_SNAPSHOT


def test_the_simulator_reports_a_log_start_left_without_its_snapshot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A mutant driver that deletes every snapshot when it advances the log start."""
    from kraft.storage.memory_snapshots import MemorySnapshots

    def delete_all(self: MemorySnapshots, _sid: OffsetAndEpoch) -> None:
        self.complete = {}

    monkeypatch.setattr(MemorySnapshots, "delete_before", delete_all)
    names = {v.name for seed in range(5) for v in run(seed).violations}
    assert names == {inv.LOG_START_AT_SNAPSHOT}


# --------------------------------------------------------------------------- committed clause


def test_snapshot_matches_log_fires_on_a_snapshot_past_the_committed_history() -> None:
    history = cache((1, 0), (2, 4))
    a = with_snapshots(node(1, epochs=history, end=9), (SID, history))
    committed = (history, Offset(6))
    assert inv.snapshot_matches_log(cluster(a, committed=committed)) is None
    # Committed only up to 5: the snapshot holds offset 5, which is not committed.
    found = inv.snapshot_matches_log(cluster(a, committed=(history, Offset(5))))
    assert found is not None and found.name == inv.SNAPSHOT_MATCHES_LOG
    # Committed up to 6, but offset 4 committed in epoch 1: the snapshot holds another record.
    found = inv.snapshot_matches_log(cluster(a, committed=(cache((1, 0)), Offset(6))))
    assert found is not None and found.name == inv.SNAPSHOT_MATCHES_LOG


def test_a_leader_exposing_a_hwm_over_another_committed_history_is_caught() -> None:
    """The simulator's committed history only grows: a leader whose log below its HWM differs
    from what was committed breaks CommittedNeverLost."""
    from refinement.sim import Simulator

    sim = Simulator(SimConfig(seed=0, profile=PROFILES["lossy+snapshots"]))
    lead = node(1, state=inv.ReplicaState.LEADER, epochs=cache((1, 0)), end=9, hwm=5)
    assert sim._commit_ghost(lead) is None
    assert sim._committed == (cache((1, 0)), Offset(5))
    other = node(2, state=inv.ReplicaState.LEADER, epoch=2, epochs=cache((1, 0), (2, 3)), hwm=7)
    found = sim._commit_ghost(other)
    assert found is not None and found.name == inv.COMMITTED_NEVER_LOST


# --------------------------------------------------------------------------- SnapshotIntact


def test_snapshot_intact_fires_on_a_corrupt_or_partial_snapshot() -> None:
    data = encode_history(SID, cache((1, 0), (2, 4)), padding=50)
    assert inv.snapshot_intact(NodeId(1), SID, data) is None
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    for broken in (bytes(flipped), data[: len(data) - 10], data + b"\0"):
        found = inv.snapshot_intact(NodeId(1), SID, broken)
        assert found is not None and found.name == inv.SNAPSHOT_INTACT
    other_epoch = OffsetAndEpoch(offset=SID.offset, epoch=Epoch(3))
    found = inv.snapshot_intact(NodeId(1), other_epoch, data)
    assert found is not None and found.name == inv.SNAPSHOT_INTACT


def test_padding_is_not_part_of_the_history() -> None:
    history = cache((1, 0), (2, 4))
    assert decode_history(encode_history(SID, history, padding=1000)) == history


# --------------------------------------------------------------------------- LogStartBelowLive...


def move(**kw: object) -> inv.LogStartMove:
    """Leader 1 moves its log start to 20 at 10 s, 500 ms after it last moved (lag 1 s);
    replica 2 fetched from 15 at 9 s (fetch timeout 2 s)."""
    fetched = {NodeId(2): (9_000, Offset(15))}
    m = inv.LogStartMove(NodeId(1), Epoch(1), Offset(20), 10_000, 9_500, 1000, 2000, fetched)
    return dataclasses.replace(m, **kw)  # type: ignore[arg-type]


def test_log_start_below_live_replicas_fires_past_a_live_replica() -> None:
    found = inv.log_start_below_live_replicas(move())
    assert found is not None and found.name == inv.LOG_START_BELOW_LIVE_REPLICAS
    # Allowed: the replica fetched past it, or is not live, or the lag time passed.
    assert inv.log_start_below_live_replicas(move(fetched={NodeId(2): (9_000, Offset(20))})) is None
    assert inv.log_start_below_live_replicas(move(fetched={NodeId(2): (7_999, Offset(15))})) is None
    assert inv.log_start_below_live_replicas(move(since=9_000)) is None


# --------------------------------------------------------------------------- disk loss


def test_epoch_monotonic_allows_a_fresh_epoch_after_disk_loss_only() -> None:
    before = node(4, epoch=5)
    after = dataclasses.replace(node(4, epoch=0), incarnation=1)
    found = inv.epoch_monotonic(cluster(before), cluster(after))
    assert found is not None and found.name == inv.EPOCH_MONOTONIC
    wiped = dataclasses.replace(after, wiped=1)
    assert inv.epoch_monotonic(cluster(before), cluster(wiped)) is None
