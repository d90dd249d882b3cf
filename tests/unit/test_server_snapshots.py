"""The node's snapshot policy and start-up (kraft.server.snapshots) on a real log in a tmp
dir, without a node: a snapshot is never past the high watermark (the spec's
`SnapshotBeyondHwm` mutant), bytes and time trigger as Kafka's SnapshotGenerator does, the
catch-up runs in bounded chunks, never two snapshots at once, and start-up skips a snapshot
that disagrees with the log."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from kraft.app.kv import KeyValueStore
from kraft.app.port import LeaderAndEpoch
from kraft.core.events import CreateSnapshot, Event, SnapshotWritten
from kraft.ids import Epoch, Offset, OffsetAndEpoch
from kraft.records import encode_records
from kraft.server.applier import Applier
from kraft.server.snapshots import SnapshotPolicy, Snapshotter, recover_state
from kraft.storage.log_adapter import BatchReader
from kraft.storage.segmented_log import SegmentedLog
from kraft.storage.snapshot_directory import write_state_snapshot
from kraft.storage.snapshot_files import check_snapshot

E = Epoch(2)


def _log(tmp: Path, batches: int, *, pad: int = 0) -> SegmentedLog:
    log_ = SegmentedLog.open(tmp)
    for i in range(batches):
        end = log_.end_offset
        value = f"v{i}".encode() + b"." * pad
        data = encode_records(end, E, [(f"k{i}".encode(), value)], timestamp_ms=i)
        log_.append_leader_encoded(data, end, end, E)
    return log_


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def _snapshotter(
    log_: SegmentedLog,
    hwm: list[Offset],
    policy: SnapshotPolicy,
    clock: Clock,
    submitted: list[Event] | None = None,
) -> Snapshotter[KeyValueStore]:
    applier = Applier(
        BatchReader(log_), KeyValueStore(), lambda: hwm[0], lambda: LeaderAndEpoch(None, E)
    )
    written: list[Event] = [] if submitted is None else submitted

    def core(event: Event) -> None:
        """The core's answers, as it gives them for a committed offset: allowed."""
        written.append(event)
        if isinstance(event, CreateSnapshot):
            s.write_snapshot(OffsetAndEpoch(E, event.end_offset))

    s = Snapshotter(applier, log_, log_.dir, policy, clock, submit=core)
    return s


async def _settle(s: Snapshotter[KeyValueStore]) -> None:
    for _ in range(10_000):
        if not s.running:
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the snapshot never finished")


def test_never_past_the_high_watermark(tmp_path: Path) -> None:
    with _log(tmp_path, 10) as log_:
        hwm = [Offset(6)]
        s = _snapshotter(log_, hwm, SnapshotPolicy(1, 0), Clock())

        async def main() -> None:
            s.on_high_watermark(hwm[0])
            await _settle(s)

        asyncio.run(main())
        assert s.latest == OffsetAndEpoch(E, Offset(6))
        assert log_.end_offset == 10  # the log went further; the snapshot did not
        summary = check_snapshot(s.written[0])
        assert summary.records == 6


def test_bytes_trigger_counts_committed_batches_only(tmp_path: Path) -> None:
    with _log(tmp_path, 10) as log_:
        one_batch = log_.read(Offset(0), 1 << 20).data
        size = len(one_batch) // 10  # the batches are the same size
        hwm = [Offset(3)]
        s = _snapshotter(log_, hwm, SnapshotPolicy(4 * size, 0), Clock())

        async def main() -> None:
            s.on_high_watermark(hwm[0])
            assert s.bytes_since == 3 * size  # batches 0..2, not those above the HWM
            assert not s.running
            hwm[0] = Offset(4)
            s.on_high_watermark(hwm[0])
            assert s.running
            s.on_high_watermark(hwm[0])  # never two at once
            await _settle(s)

        asyncio.run(main())
        assert [p.name for p in s.written] == [f"{4:020d}-{E:010d}.checkpoint"]
        assert s.bytes_since == 0


def test_time_trigger_needs_new_commits_and_zero_disables(tmp_path: Path) -> None:
    with _log(tmp_path, 4) as log_:
        clock = Clock()
        hwm = [Offset(1)]
        s = _snapshotter(log_, hwm, SnapshotPolicy(1 << 30, 500), clock)
        off = _snapshotter(log_, hwm, SnapshotPolicy(1 << 30, 0), clock)

        async def main() -> None:
            s.on_high_watermark(hwm[0])
            off.on_high_watermark(hwm[0])
            assert s.due() is None  # not yet 500 ms
            clock.now += 500
            assert off.due() is None
            assert s.due() is not None
            hwm[0] = Offset(2)
            s.on_high_watermark(hwm[0])
            await _settle(s)
            clock.now += 10_000
            assert s.due() is None  # nothing committed since

        asyncio.run(main())
        assert s.latest == OffsetAndEpoch(E, Offset(2))


def test_catch_up_is_chunked(tmp_path: Path) -> None:
    """More than one chunk (4 reads of about 1 MiB) to apply: the catch-up yields to the
    loop between chunks (where the driver steps)."""
    with _log(tmp_path, 3000, pad=3000) as log_:
        hwm = [log_.end_offset]
        s = _snapshotter(log_, hwm, SnapshotPolicy(1, 0), Clock())
        seen: list[Offset] = []

        async def watcher() -> None:
            while s.running:
                seen.append(s._applier.machine.applied_offset)
                await asyncio.sleep(0)

        async def main() -> None:
            s.on_high_watermark(hwm[0])
            await asyncio.gather(watcher(), _settle(s))

        asyncio.run(main())
        assert s.latest == OffsetAndEpoch(E, Offset(3000))
        assert any(0 < o < 3000 for o in seen), seen[:5]


def test_recover_skips_a_snapshot_the_log_disagrees_with(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _log(tmp_path, 5) as log_:
        good = KeyValueStore()
        Applier(
            BatchReader(log_), good, lambda: Offset(3), lambda: LeaderAndEpoch(None, E)
        ).catch_up()
        write_state_snapshot(good, log_.dir, timestamp_ms=0, last_contained_log_timestamp=0)
        # A snapshot at offset 4 with an epoch the log does not have there.
        other = KeyValueStore()
        Applier(
            BatchReader(log_), other, lambda: Offset(4), lambda: LeaderAndEpoch(None, E)
        ).catch_up()
        other._epoch = Epoch(E + 1)
        write_state_snapshot(other, log_.dir, timestamp_ms=0, last_contained_log_timestamp=0)
        store = KeyValueStore()
        with caplog.at_level(logging.WARNING, logger="kraft.node"):
            loaded = recover_state(log_.dir, store, log_)
        assert loaded is not None
        assert loaded.snapshot_id == OffsetAndEpoch(E, Offset(3))
        assert store.items() == good.items()
        assert any("has epoch 2, not 3" in r.getMessage() for r in caplog.records)


def test_config_keys_and_defaults(tmp_path: Path) -> None:
    from kraft.server.config import ConfigError, load_config

    base = {"node.id": "1", "controller.quorum.voters": "1@localhost:9093"}
    base["metadata.log.dir"] = str(tmp_path)
    default = load_config(None, base)
    assert default.snapshot_max_new_record_bytes == 20 * 1024 * 1024  # Kafka's default
    assert default.snapshot_max_interval_ms == 3_600_000  # one hour
    set_ = load_config(
        None,
        {
            **base,
            "metadata.log.max.record.bytes.between.snapshots": "1",
            "metadata.log.max.snapshot.interval.ms": "0",
        },
    )
    assert (set_.snapshot_max_new_record_bytes, set_.snapshot_max_interval_ms) == (1, 0)
    # As Kafka's ConfigDef: bytes at least 1, interval at least 0.
    with pytest.raises(ConfigError):
        load_config(None, {**base, "metadata.log.max.record.bytes.between.snapshots": "0"})
    with pytest.raises(ConfigError):
        load_config(None, {**base, "metadata.log.max.snapshot.interval.ms": "-1"})


def test_a_high_watermark_past_the_log_end_counts_up_to_the_end(tmp_path: Path) -> None:
    with _log(tmp_path, 5) as log_:
        size = len(log_.read(Offset(0), 1 << 20).data)
        hwm = [Offset(100)]
        s = _snapshotter(log_, hwm, SnapshotPolicy(1 << 30, 0), Clock())
        s.on_high_watermark(hwm[0])  # no loop needed: nothing is due
        assert s.bytes_since == size
        assert not s.running


def test_writes_only_on_write_snapshot_then_reports_it_written(tmp_path: Path) -> None:
    """CreateSnapshot first; the file only after the core's WriteSnapshot; SnapshotWritten
    only once the file is there."""
    with _log(tmp_path, 4) as log_:
        hwm = [Offset(3)]
        events: list[Event] = []
        s = _snapshotter(log_, hwm, SnapshotPolicy(1, 0), Clock(), events)

        async def main() -> None:
            s.on_high_watermark(hwm[0])
            await _settle(s)

        asyncio.run(main())
        assert [type(e) for e in events] == [CreateSnapshot, SnapshotWritten]
        asked, written = events
        assert isinstance(asked, CreateSnapshot)
        assert isinstance(written, SnapshotWritten)
        assert asked.end_offset == 3
        assert written.snapshot_id == OffsetAndEpoch(E, Offset(3))
        assert check_snapshot(s.written[0]).snapshot_id == written.snapshot_id


def test_a_refused_snapshot_is_not_written(tmp_path: Path) -> None:
    with _log(tmp_path, 4) as log_:
        hwm = [Offset(3)]
        applier = Applier(
            BatchReader(log_), KeyValueStore(), lambda: hwm[0], lambda: LeaderAndEpoch(None, E)
        )
        asked: list[Event] = []
        s = Snapshotter(applier, log_, log_.dir, SnapshotPolicy(1, 0), Clock(), submit=asked.append)

        async def main() -> None:
            s.on_high_watermark(hwm[0])
            for _ in range(1000):
                if asked:
                    break
                await asyncio.sleep(0)
            assert s.running  # waiting for the core's answer: no second snapshot
            s.snapshot_refused(Offset(3), "past the high watermark")
            assert not s.running

        asyncio.run(main())
        assert [type(e) for e in asked] == [CreateSnapshot]
        assert s.written == []
        assert list(log_.dir.glob("*.checkpoint*")) == []


def test_an_installed_snapshot_becomes_the_state(tmp_path: Path) -> None:
    with _log(tmp_path, 6) as log_:
        source = KeyValueStore()
        Applier(
            BatchReader(log_), source, lambda: Offset(5), lambda: LeaderAndEpoch(None, E)
        ).catch_up()
        path = write_state_snapshot(
            source, log_.dir, timestamp_ms=0, last_contained_log_timestamp=0
        )
        s = _snapshotter(log_, [Offset(0)], SnapshotPolicy(1 << 30, 0), Clock())
        s.snapshot_installed(path)
        machine = s._applier.machine
        assert machine.applied_offset == 5
        assert machine.items() == source.items()
        assert s.latest == OffsetAndEpoch(E, Offset(5))


def test_a_log_start_past_the_applied_offset_loads_the_snapshot_instead_of_replaying(
    tmp_path: Path,
) -> None:
    """Before the log start moves past what the state machine applied, the machine loads the
    snapshot at the new start (the state at that offset): a replay of the log up to it would
    run on the event loop for as long as the log is long and stall the replica's fetches."""
    with _log(tmp_path, 6) as log_:
        source = KeyValueStore()
        Applier(
            BatchReader(log_), source, lambda: Offset(5), lambda: LeaderAndEpoch(None, E)
        ).catch_up()
        path = write_state_snapshot(
            source, log_.dir, timestamp_ms=0, last_contained_log_timestamp=0
        )
        s = _snapshotter(log_, [Offset(6)], SnapshotPolicy(1 << 30, 0), Clock())
        reads: list[Offset] = []
        inner = s._applier._source

        class Counting:
            def read(self, offset: Offset, max_bytes: int) -> memoryview:
                reads.append(offset)
                return inner.read(offset, max_bytes)

        s._applier._source = Counting()
        s.before_log_start(OffsetAndEpoch(E, Offset(5)), path)
        machine = s._applier.machine
        assert machine.applied_offset == 5
        assert machine.items() == source.items()
        assert reads == []  # nothing replayed from the log
        s.before_log_start(OffsetAndEpoch(E, Offset(5)), path)  # already there: nothing to do
        assert machine.applied_offset == 5
