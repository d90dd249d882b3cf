"""Check-quorum under a changing voter set (Kafka's LeaderState.timeUntilCheckQuorumExpires:
with one voter the timer never expires). Found by the simulator (mixed+reconfig): a leader
that removed itself from {3, 5} kept {5} as its voter set, lost touch with 5, resigned by
check-quorum with its removal uncommitted, and the quorum could never elect again (5's log
lacked the removal; the replicas that had it were no longer voters in their own logs)."""

from __future__ import annotations

from replica_harness import CLUSTER, key
from test_reconfig import _add, _appended_voters, _ask, _checked, _dynamic, _fetch, _record

from kraft.core.leader import CHECK_QUORUM_TIMEOUT_FACTOR
from kraft.core.messages import RemoveVoterRequest
from kraft.core.vocabulary import ReplicaState


def test_a_removed_leader_with_one_voter_left_keeps_leading_until_its_removal_commits() -> None:
    h = _dynamic()  # leader 1 of {1, 2, 3}, its epoch's records committed by 2
    _appended = _appended_voters(_ask(h, RemoveVoterRequest(CLUSTER, key(3))))
    assert _appended == [_record(1, 2)]
    _fetch(h, key(2), 4)  # {1, 2} commits the removal of 3
    assert h.view.high_watermark == 4
    assert _appended_voters(_ask(h, RemoveVoterRequest(CLUSTER, key(1)))) == [_record(2)]
    assert not h.replica.is_voter and h.view.state is ReplicaState.LEADER
    # Voter 2 falls silent: with one voter, check-quorum never expires (Kafka), so the
    # removed leader keeps leading (its removal uncommitted) instead of resigning.
    fetch_timeout = h.replica._timing.fetch_timeout_ms
    h.tick(h.now + 3 * int(fetch_timeout * CHECK_QUORUM_TIMEOUT_FACTOR))
    assert h.view.state is ReplicaState.LEADER
    # Once 2 fetches the removal, it commits and the leader resigns at its next tick.
    _fetch(h, key(2), 5)
    assert h.view.high_watermark == 5
    h.tick()
    assert h.view.state is ReplicaState.RESIGNED


def test_check_quorum_stops_with_one_voter_and_restarts_when_a_voter_joins() -> None:
    h = _dynamic()
    _ask(h, RemoveVoterRequest(CLUSTER, key(3)))
    _fetch(h, key(2), 4)
    _ask(h, RemoveVoterRequest(CLUSTER, key(2)))  # {1}: a single voter commits alone
    ld = h.replica._leader
    assert ld is not None and h.replica.is_voter and len(h.replica._voters) == 1
    assert ld.check_quorum_at is None
    _fetch(h, key(4), 5)  # node 4 fetches as an observer, caught up
    _ask(h, _add(4))
    assert _appended_voters(_checked(h, 4)) == [_record(1, 4)]
    assert ld.check_quorum_at is not None and ld.check_quorum_at > h.now
