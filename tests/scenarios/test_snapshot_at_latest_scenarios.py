"""A snapshot asked for where the replica's latest snapshot already ends (KIP-630's
CreateSnapshot): refused, and nothing written again. Kafka 4.3.1's createNewSnapshot returns
no writer for an id it already holds; kraft refuses any offset not after its latest snapshot
(README, deviations).

Under Kafka's retention policy the log start stays where it is until retention asks, so the
log-start rule cannot be what refuses the second ask."""

from __future__ import annotations

from scenario_harness import RetentionCluster, committed, elect

from kraft.core.effects import SnapshotRefused, WriteSnapshot
from kraft.core.events import CreateSnapshot


def test_a_snapshot_at_the_latest_snapshots_end_is_refused_and_not_written_again() -> None:
    c = RetentionCluster(3, snapshots=True, seed=3)
    lead = elect(c)
    end = committed(c, lead, 4)
    first = c.step(lead, CreateSnapshot(c.now, end))
    assert [e.snapshot_id.offset for e in first if isinstance(e, WriteSnapshot)] == [end]
    c.run(c.now + 5)
    assert c.view(lead).log_start_offset == 0  # retention asked for nothing
    again = c.step(lead, CreateSnapshot(c.now, end))
    assert not [e for e in again if isinstance(e, WriteSnapshot)]
    [refused] = [e for e in again if isinstance(e, SnapshotRefused)]
    assert refused.end_offset == end and "latest snapshot" in refused.reason
