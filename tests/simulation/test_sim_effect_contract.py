"""The effect-contract checkers (refinement.invariants_effects): each fires on the answer,
the unanswered request or the repeated completion it names, and stays silent on what the
contract allows (a leader's held Fetch, appends lingering in a leader's accumulator)."""

from __future__ import annotations

from memory_logs import key

from kraft.core.messages import FetchRequest, FetchResponse, VoteRequest, VoteResponse
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset
from refinement import invariants_effects as eff

C = ClusterId("c")
N = NodeId(1)
L = ReplicaState.LEADER
U = ReplicaState.UNATTACHED


def _fetch(wait: int) -> FetchRequest:
    return FetchRequest(C, key(2), Epoch(1), Offset(0), Epoch(0), Offset(0), max_wait_ms=wait)


def _fetch_answer() -> FetchResponse:
    return FetchResponse(ErrorCode.NONE, N, Epoch(1), Offset(0), Offset(0))


def _vote() -> VoteRequest:
    return VoteRequest(C, key(3), Epoch(2), Epoch(1), Offset(0), key(1))


VOTE_ANSWER = VoteResponse(ErrorCode.NONE, NodeId(-1), Epoch(2), True)


def _name(v: object) -> str | None:
    return None if v is None else getattr(v, "name", None)


def test_a_held_fetch_then_the_vote_each_answered_with_its_own_token() -> None:
    led = eff.EffectLedger(linger=False)
    led.request_received(N, 10, NodeId(2), _fetch(500))
    assert led.after_step(N, L) is None  # a leader may hold it
    led.request_received(N, 11, NodeId(3), _vote())
    assert led.response_sent(N, NodeId(2), _fetch_answer(), 10) is None
    assert led.response_sent(N, NodeId(3), VOTE_ANSWER, 11) is None
    assert led.after_step(N, U) is None


def test_an_answer_with_the_token_of_an_answered_request() -> None:
    """The vote's answer carries the held Fetch's token (leader.py's answer_held not restoring
    the outer token): that request was answered already, and the vote is left unanswered."""
    led = eff.EffectLedger(linger=False)
    led.request_received(N, 10, NodeId(2), _fetch(500))
    led.request_received(N, 11, NodeId(3), _vote())
    assert led.response_sent(N, NodeId(2), _fetch_answer(), 10) is None
    found = led.response_sent(N, NodeId(3), VOTE_ANSWER, 10)
    assert _name(found) == eff.RESPONSE_ANSWERS_ITS_REQUEST
    assert _name(led.after_step(N, U)) == eff.REQUEST_ANSWERED


def test_an_answer_of_the_wrong_kind_or_to_the_wrong_node_or_without_a_token() -> None:
    led = eff.EffectLedger(linger=False)
    led.request_received(N, 10, NodeId(2), _fetch(0))
    assert _name(led.response_sent(N, NodeId(2), VOTE_ANSWER, 10)) == (
        eff.RESPONSE_ANSWERS_ITS_REQUEST
    )
    led.request_received(N, 12, NodeId(2), _fetch(0))
    assert _name(led.response_sent(N, NodeId(3), _fetch_answer(), 12)) == (
        eff.RESPONSE_ANSWERS_ITS_REQUEST
    )
    assert _name(led.response_sent(N, NodeId(3), _fetch_answer(), None)) == (
        eff.RESPONSE_ANSWERS_ITS_REQUEST
    )


def test_requests_left_unanswered() -> None:
    """A Fetch without a max wait, a vote request, or a Fetch held by a replica that no longer
    leads."""
    for request, state in ((_fetch(0), L), (_vote(), L), (_fetch(500), U)):
        led = eff.EffectLedger(linger=False)
        led.request_received(N, 10, NodeId(2), request)
        assert _name(led.after_step(N, state)) == eff.REQUEST_ANSWERED, (request, state)


def test_client_appends_answered_once() -> None:
    led = eff.EffectLedger(linger=True)
    led.append_received(N, 5)
    assert led.after_step(N, L) is None  # lingering in the accumulator
    assert led.append_answered(N, 5) is None
    assert _name(led.append_answered(N, 5)) == eff.CLIENT_APPEND_ANSWERED_ONCE
    led.append_received(N, 6)
    assert _name(led.after_step(N, ReplicaState.RESIGNED)) == eff.CLIENT_APPEND_ANSWERED_ONCE
    without_linger = eff.EffectLedger(linger=False)
    without_linger.append_received(N, 7)
    assert _name(without_linger.after_step(N, L)) == eff.CLIENT_APPEND_ANSWERED_ONCE


def test_shutdown_complete_once_per_incarnation() -> None:
    led = eff.EffectLedger(linger=False)
    assert led.shutdown_completed(N) is None
    assert _name(led.shutdown_completed(N)) == eff.SHUTDOWN_COMPLETE_ONCE
    led.stopped(N)  # a new incarnation
    assert led.shutdown_completed(N) is None
