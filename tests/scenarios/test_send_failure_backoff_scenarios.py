"""Scenario tests of which failed sends back a destination off: only the failure of the
request this state has in flight to it.

Kafka 4.3.1 turns a failed send into an error answer to that request's correlation id;
RequestManager.onResponseResult backs the destination off only when that id is the one in
flight to it (ConnectionState.isResponseExpected), and every state transition resets all
connections (KafkaRaftClient.resetConnections in onBecomeLeader, onBecomeCandidate,
onBecomeProspective, ...). So a failure reported late is ignored when it is of a request:

- sent in an earlier state: a Leader hearing that a BeginQuorumEpoch of its previous
  leadership failed, or a Candidate hearing that its Prospective's pre-vote failed, keeps the
  request it has in flight to that voter until that request's timeout (LeaderRole.begin_failed
  and ElectionRole.vote_failed compare the failed request's epoch with the replica's);
- to a destination with nothing in flight: a Leader whose later BeginQuorumEpoch to the voter
  was answered, or a Candidate that a majority refused and that asks nobody any more (Kafka's
  maybeSendVoteRequests sends nothing once isVoteRejected), does not start asking it again.

kraft keeps no correlation ids (refinement.invariants_timing: any answer of the epoch
completes the request in flight), so the tests use failures of requests this replica did send,
reported after the state or the request they belonged to was over.

One replica (node 1) is driven by hand; the test plays the other voters.
"""

from __future__ import annotations

from hand_driven import HandDriven
from memory_logs import key

from kraft.core.effects import Send
from kraft.core.events import Event, Receive, SendFailed
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    FetchRequest,
    VoteRequest,
    VoteResponse,
)
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset

S = ReplicaState
CLUSTER = ClusterId("send-failure-backoff")


class Node(HandDriven):
    """Replica 1 of voters {1, ..., n}, driven by hand from t=0; `sends` lists every Send it
    makes with the time it was made, and its appends are performed on its log as a driver
    would."""

    def __init__(self, voters: int = 3, **cfg: int) -> None:
        super().__init__(CLUSTER, range(1, voters + 1), timing=QuorumTiming(**cfg))

    @property
    def state(self) -> tuple[ReplicaState, int]:
        v = self.replica.view()
        return v.state, int(v.epoch)

    def sent(self, kind: type, dst: int, since: int = 0) -> list[tuple[int, Send]]:
        """(time, Send) of each `kind` request sent to `dst` at or after `since`."""
        return [
            (at, s)
            for at, s in self.sends
            if at >= since and int(s.dst) == dst and isinstance(s.message, kind)
        ]

    def last_vote_request(self, dst: int) -> VoteRequest:
        _, send = self.sent(VoteRequest, dst)[-1]
        assert isinstance(send.message, VoteRequest)
        return send.message

    def answer_vote(self, src: int, granted: bool) -> None:
        """Voter `src` answers the (pre-)vote request last sent to it, in its epoch."""
        req = self.last_vote_request(src)
        resp = VoteResponse(ErrorCode.NONE, NodeId(-1), req.candidate_epoch, granted)
        self.step(Receive(self.now, NodeId(src), resp, req))

    def stand(self) -> None:
        """Tick until the election timer makes the replica Prospective (pre-votes sent)."""
        self.tick_until(S.PROSPECTIVE)

    def lead(self) -> int:
        """Stand and win with voter 2's pre-vote and vote (a majority of three); the time the
        replica became Leader."""
        self.stand()
        self.answer_vote(2, True)
        assert self.replica.view().state is S.CANDIDATE
        self.answer_vote(2, True)
        assert self.replica.view().state is S.LEADER
        return self.now

    def fetch(self, src: int, at: int) -> Receive:
        """A Fetch from voter `src` at `at` from the leader's log end, in its epoch."""
        v = self.replica.view()
        req = FetchRequest(CLUSTER, key(src), v.epoch, v.end_offset, v.last_epoch, Offset(0))
        return Receive(at, NodeId(src), req, None)

    def begins(self, dst: int, epoch: int) -> list[int]:
        """When the replica sent BeginQuorumEpoch of `epoch` to `dst`."""
        return [
            at
            for at, s in self.sent(BeginQuorumEpochRequest, dst)
            if isinstance(s.message, BeginQuorumEpochRequest) and s.message.leader_epoch == epoch
        ]


def _voter_3_fetches(n: Node, start: int, until: int) -> dict[int, list[Event]]:
    """Voter 3 fetches every 400 ms (the leader keeps its quorum and never asks it again)."""
    return {t: [n.fetch(3, t)] for t in range(start, until, 400)}


# -- BeginQuorumEpoch (LeaderRole.begin_failed)


def test_a_failed_begin_quorum_epoch_of_an_earlier_leadership_does_not_back_off_this_one() -> None:
    """Node 1 leads epoch 1 and asks voter 2 (request A); voter 3's answer names epoch 2, so
    node 1 becomes Unattached there, stands and leads epoch 3, asking voter 2 again (request
    B at E, in flight for the request timeout, 2000 ms). Request A's failure is reported just
    after: it belongs to a leadership that is over (Kafka reset every connection when it led
    again) and backs nothing off. So the round of E+1000 skips voter 2, whose request B is
    still in flight, and the round of E+2000 asks it."""
    n = Node(election_timeout_ms=200)
    n.lead()
    assert n.state == (S.LEADER, 1)
    [(_, a_send)] = n.sent(BeginQuorumEpochRequest, 2)
    [(_, to_3)] = n.sent(BeginQuorumEpochRequest, 3)
    fenced = BeginQuorumEpochResponse(ErrorCode.FENCED_LEADER_EPOCH, NodeId(-1), Epoch(2))
    n.step(Receive(n.now + 1, NodeId(3), fenced, to_3.message))
    assert n.state == (S.UNATTACHED, 2)
    e = n.lead()
    assert n.state == (S.LEADER, 3)
    assert n.begins(2, 3) == [e]
    events = _voter_3_fetches(n, e + 10, e + 3000)
    events[e + 1] = [SendFailed(e + 1, NodeId(2), a_send.message)]
    n.run(e + 2500, events)
    assert n.state == (S.LEADER, 3)
    assert n.begins(2, 3) == [e, e + 2000]


def test_a_late_failure_of_a_begin_quorum_epoch_after_a_later_one_was_answered_is_ignored() -> None:
    """Leader of epoch 1 from E, request timeout 1000 ms (= fetch timeout / 2), retry backoff
    1500 ms. Voter 2 never fetches: it is asked at every round (E, E+1000, E+2000); at E+1000
    its first request has timed out and it is asked again. That second request is answered at
    E+1001 (voter 2 is ready again at once); the failure of the first is reported at E+1002
    (its driver's timer fired late). Nothing is in flight to voter 2 then, so nothing backs it
    off: the round of E+2000 asks it, not one after a backoff ending at E+2502."""
    n = Node(request_timeout_ms=1000, retry_backoff_ms=1500)
    e = n.lead()
    [(_, first)] = n.sent(BeginQuorumEpochRequest, 2)
    events = _voter_3_fetches(n, e + 10, e + 3000)
    n.run(e + 1000, events)
    assert n.begins(2, 1) == [e, e + 1000]
    [_, (_, second)] = n.sent(BeginQuorumEpochRequest, 2)
    answer = BeginQuorumEpochResponse(ErrorCode.NONE, NodeId(1), Epoch(1))
    events[e + 1001] = [Receive(e + 1001, NodeId(2), answer, second.message)]
    events[e + 1002] = [SendFailed(e + 1002, NodeId(2), first.message)]
    n.run(e + 2500, {t: evs for t, evs in events.items() if t > e + 1000})
    assert n.state == (S.LEADER, 1)
    assert n.begins(2, 1) == [e, e + 1000, e + 2000]


# -- Vote (ElectionRole.vote_failed)


def test_a_failed_pre_vote_reported_to_the_candidate_does_not_hasten_its_vote_request() -> None:
    """Node 1 is Prospective in epoch 0 and asks voters 2 and 3 for pre-votes; voter 2 grants:
    it is Candidate in epoch 1 and asks both for votes at T (request timeout 100 ms, retry
    backoff 20 ms). The pre-vote to voter 3 is then reported failed, at T+1: a request of the
    Prospective it no longer is. The Vote to voter 3 stays in flight: it is sent again at its
    request timeout, T+100, not after a backoff (T+21)."""
    n = Node(election_timeout_ms=1000, request_timeout_ms=100, retry_backoff_ms=20)
    n.stand()
    pre_vote = n.last_vote_request(3)
    assert pre_vote.pre_vote
    n.answer_vote(2, True)
    assert n.state == (S.CANDIDATE, 1)
    t = n.now

    def votes_to_3() -> list[int]:
        return [
            at
            for at, s in n.sent(VoteRequest, 3, since=t)
            if isinstance(s.message, VoteRequest) and not s.message.pre_vote
        ]

    assert votes_to_3() == [t]
    n.step(SendFailed(t + 1, NodeId(3), pre_vote))
    while len(votes_to_3()) < 2:
        n.tick()
    assert n.state == (S.CANDIDATE, 1)
    assert votes_to_3() == [t, t + 100]


def test_a_candidate_a_majority_refused_does_not_ask_again_a_voter_whose_vote_failed() -> None:
    """Voters {1, 2, 3, 4}: node 1 is Candidate in epoch 1 and asks 2, 3 and 4. Voters 2 and 3
    refuse, so 3 votes of 4 can no longer be had and it asks nobody again (Kafka:
    isVoteRejected). Then its Vote to voter 4 is reported failed: nothing is in flight to voter
    4 any more, so the failure brings no resend after the retry backoff; the candidate sends
    no Vote at all until its election timer makes it Prospective."""
    n = Node(4, election_timeout_ms=1000, request_timeout_ms=100, retry_backoff_ms=20)
    n.stand()
    n.answer_vote(2, True)
    n.answer_vote(3, True)
    assert n.state == (S.CANDIDATE, 1)
    t = n.now
    to_4 = n.last_vote_request(4)
    assert not to_4.pre_vote
    n.answer_vote(2, False)
    n.answer_vote(3, False)
    n.step(SendFailed(t + 1, NodeId(4), to_4))
    while n.replica.view().state is S.CANDIDATE:
        n.tick()
    assert n.state == (S.PROSPECTIVE, 1)
    votes = [
        (at, int(s.dst))
        for at, s in n.sends
        if at > t and isinstance(s.message, VoteRequest) and not s.message.pre_vote
    ]
    assert votes == []
