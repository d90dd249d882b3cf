"""The checkpoint files of one partition directory, and a state machine into and out of them.

- `list_snapshots` / `latest_snapshot`: the valid snapshots of a directory, newest first
  (ordered as snapshot ids are: epoch, then end offset); a file that fails validation is left
  out, never used.
- `remove_leftovers`: at start-up, delete the `.part` files of unfinished writes or downloads
  and the `.deleted` files of unfinished deletions (as Kafka's KafkaMetadataLog does).
- `delete_snapshot`: as Kafka removes one: rename to `.deleted` (durably), then delete.
- `write_state_snapshot` / `load_state_snapshot`: a `kraft.app.port.StateMachine` into and out
  of a checkpoint file; a snapshot is verified whole before any of it reaches the machine.

The file format itself is kraft.storage.snapshot_files.
"""

from __future__ import annotations

import os
from pathlib import Path

from kraft.app.port import StateMachine
from kraft.control_records import VotersRecord
from kraft.ids import OffsetAndEpoch
from kraft.storage.durable import fsync_dir
from kraft.storage.snapshot_files import (
    CHECKPOINT_SUFFIX,
    DELETED_SUFFIX,
    CheckpointReader,
    CheckpointWriter,
    CorruptSnapshotError,
    SnapshotFileKind,
    SnapshotPath,
    SnapshotSummary,
    check_snapshot,
    checkpoint_path,
    parse_snapshot_path,
)

__all__ = [
    "delete_snapshot",
    "latest_snapshot",
    "list_snapshots",
    "load_state_snapshot",
    "remove_leftovers",
    "snapshot_files",
    "write_state_snapshot",
]


def snapshot_files(directory: Path) -> list[SnapshotPath]:
    """Every snapshot file of `directory` (complete, partial, deleted), in id order."""
    if not directory.is_dir():
        return []
    found = [p for p in map(parse_snapshot_path, directory.iterdir()) if p is not None]
    return sorted(found, key=lambda p: (p.snapshot_id, p.kind.value, p.path.name))


# --------------------------------------------------------------------------- the directory


def list_snapshots(directory: Path) -> list[SnapshotSummary]:
    """The valid checkpoint files of `directory`, newest first (invalid ones are left out)."""
    out: list[SnapshotSummary] = []
    for found in reversed(snapshot_files(directory)):
        if found.kind is SnapshotFileKind.COMPLETE:
            try:
                out.append(check_snapshot(found.path))
            except (CorruptSnapshotError, OSError):
                continue
    return out


def latest_snapshot(directory: Path) -> SnapshotSummary | None:
    """The newest valid checkpoint file of `directory` (older ones are not read)."""
    for found in reversed(snapshot_files(directory)):
        if found.kind is SnapshotFileKind.COMPLETE:
            try:
                return check_snapshot(found.path)
            except (CorruptSnapshotError, OSError):
                continue
    return None


def remove_leftovers(directory: Path) -> list[Path]:
    """At start-up: delete the `.part` files of unfinished writes or downloads and the
    `.deleted` ones of unfinished deletions; the paths removed."""
    removed = []
    for found in snapshot_files(directory):
        if found.kind is not SnapshotFileKind.COMPLETE:
            found.path.unlink(missing_ok=True)
            removed.append(found.path)
    if removed:
        fsync_dir(directory)
    return removed


def delete_snapshot(directory: Path, snapshot_id: OffsetAndEpoch) -> bool:
    """Remove a checkpoint file as Kafka does: rename it to `.deleted` (durably), then delete
    it. A crash in between leaves a `.deleted` file that `remove_leftovers` finishes."""
    path = checkpoint_path(directory, snapshot_id)
    marked = path.with_name(path.name.removesuffix(CHECKPOINT_SUFFIX) + DELETED_SUFFIX)
    try:
        os.replace(path, marked)
    except FileNotFoundError:
        return False
    fsync_dir(directory)
    marked.unlink(missing_ok=True)
    return True


# --------------------------------------------------------------------------- the port


def write_state_snapshot(
    machine: StateMachine,
    directory: Path,
    *,
    timestamp_ms: int,
    last_contained_log_timestamp: int,
    kraft_version: int = 0,
    voters: VotersRecord | None = None,
) -> Path:
    """The machine's state at its applied offset as the checkpoint file
    `<applied offset>-<applied epoch>.checkpoint` of `directory`; its path."""
    snapshot_id = OffsetAndEpoch(machine.applied_epoch, machine.applied_offset)
    with CheckpointWriter(
        directory,
        snapshot_id,
        timestamp_ms=timestamp_ms,
        last_contained_log_timestamp=last_contained_log_timestamp,
        kraft_version=kraft_version,
        voters=voters,
    ) as writer:
        machine.produce_snapshot(writer)
        return writer.freeze()


def load_state_snapshot(path: Path, machine: StateMachine) -> SnapshotSummary:
    """Replace the machine's state with the checkpoint file's, after the whole file passed
    validation (a CorruptSnapshotError leaves the machine as it was)."""
    with CheckpointReader(path) as reader:
        summary = reader.verify()
        machine.load_snapshot(reader)
    return summary
