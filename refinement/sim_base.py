"""The simulator's ground floor: the per-node record, heap entry kinds, the run's shared state,
scheduling, trace lines, node snapshots and violations.

The simulator (refinement.sim.Simulator) is built in layers, each a class in its own module
extending the one below: sim_base (this), sim_network (messages, stepping replicas, applying
effects, the checks after every step), sim_snapshots (KIP-630, under a profile that takes
snapshots), sim_faults (node lifecycle and injected faults),
sim_clients (the simulated client and the commit rule's outcomes), sim_reconfig (KIP-853, under
a `+reconfig` profile: the dynamic quorum and its operator), sim_liveness (the liveness
phase), sim_adversary (under a `+adversary` profile: forged and corrupted messages), and
refinement.sim (configuration, the run loop, the entry points). A lower layer calls
a few steps of the layers above; they are declared at the end of SimBase.
"""

from __future__ import annotations

import heapq
import random
import uuid
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, NoReturn

from kraft.core.effects import AppendResult, CheckVoterVersions, Effect, ElectionState
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
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    Message,
    VoteRequest,
)
from kraft.core.timing import QuorumTiming
from kraft.core.voter_set import VoterSet
from kraft.ids import DirectoryId, Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey
from kraft.storage.memory_log import MemoryLog
from kraft.storage.memory_snapshots import MemorySnapshots
from kraft.trace_format import (
    JsonObject,
    JsonValue,
    TraceEvent,
    TraceWriter,
    local_event_json,
    message_json,
)
from refinement.invariants import EpochCache, NodeState, Violation
from refinement.invariants_effects import ANSWERS

if TYPE_CHECKING:
    from refinement.sim_config import ReplicaFactory, SimConfig, SimReplica, SimResult


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
_LOCAL = 9  # a driver's answer to an effect (KIP-630: SnapshotWritten, SnapshotValidated)
_NODE_CRASH = 10  # a crash aimed at one incarnation (KIP-630: mid-transfer)
_ADMIN = 11  # the operator's AddRaftVoter/RemoveRaftVoter, or its answer (KIP-853)

# (virtual time, sequence number, kind, two payload slots whose meaning depends on kind)
_HeapEntry = tuple[int, int, int, object, object]

_PARTITION = "partition"
_CRASH = "crash"
_SHUTDOWN = "shutdown"
_SNAPSHOT = "snapshot"
_DISK_LOSS = "disk-loss"
_VOTER_DISK_LOSS = "voter-disk-loss"
_RECONFIG = "reconfig"

# The operator's address: voter changes come from it and their answers go to it (KIP-853).
ADMIN = NodeId(-1)

# The request each response answers (one table, the effect-contract checker's).
_REQUEST_OF = ANSWERS
_REQUEST_TYPES = frozenset(_REQUEST_OF.values())
_RESPONSE_TYPES = frozenset(_REQUEST_OF)


def directory_of(node: NodeId, generation: int = 0) -> DirectoryId:
    """Deterministic, non-zero storage ids, so the id alone names a replica in traces; a
    voter that lost its disk under a dynamic quorum is formatted again: `generation` > 0."""
    return DirectoryId(uuid.UUID(int=(0x5E1 << 64) | (generation << 32) | node))


class _StopRun(Exception):  # noqa: N818 (control flow, not an error)
    """Ends the event loop (a violation was found or the liveness phase finished)."""


class _Node:
    __slots__ = (
        "fetch_scope",
        "fetched_at",
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
        "snaps",
        "start_since",
        "stop_requested",
        "tick_at",
        "view",
        "voter_hist",
        "wiped",
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
        # KIP-630: the node's snapshots (None unless the profile takes snapshots).
        self.snaps: MemorySnapshots | None = None
        # Ghost (KIP-630): when this incarnation started or last moved its log start, the
        # clock of the lag-time rule (LogStartBelowLiveReplicas).
        self.start_since = 0
        # How many times the node lost its whole data directory (the disk-loss profile).
        self.wiped = 0
        # KIP-853 (a dynamic quorum): the voter sets its storage states, by offset (the
        # bootstrap's at -1, then its log's Voters records); empty for a static quorum.
        self.voter_hist: tuple[tuple[Offset, VoterSet], ...] = ()
        # Ghost (RemovedLeaderResignsNotEarly): while it leads, when each voter last made a
        # Fetch it certainly counted for check-quorum, gathered under `fetch_scope`
        # (incarnation, epoch, latest voter set); another scope starts them afresh.
        self.fetched_at: dict[NodeId, int] = {}
        self.fetch_scope: tuple[int, Epoch, tuple[Offset, VoterSet]] | None = None
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
    # KIP-630 (the snapshots profile): the state machine asks; the driver answers.
    CreateSnapshot: "AskCreateSnapshot",
    SnapshotWritten: "SnapshotWritten",
    SnapshotValidated: "SnapshotValidated",
}


def _links_json(links: list[tuple[NodeId, NodeId]]) -> list[JsonValue]:
    return [[int(a), int(b)] for a, b in links]


class SimBase:
    """The state every layer shares, scheduling, trace lines, node snapshots, violations."""

    def __init__(
        self,
        config: SimConfig,
        result: SimResult,
        replica_factory: ReplicaFactory,
        trace: IO[str] | None,
    ) -> None:
        self.config = config
        self._factory = replica_factory
        self._trace = TraceWriter(trace) if trace is not None else None
        self._rng = random.Random(config.seed)
        self._profile = config.profile
        self._check = config.check_invariants
        self._heap: list[_HeapEntry] = []
        self._seq = 0
        self.now = 0
        self.result = result
        voters = config.voter_ids  # 1..n, observers after them
        n_total = len(voters) + max(config.observers, config.profile.observers)
        self._nodes: dict[NodeId, _Node] = {
            NodeId(i): _Node(NodeId(i), i in voters) for i in range(1, n_total + 1)
        }
        self._voter_ids = tuple(NodeId(i) for i in voters)
        self._voter_keys = tuple(self._nodes[i].key for i in self._voter_ids)
        self._voter_set = frozenset(self._voter_ids)
        self._snaps: dict[NodeId, NodeState] = {i: n.snap for i, n in self._nodes.items()}
        # The phase: False while faults are injected, True once the liveness phase began.
        self._liveness = False
        # Per-step scratch: actions taken and simulator lines to emit after the step line.
        self._actions: list[str] = []
        self._voter: int | None = None  # the voter the step's AddVoter / RemoveVoter named
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
        voter, self._voter = self._voter, None
        message: JsonObject | None = None
        if msg is not None and src_id is not None:
            message = message_json(msg, src_id, int(node.id))
        elif isinstance(event, ClientAppend):
            message = {"type": "ClientAppend", "requestId": event.request_id,
                       "records": len(event.records)}  # fmt: skip
        elif isinstance(event, SendFailed):
            message = message_json(event.request, int(node.id), int(event.dst))
        else:
            message = local_event_json(event)  # the snapshot events trace validation reads
        action = actions[0] if actions else _EVENT_NAMES.get(type(event), type(event).__name__)
        self._write_line(node.id, action, actions, message, self._state_json(node), voter=voter)
        self._flush_side_lines()

    def _write_line(
        self,
        node: NodeId | None,
        action: str,
        actions: tuple[str, ...],
        message: JsonObject | None,
        state: JsonObject | None,
        *,
        voter: int | None = None,
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
                voter=voter,
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

    # ------------------------------------------------------------------ per-step helpers

    def _side(
        self, action: str, node: NodeId | None, describe: Callable[[], JsonObject] | None
    ) -> None:
        """A simulator event: counted, traced after the current step's line."""
        self.result.events += 1
        if self._trace is not None:
            self._side_lines.append((action, node, None if describe is None else describe()))
        elif self._side_lines:
            self._side_lines.clear()

    def _snapshot(self, node: _Node) -> NodeState:
        log = node.log
        old = node.snap
        held = old.snapshots
        if node.log_dirty:
            if node.snaps is None:
                epochs = log.epoch_entries()
            else:
                epochs, held = self._log_histories(node)
                if held == old.snapshots:
                    held = old.snapshots
            if epochs == old.epochs:
                epochs = old.epochs
            node.log_dirty = False
        else:
            epochs = old.epochs
        # With snapshots, an empty log's last epoch is its snapshot's (Kafka's lastFetchedEpoch).
        last_epoch = log.last_epoch if node.snaps is None or not epochs else epochs[-1][0]
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
                last_epoch=last_epoch,
                high_watermark=None,
                max_high_watermark=None,
                log_end_offset=log.end_offset,
                log_last_epoch=last_epoch,
                flushed_offset=log.flushed_offset,
                epochs=epochs,
                log_start_offset=log.start_offset,
                start_offset=log.start_offset,
                snapshots=held,
                wiped=node.wiped,
                key=node.key,
                voter_history=node.voter_hist,
            )
        v = replica.view()
        if (
            v is node.view
            and old.incarnation == node.inc
            and log.end_offset == old.log_end_offset
            and log.flushed_offset == old.flushed_offset
            and epochs is old.epochs
            and held is old.snapshots
            and log.start_offset == old.log_start_offset
            and node.voter_hist is old.voter_history
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
            last_epoch,
            log.flushed_offset,
            epochs,
            log.start_offset,
            v.log_start_offset,
            held,
            node.wiped,
            node.key,
            node.voter_hist,
        )

    def _violation(self, name: str, detail: str) -> NoReturn:
        self.result.violations.append(
            Violation(name, f"{detail} [event {self.result.events}, t={self.now}ms]")
        )
        if self._trace is not None:
            self._side_lines.append(("Violation", None, {"type": name, "detail": detail}))
            self._flush_side_lines()
        raise _StopRun

    # ------------------------------------------------------------------ provided above

    # Steps of one layer that a lower layer calls: each is defined by the layer named.

    def _node_stopped(self, node: _Node, action: str) -> None:
        """A node stopped (crash or clean stop): refinement.sim_faults."""
        raise NotImplementedError

    def _retry_inflight(self, node: _Node) -> None:
        """The client retries what it sent to a stopped node: refinement.sim_clients."""
        raise NotImplementedError

    def _append_result(self, node: _Node, res: AppendResult) -> None:
        """The client hears an AppendResult: refinement.sim_clients."""
        raise NotImplementedError

    def _decide(self) -> None:
        """The client hears this step's AppendCommitted/AppendLost: refinement.sim_clients."""
        raise NotImplementedError

    def _log_histories(
        self, node: _Node
    ) -> tuple[EpochCache, tuple[tuple[OffsetAndEpoch, EpochCache], ...]]:
        """A node's whole history and its snapshots': refinement.sim_snapshots."""
        raise NotImplementedError

    def _log_start_followed(
        self, node: _Node, src: NodeId, msg: FetchResponse, before: FetchRequest | None, inc: int
    ) -> None:
        """LogStartFollowsLeader after a Fetch answer: refinement.sim_snapshots."""
        raise NotImplementedError

    def _snapshot_effect(self, node: _Node, e: Effect) -> None:
        """A KIP-630 effect: refinement.sim_snapshots."""
        raise NotImplementedError

    def _liveness_progress(self) -> None:
        """After every step of the liveness phase: refinement.sim_liveness."""
        raise NotImplementedError

    def _timing_of(self) -> QuorumTiming:
        """The timing the replicas run with: refinement.sim_faults."""
        raise NotImplementedError

    def _maybe_crash_mid_change(self, node: _Node, action: str) -> None:
        """A leader appended a voter change; maybe crash it now: refinement.sim_reconfig."""
        raise NotImplementedError

    def _leader_elected(self) -> None:
        """A replica became leader (dynamic quorum): refinement.sim_reconfig."""
        raise NotImplementedError

    def _check_versions(self, node: _Node, e: CheckVoterVersions) -> None:
        """The leader probes a replica it is asked to add: refinement.sim_reconfig."""
        raise NotImplementedError

    def _admin_answer(self, src: _Node, msg: Message, reply_to: int | None) -> None:
        """A voter change's answer to the operator: refinement.sim_reconfig."""
        raise NotImplementedError

    def _log_voters_changed(
        self, node: _Node, appended: bytes | memoryview | None, *, written: bool = False
    ) -> None:
        """The node's log gained these batches (None: it shrank), `written` by it as the
        leader rather than replicated: refinement.sim_reconfig."""
        raise NotImplementedError
