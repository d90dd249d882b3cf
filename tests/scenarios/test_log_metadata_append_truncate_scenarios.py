"""The epochs a driver states at start must not go back along the log.

A driver states its log's epochs in `LogState.epochs` (like Kafka's leader-epoch-checkpoint).
Epochs never decrease along a log, so a list where a later entry has a lower epoch than the one
before it is corrupt, and the replica refuses to start on it (ValueError) instead of keeping part
of it. An epoch that goes back only below the last one (here 2 after 3, with 1 first) must be
refused as well as one below the first."""

from __future__ import annotations

import random

import pytest
from memory_logs import key

from kraft.core.log_metadata import LogState
from kraft.core.replica import Replica, ReplicaConfig
from kraft.ids import ClusterId, Epoch, Offset
from kraft.storage.log_adapter import BatchReader
from kraft.storage.memory_log import MemoryLog

CLUSTER = ClusterId("epochs-cluster")


def _replica(epochs: tuple[tuple[int, int], ...]) -> Replica:
    state = LogState(Offset(0), Offset(10), tuple((Epoch(e), Offset(o)) for e, o in epochs))
    return Replica(
        ReplicaConfig(key(1), CLUSTER, (key(1), key(2), key(3))),
        election_state=None,
        log_state=state,
        reader=BatchReader(MemoryLog()),
        rng=random.Random(0),
        now_ms=0,
    )


def test_a_log_whose_epochs_increase_starts_at_its_last_epoch() -> None:
    view = _replica(((1, 0), (2, 5), (3, 7))).view()
    assert (view.end_offset, view.last_epoch) == (10, 3)


def test_a_log_whose_epoch_goes_back_below_the_last_one_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="epoch 2 after 3"):
        _replica(((1, 0), (3, 5), (2, 7)))
