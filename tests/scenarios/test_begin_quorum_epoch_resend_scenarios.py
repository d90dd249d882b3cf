"""Scenario tests of when a leader sends BeginQuorumEpoch, as Kafka 4.3 does
(KafkaRaftClient.maybeSendBeginQuorumEpochRequests over LeaderState's beginQuorumEpochTimer):

- the timer starts expired, so BecomeLeader's step announces the leader to every other voter;
  it then restarts for fetch timeout / 2;
- each time it runs out, the leader asks every other voter that has not fetched within fetch
  timeout / 2 (or never did), whether or not it answered an earlier BeginQuorumEpoch, and
  restarts it: a voter that endorsed the leader and then stopped fetching is asked again at
  the first round at least fetch timeout / 2 after its last Fetch, not before; a voter that
  fetches regularly is never asked again;
- a round skips a voter whose request is still in flight (its request timeout has not run out)
  or that backs off after an error answer (Kafka's RequestManager.isReady): it is asked at the
  next round that finds it ready, not when it becomes ready.

One replica (node 1) is driven directly: the test plays the other voters, ticking the leader
at each deadline it reports.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hand_driven import HandDriven
from memory_logs import key

from kraft.core.effects import ElectionState
from kraft.core.events import Event, Receive
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    FetchRequest,
    Request,
)
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset

CLUSTER = ClusterId("begin-resend-cluster")
EPOCH = Epoch(1)
ME = NodeId(1)


class Leader(HandDriven):
    """Node 1, a Candidate of epoch 1 (its vote for itself on record) that votes from nodes
    2, 3, ... make Leader at `elected_at`; `begins` lists every BeginQuorumEpoch it sends as
    (time, dst, request)."""

    def __init__(self, voters: int = 3, *, elected_at: int = 5000, **cfg: int) -> None:
        super().__init__(CLUSTER, range(1, voters + 1), timing=QuorumTiming(**cfg),
                         election_state=ElectionState(EPOCH, voted_for=key(1)),
                         start_ms=elected_at)  # fmt: skip
        for v in range(2, voters // 2 + 2):  # a majority with its own vote
            self.grant(v, None)
        assert self.replica.view().state is ReplicaState.LEADER
        self.epoch = self.replica.view().epoch

    @property
    def begins(self) -> list[tuple[int, NodeId, BeginQuorumEpochRequest]]:
        return [
            (at, s.dst, s.message)
            for at, s in self.sends
            if isinstance(s.message, BeginQuorumEpochRequest)
        ]

    def run(
        self,
        until: int,
        events: Mapping[int, list[Event]] | None = None,
        *,
        stays: ReplicaState | None = ReplicaState.LEADER,
    ) -> None:
        """Tick the leader at each deadline up to `until`, handing it `events` (by time) on
        the way; it stays Leader throughout."""
        super().run(until, events, stays=stays)

    def fetch(self, src: int, at: int) -> Receive:
        """A Fetch from voter `src` at `at` from the leader's log end (accepted: it records
        the voter's last Fetch)."""
        end = self.replica.view().end_offset
        req = FetchRequest(CLUSTER, key(src), self.epoch, end, self.epoch, Offset(0))
        return Receive(at, NodeId(src), req, None)

    def answer(self, src: int, at: int, error: ErrorCode = ErrorCode.NONE) -> Receive:
        of: Request = BeginQuorumEpochRequest(CLUSTER, ME, self.epoch, voter=key(src))
        return Receive(at, NodeId(src), BeginQuorumEpochResponse(error, ME, self.epoch), of)

    def asked(self, dst: int, after: int = -1) -> list[int]:
        """When the leader sent BeginQuorumEpoch to `dst`, after time `after`."""
        return [t for t, d, _ in self.begins if d == dst and t > after]


def test_the_first_round_at_election_asks_every_other_voter_and_the_timer_restarts() -> None:
    """BecomeLeader's step asks every other voter; the next round is fetch timeout / 2 later
    (not at the request timeout), and asks again the voters that answered but never fetched."""
    ld = Leader(voters=5, request_timeout_ms=300)
    e = ld.now
    assert sorted(d for t, d, _ in ld.begins if t == e) == [2, 3, 4, 5]
    ld.run(e + 1, {e + 1: [ld.answer(v, e + 1) for v in (2, 3, 4, 5)]})
    assert ld.replica.next_deadline_ms() == e + 1000  # fetch timeout 2000 / 2
    ld.run(e + 999)
    assert all(t == e for t, _, _ in ld.begins)
    ld.run(e + 1000)
    assert sorted(d for t, d, _ in ld.begins if t == e + 1000) == [2, 3, 4, 5]


def test_a_voter_that_endorsed_the_leader_and_stops_fetching_is_asked_again_at_a_round() -> None:
    """Voter 2 answers BeginQuorumEpoch and fetches at e+100, then falls silent; voter 3 keeps
    fetching. The rounds are at e, e+1000, e+2000, ...: at e+1000 voter 2's Fetch is 900 ms old
    (under fetch timeout / 2), so it is asked again only at e+2000, not when its Fetch turned
    1000 ms old (e+1100)."""
    ld = Leader()
    e = ld.now
    events: dict[int, list[Event]] = {e + 1: [ld.answer(2, e + 1), ld.answer(3, e + 1)],
                                      e + 100: [ld.fetch(2, e + 100)]}  # fmt: skip
    for t in range(e + 50, e + 4000, 300):
        events.setdefault(t, []).append(ld.fetch(3, t))
    ld.run(e + 2500, events)
    assert ld.asked(2) == [e, e + 2000]
    assert ld.asked(3) == [e]


def test_at_each_round_only_the_voters_that_stopped_fetching_are_asked() -> None:
    """Voter 3 fetches every 400 ms and is never asked again; voter 2, which answered and
    never fetched, is asked at every round (e+1000, e+2000, ...)."""
    ld = Leader(request_timeout_ms=500)
    e = ld.now
    events: dict[int, list[Event]] = {e + 1: [ld.answer(2, e + 1)]}
    for t in range(e + 10, e + 10_000, 400):
        events.setdefault(t, []).append(ld.fetch(3, t))
    for t in range(e + 1001, e + 10_000, 1000):  # each of voter 2's answers a moment later
        events.setdefault(t, []).append(ld.answer(2, t))
    ld.run(e + 5500, events)
    assert ld.asked(3) == [e]
    assert ld.asked(2) == [e, e + 1000, e + 2000, e + 3000, e + 4000, e + 5000]


def test_a_voter_with_a_request_in_flight_is_not_asked_again_before_its_request_timeout() -> None:
    """Voter 3 never answers nor fetches. With a request timeout of 1500 ms its request of e
    is still in flight at the round of e+1000 (skipped) and has timed out by the round of
    e+2000; then again at e+3000 (skipped) and e+4000: never at e+1500 or e+3500."""
    ld = Leader(request_timeout_ms=1500)
    e = ld.now
    events: dict[int, list[Event]] = {}
    for t in range(e + 10, e + 10_000, 400):
        events.setdefault(t, []).append(ld.fetch(2, t))
    ld.run(e + 4700, events)
    assert ld.asked(3) == [e, e + 2000, e + 4000]
    assert ld.asked(2) == [e]


def test_a_voter_backing_off_after_an_error_answer_waits_for_the_next_round() -> None:
    """Voter 3 refuses BeginQuorumEpoch (BROKER_NOT_AVAILABLE, a failure to Kafka) at e+990:
    it backs off until e+1010, so the round of e+1000 skips it and it is asked at e+2000, not
    when its backoff ran out."""
    ld = Leader(retry_backoff_ms=20)
    e = ld.now
    events: dict[int, list[Event]] = {
        e + 990: [ld.answer(3, e + 990, ErrorCode.BROKER_NOT_AVAILABLE)]
    }
    for t in range(e + 10, e + 10_000, 400):
        events.setdefault(t, []).append(ld.fetch(2, t))
    ld.run(e + 2500, events)
    assert ld.asked(3) == [e, e + 2000]


def test_a_voter_whose_fetch_is_exactly_half_a_fetch_timeout_old_is_asked() -> None:
    """Voter 3 answered, then fetched once, at the round of e+1000; at the round of e+2000
    its Fetch is exactly fetch timeout / 2 old: it is asked (Kafka: now - lastFetchTimestamp
    >= beginQuorumEpochTimeoutMs)."""
    ld = Leader()
    e = ld.now
    events: dict[int, list[Event]] = {
        e + 1: [ld.answer(3, e + 1)],
        e + 1000: [ld.fetch(3, e + 1000)],
    }
    for t in range(e + 10, e + 10_000, 400):
        events.setdefault(t, []).append(ld.fetch(2, t))
    ld.run(e + 2500, events)
    assert ld.asked(3) == [e, e + 2000]


def test_a_request_whose_timeout_runs_out_at_a_round_is_sent_again_at_that_round() -> None:
    """With a request timeout of fetch timeout / 2, voter 3's unanswered request of each round
    times out exactly at the next one, which asks it again (Kafka's RequestManager: timed out
    once now >= sent + request timeout)."""
    ld = Leader(request_timeout_ms=1000)
    e = ld.now
    events: dict[int, list[Event]] = {}
    for t in range(e + 10, e + 10_000, 400):
        events.setdefault(t, []).append(ld.fetch(2, t))
    ld.run(e + 3500, events)
    assert ld.asked(3) == [e, e + 1000, e + 2000, e + 3000]


def test_an_answer_naming_a_newer_epoch_and_leader_makes_the_leader_follow_it_at_once() -> None:
    """Voter 3 answers the leader's BeginQuorumEpoch with FENCED_LEADER_EPOCH, naming epoch 2
    and leader 3 (it moved on while the request was in flight): in that very step the old
    leader resigns and follows node 3 in epoch 2 (Kafka's maybeHandleCommonResponse)."""
    ld = Leader()
    e = ld.now
    fenced = BeginQuorumEpochResponse(ErrorCode.FENCED_LEADER_EPOCH, NodeId(3), Epoch(2))
    of = BeginQuorumEpochRequest(CLUSTER, ME, ld.epoch, voter=key(3))
    ld.step(Receive(e + 1, NodeId(3), fenced, of))
    view = ld.replica.view()
    assert (view.state, view.epoch, view.leader_id) == (ReplicaState.FOLLOWER, 2, 3)


def test_an_answer_naming_a_newer_epoch_without_a_leader_leaves_the_leader_unattached() -> None:
    """The same answer naming no leader (-1) for epoch 2: the old leader is Unattached in
    epoch 2 at once, with no leader and no vote."""
    ld = Leader()
    e = ld.now
    fenced = BeginQuorumEpochResponse(ErrorCode.FENCED_LEADER_EPOCH, NodeId(-1), Epoch(2))
    of = BeginQuorumEpochRequest(CLUSTER, ME, ld.epoch, voter=key(3))
    ld.step(Receive(e + 1, NodeId(3), fenced, of))
    view = ld.replica.view()
    assert (view.state, view.epoch, view.leader_id, view.voted_for) == (
        ReplicaState.UNATTACHED,
        2,
        None,
        None,
    )


# Kafka's handleBeginQuorumEpochResponse, per answer: handled (the voter is ready for the next
# round at once) or a failure (it backs off for the retry backoff). Voter 3 answers at e+990,
# with a request timeout (500 ms) already run out and a backoff (20 ms) that outlasts the round
# of e+1000: a handled answer is asked again at that round, a failure only at e+2000.
HANDLED = [
    (ErrorCode.NONE, 1),
    (ErrorCode.UNKNOWN_LEADER_EPOCH, 1),
    (ErrorCode.FENCED_LEADER_EPOCH, 1),
    (ErrorCode.NOT_LEADER_OR_FOLLOWER, 1),
    (ErrorCode.INVALID_VOTER_KEY, 1),
    (ErrorCode.BROKER_NOT_AVAILABLE, 0),  # names an earlier epoch: a stale answer, handled
]
FAILED = [
    (ErrorCode.BROKER_NOT_AVAILABLE, 1),
    (ErrorCode.INVALID_REQUEST, 1),
    (ErrorCode.INCONSISTENT_CLUSTER_ID, -1),  # a top-level error: no partition, epoch -1
]


def _asked_after_answer(error: ErrorCode, epoch: int) -> list[int]:
    ld = Leader(retry_backoff_ms=20, request_timeout_ms=500)
    e = ld.now
    leader = ME if epoch == ld.epoch else NodeId(-1)
    answer = BeginQuorumEpochResponse(error, leader, Epoch(epoch))
    of = BeginQuorumEpochRequest(CLUSTER, ME, ld.epoch, voter=key(3))
    events: dict[int, list[Event]] = {e + 990: [Receive(e + 990, NodeId(3), answer, of)]}
    for t in range(e + 10, e + 10_000, 400):
        events.setdefault(t, []).append(ld.fetch(2, t))
    ld.run(e + 2500, events)
    return [t - e for t in ld.asked(3)]


@pytest.mark.parametrize(("error", "epoch"), HANDLED)
def test_a_handled_answer_leaves_its_voter_ready_for_the_next_round(
    error: ErrorCode, epoch: int
) -> None:
    assert _asked_after_answer(error, epoch) == [0, 1000, 2000]


@pytest.mark.parametrize(("error", "epoch"), FAILED)
def test_a_failed_answer_backs_its_voter_off_past_the_next_round(
    error: ErrorCode, epoch: int
) -> None:
    assert _asked_after_answer(error, epoch) == [0, 2000]
