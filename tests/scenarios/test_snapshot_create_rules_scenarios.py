"""KIP-630's CreateSnapshot on the replica that takes the snapshot: what it refuses, and how
the step that then holds the written snapshot is named.

- A replica that knows no high watermark yet (a leader before any follower fetched from it,
  a replica just restarted over its records) counts nothing as committed: a snapshot ending
  past offset 0 is refused as past the high watermark, never written. Kafka's
  KafkaRaftLog.createNewSnapshot refuses an id whose offset is past `highWatermark()`.
- A snapshot ending at offset 0 of a log that starts at 0 holds nothing: it is refused, and
  the reason the driver logs says it is not after the log start.
- The SnapshotWritten step that makes the replica hold its snapshot names the spec's
  CreateSnapshot action (ActionTaken), which a node's trace file and trace validation
  (refinement/traces/mapping.py: CreateSnapshot(n, x)) read; without it the trace shows
  no step that took the snapshot.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hand_driven import HandDriven
from memory_logs import build_log
from scenario_harness import Recording, committed, elect

from kraft.core.effects import ActionTaken, Effect, SnapshotRefused, WriteSnapshot
from kraft.core.events import CreateSnapshot
from kraft.core.vocabulary import Action, ReplicaState
from kraft.ids import ClusterId, Offset

CLUSTER = ClusterId("snapshot-create-rules")


def _refusals(effects: list[Effect]) -> list[SnapshotRefused]:
    return [e for e in effects if isinstance(e, SnapshotRefused)]


def _writes(effects: list[Effect]) -> list[WriteSnapshot]:
    return [e for e in effects if isinstance(e, WriteSnapshot)]


def _new_leader() -> HandDriven:
    # Its LeaderChange record (one batch, offset 0) is written, but no follower has fetched
    # it: the leader knows no high watermark.
    me = HandDriven(CLUSTER, [1, 2, 3])
    me.elect()
    return me


def _restarted() -> HandDriven:
    # Two batches in epoch 1 (offsets 0 and 1..2) on disk; the high watermark is not durable.
    return HandDriven(CLUSTER, [1, 2, 3], log=build_log([(1, 1), (1, 2)]))


@pytest.mark.parametrize("replica", [_new_leader, _restarted], ids=["new-leader", "restarted"])
def test_a_replica_that_knows_no_high_watermark_snapshots_nothing(
    replica: Callable[[], HandDriven],
) -> None:
    me = replica()
    view = me.replica.view()
    assert view.high_watermark is None
    assert view.end_offset >= 1 and view.log_start_offset == 0
    # Offset 1 ends the log's first batch: every rule but the high watermark's allows it.
    effects = me.step(CreateSnapshot(me.now, Offset(1)))
    assert not _writes(effects)
    [refused] = _refusals(effects)
    assert refused.end_offset == 1 and "past the high watermark 0" in refused.reason


def test_a_snapshot_ending_at_offset_0_is_refused_as_not_after_the_log_start() -> None:
    me = _restarted()
    assert me.replica.view().log_start_offset == 0
    effects = me.step(CreateSnapshot(me.now, Offset(0)))
    assert not _writes(effects)
    [refused] = _refusals(effects)
    assert refused.end_offset == 0 and "not after the log start 0" in refused.reason


def test_the_step_that_holds_a_written_snapshot_is_named_create_snapshot() -> None:
    c = Recording(3, snapshots=True, seed=5)
    lead = elect(c)
    end = committed(c, lead, 3)
    asked = c.step(lead, CreateSnapshot(c.now, Offset(end)))
    [write] = _writes(asked)
    assert ActionTaken(Action.CREATE_SNAPSHOT) not in asked  # only asked for, not yet held
    mark = len(c.effects[lead])
    c.run(c.now + 5)  # the snapshot is durable: SnapshotWritten
    after = [e for _, e in c.effects[lead][mark:]]
    assert after.count(ActionTaken(Action.CREATE_SNAPSHOT)) == 1
    # It is held: the same snapshot asked for again is refused as not after the latest.
    again = c.step(lead, CreateSnapshot(c.now, Offset(end)))
    assert c.view(lead).state is ReplicaState.LEADER
    [refused] = _refusals(again)
    assert str(write.snapshot_id) in refused.reason and "latest snapshot" in refused.reason
