"""The log's metadata as the replica sees it: epochs by offset, start and end offsets, the
latest snapshot id and the voter-set history. Holds no record bytes.

One object, `LogMetadata`, changed only by `append`, `truncate`, `add_snapshot`,
`advance_start` and `install_snapshot`, which the replica calls together with the effects it
emits (AppendToLog, TruncateLog, AdvanceLogStartOffset, InstallSnapshot), so a step sees its
own changes. `LogState` is what a driver tells the replica about its log (and its snapshots,
KIP-630) at start.

The voter-set history maps the offset of the record that set a voter set to that set; the
static configuration's set sits at offset -1, before the log's first record. A driver states
what its storage holds in `LogState.voter_history` (KIP-853): the bootstrap checkpoint's
Voters record at -1 (it replaces the static set), the latest snapshot's at its end offset - 1,
and every Voters record of the log at its offset. Truncation rolls back every entry at or
after the truncation offset (KIP-856: a voter change takes effect when appended and is undone
when truncated).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

from kraft.core.producers import ProducerBatch
from kraft.core.voter_set import VoterSet
from kraft.ids import Epoch, Offset, OffsetAndEpoch

# Where the static voter set sits in the history: before any record.
STATIC_VOTERS_OFFSET = Offset(-1)


@dataclass(frozen=True, slots=True)
class LogState:
    """What the driver tells the replica about its log at start."""

    start_offset: Offset
    end_offset: Offset
    # (epoch, start offset) pairs in increasing order, like leader-epoch-checkpoint.
    epochs: tuple[tuple[Epoch, Offset], ...] = ()
    # The idempotent batches of the log, in log order (rebuilds the producer table).
    producer_batches: tuple[ProducerBatch, ...] = ()
    # The ids of the valid snapshots on disk (KIP-630), any order. None may end past
    # `end_offset`: a driver whose latest snapshot is newer than its log first makes the log
    # start and end at that snapshot's end offset (KIP-630). Those below `start_offset` are
    # ignored (they are deleted when the log start moves past them).
    snapshots: tuple[OffsetAndEpoch, ...] = ()
    # The voter sets the log and its snapshots state (KIP-853), as (offset of the Voters
    # record, the voters), offsets increasing; -1 (the bootstrap checkpoint's) replaces the
    # static set. Empty: the static voter set alone (kraft.version 0).
    voter_history: tuple[tuple[Offset, VoterSet], ...] = ()


class LogMetadata:
    __slots__ = (
        "_end",
        "_epochs",
        "_snapshots",
        "_start",
        "_starts",
        "_voter_offsets",
        "_voter_sets",
        "version",
    )

    def __init__(self, state: LogState, voters: VoterSet) -> None:
        if not 0 <= state.start_offset <= state.end_offset:
            raise ValueError(f"bad log offsets {state.start_offset}..{state.end_offset}")
        self._start = state.start_offset
        self._end = state.end_offset
        # The epoch cache: parallel lists of epochs and the offset each starts at.
        self._epochs: list[Epoch] = []
        self._starts: list[Offset] = []
        # The snapshots held, by end offset (KIP-630): never before the start, never past the end.
        self._snapshots: list[OffsetAndEpoch] = []
        for snap in sorted(state.snapshots, key=lambda x: x.offset):
            if snap.offset > state.end_offset:
                raise ValueError(f"snapshot {snap} ends past the log end {state.end_offset}")
            if snap.offset >= state.start_offset and snap not in self._snapshots:
                self._snapshots.append(snap)
        # The voter-set history: parallel lists, offsets increasing, never empty.
        self._voter_offsets: list[Offset] = [STATIC_VOTERS_OFFSET]
        self._voter_sets: list[VoterSet] = [voters]
        last = Offset(STATIC_VOTERS_OFFSET - 1)  # nothing stated yet: -1 may come first
        for offset, stated in state.voter_history:
            # Kafka's TreeMapLogHistory.addAt: none below -1, each after the one before.
            if not (last < offset and STATIC_VOTERS_OFFSET <= offset < state.end_offset):
                raise ValueError(f"voter set at {offset} out of order or past the log end")
            if offset == STATIC_VOTERS_OFFSET:
                self._voter_sets[0] = stated
            else:
                self._voter_offsets.append(offset)
                self._voter_sets.append(stated)
            last = offset
        # Bumped by every change, so that a reader can tell cheaply that nothing changed.
        self.version = 0
        for epoch, start in state.epochs:
            if start < state.end_offset:
                self._assign(epoch, start)

    # ------------------------------------------------------------------ offsets and epochs

    @property
    def start_offset(self) -> Offset:
        return self._start

    @property
    def end_offset(self) -> Offset:
        return self._end

    @property
    def last_epoch(self) -> Epoch:
        """The latest epoch of the epoch cache: the epoch of the last record, or, once the
        log start moved to its end, of the record before it (the epoch of the snapshot the
        log starts at); with an empty cache, the epoch of the snapshot the log starts at,
        else 0 (as Kafka's lastFetchedEpoch). So `end` is the latest of the snapshot and the
        log (KIP-630), for votes and for standing."""
        if self._epochs:
            return self._epochs[-1]
        snap = self.snapshot_at(self._end)
        return snap.epoch if snap is not None else Epoch(0)

    @property
    def end(self) -> OffsetAndEpoch:
        return OffsetAndEpoch(self.last_epoch, self._end)

    @property
    def latest_snapshot(self) -> OffsetAndEpoch | None:
        """The id of the latest snapshot held (its end offset and epoch), if any."""
        return self._snapshots[-1] if self._snapshots else None

    @property
    def earliest_snapshot(self) -> OffsetAndEpoch | None:
        """The id of the oldest snapshot held (Kafka's earliestSnapshotId), if any."""
        return self._snapshots[0] if self._snapshots else None

    @property
    def snapshots(self) -> tuple[OffsetAndEpoch, ...]:
        return tuple(self._snapshots)

    def snapshot_at(self, offset: Offset) -> OffsetAndEpoch | None:
        """The snapshot held that ends at `offset`, if any."""
        for snap in reversed(self._snapshots):
            if snap.offset == offset:
                return snap
            if snap.offset < offset:
                return None
        return None

    def epoch_entries(self) -> tuple[tuple[Epoch, Offset], ...]:
        return tuple(zip(self._epochs, self._starts, strict=True))

    def epoch_at(self, offset: Offset) -> Epoch | None:
        """The epoch of the record at `offset`; None if the log does not hold it."""
        if not self._start <= offset < self._end:
            return None
        i = bisect_right(self._starts, offset)
        return self._epochs[i - 1] if i > 0 else None

    def end_offset_for_epoch(self, epoch: Epoch) -> OffsetAndEpoch:
        """The largest epoch <= `epoch` in this log and the offset where it ends (Kafka's
        endOffsetForEpoch). With no such epoch, the log has nothing from `epoch` or earlier
        in common with anyone: answer (epoch, start offset), or the snapshot's id when the
        log starts at a snapshot (Kafka's KafkaMetadataLog)."""
        if self._epochs and epoch >= self._epochs[-1]:
            return OffsetAndEpoch(self._epochs[-1], self._end)
        i = bisect_right(self._epochs, epoch)
        if i == 0:
            snap = self.snapshot_at(self._start)
            if snap is not None:
                return snap
            return OffsetAndEpoch(epoch, self._start)
        return OffsetAndEpoch(self._epochs[i - 1], self._starts[i])

    # ------------------------------------------------------------------ voter-set history

    @property
    def voters_offset(self) -> Offset:
        """The offset of the record that set the latest voter set (-1: none of the log's)."""
        return self._voter_offsets[-1]

    @property
    def voters(self) -> VoterSet:
        """The latest voter set in the log (the static one until a record changes it)."""
        return self._voter_sets[-1]

    def voters_at(self, offset: Offset) -> VoterSet:
        """The voter set in force at `offset`: the last one set at or before it."""
        i = bisect_right(self._voter_offsets, offset)
        return self._voter_sets[max(i - 1, 0)]

    def voter_history(self) -> tuple[tuple[Offset, VoterSet], ...]:
        return tuple(zip(self._voter_offsets, self._voter_sets, strict=True))

    # ------------------------------------------------------------------ changes

    def _assign(self, epoch: Epoch, start: Offset) -> None:
        """Kafka's LeaderEpochFileCache.assign, for records appended at the end: an entry only
        for an epoch after the last one, and the entries starting at or after it go first
        (maybeTruncateNonMonotonicEntries). Every entry starts at or after the log start and
        before the end, but the one advance_start leaves at the start of a log it emptied;
        so entries go only when the new one starts at the log start, and then all of them."""
        if self._epochs and epoch <= self._epochs[-1]:
            if epoch < self._epochs[-1]:
                raise ValueError(f"epoch {epoch} after {self._epochs[-1]}")
            return
        if start == self._start:
            self._epochs, self._starts = [], []
        self._epochs.append(epoch)
        self._starts.append(start)

    def append(
        self,
        batches: Iterable[tuple[Epoch, Offset]],
        next_offset: Offset,
        voter_sets: Iterable[tuple[Offset, VoterSet]] = (),
    ) -> None:
        """Record appended batches given as (epoch, base offset), ending before next_offset,
        and the voter sets their records set, as (record offset, voter set)."""
        for epoch, base in batches:
            self._assign(epoch, base)
        for offset, voters in voter_sets:
            if not self._end <= offset < next_offset:
                raise ValueError(f"voter set at {offset} outside {self._end}..{next_offset}")
            self._voter_offsets.append(offset)
            self._voter_sets.append(voters)
        self._end = next_offset
        self.version += 1

    def truncate(self, offset: Offset) -> None:
        """Forget everything at or after `offset`: records, epochs and voter sets."""
        if offset >= self._end:
            return
        while self._starts and self._starts[-1] >= offset:
            self._starts.pop()
            self._epochs.pop()
        while len(self._voter_offsets) > 1 and self._voter_offsets[-1] >= offset:
            self._voter_offsets.pop()
            self._voter_sets.pop()
        self._end = max(offset, self._start)
        self.version += 1

    def add_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """A snapshot of this log was written (CreateSnapshot): the log is unchanged."""
        if not self._start <= snapshot_id.offset <= self._end:
            raise ValueError(f"snapshot {snapshot_id} outside the log {self._start}..{self._end}")
        if snapshot_id not in self._snapshots:
            self._snapshots.append(snapshot_id)
            self._snapshots.sort(key=lambda x: x.offset)
        self.version += 1

    def advance_start(self, offset: Offset) -> None:
        """AdvanceLogStartOffset: the log starts at `offset`, the end of a snapshot held;
        records and older snapshots before it are gone, the end is unchanged."""
        if self.snapshot_at(offset) is None or not self._start < offset <= self._end:
            raise ValueError(f"no snapshot to start the log {self._start}..{self._end} at {offset}")
        self._start = offset
        # Kafka's LeaderEpochFileCache.truncateFromStart: the entries starting at or before
        # `offset` go but the last of them, which now starts at `offset`; so the epoch in
        # force there stays in the cache even when the log is left empty (offset == end), and
        # is the last epoch (Kafka's lastFetchedEpoch reads the cache before the snapshot).
        # A restart drops that entry (Kafka's LogLoader truncates the cache from the log end;
        # `__init__` keeps only entries that start before the end).
        while len(self._starts) > 1 and self._starts[1] <= offset:
            del self._starts[0], self._epochs[0]
        if self._starts:
            self._starts[0] = max(self._starts[0], offset)
        self._snapshots = [x for x in self._snapshots if x.offset >= offset]
        self.version += 1

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, voters: VoterSet) -> None:
        """The log now starts at a snapshot (KIP-630): everything before its end offset is
        gone, the log is empty and starts and ends there, and the snapshot's voter set is
        the one in force from its end. Older snapshots are gone too."""
        end = snapshot_id.offset
        if end < self._start:
            raise ValueError(f"snapshot {snapshot_id} ends before the log start {self._start}")
        self._start = self._end = end
        self._epochs.clear()
        self._starts.clear()
        self._snapshots = [snapshot_id]
        self._voter_offsets = [Offset(end - 1)]
        self._voter_sets = [voters]
        self.version += 1
