"""Decode segment and checkpoint files batch by batch, like Kafka's dump-log tool.

Every batch is reported with its CRC validity; a damaged batch does not stop the dump of the
batches before it, and the first undecodable position is reported with the reason. A
checkpoint file is named as Kafka's tool names it (its snapshot id, or the bootstrap
snapshot) and must also pass kraft.storage.snapshot_files' checks.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kraft.control_records import decode_control_record
from kraft.records import (
    BATCH_HEADER_SIZE,
    CorruptRecordError,
    Record,
    decode_records,
    parse_batch_header,
    verify_crc,
)
from kraft.storage.snapshot_files import (
    CorruptSnapshotError,
    SnapshotFileKind,
    check_snapshot,
    parse_snapshot_path,
)

# Kafka's binary bootstrap file (BootstrapDirectory.BINARY_BOOTSTRAP_FILENAME).
BOOTSTRAP_FILE = "bootstrap.checkpoint"


@dataclass(frozen=True, slots=True)
class DumpProblem:
    position: int
    reason: str


def _describe_record(record: Record, is_control: bool) -> str:
    key = -1 if record.key is None else len(record.key)
    value = -1 if record.value is None else len(record.value)
    line = (
        f"| offset: {record.offset} CreateTime: {record.timestamp} keySize: {key} "
        f"valueSize: {value} headerKeys: [{','.join(k for k, _ in record.headers)}]"
    )
    if is_control:
        try:
            line += f" {decode_control_record(record)}"
        except CorruptRecordError as exc:
            line += f" <undecodable control record: {exc}>"
    elif record.value is not None:
        line += f" payload: {record.value[:64]!r}"
    return line


def dump_lines(data: bytes, *, print_records: bool) -> Iterator[str | DumpProblem]:
    """Yield one line per batch (and per record if asked); a DumpProblem ends the dump."""
    pos = 0
    while pos < len(data):
        if len(data) - pos < BATCH_HEADER_SIZE:
            yield DumpProblem(pos, f"{len(data) - pos} trailing bytes, shorter than a header")
            return
        try:
            header = parse_batch_header(data, pos)
        except CorruptRecordError as exc:
            yield DumpProblem(pos, str(exc))
            return
        try:
            verify_crc(data, pos, header)
            valid = True
        except CorruptRecordError:
            valid = False
        yield (
            f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
            f"count: {header.records_count} baseSequence: {header.base_sequence} "
            f"producerId: {header.producer_id} producerEpoch: {header.producer_epoch} "
            f"partitionLeaderEpoch: {header.partition_leader_epoch} "
            f"isTransactional: {str(header.is_transactional).lower()} "
            f"isControl: {str(header.is_control).lower()} position: {pos} "
            f"CreateTime: {header.max_timestamp} size: {header.size_in_bytes} "
            f"magic: {header.magic} compresscodec: none crc: {header.crc} "
            f"isvalid: {str(valid).lower()}"
        )
        if print_records and valid:
            try:
                for record in decode_records(data, pos, header):
                    yield _describe_record(record, header.is_control)
            except CorruptRecordError as exc:
                yield DumpProblem(pos, f"records of the batch at {pos}: {exc}")
                return
        pos += header.size_in_bytes


def dump_file(path: Path, *, print_records: bool) -> tuple[list[str], DumpProblem | None]:
    data = path.read_bytes()
    lines = [f"Dumping {path}"]
    snapshot = parse_snapshot_path(path)
    if path.suffix == ".log":
        lines.append(f"Log starting offset: {int(path.stem)}")
    elif path.name == BOOTSTRAP_FILE:
        lines.append("KRaft bootstrap snapshot")
    elif snapshot is not None and snapshot.kind is SnapshotFileKind.COMPLETE:
        end, epoch = snapshot.snapshot_id.offset, snapshot.snapshot_id.epoch
        lines.append(f"Snapshot end offset: {end}, epoch: {epoch}")
    problem: DumpProblem | None = None
    for item in dump_lines(data, print_records=print_records):
        if isinstance(item, DumpProblem):
            problem = item
        else:
            lines.append(item)
    if problem is None and snapshot is not None and snapshot.kind is SnapshotFileKind.COMPLETE:
        # Every batch decodes; the snapshot rules (header first, footer last, offsets from 0,
        # the snapshot's epoch) are checked too.
        try:
            check_snapshot(path)
        except CorruptSnapshotError as e:
            problem = DumpProblem(e.position, f"not a valid snapshot: {e.reason}")
    return lines, problem
