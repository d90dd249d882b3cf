"""AppendDecidedAfterAccepted (refinement.invariants_effects) and PastEpochAnswerIgnored
(refinement.invariants_roles): each fires on the effect it names and stays silent on what the
contract allows; and under mixed+adversary a follower that takes a Fetch answer of a past epoch
from its leader (the forgery fetch-answer-past-epoch) is caught."""

from __future__ import annotations

from typing import Any

import pytest

from kraft.core.effects import (
    ActionTaken,
    AppendToLog,
    HighWatermarkMoved,
    SnapshotRequired,
)
from kraft.core.follower import FollowerRole
from kraft.core.messages import FetchResponse, FetchSnapshotResponse, VoteResponse
from kraft.core.vocabulary import Action
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch
from refinement import invariants_effects as eff
from refinement import invariants_input as inp
from refinement import invariants_roles as roles
from refinement.faults import PROFILES
from refinement.sim import SimConfig, simulate

N = NodeId(1)
LEADER = NodeId(2)


def _name(v: object) -> str | None:
    return None if v is None else getattr(v, "name", None)


def test_an_outcome_needs_the_acceptance_before_it() -> None:
    led = eff.EffectLedger(linger=False)
    led.append_received(N, 7)
    assert _name(led.append_decided(N, 7, "AppendCommitted")) == (eff.APPEND_DECIDED_AFTER_ACCEPTED)
    assert led.append_answered(N, 7) is None
    led.append_accepted(N, 7)
    assert led.append_decided(N, 7, "AppendCommitted") is None
    # Decided once: a second outcome is not after an acceptance.
    assert _name(led.append_decided(N, 7, "AppendLost")) == eff.APPEND_DECIDED_AFTER_ACCEPTED


def test_an_acceptance_dies_with_its_incarnation() -> None:
    led = eff.EffectLedger(linger=False)
    led.append_accepted(N, 3)
    led.stopped(N)
    assert _name(led.append_decided(N, 3, "AppendLost")) == eff.APPEND_DECIDED_AFTER_ACCEPTED


def _fetch_answer(epoch: int) -> FetchResponse:
    return FetchResponse(ErrorCode.NONE, LEADER, Epoch(epoch), Offset(5), Offset(0))


def test_a_past_epoch_answer_that_writes_is_caught() -> None:
    handled = ActionTaken(Action.HANDLE_FETCH_RESPONSE)
    wrote = AppendToLog(Offset(3), Offset(3), Epoch(2), b"", leader_encoded=False)
    hwm = HighWatermarkMoved(Offset(4))
    snap = SnapshotRequired(LEADER, OffsetAndEpoch(epoch=Epoch(1), offset=Offset(4)))
    for effect in (wrote, hwm, snap):
        found = roles.past_epoch_answer_ignored(N, LEADER, _fetch_answer(1), Epoch(2), [effect])
        assert _name(found) == roles.PAST_EPOCH_ANSWER_IGNORED
    chunk = FetchSnapshotResponse(
        ErrorCode.NONE, LEADER, Epoch(1), OffsetAndEpoch(epoch=Epoch(1), offset=Offset(4)), 4, 0
    )
    found = roles.past_epoch_answer_ignored(N, LEADER, chunk, Epoch(2), [handled, hwm])
    assert _name(found) == roles.PAST_EPOCH_ANSWER_IGNORED


def test_answers_of_the_current_epoch_and_other_answers_are_left_alone() -> None:
    wrote = AppendToLog(Offset(3), Offset(3), Epoch(2), b"", leader_encoded=False)
    assert roles.past_epoch_answer_ignored(N, LEADER, _fetch_answer(2), Epoch(2), [wrote]) is None
    handled = [ActionTaken(Action.HANDLE_FETCH_RESPONSE)]
    assert roles.past_epoch_answer_ignored(N, LEADER, _fetch_answer(1), Epoch(2), handled) is None
    vote = VoteResponse(ErrorCode.NONE, LEADER, Epoch(1), True)
    assert roles.past_epoch_answer_ignored(N, LEADER, vote, Epoch(2), [wrote]) is None


def test_a_follower_taking_a_past_epoch_answer_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower that handles its leader's answers of any epoch as answers of its own."""
    real = FollowerRole.handle_fetch_response

    def any_epoch(self: FollowerRole, src: Any, resp: FetchResponse, in_reply_to: Any) -> None:
        r = self._r
        if src == r._leader_id and resp.leader_epoch < r._epoch:
            resp = FetchResponse(
                resp.error,
                resp.leader_id,
                r._epoch,
                resp.high_watermark,
                resp.log_start_offset,
                resp.diverging_epoch,
                resp.snapshot_id,
                resp.records,
            )
        real(self, src, resp, in_reply_to)

    monkeypatch.setattr(FollowerRole, "handle_fetch_response", any_epoch)
    caught: set[str] = set()
    for seed in range(6):
        r = simulate(SimConfig(seed=seed, profile=PROFILES["mixed+adversary"]))
        caught |= {v.name for v in r.violations}
    # The forged answer moves its log (and the checker of the step names it too).
    assert caught & {inp.REJECTED_MESSAGE_CHANGES_NOTHING, roles.PAST_EPOCH_ANSWER_IGNORED}, caught
