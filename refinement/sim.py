"""A deterministic simulator of a KRaft cluster: virtual time, seeded faults, checkers after
every event.

The simulator drives the pure replica core (kraft.core.replica) over an in-memory network and
in-memory logs (kraft.log_memory.MemoryLog). One `random.Random(seed)` draws every network
delay, loss, duplication, partition, crash and client append; each replica gets its own
generator derived from (seed, node, incarnation). Same seed, same run, same trace bytes.

A run has two phases. The fault phase lasts `events` events: messages are lost, duplicated
and reordered, links partitioned, nodes crashed (losing what their log did not flush; the
quorum-state survives) or shut down gracefully, as the fault profile says. The liveness phase
then heals everything, restarts stopped nodes, and requires within a bound a leader that every
voter follows (EventuallyLeaderElected) and every client append answered and decided, plus a
fresh probe append acknowledged (EventuallyCommitted).

Replay a run: python -m refinement.sim --seed N --profile P --events E [--trace out.ndjson]
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import random
import sys
import time
import uuid
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import IO, NoReturn, Protocol, cast

from kraft.core.effects import (
    ActionTaken,
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
)
from kraft.core.events import ClientAppend, Event, Receive, SendFailed, Shutdown, Tick
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    Request,
    VoteRequest,
    VoteResponse,
)
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, DirectoryId, Epoch, NodeId, Offset, ReplicaKey
from kraft.log_memory import MemoryLog
from refinement import invariants as inv
from refinement.faults import PROFILES, FaultProfile
from refinement.invariants import AckedRange, ClusterState, NodeState, Violation
from refinement.trace import JsonObject, JsonValue, TraceEvent, TraceWriter, message_json

# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True, slots=True)
class SimConfig:
    seed: int = 0
    voters: int = 3
    observers: int = 0
    # The fault phase ends after this many events (or at max_time_ms of virtual time).
    max_events: int = 1500
    max_time_ms: int | None = None
    # Client appends per virtual second during the fault phase (Poisson).
    append_rate: float = 20.0
    profile: FaultProfile = PROFILES["mixed"]
    # Base one-way message delay, uniform in [low, high] ms (the profile adds jitter).
    delay_ms: tuple[int, int] = (1, 5)
    timing: QuorumTiming = field(default_factory=QuorumTiming)
    check_liveness: bool = True
    # Off only to measure what the checkers cost (benchmarks); every run that tests sets it.
    check_invariants: bool = True
    # None: 10 election timeouts plus a fetch timeout.
    liveness_bound_ms: int | None = None
    cluster_id: str = "sim-cluster"

    @property
    def liveness_bound(self) -> int:
        if self.liveness_bound_ms is not None:
            return self.liveness_bound_ms
        return 10 * self.timing.election_timeout_ms + self.timing.fetch_timeout_ms

    def replay_command(self) -> str:
        cmd = (
            f"python -m refinement.sim --seed {self.seed} --profile {self.profile.name}"
            f" --events {self.max_events}"
        )
        if self.voters != 3:
            cmd += f" --voters {self.voters}"
        if self.observers:
            cmd += f" --observers {self.observers}"
        if self.append_rate != 20.0:
            cmd += f" --append-rate {self.append_rate:g}"
        if not self.check_liveness:
            cmd += " --no-liveness"
        return cmd


# --------------------------------------------------------------------------- what is driven


class ReplicaViewLike(Protocol):
    @property
    def state(self) -> ReplicaState: ...
    @property
    def epoch(self) -> Epoch: ...
    @property
    def leader_id(self) -> NodeId | None: ...
    @property
    def voted_for(self) -> ReplicaKey | None: ...
    @property
    def end_offset(self) -> Offset: ...
    @property
    def last_epoch(self) -> Epoch: ...
    @property
    def high_watermark(self) -> Offset | None: ...
    @property
    def log_start_offset(self) -> Offset: ...


class SimReplica(Protocol):
    def start(self) -> list[Effect]: ...
    def step(self, event: Event) -> list[Effect]: ...
    def next_deadline_ms(self) -> int: ...
    def view(self) -> ReplicaViewLike: ...


@dataclass(frozen=True, slots=True)
class NodeSetup:
    """Everything a replica factory needs to build (or rebuild, on restart) one replica."""

    node: ReplicaKey
    cluster_id: ClusterId
    voters: tuple[ReplicaKey, ...]
    timing: QuorumTiming
    election_state: ElectionState | None
    log: MemoryLog
    rng: random.Random
    now_ms: int


ReplicaFactory = Callable[[NodeSetup], SimReplica]


def core_replica_factory(setup: NodeSetup) -> SimReplica:
    """Build the real replica core (imported here so stubs can run without it)."""
    from kraft.core.replica import Replica, ReplicaConfig
    from kraft.log_adapter import BatchReader, log_state_of

    config = ReplicaConfig(setup.node, setup.cluster_id, setup.voters, setup.timing)
    replica: SimReplica = Replica(
        config,
        election_state=setup.election_state,
        log_state=log_state_of(setup.log),
        reader=BatchReader(setup.log),
        rng=setup.rng,
        now_ms=setup.now_ms,
    )
    return replica


def directory_of(node: NodeId) -> DirectoryId:
    """Deterministic, non-zero storage ids, so the id alone names a replica in traces."""
    return DirectoryId(uuid.UUID(int=(0x5E1 << 64) | node))


# --------------------------------------------------------------------------- results


@dataclass(slots=True)
class SimResult:
    config: SimConfig
    events: int = 0
    virtual_time_ms: int = 0
    elections: int = 0
    accepted: int = 0
    committed: int = 0
    lost: int = 0
    refused: int = 0
    gave_up: int = 0
    crashes: int = 0
    shutdowns: int = 0
    partitions: int = 0
    dropped: int = 0
    recovery_ms: int | None = None
    violations: list[Violation] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def replay_command(self) -> str:
        return self.config.replay_command()

    def summary(self) -> str:
        c = self.config
        line = (
            f"seed={c.seed} profile={c.profile.name} events={self.events}"
            f" time={self.virtual_time_ms}ms elections={self.elections}"
            f" commits={self.committed} accepted={self.accepted} lost={self.lost}"
            f" refused={self.refused} gave_up={self.gave_up} crashes={self.crashes}"
            f" shutdowns={self.shutdowns}"
            f" partitions={self.partitions} dropped={self.dropped}"
            f" recovery={self.recovery_ms}ms violations={len(self.violations)}"
        )
        for v in self.violations:
            line += f"\n  VIOLATION {v}\n  replay: {self.replay_command}"
        return line


# --------------------------------------------------------------------------- internals

# Heap entry kinds.
_DELIVER = 0
_TICK = 1
_CLIENT_NEW = 2
_CLIENT_SEND = 3
_FAULT = 4
_HEAL = 5
_RESTART = 6
_SEND_FAILED = 7
_FORCE_STOP = 8

# (virtual time, sequence number, kind, two payload slots whose meaning depends on kind)
_HeapEntry = tuple[int, int, int, object, object]

_PARTITION = "partition"
_CRASH = "crash"
_SHUTDOWN = "shutdown"

_REQUEST_OF: dict[type, type] = {
    VoteResponse: VoteRequest,
    BeginQuorumEpochResponse: BeginQuorumEpochRequest,
    EndQuorumEpochResponse: EndQuorumEpochRequest,
    FetchResponse: FetchRequest,
    FetchSnapshotResponse: FetchSnapshotRequest,
}
_REQUEST_TYPES = frozenset(_REQUEST_OF.values())
# The client: at most this many appends outstanding (new ones are skipped meanwhile), and
# retries back off exponentially up to the cap, so a leaderless stretch does not turn into a
# flood of retries that would crowd out the protocol's own events.
_MAX_CLIENT_OUTSTANDING = 32
_MAX_CLIENT_ATTEMPTS = 30
_CLIENT_BACKOFF_CAP_MS = 1000


class _StopRun(Exception):  # noqa: N818 (control flow, not an error)
    """Ends the event loop (a violation was found or the liveness phase finished)."""


class _Node:
    __slots__ = (
        "id",
        "inc",
        "is_voter",
        "key",
        "log",
        "log_dirty",
        "persisted",
        "replica",
        "shutting_down",
        "snap",
        "stop_requested",
        "tick_at",
        "view",
    )

    def __init__(self, node_id: NodeId, is_voter: bool) -> None:
        self.id = node_id
        self.key = ReplicaKey(node_id, directory_of(node_id))
        self.is_voter = is_voter
        self.log = MemoryLog()
        self.log_dirty = True
        self.persisted: ElectionState | None = None
        self.replica: SimReplica | None = None
        self.inc = 0
        self.shutting_down = False
        self.tick_at = -1
        self.stop_requested = False
        self.view: object = None  # the replica view `snap` was made from
        self.snap = NodeState(
            node_id=node_id,
            incarnation=0,
            state=None,
            epoch=Epoch(0),
            leader_id=None,
            end_offset=Offset(0),
            last_epoch=Epoch(0),
            high_watermark=None,
            max_high_watermark=None,
            log_end_offset=Offset(0),
            log_last_epoch=Epoch(0),
            flushed_offset=Offset(0),
            epochs=(),
        )


@dataclass(slots=True)
class _ClientRequest:
    rid: int
    values: tuple[bytes, ...]
    target: NodeId | None
    attempts: int = 0


class Simulator:
    """One run of one seed. `run()` once; the result says what happened."""

    def __init__(
        self,
        config: SimConfig,
        *,
        replica_factory: ReplicaFactory = core_replica_factory,
        trace: IO[str] | None = None,
    ) -> None:
        if config.voters < 1:
            raise ValueError("at least one voter")
        self.config = config
        self._factory = replica_factory
        self._trace = TraceWriter(trace) if trace is not None else None
        self._rng = random.Random(config.seed)
        self._profile = config.profile
        self._check = config.check_invariants
        self._heap: list[_HeapEntry] = []
        self._seq = 0
        self.now = 0
        self.result = SimResult(config)
        n_total = config.voters + config.observers
        self._nodes: dict[NodeId, _Node] = {
            NodeId(i): _Node(NodeId(i), i <= config.voters) for i in range(1, n_total + 1)
        }
        self._voter_ids = tuple(n.id for n in self._nodes.values() if n.is_voter)
        self._voter_keys = tuple(self._nodes[i].key for i in self._voter_ids)
        self._voter_set = frozenset(self._voter_ids)
        self._snaps: dict[NodeId, NodeState] = {i: n.snap for i, n in self._nodes.items()}
        self._leaders: dict[Epoch, frozenset[NodeId]] = {}
        self._acked: list[AckedRange] = []
        self._acked_t: tuple[AckedRange, ...] = ()
        self._cluster_cache: ClusterState | None = None
        # Last offsets of _acked, ascending (the committed log is one line of offsets).
        self._acked_lasts: list[int] = []
        # Network state.
        self._blocked: dict[tuple[NodeId, NodeId], int] = {}
        self._partitions: dict[int, list[tuple[NodeId, NodeId]]] = {}
        self._last_request: dict[tuple[NodeId, NodeId, type], Request] = {}
        # The Fetch each (fetcher, leader) pair awaits an answer to: like Kafka's request
        # manager (one request in flight per destination, answers to any other ignored), only
        # the first answer to the latest Fetch is what a replica "receives" for the
        # FetchedHighWatermarkMonotonic checker; late, reordered or duplicated answers are not.
        self._fetch_awaited: dict[tuple[NodeId, NodeId], FetchRequest] = {}
        self._loss = self._profile.loss
        self._duplicate = self._profile.duplicate
        # Client state.
        self._next_rid = 1
        self._pending: dict[int, _ClientRequest] = {}
        self._inflight: dict[NodeId, dict[int, _ClientRequest]] = {i: {} for i in self._nodes}
        self._accepted: dict[int, tuple[NodeId, Offset, Offset, Epoch]] = {}
        self._watch: dict[tuple[NodeId, Epoch], deque[tuple[Offset, Offset, int]]] = {}
        self._client_leader: NodeId | None = None
        # Phase state.
        self._liveness = False
        self._liveness_deadline = 0
        self._liveness_start = 0
        self._stable_leader: NodeId | None = None
        self._probe: int | None = None
        # Per-step scratch: actions taken and simulator lines to emit after the step line.
        self._actions: list[str] = []
        self._side_lines: list[tuple[str, NodeId | None, JsonObject | None]] = []

    # ------------------------------------------------------------------ scheduling

    def _push(self, at: int, kind: int, a: object, b: object = None) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, kind, a, b))

    def _delay(self) -> int:
        lo, hi = self.config.delay_ms
        d = lo + int(self._rng.random() * (hi - lo + 1))
        jitter = self._profile.jitter_ms
        if jitter:
            d += int(self._rng.random() * (jitter + 1))
        return d

    def _exp_ms(self, rate_per_s: float) -> int:
        return 1 + int(self._rng.expovariate(rate_per_s) * 1000.0)

    # ------------------------------------------------------------------ the run

    def run(self) -> SimResult:
        started = time.perf_counter()
        with contextlib.suppress(_StopRun):
            self._run()
        self.result.virtual_time_ms = self.now
        self.result.wall_s = time.perf_counter() - started
        return self.result

    def _run(self) -> None:
        cfg = self.config
        for node in self._nodes.values():
            self._start_node(node, "Start")
        if cfg.append_rate > 0:
            self._push(self._exp_ms(cfg.append_rate), _CLIENT_NEW, None)
        p = self._profile
        for fault, rate in (
            (_PARTITION, p.partition_rate),
            (_CRASH, p.crash_rate),
            (_SHUTDOWN, p.shutdown_rate),
        ):
            if rate > 0:
                self._push(self._exp_ms(rate), _FAULT, fault)
        heap = self._heap
        max_time = cfg.max_time_ms
        while heap:
            at, _seq, kind, a, b = heapq.heappop(heap)
            if self._liveness:
                if at > self._liveness_deadline:
                    self.now = self._liveness_deadline
                    self._liveness_failed()
            elif self.result.events >= cfg.max_events or (max_time is not None and at > max_time):
                if not cfg.check_liveness:
                    return
                heapq.heappush(heap, (at, _seq, kind, a, b))
                self._start_liveness()
                continue
            self.now = at
            if kind == _DELIVER:
                assert isinstance(a, _Node) and isinstance(b, tuple)
                self._deliver(a, b)
            elif kind == _TICK:
                assert isinstance(a, _Node)
                self._tick(a, b)
            elif kind == _CLIENT_SEND:
                assert isinstance(a, int)
                self._client_send(a, b)
            elif kind == _CLIENT_NEW:
                if not self._liveness:
                    self._client_new()
                    self._push(at + self._exp_ms(cfg.append_rate), _CLIENT_NEW, None)
            elif kind == _SEND_FAILED:
                assert isinstance(a, _Node) and isinstance(b, tuple)
                self._send_failed(a, b)
            elif kind == _FAULT:
                if not self._liveness:
                    assert isinstance(a, str)
                    self._fault(a)
            elif kind == _HEAL:
                assert isinstance(a, int)
                self._heal(a)
            elif kind == _RESTART:
                assert isinstance(a, _Node)
                if a.replica is None and a.inc == b:
                    self._start_node(a, "Restart")
            elif kind == _FORCE_STOP:
                assert isinstance(a, _Node)
                if a.replica is not None and a.shutting_down and a.inc == b:
                    self._crash(a)
        if self._liveness:
            self._liveness_failed()

    # ------------------------------------------------------------------ events

    def _deliver(self, dst: _Node, payload: tuple[object, ...]) -> None:
        src_id, msg, in_reply_to, dst_inc = payload
        assert isinstance(src_id, int)
        replica = dst.replica
        if replica is None or dst.inc != dst_inc:
            self._drop(src_id, dst.id, msg, "down")
            if replica is None and type(msg) in _REQUEST_TYPES:
                # Connection refused: the sender learns it after a round trip.
                src = self._nodes[NodeId(src_id)]
                self._push(self.now + self._delay(), _SEND_FAILED, src, (dst.id, msg, src.inc))
            return
        if self._blocked and (src_id, dst.id) in self._blocked:
            self._drop(src_id, dst.id, msg, "partition")
            return
        mtype = type(msg)
        if mtype in _REQUEST_TYPES:
            assert isinstance(msg, _REQUEST_MESSAGES)
            self._last_request[(dst.id, NodeId(src_id), mtype)] = msg
            answering: Request | None = msg
        else:
            answering = None
        message = cast(Message, msg)
        if (
            mtype is FetchResponse
            and self._check
            and in_reply_to is not None
            and self._fetch_awaited.get((dst.id, NodeId(src_id))) is in_reply_to
        ):
            assert isinstance(msg, FetchResponse)
            del self._fetch_awaited[(dst.id, NodeId(src_id))]
            found = inv.fetched_high_watermark_monotonic(
                dst.snap,
                inv.FetchedHighWatermark(
                    NodeId(src_id),
                    dst.id,
                    msg.leader_id,
                    msg.leader_epoch,
                    msg.high_watermark,
                    msg.error is ErrorCode.NONE,
                ),
            )
            if found is not None:
                self._violation(found.name, found.detail)
        event = Receive(self.now, NodeId(src_id), message, cast(Request | None, in_reply_to))
        self._step(dst, event, answering, src_id, message)

    def _tick(self, node: _Node, inc: object) -> None:
        replica = node.replica
        if replica is None or node.inc != inc or node.tick_at != self.now:
            return
        node.tick_at = -1
        deadline = replica.next_deadline_ms()
        if deadline > self.now:
            self._schedule_tick(node, deadline)
            return
        self._step(node, Tick(self.now), None, None, None, is_tick=True)

    def _send_failed(self, src: _Node, payload: tuple[object, ...]) -> None:
        dst_id, request, inc = payload
        if src.replica is None or src.inc != inc:
            return
        assert isinstance(dst_id, int) and isinstance(request, _REQUEST_MESSAGES)
        self._step(src, SendFailed(self.now, NodeId(dst_id), request), None, None, None)

    def _schedule_tick(self, node: _Node, deadline: int) -> None:
        if node.tick_at < 0 or deadline < node.tick_at:
            node.tick_at = deadline
            self._push(deadline, _TICK, node, node.inc)

    # ------------------------------------------------------------------ stepping a replica

    def _step(
        self,
        node: _Node,
        event: Event,
        answering: Request | None,
        src_id: int | None,
        msg: Message | None,
        *,
        is_tick: bool = False,
    ) -> None:
        replica = node.replica
        assert replica is not None
        try:
            effects = replica.step(event)
        except Exception as exc:  # the core must not raise on any event
            self._violation(
                "ReplicaRaised",
                f"node {node.id} raised {type(exc).__name__}: {exc} on {type(event).__name__}",
            )
        self._apply(node, effects, answering, src_id)
        deadline = replica.next_deadline_ms()
        if is_tick and deadline <= self.now:
            deadline = self.now + 1  # a timer that is still due would spin at this instant
        self._schedule_tick(node, deadline)
        self._after_step(node, event, src_id, msg)
        if node.stop_requested:
            # A clean stop closes the log, which flushes it.
            node.log.flush()
            node.log_dirty = True
            node.replica = None
            self._node_stopped(node, "Stop")

    def _apply(
        self, node: _Node, effects: list[Effect], answering: Request | None, src_id: int | None
    ) -> None:
        actions = self._actions
        tracing = self._trace is not None
        log = node.log
        for e in effects:
            t = type(e)
            if t is Send:
                assert isinstance(e, Send)
                self._send(node, e.dst, e.message, answering, src_id)
            elif t is ActionTaken:
                assert isinstance(e, ActionTaken)
                if tracing:
                    actions.append(e.action.value)
                if e.action is Action.BECOME_LEADER:
                    self.result.elections += 1
            elif t is AppendToLog:
                assert isinstance(e, AppendToLog)
                try:
                    log.append_as_follower(e.data)
                except Exception as exc:
                    self._violation(
                        "EffectRejected",
                        f"node {node.id} AppendToLog [{e.first_offset}, {e.last_offset}] epoch"
                        f" {e.epoch} at log end {log.end_offset}: {exc}",
                    )
                node.log_dirty = True
            elif t is FlushLog:
                log.flush()
            elif t is HighWatermarkMoved:
                pass  # read back from the view after the step
            elif t is PersistElectionState:
                assert isinstance(e, PersistElectionState)
                node.persisted = e.state
            elif t is TruncateLog:
                assert isinstance(e, TruncateLog)
                try:
                    log.truncate_to(e.offset)
                except Exception as exc:
                    self._violation(
                        "EffectRejected", f"node {node.id} TruncateLog({e.offset}): {exc}"
                    )
                node.log_dirty = True
            elif t is AppendResult:
                assert isinstance(e, AppendResult)
                self._append_result(node, e)
            elif t is ShutdownComplete:
                node.stop_requested = True
            elif t is StateChanged:
                pass

    def _send(
        self,
        src: _Node,
        dst_id: NodeId,
        msg: Message,
        answering: Request | None,
        answering_src: int | None,
    ) -> None:
        dst = self._nodes.get(dst_id)
        if dst is None:
            self._drop(src.id, dst_id, msg, "unknown node")
            return
        mtype = type(msg)
        if mtype is FetchRequest:
            assert isinstance(msg, FetchRequest)
            self._fetch_awaited[(src.id, dst_id)] = msg
        in_reply_to: Request | None = None
        req_type = _REQUEST_OF.get(mtype)
        if req_type is not None:
            if answering is not None and answering_src == dst_id and type(answering) is req_type:
                in_reply_to = answering
            else:
                in_reply_to = self._last_request.get((src.id, dst_id, req_type))
        rng = self._rng
        if self._loss and rng.random() < self._loss:
            self._drop(src.id, dst_id, msg, "loss")
            return
        payload = (src.id, msg, in_reply_to, dst.inc)
        self._push(self.now + self._delay(), _DELIVER, dst, payload)
        if self._duplicate and rng.random() < self._duplicate:
            self._push(self.now + self._delay(), _DELIVER, dst, payload)
            self._side(
                "DuplicateMessage", dst_id, lambda: message_json(msg, int(src.id), int(dst_id))
            )

    def _drop(self, src: int, dst: NodeId, msg: object, reason: str) -> None:
        self.result.dropped += 1

        def describe() -> JsonObject:
            out = message_json(cast(Message, msg), src, int(dst))
            out["reason"] = reason
            return out

        self._side("DropMessage", dst, describe)

    def _side(
        self, action: str, node: NodeId | None, describe: Callable[[], JsonObject] | None
    ) -> None:
        """A simulator event: counted, traced after the current step's line."""
        self.result.events += 1
        if self._trace is not None:
            self._side_lines.append((action, node, None if describe is None else describe()))
        elif self._side_lines:
            self._side_lines.clear()

    # ------------------------------------------------------------------ after every step

    def _after_step(
        self, node: _Node, event: Event | None, src_id: int | None, msg: Message | None
    ) -> None:
        self.result.events += 1
        # The step's line first, so a violation found below follows the step that caused it.
        if self._trace is not None:
            self._write_step(node, event, src_id, msg)
        else:
            self._actions.clear()
        old = node.snap
        new = self._snapshot(node)
        if new is not old and new != old:
            node.snap = new
            self._snaps[node.id] = new
            if self._check:
                self._check_node(old, new)
            if new.high_watermark != old.high_watermark or new.state != old.state:
                self._watch_acks(node, new)
        if self._liveness:
            self._liveness_progress()

    def _snapshot(self, node: _Node) -> NodeState:
        log = node.log
        old = node.snap
        if node.log_dirty:
            epochs = log.epoch_entries()
            if epochs == old.epochs:
                epochs = old.epochs
            node.log_dirty = False
        else:
            epochs = old.epochs
        replica = node.replica
        if replica is None:
            persisted = node.persisted
            return NodeState(
                node_id=node.id,
                incarnation=node.inc,
                state=None,
                epoch=persisted.epoch if persisted is not None else Epoch(0),
                leader_id=None,
                end_offset=log.end_offset,
                last_epoch=log.last_epoch,
                high_watermark=None,
                max_high_watermark=None,
                log_end_offset=log.end_offset,
                log_last_epoch=log.last_epoch,
                flushed_offset=log.flushed_offset,
                epochs=epochs,
            )
        v = replica.view()
        if (
            v is node.view
            and old.incarnation == node.inc
            and log.end_offset == old.log_end_offset
            and log.flushed_offset == old.flushed_offset
            and epochs is old.epochs
        ):
            return old  # a replica that keeps its view object unchanged changed nothing
        node.view = v
        hwm = v.high_watermark
        top = old.max_high_watermark if old.incarnation == node.inc else None
        if hwm is not None and (top is None or hwm > top):
            top = hwm
        # Positional: this runs after every event (field order of NodeState).
        return NodeState(
            node.id,
            node.inc,
            v.state,
            v.epoch,
            v.leader_id,
            v.end_offset,
            v.last_epoch,
            hwm,
            top,
            log.end_offset,
            log.last_epoch,
            log.flushed_offset,
            epochs,
        )

    def _cluster(self) -> ClusterState:
        # The snapshot and leader maps are updated in place; only a new acknowledgement
        # tuple needs a new ClusterState.
        cluster = self._cluster_cache
        if cluster is None or cluster.acknowledged is not self._acked_t:
            cluster = ClusterState(self._snaps, self._voter_set, self._leaders, self._acked_t)
            self._cluster_cache = cluster
        return cluster

    def _check_node(self, old: NodeState, new: NodeState) -> None:
        """Run, focused on the node, each invariant whose inputs about it changed in a way
        that can break it: a focused result depends only on those fields, and it held before
        the step."""
        nid = new.node_id
        state_changed = new.state is not old.state or new.epoch != old.epoch
        if new.state is ReplicaState.LEADER and state_changed:
            self._leaders[new.epoch] = self._leaders.get(new.epoch, frozenset()) | {nid}
        log_changed = (
            new.epochs is not old.epochs
            or new.log_end_offset != old.log_end_offset
            or new.flushed_offset != old.flushed_offset
        )
        extended = True  # the log only gained records (or did not change)
        durable_lost = False  # part of what the log had flushed is gone or different
        if log_changed:
            kept = inv.common_prefix(old.epochs, old.log_end_offset, new.epochs, new.log_end_offset)
            extended = kept >= old.log_end_offset
            durable_lost = min(kept, new.flushed_offset) < old.flushed_offset
        hwm_changed = new.high_watermark != old.high_watermark
        after = self._cluster()
        found: Violation | None = None
        if state_changed and new.state is ReplicaState.LEADER:
            found = inv.election_safety(after, nid)
        if found is None and (
            state_changed
            or log_changed
            or new.end_offset != old.end_offset
            or new.last_epoch != old.last_epoch
        ):
            found = inv.log_mirror(after, nid)
        if found is None and log_changed:
            found = inv.log_matching(after, nid)
        # Growing logs cannot break a majority; a leader's HWM or a lost durable prefix can.
        if found is None and (
            durable_lost or (new.state is ReplicaState.LEADER and (hwm_changed or state_changed))
        ):
            found = inv.majority_reached_high_watermark(after, nid)
        if found is None and (state_changed or hwm_changed or not extended):
            if not state_changed and extended and old.high_watermark is not None:
                # Only the HWM moved: acknowledgements below the old one were checked.
                acked = self._acked_t
                skip = bisect_left(self._acked_lasts, old.high_watermark)
                after = ClusterState(self._snaps, self._voter_set, self._leaders, acked[skip:])
            found = inv.committed_never_lost(after, nid)
        if found is None and (state_changed or hwm_changed or new.incarnation != old.incarnation):
            before = ClusterState({nid: old}, self._voter_set)
            found = inv.epoch_monotonic(before, after, nid) or inv.high_watermark_monotonic(
                before, after, nid
            )
        if found is not None:
            self._violation(found.name, found.detail)

    def _violation(self, name: str, detail: str) -> NoReturn:
        self.result.violations.append(
            Violation(name, f"{detail} [event {self.result.events}, t={self.now}ms]")
        )
        if self._trace is not None:
            self._side_lines.append(("Violation", None, {"type": name, "detail": detail}))
            self._flush_side_lines()
        raise _StopRun

    # ------------------------------------------------------------------ traces

    def _state_json(self, node: _Node) -> JsonObject:
        replica = node.replica
        if replica is None:
            p = node.persisted
            log = node.log
            return {
                "state": "Down",
                "epoch": int(p.epoch) if p else 0,
                "votedFor": int(p.voted_for.id) if p and p.voted_for else None,
                "leader": int(p.leader_id) if p and p.leader_id is not None else None,
                "endOffset": int(log.end_offset),
                "lastEpoch": int(log.last_epoch),
                "hwm": None,
                "logStartOffset": int(log.start_offset),
            }
        v = replica.view()
        return {
            "state": v.state.value,
            "epoch": int(v.epoch),
            "votedFor": int(v.voted_for.id) if v.voted_for is not None else None,
            "leader": int(v.leader_id) if v.leader_id is not None else None,
            "endOffset": int(v.end_offset),
            "lastEpoch": int(v.last_epoch),
            "hwm": None if v.high_watermark is None else int(v.high_watermark),
            "logStartOffset": int(v.log_start_offset),
        }

    def _write_step(
        self, node: _Node, event: Event | None, src_id: int | None, msg: Message | None
    ) -> None:
        actions = tuple(self._actions)
        self._actions.clear()
        message: JsonObject | None = None
        if msg is not None and src_id is not None:
            message = message_json(msg, src_id, int(node.id))
        elif isinstance(event, ClientAppend):
            message = {"type": "ClientAppend", "requestId": event.request_id,
                       "records": len(event.values)}  # fmt: skip
        elif isinstance(event, SendFailed):
            message = message_json(event.request, int(node.id), int(event.dst))
        action = actions[0] if actions else _EVENT_NAMES.get(type(event), type(event).__name__)
        self._write_line(node.id, action, actions, message, self._state_json(node))
        self._flush_side_lines()

    def _write_line(
        self,
        node: NodeId | None,
        action: str,
        actions: tuple[str, ...],
        message: JsonObject | None,
        state: JsonObject | None,
    ) -> None:
        trace = self._trace
        assert trace is not None
        trace.write(
            TraceEvent(
                index=trace.count,
                time=self.now,
                node=None if node is None else int(node),
                action=action,
                actions=actions,
                message=message,
                state=state,
            )
        )

    def _flush_side_lines(self) -> None:
        lines = self._side_lines
        if not lines:
            return
        self._side_lines = []
        for action, node, message in lines:
            state = None
            if node is not None and action not in ("DropMessage", "DuplicateMessage"):
                state = self._state_json(self._nodes[node])
            self._write_line(node, action, (), message, state)

    def _sim_event(self, action: str, node: _Node | None, message: JsonObject | None) -> None:
        """A simulator action that is its own event (Crash, Restart, Partition, Heal...)."""
        self.result.events += 1
        if self._trace is not None:
            state = None if node is None else self._state_json(node)
            nid = None if node is None else node.id
            self._write_line(nid, action, (), message, state)
            self._flush_side_lines()

    # ------------------------------------------------------------------ node lifecycle

    def _start_node(self, node: _Node, action: str) -> None:
        cfg = self.config
        rng = random.Random(f"{cfg.seed}/{node.id}/{node.inc}")
        setup = NodeSetup(
            node=node.key,
            cluster_id=ClusterId(cfg.cluster_id),
            voters=self._voter_keys,
            timing=cfg.timing,
            election_state=node.persisted,
            log=node.log,
            rng=rng,
            now_ms=self.now,
        )
        try:
            replica = self._factory(setup)
            node.replica = replica
            node.shutting_down = False
            node.tick_at = -1
            effects = replica.start()
        except _StopRun:
            raise
        except Exception as exc:
            self._violation(
                "ReplicaRaised", f"node {node.id} raised {type(exc).__name__} at {action}: {exc}"
            )
        self._actions.insert(0, action)
        self._apply(node, effects, None, None)
        self._schedule_tick(node, replica.next_deadline_ms())
        self._after_step(node, None, None, None)

    def _crash(self, node: _Node) -> None:
        node.replica = None
        node.log.simulate_crash()
        node.log_dirty = True
        self.result.crashes += 1
        self._node_stopped(node, "Crash")

    def _node_stopped(self, node: _Node, action: str) -> None:
        # A new incarnation: messages and timers aimed at the old one die with it (its
        # connections closed), and the next start derives a fresh generator from it.
        node.inc += 1
        node.shutting_down = False
        node.stop_requested = False
        node.tick_at = -1
        self._retry_inflight(node)
        old = node.snap
        new = self._snapshot(node)
        node.snap = new
        self._snaps[node.id] = new
        self._sim_event(action, node, None)
        self._check_node(old, new)
        lo, hi = self._profile.down_ms
        down = lo + int(self._rng.random() * (hi - lo + 1))
        self._push(self.now + (0 if self._liveness else down), _RESTART, node, node.inc)

    # ------------------------------------------------------------------ faults

    def _fault(self, kind: str) -> None:
        p = self._profile
        if kind == _PARTITION:
            self._partition()
            self._push(self.now + self._exp_ms(p.partition_rate), _FAULT, kind)
        elif kind == _CRASH:
            victim = self._pick_victim()
            if victim is not None:
                self._crash(victim)
            self._push(self.now + self._exp_ms(p.crash_rate), _FAULT, kind)
        elif kind == _SHUTDOWN:
            victim = self._pick_victim()
            if victim is not None:
                self._shutdown(victim)
            self._push(self.now + self._exp_ms(p.shutdown_rate), _FAULT, kind)

    def _pick_victim(self) -> _Node | None:
        up = [n for n in self._nodes.values() if n.replica is not None and not n.shutting_down]
        if not up:
            return None
        victim = up[int(self._rng.random() * len(up))]
        if victim.is_voter:
            cap = self._profile.max_down
            if cap is None:
                cap = (len(self._voter_ids) - 1) // 2
            down = sum(
                1
                for i in self._voter_ids
                if self._nodes[i].replica is None or self._nodes[i].shutting_down
            )
            if down >= cap:
                return None
        return victim

    def _shutdown(self, node: _Node) -> None:
        self.result.shutdowns += 1
        node.shutting_down = True
        inc = node.inc
        timeout = 2 * self.config.timing.request_timeout_ms
        self._push(self.now + timeout, _FORCE_STOP, node, inc)
        self._step(node, Shutdown(self.now), None, None, None)

    def _partition(self) -> None:
        rng = self._rng
        ids = list(self._nodes)
        if len(ids) < 2:
            return
        links: list[tuple[NodeId, NodeId]] = []
        if rng.random() < self._profile.one_way_fraction:
            a = ids[int(rng.random() * len(ids))]
            others = [i for i in ids if i != a]
            b = others[int(rng.random() * len(others))]
            links.append((a, b))
        else:
            rng.shuffle(ids)
            cut = 1 + int(rng.random() * (len(ids) - 1))
            side_a, side_b = sorted(ids[:cut]), sorted(ids[cut:])
            for x in side_a:
                for y in side_b:
                    links += [(x, y), (y, x)]
        pid = self._seq
        self._partitions[pid] = links
        for link in links:
            self._blocked[link] = self._blocked.get(link, 0) + 1
        self.result.partitions += 1
        lo, hi = self._profile.partition_ms
        self._push(self.now + lo + int(rng.random() * (hi - lo + 1)), _HEAL, pid)
        self._sim_event(
            "Partition", None, {"type": "Partition", "id": pid, "links": _links_json(links)}
        )

    def _heal(self, pid: int) -> None:
        links = self._partitions.pop(pid, None)
        if links is None:
            return
        for link in links:
            left = self._blocked[link] - 1
            if left:
                self._blocked[link] = left
            else:
                del self._blocked[link]
        self._sim_event("Heal", None, {"type": "Heal", "id": pid, "links": _links_json(links)})

    # ------------------------------------------------------------------ the client

    def _client_new(self) -> None:
        if len(self._pending) >= _MAX_CLIENT_OUTSTANDING:
            return
        rid = self._next_rid
        self._next_rid += 1
        count = 1 + int(self._rng.random() * 3)
        values = tuple(b"r%d.%d" % (rid, k) for k in range(count))
        req = _ClientRequest(rid, values, self._client_leader)
        self._pending[rid] = req
        self._client_dispatch(req, self.now)

    def _client_dispatch(self, req: _ClientRequest, at: int) -> None:
        target = req.target
        if target is None or self._nodes[target].replica is None:
            up = [i for i in self._voter_ids if self._nodes[i].replica is not None]
            pool = up or list(self._voter_ids)
            target = pool[int(self._rng.random() * len(pool))]
            req.target = target
        self._push(at + self._delay(), _CLIENT_SEND, req.rid, target)

    def _client_send(self, rid: int, target: object) -> None:
        req = self._pending.get(rid)
        if req is None:
            return
        assert isinstance(target, int)
        node = self._nodes[NodeId(target)]
        if node.replica is None:
            req.target = None
            self._client_retry(req)
            return
        req.attempts += 1
        self._inflight[node.id][rid] = req
        event = ClientAppend(self.now, req.values, rid)
        self._step(node, event, None, None, None)

    def _client_retry(self, req: _ClientRequest) -> None:
        if req.attempts >= _MAX_CLIENT_ATTEMPTS and not self._liveness:
            self._pending.pop(req.rid, None)
            self.result.gave_up += 1
            return
        base = self.config.timing.retry_backoff_ms << min(req.attempts, 8)
        backoff = min(base, _CLIENT_BACKOFF_CAP_MS)
        self._client_dispatch(req, self.now + backoff // 2 + int(self._rng.random() * backoff / 2))

    def _retry_inflight(self, node: _Node) -> None:
        inflight = self._inflight[node.id]
        if inflight:
            for req in list(inflight.values()):
                req.target = None
                self._client_retry(req)
            inflight.clear()

    def _append_result(self, node: _Node, res: AppendResult) -> None:
        req = self._inflight[node.id].pop(res.request_id, None)
        if req is None:
            return
        if res.error == ErrorCode.NONE:
            first, last, epoch = res.first_offset, res.last_offset, res.epoch
            if first is None or last is None or epoch is None:
                self._violation(
                    "EffectRejected", f"node {node.id} accepted request {req.rid} without offsets"
                )
            self._pending.pop(req.rid, None)
            self.result.accepted += 1
            self._client_leader = node.id
            self._accepted[req.rid] = (node.id, first, last, epoch)
            self._watch.setdefault((node.id, epoch), deque()).append((last, first, req.rid))
        elif res.error == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            req.target = res.leader_id
            if res.leader_id is not None and res.leader_id != node.id:
                self._client_leader = res.leader_id
            self._client_retry(req)
        else:
            self._pending.pop(req.rid, None)
            self.result.refused += 1

    def _watch_acks(self, node: _Node, snap: NodeState) -> None:
        """An accepted append is acknowledged once its leader, still leader in that epoch,
        exposes a HWM above its last offset."""
        hwm = snap.high_watermark
        if snap.state is not ReplicaState.LEADER or hwm is None:
            return
        queue = self._watch.get((node.id, snap.epoch))
        if not queue:
            return
        while queue and queue[0][0] < hwm:
            last, first, rid = queue.popleft()
            self._acknowledge(rid, first, last, snap.epoch)

    def _acknowledge(self, rid: int, first: Offset, last: Offset, epoch: Epoch) -> None:
        self._accepted.pop(rid, None)
        self.result.committed += 1
        new = AckedRange(first, last, epoch)
        acked = self._acked
        if acked and acked[-1].epoch == epoch:
            top = acked[-1]
            acked[-1] = AckedRange(min(top.first, first), max(top.last, last), epoch)
            self._acked_lasts[-1] = acked[-1].last
        else:
            acked.append(new)
            self._acked_lasts.append(last)
        self._acked_t = tuple(acked)
        # The new acknowledgement against every node; older ones were checked already.
        v = self._check and inv.committed_never_lost(replace(self._cluster(), acknowledged=(new,)))
        if v:
            self._violation(v.name, v.detail)
        if rid == self._probe:
            self._probe = None

    # ------------------------------------------------------------------ liveness

    def _start_liveness(self) -> None:
        self._liveness = True
        self._liveness_start = self.now
        self._liveness_deadline = self.now + self.config.liveness_bound
        self._loss = 0.0
        self._duplicate = 0.0
        for pid in sorted(self._partitions):
            self._heal(pid)
        for node in self._nodes.values():
            if node.replica is None:
                self._start_node(node, "Restart")
        self._liveness_progress()

    def _liveness_progress(self) -> None:
        leader = self._stable_leader
        if leader is not None and self._snaps[leader].state is not ReplicaState.LEADER:
            leader = self._stable_leader = None  # leadership moved after it settled
        if leader is None:
            leader = self._find_stable_leader()
            if leader is None:
                return
            self._stable_leader = leader
            if self.result.recovery_ms is None:
                self.result.recovery_ms = self.now - self._liveness_start
            # A fresh probe for each settled leader: one accepted by a former leader may
            # never be acknowledged (it is decided below like any other append).
            rid = self._next_rid
            self._next_rid += 1
            self._probe = rid
            req = _ClientRequest(rid, (b"probe",), leader)
            self._pending[rid] = req
            self._client_dispatch(req, self.now)
            return
        if self._probe is not None or self._pending:
            return
        snap = self._snaps[leader]
        for rid, (_nid, _first, last, epoch) in list(self._accepted.items()):
            if epoch >= snap.epoch:
                return  # still awaiting its acknowledgement
            # An older epoch is decided once the leader committed in its own epoch (the
            # probe): either that record is in the committed log or it never will be.
            if inv.epoch_at(snap.epochs, snap.log_end_offset, last) != epoch:
                self.result.lost += 1
            del self._accepted[rid]
        raise _StopRun

    def _find_stable_leader(self) -> NodeId | None:
        leaders = [s for s in self._snaps.values() if s.state is ReplicaState.LEADER]
        if len(leaders) != 1:
            return None
        leader = leaders[0]
        for vid in self._voter_ids:
            s = self._snaps[vid]
            if vid == leader.node_id:
                continue
            if s.state is None or s.epoch != leader.epoch or s.leader_id != leader.node_id:
                return None
        return leader.node_id

    def _liveness_failed(self) -> NoReturn:
        bound = self.config.liveness_bound
        if self._stable_leader is None:
            states = ", ".join(
                f"{s.node_id}:{'Down' if s.state is None else s.state.value}@{s.epoch}"
                f"->{s.leader_id}"
                for s in self._snaps.values()
            )
            self._violation(
                inv.EVENTUALLY_LEADER_ELECTED,
                f"no leader followed by every voter within {bound}ms of healing ({states})",
            )
        leader = self._snaps[self._stable_leader]
        current = sorted(r for r, a in self._accepted.items() if a[3] >= leader.epoch)
        self._violation(
            inv.EVENTUALLY_COMMITTED,
            f"within {bound}ms of healing, leader {leader.node_id} (epoch {leader.epoch}, HWM"
            f" {leader.high_watermark}): probe {self._probe} acknowledged={self._probe is None},"
            f" unanswered requests {sorted(self._pending)[:10]}, accepted in its epoch but"
            f" unacknowledged {current[:10]}",
        )


_REQUEST_MESSAGES = (
    VoteRequest,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
)

_EVENT_NAMES: dict[type, str] = {
    Tick: "Tick",
    Receive: "Receive",
    SendFailed: "SendFailed",
    ClientAppend: "ClientAppend",
    Shutdown: "Shutdown",
}


def _links_json(links: list[tuple[NodeId, NodeId]]) -> list[JsonValue]:
    return [[int(a), int(b)] for a, b in links]


# --------------------------------------------------------------------------- entry points


def simulate(
    config: SimConfig,
    *,
    replica_factory: ReplicaFactory = core_replica_factory,
    trace: IO[str] | None = None,
) -> SimResult:
    return Simulator(config, replica_factory=replica_factory, trace=trace).run()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m refinement.sim",
        description="Run the deterministic KRaft cluster simulator on one seed (or a range).",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the run (first of --seeds)")
    p.add_argument("--seeds", type=int, default=1, help="run this many consecutive seeds")
    p.add_argument("--profile", choices=sorted(PROFILES), default="mixed", help="fault profile")
    p.add_argument("--events", type=int, default=1500, help="events in the fault phase")
    p.add_argument("--voters", type=int, default=3)
    p.add_argument("--observers", type=int, default=0)
    p.add_argument("--append-rate", type=float, default=20.0, help="client appends per second")
    p.add_argument("--no-liveness", action="store_true", help="skip the liveness phase")
    p.add_argument("--trace", metavar="FILE", help="write the ndjson trace here (one seed)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    failed = 0
    for seed in range(args.seed, args.seed + args.seeds):
        config = SimConfig(
            seed=seed,
            voters=args.voters,
            observers=args.observers,
            max_events=args.events,
            append_rate=args.append_rate,
            profile=PROFILES[args.profile],
            check_liveness=not args.no_liveness,
        )
        if args.trace and args.seeds == 1:
            with open(args.trace, "w", encoding="utf-8") as out:
                result = simulate(config, trace=out)
        else:
            result = simulate(config)
        print(result.summary())
        failed += not result.ok
    if args.seeds > 1:
        print(f"{args.seeds} seeds, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
