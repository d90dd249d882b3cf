"""Scenario tests of what follows an error answer to a Vote request: the replica backs that
voter off for quorum.retry.backoff.ms and asks it again when the backoff runs out (Kafka's
RequestManager.onResponseResult with success false: the connection backs off, then is ready
again; KafkaRaftClient asks again every voter that has not answered). A leader's
BeginQuorumEpoch is asked again only at its timer's rounds, which skip a voter backing off:
tests/scenarios/test_begin_quorum_epoch_resend_scenarios.py.

No honest peer of the simulator's static quorums answers these requests with such an error
(INVALID_REQUEST, INVALID_VOTER_KEY, BROKER_NOT_AVAILABLE, INCONSISTENT_CLUSTER_ID come from a
peer with another view of the quorum, or a broken one), and the adversary's profile, which
forges them, runs without the timing checkers. So one replica is driven by hand here, the
test plays the other voters, and every step is shown to the simulator's timing checkers
(refinement.invariants_timing.TimingMonitor): what fails is the rule the sweep states,
VoteRetryNotLate or BeginQuorumEpochRetryNotLate (...NotEarly for a resend too soon).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from memory_logs import key

from kraft.core.effects import Effect, Send
from kraft.core.events import Event, Receive, Tick
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    Message,
    Request,
    VoteRequest,
    VoteResponse,
)
from kraft.core.replica import Replica, ReplicaConfig
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import NO_NODE, ClusterId, NodeId
from kraft.storage.log_adapter import BatchReader, log_state_of
from kraft.storage.memory_log import MemoryLog
from refinement import invariants_timing as timing
from refinement.invariants import Violation

CLUSTER = ClusterId("error-answer-retry")
VOTERS = (key(1), key(2), key(3))
ME, ALLY, REFUSER = NodeId(1), NodeId(2), NodeId(3)
S = ReplicaState

# Errors Kafka counts as a failed answer (maybeHandleCommonResponse, handleUnexpectedError).
FAILURES = (
    ErrorCode.INVALID_REQUEST,
    ErrorCode.INVALID_VOTER_KEY,
    ErrorCode.BROKER_NOT_AVAILABLE,
    ErrorCode.INCONSISTENT_CLUSTER_ID,
)


class Solo:
    """Node 1 of a static quorum {1, 2, 3} and the timing checkers watching it."""

    def __init__(self, seed: int = 0, **cfg: int) -> None:
        self.timing = QuorumTiming(**cfg)
        log = MemoryLog()
        self.replica = Replica(
            ReplicaConfig(key(ME), CLUSTER, VOTERS, self.timing),
            election_state=None,
            log_state=log_state_of(log),
            reader=BatchReader(log),
            rng=random.Random(seed),
            now_ms=0,
        )
        self.now = 0
        self.monitor = timing.TimingMonitor(self.timing, tuple(v.id for v in VOTERS))
        self.effects: list[Effect] = self.replica.start()
        self._check(self.monitor.started(ME, 0, self.effects))

    @staticmethod
    def _check(found: Violation | None) -> None:
        assert found is None, f"{found.name}: {found.detail}"

    def step(self, event: Event) -> list[Effect]:
        self.now = max(self.now, event.now_ms)
        self._check(self.monitor.overdue(self.now))
        self.effects = self.replica.step(event)
        leader = self.replica.view().leader_id
        self._check(self.monitor.step(ME, self.now, event, self.effects, leader))
        return self.effects

    def requests(self, kind: type, effects: Sequence[Effect]) -> dict[NodeId, Request]:
        found: dict[NodeId, Request] = {}
        for e in effects:
            if isinstance(e, Send) and isinstance(e.message, kind):
                assert isinstance(e.message, VoteRequest | BeginQuorumEpochRequest)
                found[e.dst] = e.message
        return found

    def tick_until(self, kind: type, dst: NodeId, limit: int) -> Request:
        """Tick at each of the replica's deadlines until it sends a `kind` to `dst`."""
        while True:
            at = max(self.replica.next_deadline_ms(), self.now)
            assert at <= limit, f"no {kind.__name__} to {dst} by t={limit}ms"
            sent = self.requests(kind, self.step(Tick(at)))
            if dst in sent:
                return sent[dst]

    def answer(self, at: int, src: NodeId, msg: Message, request: Request) -> list[Effect]:
        return self.step(Receive(at, src, msg, request))


def _standing(s: Solo, stage: S) -> tuple[type, dict[NodeId, Request]]:
    """Bring node 1 to `stage` (Prospective, Candidate or Leader) with the ally's grants;
    the kind of request it then asks the other voters, and those requests."""
    while s.replica.view().state is not S.PROSPECTIVE:
        s.step(Tick(max(s.replica.next_deadline_ms(), s.now)))
    asked = s.requests(VoteRequest, s.effects)
    for nxt in (S.CANDIDATE, S.LEADER):
        if s.replica.view().state is stage:
            break
        epoch = s.replica.view().epoch
        grant = VoteResponse(ErrorCode.NONE, NO_NODE, epoch, True)
        effects = s.answer(s.now + 1, ALLY, grant, asked[ALLY])
        assert s.replica.view().state is nxt
        kind = BeginQuorumEpochRequest if nxt is S.LEADER else VoteRequest
        asked = s.requests(kind, effects)
    kind = BeginQuorumEpochRequest if stage is S.LEADER else VoteRequest
    assert REFUSER in asked, (stage, asked)
    return kind, asked


def _refusal(kind: type, error: ErrorCode, s: Solo) -> Message:
    """The refuser's error answer: it knows no leader of the requester's epoch."""
    epoch = s.replica.view().epoch
    if kind is VoteRequest:
        return VoteResponse(error, NO_NODE, epoch, False)
    return BeginQuorumEpochResponse(error, NO_NODE, epoch)


@pytest.mark.parametrize("error", FAILURES, ids=lambda e: e.name)
@pytest.mark.parametrize("stage", [S.PROSPECTIVE, S.CANDIDATE], ids=lambda st: st.value)
def test_an_error_answer_is_followed_by_the_same_request_a_retry_backoff_later(
    stage: S, error: ErrorCode
) -> None:
    """A Prospective's pre-vote, a Candidate's vote: refused with
    an error, it goes to the same voter again exactly quorum.retry.backoff.ms after the
    refusal (not at the refused request's timeout), in the same state and epoch."""
    s = Solo(seed=3)
    kind, asked = _standing(s, stage)
    epoch = s.replica.view().epoch
    at = s.now + 7
    s.answer(at, REFUSER, _refusal(kind, error, s), asked[REFUSER])
    again = s.tick_until(kind, REFUSER, limit=at + s.timing.request_timeout_ms)
    assert s.now == at + s.timing.retry_backoff_ms
    assert s.replica.view().state is stage and s.replica.view().epoch == epoch
    assert again == asked[REFUSER]


@pytest.mark.parametrize("stage", [S.PROSPECTIVE], ids=lambda st: st.value)
def test_a_late_refusal_of_a_request_answered_in_between_asks_nothing_more(stage: S) -> None:
    """The ally answered: a refusal from the ally arriving
    after that, for the same request (a duplicate on the wire), asks the ally nothing more in
    this state (Kafka asks only the voters that have not answered)."""
    s = Solo(seed=3)
    kind, asked = _standing(s, stage)
    epoch = s.replica.view().epoch
    ok: Message
    if kind is VoteRequest:
        ok = VoteResponse(ErrorCode.NONE, NO_NODE, epoch, False)  # a refusal of the pre-vote
    else:
        ok = BeginQuorumEpochResponse(ErrorCode.NONE, ME, epoch)
    s.answer(s.now + 2, ALLY, ok, asked[ALLY])
    s.answer(s.now + 3, ALLY, _refusal(kind, ErrorCode.INVALID_REQUEST, s), asked[ALLY])
    end = s.now + s.timing.request_timeout_ms - 1
    while s.now < end and s.replica.view().state is stage:
        effects = s.step(Tick(min(max(s.replica.next_deadline_ms(), s.now + 1), end)))
        assert ALLY not in s.requests(kind, effects), s.now
