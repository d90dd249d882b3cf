"""The core hands a request's reply token back on the Send that answers it, even when the
answer comes later (a parked Fetch), so the node routes answers by connection, not by the
node id a request claims (issue: a stranger claiming to be a follower received its answers)."""

from __future__ import annotations

from replica_harness import CLUSTER, Harness, key, of

from kraft.core.effects import Send
from kraft.core.events import ClientAppend, Receive
from kraft.core.messages import FetchRequest, FetchResponse, VoteRequest, VoteResponse
from kraft.ids import Epoch, NodeId, Offset


def _leader() -> Harness:
    h = Harness(node=1, voters=(1,))  # a single voter elects itself
    h.tick()
    assert h.view.state.value == "Leader"
    return h


def _fetch(epoch: int, offset: int, last_epoch: int, wait: int) -> FetchRequest:
    return FetchRequest(
        CLUSTER,
        key(2),
        Epoch(epoch),
        Offset(offset),
        Epoch(last_epoch),
        Offset(0),
        max_wait_ms=wait,
    )


def test_an_immediate_answer_carries_the_token_of_its_request() -> None:
    h = Harness(node=1, voters=(1, 2, 3))
    vote = VoteRequest(CLUSTER, key(2), Epoch(1), Epoch(0), Offset(0))
    effects = h.step(Receive(h.now, NodeId(2), vote, reply_to=41))
    [answer] = [e for e in of(effects, Send) if isinstance(e.message, VoteResponse)]
    assert answer.reply_to == 41


def test_a_parked_fetch_is_answered_with_its_own_token_not_a_later_ones() -> None:
    h = _leader()
    epoch, end = h.view.epoch, h.view.end_offset
    parked = _fetch(epoch, end, epoch, wait=500)
    assert [
        e for e in h.step(Receive(h.now, NodeId(2), parked, reply_to=7)) if isinstance(e, Send)
    ] == []
    # A second Fetch claiming the same sender, on another connection, is answered at once.
    early = _fetch(epoch, 0, 0, wait=0)
    sends = of(h.step(Receive(h.now, NodeId(2), early, reply_to=8)), Send)
    assert [s.reply_to for s in sends if isinstance(s.message, FetchResponse)] == [8]
    # New data releases the parked one: its answer carries token 7.
    h.step(ClientAppend(h.now, ((None, b"x"),), request_id=1))
    released = of(h.tick(h.now), Send)
    assert [s.reply_to for s in released if isinstance(s.message, FetchResponse)] == [7]


def test_requests_the_core_sends_itself_carry_no_token() -> None:
    h = Harness(node=1, voters=(1, 2, 3))
    effects = h.tick()
    votes = [e for e in of(effects, Send) if isinstance(e.message, VoteRequest)]
    assert votes and all(e.reply_to is None for e in votes)
