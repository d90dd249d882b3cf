"""When a follower or observer sends its next Fetch, and when its leader counts as silent
(kraft.core.follower), in corners the simulator's sweep rarely draws.

- An observer's fetch timer is quorum.fetch.timeout.ms as is: only a voter's is jittered (the
  README's deviation, so that the followers of a dead leader do not stand together); an
  observer stands for nothing, and Kafka's observer Follower uses the plain fetch timeout.
  It goes silent (asks the leader and the voters in turn, with no long poll, as Kafka's
  pollFollowerAsObserver does) exactly when that timeout has run since the leader's last
  answer, not a millisecond later.
- An observer that follows a leader is not asking around: a stray answer (a voter's late answer
  to a discovery Fetch that timed out, naming the leader or no leader) does not end the Fetch
  in flight to the leader, exactly as for a voter. The next Fetch goes when that one is
  answered or times out, not a retry backoff after the stray answer.
- An observer asking the voters for the leader backs off from the answer that ended its Fetch
  in flight. A second, late answer (to an earlier Fetch that timed out) names no leader either:
  the retry already scheduled is not postponed by it.
- A replica built without snapshots whose leader answers with a snapshot id has heard from a
  live leader: its fetch timer restarts (as Kafka's does on any answer of its leader), so a
  voter never stands, and an observer never goes silent, while the leader keeps answering.
  The Fetch that answer ended is no longer in flight: the next one goes only after the long
  backoff (min(SNAPSHOT_REFETCH_RETRIES x retry backoff, fetch timeout / 2)), even when the
  answered Fetch's request timeout would have expired before it.

One replica is driven by hand under the simulator's timing checkers (the `Solo` harness of
test_retry_timing_scenarios); the test plays the rest of the quorum (voters 1, 2, 3, leader 2
in epoch 1; node 4 is an observer). All times are simulated milliseconds.
"""

from __future__ import annotations

import pytest
from test_retry_timing_scenarios import EPOCH, LEADER, Solo

from kraft.core.effects import Send, SnapshotRequired, StateChanged
from kraft.core.events import SendFailed, Tick
from kraft.core.messages import FetchRequest, FetchResponse, VoteRequest
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch

S = ReplicaState
OBSERVER = 4
NO_LEADER = FetchResponse(
    ErrorCode.NOT_LEADER_OR_FOLLOWER, NodeId(-1), Epoch(0), Offset(-1), Offset(-1)
)
NAMES_LEADER = FetchResponse(
    ErrorCode.NOT_LEADER_OR_FOLLOWER, LEADER, EPOCH, Offset(-1), Offset(-1)
)
SNAPSHOT = OffsetAndEpoch(EPOCH, Offset(10))


def _fetch(send: Send) -> FetchRequest:
    assert isinstance(send.message, FetchRequest)
    return send.message


def _discovery_fetch(s: Solo) -> tuple[NodeId, FetchRequest]:
    """The discovery Fetch the observer sent in its last step: (the voter asked, the Fetch)."""
    [send] = s.sent(FetchRequest)
    assert _fetch(send).max_wait_ms == 0
    return send.dst, _fetch(send)


def _observer_following(s: Solo, at: int) -> FetchRequest:
    """The observer asks voter 1 for the leader at 0; voter 1 names LEADER in EPOCH at `at`.
    The observer follows it: the Fetch (a long poll) it then sends to the leader."""
    dst, discovery = _discovery_fetch(s)
    assert dst == NodeId(1)
    effects = s.receive(at, dst, NAMES_LEADER, discovery)
    assert (s.replica.view().state, s.replica.view().leader_id) == (S.FOLLOWER, LEADER)
    [send] = s.sent(FetchRequest, effects)
    assert (send.dst, _fetch(send).max_wait_ms) == (LEADER, s.timing.fetch_max_wait_ms)
    return _fetch(send)


def test_an_observer_goes_silent_exactly_one_fetch_timeout_after_the_leaders_last_answer() -> None:
    """The leader answers at 10, and the observer's next long poll goes at once; the leader
    never answers it. The request timeout equals the fetch timeout here, so a Fetch goes out at
    10 + fetch timeout either way: by then the leader is silent, and that Fetch is the first of
    the ones asked in turn, with no long poll. One millisecond earlier nothing is sent."""
    s = Solo(OBSERVER, fetch_timeout_ms=2000, request_timeout_ms=2000)
    fetch = _observer_following(s, at=3)
    [poll] = s.sent(FetchRequest, s.answer(10, fetch))
    assert (poll.dst, _fetch(poll).max_wait_ms) == (LEADER, s.timing.fetch_max_wait_ms)
    silent_at = 10 + s.timing.fetch_timeout_ms
    assert s.replica.next_deadline_ms() == silent_at
    assert not s.sent(FetchRequest, s.step(Tick(silent_at - 1)))
    [ask] = s.sent(FetchRequest, s.step(Tick(silent_at)))
    assert _fetch(ask).max_wait_ms == 0, "the leader is silent: no long poll"
    assert (s.replica.view().state, s.replica.view().leader_id) == (S.FOLLOWER, LEADER)
    # The next ones go round the leader and the voters: not only to the leader.
    asked = [ask.dst]
    while len(asked) < 3:
        s.step(SendFailed(s.now, ask.dst, _fetch(ask)))
        ask = s.tick_until_sent(FetchRequest, limit=s.now + 1_000)
        assert _fetch(ask).max_wait_ms == 0
        asked.append(ask.dst)
    assert sorted(asked) == [1, 2, 3]


@pytest.mark.parametrize(
    "late", [NO_LEADER, NAMES_LEADER], ids=["naming-no-leader", "naming-the-leader"]
)
def test_a_stray_answer_does_not_end_an_observers_fetch_in_flight_to_its_leader(
    late: FetchResponse,
) -> None:
    """The observer asks voter 1 at 0; that Fetch times out and it asks voter 2, the leader,
    which answers: the observer follows it and long-polls it. Voter 1's late answer then
    arrives. The observer is not asking around any more: its Fetch to the leader stays in
    flight, and the next one goes only when that one times out (the fetch timeout is longer)."""
    s = Solo(OBSERVER, request_timeout_ms=1000, fetch_timeout_ms=2000, retry_backoff_ms=20)
    rt = s.timing.request_timeout_ms
    first_dst, first = _discovery_fetch(s)
    assert first_dst == NodeId(1)
    second = s.tick_until_sent(FetchRequest, limit=rt)
    assert s.now == rt and second.dst == LEADER
    answer = FetchResponse(ErrorCode.NONE, LEADER, EPOCH, Offset(0), Offset(0))
    [poll] = s.sent(FetchRequest, s.receive(rt + 5, LEADER, answer, _fetch(second)))
    assert (s.replica.view().state, s.replica.view().leader_id) == (S.FOLLOWER, LEADER)
    assert (poll.dst, _fetch(poll).max_wait_ms) == (LEADER, s.timing.fetch_max_wait_ms)
    effects = s.receive(rt + 7, first_dst, late, first)
    assert not s.sent(FetchRequest, effects)
    assert (s.replica.view().state, s.replica.view().leader_id) == (S.FOLLOWER, LEADER)
    again = s.tick_until_sent(FetchRequest, limit=10 * rt)
    assert s.now == rt + 5 + rt, "sent when the long poll timed out, not after a backoff"
    assert (again.dst, _fetch(again).max_wait_ms) == (LEADER, s.timing.fetch_max_wait_ms)


def test_a_late_discovery_answer_does_not_postpone_the_retry_already_scheduled() -> None:
    """The observer asks voter 1 at 0; no answer by the request timeout, so it asks voter 2 at
    once. Voter 2 answers at RT + 10, naming no leader: the observer asks voter 3 a retry
    backoff later, at RT + 30. Voter 1's late answer (no leader either) at RT + 15 leaves that
    time as it is."""
    s = Solo(OBSERVER, request_timeout_ms=1000, retry_backoff_ms=20)
    rt, backoff = s.timing.request_timeout_ms, s.timing.retry_backoff_ms
    first_dst, first = _discovery_fetch(s)
    second = s.tick_until_sent(FetchRequest, limit=rt)
    assert s.now == rt and (first_dst, second.dst) == (1, 2)
    effects = s.receive(rt + 10, second.dst, NO_LEADER, _fetch(second))
    assert not s.sent(FetchRequest, effects)
    assert s.replica.next_deadline_ms() == rt + 10 + backoff
    effects = s.receive(rt + 15, first_dst, NO_LEADER, first)
    assert not s.sent(FetchRequest, effects)
    assert s.replica.view().state is S.UNATTACHED
    third = s.tick_until_sent(FetchRequest, limit=rt + 10 * backoff)
    assert s.now == rt + 10 + backoff, "the retry goes when first scheduled"
    assert (third.dst, _fetch(third).max_wait_ms) == (3, 0)


@pytest.mark.parametrize("me", [1, OBSERVER], ids=["voter", "observer"])
def test_a_leader_answering_with_a_snapshot_id_keeps_a_replica_without_snapshots_following(
    me: int,
) -> None:
    """Every Fetch the replica (built without snapshots) sends, the leader answers a
    millisecond later with the snapshot id it cannot fetch. Over three fetch timeouts the
    replica keeps following: a voter never stands (Prospective, VoteRequest), an observer
    never goes silent (every Fetch is a long poll to the leader)."""
    s = Solo(me, fetch_timeout_ms=2000, retry_backoff_ms=20, election_timeout_ms=1000)
    fetch = s.follow() if me != OBSERVER else _observer_following(s, at=3)
    long_backoff = min(50 * s.timing.retry_backoff_ms, s.timing.fetch_timeout_ms // 2)
    answers = 0
    while s.now < 3 * s.timing.fetch_timeout_ms:
        effects = s.answer(s.now + 1, fetch, snapshot_id=SNAPSHOT)
        answers += 1
        assert (answers == 1) == any(isinstance(e, SnapshotRequired) for e in effects)
        answered = s.now
        while True:
            effects = s.step(Tick(max(s.replica.next_deadline_ms(), s.now)))
            assert not any(isinstance(e, StateChanged) for e in effects), effects
            assert not s.sent(VoteRequest, effects)
            found = s.sent(FetchRequest, effects)
            if found:
                break
        [send] = found
        assert (send.dst, _fetch(send).max_wait_ms) == (LEADER, s.timing.fetch_max_wait_ms)
        assert s.now == answered + long_backoff
        assert (s.replica.view().state, s.replica.view().leader_id) == (S.FOLLOWER, LEADER)
        fetch = _fetch(send)
    assert answers >= 6


@pytest.mark.parametrize("me", [1, OBSERVER], ids=["voter", "observer"])
def test_after_a_snapshot_id_answer_the_next_fetch_waits_the_long_backoff_not_the_request_timeout(
    me: int,
) -> None:
    """request timeout 100 ms, long backoff min(50 x 20, 2000 / 2) = 1000 ms. The Fetch sent
    at t0 is answered at t0 + 5 with a snapshot id the replica cannot fetch: that answer ended
    it, so nothing goes out when its request timeout would have expired (t0 + 100); the next
    Fetch goes at t0 + 5 + 1000."""
    s = Solo(me, request_timeout_ms=100, retry_backoff_ms=20, fetch_timeout_ms=2000)
    fetch = s.follow() if me != OBSERVER else _observer_following(s, at=3)
    t0 = s.now
    effects = s.answer(t0 + 5, fetch, snapshot_id=SNAPSHOT)
    assert any(isinstance(e, SnapshotRequired) for e in effects)
    assert not s.sent(FetchRequest, effects)
    assert s.replica.next_deadline_ms() == t0 + 5 + 1000
    assert not s.sent(FetchRequest, s.step(Tick(t0 + s.timing.request_timeout_ms)))
    again = s.tick_until_sent(FetchRequest, limit=5_000)
    assert s.now == t0 + 5 + 1000
    assert (again.dst, _fetch(again).max_wait_ms) == (LEADER, s.timing.fetch_max_wait_ms)
