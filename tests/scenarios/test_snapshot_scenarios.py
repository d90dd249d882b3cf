"""KIP-630 scenarios: a leader snapshots its committed log and moves its log start; a replica
that was cut off catches up from the snapshot, then from the log; a crash mid-transfer, and a
leader change mid-transfer, leave consistent replicas; so do a lost, duplicated or reordered
chunk, a crash right after any step of a transfer, and an observer that lost its disk."""

from __future__ import annotations

import random

import pytest
from memory_logs import entries
from scenario_harness import Cluster, committed, elect

from kraft.core.effects import Effect, InstallSnapshot, ValidateSnapshot, WriteSnapshotChunk
from kraft.core.events import CreateSnapshot, Event
from kraft.core.messages import FetchSnapshotRequest, FetchSnapshotResponse, Message, Request
from kraft.core.vocabulary import ReplicaState
from kraft.ids import Offset
from kraft.storage.memory_log import MemoryLog
from kraft.storage.memory_snapshots import MemorySnapshots

S = ReplicaState


def snapshot_and_trim(c: Cluster, lead: int) -> Offset:
    """The leader snapshots at its HWM; its log start moves there (the cut-off replica is not
    live: it has not fetched for a fetch timeout)."""
    hwm = c.view(lead).high_watermark
    assert hwm is not None
    c.step(lead, CreateSnapshot(c.now, hwm))
    c.run(c.now + 5)
    c.run_until(lambda: c.view(lead).log_start_offset == hwm)
    return hwm


def assert_consistent(c: Cluster, lead: int) -> None:
    """Every live replica's log agrees with the leader's wherever both hold records, and each
    replica's log starts at a snapshot it holds (or at 0)."""
    ref = dict(entries(c.nodes[lead].log))
    for n in c.nodes.values():
        if not n.alive:
            continue
        mine = entries(n.log)
        assert all(ref.get(o, e) == e for o, e in mine), (n.config.node.id, mine)
        start = n.log.start_offset
        assert n.snaps is not None
        assert start == 0 or any(s.offset == start for s in n.snaps.complete)


def cut_off_follower(c: Cluster, lead: int) -> int:
    lagging = next(i for i in c.nodes if i != lead)
    c.isolate(lagging)
    return lagging


def test_a_cut_off_follower_catches_up_from_the_snapshot_then_the_log() -> None:
    c = Cluster(3, seed=1, snapshots=True, fetch_max_bytes=64)
    lead = elect(c)
    lagging = cut_off_follower(c, lead)
    committed(c, lead, 12)
    c.run(c.now + 3000)  # past a fetch timeout: the cut-off replica is not live
    snap_end = snapshot_and_trim(c, lead)
    c.heal()
    c.run_until(lambda: c.nodes[lagging].log.start_offset == snap_end, limit=30_000)
    # Several chunks moved (the snapshot is larger than 64 bytes).
    chunks = [
        m for _, dst, m in c.delivered if dst == lagging and isinstance(m, FetchSnapshotResponse)
    ]
    assert len(chunks) > 1
    assert c.nodes[lagging].snaps is not None
    assert c.nodes[lead].snaps is not None
    [sid] = [s for s in c.nodes[lead].snaps.complete if s.offset == snap_end]
    assert c.nodes[lagging].snaps.complete[sid] == c.nodes[lead].snaps.complete[sid]
    # Then the log: new records reach it, and its HWM with them.
    lead = elect(c)
    end = committed(c, lead, 3)
    c.run_until(
        lambda: c.nodes[lagging].log.end_offset == end and c.view(lagging).high_watermark == end
    )
    assert_consistent(c, lead)


def test_a_crash_mid_transfer_leaves_a_consistent_replica() -> None:
    c = Cluster(3, seed=2, snapshots=True, fetch_max_bytes=32)
    lead = elect(c)
    lagging = cut_off_follower(c, lead)
    committed(c, lead, 10)
    c.run(c.now + 3000)
    snap_end = snapshot_and_trim(c, lead)
    c.heal()
    c.run_until(
        lambda: any(src == lagging and isinstance(m, FetchSnapshotRequest) and m.position > 0
                    for src, _, m in c.delivered)
    )  # fmt: skip
    before = (c.nodes[lagging].log.start_offset, c.nodes[lagging].log.end_offset)
    c.crash(lagging)
    assert before[0] == 0  # nothing installed yet
    c.run(c.now + 100)
    c.start(lagging)
    c.run_until(lambda: c.nodes[lagging].log.start_offset == snap_end, limit=30_000)
    lead = elect(c)
    end = committed(c, lead, 2)
    c.run_until(lambda: c.nodes[lagging].log.end_offset == end)
    assert_consistent(c, lead)


def test_a_leader_change_mid_transfer_leaves_consistent_replicas() -> None:
    c = Cluster(3, seed=3, snapshots=True, fetch_max_bytes=32)
    lead = elect(c)
    lagging = cut_off_follower(c, lead)
    committed(c, lead, 10)
    c.run(c.now + 3000)
    snapshot_and_trim(c, lead)
    c.heal()
    c.run_until(
        lambda: any(src == lagging and isinstance(m, FetchSnapshotRequest) and m.position > 0
                    for src, _, m in c.delivered)
    )  # fmt: skip
    c.crash(lead)  # the old leader dies mid-transfer
    new = elect(c)
    assert new != lead
    # The new leader has no snapshot: the lagging replica fetches the log from it instead.
    end = committed(c, new, 2)
    c.run_until(lambda: c.nodes[lagging].log.end_offset == end, limit=30_000)
    assert c.view(lagging).state is S.FOLLOWER
    assert_consistent(c, new)


def run_with_snapshots(seed: int) -> None:
    """Random partitions, crashes and restarts while every replica snapshots its committed
    log now and then: committed offsets never change epoch, a snapshot id always holds the same
    history (checked by the harness), every log starts at 0 or at a snapshot it holds, and the
    replica's view of its log is the log."""
    rnd = random.Random(seed)
    c = Cluster(
        3, rnd.choice([0, 1]), seed=seed, snapshots=True, fetch_max_bytes=rnd.choice([40, 200]),
        start_offset_lag_time_max_ms=rnd.choice([500, 10_000]),
    )  # fmt: skip
    committed: dict[int, int] = {}
    ids = list(c.nodes)
    k = 0
    for _ in range(150):
        c.run(c.now + rnd.randint(1, 200))
        r = rnd.random()
        if r < 0.06:
            a, b = rnd.sample(ids, 2)
            c.partition(a, b)
        elif r < 0.12:
            c.heal()
        elif r < 0.15:
            i = rnd.choice(ids)
            if c.nodes[i].alive:
                c.crash(i)
        elif r < 0.22:
            for i in ids:
                if not c.nodes[i].alive:
                    c.start(i)
        elif r < 0.40:
            i = rnd.choice(ids)
            n = c.nodes[i]
            if n.alive and n.replica is not None:
                hwm = n.replica.view().high_watermark
                if hwm:
                    c.step(i, CreateSnapshot(c.now, hwm))
        else:
            for lead in c.leaders():
                k += 1
                c.append(lead, f"v{k}".encode())
        for i, n in c.nodes.items():
            if not n.alive or n.replica is None:
                continue
            v = n.replica.view()
            assert (v.log_start_offset, v.end_offset) == (n.log.start_offset, n.log.end_offset)
            assert n.snaps is not None
            start = n.log.start_offset
            assert start == 0 or any(s.offset == start for s in n.snaps.complete), i
            held = dict(entries(n.log))
            for offset in range(start, v.high_watermark or 0):
                assert committed.setdefault(offset, held[offset]) == held[offset]
    for history in c.contents.values():
        for offset, epoch in history:
            assert committed.setdefault(offset, epoch) == epoch
    c.heal()
    for i in ids:
        if not c.nodes[i].alive:
            c.start(i)
    c.run(c.now + 20_000)
    lead = c.leader()
    assert lead is not None
    assert_consistent(c, lead)


@pytest.mark.parametrize("seed", range(8))
def test_random_faults_with_snapshots_keep_replicas_consistent(seed: int) -> None:
    run_with_snapshots(seed)


# --------------------------------------------------------------------------- faults mid-transfer


class FaultyTransfer(Cluster):
    """A cluster whose network and driver misbehave for one replica's snapshot transfer only:
    the k-th chunk sent to it is lost, duplicated or delayed past the request timeout (so that
    the chunk asked for again overtakes it), or the replica crashes right after one step of
    the transfer (a chunk written, validation asked, the snapshot installed)."""

    def __init__(self, *, seed: int, **cfg: int) -> None:
        super().__init__(3, seed=seed, snapshots=True, fetch_max_bytes=32, **cfg)
        self.victim: int | None = None
        self.chunk_fault: tuple[str, int] | None = None  # (lose | duplicate | delay, k)
        self.crash_after: type[Effect] | None = None
        self.chunks_sent = 0
        self.faults = 0

    def send(self, src: int, dst: int, msg: Message, answering: Request | None) -> None:
        fault = self.chunk_fault
        if fault is None or dst != self.victim or not isinstance(msg, FetchSnapshotResponse):
            super().send(src, dst, msg, answering)
            return
        self.chunks_sent += 1
        kind, k = fault
        if self.chunks_sent != k:
            super().send(src, dst, msg, answering)
            return
        self.faults += 1
        if kind == "duplicate":
            super().send(src, dst, msg, answering)
            super().send(src, dst, msg, answering)
        elif kind == "delay":
            kept = self.latency
            self.latency = 3 * self.nodes[dst].config.timing.request_timeout_ms
            super().send(src, dst, msg, answering)
            self.latency = kept
        # "lose": not sent at all

    def step(self, i: int, ev: Event) -> list[Effect]:
        effects = super().step(i, ev)
        step = self.crash_after
        if i == self.victim and step is not None and any(isinstance(e, step) for e in effects):
            self.crash_after = None
            self.faults += 1
            self.crash(i)  # what the step queued for it (SnapshotValidated) reaches no one
        return effects


def transfer_with_fault(c: FaultyTransfer) -> tuple[int, int, Offset]:
    """A follower cut off while the leader commits and snapshots, then healed: it fetches the
    snapshot through the cluster's fault, and must end with the leader's snapshot, then the
    leader's log."""
    lead = elect(c)
    lagging = cut_off_follower(c, lead)
    committed(c, lead, 10)
    c.run(c.now + 3000)
    snap_end = snapshot_and_trim(c, lead)
    c.victim = lagging
    c.heal()
    for _ in range(100):
        c.run(c.now + 100)
        if not c.nodes[lagging].alive:
            c.start(lagging)
        if c.nodes[lagging].log.start_offset >= snap_end:
            break
    assert c.nodes[lagging].log.start_offset == snap_end
    lead_snaps, lag_snaps = c.nodes[lead].snaps, c.nodes[lagging].snaps
    assert lead_snaps is not None and lag_snaps is not None
    [sid] = [s for s in lead_snaps.complete if s.offset == snap_end]
    assert lag_snaps.complete[sid] == lead_snaps.complete[sid]
    assert not lag_snaps.parts
    lead = elect(c)
    end = committed(c, lead, 2)
    c.run_until(
        lambda: c.nodes[lagging].log.end_offset == end and c.view(lagging).high_watermark == end
    )
    assert_consistent(c, lead)
    return lead, lagging, snap_end


@pytest.mark.parametrize("kind", ["lose", "duplicate", "delay"])
@pytest.mark.parametrize("k", [1, 3])
def test_a_lost_duplicated_or_reordered_chunk_leaves_the_snapshot_whole(kind: str, k: int) -> None:
    c = FaultyTransfer(seed=4, request_timeout_ms=200)
    c.chunk_fault = (kind, k)
    transfer_with_fault(c)
    assert c.faults == 1
    assert c.chunks_sent > k  # the transfer went on past the faulty chunk


@pytest.mark.parametrize(
    "step", [WriteSnapshotChunk, ValidateSnapshot, InstallSnapshot], ids=lambda t: t.__name__
)
def test_a_crash_at_any_step_of_a_transfer_leaves_a_consistent_replica(step: type[Effect]) -> None:
    """Between chunk writes (the .part is gone at restart), between validation and install
    (never installed: the transfer starts over), right after install (the snapshot and the
    log start survive; the log continues from there)."""
    c = FaultyTransfer(seed=5)
    c.crash_after = step
    transfer_with_fault(c)
    assert c.faults == 1


def test_an_observer_that_lost_its_disk_catches_up_from_the_snapshot() -> None:
    """Its log, snapshots and quorum-state gone, an observer starts empty; the leader's log
    starts at a snapshot, so the observer fetches it, then the log."""
    c = Cluster(3, 1, seed=6, snapshots=True, fetch_max_bytes=64)
    lead = elect(c)
    committed(c, lead, 6)
    obs = 4
    c.run_until(lambda: c.nodes[obs].log.end_offset == c.view(lead).end_offset)
    c.crash(obs)
    c.nodes[obs].log = MemoryLog()
    c.nodes[obs].snaps = MemorySnapshots()
    c.nodes[obs].stored = None
    committed(c, lead, 6)
    c.run(c.now + 3000)  # the observer is not live: the leader may move its log start
    snap_end = snapshot_and_trim(c, lead)
    c.start(obs)
    c.run_until(lambda: c.nodes[obs].log.start_offset == snap_end, limit=30_000)
    end = committed(c, lead, 2)
    c.run_until(lambda: c.nodes[obs].log.end_offset == end and c.view(obs).high_watermark == end)
    assert_consistent(c, lead)
