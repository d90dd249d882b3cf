"""AdvanceLogStartOffset on disk, as the driver performs it (kraft.server.driver: the log
start moved durably, then the segments below it deleted, then the older checkpoint files),
interrupted by a crash before each of its file operations in turn. Every start-up after
such a crash finds a consistent directory: the log starts at the old or the new offset, at a
valid snapshot; no segment wholly below the start and no checkpoint ending below it is left
(start-up finishes the deletion); and loading the snapshot and replaying the log gives the
state the whole history gives."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kraft.app.kv import KeyValueStore
from kraft.app.port import LeaderAndEpoch
from kraft.ids import Epoch, Offset, OffsetAndEpoch
from kraft.records import encode_batch
from kraft.server.applier import Applier
from kraft.server.snapshot_store import FileSnapshots
from kraft.server.snapshots import recover_state
from kraft.storage.log_adapter import BatchReader
from kraft.storage.segment import LOG_SUFFIX
from kraft.storage.segmented_log import SegmentedLog
from kraft.storage.snapshot_directory import snapshot_files, write_state_snapshot
from kraft.storage.snapshot_files import SnapshotFileKind

SEGMENT_BYTES = 1024
BATCHES = 60


class CrashError(Exception):
    """The process dies here."""


def _build(data: Path) -> tuple[list[OffsetAndEpoch], dict[bytes, bytes]]:
    """A log of keyed records over several segments and snapshots at three offsets; the
    snapshots and the final state."""
    snaps = []
    with SegmentedLog.open(data, segment_bytes=SEGMENT_BYTES) as log_:
        for i in range(BATCHES):
            key = f"k{i % 7}".encode()
            log_.append_as_follower(
                encode_batch(
                    log_.end_offset, Epoch(1), [f"v{i}".encode() * 20], timestamp_ms=i, keys=[key]
                )
            )
            if i in (19, 34, 49):
                log_.flush()
                store = _replay(log_, KeyValueStore(), log_.end_offset)
                write_state_snapshot(
                    store, log_.dir, timestamp_ms=i, last_contained_log_timestamp=i
                )
                snaps.append(OffsetAndEpoch(Epoch(1), log_.end_offset))
        final = dict(_replay(log_, KeyValueStore(), log_.end_offset).items())
        assert log_.segment_count > 5
    return snaps, final


def _replay(log_: SegmentedLog, store: KeyValueStore, upto: Offset) -> KeyValueStore:
    applier = Applier(
        BatchReader(log_, verify=True), store, lambda: upto, lambda: LeaderAndEpoch(None, 0)
    )
    applier.catch_up()
    return store


def _advance(data: Path, target: OffsetAndEpoch) -> None:
    """The driver's AdvanceLogStartOffset, on the files."""
    with SegmentedLog.open(data, segment_bytes=SEGMENT_BYTES) as log_:
        log_.advance_start_offset(target.offset)
        FileSnapshots(log_.dir).delete_older_than(target)


def _crash_at(n: int, monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """Raise CrashError before the n-th file rename or delete (0-based); how many were done."""
    done = 0
    real_replace, real_unlink = os.replace, pathlib.Path.unlink

    def step() -> None:
        nonlocal done
        if done == n:
            raise CrashError
        done += 1

    def replace(*args: Any, **kwargs: Any) -> None:
        step()
        real_replace(*args, **kwargs)

    def unlink(self: Path, missing_ok: bool = False) -> None:
        step()
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(pathlib.Path, "unlink", unlink)
    return lambda: done


def _start_up(data: Path) -> Iterator[str]:
    """Start as the node does; yield every inconsistency found."""
    with SegmentedLog.open(data, segment_bytes=SEGMENT_BYTES) as log_:
        start = log_.start_offset
        store = KeyValueStore(start)
        loaded = recover_state(log_.dir, store, log_)
        if start > 0 and (loaded is None or loaded.snapshot_id.offset != start):
            yield f"the log starts at {start} but the snapshot loaded is {loaded}"
        bases = sorted(int(p.name[: -len(LOG_SUFFIX)]) for p in log_.dir.glob("*" + LOG_SUFFIX))
        if len(bases) > 1 and bases[1] <= start:
            yield f"segment {bases[0]} lies wholly below the log start {start}"
        for found in snapshot_files(log_.dir):
            if found.kind is not SnapshotFileKind.COMPLETE:
                yield f"leftover {found.path.name}"
            elif found.snapshot_id.offset < start:
                yield f"checkpoint {found.path.name} ends below the log start {start}"
        ids = FileSnapshots(log_.dir).ids()
        if start > 0 and not any(s.offset == start for s in ids):
            yield f"no valid snapshot at the log start {start}: {ids}"
        yield from _state(log_, store, data)


def _state(log_: SegmentedLog, store: KeyValueStore, data: Path) -> Iterator[str]:
    got = dict(_replay(log_, store, log_.end_offset).items())
    want = (data / "final").read_text()
    if repr(sorted(got.items())) != want:
        yield "the state after start-up differs from the whole history's"


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, list[OffsetAndEpoch]]:
    data = tmp_path / "n1"
    snaps, final = _build(data)
    (data / "final").write_text(repr(sorted(final.items())))
    return data, snaps


def test_a_crash_before_any_step_of_advancing_the_log_start_leaves_a_consistent_dir(
    built: tuple[Path, list[OffsetAndEpoch]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    data, snaps = built
    target = snaps[2]
    n = 0
    outcomes = []
    while True:
        copy = tmp_path / f"crash-{n}"
        os.system(f"cp -a {data} {copy}")
        with monkeypatch.context() as m:
            done = _crash_at(n, m)
            try:
                _advance(copy, target)
                crashed = False
            except CrashError:
                crashed = True
            steps = done()
        with SegmentedLog.open(copy, segment_bytes=SEGMENT_BYTES) as log_:
            start = log_.start_offset
        problems = list(_start_up(copy))
        assert problems == [], f"crash before file operation {n}: {problems}"
        outcomes.append((steps, start))
        if not crashed:
            break
        n += 1
    # The new start is durable first: a crash before the log-start checkpoint is renamed
    # keeps the old start, any later one the new; and each step was interrupted once.
    assert outcomes[0] == (0, 0)
    assert all(start == target.offset for _, start in outcomes[1:])
    assert len(outcomes) > 6  # the checkpoint, several segments, two snapshots (each 2 ops)
