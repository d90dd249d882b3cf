"""Scenario tests of one client append's step on the leader (kraft.core.appends): what it
refuses, what it writes and in which order, how it is answered and what its step is named.

- An append with no records is refused with INVALID_REQUEST, plain or idempotent, and nothing
  is written for it (the log takes no empty batch).
- Each new append is named by a ClientAppend action in the step that takes it (the node's trace
  and TLC's mapping, refinement/traces/mapping.py, read it: one ClientAppend op per record); a
  refused one, or a resend answered from the table, takes none.
- An idempotent append is its own batch written after whatever lingers (quorum.append.linger.ms):
  the lingering appends are written and answered first, in the same step, at the lower offsets,
  so that appends keep their arrival order. Its step is still named after it (its ClientAppend
  action comes first, before the AdvanceHighWatermark of what it wrote).
- A single voter commits at once; an idempotent append's step then reads as a plain one's: the
  append is answered, the HWM moves, the append is committed, then the AdvanceHighWatermark
  action (the order the leader's fetch path keeps too, test_leader_hwm_and_held_fetch_scenarios).
"""

from __future__ import annotations

from scenario_harness import Cluster, elect
from test_producer_scenarios import P

from kraft.core.effects import ActionTaken, AppendResult, AppendToLog, Effect
from kraft.core.events import ClientAppend
from kraft.core.vocabulary import Action
from kraft.errors import ErrorCode

LINGER_MS = 25


def _cluster(voters: int, linger_ms: int = LINGER_MS) -> tuple[Cluster, int]:
    c = Cluster(voters, seed=5, election_timeout_ms=1000, fetch_timeout_ms=2000,
                append_linger_ms=linger_ms)  # fmt: skip
    leader = elect(c)
    c.run(c.now + 10)  # the LeaderChange record committed
    return c, leader


def _answers(effects: list[Effect]) -> dict[int, AppendResult]:
    return {e.request_id: e for e in effects if isinstance(e, AppendResult)}


def _actions(effects: list[Effect]) -> list[Action]:
    return [e.action for e in effects if isinstance(e, ActionTaken)]


def _batches(effects: list[Effect]) -> list[tuple[int, int]]:
    return [(e.first_offset, e.last_offset) for e in effects if isinstance(e, AppendToLog)]


def test_an_append_with_no_records_is_refused_invalid_request() -> None:
    """A plain append and an idempotent one with no records are both refused with
    INVALID_REQUEST in the step that receives them, take no ClientAppend action, and nothing
    is written for them, then or when the linger runs out."""
    c, leader = _cluster(3)
    end = c.view(leader).end_offset
    plain = c.step(leader, ClientAppend(c.now, (), 1))
    idempotent = c.step(leader, ClientAppend(c.now, (), 2, P, 0))
    for rid, effects in ((1, plain), (2, idempotent)):
        assert [(a.request_id, a.error) for a in _answers(effects).values()] == [
            (rid, ErrorCode.INVALID_REQUEST)
        ]
        assert _actions(effects) == [] and _batches(effects) == []
    c.run(c.now + LINGER_MS + 5)
    assert c.view(leader).end_offset == end


def test_each_new_append_is_named_client_append_and_a_resend_is_not() -> None:
    """A plain append (lingering) and an idempotent one each take one ClientAppend action in
    their step; the idempotent one's resend, answered with the first copy's offsets, takes
    none."""
    c, leader = _cluster(3)
    plain = c.step(leader, ClientAppend(c.now, ((None, b"a"),), 1))
    assert _actions(plain) == [Action.CLIENT_APPEND]
    new = c.step(leader, ClientAppend(c.now, ((None, b"b"),), 2, P, 0))
    assert _actions(new).count(Action.CLIENT_APPEND) == 1
    resend = c.step(leader, ClientAppend(c.now, ((None, b"b"),), 3, P, 0))
    assert _answers(resend)[3].first_offset == _answers(new)[2].first_offset
    assert Action.CLIENT_APPEND not in _actions(resend)


def test_an_idempotent_append_writes_what_lingers_before_it() -> None:
    """A plain append lingers; an idempotent append arriving within the linger writes the
    lingering one first, as its own batch, and then itself: both are answered in its step, the
    plain one at the lower offset. Nothing is left to write when the linger runs out."""
    c, leader = _cluster(3)
    end = c.view(leader).end_offset
    assert not _answers(c.step(leader, ClientAppend(c.now, ((None, b"a"),), 1)))
    effects = c.step(leader, ClientAppend(c.now, ((None, b"b"), (None, b"c")), 2, P, 0))
    assert _batches(effects) == [(end, end), (end + 1, end + 2)]
    answers = _answers(effects)
    assert [(rid, a.error, a.first_offset, a.last_offset) for rid, a in answers.items()] == [
        (1, ErrorCode.NONE, end, end),
        (2, ErrorCode.NONE, end + 1, end + 2),
    ]
    c.run(c.now + LINGER_MS + 5)
    assert c.view(leader).end_offset == end + 3


def test_a_single_voters_idempotent_append_step_is_named_after_it() -> None:
    """A single voter with a plain append lingering takes an idempotent append: what lingered
    and the new batch are written and committed in that step, which the trace names after its
    first action: ClientAppend, before the AdvanceHighWatermark actions of what it wrote."""
    c, leader = _cluster(1)
    assert not _answers(c.step(leader, ClientAppend(c.now, ((None, b"a"),), 1)))
    effects = c.step(leader, ClientAppend(c.now, ((None, b"b"),), 2, P, 0))
    actions = _actions(effects)
    assert actions[0] is Action.CLIENT_APPEND
    assert actions.count(Action.CLIENT_APPEND) == 1
    assert Action.ADVANCE_HIGH_WATERMARK in actions
    view = c.view(leader)
    assert view.high_watermark == view.end_offset


def test_a_single_voter_answers_an_idempotent_append_as_a_plain_one() -> None:
    """Without a linger a single voter writes and commits each append in the step that takes
    it. An idempotent append's step has the shape of a plain append's: the ClientAppend action,
    the batch written and flushed, the append answered, the HWM moved past it, the append
    committed, then the AdvanceHighWatermark action."""
    c, leader = _cluster(1, linger_ms=0)
    plain = c.step(leader, ClientAppend(c.now, ((None, b"a"),), 1))
    idempotent = c.step(leader, ClientAppend(c.now, ((None, b"b"),), 2, P, 0))
    shape = [
        "ActionTaken",
        "AppendToLog",
        "FlushLog",
        "AppendResult",
        "HighWatermarkMoved",
        "AppendCommitted",
        "ActionTaken",
    ]
    assert [type(e).__name__ for e in plain] == shape
    assert [type(e).__name__ for e in idempotent] == shape
    assert _actions(idempotent) == [Action.CLIENT_APPEND, Action.ADVANCE_HIGH_WATERMARK]
