"""z3 proof that KIP-642 reassignment plans (kraft.reassign) keep KIP-856's safety argument:
every two consecutive voter sets of a plan have intersecting majorities, so no two leaders
can be elected (and no two commits made) by disjoint quorums across a step.

Up to renaming, a (current, target, leader) input is fixed by the sizes of its groups: `kept`
voters (same id and directory in the target), `replaced` ones (same id, another directory),
`removed` ones, `new` ids, and which group the leader is in. Every such input with current and
target of 1..max_voters members is planned, and each consecutive pair (A, B) of its voter sets
is reduced to (|A|, |B|, |A and B|); z3 then shows, for each distinct triple, that no majority
of A (at least kraft.core.quorum_math.majority_size members) is disjoint from one of B.

`prove_reassignment_majorities(plan_sets)` takes the planner as a parameter so that a mutant
(e.g. one swapping a voter for a new one in a single step) is shown to fail.

`prove_replanned_executions(plan)` covers what `kraft quorum reassign` executes rather than one
plan: before every step the command asks the leader for the current voters and leader and
plans again, then runs only that plan's first step; the leader may change between any two
steps (the removed leader resigns, an election makes any voter leader, a removed leader may
still answer as leader until its removal commits). From every input the planner accepts, every
voter set such an execution reaches is explored with every leader (each voter of that set, or
one outside it): the replanned first step must exist (no refusal half-way, which would stop
the command), lead to a non-empty set one member closer to the target (so every execution
ends at the target after exactly as many steps as the first plan had, within the command's
bound), and its pair of sets must have intersecting majorities (z3, as above).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from itertools import pairwise

import z3

from kraft.core import quorum_math as qm
from kraft.ids import DirectoryId, NodeId, ReplicaKey
from kraft.reassign import ReassignError, Step, apply_step, plan_reassignment, voter_sets
from refinement.smt import Z3, ProofResult

__all__ = [
    "PlanFn",
    "PlanSets",
    "planned_sets",
    "prove_reassignment_majorities",
    "prove_replanned_executions",
]

PlanSets = Callable[
    [frozenset[ReplicaKey], frozenset[ReplicaKey], NodeId], Sequence[frozenset[ReplicaKey]]
]

PlanFn = Callable[[frozenset[ReplicaKey], frozenset[ReplicaKey], NodeId | None], Sequence[Step]]


def planned_sets(
    current: frozenset[ReplicaKey], target: frozenset[ReplicaKey], leader: NodeId
) -> Sequence[frozenset[ReplicaKey]]:
    """The voter sets kraft.reassign's plan passes through, the current one first."""
    return voter_sets(current, plan_reassignment(current, target, leader))


def _key(n: int, directory: int) -> ReplicaKey:
    return ReplicaKey(NodeId(n), DirectoryId(uuid.UUID(int=directory)))


def _inputs(
    max_voters: int,
) -> Iterator[tuple[frozenset[ReplicaKey], frozenset[ReplicaKey], NodeId]]:
    for a in range(1, max_voters + 1):
        for kept in range(a + 1):
            for replaced in range(a - kept + 1):
                removed = a - kept - replaced
                for new in range(max_voters - kept - replaced + 1):
                    if kept + replaced + new == 0:
                        continue
                    current = frozenset(_key(i, 1) for i in range(a))
                    target = frozenset(
                        [_key(i, 1) for i in range(kept)]
                        + [_key(i, 2) for i in range(kept, kept + replaced)]
                        + [_key(i, 1) for i in range(a, a + new)]
                    )
                    # The leader: one representative of each non-empty group.
                    firsts = [0, kept, kept + replaced]
                    sizes = [kept, replaced, removed]
                    for first, size in zip(firsts, sizes, strict=True):
                        if size:
                            yield current, target, NodeId(first)


def _disjoint_majorities(na: int, nb: int, common: int) -> dict[str, int] | None:
    """A majority of A and one of B that are disjoint, |A| = na, |B| = nb, sharing `common`
    members (A = 0..na-1, B = the first `common` of A and nb - common others); None if none."""
    set_a = list(range(na))
    set_b = list(range(common)) + list(range(na, na + nb - common))
    qa = {i: z3.Bool(f"qa{i}") for i in set_a}
    qb = {i: z3.Bool(f"qb{i}") for i in set_b}

    def size(xs: Sequence[z3.BoolRef]) -> z3.ArithRef:
        return z3.Sum([z3.If(x, 1, 0) for x in xs])

    s = z3.Solver()
    s.add(size(list(qa.values())) >= qm.majority_size(Z3, z3.IntVal(na)))
    s.add(size(list(qb.values())) >= qm.majority_size(Z3, z3.IntVal(nb)))
    s.add(z3.Not(z3.Or([z3.And(qa[i], qb[i]) for i in range(common)] or [z3.BoolVal(False)])))
    if s.check() == z3.unsat:
        return None
    m = s.model()

    def mask(q: dict[int, z3.BoolRef]) -> int:
        return sum(1 << i for i, x in q.items() if z3.is_true(m.eval(x, model_completion=True)))

    return {
        "size_a": na,
        "size_b": nb,
        "common": common,
        "quorum_a": mask(qa),
        "quorum_b": mask(qb),
    }


def prove_reassignment_majorities(
    plan_sets: PlanSets = planned_sets, *, max_voters: int = 9
) -> ProofResult:
    """Every consecutive pair of voter sets of every plan from a current to a target set of
    1..max_voters voters has intersecting majorities, each set is non-empty, and the plan ends
    at the target (inputs the planner refuses with ReassignError are skipped: it runs none)."""
    started = time.perf_counter()
    lemma = "ReassignmentMajoritiesIntersect"
    bound = f"current and target sets of 1..{max_voters} voters, every leader position"
    triples: dict[tuple[int, int, int], tuple[int, int, int]] = {}
    for current, target, leader in _inputs(max_voters):
        try:
            sets = list(plan_sets(current, target, leader))
        except ReassignError:
            continue
        witness = {"current": len(current), "target": len(target), "leader": leader}
        if sets[-1] != target or not all(sets):
            claim = "the plan reaches the target through non-empty sets"
            return ProofResult(lemma, bound, False, witness, claim, time.perf_counter() - started)
        for before, after in pairwise(sets):
            shape = (len(before), len(after), len(before & after))
            triples.setdefault(shape, (len(current), len(target), int(leader)))
    for (na, nb, common), (nc, nt, who) in sorted(triples.items()):
        found = _disjoint_majorities(na, nb, common)
        if found is not None:
            found.update(current=nc, target=nt, leader=who)
            return ProofResult(
                lemma, bound, False, found, "majorities intersect", time.perf_counter() - started
            )
    return ProofResult(lemma, bound, True, seconds=time.perf_counter() - started)


def _first_disjoint(
    triples: dict[tuple[int, int, int], dict[str, int]],
) -> dict[str, int] | None:
    for (na, nb, common), witness in sorted(triples.items()):
        found = _disjoint_majorities(na, nb, common)
        if found is not None:
            found.update(witness)
            return found
    return None


def prove_replanned_executions(
    plan: PlanFn = plan_reassignment, *, max_voters: int = 9
) -> ProofResult:
    """Every execution of `kraft quorum reassign` (plan again before each step, run its first
    step, any leader between steps) from a current to a target set of 1..max_voters voters
    that the planner accepts: never refused half-way, each step one member closer to the
    target through non-empty sets, consecutive sets with intersecting majorities."""
    started = time.perf_counter()
    lemma = "ReplannedReassignmentMajoritiesIntersect"
    bound = (
        f"current and target sets of 1..{max_voters} voters, replanned before every step "
        "with any leader (a voter of the current set or none)"
    )
    triples: dict[tuple[int, int, int], dict[str, int]] = {}
    explored: set[tuple[frozenset[ReplicaKey], frozenset[ReplicaKey]]] = set()

    def failed(claim: str, witness: dict[str, int]) -> ProofResult:
        return ProofResult(lemma, bound, False, witness, claim, time.perf_counter() - started)

    for current, target, leader in _inputs(max_voters):
        try:
            plan(current, target, leader)
        except ReassignError:
            continue  # refused before any step: the command changes nothing
        stack = [current]
        while stack:
            now = stack.pop()
            if now == target or (now, target) in explored:
                continue
            explored.add((now, target))
            distance = len(now ^ target)
            for who in [*sorted(k.id for k in now), None]:
                witness = {
                    "current": len(current),
                    "target": len(target),
                    "at": len(now),
                    "distance": distance,
                    "leader": -1 if who is None else int(who),
                }
                try:
                    steps = plan(now, target, who)
                    after = apply_step(now, steps[0]) if steps else now
                except ReassignError:
                    return failed("a replanned step exists", witness)
                if not after or len(after ^ target) != distance - 1:
                    return failed("each step is one member closer to the target", witness)
                triples.setdefault((len(now), len(after), len(now & after)), witness)
                stack.append(after)
    found = _first_disjoint(triples)
    if found is not None:
        return failed("majorities intersect", found)
    return ProofResult(lemma, bound, True, seconds=time.perf_counter() - started)


if __name__ == "__main__":
    print(prove_reassignment_majorities())
    print(prove_replanned_executions())
