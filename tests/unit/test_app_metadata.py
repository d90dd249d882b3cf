"""The metadata state machine (kraft.app.metadata) of a quorum shared with Kafka controllers:
features keep their latest level, controller registrations the latest per controller,
NoOpRecords hold no state, other metadata records are kept in order, non-metadata records are
refused, a snapshot (in memory and as a checkpoint file) carries metadata.version first and
round-trips, and the node configuration selects it (`kraft.state.machine`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraft.app.kv import KeyValueStore
from kraft.app.machines import StateMachineKind, new_state_machine
from kraft.app.metadata import MetadataStateMachine
from kraft.app.port import CommittedBatch, MemorySnapshot, StateMachineError
from kraft.ids import Epoch, Offset
from kraft.metadata_records import (
    MetadataRecordError,
    decode_feature_level_record,
    encode_metadata_record,
    feature_level_record,
    no_op_record,
)
from kraft.records import KeyValue
from kraft.server.config import ConfigError, load_config
from kraft.storage.snapshot_directory import load_state_snapshot, write_state_snapshot

# A record of a type this machine does not interpret (ConfigRecord, type 4; body arbitrary).
OTHER = encode_metadata_record(4, 0, b"\x02\x00\x00\x00\x03\x00")


def registration(controller: int, incarnation: int) -> bytes:
    """A RegisterControllerRecord v0: ControllerId first (then, here, only an id's bytes)."""
    body = controller.to_bytes(4, "big") + incarnation.to_bytes(16, "big") + b"\x00\x01\x01\x01\x00"
    return encode_metadata_record(27, 0, body)


def batch(
    base: int, *values: bytes | None, epoch: int = 1, control: bool = False
) -> CommittedBatch:
    records: tuple[KeyValue, ...] = tuple((None, v) for v in values)
    n = max(len(records), 1)
    return CommittedBatch(
        Offset(base), Offset(base + n - 1), Epoch(epoch), () if control else records, control
    )


def mv(level: int) -> bytes:
    return feature_level_record("metadata.version", level)


def test_features_keep_their_latest_level_and_level_zero_removes() -> None:
    m = MetadataStateMachine()
    m.handle_commit(
        [
            batch(0, mv(21), no_op_record()),
            batch(2, feature_level_record("group.version", 1), mv(30)),
            batch(4, control=True),
            batch(5, feature_level_record("group.version", 0), no_op_record(), OTHER),
        ]
    )
    assert m.features() == {"metadata.version": 30}
    assert m.get(b"metadata.version") == b"30"
    assert m.get(b"group.version") is None
    assert m.no_ops == 2
    assert m.other_records == (OTHER,)
    assert (m.applied_offset, m.applied_epoch) == (Offset(8), Epoch(1))


@pytest.mark.parametrize(
    "record",
    [(b"k", no_op_record()), (None, None), (None, b"\x02\x14\x00\x00"), (None, b"\x01")],
    ids=["keyed", "null-value", "frame-version-2", "truncated"],
)
def test_a_record_that_is_not_a_metadata_record_is_refused(record: KeyValue) -> None:
    m = MetadataStateMachine()
    bad = CommittedBatch(Offset(0), Offset(0), Epoch(1), (record,))
    with pytest.raises(StateMachineError, match="not a metadata record"):
        m.handle_commit([bad])
    assert m.applied_offset == Offset(0)


def test_a_controller_registration_replaces_the_older_one_of_that_controller() -> None:
    m = MetadataStateMachine()
    m.handle_commit(
        [batch(0, registration(3, 1), registration(5, 1), OTHER, registration(3, 2), mv(30))]
    )
    assert m.controller_registrations() == {3: registration(3, 2), 5: registration(5, 1)}
    assert m.other_records == (OTHER,)
    snap = MemorySnapshot(m.applied_offset, m.applied_epoch)
    m.produce_snapshot(snap)
    values = [v for b in snap.written for _, v in b]
    assert values == [mv(30), registration(3, 2), registration(5, 1), OTHER]
    truncated = CommittedBatch(
        Offset(5), Offset(5), Epoch(1), ((None, encode_metadata_record(27, 0, b"\x00\x03")),)
    )
    with pytest.raises(StateMachineError, match="truncated RegisterControllerRecord"):
        m.handle_commit([truncated])


def test_a_batch_after_a_gap_is_refused() -> None:
    m = MetadataStateMachine()
    with pytest.raises(StateMachineError, match="does not follow"):
        m.handle_commit([batch(3, no_op_record())])


def test_a_snapshot_holds_metadata_version_first_then_features_then_the_others() -> None:
    m = MetadataStateMachine()
    m.handle_commit(
        [
            batch(0, OTHER, feature_level_record("a.version", 2)),
            batch(2, mv(30), no_op_record(), feature_level_record("z.version", 1)),
        ]
    )
    snap = MemorySnapshot(m.applied_offset, m.applied_epoch)
    m.capture().produce_snapshot(snap)
    values = [v for b in snap.written for _, v in b]
    assert values == [
        mv(30),
        feature_level_record("a.version", 2),
        feature_level_record("z.version", 1),
        OTHER,
    ]
    assert all(k is None for b in snap.written for k, _ in b)
    loaded = MetadataStateMachine()
    loaded.handle_commit([batch(0, mv(7))])
    loaded.load_snapshot(snap)
    assert loaded.features() == m.features()
    assert loaded.other_records == m.other_records
    assert (loaded.applied_offset, loaded.applied_epoch) == (Offset(5), Epoch(1))


def test_a_snapshot_that_does_not_load_leaves_the_state_as_it_was() -> None:
    m = MetadataStateMachine()
    m.handle_commit([batch(0, mv(30))])
    snap = MemorySnapshot(Offset(9), Epoch(2), [((None, mv(31)),), ((b"key", b"value"),)])
    with pytest.raises(StateMachineError):
        m.load_snapshot(snap)
    assert m.features() == {"metadata.version": 30}
    assert m.applied_offset == Offset(1)


def test_capture_is_a_copy() -> None:
    m = MetadataStateMachine()
    m.handle_commit([batch(0, mv(30), OTHER)])
    copy = m.capture()
    m.handle_commit([batch(2, mv(31), OTHER)])
    assert copy.features() == {"metadata.version": 30}
    assert copy.other_records == (OTHER,)
    assert copy.applied_offset == Offset(2)


def test_checkpoint_file_round_trip(tmp_path: Path) -> None:
    m = MetadataStateMachine()
    m.handle_commit([batch(0, mv(30), no_op_record(), OTHER, epoch=4)])
    path = write_state_snapshot(
        m.capture(), tmp_path, timestamp_ms=1000, last_contained_log_timestamp=999
    )
    assert path.name == "00000000000000000003-0000000004.checkpoint"
    loaded = MetadataStateMachine()
    summary = load_state_snapshot(path, loaded)
    assert summary.records == 2
    assert loaded.features() == {"metadata.version": 30}
    assert loaded.other_records == (OTHER,)
    assert (loaded.applied_offset, loaded.applied_epoch) == (Offset(3), Epoch(4))


def test_decode_feature_level_record_refuses_other_records() -> None:
    assert decode_feature_level_record(mv(30)) == ("metadata.version", 30)
    with pytest.raises(MetadataRecordError, match="not a FeatureLevelRecord"):
        decode_feature_level_record(no_op_record())
    with pytest.raises(MetadataRecordError, match="truncated"):
        decode_feature_level_record(mv(30)[:-3])


def test_the_node_configuration_selects_the_state_machine() -> None:
    base = {
        "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "metadata.log.dir": "/tmp/x",
    }
    assert load_config(None, base).state_machine is StateMachineKind.KV
    chosen = load_config(None, {**base, "kraft.state.machine": "metadata"})
    assert chosen.state_machine is StateMachineKind.METADATA
    with pytest.raises(ConfigError, match=r"kraft\.state\.machine: expected one of kv, metadata"):
        load_config(None, {**base, "kraft.state.machine": "sql"})
    assert isinstance(new_state_machine(StateMachineKind.KV, Offset(5)), KeyValueStore)
    machine = new_state_machine(StateMachineKind.METADATA, Offset(5))
    assert isinstance(machine, MetadataStateMachine)
    assert machine.applied_offset == Offset(5)
