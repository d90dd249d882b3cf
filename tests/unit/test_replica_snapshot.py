"""A Fetch answer naming a snapshot (the leader's log starts after one; a real Kafka leader
sends this). Snapshot fetching (KIP-630) is not implemented yet: the follower must keep the
leader as alive, append nothing, say once per snapshot id why it cannot progress, and fetch
again only after a long backoff (it used to refetch about 1,700 times a second)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from replica_harness import CLUSTER, Harness, build_log, key, of, sent

from kraft.core.effects import (
    AppendToLog,
    Effect,
    ElectionState,
    HighWatermarkMoved,
    SnapshotRequired,
    TruncateLog,
)
from kraft.core.events import Event, Tick
from kraft.core.messages import FetchRequest, FetchResponse, VoteRequest, VoteResponse
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch

S = ReplicaState
SNAP = OffsetAndEpoch(Epoch(2), Offset(100))


def follower(**cfg: int) -> Harness:
    return Harness(
        log=build_log([(1, 2)]),
        election=ElectionState(Epoch(2), leader_id=NodeId(2)),
        **cfg,
    )


def snapshot_answer(snapshot: OffsetAndEpoch = SNAP, hwm: int = 150) -> FetchResponse:
    return FetchResponse(
        ErrorCode.NONE, NodeId(2), Epoch(2), Offset(hwm), Offset(100), snapshot_id=snapshot
    )


def test_snapshot_answer_appends_nothing_and_reports_once() -> None:
    h = follower(retry_backoff_ms=20, fetch_timeout_ms=2000)
    effects = h.recv(2, snapshot_answer())
    assert of(effects, SnapshotRequired) == [SnapshotRequired(NodeId(2), SNAP)]
    assert not of(effects, AppendToLog) and not of(effects, TruncateLog)
    assert not of(effects, HighWatermarkMoved)  # our records may not be the leader's
    assert h.view.high_watermark is None and h.view.end_offset == 2
    assert h.view.state is S.FOLLOWER
    # No Fetch at once: the next one after min(50 x retry backoff, fetch timeout / 2).
    assert not sent(effects, FetchRequest)
    assert h.replica.next_deadline_ms() == h.now + 1000
    h.now += 1000
    effects = h.step(Tick(h.now))
    [(dst, req)] = sent(effects, FetchRequest)
    assert dst == 2 and req.fetch_offset == 2
    # The same snapshot again: no second report.
    effects = h.recv(2, snapshot_answer())
    assert not of(effects, SnapshotRequired)
    # A newer snapshot: reported.
    newer = OffsetAndEpoch(Epoch(2), Offset(200))
    assert of(h.recv(2, snapshot_answer(newer)), SnapshotRequired) == [
        SnapshotRequired(NodeId(2), newer)
    ]


def test_the_backoff_is_capped_by_half_the_fetch_timeout() -> None:
    h = follower(retry_backoff_ms=100, fetch_timeout_ms=3000)
    h.recv(2, snapshot_answer())
    assert h.replica.next_deadline_ms() == h.now + 1500


def test_a_leader_that_answers_with_a_snapshot_is_alive() -> None:
    """The answer resets the fetch timer: the follower does not stand for election while the
    leader keeps answering, however long that lasts."""
    h = follower(retry_backoff_ms=20, fetch_timeout_ms=2000)
    for _ in range(30):
        h.now = h.replica.next_deadline_ms()
        effects = h.step(Tick(h.now))
        assert h.view.state is S.FOLLOWER, h.now
        if sent(effects, FetchRequest):
            h.recv(2, snapshot_answer())
    assert h.now >= 20_000
    # Having heard from its leader, it no longer vouches for pre-votes.
    pre = VoteRequest(CLUSTER, key(3), Epoch(2), Epoch(1), Offset(2), pre_vote=True)
    [(_, resp)] = sent(h.recv(3, pre), VoteResponse)
    assert not resp.vote_granted


class _OneEffect:
    """A replica that reports SnapshotRequired on its first step."""

    def __init__(self) -> None:
        self.effects: list[Effect] = [SnapshotRequired(NodeId(2), SNAP)]

    def start(self) -> list[Effect]:
        return []

    def step(self, event: Event) -> list[Effect]:
        out, self.effects = self.effects, []
        return out

    def next_deadline_ms(self) -> int:
        return 1 << 60

    def view(self) -> object:
        return None


def test_the_node_driver_warns_why_it_cannot_progress(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from kraft.server.driver import Driver
    from kraft.storage.segmented_log import SegmentedLog

    async def run() -> None:
        log = SegmentedLog.open(tmp_path)
        clock = iter(range(1000, 10**9, 10))
        driver = Driver(
            _OneEffect(),  # type: ignore[arg-type]
            log,
            tmp_path / "quorum-state",
            None,  # type: ignore[arg-type]
            lambda: next(clock),
            voter_ids=(NodeId(1), NodeId(2), NodeId(3)),
        )
        driver.start()
        with caplog.at_level(logging.WARNING, logger="kraft.node"):
            driver.submit(Tick(0))
            driver.process_batch()
        log.close()

    asyncio.run(run())
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    text = record.getMessage()
    assert "snapshot 100-2" in text and "leader 2" in text
    assert "cannot" in text and "KIP-630" in text
