"""LogStartExact (refinement.invariants_snapshot_rules): after every step of a replica, its log
start is exactly where KIP-630's rule, recomputed by the simulator, leaves it: a leader's at
the largest snapshot every replica that fetched within the fetch timeout has (or its latest
once the lag time passed), on each Fetch and snapshot it takes; a follower's at the largest
snapshot it holds at or below its leader's log start; unchanged on any other step."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kraft.core.leader import LeaderRole, LeaderState
from kraft.core.messages import FetchRequest
from kraft.core.snapshots import SnapshotRole
from kraft.ids import NodeId, Offset
from refinement import invariants_snapshot_rules as rules
from refinement.faults import PROFILES
from refinement.sim import SimConfig, simulate


def o(n: int) -> Offset:
    return Offset(n)


def test_the_leader_moves_to_the_largest_snapshot_every_live_replica_has() -> None:
    held = [o(10), o(20), o(30)]
    after = rules.leader_log_start_after
    assert after(o(0), held=held, end=o(40), fetch_offsets=[o(25), o(31)], lag_passed=False) == 20
    assert after(o(0), held=held, end=o(40), fetch_offsets=[o(30)], lag_passed=False) == 30
    assert after(o(0), held=held, end=o(40), fetch_offsets=[o(9)], lag_passed=False) == 0
    # Nobody fetched within the fetch timeout: up to its own log end, the latest snapshot.
    assert after(o(0), held=held, end=o(40), fetch_offsets=[], lag_passed=False) == 30
    # The lag time passed: the latest, whoever lags.
    assert after(o(10), held=held, end=o(40), fetch_offsets=[o(0)], lag_passed=True) == 30
    # Never back, and never to a snapshot at or below the log start.
    assert after(o(20), held=held, end=o(40), fetch_offsets=[o(15)], lag_passed=False) == 20
    assert after(o(30), held=held, end=o(40), fetch_offsets=[], lag_passed=True) == 30


def test_a_follower_moves_to_its_largest_snapshot_at_or_below_the_leaders_start() -> None:
    held = [o(10), o(20)]
    after = rules.follower_log_start_after
    assert after(o(0), held=held, leader_log_start=o(25)) == 20
    assert after(o(0), held=held, leader_log_start=o(20)) == 20
    assert after(o(0), held=held, leader_log_start=o(19)) == 10
    assert after(o(0), held=held, leader_log_start=o(5)) == 0
    assert after(o(20), held=held, leader_log_start=o(10)) == 20


def test_the_log_start_must_be_one_of_what_the_rule_allows() -> None:
    check = rules.log_start_exact
    me = NodeId(1)
    assert check(me, "s", before=o(0), after=o(20), allowed=(o(20),)) is None
    found = check(me, "s", before=o(0), after=o(10), allowed=(o(20),))
    assert found is not None and found.name == rules.LOG_START_EXACT
    assert check(me, "s", before=o(0), after=o(0), allowed=(o(0), o(20))) is None
    assert check(me, "s", before=o(0), after=o(10), allowed=(o(0), o(20))) is not None
    # A bound only: at least that, never back.
    assert check(me, "s", before=o(0), after=o(30), allowed=(), at_least=o(20)) is None
    assert check(me, "s", before=o(0), after=o(10), allowed=(), at_least=o(20)) is not None
    assert check(me, "s", before=o(30), after=o(20), allowed=(), at_least=o(20)) is not None


@pytest.mark.parametrize("profile", ["mixed+snapshots", "mixed+snapshots+reconfig"])
def test_the_core_moves_its_log_start_as_the_rule_says(profile: str) -> None:
    r = simulate(SimConfig(seed=3, profile=PROFILES[profile], max_events=800))
    assert r.ok, r.summary()


@pytest.fixture
def lazy_leader(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """leader.py: a leader that no longer moves its log start when it takes a Fetch (only
    when a snapshot is written), as mutant f96c4493ed10."""
    real_record = LeaderRole._record_fetch
    real_advance = SnapshotRole.maybe_advance_log_start
    inside = [False]

    def record(self: LeaderRole, ld: LeaderState, src: NodeId, req: FetchRequest) -> None:
        inside[0] = True
        try:
            real_record(self, ld, src, req)
        finally:
            inside[0] = False

    def advance(self: SnapshotRole, leader_log_start: Offset | None = None) -> None:
        if not inside[0]:
            real_advance(self, leader_log_start)

    monkeypatch.setattr(LeaderRole, "_record_fetch", record)
    monkeypatch.setattr(SnapshotRole, "maybe_advance_log_start", advance)
    yield


@pytest.mark.usefixtures("lazy_leader")
@pytest.mark.parametrize("profile", ["mixed+snapshots", "lossy+snapshots"])
def test_a_leader_that_waits_for_its_next_snapshot_is_caught(profile: str) -> None:
    runs = [
        simulate(SimConfig(seed=s, profile=PROFILES[profile], max_events=800)) for s in range(4)
    ]
    assert any(rules.LOG_START_EXACT in {v.name for v in r.violations} for r in runs)


def test_a_follower_that_runs_ahead_of_its_leader_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """snapshots.py: a follower that moves its log start to its latest snapshot on every
    answer of its leader, whatever the leader's log start."""
    real = SnapshotRole.maybe_advance_log_start

    def ahead(self: SnapshotRole, leader_log_start: Offset | None = None) -> None:
        real(self, None if leader_log_start is None else Offset(2**62))

    monkeypatch.setattr(SnapshotRole, "maybe_advance_log_start", ahead)
    runs = [
        simulate(SimConfig(seed=s, profile=PROFILES["mixed+snapshots"], max_events=800))
        for s in range(4)
    ]
    assert any(rules.LOG_START_EXACT in {v.name for v in r.violations} for r in runs)
