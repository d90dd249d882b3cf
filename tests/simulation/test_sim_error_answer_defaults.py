"""ErrorAnswerDefaults and AnswerNamesSendersLeader (refinement.invariants_answers): an answer
carries nothing in the fields Kafka 4.3.1 leaves at their defaults, and names the sender's
epoch and leader (-1 when it knows none). Each checker trips on each such field and passes the
answers the core builds; the simulator runs them on every answer a replica sends, and catches a
core whose FetchSnapshot error answers name a half-unknown snapshot id, or whose answers name
no leader when it knows one."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

import kraft.core.snapshots as core_snapshots
from kraft.core.messages import (
    BeginQuorumEpochResponse,
    FetchResponse,
    FetchSnapshotResponse,
    Message,
    VoteResponse,
)
from kraft.core.replica import Replica
from kraft.errors import ErrorCode
from kraft.ids import NO_NODE, Epoch, NodeId, Offset, OffsetAndEpoch
from refinement import invariants_answers as ans
from refinement.faults import PROFILES
from refinement.sim import SimConfig, simulate

E = ErrorCode
LEADER = NodeId(1)
EPOCH = Epoch(3)
NO_SNAPSHOT = OffsetAndEpoch(Epoch(-1), Offset(-1))
SNAP = OffsetAndEpoch(Epoch(2), Offset(40))


def _fetch(error: ErrorCode, **kw: Any) -> FetchResponse:
    """A Fetch answer as the core builds an error one, with `kw` replaced."""
    return replace(FetchResponse(error, LEADER, EPOCH, Offset(-1), Offset(0)), **kw)


def _chunk(error: ErrorCode, **kw: Any) -> FetchSnapshotResponse:
    """A FetchSnapshot answer as the core builds an error one, with `kw` replaced."""
    return replace(FetchSnapshotResponse(error, LEADER, EPOCH, NO_SNAPSHOT, 0, 0), **kw)


KAFKA_SHAPED: list[Message] = [
    VoteResponse(E.FENCED_LEADER_EPOCH, LEADER, EPOCH, vote_granted=False),
    VoteResponse(E.NONE, LEADER, EPOCH, vote_granted=True),
    _fetch(E.NOT_LEADER_OR_FOLLOWER),
    _fetch(E.NONE, high_watermark=Offset(7), records=b"batch"),
    _fetch(E.NONE, high_watermark=Offset(7), diverging_epoch=SNAP),
    _fetch(E.NONE, high_watermark=Offset(7), snapshot_id=SNAP),
    _chunk(E.SNAPSHOT_NOT_FOUND),
    _chunk(E.NONE, snapshot_id=SNAP, size=100, position=20, chunk=b"bytes"),
]

OFF_DEFAULT: list[Message] = [
    VoteResponse(E.FENCED_LEADER_EPOCH, LEADER, EPOCH, vote_granted=True),
    _fetch(E.FENCED_LEADER_EPOCH, high_watermark=Offset(5)),
    _fetch(E.FENCED_LEADER_EPOCH, records=b"batch"),
    _fetch(E.UNKNOWN_LEADER_EPOCH, diverging_epoch=SNAP),
    _fetch(E.NOT_LEADER_OR_FOLLOWER, snapshot_id=SNAP),
    _fetch(E.NONE, high_watermark=Offset(7), records=b"batch", snapshot_id=SNAP),
    _fetch(E.NONE, high_watermark=Offset(7), diverging_epoch=SNAP, snapshot_id=SNAP),
    _chunk(E.SNAPSHOT_NOT_FOUND, snapshot_id=OffsetAndEpoch(Epoch(0), Offset(-1))),
    _chunk(E.POSITION_OUT_OF_RANGE, snapshot_id=SNAP),
    _chunk(E.FENCED_LEADER_EPOCH, size=100),
    _chunk(E.FENCED_LEADER_EPOCH, position=20),
    _chunk(E.FENCED_LEADER_EPOCH, chunk=b"bytes"),
]


@pytest.mark.parametrize("answer", KAFKA_SHAPED, ids=repr)
def test_an_answer_shaped_as_kafka_sends_it_passes(answer: Message) -> None:
    assert ans.error_answer_defaults(NodeId(1), NodeId(2), answer) is None


@pytest.mark.parametrize("answer", OFF_DEFAULT, ids=repr)
def test_a_field_off_its_default_is_a_violation(answer: Message) -> None:
    found = ans.error_answer_defaults(NodeId(1), NodeId(2), answer)
    assert found is not None and found.name == ans.ERROR_ANSWER_DEFAULTS


def test_the_sweep_catches_a_half_unknown_snapshot_id_in_error_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = SimConfig(seed=4, max_events=1500, profile=PROFILES["mixed+snapshots"])
    assert simulate(config).ok
    bad = OffsetAndEpoch(Epoch(0), Offset(-1))
    monkeypatch.setattr(core_snapshots, "UNKNOWN_SNAPSHOT", bad)
    result = simulate(config)
    assert [v.name for v in result.violations][:1] == [ans.ERROR_ANSWER_DEFAULTS]


def _names(answer: Message, before: tuple[int, int | None], after: tuple[int, int | None]) -> bool:
    found = ans.answer_names_senders_leader(
        NodeId(1),
        NodeId(2),
        answer,
        before=(Epoch(before[0]), None if before[1] is None else NodeId(before[1])),
        after=(Epoch(after[0]), None if after[1] is None else NodeId(after[1])),
    )
    assert found is None or found.name == ans.ANSWER_NAMES_SENDERS_LEADER
    return found is None


def test_an_answer_names_the_senders_epoch_and_leader() -> None:
    begin = BeginQuorumEpochResponse(E.NONE, LEADER, EPOCH)
    unknown = BeginQuorumEpochResponse(E.NONE, NO_NODE, EPOCH)
    assert _names(begin, (3, 1), (3, 1))
    assert _names(unknown, (3, None), (3, None))
    # The step changed the epoch or the leader: any epoch in between, any leader.
    assert _names(begin, (2, None), (4, 2)) and _names(unknown, (3, None), (3, 1))
    assert not _names(begin, (3, None), (3, None))  # a leader it did not know
    assert not _names(unknown, (3, 1), (3, 1))  # no leader, when it knew one
    assert not _names(BeginQuorumEpochResponse(E.NONE, NodeId(2), EPOCH), (3, 1), (3, 1))
    assert not _names(begin, (4, 1), (5, 1)) and not _names(begin, (1, 1), (2, 1))


def test_the_sweep_catches_answers_that_name_no_leader_when_one_is_known(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = SimConfig(seed=0, max_events=1000, profile=PROFILES["mixed"])
    assert simulate(config).ok
    monkeypatch.setattr(Replica, "_leader_or_none", lambda _self: NO_NODE)
    result = simulate(config)
    assert [v.name for v in result.violations][:1] == [ans.ANSWER_NAMES_SENDERS_LEADER]
