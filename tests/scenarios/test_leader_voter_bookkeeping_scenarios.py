"""Scenario tests of what a leader answers a Fetch its log cannot serve when it has no
snapshot to offer (KIP-630's log start, issue #16's leader.py survivors):

- a leader whose log starts above 0 with no snapshot covering the records before it (a log
  started elsewhere: Kafka's own log refuses that state, KafkaRaftLog's "Log start offset is
  greater than zero but latest snapshot was not found") answers a Fetch below its log start
  OFFSET_OUT_OF_RANGE at once, naming its log start, rather than leaving the fetcher waiting
  for an answer that never comes (Kafka answers a read below the log start with the error of
  its OffsetOutOfRangeException); a Fetch at its log start is served as usual.
"""

from __future__ import annotations

from hand_driven import HandDriven
from memory_logs import key

from kraft.core.effects import Effect, Send
from kraft.core.events import Receive
from kraft.core.messages import FetchRequest, FetchResponse
from kraft.core.replica import Replica
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset
from kraft.storage.memory_log import MemoryLog

CLUSTER = ClusterId("leader-voter-bookkeeping")
LOG_START = 5
OBSERVER = 4


def _only_voter_leading(log_start: int) -> tuple[Replica, MemoryLog]:
    """Voter 1, the only voter, leading at once over a log that starts at `log_start` and
    holds no snapshot."""
    one = HandDriven(CLUSTER, (1,), log=MemoryLog(log_start))
    assert one.replica.view().state is ReplicaState.LEADER
    return one.replica, one.log


def _fetch(fetch_offset: int, last_fetched_epoch: int, epoch: Epoch) -> FetchRequest:
    return FetchRequest(
        CLUSTER,
        key(OBSERVER),
        epoch,
        Offset(fetch_offset),
        Epoch(last_fetched_epoch),
        Offset(0),
        max_wait_ms=500,
    )


def _answers(effects: list[Effect]) -> list[FetchResponse]:
    return [
        e.message
        for e in effects
        if isinstance(e, Send) and e.dst == OBSERVER and isinstance(e.message, FetchResponse)
    ]


def test_a_fetch_below_a_log_start_no_snapshot_covers_is_answered_offset_out_of_range() -> None:
    replica, log = _only_voter_leading(LOG_START)
    epoch = replica.view().epoch
    assert log.start_offset == LOG_START and log.end_offset > LOG_START  # its LeaderChange

    effects = replica.step(Receive(10, NodeId(OBSERVER), _fetch(0, 0, epoch), None))

    [answer] = _answers(effects)
    assert answer.error is ErrorCode.OFFSET_OUT_OF_RANGE
    assert answer.snapshot_id is None and answer.diverging_epoch is None
    assert (answer.leader_id, answer.leader_epoch) == (NodeId(1), epoch)
    assert answer.log_start_offset == LOG_START


def test_a_fetch_at_that_log_start_is_served() -> None:
    replica, log = _only_voter_leading(LOG_START)
    epoch = replica.view().epoch

    effects = replica.step(Receive(10, NodeId(OBSERVER), _fetch(LOG_START, 0, epoch), None))

    [answer] = _answers(effects)
    assert answer.error is ErrorCode.NONE
    assert answer.snapshot_id is None and answer.diverging_epoch is None
    assert answer.records == log.read(Offset(LOG_START), 1 << 20).data
