"""A snapshot the node's state machine cannot load (kraft.server.snapshots' driver hooks): a
key-value node in a quorum with Kafka controllers fetches a Kafka snapshot of metadata records,
which the key-value store refuses. The state machine stops (the applier's `failed`, as for a
batch it cannot apply: KraftGet answers with the reason) and the node goes on replicating; the
hook does not raise into the driver, which would end the node."""

from __future__ import annotations

from pathlib import Path

from kraft.app.kv import KeyValueStore
from kraft.app.port import LeaderAndEpoch
from kraft.ids import Epoch, Offset, OffsetAndEpoch
from kraft.metadata_records import feature_level_record, no_op_record
from kraft.server.applier import Applier
from kraft.server.snapshots import SnapshotPolicy, Snapshotter
from kraft.storage.log_adapter import BatchReader
from kraft.storage.segmented_log import SegmentedLog
from kraft.storage.snapshot_files import CheckpointWriter

E = Epoch(3)
SID = OffsetAndEpoch(E, Offset(40))


def _kafka_like_snapshot(directory: Path) -> Path:
    """A snapshot of Kafka metadata records (null keys), as a Kafka controller writes one."""
    with CheckpointWriter(
        directory, SID, timestamp_ms=1000, last_contained_log_timestamp=999
    ) as writer:
        writer.append([(None, feature_level_record("metadata.version", 30))])
        writer.append([(None, no_op_record())])
        return writer.freeze()


def _kv_snapshotter(log_: SegmentedLog) -> Snapshotter[KeyValueStore]:
    applier = Applier(
        BatchReader(log_), KeyValueStore(), lambda: Offset(0), lambda: LeaderAndEpoch(None, E)
    )
    return Snapshotter(
        applier,
        log_,
        log_.dir,
        SnapshotPolicy(1 << 30, 0),
        lambda: 0,
        submit=lambda _event: None,
    )


def test_an_installed_snapshot_the_machine_refuses_stops_the_machine_not_the_node(
    tmp_path: Path,
) -> None:
    with SegmentedLog.open(tmp_path) as log_:
        s = _kv_snapshotter(log_)
        path = _kafka_like_snapshot(log_.dir)
        s.snapshot_installed(path)  # no exception into the driver
        failed = s._applier.failed
        assert failed is not None
        assert path.name in failed and "producer entry" in failed
        assert s._applier.machine.applied_offset == 0  # the state is not half loaded
        assert s._applier.catch_up() is True  # a stopped machine is not fed


def test_a_log_start_move_onto_a_snapshot_the_machine_refuses_stops_the_machine(
    tmp_path: Path,
) -> None:
    with SegmentedLog.open(tmp_path) as log_:
        s = _kv_snapshotter(log_)
        path = _kafka_like_snapshot(log_.dir)
        s.before_log_start(SID, path)
        failed = s._applier.failed
        assert failed is not None and path.name in failed
        assert s._applier.machine.applied_offset == 0
