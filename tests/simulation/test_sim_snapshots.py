"""KIP-630 in the simulator: the "snapshots" profile runs seeds 0-49 with every checker on and
no violation, and replicas catch up by FetchSnapshot; SnapshotMatchesLog fires on hand-built
violations; the history a snapshot carries and a log starting after it read back as one."""

from __future__ import annotations

import dataclasses

import pytest
from memory_logs import build_log
from test_invariants import cache, cluster, node

from kraft.ids import Epoch, Offset, OffsetAndEpoch
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

    def shifted(sid: OffsetAndEpoch, epochs: inv.EpochCache, padding: int = 0) -> bytes:
        if len(epochs) > 1:
            last, start = epochs[-1]
            epochs = (*epochs[:-1], (last, Offset(start + 1)))
        return real(sid, epochs, padding)

    monkeypatch.setattr(sim_snapshots, "encode_history", shifted)
    names = {v.name for seed in range(10) for v in run(seed).violations}
    assert inv.SNAPSHOT_MATCHES_LOG in names
