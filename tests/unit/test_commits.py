"""The commit rule (kraft.core.commits): "committed when the replica's HWM rises past `last`
while its log holds `epoch` at `last` (in any state); lost when the log is truncated at or
below `last` (or holds another epoch there)". First the pure rule, then the replica that owns
it: every accepted append is decided exactly once, in the step that decides it."""

from __future__ import annotations

from replica_harness import CLUSTER, Harness, of
from test_idempotent_appends import P
from test_replica_fetch import ok
from test_replica_leader import fetch, leader

from kraft.core.commits import CommitRule
from kraft.core.effects import (
    AppendCommitted,
    AppendLost,
    AppendResult,
    AppendToLog,
    FlushLog,
    HighWatermarkMoved,
)
from kraft.core.events import ClientAppend
from kraft.core.messages import BeginQuorumEpochRequest
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch

E2, E3 = Epoch(2), Epoch(3)


class Log:
    """Epoch by offset, as (epoch, start) runs ending before `end`."""

    def __init__(self, runs: list[tuple[int, int]], end: int) -> None:
        self.runs = runs
        self.end = end

    def epoch_at(self, offset: Offset) -> Epoch | None:
        found = None
        for epoch, start in self.runs:
            if start <= offset < self.end:
                found = Epoch(epoch)
        return found


LOG = Log([(1, 0), (2, 3)], end=10)  # epoch 1 at 0..2, epoch 2 at 3..9


def rule_with(*appends: tuple[int, int, int, int]) -> CommitRule:
    rule = CommitRule()
    for rid, first, last, epoch in appends:
        assert (
            rule.accepted(
                rid, Offset(first), Offset(last), Epoch(epoch), high_watermark=None, log=LOG
            )
            == []
        )
    return rule


# --------------------------------------------------------------------------- the pure rule


def test_committed_once_the_hwm_rises_past_last_while_the_log_holds_its_epoch() -> None:
    rule = rule_with((1, 3, 4, 2), (2, 5, 7, 2))
    # "past": a HWM equal to the last offset does not cover it.
    assert rule.high_watermark_raised(Offset(4), LOG) == []
    assert rule.high_watermark_raised(Offset(5), LOG) == [
        AppendCommitted(1, Offset(3), Offset(4), E2)
    ]
    assert rule.high_watermark_raised(Offset(10), LOG) == [
        AppendCommitted(2, Offset(5), Offset(7), E2)
    ]
    assert len(rule) == 0
    assert rule.high_watermark_raised(Offset(11), LOG) == []  # decided once


def test_lost_when_the_hwm_passes_but_the_log_holds_another_epoch_or_nothing_there() -> None:
    rule = rule_with((1, 1, 2, 2))  # offsets 1..2 hold epoch 1 in LOG
    assert rule.high_watermark_raised(Offset(3), LOG) == [AppendLost(1, Offset(1), Offset(2), E2)]
    rule = rule_with((2, 3, 4, 2))
    assert rule.high_watermark_raised(Offset(5), Log([], end=0)) == [
        AppendLost(2, Offset(3), Offset(4), E2)
    ]


def test_lost_when_the_log_is_truncated_at_or_below_last_and_only_then() -> None:
    rule = rule_with((1, 3, 4, 2), (2, 5, 7, 2), (3, 8, 9, 2))
    assert rule.truncated(Offset(10)) == []
    assert rule.truncated(Offset(8)) == [AppendLost(3, Offset(8), Offset(9), E2)]
    # A truncation inside a batch loses it (its last offset is gone).
    assert rule.truncated(Offset(7)) == [AppendLost(2, Offset(5), Offset(7), E2)]
    assert len(rule) == 1
    assert rule.high_watermark_raised(Offset(5), LOG) == [
        AppendCommitted(1, Offset(3), Offset(4), E2)
    ]


def test_an_append_accepted_below_the_hwm_is_decided_at_once() -> None:
    rule = CommitRule()
    decided = rule.accepted(9, Offset(3), Offset(4), E2, high_watermark=Offset(6), log=LOG)
    assert decided == [AppendCommitted(9, Offset(3), Offset(4), E2)]
    assert len(rule) == 0


def test_appends_are_decided_in_offset_order_whatever_order_they_were_accepted_in() -> None:
    rule = rule_with((1, 5, 7, 2), (2, 3, 4, 2))
    assert [d.request_id for d in rule.high_watermark_raised(Offset(10), LOG)] == [2, 1]


# --------------------------------------------------------------------------- in the replica


def test_a_leader_decides_its_append_in_the_step_that_raises_the_hwm_past_it() -> None:
    h = leader()  # epoch 2; offsets 0..1 of epoch 1, LeaderChange at 2
    effects = h.step(ClientAppend(h.now, ((None, b"x"), (None, b"y")), request_id=7))
    assert of(effects, AppendResult)[0].error is ErrorCode.NONE
    assert not of(effects, AppendCommitted)
    assert not of(h.recv(2, fetch(2, 2, 4, 2)), AppendCommitted)  # HWM 4 does not pass 4
    effects = h.recv(2, fetch(2, 2, 5, 2))
    assert of(effects, AppendCommitted) == [AppendCommitted(7, Offset(3), Offset(4), E2)]
    kinds = [type(e) for e in effects]
    assert kinds.index(HighWatermarkMoved) < kinds.index(AppendCommitted)
    assert not of(h.recv(3, fetch(3, 2, 5, 2)), AppendCommitted)  # decided once


def test_a_single_voter_commits_in_the_accepting_step_after_the_flush_and_the_result() -> None:
    h = leader(voters=(1,))
    effects = h.step(ClientAppend(h.now, ((None, b"x"),), request_id=1))
    kinds = [type(e) for e in effects]
    assert (
        kinds.index(AppendToLog)
        < kinds.index(FlushLog)
        < kinds.index(AppendResult)
        < kinds.index(HighWatermarkMoved)
        < kinds.index(AppendCommitted)
    )
    assert of(effects, AppendCommitted) == [AppendCommitted(1, Offset(3), Offset(3), E2)]


def step_down(h: Harness) -> None:
    """Node 2 leads epoch 3: the leader of epoch 2 follows it."""
    h.recv(2, BeginQuorumEpochRequest(CLUSTER, NodeId(2), E3))
    assert (h.view.state, h.view.epoch) == (ReplicaState.FOLLOWER, E3)


def test_a_leader_that_stepped_down_decides_committed_once_its_follower_hwm_passes() -> None:
    h = leader()
    # 3..4 in epoch 2, uncommitted
    h.step(ClientAppend(h.now, ((None, b"x"), (None, b"y")), request_id=7))
    step_down(h)
    effects = h.recv(2, ok(3, 5))  # the new leader kept 3..4 and committed them
    assert of(effects, AppendCommitted) == [AppendCommitted(7, Offset(3), Offset(4), E2)]


def test_a_leader_that_stepped_down_decides_lost_when_its_log_is_truncated() -> None:
    h = leader()
    h.step(ClientAppend(h.now, ((None, b"x"), (None, b"y")), request_id=7))
    step_down(h)
    # The new leader's epoch 2 ended at 3: our 3..4 are not on its log.
    effects = h.recv(2, ok(3, 0, diverging_epoch=OffsetAndEpoch(E2, Offset(3))))
    assert of(effects, AppendLost) == [AppendLost(7, Offset(3), Offset(4), E2)]
    assert not of(h.recv(2, ok(3, 3)), AppendCommitted)


def test_a_resend_of_a_committed_idempotent_batch_is_committed_at_once() -> None:
    h = leader(voters=(1,))
    h.step(ClientAppend(h.now, ((None, b"a"),), 1, P, 0))
    effects = h.step(ClientAppend(h.now, ((None, b"a"),), 2, P, 0))  # DUPLICATE: the same offsets
    [result] = of(effects, AppendResult)
    assert result.error is ErrorCode.NONE
    assert of(effects, AppendCommitted) == [AppendCommitted(2, Offset(3), Offset(3), E2)]
