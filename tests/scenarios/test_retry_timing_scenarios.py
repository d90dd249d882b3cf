"""Scenario tests of the Fetch stream's retry timing in the corners the simulator does not draw:
quorum.retry.backoff.ms = 0, an election timeout below 4 ms, a replica built without snapshots
told to fetch one, a broken connection to a replica other than the leader, answers that come
just before the request timeout, and the spread of the follower's fetch-timeout jitter.

One replica is driven by hand (the others are played by the test) and every step of it is
shown to the simulator's timing checkers (refinement.invariants_timing.TimingMonitor): what
fails here is the same stated rule the simulator's sweep checks, named as there.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from memory_logs import key, perform_append

from kraft.core.effects import (
    AppendToLog,
    Effect,
    Send,
    SnapshotRequired,
    StateChanged,
    TruncateLog,
)
from kraft.core.events import Event, Receive, SendFailed, Tick
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    Message,
    Request,
)
from kraft.core.replica import Replica, ReplicaConfig
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset, OffsetAndEpoch
from kraft.storage.log_adapter import BatchReader, log_state_of
from kraft.storage.memory_log import MemoryLog
from kraft.storage.memory_snapshots import MemorySnapshots
from refinement import invariants_timing as timing
from refinement.invariants import Violation

CLUSTER = ClusterId("retry-timing")
VOTERS = (key(1), key(2), key(3))
LEADER = NodeId(2)
EPOCH = Epoch(1)


class Solo:
    """One replica (node `me`) and the timing checkers watching it; the test plays the rest
    of the quorum. A violation of a checker fails the test where it happens."""

    def __init__(
        self,
        me: int = 1,
        *,
        seed: int = 0,
        snapshots: bool = False,
        start: OffsetAndEpoch | None = None,
        **cfg: int,
    ) -> None:
        self.timing = QuorumTiming(**cfg)
        self.me = NodeId(me)
        # `start`: the log starts (and ends) at a snapshot the replica holds.
        self.log = log = MemoryLog(0 if start is None else start.offset)
        self.replica = Replica(
            ReplicaConfig(key(me), CLUSTER, VOTERS, self.timing),
            election_state=None,
            log_state=log_state_of(log, () if start is None else (start,)),
            reader=BatchReader(log),
            rng=random.Random(seed),
            now_ms=0,
            snapshots=MemorySnapshots() if snapshots else None,
        )
        self.now = 0
        self.monitor = timing.TimingMonitor(self.timing, tuple(v.id for v in VOTERS))
        self.effects: list[Effect] = self.replica.start()
        self._check(self.monitor.started(self.me, 0, self.effects))

    def _check(self, found: Violation | None) -> None:
        assert found is None, f"{found.name}: {found.detail}"

    def step(self, event: Event) -> list[Effect]:
        self.now = max(self.now, event.now_ms)
        self._check(self.monitor.overdue(self.now))
        self.effects = self.replica.step(event)
        for e in self.effects:  # the log's writes, so that the replica reads what it wrote
            if isinstance(e, AppendToLog):
                perform_append(self.log, e)
            elif isinstance(e, TruncateLog):
                self.log.truncate_to(e.offset)
        leader = self.replica.view().leader_id
        self._check(self.monitor.step(self.me, self.now, event, self.effects, leader))
        return self.effects

    def receive(self, at: int, src: NodeId, msg: Message, of: Request | None) -> list[Effect]:
        return self.step(Receive(at, src, msg, of))

    def sent(self, kind: type, effects: Sequence[Effect] | None = None) -> list[Send]:
        return [
            e
            for e in (self.effects if effects is None else effects)
            if isinstance(e, Send) and isinstance(e.message, kind)
        ]

    def tick_until_sent(self, kind: type, limit: int) -> Send:
        """Tick at each of the replica's deadlines until it sends a `kind`; that Send."""
        while True:
            at = max(self.replica.next_deadline_ms(), self.now)
            assert at <= limit, f"no {kind.__name__} by t={limit}ms"
            found = self.sent(kind, self.step(Tick(at)))
            if found:
                return found[0]

    def follow(self, at: int = 0) -> FetchRequest:
        """Become the Follower of LEADER in EPOCH; the first Fetch it sends."""
        effects = self.receive(at, LEADER, BeginQuorumEpochRequest(CLUSTER, LEADER, EPOCH), None)
        [send] = self.sent(FetchRequest, effects)
        assert isinstance(send.message, FetchRequest)
        return send.message

    def answer(
        self,
        at: int,
        fetch: Request,
        error: ErrorCode = ErrorCode.NONE,
        snapshot_id: OffsetAndEpoch | None = None,
    ) -> list[Effect]:
        """The leader's answer to `fetch`, arriving at `at`."""
        resp = FetchResponse(error, LEADER, EPOCH, Offset(0), Offset(0), snapshot_id=snapshot_id)
        return self.receive(at, LEADER, resp, fetch)


@pytest.mark.parametrize(
    ("retry_backoff_ms", "fetch_timeout_ms", "backoff"),
    [(20, 2000, 1000), (20, 1200, 600), (10, 2000, 500)],
)
def test_a_replica_without_snapshots_refetches_after_its_long_backoff(
    retry_backoff_ms: int, fetch_timeout_ms: int, backoff: int
) -> None:
    """Told to fetch a snapshot it cannot fetch, a Follower asks again exactly
    min(SNAPSHOT_REFETCH_RETRIES x retry backoff, fetch timeout / 2) later: either bound may
    be the smaller."""
    s = Solo(retry_backoff_ms=retry_backoff_ms, fetch_timeout_ms=fetch_timeout_ms)
    fetch = s.follow()
    effects = s.answer(5, fetch, snapshot_id=OffsetAndEpoch(EPOCH, Offset(10)))
    assert any(isinstance(e, SnapshotRequired) for e in effects)
    assert not s.sent(FetchRequest, effects)
    again = s.tick_until_sent(FetchRequest, limit=5000)
    assert again is not None
    assert backoff == min(timing.SNAPSHOT_REFETCH_RETRIES * retry_backoff_ms, fetch_timeout_ms // 2)
    assert s.now == 5 + backoff


def test_with_no_retry_backoff_a_replica_without_snapshots_refetches_at_once() -> None:
    """quorum.retry.backoff.ms = 0: the long backoff is 0 too, and the next Fetch goes out in
    the step that handled the answer."""
    s = Solo(retry_backoff_ms=0)
    fetch = s.follow()
    effects = s.answer(5, fetch, snapshot_id=OffsetAndEpoch(EPOCH, Offset(10)))
    assert any(isinstance(e, SnapshotRequired) for e in effects)
    assert s.sent(FetchRequest, effects)


def test_with_no_retry_backoff_an_error_answer_is_followed_by_a_fetch_at_once() -> None:
    s = Solo(retry_backoff_ms=0)
    fetch = s.follow()
    effects = s.answer(5, fetch, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert s.sent(FetchRequest, effects)


@pytest.mark.parametrize("late_by", [1, 5, 19])
def test_an_error_answer_just_before_the_request_timeout_backs_off_from_its_arrival(
    late_by: int,
) -> None:
    """The answer ends the request: the next Fetch comes a retry backoff after it, not when
    the answered request would have timed out."""
    s = Solo()
    fetch = s.follow()
    arrival = s.timing.request_timeout_ms - late_by
    s.step(Tick(arrival - 1))
    s.answer(arrival, fetch, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    s.tick_until_sent(FetchRequest, limit=arrival + 100)
    assert s.now == arrival + s.timing.retry_backoff_ms


@pytest.mark.parametrize("late_by", [1, 5, 19])
def test_a_leaderless_discovery_answer_just_before_the_request_timeout_backs_off(
    late_by: int,
) -> None:
    """An observer asks a voter for the leader; the voter knows none. The next Fetch goes a
    retry backoff after that answer, whenever the answered one would have timed out."""
    s = Solo(me=4)
    [send] = s.sent(FetchRequest)
    assert isinstance(send.message, FetchRequest)
    arrival = s.timing.request_timeout_ms - late_by
    s.step(Tick(arrival - 1))
    none = FetchResponse(
        ErrorCode.NOT_LEADER_OR_FOLLOWER, NodeId(-1), Epoch(0), Offset(-1), Offset(-1)
    )
    s.receive(arrival, send.dst, none, send.message)
    assert s.replica.view().state is ReplicaState.UNATTACHED
    s.tick_until_sent(FetchRequest, limit=arrival + 100)
    assert s.now == arrival + s.timing.retry_backoff_ms


def test_an_observers_discovery_fetch_asks_no_long_poll() -> None:
    s = Solo(me=4)
    [send] = s.sent(FetchRequest)
    assert isinstance(send.message, FetchRequest)
    assert send.message.max_wait_ms == 0


def test_a_fetch_that_could_not_be_sent_is_sent_again_after_the_retry_backoff() -> None:
    """A Fetch the driver could not send is no longer in flight: the next one goes after
    quorum.retry.backoff.ms, not when the lost one's request timeout would have expired
    (here the earlier of the two)."""
    s = Solo(request_timeout_ms=100, retry_backoff_ms=500)
    fetch = s.follow()
    s.step(SendFailed(9, LEADER, fetch))
    again = s.tick_until_sent(FetchRequest, limit=1000)
    assert again.dst == LEADER
    assert s.now == 9 + 500


def test_a_snapshot_id_no_leader_could_hold_backs_off_past_the_fetchs_request_timeout() -> None:
    """A Fetch answer naming a snapshot of a later epoch than ours is refused: the Fetch it
    answered is no longer in flight, and the next goes after the retry backoff, even when
    that comes after the answered Fetch's request timeout would have expired."""
    s = Solo(snapshots=True, request_timeout_ms=100, retry_backoff_ms=500)
    fetch = s.follow()
    effects = s.answer(9, fetch, snapshot_id=OffsetAndEpoch(Epoch(EPOCH + 1), Offset(10)))
    assert not s.sent(FetchSnapshotRequest, effects)
    again = s.tick_until_sent(FetchRequest, limit=1000)
    assert again.dst == LEADER
    assert s.now == 9 + 500


def test_without_pre_vote_a_broken_leader_connection_does_not_hasten_the_fetch_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Standing early on a broken connection is safe only because pre-vote keeps a false
    alarm from deposing the leader (README's deviation): with pre-vote off (test-only), a
    voter waits out its fetch timeout as Kafka's does."""
    monkeypatch.setattr(Replica, "pre_vote_enabled", False)
    s = Solo()
    fetch = s.follow()
    s.step(SendFailed(3, LEADER, fetch, broken=True))
    while s.now < s.timing.fetch_timeout_ms - 1:
        s.step(Tick(min(max(s.replica.next_deadline_ms(), s.now), s.timing.fetch_timeout_ms - 1)))
    assert s.replica.view().state is ReplicaState.FOLLOWER


def test_a_failed_fetch_snapshot_is_sent_again_after_the_retry_backoff() -> None:
    s = Solo(snapshots=True)
    fetch = s.follow()
    effects = s.answer(5, fetch, snapshot_id=OffsetAndEpoch(EPOCH, Offset(10)))
    [send] = s.sent(FetchSnapshotRequest, effects)
    assert isinstance(send.message, FetchSnapshotRequest)
    s.step(SendFailed(9, LEADER, send.message))
    again = s.tick_until_sent(FetchSnapshotRequest, limit=3000)
    assert again.dst == LEADER
    assert s.now == 9 + s.timing.retry_backoff_ms


def test_a_tiny_election_timeout_and_a_broken_leader_connection_stand_at_once() -> None:
    """election_timeout_ms < 4: a quarter of it is 0 ms, so the follower whose connection to
    its leader broke stands at once; it must not fail on the empty random range."""
    s = Solo(election_timeout_ms=3)
    fetch = s.follow()
    s.step(SendFailed(2, LEADER, fetch, broken=True))
    effects = s.step(Tick(2))
    assert any(isinstance(e, StateChanged) and e.new is ReplicaState.PROSPECTIVE for e in effects)


def test_a_broken_connection_to_another_voter_does_not_hasten_the_fetch_timeout() -> None:
    """Only the leader's silence counts: a Fetch of this epoch that failed on a broken
    connection to a replica other than the leader leaves the fetch timer as it was."""
    s = Solo()
    s.follow()
    other = FetchRequest(CLUSTER, key(1), EPOCH, Offset(0), Epoch(0), Offset(0))
    s.step(SendFailed(3, NodeId(3), other, broken=True))
    while s.now < s.timing.fetch_timeout_ms - 1:
        s.step(Tick(min(max(s.replica.next_deadline_ms(), s.now), s.timing.fetch_timeout_ms - 1)))
    assert s.replica.view().state is ReplicaState.FOLLOWER


def test_the_fetch_timeout_jitter_spans_half_an_election_timeout() -> None:
    """This project's deviation (README): a voter's fetch timeout is quorum.fetch.timeout.ms
    plus a uniform jitter below half an election timeout. Over 200 replicas with fixed seeds,
    every one stands in [fetch timeout, fetch timeout + T/2), and the largest jitter drawn
    (for these seeds: checked, not assumed) reaches past T/3."""
    et, ft = 1000, 2000
    jitters = []
    for seed in range(200):
        s = Solo(seed=seed, election_timeout_ms=et, fetch_timeout_ms=ft)
        s.follow()
        while s.replica.view().state is ReplicaState.FOLLOWER:
            s.step(Tick(max(s.replica.next_deadline_ms(), s.now)))
        jitters.append(s.now - ft)
    assert min(jitters) >= 0
    assert max(jitters) < et // 2
    assert max(jitters) >= et // 3
