"""z3: the voter sets of every reassignment plan (kraft.reassign) have intersecting majorities
step to step, up to 9 voters; a planner that swaps a voter for a new one in one step fails.
The executions `kraft quorum reassign` runs (replanned before every step, any leader) reach the
target one member at a time with intersecting majorities; planners that refuse half-way or
step away from the target fail."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kraft.ids import NodeId, ReplicaKey
from kraft.reassign import ReassignError, Step, StepKind, plan_reassignment
from refinement.smt_reassign import prove_reassignment_majorities, prove_replanned_executions


def test_every_plan_up_to_nine_voters_keeps_majorities_intersecting() -> None:
    r = prove_reassignment_majorities()
    assert r.proved, str(r)


def _swapping_planner(
    current: frozenset[ReplicaKey], target: frozenset[ReplicaKey], leader: NodeId
) -> Sequence[frozenset[ReplicaKey]]:
    """A mutant: one step takes a leaving voter out and a new one in (a two-member change)."""
    sets = [current]
    now = set(current)
    while now != target:
        leaving = sorted(now - target)
        coming = sorted(target - now)
        if leaving:
            now.discard(leaving[0])
        if coming:
            now.add(coming[0])
        sets.append(frozenset(now))
    return sets


def test_a_two_member_step_is_rejected_with_disjoint_majorities() -> None:
    r = prove_reassignment_majorities(_swapping_planner)
    assert not r.proved
    assert r.claim == "majorities intersect"
    assert r.counterexample is not None
    assert r.counterexample["quorum_a"] & r.counterexample["quorum_b"] == 0


# ---- what `kraft quorum reassign` executes: replanned before every step, any leader


def test_every_replanned_execution_up_to_five_voters_reaches_the_target_safely() -> None:
    r = prove_replanned_executions(max_voters=5)
    assert r.proved, str(r)


@pytest.mark.slow
def test_every_replanned_execution_up_to_nine_voters_reaches_the_target_safely() -> None:
    r = prove_replanned_executions(max_voters=9)
    assert r.proved, str(r)


def _refusing_without_a_voter_leader(
    current: frozenset[ReplicaKey], target: frozenset[ReplicaKey], leader: NodeId | None
) -> tuple[Step, ...]:
    """A mutant: refuses to plan when the leader is not a voter (a removed leader still
    leading until its removal commits, or no leader known), as the command may find it."""
    if leader not in {k.id for k in current}:
        raise ReassignError("the leader is not a voter")
    return plan_reassignment(current, target, leader)


def test_a_planner_refusing_half_way_is_caught() -> None:
    r = prove_replanned_executions(_refusing_without_a_voter_leader, max_voters=3)
    assert not r.proved
    assert r.claim == "a replanned step exists"
    assert r.counterexample is not None and r.counterexample["leader"] == -1


def _removing_kept_voters_first(
    current: frozenset[ReplicaKey], target: frozenset[ReplicaKey], leader: NodeId | None
) -> tuple[Step, ...]:
    """A mutant: after a leader change, takes a voter the target keeps out first (to be
    added back later), a step away from the target: replanning could then go round for
    ever."""
    kept = sorted(current & target, key=lambda k: k.id)
    if leader is None and kept and len(current) > 1:
        return (Step(StepKind.REMOVE, kept[0]),)
    return plan_reassignment(current, target, leader)


def test_a_replanned_step_away_from_the_target_is_caught() -> None:
    r = prove_replanned_executions(_removing_kept_voters_first, max_voters=3)
    assert not r.proved
    assert r.claim == "each step is one member closer to the target"
