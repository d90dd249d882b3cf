"""The leader-epoch cache: which epoch started at which offset, and its checkpoint file.

Semantics follow Apache Kafka's LeaderEpochFileCache; the file format is Kafka's
`leader-epoch-checkpoint` text format: a version line ("0"), a count line, then one
"<epoch> <startOffset>" line per entry, each line ending in a newline.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kraft.errors import KraftError
from kraft.ids import Epoch, Offset, OffsetAndEpoch
from kraft.storage.durable import atomic_write

CHECKPOINT_VERSION = 0
# Kafka's UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET.
UNDEFINED_EPOCH = Epoch(-1)
UNDEFINED_EPOCH_OFFSET = Offset(-1)


class CheckpointFormatError(KraftError):
    """A checkpoint file does not follow Kafka's checkpoint text format."""


@dataclass(frozen=True, slots=True, order=True)
class EpochEntry:
    epoch: Epoch
    start_offset: Offset


class LeaderEpochCache:
    """Epochs in increasing order, each with the first offset written in it (both increase)."""

    __slots__ = ("_epochs", "_pairs", "_starts")

    def __init__(self, entries: Iterable[EpochEntry] = ()) -> None:
        self._epochs: list[int] = []
        self._starts: list[int] = []
        # pairs() is read after every simulated event; rebuilt only when an entry changes.
        self._pairs: tuple[tuple[Epoch, Offset], ...] | None = None
        for entry in entries:
            self.assign(entry.epoch, entry.start_offset)

    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(
            EpochEntry(Epoch(e), Offset(s)) for e, s in zip(self._epochs, self._starts, strict=True)
        )

    def pairs(self) -> tuple[tuple[Epoch, Offset], ...]:
        """The entries as (epoch, start offset) tuples, memoized until the next change."""
        if self._pairs is None:
            self._pairs = tuple(
                (Epoch(e), Offset(s)) for e, s in zip(self._epochs, self._starts, strict=True)
            )
        return self._pairs

    def __len__(self) -> int:
        return len(self._epochs)

    @property
    def latest_epoch(self) -> Epoch | None:
        return Epoch(self._epochs[-1]) if self._epochs else None

    def assign(self, epoch: Epoch, start_offset: Offset) -> bool:
        """Record that `epoch` starts at `start_offset`; returns whether the cache changed.

        As in Kafka, a new entry first removes any trailing entry that would break monotonicity
        (an epoch >= the new one or a start offset >= the new one).
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid epoch entry ({epoch}, {start_offset})")
        if self._epochs and self._epochs[-1] == epoch and start_offset >= self._starts[-1]:
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        self._pairs = None
        return True

    def truncate_from_end(self, end_offset: Offset) -> bool:
        """Remove every entry whose start offset is >= end_offset."""
        keep = bisect_left(self._starts, end_offset)
        if keep == len(self._starts):
            return False
        del self._epochs[keep:]
        del self._starts[keep:]
        self._pairs = None
        return True

    def truncate_from_start(self, start_offset: Offset) -> bool:
        """Drop entries wholly before start_offset; the last such entry is kept, moved to it.

        Kafka's truncateFromStart: the epoch in force at start_offset keeps an entry starting there.
        """
        removed = bisect_right(self._starts, start_offset)
        if removed == 0:
            return False
        kept_epoch = self._epochs[removed - 1]
        del self._epochs[:removed]
        del self._starts[:removed]
        self._epochs.insert(0, kept_epoch)
        self._starts.insert(0, start_offset)
        self._pairs = None
        return True

    def clear(self) -> bool:
        changed = bool(self._epochs)
        self._epochs.clear()
        self._starts.clear()
        self._pairs = None
        return changed

    def end_offset_for(self, requested: Epoch, log_end_offset: Offset) -> OffsetAndEpoch:
        """Kafka's LeaderEpochFileCache.endOffsetFor.

        The result is the largest cached epoch <= `requested` and the start offset of the first
        cached epoch > `requested` (the log end offset if `requested` is the latest epoch).
        A request below every cached epoch answers (requested, start of the first epoch): that data
        was already removed, the follower replicates again from there. An undefined request or one
        above every cached epoch answers (-1, -1).
        """
        if requested == UNDEFINED_EPOCH or not self._epochs:
            return OffsetAndEpoch(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if requested == self._epochs[-1]:
            return OffsetAndEpoch(requested, log_end_offset)
        higher = bisect_right(self._epochs, requested)
        if higher == len(self._epochs):
            return OffsetAndEpoch(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if higher == 0:
            return OffsetAndEpoch(requested, Offset(self._starts[0]))
        return OffsetAndEpoch(Epoch(self._epochs[higher - 1]), Offset(self._starts[higher]))


def encode_checkpoint(entries: Iterable[EpochEntry]) -> bytes:
    items = list(entries)
    lines = [str(CHECKPOINT_VERSION), str(len(items))]
    lines.extend(f"{e.epoch} {e.start_offset}" for e in items)
    return ("\n".join(lines) + "\n").encode("ascii")


def decode_checkpoint(data: bytes) -> tuple[EpochEntry, ...]:
    try:
        lines = data.decode("ascii").splitlines()
    except UnicodeDecodeError as exc:
        raise CheckpointFormatError("checkpoint is not ASCII text") from exc
    if len(lines) < 2 or lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CheckpointFormatError(f"unsupported checkpoint header {lines[:1]!r}")
    try:
        count = int(lines[1])
    except ValueError as exc:
        raise CheckpointFormatError(f"bad entry count {lines[1]!r}") from exc
    body = [line for line in lines[2:] if line.strip()]
    if count != len(body):
        raise CheckpointFormatError(f"expected {count} entries, found {len(body)}")
    entries: list[EpochEntry] = []
    for line in body:
        parts = line.split()
        if len(parts) != 2:
            raise CheckpointFormatError(f"malformed entry {line!r}")
        try:
            entries.append(EpochEntry(Epoch(int(parts[0])), Offset(int(parts[1]))))
        except ValueError as exc:
            raise CheckpointFormatError(f"malformed entry {line!r}") from exc
    return tuple(entries)


def write_checkpoint_file(path: Path, entries: Iterable[EpochEntry]) -> None:
    atomic_write(path, encode_checkpoint(entries))


def read_checkpoint_file(path: Path) -> tuple[EpochEntry, ...] | None:
    """The entries of the checkpoint at `path`, or None if there is none."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return decode_checkpoint(data)
