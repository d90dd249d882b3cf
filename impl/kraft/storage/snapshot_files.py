"""KIP-630 snapshots on disk, as Apache Kafka stores them: the checkpoint files of the
partition directory, written and read as streams, and what joins them to the application port.

A snapshot of the log below end offset E, whose record at E - 1 has epoch P, is the file
`%020d-%010d.checkpoint` % (E, P) in the partition directory itself (`__cluster_metadata-0/`).
Its content is a sequence of v2 record batches, every one with partition leader epoch P and
offsets numbered from 0 within the file (not the log's offsets):

    control batch   SnapshotHeader (+ KRaftVersion, + Voters when kraft.version > 0)
    data batches    the state machine's records
    control batch   SnapshotFooter, alone, last

- `CheckpointWriter` streams a snapshot into `<name>-<random>.checkpoint.part` (Kafka's temporary
  name), then `freeze` fsyncs it, makes it read-only, renames it into place and fsyncs the
  directory. Nothing but the batch being built is held in memory.
- `CheckpointReader` streams one back, batch by batch, and checks every batch (CRC, offsets,
  epoch, records, header first, footer last, nothing after it); any problem is a
  `CorruptSnapshotError` naming the file and byte. Data batches are read as (key, value)
  lists in one pass (kraft.record_scan), no Record object made; `verify` runs the whole check
  keeping nothing (no key or value copied).
- `check_snapshot`: the whole check of one file. A directory's snapshots (listing, cleanup,
  deletion) and the state machine adapters are kraft.storage.snapshot_directory.
- `load_validated_snapshot`: a file validated whole just before (a fetched snapshot after
  ValidateSnapshot) handed to a state machine as a stream of batches, in one pass.
"""

from __future__ import annotations

import os
import re
import struct
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Final, cast

from kraft.app.port import StateMachine
from kraft.control_records import (
    ControlRecord,
    KRaftVersionRecord,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    VotersRecord,
    decode_control_record,
    encode_control_batch,
    encode_control_records,
)
from kraft.errors import KraftError
from kraft.ids import Epoch, Offset, OffsetAndEpoch
from kraft.record_scan import batch_key_values, check_records, encode_key_values
from kraft.records import (
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    CorruptRecordError,
    KeyValue,
    Record,
    decode_records,
    parse_batch_header,
    verify_crc,
)
from kraft.storage.durable import fsync_dir

__all__ = [
    "BOOTSTRAP_SNAPSHOT_ID",
    "CHECKPOINT_SUFFIX",
    "DELETED_SUFFIX",
    "KAFKA_MAX_BATCH_BYTES",
    "PARTIAL_SUFFIX",
    "CheckpointReader",
    "CheckpointWriter",
    "CorruptSnapshotError",
    "SnapshotError",
    "SnapshotFileKind",
    "SnapshotPath",
    "SnapshotSummary",
    "check_snapshot",
    "checkpoint_name",
    "checkpoint_path",
    "load_validated_snapshot",
    "parse_snapshot_path",
]

CHECKPOINT_SUFFIX: Final = ".checkpoint"
PARTIAL_SUFFIX: Final = ".checkpoint.part"
DELETED_SUFFIX: Final = ".checkpoint.deleted"
# The snapshot `kafka-storage format` writes before the log has any record.
BOOTSTRAP_SNAPSHOT_ID: Final = OffsetAndEpoch(Epoch(0), Offset(0))
# Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES: no batch of a snapshot may be larger.
KAFKA_MAX_BATCH_BYTES: Final = 8 * 1024 * 1024
# Our writer closes a data batch once its records reach this many bytes.
DEFAULT_BATCH_BYTES: Final = 512 * 1024
# What one record adds to a batch beyond its key and value, at most (varints, attributes).
_RECORD_OVERHEAD: Final = 24
_BASE_AND_LENGTH: Final = struct.Struct(">qi")
_INT32_MAX: Final = 2**31 - 1
_INT64_MAX: Final = 2**63 - 1
_COMPLETE = re.compile(r"(\d{20})-(\d{10})\.checkpoint")
_PARTIAL = re.compile(r"(\d{20})-(\d{10})(?:-.*)?\.checkpoint\.part")
_DELETED = re.compile(r"(\d{20})-(\d{10})\.checkpoint\.deleted")


class SnapshotError(KraftError):
    """A snapshot that cannot be written, or one asked for that is not there."""


class CorruptSnapshotError(SnapshotError):
    """A checkpoint file that fails validation: it is never loaded, served or counted."""

    def __init__(self, path: Path, position: int, reason: str) -> None:
        super().__init__(f"snapshot {path} at byte {position}: {reason}")
        self.path = path
        self.position = position
        self.reason = reason


# --------------------------------------------------------------------------- names


class SnapshotFileKind(Enum):
    COMPLETE = "complete"
    PARTIAL = "partial"  # a writer's or a download's temporary file
    DELETED = "deleted"  # marked for deletion


@dataclass(frozen=True, slots=True)
class SnapshotPath:
    path: Path
    snapshot_id: OffsetAndEpoch
    kind: SnapshotFileKind


def checkpoint_name(snapshot_id: OffsetAndEpoch) -> str:
    offset, epoch = snapshot_id.offset, snapshot_id.epoch
    if not 0 <= offset <= _INT64_MAX or not 0 <= epoch <= _INT32_MAX:
        raise ValueError(f"snapshot id {offset}-{epoch} out of range")
    return f"{offset:020d}-{epoch:010d}{CHECKPOINT_SUFFIX}"


def checkpoint_path(directory: Path, snapshot_id: OffsetAndEpoch) -> Path:
    return directory / checkpoint_name(snapshot_id)


def parse_snapshot_path(path: Path) -> SnapshotPath | None:
    """The snapshot a file name stands for, or None when it names no snapshot file."""
    for pattern, kind in (
        (_COMPLETE, SnapshotFileKind.COMPLETE),
        (_PARTIAL, SnapshotFileKind.PARTIAL),
        (_DELETED, SnapshotFileKind.DELETED),
    ):
        match = pattern.fullmatch(path.name)
        if match is not None:
            offset, epoch = int(match.group(1)), int(match.group(2))
            if offset > _INT64_MAX or epoch > _INT32_MAX:
                return None
            return SnapshotPath(path, OffsetAndEpoch(Epoch(epoch), Offset(offset)), kind)
    return None


# --------------------------------------------------------------------------- writing


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class CheckpointWriter:
    """Streams one snapshot into its `.part` file; `freeze` makes it the checkpoint file.

    Implements kraft.app.port.SnapshotWriter. Used as a context manager, a writer that is left
    without `freeze` (or by an exception) deletes its `.part` file."""

    def __init__(
        self,
        directory: Path,
        snapshot_id: OffsetAndEpoch,
        *,
        timestamp_ms: int,
        last_contained_log_timestamp: int,
        kraft_version: int = 0,
        voters: VotersRecord | None = None,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> None:
        name = checkpoint_name(snapshot_id)
        if kraft_version == 0 and voters is not None:
            raise ValueError("a Voters record needs kraft.version 1 or more")
        if not 0 < batch_bytes <= KAFKA_MAX_BATCH_BYTES:
            raise ValueError(f"batch size {batch_bytes} outside 1..{KAFKA_MAX_BATCH_BYTES}")
        directory.mkdir(parents=True, exist_ok=True)
        self.snapshot_id = snapshot_id
        self.directory = directory
        self.path = directory / name
        stem = name[: -len(CHECKPOINT_SUFFIX)]
        fd, tmp = tempfile.mkstemp(prefix=stem + "-", suffix=PARTIAL_SUFFIX, dir=directory)
        self.part_path = Path(tmp)
        self._fd: int | None = fd
        self._epoch = snapshot_id.epoch
        self._timestamp = timestamp_ms
        self._batch_bytes = batch_bytes
        self._next_offset = 0
        self._pending: list[KeyValue] = []
        self._pending_bytes = 0
        self._size = 0
        self.frozen = False
        try:
            self._write_header(last_contained_log_timestamp, kraft_version, voters)
        except BaseException:
            self.abort()
            raise

    def __enter__(self) -> CheckpointWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.frozen:
            self.abort()

    @property
    def size_bytes(self) -> int:
        """Bytes written to the file so far."""
        return self._size

    def _emit(self, batch: bytes) -> None:
        if self._fd is None:
            raise SnapshotError(f"snapshot {self.path} is closed")
        if len(batch) > KAFKA_MAX_BATCH_BYTES:
            raise SnapshotError(
                f"snapshot {self.path}: a batch of {len(batch)} bytes exceeds Kafka's "
                f"maximum of {KAFKA_MAX_BATCH_BYTES}"
            )
        _write_all(self._fd, batch)
        self._size += len(batch)

    def _write_header(
        self, last_timestamp: int, kraft_version: int, voters: VotersRecord | None
    ) -> None:
        records: list[ControlRecord] = [SnapshotHeaderRecord(0, last_timestamp)]
        if kraft_version > 0:
            records.append(KRaftVersionRecord(0, kraft_version))
            if voters is not None:
                records.append(voters)
        self._emit(encode_control_records(0, self._epoch, records, timestamp_ms=self._timestamp))
        self._next_offset = len(records)

    def append(self, records: Sequence[KeyValue]) -> None:
        """Add records; they go to disk in batches of about `batch_bytes`."""
        if self.frozen:
            raise SnapshotError(f"snapshot {self.path} is frozen: no more records")
        try:  # the common case: every key and value present, and all of them fit the batch
            present = cast("Sequence[tuple[bytes, bytes]]", records)
            size = len(records) * _RECORD_OVERHEAD + sum([len(k) + len(v) for k, v in present])
        except TypeError:
            size = self._batch_bytes + 1  # a null key or value: counted one by one below
        if self._pending_bytes + size <= self._batch_bytes:
            self._pending.extend(records)
            self._pending_bytes += size
            return
        for record in records:
            key, value = record
            size = _RECORD_OVERHEAD + (0 if key is None else len(key))
            size += 0 if value is None else len(value)
            if self._pending and self._pending_bytes + size > self._batch_bytes:
                self._flush()  # starts a new self._pending
            self._pending.append(record)
            self._pending_bytes += size

    def _flush(self) -> None:
        if not self._pending:
            return
        batch = encode_key_values(
            self._next_offset, self._epoch, self._pending, timestamp_ms=self._timestamp
        )
        self._emit(batch)
        self._next_offset += len(self._pending)
        self._pending = []
        self._pending_bytes = 0

    def freeze(self) -> Path:
        """Write the footer, make the file durable and give it its checkpoint name."""
        if self.frozen:
            raise SnapshotError(f"snapshot {self.path} is already frozen")
        self._flush()
        footer = SnapshotFooterRecord(0)
        self._emit(
            encode_control_batch(
                self._next_offset, self._epoch, footer, timestamp_ms=self._timestamp
            )
        )
        fd, self._fd = self._fd, None
        assert fd is not None
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(self.part_path, 0o444)  # Kafka makes a frozen snapshot read-only
        os.replace(self.part_path, self.path)
        fsync_dir(self.directory)
        self.frozen = True
        return self.path

    def abort(self) -> None:
        """Drop the snapshot being written (its `.part` file goes)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if not self.frozen:
            self.part_path.unlink(missing_ok=True)


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True, slots=True)
class SnapshotSummary:
    """What a whole, valid checkpoint file holds."""

    path: Path
    snapshot_id: OffsetAndEpoch
    header: SnapshotHeaderRecord
    kraft_version: int
    voters: VotersRecord | None
    data_batches: int
    records: int
    size_bytes: int


class CheckpointReader:
    """Reads one checkpoint file batch by batch (implements kraft.app.port.SnapshotReader).

    Opening reads and checks the header batch. `key_value_batches` / `batches` stream the data
    batches and check each, and the footer, as they come: a CorruptSnapshotError can arrive
    after some batches were yielded, so a caller that must not act on a bad snapshot calls
    `verify` first (as `load_state_snapshot` does). Each call of `key_value_batches` starts again
    after the header, and every read seeks to its own position, so scans may interleave."""

    def __init__(
        self,
        path: Path,
        snapshot_id: OffsetAndEpoch | None = None,
        *,
        max_batch_bytes: int = KAFKA_MAX_BATCH_BYTES,
    ) -> None:
        """`snapshot_id` is taken from the name of a checkpoint file; give it to read another
        file as that snapshot (a `.part` file downloaded by FetchSnapshot, before its rename)."""
        if snapshot_id is None:
            parsed = parse_snapshot_path(path)
            if parsed is None or parsed.kind is not SnapshotFileKind.COMPLETE:
                raise CorruptSnapshotError(path, 0, "the name is not <offset>-<epoch>.checkpoint")
            snapshot_id = parsed.snapshot_id
        self.path = path
        self.snapshot_id = snapshot_id
        self._max_batch = max_batch_bytes
        self._file: BinaryIO = open(path, "rb")  # noqa: SIM115 (closed by close())
        try:
            self._size = os.fstat(self._file.fileno()).st_size
            first = self._read_batch(0)
            if first is None:
                raise CorruptSnapshotError(path, 0, "empty file: no SnapshotHeader")
            header, data, self._data_start = first
            records = self._records(0, header, data)
            self.header, self.kraft_version, self.voters = self._check_header_batch(header, records)
            self._first_data_offset = header.next_offset
        except BaseException:
            self._file.close()
            raise

    def __enter__(self) -> CheckpointReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()

    @property
    def end_offset(self) -> Offset:
        return self.snapshot_id.offset

    @property
    def last_epoch(self) -> Epoch:
        return self.snapshot_id.epoch

    @property
    def size_bytes(self) -> int:
        return self._size

    def _corrupt(self, position: int, reason: str) -> CorruptSnapshotError:
        return CorruptSnapshotError(self.path, position, reason)

    def _read_batch(self, position: int) -> tuple[BatchHeader, bytes, int] | None:
        """The batch at `position` (checked: length, header, CRC, epoch; not its records),
        the position after it; None at the end of the file."""
        f = self._file
        f.seek(position)
        head = f.read(LOG_OVERHEAD)
        if not head:
            return None
        if len(head) < LOG_OVERHEAD:
            raise self._corrupt(position, f"truncated: {len(head)} bytes where a batch starts")
        _, length = _BASE_AND_LENGTH.unpack(head)
        if not MIN_BATCH_LENGTH <= length <= self._max_batch:
            raise self._corrupt(position, f"batch length {length} out of range")
        rest = f.read(length)
        if len(rest) < length:
            raise self._corrupt(
                position, f"truncated: the batch needs {length} bytes, {len(rest)} remain"
            )
        data = head + rest
        try:
            header = parse_batch_header(data, 0, max_batch_size=self._max_batch)
            verify_crc(data, 0, header)
        except CorruptRecordError as e:
            raise self._corrupt(position, str(e)) from None
        if header.partition_leader_epoch != self.snapshot_id.epoch:
            raise self._corrupt(
                position,
                f"batch epoch {header.partition_leader_epoch}, the snapshot's is "
                f"{self.snapshot_id.epoch}",
            )
        return header, data, position + LOG_OVERHEAD + length

    def _records(self, position: int, header: BatchHeader, data: bytes) -> list[Record]:
        try:
            return decode_records(data, 0, header)
        except CorruptRecordError as e:
            raise self._corrupt(position, str(e)) from None

    def _control(self, position: int, record: Record) -> ControlRecord:
        try:
            return decode_control_record(record)
        except CorruptRecordError as e:
            raise self._corrupt(position, str(e)) from None

    def _check_header_batch(
        self, header: BatchHeader, records: list[Record]
    ) -> tuple[SnapshotHeaderRecord, int, VotersRecord | None]:
        if header.base_offset != 0:
            raise self._corrupt(0, f"the first batch has base offset {header.base_offset}, not 0")
        if not header.is_control or not records:
            raise self._corrupt(0, "the first batch is not a control batch")
        first = self._control(0, records[0])
        if not isinstance(first, SnapshotHeaderRecord):
            raise self._corrupt(
                0, f"the first record is {type(first).__name__}, not SnapshotHeader"
            )
        kraft_version = 0
        voters: VotersRecord | None = None
        for record in records[1:]:
            control = self._control(0, record)
            if isinstance(control, KRaftVersionRecord) and kraft_version == 0:
                kraft_version = control.kraft_version
            elif isinstance(control, VotersRecord) and voters is None:
                voters = control
            else:
                raise self._corrupt(0, f"{type(control).__name__} in the header batch")
        return first, kraft_version, voters

    def key_value_batches(
        self, *, keep: bool = True
    ) -> Iterator[tuple[BatchHeader, list[KeyValue]]]:
        """The data batches as (key, value) lists, each batch checked whole (its records
        walked in one pass, kraft.record_scan); then the footer is checked (last, alone).
        With keep=False the records are checked and nothing is kept (the lists are empty)."""
        position = self._data_start
        expected = self._first_data_offset
        while True:
            read = self._read_batch(position)
            if read is None:
                raise self._corrupt(position, "no SnapshotFooter: the file ends without one")
            header, data, after = read
            if header.base_offset != expected:
                raise self._corrupt(
                    position, f"batch base offset {header.base_offset}, expected {expected}"
                )
            if header.is_control:
                self._check_footer(position, self._records(position, header, data), after)
                return
            records: list[KeyValue] = []
            try:
                if keep:
                    records = batch_key_values(data, 0, header)
                else:
                    check_records(data, 0, header)
            except CorruptRecordError as e:
                raise self._corrupt(position, str(e)) from None
            yield header, records
            expected = header.next_offset
            position = after

    def _check_footer(self, position: int, records: list[Record], after: int) -> None:
        kinds = [type(self._control(position, r)).__name__ for r in records]
        if kinds != ["SnapshotFooterRecord"]:
            raise self._corrupt(position, f"control batch of {kinds} where the footer belongs")
        if after != self._size:
            raise self._corrupt(after, f"{self._size - after} bytes after the SnapshotFooter")

    def batches(self) -> Iterator[tuple[KeyValue, ...]]:
        for _, records in self.key_value_batches():
            yield tuple(records)

    def verify(self) -> SnapshotSummary:
        """Check the whole file (every batch, the footer); keeps nothing of the records."""
        data_batches = records = 0
        for header, _ in self.key_value_batches(keep=False):
            data_batches += 1
            records += header.records_count
        return SnapshotSummary(
            self.path,
            self.snapshot_id,
            self.header,
            self.kraft_version,
            self.voters,
            data_batches,
            records,
            self._size,
        )


def check_snapshot(path: Path, snapshot_id: OffsetAndEpoch | None = None) -> SnapshotSummary:
    """The summary of a valid checkpoint file (read as `snapshot_id` if given);
    CorruptSnapshotError otherwise."""
    with CheckpointReader(path, snapshot_id) as reader:
        return reader.verify()


class _CountingReader:
    """A CheckpointReader's batches as the port's SnapshotReader, counted as they go."""

    def __init__(self, reader: CheckpointReader) -> None:
        self._reader = reader
        self.batches_read = 0
        self.records = 0

    @property
    def end_offset(self) -> Offset:
        return self._reader.end_offset

    @property
    def last_epoch(self) -> Epoch:
        return self._reader.last_epoch

    def batches(self) -> Iterator[tuple[KeyValue, ...]]:
        for _, records in self._reader.key_value_batches():
            self.batches_read += 1
            self.records += len(records)
            yield tuple(records)


def load_validated_snapshot(path: Path, machine: StateMachine) -> SnapshotSummary:
    """Hand `machine` the checkpoint file as a stream of batches, reading it once: for a file
    validated whole just before (`check_snapshot`; a fetched snapshot after ValidateSnapshot),
    where a second reading before the load would only double the time the caller waits. Every
    batch is still checked as it is read, so a file damaged since raises CorruptSnapshotError
    during the load (the key-value store builds its new state aside and is left as it was)."""
    with CheckpointReader(path) as reader:
        counting = _CountingReader(reader)
        machine.load_snapshot(counting)
        return SnapshotSummary(
            path,
            reader.snapshot_id,
            reader.header,
            reader.kraft_version,
            reader.voters,
            counting.batches_read,
            counting.records,
            reader.size_bytes,
        )
