"""In-memory KIP-630 snapshots for the core's tests, the scenario tests and the simulator
(refinement.sim_snapshots): the `SnapshotSource` a leader serves chunks from, the follower's
side of the snapshot effects (`.part` buffers written by chunk, validated, installed,
discarded), and `perform_snapshot_effect`, which performs them with a MemoryLog.

The bytes are Kafka's snapshot layout (a control batch with SnapshotHeader first, the state's
records, a control batch with SnapshotFooter last, every batch in the snapshot's epoch with
offsets from 0), as kraft.storage.snapshot_files writes to disk, so that validation checks
what a real transfer must: size, every batch's CRC, header first and footer last.
"""

from __future__ import annotations

from collections.abc import Sequence

from kraft.control_records import (
    ControlRecord,
    ControlRecordType,
    KRaftVersionRecord,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    VotersRecord,
    control_record_type,
    encode_control_batch,
    encode_control_records,
)
from kraft.core.effects import (
    AdvanceLogStartOffset,
    DiscardSnapshotFetch,
    Effect,
    InstallSnapshot,
    WriteSnapshot,
    WriteSnapshotChunk,
)
from kraft.ids import OffsetAndEpoch
from kraft.records import CorruptRecordError, KeyValue, decode_batch, encode_records, iter_batches
from kraft.storage.memory_log import MemoryLog


def encode_snapshot(
    snapshot_id: OffsetAndEpoch, records: Sequence[KeyValue], voters: VotersRecord | None = None
) -> bytes:
    """A whole snapshot's bytes: header, the records (one batch), footer. With `voters` (a
    dynamic quorum), the first batch is SnapshotHeader, KRaftVersion 1 and that Voters record,
    as the node's CheckpointWriter writes it (KIP-853)."""
    epoch = snapshot_id.epoch
    if voters is None:
        out = [encode_control_batch(0, epoch, SnapshotHeaderRecord(0, 0), timestamp_ms=0)]
        n = 1
    else:
        header: list[ControlRecord] = [SnapshotHeaderRecord(0, 0), KRaftVersionRecord(0, 1), voters]
        out = [encode_control_records(0, epoch, header, timestamp_ms=0)]
        n = len(header)
    if records:
        out.append(encode_records(n, epoch, records, timestamp_ms=0))
    out.append(
        encode_control_batch(n + len(records), epoch, SnapshotFooterRecord(0), timestamp_ms=0)
    )
    return b"".join(out)


def snapshot_problem(snapshot_id: OffsetAndEpoch, data: bytes) -> str | None:
    """Why `data` is not a whole, intact snapshot with this id, or None."""
    kinds: list[ControlRecordType | None] = []
    end = 0
    try:
        for pos, h in iter_batches(data):
            if h.partition_leader_epoch != snapshot_id.epoch:
                return f"batch at byte {pos} in epoch {h.partition_leader_epoch}"
            if h.is_control:
                _, recs = decode_batch(data, pos)
                kinds.append(control_record_type(recs[0]) if recs else None)
            else:
                kinds.append(None)
            end = pos + h.size_in_bytes
    except CorruptRecordError as e:
        return f"corrupt: {e}"
    if end != len(data):
        return f"{len(data) - end} trailing bytes"
    if not kinds or kinds[0] is not ControlRecordType.SNAPSHOT_HEADER:
        return "no SnapshotHeader first"
    if len(kinds) < 2 or kinds[-1] is not ControlRecordType.SNAPSHOT_FOOTER:
        return "no SnapshotFooter last"
    return None


class MemorySnapshots:
    """One replica's snapshots: complete ones by id (served), and `.part` buffers."""

    def __init__(self) -> None:
        self.complete: dict[OffsetAndEpoch, bytes] = {}
        self.parts: dict[OffsetAndEpoch, bytearray] = {}

    # ---- SnapshotSource (the leader serves these)

    def size(self, snapshot_id: OffsetAndEpoch) -> int | None:
        data = self.complete.get(snapshot_id)
        return None if data is None else len(data)

    def read(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> memoryview:
        return memoryview(self.complete[snapshot_id])[position : position + max_bytes]

    # ---- the driver's side of the effects

    def put(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """WriteSnapshot performed: a complete snapshot."""
        self.complete[snapshot_id] = data

    def write_chunk(self, snapshot_id: OffsetAndEpoch, position: int, data: bytes) -> None:
        """WriteSnapshotChunk: position 0 starts a fresh `.part`."""
        if position == 0:
            self.parts[snapshot_id] = bytearray()
        part = self.parts[snapshot_id]
        if len(part) != position:
            raise ValueError(f"chunk at {position} of {snapshot_id}: the part holds {len(part)}")
        part += data

    def validate(self, snapshot_id: OffsetAndEpoch, size: int) -> str | None:
        """ValidateSnapshot: None if the `.part` is the whole snapshot, else why not."""
        part = self.parts.get(snapshot_id)
        if part is None:
            return "no such transfer"
        if len(part) != size:
            return f"{len(part)} bytes of {size}"
        return snapshot_problem(snapshot_id, bytes(part))

    def install(self, snapshot_id: OffsetAndEpoch) -> bytes:
        """InstallSnapshot: the `.part` becomes the snapshot; older snapshots go."""
        data = bytes(self.parts.pop(snapshot_id))
        self.complete = {k: v for k, v in self.complete.items() if k.offset > snapshot_id.offset}
        self.complete[snapshot_id] = data
        return data

    def discard(self, snapshot_id: OffsetAndEpoch) -> None:
        """DiscardSnapshotFetch."""
        self.parts.pop(snapshot_id, None)

    def delete_before(self, snapshot_id: OffsetAndEpoch) -> None:
        """AdvanceLogStartOffset: snapshots older than `snapshot_id` go."""
        self.complete = {k: v for k, v in self.complete.items() if k.offset >= snapshot_id.offset}


def perform_snapshot_effect(log: MemoryLog, snaps: MemorySnapshots, e: Effect) -> None:
    """A KIP-630 effect on a MemoryLog and its MemorySnapshots, performed as a driver does
    (the events answering some are the caller's to feed; WriteSnapshot writes a placeholder
    state, a caller with a state machine writes its own)."""
    if isinstance(e, WriteSnapshot):
        snaps.put(
            e.snapshot_id,
            encode_snapshot(e.snapshot_id, [(None, f"state@{e.snapshot_id.offset}".encode())]),
        )
    elif isinstance(e, AdvanceLogStartOffset):
        log.advance_start_offset(e.snapshot_id.offset)
        snaps.delete_before(e.snapshot_id)
    elif isinstance(e, WriteSnapshotChunk):
        snaps.write_chunk(e.snapshot_id, e.position, bytes(e.data))
    elif isinstance(e, InstallSnapshot):
        snaps.install(e.snapshot_id)
        log.truncate_fully_and_start_at(e.snapshot_id.offset)
    elif isinstance(e, DiscardSnapshotFetch):
        snaps.discard(e.snapshot_id)
