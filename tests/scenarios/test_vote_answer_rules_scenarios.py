"""Scenario tests of which Vote answers a standing replica counts, and of a vote granted again.

Kafka 4.3.1 hands a response to KafkaRaftClient.handleVoteResponse only when its correlation
id is the one in flight to its source (RequestManager.isResponseExpected); every state change
resets the connections, and the first answer completes the request. So Kafka counts, per
voter and per round, exactly one answer, to a request of that round; everything else is
dropped before it is read. kraft keeps no correlation ids: the driver hands the request back
with its answer (Receive.in_reply_to) and ElectionRole.handle_vote_response applies the same
rules to it:

- an answer naming an epoch below ours is no longer relevant (Kafka's
  maybeHandleCommonResponse: `epoch < quorum.epoch()` is handled, nothing recorded);
- an answer to a request of an earlier epoch's round is not counted in this round;
- a voter's answer is counted once per round: a second answer from it, whatever it says, is
  not (Kafka: no request in flight to it any more);
- FENCED_LEADER_EPOCH is no vote (Kafka: maybeHandleCommonResponse handles it, nothing is
  recorded), even when it names our own epoch;
- an error answer reaching a replica that no longer stands (a Leader) touches nothing of its
  own requests (Kafka: the answer's correlation id was reset when it became Leader).

And on the voter's side (KafkaRaftClient.handleVoteRequest): a replica that already voted in
this epoch grants the same candidate again, but records nothing: only an Unattached or a
Prospective that has not voted (isUnattachedNotVoted / isProspectiveNotVoted) stores a vote.

One replica (node 1) is driven by hand; the test plays the other voters.
"""

from __future__ import annotations

import random

from memory_logs import key, perform_append

from kraft.core.effects import (
    AppendToLog,
    Effect,
    ElectionState,
    PersistElectionState,
    Send,
    StateChanged,
)
from kraft.core.events import Event, Receive, Tick
from kraft.core.messages import BeginQuorumEpochRequest, VoteRequest, VoteResponse
from kraft.core.replica import Replica, ReplicaConfig
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset
from kraft.storage.log_adapter import BatchReader, log_state_of
from kraft.storage.memory_log import MemoryLog

S = ReplicaState
CLUSTER = ClusterId("vote-answer-rules")
NONE = NodeId(-1)


class Nominee:
    """Replica 1 of voters {1, ..., n}, driven by hand from t=0: its Sends are kept with the
    time they were made, its appends are performed on its log."""

    def __init__(self, voters: int = 3, stored: ElectionState | None = None, **cfg: int) -> None:
        self.log = MemoryLog()
        ids = tuple(key(i) for i in range(1, voters + 1))
        self.replica = Replica(
            ReplicaConfig(key(1), CLUSTER, ids, QuorumTiming(**cfg)),
            election_state=stored,
            log_state=log_state_of(self.log),
            reader=BatchReader(self.log),
            rng=random.Random(7),
            now_ms=0,
        )
        self.now = 0
        self.sends: list[tuple[int, Send]] = []
        self._keep(self.replica.start())

    def _keep(self, effects: list[Effect]) -> list[Effect]:
        for e in effects:
            if isinstance(e, AppendToLog):
                perform_append(self.log, e)
            elif isinstance(e, Send):
                self.sends.append((self.now, e))
        return effects

    def step(self, ev: Event) -> list[Effect]:
        self.now = max(self.now, ev.now_ms)
        return self._keep(self.replica.step(ev))

    def tick(self) -> list[Effect]:
        return self.step(Tick(max(self.replica.next_deadline_ms(), self.now)))

    @property
    def state(self) -> tuple[ReplicaState, int]:
        v = self.replica.view()
        return v.state, int(v.epoch)

    def requests(self, kind: type, dst: int) -> list[tuple[int, object]]:
        """(time, message) of each `kind` request sent to `dst`."""
        return [
            (at, s.message)
            for at, s in self.sends
            if int(s.dst) == dst and isinstance(s.message, kind)
        ]

    def last_vote_request(self, dst: int) -> VoteRequest:
        msg = self.requests(VoteRequest, dst)[-1][1]
        assert isinstance(msg, VoteRequest)
        return msg

    def answer(
        self,
        src: int,
        granted: bool,
        *,
        epoch: int | None = None,
        error: ErrorCode = ErrorCode.NONE,
        to: VoteRequest | None = None,
        after: int = 1,
    ) -> list[Effect]:
        """Voter `src` answers `to` (by default the (pre-)vote request last sent to it),
        naming `epoch` (by default that request's epoch), `after` ms from now."""
        req = to if to is not None else self.last_vote_request(src)
        named = Epoch(req.candidate_epoch if epoch is None else epoch)
        resp = VoteResponse(error, NONE, named, granted)
        return self.step(Receive(self.now + after, NodeId(src), resp, req))

    def stand(self) -> None:
        """Tick until the election timer makes the replica Prospective (pre-votes sent)."""
        while self.replica.view().state is not S.PROSPECTIVE:
            self.tick()

    def run_until(self, until: int) -> None:
        while max(self.replica.next_deadline_ms(), self.now) <= until:
            self.tick()
        self.now = until


# ------------------------------------------------------------------ which answers count


def test_an_answer_naming_an_earlier_epoch_is_not_counted() -> None:
    """A Candidate of epoch 1 is not made Leader by a grant that names epoch 0, though it
    answers its own epoch-1 request: the answer is no longer relevant (Kafka: handled by
    maybeHandleCommonResponse, no vote recorded). The voter's grant naming epoch 1 then
    wins the election."""
    n = Nominee()
    n.stand()
    n.answer(2, True)
    assert n.state == (S.CANDIDATE, 1)
    vote = n.last_vote_request(2)
    assert not vote.pre_vote and vote.candidate_epoch == 1
    n.answer(2, True, epoch=0, to=vote)
    assert n.state == (S.CANDIDATE, 1)
    n.answer(2, True, to=vote)
    assert n.state == (S.LEADER, 1)


def test_an_answer_to_an_earlier_epochs_pre_vote_is_not_counted() -> None:
    """A Prospective of epoch 1 (a Candidate of epoch 1 whose election timed out) is not made
    Candidate by a grant answering the pre-vote it sent as a Prospective of epoch 0, even
    one naming epoch 1: that request belonged to an earlier round (Kafka: its correlation id
    was reset when the replica left that state). A grant of this round's pre-vote counts."""
    n = Nominee()
    n.stand()
    old_pre_vote = n.last_vote_request(3)
    assert old_pre_vote.pre_vote and old_pre_vote.candidate_epoch == 0
    n.answer(2, True)
    assert n.state == (S.CANDIDATE, 1)
    while n.state[0] is S.CANDIDATE:  # nobody answers the votes: the timer runs out
        n.tick()
    assert n.state == (S.PROSPECTIVE, 1)
    n.answer(3, True, epoch=1, to=old_pre_vote)
    assert n.state == (S.PROSPECTIVE, 1)
    fresh = n.last_vote_request(3)
    assert fresh.pre_vote and fresh.candidate_epoch == 1
    n.answer(3, True, to=fresh)
    assert n.state == (S.CANDIDATE, 2)


def test_a_grant_after_a_refusal_from_the_same_voter_is_not_counted() -> None:
    """Voter 2 refuses the pre-vote, then a second answer from it grants it: only its first
    answer of the round counts (Kafka: no request is in flight to it any more), so the
    Prospective has one pre-vote (its own) of the two it needs."""
    n = Nominee()
    n.stand()
    pre_vote = n.last_vote_request(2)
    n.answer(2, False, to=pre_vote)
    assert n.state == (S.PROSPECTIVE, 0)
    n.answer(2, True, to=pre_vote)
    assert n.state == (S.PROSPECTIVE, 0)
    n.answer(3, True)
    assert n.state == (S.CANDIDATE, 1)


def test_a_refusal_after_a_grant_from_the_same_voter_is_not_counted() -> None:
    """Of four voters (a majority is three), voter 2 grants the pre-vote, then a second
    answer from it refuses: that refusal is not counted, so voter 3's refusal leaves one
    refusal, and the Prospective still stands (it loses only once two voters refused)."""
    n = Nominee(voters=4)
    n.stand()
    pre_vote = n.last_vote_request(2)
    n.answer(2, True, to=pre_vote)
    n.answer(2, False, to=pre_vote)
    n.answer(3, False)
    assert n.state == (S.PROSPECTIVE, 0)
    n.answer(4, True)
    assert n.state == (S.CANDIDATE, 1)


def test_fenced_naming_our_own_epoch_is_no_refusal() -> None:
    """FENCED_LEADER_EPOCH is no vote, even naming the Prospective's own epoch (Kafka's
    maybeHandleCommonResponse handles it before any vote is recorded): both other voters
    answering so do not make the pre-vote lost, and the Prospective asks them again while
    it stands."""
    n = Nominee(request_timeout_ms=300)
    n.stand()
    start = n.now
    n.answer(2, False, error=ErrorCode.FENCED_LEADER_EPOCH)
    n.answer(3, False, error=ErrorCode.FENCED_LEADER_EPOCH)
    assert n.state == (S.PROSPECTIVE, 0)
    n.run_until(start + 400)
    assert n.state == (S.PROSPECTIVE, 0)
    for voter in (2, 3):
        asked = [at for at, m in n.requests(VoteRequest, voter) if at > start]
        assert asked, f"voter {voter} is not asked again"


def test_a_leader_ignores_a_late_vote_error_while_its_begin_quorum_epoch_is_in_flight() -> None:
    """A Leader hears a late error answer to the Vote request of its candidacy from voter 3,
    to which its first BeginQuorumEpoch is still unanswered: that answer is of no request of
    the Leader's (Kafka resets the connections on becoming Leader), so voter 3 is not backed
    off and asked again at the next round; its BeginQuorumEpoch stays in flight until the
    request timeout, and is sent again only then."""
    n = Nominee()
    n.stand()
    n.answer(2, True)
    vote_to_3 = n.last_vote_request(3)
    n.answer(2, True)
    assert n.state == (S.LEADER, 1)
    led = n.now
    first = [at for at, _ in n.requests(BeginQuorumEpochRequest, 3)]
    assert first == [led]
    n.answer(3, False, error=ErrorCode.INVALID_VOTER_KEY, to=vote_to_3)
    assert n.state == (S.LEADER, 1)
    timeout = QuorumTiming().request_timeout_ms
    n.run_until(led + timeout - 1)
    assert [at for at, _ in n.requests(BeginQuorumEpochRequest, 3)] == [led]
    n.run_until(led + timeout)
    assert [at for at, _ in n.requests(BeginQuorumEpochRequest, 3)] == [led, led + timeout]


# ------------------------------------------------------------------ granting again


def test_a_prospective_that_voted_grants_its_candidate_again_and_records_nothing() -> None:
    """A replica that voted for 2 in epoch 1 and whose timer ran out (Prospective, keeping
    its vote) hears 2's Vote request again: it grants it (its vote of the epoch), and records
    nothing: no PersistElectionState, no state change, its own pre-vote round goes on (Kafka
    stores a vote only when isUnattachedNotVoted or isProspectiveNotVoted)."""
    n = Nominee(stored=ElectionState(Epoch(1), None, key(2)))
    assert n.state == (S.VOTED, 1)
    n.stand()
    assert n.state == (S.PROSPECTIVE, 1)
    assert n.replica.view().voted_for == key(2)
    n.answer(3, False)  # one refusal of its pre-vote, kept below
    again = VoteRequest(CLUSTER, key(2), Epoch(1), Epoch(0), Offset(0), key(1))
    sends_before = len(n.sends)
    out = n.step(Receive(n.now + 1, NodeId(2), again, None))
    assert not [e for e in out if isinstance(e, (PersistElectionState, StateChanged))]
    answers = [e.message for e in out if isinstance(e, Send)]
    assert answers == [VoteResponse(ErrorCode.NONE, NONE, Epoch(1), True)]
    assert len(n.sends) == sends_before + 1  # no pre-vote sent again
    assert n.state == (S.PROSPECTIVE, 1)
    assert n.replica.view().voted_for == key(2)
    n.answer(2, False)  # the second refusal: the pre-vote is lost, back to Voted
    assert n.state == (S.VOTED, 1)
