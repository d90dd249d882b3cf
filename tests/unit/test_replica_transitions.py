"""The one transition table: allowed pairs pass, everything else raises."""

from __future__ import annotations

import itertools

import pytest
from replica_harness import Harness

from kraft.core.effects import ElectionState
from kraft.core.events import Tick
from kraft.core.transitions import (
    OBSERVER_TRANSITIONS,
    TRANSITIONS,
    VOTER_TRANSITIONS,
    IllegalTransitionError,
    check_transition,
)
from kraft.core.vocabulary import ReplicaState
from kraft.ids import Epoch, NodeId

S = ReplicaState
STATES = list(S)


def test_table_is_keyed_by_voter_flag() -> None:
    assert TRANSITIONS[True] is VOTER_TRANSITIONS
    assert TRANSITIONS[False] is OBSERVER_TRANSITIONS


@pytest.mark.parametrize(("old", "new"), list(itertools.product(STATES, STATES)))
def test_voter_pairs_outside_the_table_raise(old: S, new: S) -> None:
    if (old, new) in VOTER_TRANSITIONS:
        check_transition(old, Epoch(3), new, Epoch(4), is_voter=True)
    else:
        with pytest.raises(IllegalTransitionError):
            check_transition(old, Epoch(3), new, Epoch(4), is_voter=True)


@pytest.mark.parametrize(("old", "new"), list(itertools.product(STATES, STATES)))
def test_observers_follow_vote_and_a_removed_leader_resigns(old: S, new: S) -> None:
    """Observers move between Unattached and Follower, may cast a vote (KIP-853: any replica
    may grant one), and a leader removed from the voter set leads on as an observer until it
    resigns (KIP-856); an observer never stands."""
    allowed = {
        (S.UNATTACHED, S.UNATTACHED),
        (S.UNATTACHED, S.FOLLOWER),
        (S.FOLLOWER, S.UNATTACHED),
        (S.FOLLOWER, S.FOLLOWER),
        (S.UNATTACHED, S.VOTED),
        (S.VOTED, S.UNATTACHED),
        (S.VOTED, S.FOLLOWER),
        (S.LEADER, S.UNATTACHED),
        (S.LEADER, S.FOLLOWER),
        (S.LEADER, S.RESIGNED),
        (S.RESIGNED, S.UNATTACHED),
        (S.RESIGNED, S.FOLLOWER),
    }
    if (old, new) in allowed:
        check_transition(old, Epoch(3), new, Epoch(4), is_voter=False)
    else:
        with pytest.raises(IllegalTransitionError):
            check_transition(old, Epoch(3), new, Epoch(4), is_voter=False)


def test_epoch_never_goes_backwards() -> None:
    with pytest.raises(IllegalTransitionError):
        check_transition(S.FOLLOWER, Epoch(5), S.UNATTACHED, Epoch(4), is_voter=True)


def test_new_candidacy_and_new_leader_need_a_new_epoch() -> None:
    for old, new in [
        (S.PROSPECTIVE, S.CANDIDATE),
        (S.FOLLOWER, S.FOLLOWER),
    ]:
        with pytest.raises(IllegalTransitionError):
            check_transition(old, Epoch(5), new, Epoch(5), is_voter=True)
    check_transition(S.CANDIDATE, Epoch(5), S.LEADER, Epoch(5), is_voter=True)
    check_transition(S.LEADER, Epoch(5), S.RESIGNED, Epoch(5), is_voter=True)


def test_only_a_prospective_becomes_candidate_and_in_the_next_epoch() -> None:
    """KIP-996 as Kafka's QuorumState.transitionToCandidate: only Prospective may stand, and
    a candidate takes exactly the next epoch."""
    for old in S:
        if old is not S.PROSPECTIVE:
            with pytest.raises(IllegalTransitionError):
                check_transition(old, Epoch(5), S.CANDIDATE, Epoch(6), is_voter=True)
    check_transition(S.PROSPECTIVE, Epoch(5), S.CANDIDATE, Epoch(6), is_voter=True)
    with pytest.raises(IllegalTransitionError):
        check_transition(S.PROSPECTIVE, Epoch(5), S.CANDIDATE, Epoch(7), is_voter=True)


def test_prospective_is_entered_and_left_in_the_same_epoch() -> None:
    """Timeouts make Unattached, Voted, Follower and Candidate voters Prospective without an
    epoch change, and so does the only voter's start from Resigned (Kafka's initialize); a
    lost pre-vote returns to Unattached, Voted or Follower in that epoch."""
    for old in (S.UNATTACHED, S.VOTED, S.FOLLOWER, S.CANDIDATE, S.RESIGNED):
        check_transition(old, Epoch(5), S.PROSPECTIVE, Epoch(5), is_voter=True)
    for new in (S.UNATTACHED, S.VOTED, S.FOLLOWER, S.PROSPECTIVE):
        check_transition(S.PROSPECTIVE, Epoch(5), new, Epoch(5), is_voter=True)
    with pytest.raises(IllegalTransitionError):
        check_transition(S.LEADER, Epoch(5), S.PROSPECTIVE, Epoch(5), is_voter=True)


def test_resigned_leaves_only_for_a_larger_epoch() -> None:
    with pytest.raises(IllegalTransitionError):
        check_transition(S.RESIGNED, Epoch(5), S.UNATTACHED, Epoch(5), is_voter=True)
    check_transition(S.RESIGNED, Epoch(5), S.UNATTACHED, Epoch(6), is_voter=True)


def test_no_replica_forgets_a_leader_in_the_same_epoch() -> None:
    """Kafka's QuorumState.transitionToUnattached: the same epoch only from Prospective. A
    Follower keeps no vote (the stored state holds the leader), so back in Unattached of that
    epoch it could grant a second one; voters and observers alike never go there."""
    for is_voter in (True, False):
        with pytest.raises(IllegalTransitionError):
            check_transition(S.FOLLOWER, Epoch(5), S.UNATTACHED, Epoch(5), is_voter=is_voter)
        check_transition(S.FOLLOWER, Epoch(5), S.UNATTACHED, Epoch(6), is_voter=is_voter)


def test_a_prospective_that_knows_its_leader_never_goes_back_to_a_voting_state() -> None:
    """The replica's own guard beside the table: within an epoch whose leader it knows, no
    move to Unattached or Voted (a Prospective that came from following goes back to
    following)."""
    h = Harness(election=ElectionState(Epoch(2), leader_id=NodeId(2)))
    h.step(Tick(10_000))  # the fetch timeout: Prospective, leader still known
    assert h.view.state is S.PROSPECTIVE and h.view.leader_id == 2
    for new in (S.UNATTACHED, S.VOTED):
        with pytest.raises(IllegalTransitionError):
            h.replica._transition(new, Epoch(2))


def test_replica_refuses_an_illegal_transition() -> None:
    h = Harness()
    with pytest.raises(IllegalTransitionError):
        h.replica._transition(S.LEADER, Epoch(0))  # Unattached -> Leader skips the election


def test_start_twice_raises() -> None:
    h = Harness()
    with pytest.raises(IllegalTransitionError):
        h.replica.start()
