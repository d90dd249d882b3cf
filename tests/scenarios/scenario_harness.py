"""A minimal in-memory cluster loop for scenario tests: replicas, in-flight messages, one
MemoryLog per node that performs its AppendToLog/TruncateLog/FlushLog effects. The real
simulator lives in refinement/sim.py; this one stays small on purpose."""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field, replace

from memory_logs import entries, key, perform_append, perform_snapshot_effect

from kraft.control_records import Endpoint, VoterEntry, VotersRecord
from kraft.core.effects import (
    AppendResult,
    AppendToLog,
    Effect,
    ElectionState,
    FlushLog,
    HighWatermarkMoved,
    PersistElectionState,
    Send,
    ShutdownComplete,
    StateChanged,
    TruncateLog,
    ValidateSnapshot,
    WriteSnapshot,
)
from kraft.core.events import (
    ClientAppend,
    CreateSnapshot,
    Event,
    Receive,
    SendFailed,
    Shutdown,
    SnapshotValidated,
    SnapshotWritten,
    Tick,
)
from kraft.core.log_metadata import LogState
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    Message,
    Request,
    VoteRequest,
)
from kraft.core.replica import Replica, ReplicaConfig
from kraft.core.snapshots import LogStartPolicy
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_records import voter_set_of
from kraft.ids import ClusterId, NodeId, Offset, OffsetAndEpoch
from kraft.storage.log_adapter import BatchReader, log_state_of
from kraft.storage.memory_log import MemoryLog
from kraft.storage.memory_snapshots import MemorySnapshots, encode_snapshot

REQUESTS = (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest,
            FetchSnapshotRequest)  # fmt: skip
CLUSTER = ClusterId("scenario-cluster")


@dataclass
class Node:
    config: ReplicaConfig
    log: MemoryLog = field(default_factory=MemoryLog)
    stored: ElectionState | None = None
    replica: Replica | None = None
    alive: bool = True
    hwm_history: list[int] = field(default_factory=list)
    results: list[AppendResult] = field(default_factory=list)
    states: list[tuple[ReplicaState, int]] = field(default_factory=list)
    shutdown_complete: bool = False
    # KIP-630: the node's snapshots, when the cluster keeps them.
    snaps: MemorySnapshots | None = None


class Cluster:
    def __init__(
        self,
        voters: int,
        observers: int = 0,
        *,
        seed: int = 0,
        latency_ms: int = 1,
        overrides: dict[int, dict[str, int]] | None = None,
        snapshots: bool = False,
        **cfg: int,
    ) -> None:
        self.now = 0
        self.latency = latency_ms
        self.rng = random.Random(seed)
        voter_keys = tuple(key(i) for i in range(1, voters + 1))
        self.nodes: dict[int, Node] = {}
        for i in range(1, voters + observers + 1):
            mine = {**cfg, **(overrides or {}).get(i, {})}
            conf = ReplicaConfig(key(i), CLUSTER, voter_keys, QuorumTiming(**mine))
            self.nodes[i] = Node(conf, snaps=MemorySnapshots() if snapshots else None)
        self.queue: list[tuple[int, int, int, Event]] = []  # (time, seq, dst, event)
        self.seq = 0
        self.blocked: set[frozenset[int]] = set()
        self.delivered: list[tuple[int, int, Message]] = []
        self._reply_to: dict[int, Request | None] = {}
        # KIP-630: what each snapshot id holds, the (offset, epoch) of every record below its
        # end; the same id must hold the same history on every node (SnapshotMatchesLog).
        self.contents: dict[OffsetAndEpoch, tuple[tuple[int, int], ...]] = {}
        for i in self.nodes:
            self.start(i)

    # -- node lifecycle

    def boot_state(self, n: Node) -> LogState:
        """What a starting replica is given of its storage (a subclass may add to it)."""
        state = log_state_of(n.log)
        if n.snaps is not None:
            n.snaps.parts.clear()  # leftover .part files are removed at start
            state = replace(state, snapshots=tuple(n.snaps.complete))
        return state

    def start(self, i: int) -> None:
        n = self.nodes[i]
        n.alive = True
        state = self.boot_state(n)
        n.replica = Replica(
            n.config,
            election_state=n.stored,
            log_state=state,
            reader=BatchReader(n.log),
            rng=random.Random(self.rng.random()),
            now_ms=self.now,
            snapshots=n.snaps,
        )
        self.apply(i, n.replica.start(), None)

    def crash(self, i: int) -> None:
        n = self.nodes[i]
        n.alive = False
        n.replica = None
        n.hwm_history = []  # the HWM is not durable: a restarted replica learns it again
        # Unflushed data is lost; every append here is flushed in the same step.
        n.log.simulate_crash()

    def r(self, i: int) -> Replica:
        rep = self.nodes[i].replica
        assert rep is not None
        return rep

    def history_below(self, i: int, end: int) -> tuple[tuple[int, int], ...]:
        """(offset, epoch) of every record below `end` as node i knows it: the snapshot its
        log starts at, then its log."""
        n = self.nodes[i]
        start = n.log.start_offset
        base: tuple[tuple[int, int], ...] = ()
        if start > 0:
            assert n.snaps is not None
            [at] = [s for s in n.snaps.complete if s.offset == start]
            base = self.contents[at]
        logged = tuple((o, ep) for o, ep in entries(n.log) if start <= o < end)
        history = base + logged
        assert len(history) == end, (i, end, len(history))
        return history

    # -- network

    def partition(self, a: int, b: int) -> None:
        self.blocked.add(frozenset((a, b)))

    def isolate(self, a: int) -> None:
        for b in self.nodes:
            if b != a:
                self.partition(a, b)

    def heal(self) -> None:
        self.blocked.clear()

    def reachable(self, a: int, b: int) -> bool:
        return frozenset((a, b)) not in self.blocked and self.nodes[b].alive

    def push(self, at: int, dst: int, ev: Event) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (at, self.seq, dst, ev))

    # -- effects

    def apply(self, i: int, effects: list[Effect], answering: Request | None) -> None:
        n = self.nodes[i]
        for e in effects:
            if isinstance(e, PersistElectionState):
                n.stored = e.state
            elif isinstance(e, AppendToLog):
                perform_append(n.log, e)
            elif isinstance(e, TruncateLog):
                n.log.truncate_to(e.offset)
            elif isinstance(e, FlushLog):
                n.log.flush()
            elif isinstance(e, HighWatermarkMoved):
                assert not n.hwm_history or e.high_watermark > n.hwm_history[-1]
                n.hwm_history.append(e.high_watermark)
            elif isinstance(e, AppendResult):
                n.results.append(e)
            elif isinstance(e, StateChanged):
                n.states.append((e.new, e.epoch))
            elif isinstance(e, ShutdownComplete):
                n.shutdown_complete = True
            elif isinstance(e, Send):
                self.send(i, e.dst, e.message, answering)
            elif n.snaps is not None:
                self.apply_snapshot_effect(i, n.snaps, e)

    def apply_snapshot_effect(self, i: int, snaps: MemorySnapshots, e: Effect) -> None:
        """KIP-630 effects, performed at once; the answering events follow as the node's next
        events (a snapshot is durable, a fetched one validated)."""
        n = self.nodes[i]
        if isinstance(e, WriteSnapshot):
            history = self.history_below(i, e.snapshot_id.offset)
            known = self.contents.setdefault(e.snapshot_id, history)
            assert known == history, f"SnapshotMatchesLog: {e.snapshot_id} on node {i}"
            records = [(None, f"{o}:{ep}".encode()) for o, ep in history]
            snaps.put(e.snapshot_id, encode_snapshot(e.snapshot_id, records))
            self.push(self.now, i, SnapshotWritten(self.now, e.snapshot_id))
            return
        perform_snapshot_effect(n.log, snaps, e)
        if isinstance(e, ValidateSnapshot):
            problem = snaps.validate(e.snapshot_id, e.size)
            ev = SnapshotValidated(self.now, e.snapshot_id, problem is None, reason=problem or "")
            self.push(self.now, i, ev)

    def send(self, src: int, dst: int, msg: Message, answering: Request | None) -> None:
        at = self.now + self.latency
        if isinstance(msg, REQUESTS):
            if not self.reachable(src, dst):
                self.push(at, src, SendFailed(at, NodeId(dst), msg))
                return
            self.push(at, dst, Receive(at, NodeId(src), msg))
        elif self.reachable(src, dst):
            self.push(at, dst, Receive(at, NodeId(src), msg, in_reply_to=None))
            self._reply_to[self.seq] = answering

    # -- running

    def step(self, i: int, ev: Event) -> list[Effect]:
        n = self.nodes[i]
        if not n.alive or n.replica is None:
            return []
        effects = n.replica.step(ev)
        answering = (
            ev.message if isinstance(ev, Receive) and isinstance(ev.message, REQUESTS) else None
        )
        self.apply(i, effects, answering)
        return effects

    def run(self, until: int) -> None:
        """Deliver messages and fire timers in time order until `until` (ms)."""
        while True:
            t_msg = self.queue[0][0] if self.queue else None
            t_timer, who = None, None
            for i, n in self.nodes.items():
                if n.alive and n.replica is not None:
                    d = n.replica.next_deadline_ms()
                    if t_timer is None or d < t_timer:
                        t_timer, who = d, i
            nxt = min((t for t in (t_msg, t_timer) if t is not None), default=until + 1)
            if nxt > until:
                self.now = until
                return
            self.now = max(self.now, nxt)
            if t_msg is not None and t_msg <= nxt:
                _at, seq, dst, ev = heapq.heappop(self.queue)
                if isinstance(ev, Receive):
                    src = int(ev.src)
                    if not self.reachable(src, dst):
                        continue
                    ev = Receive(ev.now_ms, ev.src, ev.message, self._reply_to.pop(seq, None))
                    self.delivered.append((src, dst, ev.message))
                self.step(dst, ev)
            else:
                assert who is not None
                self.step(who, Tick(self.now))

    def run_until(self, pred: object, limit: int = 60_000, step_ms: int = 10) -> None:
        assert callable(pred)
        end = self.now + limit
        while not pred():
            if self.now >= end:
                raise AssertionError(f"condition not reached by {end} ms")
            self.run(self.now + step_ms)

    # -- client and queries

    def append(self, i: int, *values: bytes, request_id: int = 0) -> list[Effect]:
        return self.step(i, ClientAppend(self.now, tuple((None, v) for v in values), request_id))

    def shutdown(self, i: int) -> list[Effect]:
        return self.step(i, Shutdown(self.now))

    def leaders(self) -> list[int]:
        return [
            i
            for i, n in self.nodes.items()
            if n.alive and n.replica is not None and n.replica.view().state is ReplicaState.LEADER
        ]

    def leader(self) -> int | None:
        ls = self.leaders()
        return ls[0] if len(ls) == 1 else None

    def view(self, i: int):
        return self.r(i).view()


class RetentionCluster(Cluster):
    """Every replica under Kafka's retention policy (LogStartPolicy.RETENTION, the node's):
    the log start moves only as far as the retention policy asks (DeleteBeforeSnapshot)."""

    def start(self, i: int) -> None:
        n = self.nodes[i]
        n.config = replace(n.config, log_start_policy=LogStartPolicy.RETENTION)
        super().start(i)


def elect(c: Cluster) -> int:
    """Run until one leader is followed by every live node; its id."""
    c.run_until(
        lambda: (
            c.leader() is not None
            and all(c.view(i).leader_id == c.leader() for i in c.nodes if c.nodes[i].alive)
        )
    )
    lead = c.leader()
    assert lead is not None
    return lead


def settled(c: Cluster) -> int:
    """Run until one leader is followed by every node and every log ends where the leader's
    does, past its LeaderChange record; the leader's id."""
    c.run_until(
        lambda: (
            (ld := c.leader()) is not None
            and all(c.view(i).leader_id == ld for i in c.nodes)
            and all(c.view(i).end_offset == c.view(ld).end_offset > 0 for i in c.nodes)
        )
    )
    lead = c.leader()
    assert lead is not None
    return lead


def leader_caught_up(c: Cluster) -> int:
    """Run until one leader is followed by every node and its HWM is its log end; its id."""
    c.run_until(
        lambda: (
            (ld := c.leader()) is not None
            and all(c.view(i).leader_id == ld for i in c.nodes)
            and c.view(ld).high_watermark == c.view(ld).end_offset
        )
    )
    leader = c.leader()
    assert leader is not None
    return leader


def committed(c: Cluster, lead: int, n: int) -> int:
    """Append n values one by one; wait until the leader's HWM covers them."""
    for k in range(n):
        c.append(lead, f"v{k}".encode())
        c.run(c.now + 5)
    end = c.view(lead).end_offset
    c.run_until(lambda: c.view(lead).high_watermark == end)
    return end


def snapshot_everywhere(c: Cluster, lead: int, n: int) -> OffsetAndEpoch:
    """Commit n more values, wait until every node's HWM covers them, and have every node
    snapshot at that offset; the snapshot's id."""
    end = committed(c, lead, n)
    c.run_until(lambda: all(c.view(i).high_watermark == end for i in c.nodes))
    for i in c.nodes:
        c.step(i, CreateSnapshot(c.now, end))
    c.run(c.now + 5)
    snaps = c.nodes[lead].snaps
    assert snaps is not None
    [sid] = [s for s in snaps.complete if s.offset == end]
    return sid


def controller_endpoints(n: int) -> tuple[Endpoint, ...]:
    """The one CONTROLLER listener a dynamic voter of a scenario advertises."""
    return (Endpoint("CONTROLLER", "127.0.0.1", 9000 + n),)


class DynamicCluster(Cluster):
    """Voters bootstrapped as a dynamic quorum (the bootstrap checkpoint's Voters record at
    offset -1, kraft.version 1): the voters configured at the first start, for every restart."""

    bootstrap_ids: tuple[int, ...] = ()

    def boot_state(self, n: Node) -> LogState:
        if n.config.voters:
            self.bootstrap_ids = tuple(v.id for v in n.config.voters)
        n.config = replace(n.config, voters=())
        entries = tuple(
            VoterEntry(v, key(v).directory_id, controller_endpoints(v), 0, 1)
            for v in self.bootstrap_ids
        )
        bootstrap = voter_set_of(VotersRecord(0, entries))
        return replace(super().boot_state(n), voter_history=((Offset(-1), bootstrap),))


class Recording(Cluster):
    """A cluster that remembers every node's effects and every message sent, with the time."""

    def __init__(self, *args: object, **kw: object) -> None:
        self.effects: dict[int, list[tuple[int, Effect]]] = {}
        self.sent: list[tuple[int, int, int, Message]] = []  # (time, src, dst, message)
        super().__init__(*args, **kw)  # type: ignore[arg-type]

    def step(self, i: int, ev: Event) -> list[Effect]:
        out = super().step(i, ev)
        self.effects.setdefault(i, []).extend((self.now, e) for e in out)
        return out

    def send(self, src: int, dst: int, msg: Message, answering: Request | None) -> None:
        self.sent.append((self.now, src, dst, msg))
        super().send(src, dst, msg, answering)
