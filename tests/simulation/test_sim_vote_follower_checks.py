"""Three of the simulator's checks on a follower, each named by the run of a core weakened the
way it must catch: GrantedVoteLogUpToDate (every granted vote or pre-vote went to a log at
least as up-to-date as the granter's), RejectedMessageChangesNothing on the adversary's forged
EndQuorumEpoch of a second leader, and FetchTimeoutNotLate once the `+delays` profiles break
connections to a node that is down."""

from __future__ import annotations

from typing import Any

import pytest
from sim_runs import first_violations

from kraft.core.election import ElectionRole
from kraft.core.events import SendFailed
from kraft.core.follower import FollowerRole
from kraft.core.messages import EndQuorumEpochRequest, VoteRequest
from kraft.core.vocabulary import ReplicaState
from refinement import invariants_input as inp
from refinement import invariants_timing as timing
from refinement.faults import PROFILES, with_delays
from refinement.sim import SimConfig, simulate

F = ReplicaState.FOLLOWER


def test_the_core_grants_votes_only_to_up_to_date_logs() -> None:
    for seed in range(3):
        r = simulate(SimConfig(seed=seed, profile=PROFILES["partitions"]))
        assert r.ok, r.summary()


def test_a_follower_pre_vote_granted_without_comparing_logs_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """election.py: a Follower that has not fetched grants any pre-vote (KIP-996 lets it
    grant one, to an up-to-date log only)."""
    real = ElectionRole._can_grant

    def careless(self: ElectionRole, req: VoteRequest) -> bool:
        r = self._r
        if r._state is F and req.pre_vote:
            return not r._has_fetched
        return real(self, req)

    monkeypatch.setattr(ElectionRole, "_can_grant", careless)
    caught = first_violations("mixed", range(6))
    assert inp.GRANTED_VOTE_LOG_UP_TO_DATE in caught.values(), caught


def test_a_second_leaders_end_quorum_epoch_obeyed_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """follower.py: a Follower that lets any leader of its epoch cut its fetch timer."""
    real = FollowerRole.handle_end_request

    def credulous(self: FollowerRole, src: Any, req: EndQuorumEpochRequest, of: Any) -> None:
        r = self._r
        if (
            r._state is F
            and req.leader_epoch == r._epoch
            and req.leader_id != r._leader_id
            and r._me.id in req.preferred_successors
        ):
            r._fetch_deadline = r._now
        real(self, src, req, of)

    monkeypatch.setattr(FollowerRole, "handle_end_request", credulous)
    caught = first_violations("mixed+adversary", range(2))
    assert inp.REJECTED_MESSAGE_CHANGES_NOTHING in caught.values(), caught


def test_the_delays_profiles_break_connections_to_a_node_that_is_down() -> None:
    for base in ("mixed", "crashes"):
        assert with_delays(PROFILES[base]).notice_breaks
    assert not PROFILES["mixed"].notice_breaks


def test_a_broken_connection_that_postpones_the_fetch_timer_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """follower.py: a broken connection to the leader draws the fetch deadline afresh, later
    than the one already running when that was sooner."""
    real = FollowerRole.leader_connection_broke

    def redraws(self: FollowerRole, ev: SendFailed) -> None:
        r = self._r
        kept, r._fetch_deadline = r._fetch_deadline, None
        real(self, ev)
        if r._fetch_deadline is None:
            r._fetch_deadline = kept  # not a break it acts on

    monkeypatch.setattr(FollowerRole, "leader_connection_broke", redraws)
    caught = first_violations("crashes+delays", range(6))
    assert timing.FETCH_TIMEOUT_NOT_LATE in caught.values(), caught
