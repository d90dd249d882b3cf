"""Batching client appends on the leader: coalescing and linger.

Coalescing: the plain appends the driver steps in one loop iteration are one core step and one
record batch (kraft.server.coalesce).

quorum.append.linger.ms as Kafka's controller.quorum.append.linger.ms: the leader gathers
the appends that arrive within the linger into one batch (kraft.core.appends) while the
node's loop goes on serving everything else (kraft.server.driver). Before, the driver slept
the whole loop for the linger after a client append: nothing was stepped meanwhile.

A real core replica (one voter, so it leads and commits alone) under the real driver and log;
the clock is the test's and stands still until the test moves it, so the linger (60 s) ends
only when the test says so."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from kraft.core.effects import Effect, Send
from kraft.core.events import ClientAppend, Event, Receive, Tick
from kraft.core.messages import FetchRequest, FetchResponse
from kraft.core.replica import Replica, ReplicaConfig
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, NodeId, Offset, ProducerId, ReplicaKey
from kraft.records import iter_batches
from kraft.server.driver import Driver
from kraft.storage.log_adapter import BatchReader, log_state_of
from kraft.storage.segmented_log import SegmentedLog

LINGER_MS = 60_000
CLUSTER = ClusterId("linger-cluster")
WAIT_S = 20.0  # a liveness bound: the linger is 60 s of a clock that does not move


class Outbound:
    """Records each released message and wakes the test."""

    def __init__(self) -> None:
        self.released: list[Send] = []
        self.changed = asyncio.Event()

    def prepare(self, send: Send) -> object:
        def release() -> None:
            self.released.append(send)
            self.changed.set()

        return release


async def _until(what: object, out: Outbound) -> None:
    async with asyncio.timeout(WAIT_S):
        while not what():  # type: ignore[operator]
            out.changed.clear()
            await out.changed.wait()


def _batches(log: SegmentedLog, start: Offset) -> list[tuple[int, int]]:
    data = log.read(start, 1 << 20).data
    return [(h.base_offset, h.next_offset) for _, h in iter_batches(data, verify=False)]


def _lone_leader(
    tmp_path: Path, now: list[int], out: Outbound, linger_ms: int
) -> tuple[Driver, Replica, SegmentedLog, list[object]]:
    """A lone voter leading under the real driver and log; the events it steps are listed."""
    log = SegmentedLog.open(tmp_path / "log")
    replica = Replica(
        ReplicaConfig(
            ReplicaKey(NodeId(1)),
            CLUSTER,
            (ReplicaKey(NodeId(1)),),
            QuorumTiming(append_linger_ms=linger_ms),
        ),
        election_state=None,
        log_state=log_state_of(log),
        reader=BatchReader(log),
        rng=random.Random(0),
        now_ms=now[0],
    )
    stepped: list[object] = []
    step = replica.step

    def recorded(event: Event) -> list[Effect]:
        stepped.append(event)
        return step(event)

    replica.step = recorded  # type: ignore[method-assign]
    driver = Driver(
        replica,
        log,
        tmp_path / "quorum-state",
        out,  # type: ignore[arg-type]
        lambda: now[0],
        voter_ids=(NodeId(1),),
    )
    driver.start()
    while replica.view().state is not ReplicaState.LEADER:  # a lone voter elects itself
        now[0] = replica.next_deadline_ms()
        driver.process_batch()
    return driver, replica, log, stepped


def test_the_plain_appends_of_one_loop_iteration_are_one_core_step_and_one_batch(
    tmp_path: Path,
) -> None:
    """Coalescing: an idempotent append between them is its own step and batch, and a
    refused (empty) one is refused alone; each client hears its own offsets."""

    async def run() -> None:
        now = [1_000]
        driver, _, log, stepped = _lone_leader(tmp_path, now, Outbound(), 0)
        end = log.end_offset
        stepped.clear()
        a = driver.client_append(((None, b"a"),), 1000)
        b = driver.client_append(((None, b"b"), (b"k", b"c")), 1000)
        empty = driver.client_append((), 1000)
        idem = driver.client_append(((None, b"i"),), 1000, producer=ProducerId(5), sequence=0)
        c = driver.client_append(((None, b"d"),), 1000)
        driver.process_batch()
        appends = [e for e in stepped if isinstance(e, ClientAppend)]
        assert [len(e.records) for e in appends] == [3, 0, 1, 1]
        outcomes = [f.result() for f in (a, b, empty, idem, c)]
        assert [(o.error, o.first_offset, o.last_offset) for o in outcomes] == [
            (ErrorCode.NONE, end, end),
            (ErrorCode.NONE, end + 1, end + 2),
            (ErrorCode.INVALID_REQUEST, None, None),
            (ErrorCode.NONE, end + 3, end + 3),
            (ErrorCode.NONE, end + 4, end + 4),
        ]
        assert _batches(log, end) == [(end, end + 3), (end + 3, end + 4), (end + 4, end + 5)]
        log.close()

    asyncio.run(run())


def test_appends_within_the_linger_are_one_batch_and_a_fetch_is_served_meanwhile(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        now = [1_000]
        out = Outbound()
        driver, replica, log, _ = _lone_leader(tmp_path, now, out, LINGER_MS)
        end = log.end_offset
        loop = asyncio.create_task(driver.run())

        first = driver.client_append(((None, b"a"),), timeout_ms=10 * LINGER_MS)
        await asyncio.sleep(0)
        # An observer's Fetch arrives during the linger: it is answered now.
        view = replica.view()
        driver.submit(
            Receive(
                now[0],
                NodeId(2),
                FetchRequest(
                    cluster_id=CLUSTER,
                    replica=ReplicaKey(NodeId(2)),
                    replica_epoch=view.epoch,
                    fetch_offset=end,
                    last_fetched_epoch=view.last_epoch,
                    log_start_offset=Offset(0),
                    max_bytes=1 << 20,
                    max_wait_ms=0,
                ),
                reply_to=7,
            )
        )
        await _until(lambda: any(isinstance(s.message, FetchResponse) for s in out.released), out)
        [answer] = [s.message for s in out.released if isinstance(s.message, FetchResponse)]
        assert answer.error is ErrorCode.NONE
        assert not first.done() and log.end_offset == end  # the append still lingers
        # Two more clients within the linger.
        second = driver.client_append(((None, b"b"), (None, b"c")), timeout_ms=10 * LINGER_MS)
        third = driver.client_append(((None, b"d"),), timeout_ms=10 * LINGER_MS)
        await asyncio.sleep(0.05)
        assert log.end_offset == end and not third.done()
        # The linger runs out: one batch holds all three appends, each answered its offsets.
        now[0] += LINGER_MS
        driver.submit(Tick(now[0]))
        async with asyncio.timeout(WAIT_S):
            outcomes = await asyncio.gather(first, second, third)
        assert [(o.error, o.first_offset, o.last_offset) for o in outcomes] == [
            (ErrorCode.NONE, end, end),
            (ErrorCode.NONE, end + 1, end + 2),
            (ErrorCode.NONE, end + 3, end + 3),
        ]
        assert _batches(log, end) == [(end, end + 4)]
        driver.stop()
        await loop
        log.close()

    asyncio.run(run())
