"""KIP-630 under every fault profile: each base profile has a NAME+snapshots variant with its
faults and snapshots (a base profile itself takes none: its golden traces do not change), and
disk-loss empties observers. Seeds 0-9 of every snapshot profile hold every checker, and
together they move chunks that are lost, delivered stale (duplicated or reordered) and
corrupted, crash replicas right after every step of a transfer, abandon transfers on a leader
change, and catch emptied observers up from a snapshot."""

from __future__ import annotations

import dataclasses
import functools
import io
import json
from collections import Counter

import pytest

from refinement import invariants as inv
from refinement.faults import BASE_PROFILES, PROFILES, SNAPSHOT_PROFILES
from refinement.sim import SimConfig, SimResult, simulate

SEEDS = range(10)
SWEPT = [p for p in SNAPSHOT_PROFILES if p != "snapshots"]  # that one: test_sim_snapshots


@functools.cache
def run(profile: str, seed: int) -> SimResult:
    return simulate(SimConfig(seed=seed, profile=PROFILES[profile]))


def test_every_base_profile_has_a_snapshot_variant_with_its_faults() -> None:
    for base in BASE_PROFILES:
        assert not base.snapshots
        assert base.corrupt == base.transfer_crash == base.disk_loss_rate == 0
        assert base.observers == 0
        variant = PROFILES[f"{base.name}+snapshots"]
        assert variant.snapshots
        for field in ("loss", "duplicate", "jitter_ms", "partition_rate", "crash_rate",
                      "shutdown_rate", "max_down"):  # fmt: skip
            assert getattr(variant, field) == getattr(base, field), (base.name, field)
        # Mid-transfer crashes only where the base crashes nodes, corruption where it loses
        # messages.
        assert (variant.transfer_crash > 0) == base.has_node_faults
        assert (variant.corrupt > 0) == (base.loss > 0)


def test_disk_loss_empties_observers_only() -> None:
    p = PROFILES["disk-loss"]
    assert p.snapshots and p.disk_loss_rate > 0 and p.observers > 0
    out = io.StringIO()
    result = simulate(SimConfig(seed=0, profile=p), trace=out)
    assert result.ok, result.summary()
    voters = SimConfig().voters
    lost = [json.loads(line)["node"] for line in out.getvalue().splitlines()
            if json.loads(line)["action"] == "LoseDisk"]  # fmt: skip
    assert lost and len(lost) == result.disk_losses
    assert all(n > voters for n in lost), lost


@pytest.mark.parametrize("profile", SWEPT)
def test_every_snapshot_profile_holds_every_invariant(profile: str) -> None:
    results = [run(profile, seed) for seed in SEEDS]
    for r in results:
        assert r.ok, r.summary()
    assert sum(r.snapshots_written for r in results) > 0
    if profile != "none+snapshots":  # without faults no replica falls behind a log start
        assert sum(r.snapshots_installed for r in results) > 0


def test_the_sweeps_reach_every_transfer_fault() -> None:
    totals: Counter[str] = Counter()
    steps: Counter[str] = Counter()
    for profile in SWEPT:
        for seed in SEEDS:
            r = run(profile, seed)
            for name in ("chunks_lost", "chunks_stale", "chunks_corrupted",
                         "transfers_leader_changed", "installed_after_disk_loss"):  # fmt: skip
                totals[name] += getattr(r, name)
            steps.update(r.transfer_crashes)
    assert all(totals[n] > 0 for n in totals), totals
    # (mixed+snapshots+reconfig also counts its crashes mid-change: AddVoter, RemoveVoter)
    transfer = {"WriteSnapshotChunk", "ValidateSnapshot", "InstallSnapshot"}
    assert set(steps) - {"AddVoter", "RemoveVoter"} == transfer, steps


def test_eventually_caught_up_fires_when_an_observer_cannot_catch_up() -> None:
    """An observer that never gets a record (its Fetch answers that carry no error are thrown
    away unread; an error answer is read, so it still learns the epochs, as AnswerEpochAdopted asks)
    does not catch up after the faults heal: the liveness phase of disk-loss names it."""
    from kraft.core.effects import ActionTaken
    from kraft.core.events import Event, Receive
    from kraft.core.messages import FetchResponse, FetchSnapshotResponse
    from kraft.core.vocabulary import Action
    from kraft.errors import ErrorCode
    from refinement.sim import NodeSetup, SimReplica, core_replica_factory

    HANDLED = {
        FetchResponse: Action.HANDLE_FETCH_RESPONSE,
        FetchSnapshotResponse: Action.HANDLE_FETCH_SNAPSHOT_RESPONSE,
    }

    class Deaf:
        def __init__(self, inner: SimReplica) -> None:
            self.inner = inner

        def start(self) -> list[object]:
            return self.inner.start()  # type: ignore[return-value]

        def step(self, event: Event) -> list[object]:
            if (
                isinstance(event, Receive)
                and isinstance(event.message, FetchResponse | FetchSnapshotResponse)
                and event.message.error is ErrorCode.NONE
            ):
                # Handled and thrown away: the step names its action (as every handled
                # message must, ActionTakenForEveryHandledMessage) and does nothing else.
                return [ActionTaken(HANDLED[type(event.message)])]
            return self.inner.step(event)  # type: ignore[return-value]

        def next_deadline_ms(self) -> int:
            return self.inner.next_deadline_ms()

        def view(self) -> object:
            return self.inner.view()

    def factory(setup: NodeSetup) -> SimReplica:
        replica = core_replica_factory(setup)
        return Deaf(replica) if setup.node.id > 3 else replica  # type: ignore[return-value]

    r = simulate(SimConfig(seed=0, profile=PROFILES["disk-loss"]), replica_factory=factory)
    assert [v.name for v in r.violations] == [inv.EVENTUALLY_CAUGHT_UP], r.summary()


def test_leftover_appends_are_decided_once_observers_caught_up() -> None:
    """Regression: the liveness phase decided the appends no live replica had decided yet, then
    waited for the observers to catch up; meanwhile the former leader that accepted one of
    them decided it itself (AppendCommitted for an append already decided). Now the phase waits
    for the observers first and decides the leftovers only when it ends."""
    harsh = dataclasses.replace(
        PROFILES["mixed"],
        name="harsh",
        snapshot_rate=10.0,
        start_offset_lag_ms=200,
        fetch_max_bytes=400,
        snapshot_padding=3000,
        corrupt=0.05,
        transfer_crash=0.1,
        disk_loss_rate=1.0,
        observers=2,
    )
    r = simulate(SimConfig(seed=20, profile=harsh))
    assert r.ok, r.summary()
    assert r.disk_losses > 0
