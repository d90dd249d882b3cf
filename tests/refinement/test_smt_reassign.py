"""z3: the voter sets of every reassignment plan (kraft.reassign) have intersecting majorities
step to step, up to 9 voters; a planner that swaps a voter for a new one in one step fails."""

from __future__ import annotations

from collections.abc import Sequence

from kraft.ids import NodeId, ReplicaKey
from refinement.smt_reassign import prove_reassignment_majorities


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
