"""Vote handling, elections and the candidate's timers (KIP-595 "Vote")."""

from __future__ import annotations

from replica_harness import CLUSTER, Harness, build_log, grant, index, key, of, sent, stand

from kraft.control_records import LeaderChangeMessage, decode_control_batch
from kraft.core.effects import (
    ActionTaken,
    AppendToLog,
    ElectionState,
    FlushLog,
    PersistElectionState,
    Send,
    StateChanged,
)
from kraft.core.events import Tick
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
)
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset, ReplicaKey

S = ReplicaState


def vote(
    cand: int, epoch: int, last_epoch: int = 0, end: int = 0, cluster: str = CLUSTER
) -> VoteRequest:
    return VoteRequest(ClusterId(cluster), key(cand), Epoch(epoch), Epoch(last_epoch), Offset(end))


def answer(effects: list) -> VoteResponse:
    [(_, resp)] = sent(effects, VoteResponse)
    return resp


def test_reject_when_a_larger_epoch_is_known() -> None:
    """ "First it checks whether an epoch larger than the candidate epoch from the request is
    known. If so, the vote is rejected.\""""
    h = Harness(election=ElectionState(Epoch(5)))
    resp = answer(h.recv(2, vote(2, 4)))
    assert resp.error is ErrorCode.FENCED_LEADER_EPOCH
    assert not resp.vote_granted
    assert resp.leader_epoch == 5


def test_larger_candidate_epoch_moves_to_unattached_first() -> None:
    """ "if it receives a Vote request with a larger candidate epoch, it can still grants that
    vote while at the same time transiting back to voter state\""""
    h = Harness(election=ElectionState(Epoch(2), leader_id=NodeId(3)))
    assert h.view.state is S.FOLLOWER
    effects = h.recv(2, vote(2, 3))
    changes = of(effects, StateChanged)
    assert changes[0] == StateChanged(S.FOLLOWER, S.UNATTACHED, Epoch(3))
    assert changes[1] == StateChanged(S.UNATTACHED, S.VOTED, Epoch(3))
    assert answer(effects).vote_granted


def test_vote_is_persisted_before_the_response_is_sent() -> None:
    """ "grant that vote by first updating the quorum-state file, and then returning the
    response with voteGranted to yes\""""
    h = Harness()
    effects = h.recv(2, vote(2, 1))
    persisted = index(
        effects,
        lambda e: isinstance(e, PersistElectionState) and e.state.voted_for == key(2),
    )
    sent_at = index(effects, lambda e: isinstance(e, Send))
    assert persisted < sent_at
    assert h.stored == ElectionState(Epoch(1), None, key(2))
    assert h.view.state is S.VOTED


def test_one_vote_per_epoch() -> None:
    """ "It checks if it has voted for that candidate epoch already. If it has, then only grant
    the vote if the candidate id matches the id that was already voted.\""""
    h = Harness()
    assert answer(h.recv(2, vote(2, 1))).vote_granted
    assert not answer(h.recv(3, vote(3, 1))).vote_granted
    again = h.recv(2, vote(2, 1))
    assert answer(again).vote_granted
    assert not of(again, PersistElectionState)  # nothing new to persist


def test_a_candidate_outside_our_voter_set_gets_the_vote() -> None:
    """KIP-853 (Kafka's QuorumState.canGrantVote): a replica grants its vote to any candidate
    whose log is up to date, voter or not as it knows the voter set (that set may be behind:
    voter changes take effect when appended). KIP-595's "CandidateId is one of the expected
    voters" check is gone; only the candidate counts votes, from its own voter set."""
    h = Harness(voters=(1, 2, 3))
    effects = h.recv(9, vote(9, 1))
    assert answer(effects).vote_granted
    assert h.view.epoch == 1
    assert h.view.state is S.VOTED and h.view.voted_for == key(9)


def test_an_observer_grants_votes_too() -> None:
    """KIP-853: observers handle Vote requests like voters (one vote per epoch, persisted
    first), and never stand themselves."""
    h = Harness(node=4, voters=(1, 2, 3))
    effects = h.recv(2, vote(2, 1))
    assert answer(effects).vote_granted
    assert h.view.state is S.VOTED and h.stored.voted_for == key(2)
    # A second candidate of the same epoch is refused: the vote is cast.
    assert not answer(h.recv(3, vote(3, 1))).vote_granted
    # It still only looks for a leader: no election timer of its own.
    h.tick()
    assert h.view.state in (S.VOTED, S.UNATTACHED)
    # Restarted, it keeps its vote: no second vote in that epoch.
    again = Harness(node=4, voters=(1, 2, 3), election=h.stored, log=h.log)
    assert again.view.state is S.VOTED and again.view.voted_for == key(2)
    assert not answer(again.recv(3, vote(3, 1))).vote_granted


def test_an_observer_that_voted_asks_the_voters_for_the_leader() -> None:
    """KIP-853: an observer that granted a vote has no election timer of its own, and no
    leader sends it BeginQuorumEpoch (only voters get one): it asks the voters who leads, as
    Kafka's observer does in Unattached with a vote (pollUnattachedAsObserver). Found by the
    simulator (mixed+snapshots+reconfig seed 38): a removed voter that voted for the next
    leader stayed Voted, leaderless, for good."""
    h = Harness(node=4, voters=(1, 2, 3))
    effects = h.recv(2, vote(2, 1))
    assert answer(effects).vote_granted and h.view.state is S.VOTED
    [(dst, _)] = sent(effects, FetchRequest)
    resp = FetchResponse(ErrorCode.NONE, NodeId(2), Epoch(1), Offset(-1), Offset(0))
    effects = h.recv(dst, resp)
    assert (h.view.state, h.view.epoch, h.view.leader_id) == (S.FOLLOWER, 1, 2)


def test_log_up_to_date_by_last_epoch_then_offset() -> None:
    """ "If the logs' last entry have different epochs, then the log with the later epoch is
    more up-to-date. If the logs end with the same epoch, then whichever log is longer is more
    up-to-date.\""""
    mine = [(1, 2), (2, 3)]  # ends at offset 5 in epoch 2
    cases = [((2, 5), True), ((2, 4), False), ((2, 9), True), ((1, 99), False), ((3, 1), True)]
    for (last_epoch, end), granted in cases:
        h = Harness(log=build_log(mine), election=ElectionState(Epoch(2)))
        resp = answer(h.recv(2, vote(2, 4, last_epoch, end)))
        assert resp.vote_granted is granted, (last_epoch, end)


def test_inconsistent_cluster_id_is_rejected() -> None:
    """ "The core requests have a field for the clusterId. This is validated when a request is
    received\""""
    h = Harness()
    resp = answer(h.recv(2, vote(2, 1, cluster="other")))
    assert resp.error is ErrorCode.INCONSISTENT_CLUSTER_ID
    assert h.view.epoch == 0


def test_election_timeout_is_randomized_in_t_to_2t() -> None:
    """A voter's election timeout is drawn uniformly from [T, 2T)."""
    seen = set()
    for seed in range(40):
        h = Harness(seed=seed, election_timeout_ms=1000)
        d = h.replica.next_deadline_ms()
        assert 1000 <= d < 2000
        seen.add(d)
    assert len(seen) > 20


def test_candidate_persists_self_vote_before_vote_requests() -> None:
    """ "a candidate always votes for itself at the current candidate epoch. That means, it
    will also need to update the quorum-state file as "voting for myself" before sending out
    the vote requests.\""""
    h = Harness(log=build_log([(1, 3)]), election=ElectionState(Epoch(1)))
    effects = stand(h)
    assert ActionTaken(Action.BECOME_CANDIDATE) in effects
    persisted = index(effects, lambda e: isinstance(e, PersistElectionState))
    assert effects[persisted] == PersistElectionState(ElectionState(Epoch(2), None, key(1)))
    requests = sent(effects, VoteRequest)
    assert sorted(d for d, _ in requests) == [2, 3]
    assert all(
        index(effects, lambda e, r=r: isinstance(e, Send) and e.message is r) > persisted
        for _, r in requests
    )
    # "it will increment its current leader epoch as CandidateEpoch"
    assert {r.candidate_epoch for _, r in requests} == {2}
    assert {(r.last_epoch, r.last_end_offset) for _, r in requests} == {(1, 3)}


def become_candidate(h: Harness) -> list:
    effects = stand(h)
    assert h.view.state is S.CANDIDATE
    return effects


def test_majority_makes_a_leader_with_leader_change_first() -> None:
    """ "check if it has accumulated majority of votes for this epoch ... if yes, it can
    transit to the leader state" and "Upon becoming the leader, it would also start by writing
    the current assignment state to its log\""""
    h = Harness(voters=(1, 2, 3, 4, 5), log=build_log([(1, 2)]), election=ElectionState(Epoch(1)))
    become_candidate(h)
    grant = VoteResponse(ErrorCode.NONE, NodeId(-1), Epoch(2), True)
    assert h.view.state is S.CANDIDATE
    h.recv(2, grant)
    assert h.view.state is S.CANDIDATE  # 2 of 5
    effects = h.recv(4, grant)
    assert h.view.state is S.LEADER
    assert ActionTaken(Action.BECOME_LEADER) in effects
    [append] = of(effects, AppendToLog)
    assert (append.first_offset, append.epoch) == (2, 2)
    header, [record] = decode_control_batch(bytes(append.data))
    assert record == LeaderChangeMessage(0, 1, (1, 2, 3, 4, 5), (1, 2, 4))
    assert header.partition_leader_epoch == 2
    # the append is flushed before BeginQuorumEpoch goes out, to every other voter
    flush = index(effects, lambda e: isinstance(e, FlushLog))
    begins = sent(effects, BeginQuorumEpochRequest)
    assert sorted(d for d, _ in begins) == [2, 3, 4, 5]
    assert index(effects, lambda e: isinstance(e, Send)) > flush
    assert h.stored == ElectionState(Epoch(2), NodeId(1), None)


def test_vote_response_ignored_when_no_longer_candidate() -> None:
    """ "First we need to check if the voter is still a candidate ... if it is no longer in
    "candidate" state, just ignore the response.\""""
    h = Harness(election=ElectionState(Epoch(1)))
    become_candidate(h)
    h.recv(2, VoteResponse(ErrorCode.NONE, NodeId(3), Epoch(3), False))
    assert (h.view.state, h.view.epoch, h.view.leader_id) == (S.FOLLOWER, 3, 3)
    h.recv(2, VoteResponse(ErrorCode.NONE, NodeId(-1), Epoch(2), True))
    assert h.view.state is S.FOLLOWER


def test_rejected_candidate_stops_asking_and_waits_out_its_election_timer() -> None:
    """Kafka 4.x (maybeHandleElectionLoss): a candidate that can no longer win (two voters,
    one refusal) stops sending Vote requests and waits the rest of its election timeout, then
    becomes Prospective in its epoch. (KIP-595's immediate backoff is not what Kafka ships.)"""
    h = Harness(voters=(1, 2), election_timeout_ms=1000, request_timeout_ms=100)
    become_candidate(h)
    deadline = h.replica.next_deadline_ms()
    assert deadline - h.now == 100  # the Vote request to node 2 is due again at first
    h.recv(2, VoteResponse(ErrorCode.NONE, NodeId(-1), Epoch(1), False))
    assert h.view.state is S.CANDIDATE
    election_end = h.replica.next_deadline_ms()
    assert 1000 <= election_end - h.now < 2000  # no resend: only the election timer is left
    effects = h.tick()
    assert h.now == election_end
    assert (h.view.state, h.view.epoch) == (S.PROSPECTIVE, 1)
    assert ActionTaken(Action.ELECTION_TIMEOUT) in effects
    [(_, pre)] = sent(effects, VoteRequest)
    assert pre.pre_vote and pre.candidate_epoch == 1


def test_failed_election_goes_prospective_then_bumps_epoch() -> None:
    """A candidate without a majority by its (randomized) election timeout becomes
    Prospective in its epoch (Kafka pollCandidate), and stands again in the next epoch only
    with a majority of pre-votes."""
    waits = set()
    for seed in range(20):
        h = Harness(seed=seed, election_timeout_ms=1000, request_timeout_ms=5000)
        become_candidate(h)
        t0 = h.now
        h.tick()  # election timeout
        assert (h.view.state, h.view.epoch) == (S.PROSPECTIVE, 1)
        waits.add(h.now - t0)
        assert 1000 <= h.now - t0 < 2000
        effects = h.recv(2, grant(1))
        assert (h.view.state, h.view.epoch) == (S.CANDIDATE, 2)
        assert len(sent(effects, VoteRequest)) == 2
    assert len(waits) > 5


def test_single_voter_elects_itself() -> None:
    h = Harness(voters=(1,))
    h.tick()
    assert h.view.state is S.LEADER
    assert h.view.high_watermark == 1  # its LeaderChange record is committed by itself


def test_unreachable_voter_is_retried_after_retry_backoff() -> None:
    """Requests to unreachable peers (SendFailed) are retried after retry_backoff_ms."""
    from kraft.core.events import SendFailed

    h = Harness(retry_backoff_ms=20)
    effects = become_candidate(h)
    [(_, req)] = [(d, r) for d, r in sent(effects, VoteRequest) if d == 2]
    h.step(SendFailed(h.now, NodeId(2), req))
    assert h.replica.next_deadline_ms() == h.now + 20
    again = h.step(Tick(h.now + 20))
    assert [d for d, _ in sent(again, VoteRequest)] == [2]


def test_granting_resets_election_timer() -> None:
    h = Harness(election_timeout_ms=1000)
    h.now = 900
    h.recv(2, vote(2, 1))
    assert h.replica.next_deadline_ms() >= 1900


def test_a_vote_meant_for_another_directory_is_refused() -> None:
    """Replicas are identified by (id, directory id): a Vote addressed to voter 1 with another
    directory id is not for us (INVALID_VOTER_KEY, Kafka's isValidVoterKey), whoever stands."""
    import uuid

    from kraft.ids import DirectoryId

    h = Harness()
    other_disk = ReplicaKey(NodeId(1), DirectoryId(uuid.UUID(int=99)))
    req = VoteRequest(CLUSTER, key(2), Epoch(1), Epoch(0), Offset(0), voter=other_disk)
    resp = answer(h.recv(2, req))
    assert resp.error is ErrorCode.INVALID_VOTER_KEY and not resp.vote_granted


def test_new_epoch_keeps_remaining_election_time() -> None:
    """As Kafka: an Unattached voter (or a candidate) that moves to Unattached in a newer epoch
    keeps the time left on its election timer, so a candidate with a stale log cannot keep
    postponing the others' elections by bumping the epoch."""
    h = Harness(log=build_log([(1, 5)]), election=ElectionState(Epoch(1)))
    deadline = h.replica.next_deadline_ms()
    h.now = deadline - 10
    resp = answer(h.recv(2, vote(2, 2, last_epoch=1, end=1)))  # stale log: rejected
    assert not resp.vote_granted
    assert (h.view.state, h.view.epoch) == (S.UNATTACHED, 2)
    assert h.replica.next_deadline_ms() == deadline


def test_vote_for_another_replica_key_is_invalid() -> None:
    """KIP-853: a Vote request naming another voter key gets INVALID_VOTER_KEY."""
    h = Harness()
    req = VoteRequest(CLUSTER, key(2), Epoch(1), Epoch(0), Offset(0), voter=key(3))
    resp = answer(h.recv(2, req))
    assert resp.error is ErrorCode.INVALID_VOTER_KEY and not resp.vote_granted
    assert h.view.state is S.UNATTACHED
