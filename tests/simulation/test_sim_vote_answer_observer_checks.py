"""Two simulator checks stated from Kafka 4.3.1 rather than from the core, each named by the run
of a core weakened the way it must catch: VoteAnswerPerState (every vote answer grants exactly
what Kafka's `canGrantVote` of the replica's state grants: a Resigned leader grants a pre-vote
to an up-to-date log) and DescribeQuorumMatches' observers (a voter the leader removes goes on
being described, among the observers, as Kafka's LeaderState.updateVoterAndObserverStates
keeps it)."""

from __future__ import annotations

import uuid

import pytest
from sim_runs import first_violations

from kraft.core.election import ElectionRole
from kraft.core.leader import LeaderState
from kraft.core.messages import VoteRequest, VoteResponse
from kraft.core.quorum_info import QuorumDescription, ReplicaDescription
from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_set import VoterSet
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, DirectoryId, Epoch, NodeId, Offset, ReplicaKey
from refinement import invariants_describe as desc
from refinement import invariants_input as inp
from refinement.faults import PROFILES
from refinement.sim import SimConfig, simulate

S = ReplicaState
CANDIDATE = ReplicaKey(NodeId(2), DirectoryId(uuid.UUID(int=2)))


def _granter(state: ReplicaState, **kw: object) -> inp.Granter:
    base: dict[str, object] = {
        "state": state,
        "epoch": Epoch(3),
        "voted_for": None,
        "last_epoch": Epoch(3),
        "end_offset": Offset(10),
        "leader_id": None,
    }
    base.update(kw)
    return inp.Granter(**base)  # type: ignore[arg-type]


def _request(*, pre_vote: bool, epoch: int = 3, last: tuple[int, int] = (3, 10)) -> VoteRequest:
    return VoteRequest(
        cluster_id=ClusterId("c"),
        candidate_epoch=Epoch(epoch),
        candidate=CANDIDATE,
        last_epoch=Epoch(last[0]),
        last_end_offset=Offset(last[1]),
        pre_vote=pre_vote,
    )


@pytest.mark.parametrize(
    ("state", "pre_vote", "up_to_date", "want"),
    [
        (S.RESIGNED, True, True, True),
        (S.RESIGNED, True, False, False),
        (S.RESIGNED, False, True, False),
        (S.CANDIDATE, True, True, True),
        (S.CANDIDATE, False, True, False),
        (S.LEADER, True, True, False),
        (S.UNATTACHED, False, True, True),
        (S.UNATTACHED, False, False, False),
        (S.PROSPECTIVE, True, True, True),
        (S.FOLLOWER, False, True, False),
        (S.FOLLOWER, True, False, False),
        (S.FOLLOWER, True, True, None),
    ],
)
def test_kafka_grants_follows_can_grant_vote_per_state(
    state: ReplicaState, pre_vote: bool, up_to_date: bool, want: bool | None
) -> None:
    last = (3, 10) if up_to_date else (3, 9)
    assert inp.kafka_grants(_granter(state), _request(pre_vote=pre_vote, last=last)) is want


def test_kafka_grants_votes_once_per_epoch_and_not_with_a_leader() -> None:
    other = ReplicaKey(NodeId(4))
    real = _request(pre_vote=False)
    assert inp.kafka_grants(_granter(S.VOTED, voted_for=ReplicaKey(NodeId(2))), real)
    assert not inp.kafka_grants(_granter(S.VOTED, voted_for=other), real)
    assert inp.kafka_grants(_granter(S.VOTED, voted_for=other), _request(pre_vote=True))
    assert not inp.kafka_grants(_granter(S.UNATTACHED, leader_id=NodeId(4)), real)
    # A larger epoch: Unattached in it first, the old vote, leader and role forgotten.
    assert inp.kafka_grants(_granter(S.LEADER, voted_for=other), _request(pre_vote=False, epoch=4))
    assert not inp.kafka_grants(_granter(S.UNATTACHED), _request(pre_vote=True, epoch=2))


def test_kafka_grants_a_follower_pre_vote_until_its_leader_answered() -> None:
    req = _request(pre_vote=True)
    assert inp.kafka_grants(_granter(S.FOLLOWER, has_fetched=False), req) is True
    assert inp.kafka_grants(_granter(S.FOLLOWER, has_fetched=True), req) is False
    assert (
        inp.kafka_grants(_granter(S.FOLLOWER, has_fetched=False), _request(pre_vote=False)) is False
    )


def test_vote_answer_per_state_flags_a_refusal_kafka_would_not_give() -> None:
    refused = VoteResponse(ErrorCode.NONE, NodeId(1), Epoch(3), False)
    granted = VoteResponse(ErrorCode.NONE, NodeId(1), Epoch(3), True)
    errored = VoteResponse(ErrorCode.INVALID_VOTER_KEY, NodeId(1), Epoch(3), True)
    req = _request(pre_vote=True)
    found = inp.vote_answer_per_state(NodeId(1), _granter(S.RESIGNED), req, refused)
    assert found is not None and found.name == inp.VOTE_ANSWER_PER_STATE
    assert inp.vote_answer_per_state(NodeId(1), _granter(S.RESIGNED), req, granted) is None
    assert inp.vote_answer_per_state(NodeId(1), _granter(S.RESIGNED), req, errored) is not None
    # Either answer of a Follower to an up-to-date pre-vote depends on what it fetched.
    assert inp.vote_answer_per_state(NodeId(1), _granter(S.FOLLOWER), req, refused) is None


def test_a_resigned_leader_refusing_pre_votes_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """election.py: a Resigned replica (a leader shutting down gracefully) refuses the
    pre-vote of an up-to-date log, which Kafka's ResignedState.canGrantVote grants."""
    real = ElectionRole._can_grant

    def sulky(self: ElectionRole, req: VoteRequest) -> bool:
        if self._r._state is S.RESIGNED:
            return False
        return real(self, req)

    monkeypatch.setattr(ElectionRole, "_can_grant", sulky)
    caught = first_violations("shutdowns", range(2))
    assert inp.VOTE_ANSWER_PER_STATE in caught.values(), caught


def test_the_observer_list_checker_wants_a_fetcher_that_is_no_voter() -> None:
    me, them = ReplicaKey(NodeId(1)), ReplicaKey(NodeId(2))
    voters = (ReplicaDescription(me, Offset(5), 100, 100),)
    listed = ReplicaDescription(them, Offset(4), 90, 80)
    described = QuorumDescription(NodeId(1), Epoch(2), Offset(4), voters, (listed,))
    empty = QuorumDescription(NodeId(1), Epoch(2), Offset(4), voters, ())

    def check(d: QuorumDescription, taken: dict[NodeId, int], now: int = 100) -> object:
        return desc.describe_quorum_matches(
            NodeId(1),
            epoch=Epoch(2),
            high_watermark=Offset(4),
            end_offset=Offset(5),
            voters=(NodeId(1),),
            desc=d,
            now=now,
            taken=taken,
        )

    assert check(described, {NodeId(2): 90}) is None
    assert check(empty, {NodeId(2): 90}) is not None
    assert check(described, {NodeId(2): 95}) is not None  # its entry is older than its Fetch
    # Kafka forgets an observer 5 minutes after its last Fetch.
    assert check(empty, {NodeId(2): 90}, now=90 + desc.OBSERVER_SESSION_MS) is None
    # ... and no longer lists it from then on (clearInactiveObservers runs first).
    assert check(described, {NodeId(2): 90}, now=90 + desc.OBSERVER_SESSION_MS - 1) is None
    assert check(described, {NodeId(2): 90}, now=90 + desc.OBSERVER_SESSION_MS) is not None


def test_a_removed_voter_dropped_from_the_observers_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """leader.py: LeaderState.set_voters forgets a removed voter instead of keeping its
    progress among the observers (Kafka's updateVoterAndObserverStates keeps it)."""
    real = LeaderState.set_voters

    def forgetful(self: LeaderState, voters: VoterSet) -> None:
        before = set(self.observers)
        real(self, voters)
        for key in [k for k in self.observers if k not in before]:
            del self.observers[key]

    monkeypatch.setattr(LeaderState, "set_voters", forgetful)
    caught = first_violations("none+reconfig", range(1))
    assert desc.DESCRIBE_QUORUM_MATCHES in caught.values(), caught


def test_the_core_passes_both_checks() -> None:
    for profile in ("shutdowns", "none+reconfig"):
        r = simulate(SimConfig(seed=1, profile=PROFILES[profile]))
        assert r.ok, r.summary()
