"""LogMetadata: epochs by offset, start/end offsets, the voter-set history and snapshot install,
changed only by append, truncate and install_snapshot."""

from __future__ import annotations

import pytest

from kraft.core.log_metadata import STATIC_VOTERS_OFFSET, LogMetadata, LogState
from kraft.core.voter_set import VoterSet
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey

E, Off = Epoch, Offset


def voters(*ids: int) -> VoterSet:
    return VoterSet(tuple(ReplicaKey(NodeId(i)) for i in ids))


STATIC = voters(1, 2, 3)


def meta(end: int = 0, epochs: tuple[tuple[int, int], ...] = ()) -> LogMetadata:
    state = LogState(Off(0), Off(end), tuple((E(e), Off(s)) for e, s in epochs))
    return LogMetadata(state, STATIC)


def three_epochs() -> LogMetadata:
    """Epoch 1 at 0..4, epoch 3 at 5..9, epoch 4 at 10..11 (end 12)."""
    m = meta()
    m.append([(E(1), Off(0)), (E(1), Off(3))], Off(5))
    m.append([(E(3), Off(5))], Off(10))
    m.append([(E(4), Off(10))], Off(12))
    return m


def test_epoch_at_names_the_epoch_of_each_held_offset_and_none_outside() -> None:
    m = three_epochs()
    assert [m.epoch_at(Off(i)) for i in range(12)] == [1] * 5 + [3] * 5 + [4] * 2
    assert m.epoch_at(Off(12)) is None
    assert m.epoch_at(Off(-1)) is None


def test_end_offset_for_epoch_is_the_start_of_the_next_larger_epoch() -> None:
    m = three_epochs()
    assert m.end_offset_for_epoch(E(1)) == OffsetAndEpoch(E(1), Off(5))
    # Epoch 2 is not in the log: the largest epoch below it, ending where epoch 3 starts.
    assert m.end_offset_for_epoch(E(2)) == OffsetAndEpoch(E(1), Off(5))
    assert m.end_offset_for_epoch(E(3)) == OffsetAndEpoch(E(3), Off(10))
    assert m.end_offset_for_epoch(E(4)) == OffsetAndEpoch(E(4), Off(12))
    assert m.end_offset_for_epoch(E(9)) == OffsetAndEpoch(E(4), Off(12))
    # Nothing at or below epoch 0: only the log start is shared.
    assert m.end_offset_for_epoch(E(0)) == OffsetAndEpoch(E(0), Off(0))


def test_truncation_rolls_back_epochs_and_end() -> None:
    m = three_epochs()
    v = m.version
    m.truncate(Off(7))
    assert m.end_offset == 7
    assert m.last_epoch == 3
    assert m.epoch_entries() == ((E(1), Off(0)), (E(3), Off(5)))
    assert m.epoch_at(Off(10)) is None
    assert m.version > v
    m.truncate(Off(5))
    assert m.epoch_entries() == ((E(1), Off(0)),)
    assert m.end_offset_for_epoch(E(3)) == OffsetAndEpoch(E(1), Off(5))


def test_truncating_at_or_past_the_end_changes_nothing() -> None:
    m = three_epochs()
    v = m.version
    m.truncate(Off(12))
    assert (m.end_offset, m.version) == (12, v)


def test_epochs_never_decrease_along_the_log() -> None:
    m = three_epochs()
    with pytest.raises(ValueError, match="epoch 2 after 4"):
        m.append([(E(2), Off(12))], Off(13))


def test_the_static_voter_set_sits_before_the_first_record() -> None:
    m = meta()
    assert m.voter_history() == ((STATIC_VOTERS_OFFSET, STATIC),)
    assert m.voters == STATIC
    assert m.voters_at(Off(0)) == STATIC


def test_voter_sets_take_effect_at_their_record_and_roll_back_on_truncation() -> None:
    m = meta()
    m.append([(E(1), Off(0))], Off(4))
    m.append([(E(1), Off(4))], Off(6), voter_sets=[(Off(5), voters(1, 2, 3, 4))])
    m.append([(E(2), Off(6))], Off(9), voter_sets=[(Off(8), voters(1, 2, 4))])
    assert m.voters == voters(1, 2, 4)
    assert m.voters_at(Off(4)) == STATIC
    assert m.voters_at(Off(5)) == voters(1, 2, 3, 4)
    assert m.voters_at(Off(7)) == voters(1, 2, 3, 4)
    assert m.voters_at(Off(8)) == voters(1, 2, 4)
    m.truncate(Off(8))  # the record that removed voter 3 is gone
    assert m.voters == voters(1, 2, 3, 4)
    m.truncate(Off(5))
    assert m.voters == STATIC
    m.truncate(Off(0))  # the static set is never rolled back
    assert m.voter_history() == ((STATIC_VOTERS_OFFSET, STATIC),)


def test_a_voter_set_must_lie_within_the_appended_records() -> None:
    m = meta()
    with pytest.raises(ValueError, match="outside"):
        m.append([(E(1), Off(0))], Off(3), voter_sets=[(Off(3), voters(1))])


def test_install_snapshot_empties_the_log_at_the_snapshot_end() -> None:
    m = three_epochs()
    assert m.latest_snapshot is None
    v = m.version
    snap = OffsetAndEpoch(E(5), Off(20))
    m.install_snapshot(snap, voters(1, 2))
    assert (m.start_offset, m.end_offset) == (20, 20)
    assert m.latest_snapshot == snap
    assert m.epoch_entries() == ()
    assert m.last_epoch == 5  # an empty log's last epoch is its snapshot's (Kafka)
    assert m.end == OffsetAndEpoch(E(5), Off(20))
    assert m.epoch_at(Off(19)) is None
    assert m.voters == voters(1, 2)
    assert m.version > v
    # Older epochs diverge at the snapshot: all the log holds from them ends there.
    assert m.end_offset_for_epoch(E(1)) == snap
    # Appends continue from the snapshot; truncation never goes below it.
    m.append([(E(6), Off(20))], Off(23))
    assert m.end_offset_for_epoch(E(5)) == snap
    m.truncate(Off(10))
    assert (m.start_offset, m.end_offset, m.last_epoch) == (20, 20, 5)
    assert m.voters == voters(1, 2)


def test_a_snapshot_behind_the_log_start_is_refused() -> None:
    m = meta()
    m.install_snapshot(OffsetAndEpoch(E(2), Off(10)), STATIC)
    with pytest.raises(ValueError, match="before the log start"):
        m.install_snapshot(OffsetAndEpoch(E(2), Off(5)), STATIC)


def test_bad_start_offsets_are_refused() -> None:
    with pytest.raises(ValueError, match="bad log offsets"):
        LogMetadata(LogState(Off(5), Off(3)), STATIC)


def test_a_written_snapshot_is_held_without_changing_the_log() -> None:
    m = three_epochs()
    snap = OffsetAndEpoch(E(3), Off(10))
    m.add_snapshot(snap)
    assert m.latest_snapshot == m.earliest_snapshot == snap
    assert (m.start_offset, m.end_offset, m.last_epoch) == (0, 12, 4)
    with pytest.raises(ValueError):
        m.add_snapshot(OffsetAndEpoch(E(4), Off(13)))  # past the end


def test_advancing_the_start_drops_records_epochs_and_older_snapshots() -> None:
    m = three_epochs()
    old, new = OffsetAndEpoch(E(1), Off(5)), OffsetAndEpoch(E(3), Off(7))
    m.add_snapshot(old)
    m.add_snapshot(new)
    m.advance_start(Off(7))
    assert (m.start_offset, m.end_offset) == (7, 12)
    assert m.snapshots == (new,)
    assert m.epoch_at(Off(6)) is None and m.epoch_at(Off(7)) == 3
    assert m.epoch_entries() == ((E(3), Off(7)), (E(4), Off(10)))
    # An epoch older than everything left: the snapshot at the start answers.
    assert m.end_offset_for_epoch(E(1)) == new
    with pytest.raises(ValueError):
        m.advance_start(Off(9))  # no snapshot there


def test_a_log_emptied_by_its_start_ends_at_its_snapshot() -> None:
    """KIP-630: the latest of the snapshot and the log is the replica's last position. The
    epoch in force at the new start keeps its entry there, as Kafka's truncateFromStart
    keeps it; a restart drops it (Kafka's LogLoader truncates the cache from the log end)."""
    m = three_epochs()
    snap = OffsetAndEpoch(E(4), Off(12))
    m.add_snapshot(snap)
    m.advance_start(Off(12))
    assert m.end == snap and m.epoch_entries() == ((E(4), Off(12)),)
    assert m.end_offset_for_epoch(E(3)) == snap and m.end_offset_for_epoch(E(5)) == snap
    state = LogState(Off(12), Off(12), m.epoch_entries(), snapshots=(snap,))
    again = LogMetadata(state, STATIC)
    assert again.end == snap and again.epoch_entries() == ()
    # A record of a newer epoch replaces that entry (Kafka's maybeTruncateNonMonotonicEntries
    # drops the entries starting at or after the new one).
    m.append([(E(6), Off(12))], Off(13))
    assert m.epoch_entries() == ((E(6), Off(12)),) and m.end_offset_for_epoch(E(5)) == snap


def test_the_driver_tells_its_snapshots_at_start() -> None:
    at_start, later = OffsetAndEpoch(E(2), Off(10)), OffsetAndEpoch(E(3), Off(15))
    state = LogState(Off(10), Off(20), ((E(3), Off(12)),), snapshots=(later, at_start))
    m = LogMetadata(state, STATIC)
    assert m.earliest_snapshot == at_start and m.latest_snapshot == later
    # The epoch at the start (before the first epoch entry) is the snapshot's.
    assert m.end_offset_for_epoch(E(2)) == at_start
    empty = LogMetadata(LogState(Off(10), Off(10), snapshots=(at_start,)), STATIC)
    assert empty.end == at_start
    with pytest.raises(ValueError):
        LogMetadata(LogState(Off(0), Off(5), snapshots=(at_start,)), STATIC)  # past the end
