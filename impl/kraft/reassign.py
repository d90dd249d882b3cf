"""KIP-642 reassignment planned as KIP-856 voter changes: from the current voter set to a
target one as a sequence of single-member steps (pure; `kraft quorum reassign` runs it).

The order, safest first:
1. add each target voter whose id is not a voter yet (it must already run and fetch from the
   leader as an observer, caught up: the leader refuses it otherwise);
2. remove each voter not in the target but the leader; where the target names the same id
   with another directory id (a replaced disk), the old voter is removed and the new one
   added right after (a voter set holds one key per id, as Kafka's VoterSet does);
3. remove the leader last (it keeps leading until its removal commits, then resigns), then add
   a replacement of its id, if the target has one. (Only where that would empty the voter set
   (the leader replaced, every other voter removed) does the leader's replacement come first.)

Each step changes one member, so the majorities of consecutive voter sets intersect (KIP-856's
argument; refinement/smt.py proves it up to 9 voters). A plan never passes through an empty
voter set: a target that cannot be reached without one is refused (ReassignError).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from kraft.errors import KraftError
from kraft.ids import NodeId, ReplicaKey

__all__ = ["ReassignError", "Step", "StepKind", "apply_step", "plan_reassignment", "voter_sets"]


class ReassignError(KraftError):
    """The target cannot be planned (empty, two keys for one id, or only through an empty
    voter set)."""


class StepKind(Enum):
    ADD = "add"
    REMOVE = "remove"


@dataclass(frozen=True, slots=True)
class Step:
    """One voter change: AddRaftVoter or RemoveRaftVoter of `voter`."""

    kind: StepKind
    voter: ReplicaKey

    def __str__(self) -> str:
        return f"{self.kind.value} {self.voter}"


def _one_key_per_id(keys: Iterable[ReplicaKey], what: str) -> dict[NodeId, ReplicaKey]:
    out: dict[NodeId, ReplicaKey] = {}
    for k in keys:
        if k.id in out and out[k.id] != k:
            raise ReassignError(f"{what} names voter {k.id} twice: {out[k.id]} and {k}")
        out[k.id] = k
    return out


def apply_step(voters: frozenset[ReplicaKey], step: Step) -> frozenset[ReplicaKey]:
    """The voter set after `step`; ReassignError when the leader would refuse it (adding an id
    that is a voter already, removing a key that is not a voter)."""
    if step.kind is StepKind.ADD:
        if any(v.id == step.voter.id for v in voters):
            raise ReassignError(f"cannot add {step.voter}: voter {step.voter.id} exists")
        return voters | {step.voter}
    if step.voter not in voters:
        raise ReassignError(f"cannot remove {step.voter}: not a voter")
    return voters - {step.voter}


def voter_sets(
    current: Iterable[ReplicaKey], steps: Sequence[Step]
) -> tuple[frozenset[ReplicaKey], ...]:
    """The voter set before the first step and after each step."""
    sets = [frozenset(current)]
    for step in steps:
        sets.append(apply_step(sets[-1], step))
    return tuple(sets)


def plan_reassignment(
    current: Iterable[ReplicaKey], target: Iterable[ReplicaKey], leader: NodeId | None = None
) -> tuple[Step, ...]:
    """The single-member steps from `current` to `target` (see the module's docstring);
    `leader` is the current leader's id (removed last), None when unknown. Empty when the
    voter set is the target already."""
    now = _one_key_per_id(current, "the current voter set")
    goal = _one_key_per_id(target, "the target")
    if not goal:
        raise ReassignError("the target voter set is empty")
    steps: list[Step] = []
    # 1. New ids first.
    steps += [Step(StepKind.ADD, k) for n, k in sorted(goal.items()) if n not in now]

    # 2. Voters replaced by another directory of their id, then voters that go; the leader
    # last, unless only its replacement coming earlier avoids an empty voter set.
    def change(k: ReplicaKey) -> list[Step]:
        back = [Step(StepKind.ADD, goal[k.id])] if k.id in goal else []
        return [Step(StepKind.REMOVE, k), *back]

    leaving = [k for n, k in sorted(now.items()) if goal.get(n) != k]
    others = sorted((k for k in leaving if k.id != leader), key=lambda k: k.id not in goal)
    mine = [k for k in leaving if k.id == leader]
    replaced = [k for k in others if k.id in goal]
    gone = [k for k in others if k.id not in goal]
    for order in ([*replaced, *gone, *mine], [*replaced, *mine, *gone]):
        candidate = steps + [s for k in order for s in change(k)]
        if all(voter_sets(now.values(), candidate)):
            return tuple(candidate)
    raise ReassignError(
        "the target can only be reached through an empty voter set: every voter's id is "
        "replaced by another directory; add a voter with a new id first"
    )
