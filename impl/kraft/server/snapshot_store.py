"""The node's checkpoint files as the core sees them (KIP-630): the `SnapshotSource` the leader
serves FetchSnapshot from, and the file work behind the snapshot effects the driver performs.

- `FileSnapshots.ids` (start-up): the valid checkpoint files of the partition directory, for
  `LogState.snapshots`; `size` / `read` serve one by byte position (os.pread: the core copies
  a chunk into its message anyway, kraft.core.snapshots).
- Fetching a snapshot from the leader: `write_chunk` writes into `<id>-fetch.checkpoint.part`
  (position 0 starts a fresh file; start-up removes a leftover one), `validate` checks it whole
  (size, every batch's CRC, header first, footer last) and fsyncs it, `install` renames it
  into place and fsyncs the directory, `discard` deletes it.
- `delete_older_than`: the snapshots below a new log start (AdvanceLogStartOffset,
  InstallSnapshot), each removed as Kafka does (renamed `.deleted`, then deleted).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kraft.control_records import VotersRecord
from kraft.ids import DirectoryId, NodeId, OffsetAndEpoch, ReplicaKey
from kraft.storage.durable import fsync_dir
from kraft.storage.snapshot_directory import delete_snapshot, snapshot_files
from kraft.storage.snapshot_files import (
    CHECKPOINT_SUFFIX,
    PARTIAL_SUFFIX,
    CorruptSnapshotError,
    SnapshotFileKind,
    check_snapshot,
    checkpoint_name,
    checkpoint_path,
)

__all__ = ["FileSnapshots", "Validation"]


@dataclass(frozen=True, slots=True)
class Validation:
    """The outcome of `FileSnapshots.validate` (the event SnapshotValidated's fields)."""

    valid: bool
    voters: tuple[ReplicaKey, ...] | None = None
    reason: str = ""
    # The snapshot's Voters record (its voters with their endpoints), if it holds one.
    record: VotersRecord | None = None


class FileSnapshots:
    """The checkpoint files of one partition directory (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    # ---------------------------------------------------------------- serving

    def ids(self) -> tuple[OffsetAndEpoch, ...]:
        """The ids of the valid checkpoint files, oldest first (a damaged file is left out)."""
        out = []
        for found in snapshot_files(self.directory):
            if found.kind is SnapshotFileKind.COMPLETE and found.snapshot_id.offset > 0:
                try:
                    check_snapshot(found.path)
                except (CorruptSnapshotError, OSError):
                    continue
                out.append(found.snapshot_id)
        return tuple(out)

    def size(self, snapshot_id: OffsetAndEpoch) -> int | None:
        try:
            return checkpoint_path(self.directory, snapshot_id).stat().st_size
        except (OSError, ValueError):
            return None

    def read(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        try:
            fd = os.open(checkpoint_path(self.directory, snapshot_id), os.O_RDONLY)
        except (OSError, ValueError):
            return b""  # deleted meanwhile: the core answers from the size it saw
        try:
            return os.pread(fd, max(0, max_bytes), position)
        finally:
            os.close(fd)

    # ---------------------------------------------------------------- fetching

    def part_path(self, snapshot_id: OffsetAndEpoch) -> Path:
        name = checkpoint_name(snapshot_id).removesuffix(CHECKPOINT_SUFFIX)
        return self.directory / f"{name}-fetch{PARTIAL_SUFFIX}"

    def write_chunk(
        self, snapshot_id: OffsetAndEpoch, position: int, data: bytes | memoryview
    ) -> None:
        """Write `data` at `position` of the `.part` file (position 0: a fresh file)."""
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if position == 0 else 0)
        fd = os.open(self.part_path(snapshot_id), flags, 0o644)
        try:
            view = memoryview(data)
            at = position
            while view:
                n = os.pwrite(fd, view, at)
                view = view[n:]
                at += n
        finally:
            os.close(fd)

    def validate(self, snapshot_id: OffsetAndEpoch, size: int) -> Validation:
        """Check the `.part` file whole (exactly `size` bytes, every batch) and fsync it."""
        path = self.part_path(snapshot_id)
        try:
            actual = path.stat().st_size
            if actual != size:
                return Validation(False, reason=f"{actual} bytes, expected {size}")
            summary = check_snapshot(path, snapshot_id)
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except (CorruptSnapshotError, OSError) as e:
            return Validation(False, reason=str(e))
        voters = None
        if summary.voters is not None:
            voters = tuple(
                ReplicaKey(NodeId(v.voter_id), DirectoryId(v.voter_directory_id))
                for v in summary.voters.voters
            )
        return Validation(True, voters, record=summary.voters)

    def install(self, snapshot_id: OffsetAndEpoch) -> Path:
        """Rename the validated `.part` file into place, durably; the checkpoint's path."""
        final = checkpoint_path(self.directory, snapshot_id)
        os.replace(self.part_path(snapshot_id), final)
        fsync_dir(self.directory)
        return final

    def discard(self, snapshot_id: OffsetAndEpoch) -> None:
        self.part_path(snapshot_id).unlink(missing_ok=True)

    # ---------------------------------------------------------------- retention

    def delete_older_than(self, snapshot_id: OffsetAndEpoch) -> list[OffsetAndEpoch]:
        """Delete every complete checkpoint file that ends below `snapshot_id`; their ids."""
        deleted = []
        for found in snapshot_files(self.directory):
            sid = found.snapshot_id
            if (
                found.kind is SnapshotFileKind.COMPLETE
                and sid.offset < snapshot_id.offset
                and delete_snapshot(self.directory, sid)
            ):
                deleted.append(sid)
        return deleted
