"""The one transition table of the replica state machine (KIP-595 with KIP-996 pre-vote, as
Apache Kafka 4.x's QuorumState allows it), and its check.

A voter's election (or fetch) timeout makes it Prospective in the same epoch; only a
Prospective that won a majority of pre-votes becomes Candidate (epoch + 1). A Prospective that
loses goes back to Follower (leader known), Voted (vote cast in this epoch) or Unattached, in
the same epoch. A Candidate that loses becomes Prospective again in its epoch. A Resigned
replica leaves for Unattached in a larger epoch, or, the only voter of its voter set at start,
for Prospective in its epoch (Kafka's KafkaRaftClient.initialize)."""

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
P = ReplicaState.PROSPECTIVE

# Allowed (from, to) pairs for a voter; SAME_EPOCH_ALLOWED says which may keep the epoch.
VOTER_TRANSITIONS: frozenset[tuple[ReplicaState, ReplicaState]] = frozenset(
    {
        (U, U), (U, V), (U, P), (U, F),
        (V, U), (V, P), (V, F),
        (P, U), (P, V), (P, P), (P, C), (P, F),
        (C, U), (C, P), (C, L), (C, F),
        (L, U), (L, F), (L, R),
        (F, U), (F, F), (F, P),
        (R, U), (R, F), (R, P),
    }
)  # fmt: skip

# Observers (not in the voter set) discover leaders and follow them, and may grant a vote
# (KIP-853: any replica may); a leader removed from the voter set leads on as an observer
# until the change commits, then resigns (KIP-856).
OBSERVER_TRANSITIONS: frozenset[tuple[ReplicaState, ReplicaState]] = frozenset(
    {
        (U, U), (U, V), (U, F),
        (V, U), (V, F),
        (F, U), (F, F),
        (L, U), (L, F), (L, R),
        (R, U), (R, F),
    }
)  # fmt: skip

TRANSITIONS: dict[bool, frozenset[tuple[ReplicaState, ReplicaState]]] = {
    True: VOTER_TRANSITIONS,
    False: OBSERVER_TRANSITIONS,
}
"""Keyed by `is_voter`."""

# Transitions that may keep the epoch; every other allowed pair must strictly raise it
# (a new Candidate bumps the epoch by exactly one, checked below).
_VOTER_SAME_EPOCH: frozenset[tuple[ReplicaState, ReplicaState]] = frozenset(
    {
        (U, V), (U, P), (U, F),
        (V, P), (V, F),
        (P, U), (P, V), (P, P), (P, F),
        (C, P), (C, L), (C, F),
        (L, R),
        (F, P),
        (R, P),
    }
)  # fmt: skip

SAME_EPOCH_ALLOWED: dict[bool, frozenset[tuple[ReplicaState, ReplicaState]]] = {
    True: _VOTER_SAME_EPOCH,
    # No Follower -> Unattached in one epoch (Kafka's transitionToUnattached refuses it): an
    # observer whose leader stopped answering stays its Follower and asks the voters.
    False: frozenset({(U, F), (U, V), (V, F), (L, R)}),
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
    if (old, new) == (P, C) and new_epoch != old_epoch + 1:
        raise IllegalTransitionError(
            f"{old.value}@{old_epoch} -> {new.value}@{new_epoch}: a candidate takes the next epoch"
        )
