"""The node's checkpoint files as the core sees them (KIP-630): the `SnapshotSource` the leader
serves FetchSnapshot from, and the file work behind the snapshot effects the driver performs.
Nothing here holds a whole snapshot in memory.

- `FileSnapshots.ids` (start-up): the valid checkpoint files of the partition directory, for
  `LogState.snapshots`; `size` / `read` serve one by byte position: `read` is a view of the
  file mapped read-only (one mapping per checkpoint file, kept while the file is there), so a
  chunk is never copied on the leader: the listener writes the view between the frame's
  encoded prefix and suffix (kraft.protocol.rpc.fetch_snapshot.ResponseFrame). A checkpoint
  file never changes once renamed into place, and a mapping outlives the file's deletion, so a
  view handed out stays valid (the mappings of deleted files are dropped as soon as they are
  seen to be gone, so that their disk space is freed once the last view is).
- Fetching a snapshot from the leader: `write_chunk` writes each chunk as it arrives into
  `<id>-fetch.checkpoint.part` (position 0 starts a fresh file; start-up removes a leftover
  one); `validate` checks it whole (size, every batch's CRC, header first, footer last),
  reading one batch at a time, and fsyncs it; `validate_later` does that on a worker thread
  (the event loop goes on serving heartbeats and fetches) and reports only if the file is
  still the one it checked; `install` renames it into place and fsyncs the directory,
  `discard` deletes it.
- `delete_older_than`: the snapshots below a new log start (AdvanceLogStartOffset,
  InstallSnapshot), each removed as Kafka does (renamed `.deleted`, then deleted).
"""

from __future__ import annotations

import asyncio
import mmap
import os
from collections.abc import Callable
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
        # The read-only mapping of each checkpoint file served, with the file's inode.
        self._maps: dict[OffsetAndEpoch, tuple[int, mmap.mmap]] = {}
        # Bumped when a fetched `.part` file is started afresh or discarded: a validation
        # that reports after a bump was of a file that is gone.
        self._generation: dict[OffsetAndEpoch, int] = {}

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

    def read(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> memoryview:
        """At most `max_bytes` bytes from `position`: a view of the mapped file (no copy)."""
        mapped = self._mapping(snapshot_id)
        if mapped is None:
            return memoryview(b"")  # deleted meanwhile: the core answers from the size it saw
        end = min(len(mapped), position + max(0, max_bytes))
        return memoryview(mapped)[min(position, end) : end]

    def _mapping(self, snapshot_id: OffsetAndEpoch) -> mmap.mmap | None:
        try:
            path = checkpoint_path(self.directory, snapshot_id)
            inode = path.stat().st_ino
        except (OSError, ValueError):
            self._maps.pop(snapshot_id, None)
            return None
        cached = self._maps.get(snapshot_id)
        if cached is not None and cached[0] == inode:
            return cached[1]
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # an empty file cannot be mapped
            return None
        finally:
            os.close(fd)  # the mapping holds its own reference to the file
        # An older mapping is dropped, not closed: views of it may still be on their way out.
        self._maps[snapshot_id] = (inode, mapped)
        self._prune()
        return mapped

    def _prune(self) -> None:
        """Drop the mappings of files deleted by other means than `delete_older_than`: a
        mapping keeps a deleted file's blocks allocated until it goes."""
        for sid, (inode, _) in list(self._maps.items()):
            try:
                gone = checkpoint_path(self.directory, sid).stat().st_ino != inode
            except OSError:
                gone = True
            if gone:
                del self._maps[sid]

    # ---------------------------------------------------------------- fetching

    def part_path(self, snapshot_id: OffsetAndEpoch) -> Path:
        name = checkpoint_name(snapshot_id).removesuffix(CHECKPOINT_SUFFIX)
        return self.directory / f"{name}-fetch{PARTIAL_SUFFIX}"

    def write_chunk(
        self, snapshot_id: OffsetAndEpoch, position: int, data: bytes | memoryview
    ) -> None:
        """Write `data` at `position` of the `.part` file (position 0: a fresh file)."""
        if position == 0:
            self._bump(snapshot_id)
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

    def validate_later(
        self, snapshot_id: OffsetAndEpoch, size: int, done: Callable[[Validation], None]
    ) -> asyncio.Future[Validation] | None:
        """`validate` on a worker thread; `done` is called on the event loop with the outcome,
        unless the `.part` file was started afresh or discarded meanwhile (that transfer is
        over: nobody waits for its outcome). Without a running loop: at once (None).
        The future of the check is returned; `done` runs in a callback after it completes."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            done(self.validate(snapshot_id, size))
            return None
        generation = self._generation.get(snapshot_id, 0)
        future = loop.run_in_executor(None, self.validate, snapshot_id, size)

        def finished(f: asyncio.Future[Validation]) -> None:
            if self._generation.get(snapshot_id, 0) != generation:
                return
            exc = None if f.cancelled() else f.exception()
            if f.cancelled() or exc is not None:
                done(Validation(False, reason=f"validation failed: {exc!r}"))
            else:
                done(f.result())

        future.add_done_callback(finished)
        return future

    def _bump(self, snapshot_id: OffsetAndEpoch) -> None:
        self._generation[snapshot_id] = self._generation.get(snapshot_id, 0) + 1

    def install(self, snapshot_id: OffsetAndEpoch) -> Path:
        """Rename the validated `.part` file into place, durably; the checkpoint's path."""
        final = checkpoint_path(self.directory, snapshot_id)
        os.replace(self.part_path(snapshot_id), final)
        fsync_dir(self.directory)
        return final

    def discard(self, snapshot_id: OffsetAndEpoch) -> None:
        self._bump(snapshot_id)
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
                self._maps.pop(sid, None)
        return deleted
