"""The metadata state machine: what a kraft node runs in a quorum shared with Apache Kafka
controllers (`kraft.state.machine=metadata`, kraft.app.machines), where every committed data
record is a Kafka metadata record (kraft.metadata_records) that Kafka's controllers replay.

It keeps what a snapshot must carry for a Kafka controller to load it, and no more than it
understands:

- FeatureLevelRecord: the latest level of each feature (level 0 removes it, as Kafka's
  FeaturesDelta does), with the record's value as committed. Kafka's loader needs the
  metadata.version one before any other record.
- RegisterControllerRecord (v0): the latest of each controller id, as committed (a Kafka
  controller registers each time it starts; the newest replaces the older in Kafka's image).
- NoOpRecord: no state (Kafka's leaders write one now and then to show they are alive).
- Any other metadata record (ConfigRecord, ...): kept verbatim in commit order. This machine
  does not know which of them supersede which, so it never compacts them: replayed in order
  they rebuild what they built.
- A value that is not a framed metadata record, or a keyed record: StateMachineError (a Kafka
  controller replaying it would fail too).

A snapshot holds the features first (metadata.version, then the others by name), then the
controller registrations by id, then the other records in commit order, each as (null key,
value), as Kafka lays out its own. Loading a snapshot (Kafka's or ours) replays it into an
empty machine by the same rules.

`get(name)` answers a feature's level as decimal text (what KraftGet reads).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

from kraft.app.port import (
    CommittedBatch,
    LeaderAndEpoch,
    SnapshotReader,
    SnapshotWriter,
    StateMachineError,
)
from kraft.ids import Epoch, Offset
from kraft.metadata_records import (
    FEATURE_LEVEL_RECORD,
    METADATA_VERSION_FEATURE,
    NO_OP_RECORD,
    REGISTER_CONTROLLER_RECORD,
    MetadataRecordError,
    decode_feature_level_record,
    decode_metadata_header,
    decode_register_controller_id,
)
from kraft.records import KeyValue

__all__ = ["MetadataStateMachine"]

# Records per snapshot batch.
_SNAPSHOT_BATCH: Final = 1000
_START: Final = Offset(0)


class MetadataStateMachine:
    """The committed metadata of one replica (implements kraft.app.port.StateMachine)."""

    __slots__ = (
        "_applied",
        "_controllers",
        "_epoch",
        "_features",
        "_others",
        "last_append_timestamp_ms",
        "leader",
        "no_ops",
    )

    def __init__(self, start_offset: Offset = _START) -> None:
        # Feature name -> (level, the FeatureLevelRecord's value as committed).
        self._features: dict[str, tuple[int, bytes]] = {}
        # Controller id -> its latest RegisterControllerRecord's value.
        self._controllers: dict[int, bytes] = {}
        self._others: list[bytes] = []
        self._applied = start_offset
        self._epoch = Epoch(0)
        self.no_ops = 0
        self.leader: LeaderAndEpoch | None = None
        self.last_append_timestamp_ms = -1

    # ------------------------------------------------------------------ reads

    @property
    def applied_offset(self) -> Offset:
        return self._applied

    @property
    def applied_epoch(self) -> Epoch:
        return self._epoch

    def feature_level(self, name: str) -> int | None:
        got = self._features.get(name)
        return None if got is None else got[0]

    def features(self) -> dict[str, int]:
        return {name: level for name, (level, _) in sorted(self._features.items())}

    def controller_registrations(self) -> dict[int, bytes]:
        """Each registered controller's latest RegisterControllerRecord, by id."""
        return dict(sorted(self._controllers.items()))

    @property
    def other_records(self) -> tuple[bytes, ...]:
        """The records kept verbatim (of no type this machine interprets), in commit order."""
        return tuple(self._others)

    def get(self, key: bytes) -> bytes | None:
        """A feature's level as decimal text, None if the feature is not set."""
        level = self.feature_level(key.decode("utf-8", errors="replace"))
        return None if level is None else str(level).encode("ascii")

    # ------------------------------------------------------------------ the port

    def handle_commit(self, batches: Iterable[CommittedBatch]) -> None:
        for batch in batches:
            if batch.last_offset < self._applied:
                continue  # already applied (a redelivery)
            if batch.base_offset != self._applied:
                raise StateMachineError(
                    f"batch {batch.base_offset}..{batch.last_offset} does not follow the "
                    f"applied offset {self._applied}"
                )
            if not batch.control:
                for record in batch.records:
                    self._replay(record)
            self._applied = batch.next_offset
            self._epoch = batch.epoch
            self.last_append_timestamp_ms = batch.append_timestamp_ms

    def _replay(self, record: KeyValue) -> None:
        key, value = record
        if key is not None or value is None:
            raise StateMachineError(
                "not a metadata record: "
                + ("it has a key" if key is not None else "its value is null")
            )
        try:
            header = decode_metadata_header(value)
            api_key = header.api_key
            if api_key == NO_OP_RECORD:
                self.no_ops += 1
            elif api_key == FEATURE_LEVEL_RECORD:
                name, level = decode_feature_level_record(value)
                if level == 0:
                    self._features.pop(name, None)
                else:
                    self._features[name] = (level, value)
            elif api_key == REGISTER_CONTROLLER_RECORD and header.version == 0:
                self._controllers[decode_register_controller_id(value)] = value
            else:
                self._others.append(value)
        except MetadataRecordError as e:
            raise StateMachineError(f"not a metadata record: {e}") from None

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        self.leader = leader

    def capture(self) -> MetadataStateMachine:
        """A copy of the state now (kraft.app.port.CapturingStateMachine)."""
        copy = MetadataStateMachine(self._applied)
        copy._features = dict(self._features)
        copy._controllers = dict(self._controllers)
        copy._others = list(self._others)
        copy._epoch = self._epoch
        copy.no_ops = self.no_ops
        copy.leader = self.leader
        copy.last_append_timestamp_ms = self.last_append_timestamp_ms
        return copy

    def _snapshot_values(self) -> Iterator[bytes]:
        first = self._features.get(METADATA_VERSION_FEATURE)
        if first is not None:
            yield first[1]
        for name, (_, value) in sorted(self._features.items()):
            if name != METADATA_VERSION_FEATURE:
                yield value
        for _, value in sorted(self._controllers.items()):
            yield value
        yield from self._others

    def produce_snapshot(self, writer: SnapshotWriter) -> None:
        entries: list[KeyValue] = [(None, v) for v in self._snapshot_values()]
        for i in range(0, len(entries), _SNAPSHOT_BATCH):
            writer.append(entries[i : i + _SNAPSHOT_BATCH])

    def load_snapshot(self, reader: SnapshotReader) -> None:
        """Replace the state with the snapshot's: what was applied before is forgotten. The
        state is replaced only once the whole snapshot replayed."""
        fresh = MetadataStateMachine(reader.end_offset)
        for batch in reader.batches():
            for record in batch:
                fresh._replay(record)
        self._features = fresh._features
        self._controllers = fresh._controllers
        self._others = fresh._others
        self.no_ops = fresh.no_ops
        self._applied = reader.end_offset
        self._epoch = reader.last_epoch
