"""The reassignment planner (kraft.reassign): single-member steps, new replicas first, the
leader removed last, never an empty voter set, intersecting majorities between steps."""

from __future__ import annotations

import uuid
from itertools import combinations, pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.ids import DirectoryId, NodeId, ReplicaKey
from kraft.reassign import (
    ReassignError,
    Step,
    StepKind,
    apply_step,
    plan_reassignment,
    voter_sets,
)


def key(n: int, d: int = 0) -> ReplicaKey:
    return ReplicaKey(NodeId(n), DirectoryId(uuid.UUID(int=1000 * n + d + 1)))


def majorities(s: frozenset[ReplicaKey]) -> list[frozenset[ReplicaKey]]:
    q = len(s) // 2 + 1
    return [frozenset(c) for c in combinations(sorted(s), q)]


def majorities_overlap(a: frozenset[ReplicaKey], b: frozenset[ReplicaKey]) -> bool:
    return all(qa & qb for qa in majorities(a) for qb in majorities(b))


def test_123_to_456_adds_first_and_removes_the_leader_last() -> None:
    steps = plan_reassignment([key(1), key(2), key(3)], [key(4), key(5), key(6)], NodeId(2))
    assert steps == (
        Step(StepKind.ADD, key(4)),
        Step(StepKind.ADD, key(5)),
        Step(StepKind.ADD, key(6)),
        Step(StepKind.REMOVE, key(1)),
        Step(StepKind.REMOVE, key(3)),
        Step(StepKind.REMOVE, key(2)),
    )
    assert voter_sets([key(1), key(2), key(3)], steps)[-1] == {key(4), key(5), key(6)}


def test_the_target_already_reached_is_an_empty_plan() -> None:
    assert plan_reassignment([key(1), key(2)], [key(2), key(1)], NodeId(1)) == ()


def test_a_replaced_directory_is_removed_then_added() -> None:
    steps = plan_reassignment([key(1), key(2), key(3)], [key(1), key(2), key(3, 7)], NodeId(1))
    assert steps == (Step(StepKind.REMOVE, key(3)), Step(StepKind.ADD, key(3, 7)))


def test_refusals() -> None:
    with pytest.raises(ReassignError, match="empty"):
        plan_reassignment([key(1)], [], NodeId(1))
    with pytest.raises(ReassignError, match="twice"):
        plan_reassignment([key(1)], [key(2), key(2, 1)], NodeId(1))
    with pytest.raises(ReassignError, match="empty voter set"):
        plan_reassignment([key(1)], [key(1, 5)], NodeId(1))
    with pytest.raises(ReassignError, match="exists"):
        apply_step(frozenset({key(1)}), Step(StepKind.ADD, key(1, 3)))
    with pytest.raises(ReassignError, match="not a voter"):
        apply_step(frozenset({key(1)}), Step(StepKind.REMOVE, key(2)))


def test_the_overlap_check_rejects_a_two_member_step() -> None:
    # The property the hypothesis test asserts can fail: {1,2,3} -> {1,4,5} in one step.
    assert not majorities_overlap(
        frozenset({key(1), key(2), key(3)}), frozenset({key(1), key(4), key(5)})
    )


_keys = st.dictionaries(st.integers(1, 7), st.integers(0, 1), min_size=0, max_size=6).map(
    lambda d: frozenset(key(n, v) for n, v in d.items())
)


@settings(deadline=None, derandomize=True, max_examples=400)
@given(current=_keys.filter(bool), target=_keys, pick=st.integers(0, 10))
def test_every_plan_is_single_member_steps_with_overlapping_majorities(
    current: frozenset[ReplicaKey], target: frozenset[ReplicaKey], pick: int
) -> None:
    leader = sorted(current)[pick % len(current)].id
    try:
        steps = plan_reassignment(current, target, leader)
    except ReassignError:
        # Only an empty target, or one reachable only through an empty set, is refused.
        assert not target or (
            len(current) == 1 and {k.id for k in target} == {k.id for k in current}
        )
        return
    sets = voter_sets(current, steps)
    assert sets[-1] == target
    for before, after in pairwise(sets):
        assert len(before ^ after) == 1
        assert after
        assert majorities_overlap(before, after)
    kinds = [s.kind for s in steps]
    new_ids = {k.id for k in target} - {k.id for k in current}
    # New ids are added before anything is removed.
    assert all(k is StepKind.ADD for k in kinds[: len(new_ids)])
    assert {s.voter.id for s in steps[: len(new_ids)]} == new_ids
    # The leader, when it goes (not replaced by another directory of its id: then it may come
    # first where the other order would empty the voter set), is the last voter removed.
    removals = [s.voter for s in steps if s.kind is StepKind.REMOVE]
    leader_key = next(k for k in current if k.id == leader)
    if leader not in {k.id for k in target}:
        assert removals[-1] == leader_key
