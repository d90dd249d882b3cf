"""Kafka's retention of the metadata log and snapshots, combined with KIP-630's rule:
`retention_target` (KafkaRaftLog.maybeClean's size and time rules, the latest snapshot always
kept), the core under LogStartPolicy.RETENTION (the log start moves no further than a
DeleteBeforeSnapshot asked, and no further than KIP-630 allows), the configuration keys with
Kafka's defaults, and `Retention.check` over a real partition directory."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from replica_harness import Harness, build_log, of
from test_snapshots_leader import SNAP, fetch, leader, snapshot

from kraft.app.kv import KeyValueStore
from kraft.app.port import CommittedBatch
from kraft.core.effects import AdvanceLogStartOffset, ElectionState
from kraft.core.events import DeleteBeforeSnapshot, Event, SnapshotWritten
from kraft.core.messages import FetchResponse
from kraft.core.snapshots import LogStartPolicy
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch
from kraft.records import encode_batch
from kraft.server.config import ConfigError, load_config
from kraft.server.retention import (
    Retention,
    RetentionLimits,
    SnapshotFile,
    retention_target,
)
from kraft.storage.segmented_log import SegmentedLog
from kraft.storage.snapshot_directory import write_state_snapshot

RETAIN = LogStartPolicy.RETENTION


def sid(offset: int, epoch: int = 1) -> OffsetAndEpoch:
    return OffsetAndEpoch(Epoch(epoch), Offset(offset))


# ---------------------------------------------------------------- the core: RETENTION


def test_the_log_start_stays_until_retention_asks() -> None:
    """Kafka keeps the log and older snapshots until retention says otherwise; KIP-630's rule
    alone (KIP_630, the simulator's) moves the log start as soon as every live replica has
    the snapshot."""
    eager = leader()
    assert of(eager.step(SnapshotWritten(eager.now, SNAP)), AdvanceLogStartOffset)
    h = leader(log_start_policy=RETAIN)  # type: ignore[arg-type]
    assert not of(h.step(SnapshotWritten(h.now, SNAP)), AdvanceLogStartOffset)
    assert not of(h.recv(2, fetch(2, 2, 6, 2)), AdvanceLogStartOffset)
    effects = h.step(DeleteBeforeSnapshot(h.now, SNAP))
    assert of(effects, AdvanceLogStartOffset) == [AdvanceLogStartOffset(SNAP)]
    assert h.view.log_start_offset == 5 and h.log.start_offset == 5


def test_retention_goes_no_further_than_the_snapshot_asked() -> None:
    h = leader(log_start_policy=RETAIN)  # type: ignore[arg-type]
    s3 = snapshot(h, 3)
    s5 = snapshot(h, 5)
    assert h.view.log_start_offset == 0
    assert of(h.step(DeleteBeforeSnapshot(h.now, s3)), AdvanceLogStartOffset) == [
        AdvanceLogStartOffset(s3)
    ]
    assert h.replica._log.snapshots == (s3, s5)
    # An older ask changes nothing; the next one moves on.
    assert not of(h.step(DeleteBeforeSnapshot(h.now, s3)), AdvanceLogStartOffset)
    assert of(h.step(DeleteBeforeSnapshot(h.now, s5)), AdvanceLogStartOffset) == [
        AdvanceLogStartOffset(s5)
    ]


def test_retention_waits_for_a_live_replica_that_needs_the_log() -> None:
    """KIP-630's rule bounds retention: the ask is remembered, and carried out once the live
    replica has replicated the snapshot's end offset."""
    h = leader(log_start_policy=RETAIN)  # type: ignore[arg-type]
    h.recv(3, fetch(3, 2, 2, 1))  # node 3 is live and at 2
    h.step(SnapshotWritten(h.now, SNAP))
    assert not of(h.step(DeleteBeforeSnapshot(h.now, SNAP)), AdvanceLogStartOffset)
    assert h.view.log_start_offset == 0
    effects = h.recv(3, fetch(3, 2, 5, 1))
    assert of(effects, AdvanceLogStartOffset) == [AdvanceLogStartOffset(SNAP)]


def test_retention_past_a_live_replica_once_the_lag_time_passed() -> None:
    h = leader(log_start_policy=RETAIN, start_offset_lag_time_max_ms=10_000)  # type: ignore[arg-type]
    h.recv(3, fetch(3, 2, 2, 1))
    h.step(SnapshotWritten(h.now, SNAP))
    h.now += 10_000
    assert not of(h.recv(3, fetch(3, 2, 2, 1)), AdvanceLogStartOffset)  # not asked yet
    effects = h.step(DeleteBeforeSnapshot(h.now, SNAP))
    assert of(effects, AdvanceLogStartOffset) == [AdvanceLogStartOffset(SNAP)]


def _follower(policy: LogStartPolicy) -> Harness:
    """Node 1 follows leader 2 in epoch 2 over offsets 0..1 of epoch 1 and holds a snapshot
    ending at 2."""
    return Harness(
        log=build_log([(1, 2)]),
        election=ElectionState(Epoch(2), leader_id=NodeId(2)),
        snapshot_ids=(sid(2),),
        log_start_policy=policy,
    )


def _answer(log_start: int) -> FetchResponse:
    return FetchResponse(ErrorCode.NONE, NodeId(2), Epoch(2), Offset(2), Offset(log_start))


def test_a_follower_moves_within_the_leaders_log_start_and_its_own_retention() -> None:
    eager = _follower(LogStartPolicy.KIP_630)
    assert of(eager.recv(2, _answer(2)), AdvanceLogStartOffset)
    h = _follower(RETAIN)
    # Asked, but the leader's log start is still 0: KIP-630 holds it back.
    assert not of(h.recv(2, _answer(0)), AdvanceLogStartOffset)
    assert not of(h.step(DeleteBeforeSnapshot(h.now, sid(2))), AdvanceLogStartOffset)
    # The leader moved: now it may.
    assert of(h.recv(2, _answer(2)), AdvanceLogStartOffset) == [AdvanceLogStartOffset(sid(2))]
    # Not asked: the leader's log start alone does not move a follower under RETENTION.
    h2 = _follower(RETAIN)
    assert not of(h2.recv(2, _answer(2)), AdvanceLogStartOffset)
    assert of(h2.step(DeleteBeforeSnapshot(h2.now, sid(2))), AdvanceLogStartOffset)


def test_kip_630_policy_ignores_a_retention_ask() -> None:
    h = leader()
    h.recv(3, fetch(3, 2, 2, 1))
    h.step(SnapshotWritten(h.now, SNAP))
    assert h.step(DeleteBeforeSnapshot(h.now, SNAP)) == []


# ---------------------------------------------------------------- the rule


class FakeLog:
    """Segments as (base offset, bytes)."""

    def __init__(self, segments: Sequence[tuple[int, int]], start: int = 0) -> None:
        self.segments = list(segments)
        self.start_offset = Offset(start)

    @property
    def size_in_bytes(self) -> int:
        return sum(n for _, n in self.segments)

    def size_from(self, offset: Offset) -> int:
        kept = [i for i, (b, _) in enumerate(self.segments) if b <= offset] or [0]
        return sum(n for _, n in self.segments[kept[-1] :])


def files(*specs: tuple[int, int, int | None]) -> list[SnapshotFile]:
    """(end offset, size, header timestamp)."""
    return [SnapshotFile(sid(o), n, lambda t=t: t) for o, n, t in specs]  # type: ignore[misc]


def test_size_rule_deletes_the_oldest_until_under_the_limit() -> None:
    log_ = FakeLog([(0, 100), (100, 100), (200, 100), (300, 50)])
    snaps = files((100, 10, 0), (200, 10, 0), (300, 10, 0))
    # 350 + 30 > 300: snapshot 100 goes and the log starts at 200, which deletes the two
    # segments below it: 150 + 20 <= 300.
    got = retention_target(snaps, log_, 0, RetentionLimits(300, -1))
    assert got is not None and got[0] == sid(200)
    assert "metadata.max.retention.bytes" in got[1]
    # 50: from 300 the log is 50 + 10 = 60, still over, but the latest snapshot stays.
    got = retention_target(snaps, log_, 0, RetentionLimits(50, -1))
    assert got is not None and got[0] == sid(300)
    # Whole segments only: starting at 150 keeps the segment at 100 (100 + 20 > 110).
    mid = files((50, 10, 0), (150, 10, 0), (180, 10, 0))
    got = retention_target(mid, FakeLog([(0, 100), (100, 100)]), 0, RetentionLimits(110, -1))
    assert got is not None and got[0] == sid(180)
    assert retention_target(snaps, log_, 0, RetentionLimits(1000, -1)) is None


def test_the_latest_snapshot_is_always_kept() -> None:
    log_ = FakeLog([(0, 1000)])
    assert retention_target(files((10, 500, 0)), log_, 10**9, RetentionLimits(0, 0)) is None
    got = retention_target(files((10, 5, 0), (20, 5, 0)), log_, 10**9, RetentionLimits(0, 0))
    assert got is not None and got[0] == sid(20)


def test_time_rule_deletes_snapshots_whose_records_are_too_old() -> None:
    log_ = FakeLog([(0, 10)])
    snaps = files((10, 1, 1_000), (20, 1, 2_000), (30, 1, 9_000), (40, 1, 9_500))
    got = retention_target(snaps, log_, 10_000, RetentionLimits(-1, 7_000))
    assert got is not None and got[0] == sid(30)
    assert "metadata.max.retention.ms" in got[1]
    # Kafka: older by more than the limit (now - timestamp > ms).
    got = retention_target(snaps, log_, 8_001, RetentionLimits(-1, 7_000))
    assert got is not None and got[0] == sid(20)
    # An unreadable header stops the time rule there.
    odd = files((10, 1, None), (20, 1, 0), (30, 1, 0))
    assert retention_target(odd, log_, 10_000, RetentionLimits(-1, 1)) is None


def test_negative_limits_are_off() -> None:
    log_ = FakeLog([(0, 10**9)])
    snaps = files((10, 10**9, 0), (20, 10**9, 0))
    assert retention_target(snaps, log_, 10**12, RetentionLimits(-1, -1)) is None


# ---------------------------------------------------------------- configuration


def _props(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:9091",
        "metadata.log.dir": str(tmp_path),
        **extra,
    }


def test_config_keys_and_kafkas_defaults(tmp_path: Path) -> None:
    c = load_config(None, _props(tmp_path))
    assert c.retention_max_bytes == 100 * 1024 * 1024  # MetadataLogConfig's defaults
    assert c.retention_ms == 7 * 24 * 3600 * 1000
    assert c.timing.start_offset_lag_time_max_ms == 7 * 24 * 3600 * 1000
    c = load_config(
        None,
        _props(
            tmp_path,
            **{
                "metadata.max.retention.bytes": "-1",
                "metadata.max.retention.ms": "60000",
                "metadata.start.offset.lag.time.max.ms": "5000",
            },
        ),
    )
    assert (c.retention_max_bytes, c.retention_ms) == (-1, 60000)
    assert c.timing.start_offset_lag_time_max_ms == 5000
    with pytest.raises(ConfigError, match=r"metadata\.max\.retention\.bytes"):
        load_config(None, _props(tmp_path, **{"metadata.max.retention.bytes": "lots"}))


# ---------------------------------------------------------------- Retention.check


def _write(log_: SegmentedLog, count: int) -> None:
    for _ in range(count):
        log_.append_as_follower(
            encode_batch(log_.end_offset, Epoch(1), [b"x" * 200], timestamp_ms=0)
        )
    log_.flush()


def _snapshot_at(directory: Path, offset: int, stamp: int) -> OffsetAndEpoch:
    store = KeyValueStore(Offset(offset - 1))
    batch = CommittedBatch(Offset(offset - 1), Offset(offset - 1), Epoch(1), ((b"k", b"v"),))
    store.handle_commit([replace(batch, append_timestamp_ms=stamp)])
    write_state_snapshot(store, directory, timestamp_ms=stamp, last_contained_log_timestamp=stamp)
    return sid(offset)


def test_check_asks_the_replica_once_per_new_target(tmp_path: Path) -> None:
    asked: list[Event] = []
    with SegmentedLog.open(tmp_path, segment_bytes=1024) as log_:
        _write(log_, 20)
        for o in (5, 10, 15):
            _snapshot_at(log_.dir, o, stamp=1_000)
        r = Retention(log_, log_.dir, RetentionLimits(2048, -1), lambda: 5_000, submit=asked.append)
        assert r.check() == sid(15)
        assert asked == [DeleteBeforeSnapshot(5_000, sid(15))]
        assert r.check() is None and len(asked) == 1  # the core remembers the ask
        off = Retention(log_, log_.dir, RetentionLimits(-1, -1), lambda: 0, submit=asked.append)
        assert off.check() is None and len(asked) == 1
        by_time = Retention(
            log_, log_.dir, RetentionLimits(-1, 3_000), lambda: 5_000, submit=asked.append
        )
        assert by_time.check() == sid(15)  # records of 1_000 are older than 3 s at 5_000
