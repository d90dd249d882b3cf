"""Scenario tests of the effect contract (refinement.invariants_effects) in corners the
simulator draws rarely or only under its adversary:

- a leader holding a Fetch (KIP-595's long poll) receives a request of a later epoch: the held
  Fetch and that request each get their own answer, routed by their own reply token;
- a leader with client appends lingering in its accumulator (quorum.append.linger.ms) steps
  down: each lingering append is answered once, NOT_LEADER_OR_FOLLOWER;
- a replica that completed its shutdown says so once, whatever events its driver still hands
  it;
- a Fetch answer from the leader whose batches are well formed but cannot extend the follower's
  log (an epoch past the follower's, a base offset other than its log end, a gap or an overlap
  between batches) is refused whole: nothing appended, its HWM not taken, no timer moved.
"""

from __future__ import annotations

import pytest
from memory_logs import key
from scenario_harness import CLUSTER, Cluster, leader_caught_up

from kraft.core.effects import AppendResult, Effect, Send, ShutdownComplete
from kraft.core.events import ClientAppend, Receive, Tick
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    Message,
    Request,
    VoteRequest,
    VoteResponse,
)
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset
from kraft.records import encode_records

LINGER_MS = 25
FETCH_TOKEN = 7001
LATER_TOKEN = 7002


def _settled(**cfg: int) -> tuple[_Counting, int]:
    """Three voters following one leader whose HWM has reached its log end."""
    c = _Counting(3, seed=5, election_timeout_ms=1000, fetch_timeout_ms=2000, **cfg)
    return c, leader_caught_up(c)


def _others(c: Cluster, leader: int) -> tuple[int, int]:
    a, b = (i for i in c.nodes if i != leader)
    return a, b


RESPONSES = (FetchResponse, VoteResponse, BeginQuorumEpochResponse)


def _answers(effects: list[Effect]) -> list[tuple[type, int, int | None]]:
    """(response type, destination, reply token) of every response sent."""
    return [
        (type(e.message), int(e.dst), e.reply_to)
        for e in effects
        if isinstance(e, Send) and isinstance(e.message, RESPONSES)
    ]


class _Counting(Cluster):
    """The scenario cluster, counting each node's AppendResults by request id and its
    ShutdownCompletes (the harness keeps stepping a replica after its ShutdownComplete, as
    the node's driver may until its loop stops)."""

    def __init__(self, *args: object, **kw: int) -> None:
        self.answers: dict[tuple[int, int], int] = {}
        self.completions: dict[int, int] = {}
        super().__init__(*args, **kw)  # type: ignore[arg-type]

    def apply(self, i: int, effects: list[Effect], answering: Request | None) -> None:
        for e in effects:
            if isinstance(e, AppendResult):
                self.answers[(i, e.request_id)] = self.answers.get((i, e.request_id), 0) + 1
            elif isinstance(e, ShutdownComplete):
                self.completions[i] = self.completions.get(i, 0) + 1
        super().apply(i, effects, answering)


def _later_request(kind: str, c: Cluster, leader: int, src: int) -> Message:
    v = c.view(leader)
    nxt = Epoch(v.epoch + 1)
    if kind == "vote":
        return VoteRequest(CLUSTER, key(src), nxt, v.last_epoch, v.end_offset, key(leader))
    return BeginQuorumEpochRequest(CLUSTER, NodeId(src), nxt, key(leader))


@pytest.mark.parametrize("kind", ["vote", "begin"])
def test_a_held_fetch_and_the_request_that_ends_the_epoch_get_their_own_answers(
    kind: str,
) -> None:
    """A leader holds a caught-up follower's Fetch; a Vote (or BeginQuorumEpoch) of the next
    epoch from the other voter makes it step down. The held Fetch is answered to its fetcher
    with its token, and the request of the next epoch to its sender with its own token: each
    token answered once."""
    c, leader = _settled()
    fetcher, other = _others(c, leader)
    v = c.view(leader)
    fetch = FetchRequest(CLUSTER, key(fetcher), v.epoch, v.end_offset, v.last_epoch, Offset(0),
                         max_wait_ms=500)  # fmt: skip
    held = c.step(leader, Receive(c.now, NodeId(fetcher), fetch, None, FETCH_TOKEN))
    assert _answers(held) == []  # held: nothing new for the fetcher
    later = _later_request(kind, c, leader, other)
    effects = c.step(leader, Receive(c.now, NodeId(other), later, None, LATER_TOKEN))
    assert c.view(leader).state is not ReplicaState.LEADER
    answer = VoteResponse if kind == "vote" else BeginQuorumEpochResponse
    # (Fetches the harness delivered, with no token, may be held and answered too.)
    mine = [a for a in _answers(effects) if a[2] is not None]
    assert sorted(mine, key=lambda a: a[2] or 0) == [
        (FetchResponse, fetcher, FETCH_TOKEN),
        (answer, other, LATER_TOKEN),
    ]


@pytest.mark.parametrize("max_wait_ms", [0, 1, 500])
def test_a_caught_up_fetch_is_held_for_its_max_wait_however_short(max_wait_ms: int) -> None:
    """A caught-up follower's Fetch with nothing new is answered at once only with a max wait
    of 0; any other, even 1 ms, is held that long and answered then (Kafka's
    handleFetchRequest completes at once only when `maxWaitMs == 0`)."""
    c, leader = _settled()
    fetcher, _ = _others(c, leader)
    v = c.view(leader)
    fetch = FetchRequest(CLUSTER, key(fetcher), v.epoch, v.end_offset, v.last_epoch, Offset(0),
                         max_wait_ms=max_wait_ms)  # fmt: skip
    at = c.now
    held = c.step(leader, Receive(at, NodeId(fetcher), fetch, None, FETCH_TOKEN))
    mine = [a for a in _answers(held) if a[2] == FETCH_TOKEN]
    assert mine == ([(FetchResponse, fetcher, FETCH_TOKEN)] if max_wait_ms == 0 else [])
    if max_wait_ms:
        early = c.step(leader, Tick(at + max_wait_ms - 1))
        assert not [a for a in _answers(early) if a[2] == FETCH_TOKEN]
        due = c.step(leader, Tick(at + max_wait_ms))
        assert [a for a in _answers(due) if a[2] == FETCH_TOKEN] == [
            (FetchResponse, fetcher, FETCH_TOKEN)
        ]


@pytest.mark.parametrize("how", ["later-epoch", "shutdown"])
def test_appends_lingering_when_the_leader_steps_down_are_answered_once(how: str) -> None:
    """Two appends linger in the leader's accumulator when it steps down (a Vote of the next
    epoch, or a graceful shutdown): each gets one AppendResult, NOT_LEADER_OR_FOLLOWER, at
    once, and no other later."""
    c, leader = _settled(append_linger_ms=LINGER_MS)
    _, other = _others(c, leader)
    for rid in (1, 2):
        effects = c.step(leader, ClientAppend(c.now, ((None, b"v%d" % rid),), rid))
        assert not [e for e in effects if isinstance(e, AppendResult)]  # lingering
    if how == "shutdown":
        effects = c.shutdown(leader)
    else:
        later = _later_request("vote", c, leader, other)
        effects = c.step(leader, Receive(c.now, NodeId(other), later, None, LATER_TOKEN))
    answered = [(e.request_id, e.error) for e in effects if isinstance(e, AppendResult)]
    assert sorted(answered) == [
        (1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
        (2, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    ]
    c.run(c.now + 2000)
    assert (c.answers[(leader, 1)], c.answers[(leader, 2)]) == (1, 1)


@pytest.mark.parametrize("who", ["leader", "follower"])
def test_a_shutdown_completes_once(who: str) -> None:
    """ShutdownComplete once per incarnation: a leader once its EndQuorumEpoch requests are
    answered, a follower at once; the ticks and messages it is still handed afterwards (for
    two seconds here) bring no second one."""
    c, leader = _settled()
    node = leader if who == "leader" else _others(c, leader)[0]
    c.shutdown(node)
    c.run_until(lambda: c.completions.get(node, 0) > 0, limit=5000, step_ms=5)
    c.run(c.now + 2000)
    assert c.completions[node] == 1


def _batch(base: int, epoch: int, count: int) -> bytes:
    return encode_records(base, epoch, [(None, b"x%d" % k) for k in range(count)],
                          timestamp_ms=0)  # fmt: skip


BAD_BATCHES = {
    "epoch-ahead": lambda end, ep: _batch(end, ep + 1, 1),
    "gap-first": lambda end, ep: _batch(end + 1, ep, 1),
    "overlap-first": lambda end, ep: _batch(end - 1, ep, 2),
    "gap-between": lambda end, ep: _batch(end, ep, 2) + _batch(end + 3, ep, 1),
    "overlap-between": lambda end, ep: _batch(end, ep, 2) + _batch(end + 1, ep, 2),
}


@pytest.mark.parametrize("kind", sorted(BAD_BATCHES))
def test_a_fetch_answer_that_cannot_extend_the_log_is_refused_whole(kind: str) -> None:
    """A follower one record behind its leader's HWM gets an answer from its leader, in its
    epoch, naming a higher HWM, whose batches cannot extend its log: nothing is appended, the
    HWM stays, and no timer moves (the fetch timer keeps running, no Fetch is sent early)."""
    c, leader = _settled()
    follower, _ = _others(c, leader)
    for k in range(3):
        c.append(leader, b"a%d" % k)
    c.run(c.now + 200)
    v = c.view(follower)
    end = int(v.end_offset)
    assert end > 1 and v.state is ReplicaState.FOLLOWER
    replica = c.r(follower)
    deadline = replica.next_deadline_ms()
    assert deadline > c.now  # nothing due: the answer alone is stepped
    hwm = v.high_watermark
    answer = FetchResponse(ErrorCode.NONE, NodeId(leader), v.epoch, Offset(end + 5), Offset(-1),
                           records=BAD_BATCHES[kind](end, int(v.epoch)))  # fmt: skip
    effects = replica.step(Receive(c.now, NodeId(leader), answer, None))
    after = replica.view()
    assert (after.end_offset, after.last_epoch, after.high_watermark) == (
        v.end_offset,
        v.last_epoch,
        hwm,
    )
    assert not [e for e in effects if isinstance(e, Send)]
    assert replica.next_deadline_ms() == deadline
