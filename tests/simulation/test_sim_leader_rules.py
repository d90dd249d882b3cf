"""The checkers of role changes and of what a new leader does (refinement.invariants_leader), on
the steps they judge, and VoterChangeTimeoutNotLate (refinement.invariants_timing)."""

from __future__ import annotations

import uuid

from kraft.control_records import (
    ControlRecord,
    KRaftVersionRecord,
    LeaderChangeMessage,
    encode_control_records,
)
from kraft.core.effects import (
    ActionTaken,
    AppendToLog,
    Effect,
    ElectionState,
    PersistElectionState,
    Send,
    StateChanged,
)
from kraft.core.events import Receive, Tick
from kraft.core.messages import BeginQuorumEpochRequest, RemoveVoterRequest, RemoveVoterResponse
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import Action
from kraft.core.vocabulary import ReplicaState as S
from kraft.core.voter_set import VoterSet
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, DirectoryId, Epoch, NodeId, Offset, ReplicaKey
from refinement.invariants_leader import (
    BECOME_LEADER_IN_ORDER,
    REMOVED_LEADER_RESIGNS_AT_ONCE,
    START_OF_EPOCH_VOTERS,
    STATE_CHANGE_AFTER_ITS_ACTION,
    become_leader_in_order,
    removed_leader_resigns_at_once,
    state_change_after_its_action,
)
from refinement.invariants_timing import VOTER_CHANGE_TIMEOUT_NOT_LATE, TimingMonitor

ME = NodeId(1)
EPOCH = Epoch(4)
CLUSTER = ClusterId("c")


def _key(i: int) -> ReplicaKey:
    return ReplicaKey(NodeId(i), DirectoryId(uuid.UUID(int=i)))


def test_a_state_change_comes_after_its_action() -> None:
    won = [ActionTaken(Action.BECOME_LEADER), StateChanged(S.CANDIDATE, S.LEADER, EPOCH)]
    assert state_change_after_its_action(ME, won) is None
    again = StateChanged(S.PROSPECTIVE, S.PROSPECTIVE, EPOCH)  # a vote cast as Prospective
    assert state_change_after_its_action(ME, [again]) is None
    for effects in (
        won[::-1],
        [ActionTaken(Action.BECOME_CANDIDATE), StateChanged(S.PROSPECTIVE, S.CANDIDATE, EPOCH),
         StateChanged(S.CANDIDATE, S.LEADER, EPOCH)],
        [StateChanged(S.LEADER, S.RESIGNED, EPOCH), ActionTaken(Action.RESIGN)],
        [ActionTaken(Action.HANDLE_VOTE_REQUEST), StateChanged(S.FOLLOWER, S.PROSPECTIVE, EPOCH)],
    ):  # fmt: skip
        found = state_change_after_its_action(ME, effects)
        assert found is not None and found.name == STATE_CHANGE_AFTER_ITS_ACTION


def _start_of_epoch(*, restate: bool) -> AppendToLog:
    records: list[ControlRecord] = [LeaderChangeMessage(0, ME, (1, 2, 3), (1, 2))]
    if restate:
        records.append(KRaftVersionRecord(0, 1))
    data = encode_control_records(Offset(7), EPOCH, records, timestamp_ms=0)
    return AppendToLog(Offset(7), Offset(7 + len(records) - 1), EPOCH, data, leader_encoded=True)


def _became(append: AppendToLog, asked: tuple[int, ...] = (2, 3)) -> list[Effect]:
    return [
        ActionTaken(Action.BECOME_LEADER),
        PersistElectionState(ElectionState(EPOCH, ME)),
        StateChanged(S.CANDIDATE, S.LEADER, EPOCH),
        append,
        *(Send(NodeId(i), BeginQuorumEpochRequest(CLUSTER, ME, EPOCH)) for i in asked),
    ]


def test_a_new_leader_persists_changes_state_appends_then_asks_every_voter() -> None:
    voters = (ME, NodeId(2), NodeId(3))
    good = _became(_start_of_epoch(restate=False))
    judge = lambda effects, history=(): become_leader_in_order(  # noqa: E731
        ME, effects, end_before=Offset(7), voters=voters, history=history
    )
    assert judge(good) is None
    for bad in (
        [good[0], good[2], good[1], *good[3:]],  # persisted after the state change
        [*good[:3], good[4], good[3], good[5]],  # asked before its first batch
        good[:-1],  # voter 3 not asked
    ):
        found = judge(bad)
        assert found is not None and found.name == BECOME_LEADER_IN_ORDER
    restated = _became(_start_of_epoch(restate=True))
    bootstrap = VoterSet((_key(1), _key(2), _key(3)))
    assert judge(restated, ((Offset(-1), bootstrap),)) is None
    found = judge(restated, ((Offset(-1), bootstrap), (Offset(2), bootstrap)))
    assert found is not None and found.name == START_OF_EPOCH_VOTERS


def test_a_leader_whose_removal_committed_resigns_on_its_tick() -> None:
    without_me = VoterSet((_key(2), _key(3)))
    history = ((Offset(-1), VoterSet((_key(1), _key(2), _key(3)))), (Offset(9), without_me))

    def judge(hwm: int, *, resigned: bool) -> str | None:
        found = removed_leader_resigns_at_once(
            ME, _key(1), leading=True, voter=False, high_watermark=Offset(hwm),
            history=history, resigned=resigned,
        )  # fmt: skip
        return None if found is None else found.name

    assert judge(9, resigned=False) is None  # not committed yet
    assert judge(10, resigned=True) is None
    assert judge(10, resigned=False) == REMOVED_LEADER_RESIGNS_AT_ONCE


def test_a_voter_change_is_answered_by_its_request_timeout() -> None:
    timing = QuorumTiming()
    monitor = TimingMonitor(timing, None)
    monitor.started(ME, 0, [StateChanged(S.UNATTACHED, S.LEADER, EPOCH)])
    ask = Receive(100, NodeId(-1), RemoveVoterRequest(CLUSTER, _key(2)), None, reply_to=5)
    assert monitor.step(ME, 100, ask, [], ME) is None
    due = 100 + timing.request_timeout_ms
    assert monitor.overdue(due + 1) is None
    late = monitor.overdue(due + 10)
    assert late is not None and late.name == VOTER_CHANGE_TIMEOUT_NOT_LATE
    answer = Send(NodeId(-1), RemoveVoterResponse(ErrorCode.REQUEST_TIMED_OUT), 5)
    assert monitor.step(ME, due, Tick(due), [answer], ME) is None
    assert monitor.overdue(due + 10) is None
