"""Scenario tests of what a replica does as it starts, and of one step's effects staying its own:

- a log that saw a later epoch than the quorum-state file wins at start: the replica is
  Unattached in the log's epoch and persists that state, leader and vote forgotten (Kafka's
  QuorumState.initialize);
- a replica outside the voter set whose file says it voted for itself comes back Voted in
  that epoch, never Candidate (only a voter stands; Kafka refuses to build that CandidateState);
- a step that raised (a log read the driver could not serve) leaves nothing behind: the
  node's driver drops its effects and steps on, and the next step's effects are that step's
  alone.

The replicas are driven by hand; the requests are the test's own.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hand_driven import replica_over
from memory_logs import build_log, key

from kraft.core.effects import ActionTaken, ElectionState, PersistElectionState, StateChanged
from kraft.core.events import Receive, Tick
from kraft.core.messages import FetchRequest
from kraft.core.replica import Replica, ReplicaConfig
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import Action, ReplicaState
from kraft.ids import ClusterId, Epoch, NodeId, Offset
from kraft.storage.log_adapter import BatchReader, log_state_of
from kraft.storage.memory_log import MemoryLog
from kraft.storage.replicated_log import CorruptLogError

S = ReplicaState
CID = ClusterId("start-deadline")
OBSERVER = 9


# -- start: the restart rules


def test_a_log_epoch_past_the_file_is_persisted_as_unattached_at_start() -> None:
    log = build_log([(1, 2), (3, 1)])
    r = replica_over(log, CID, [1, 2, 3], election_state=ElectionState(Epoch(1), NodeId(2)))
    effects = r.start()
    assert (r.view().state, r.view().epoch) == (S.UNATTACHED, 3)
    persisted = [e.state for e in effects if isinstance(e, PersistElectionState)]
    assert persisted == [ElectionState(Epoch(3))]
    assert StateChanged(S.UNATTACHED, S.UNATTACHED, Epoch(3)) in effects


def test_an_observer_that_voted_for_itself_comes_back_voted_not_candidate() -> None:
    r = replica_over(
        MemoryLog(), CID, [1, 2, 3], me=4, election_state=ElectionState(Epoch(5), voted_for=key(4))
    )
    effects = r.start()
    v = r.view()
    assert (v.state, v.epoch) == (S.VOTED, 5)
    assert [e for e in effects if isinstance(e, StateChanged)] == [
        StateChanged(S.UNATTACHED, S.VOTED, Epoch(5))
    ]


# -- step: a step's effects are its own


class _FailingReader(BatchReader):
    """A BatchReader whose reads fail with CorruptLogError once `broken` is set."""

    __slots__ = ("broken",)

    def __init__(self, log: MemoryLog) -> None:
        super().__init__(log)
        self.broken = False

    def read(self, offset: Offset, max_bytes: int) -> memoryview:
        if self.broken:
            raise CorruptLogError(Path("log"), int(offset), "damaged batch")
        return super().read(offset, max_bytes)


def _fetch(offset: int, epoch: int, last_epoch: int, max_wait_ms: int = 0) -> FetchRequest:
    return FetchRequest(
        CID, key(OBSERVER), Epoch(epoch), Offset(offset), Epoch(last_epoch), Offset(0),
        max_wait_ms=max_wait_ms,
    )  # fmt: skip


def test_the_effects_of_a_step_that_raised_are_not_carried_into_the_next() -> None:
    log = MemoryLog()
    reader = _FailingReader(log)
    r = Replica(
        ReplicaConfig(key(1), CID, (key(1),), QuorumTiming()),
        election_state=None,
        log_state=log_state_of(log),
        reader=reader,
        rng=random.Random(0),
        now_ms=0,
    )
    r.start()
    assert r.view().state is S.LEADER and r.view().end_offset > 0
    reader.broken = True
    with pytest.raises(CorruptLogError):
        # An observer's Fetch from offset 0: its answer reads the log.
        r.step(Receive(10, NodeId(OBSERVER), _fetch(0, r.view().epoch, 0), None))
    # The driver dropped that step's effects (driver.unservable) and steps on.
    effects = r.step(Tick(20))
    assert ActionTaken(Action.HANDLE_FETCH_REQUEST) not in effects
