"""The one transition table of the replica state machine (KIP-595), and its check."""

from __future__ import annotations

from kraft.core.vocabulary import ReplicaState
from kraft.errors import KraftError
from kraft.ids import MAX_EPOCH, Epoch

U = ReplicaState.UNATTACHED
V = ReplicaState.VOTED
C = ReplicaState.CANDIDATE
L = ReplicaState.LEADER
F = ReplicaState.FOLLOWER
R = ReplicaState.RESIGNED

# Allowed (from, to) pairs for a voter; SAME_EPOCH_ALLOWED says which may keep the epoch.
VOTER_TRANSITIONS: frozenset[tuple[ReplicaState, ReplicaState]] = frozenset(
    {
        (U, U), (U, V), (U, C), (U, F),
        (V, U), (V, C), (V, F),
        (C, U), (C, C), (C, L), (C, F),
        (L, U), (L, F), (L, R),
        (F, U), (F, F), (F, C),
        (R, U), (R, F), (R, C),
    }
)  # fmt: skip

# Observers (not in the voter set) only discover leaders and follow them.
OBSERVER_TRANSITIONS: frozenset[tuple[ReplicaState, ReplicaState]] = frozenset(
    {(U, U), (U, F), (F, U), (F, F)}
)

TRANSITIONS: dict[bool, frozenset[tuple[ReplicaState, ReplicaState]]] = {
    True: VOTER_TRANSITIONS,
    False: OBSERVER_TRANSITIONS,
}
"""Keyed by `is_voter`."""

# Transitions that may keep the epoch; every other allowed pair must strictly raise it
# (a new Candidate always bumps the epoch by one).
SAME_EPOCH_ALLOWED: dict[bool, frozenset[tuple[ReplicaState, ReplicaState]]] = {
    True: frozenset({(U, V), (U, F), (V, F), (C, L), (C, F), (L, R)}),
    # An observer whose leader stopped answering forgets it and rediscovers (same epoch).
    False: frozenset({(U, F), (F, U)}),
}


class IllegalTransitionError(KraftError):
    """The replica tried a state change the transition table does not allow."""


def check_transition(
    old: ReplicaState,
    old_epoch: Epoch,
    new: ReplicaState,
    new_epoch: Epoch,
    *,
    is_voter: bool,
) -> None:
    """Raise IllegalTransitionError unless (old, new) is allowed at these epochs."""
    if (old, new) not in TRANSITIONS[is_voter]:
        kind = "voter" if is_voter else "observer"
        raise IllegalTransitionError(f"{kind}: {old.value} -> {new.value} is not allowed")
    if new_epoch > MAX_EPOCH:
        raise IllegalTransitionError(f"epoch {new_epoch} cannot be encoded (max {MAX_EPOCH})")
    if new_epoch < old_epoch:
        raise IllegalTransitionError(
            f"{old.value}@{old_epoch} -> {new.value}@{new_epoch}: epoch went backwards"
        )
    if new_epoch == old_epoch and (old, new) not in SAME_EPOCH_ALLOWED[is_voter]:
        raise IllegalTransitionError(
            f"{old.value}@{old_epoch} -> {new.value}@{new_epoch} needs a larger epoch"
        )
