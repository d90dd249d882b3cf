"""A tiny deterministic harness for unit tests of one Replica: the in-memory log
(kraft.storage.memory_log.MemoryLog, whose log effects it performs as the node does), a seeded
rng, and helpers to pick effects."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from typing import TypeVar

from memory_logs import build_log, key, perform_append, perform_snapshot_effect

from kraft.core.effects import (
    AppendToLog,
    Effect,
    ElectionState,
    FlushLog,
    PersistElectionState,
    Send,
    TruncateLog,
)
from kraft.core.events import Event, Receive, Tick
from kraft.core.messages import Message, Request, VoteResponse
from kraft.core.replica import Replica, ReplicaConfig
from kraft.core.snapshots import LogStartPolicy
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_set import VoterSet
from kraft.errors import ErrorCode
from kraft.ids import NO_NODE, ClusterId, Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey
from kraft.storage.log_adapter import BatchReader, log_state_of
from kraft.storage.memory_log import MemoryLog
from kraft.storage.memory_snapshots import MemorySnapshots

CLUSTER = ClusterId("unit-cluster")
T = TypeVar("T")


class Harness:
    """One replica under test plus its log; `step` applies log effects to the log."""

    def __init__(
        self,
        node: int = 1,
        voters: Sequence[int] = (1, 2, 3),
        *,
        election: ElectionState | None = None,
        log: MemoryLog | None = None,
        seed: int = 0,
        now: int = 0,
        snapshots: MemorySnapshots | None = None,
        snapshot_ids: tuple[OffsetAndEpoch, ...] = (),
        log_start_policy: LogStartPolicy = LogStartPolicy.KIP_630,
        node_key: ReplicaKey | None = None,
        static_voters: tuple[ReplicaKey, ...] | None = None,
        voter_history: tuple[tuple[Offset, VoterSet], ...] = (),
        **cfg: int,
    ) -> None:
        """`node_key`: the replica's own key when it is not `key(node)` (another directory);
        `static_voters`: the configured voters when they are not `voters`' keys;
        `voter_history`: the voter sets its storage states (LogState.voter_history)."""
        self.now = now
        self.log = log or MemoryLog()
        self.snapshots = snapshots
        self.config = ReplicaConfig(
            node_key or key(node),
            CLUSTER,
            static_voters if static_voters is not None else tuple(key(v) for v in voters),
            QuorumTiming(**cfg),
            log_start_policy,
        )
        self.replica = Replica(
            self.config,
            election_state=election,
            log_state=replace(
                log_state_of(self.log), snapshots=snapshot_ids, voter_history=voter_history
            ),
            reader=BatchReader(self.log),
            rng=random.Random(seed),
            now_ms=now,
            snapshots=snapshots,
        )
        self.stored = election
        self.start_effects = self.apply(self.replica.start())

    def apply(self, effects: list[Effect]) -> list[Effect]:
        for e in effects:
            if isinstance(e, AppendToLog):
                perform_append(self.log, e)
            elif isinstance(e, TruncateLog):
                self.log.truncate_to(e.offset)
            elif isinstance(e, FlushLog):
                self.log.flush()
            elif isinstance(e, PersistElectionState):
                self.stored = e.state
            elif self.snapshots is not None:
                perform_snapshot_effect(self.log, self.snapshots, e)
        return effects

    def step(self, event: Event) -> list[Effect]:
        return self.apply(self.replica.step(event))

    def recv(self, src: int, msg: Message, in_reply_to: Request | None = None) -> list[Effect]:
        return self.step(Receive(self.now, NodeId(src), msg, in_reply_to))

    def tick(self, to: int | None = None) -> list[Effect]:
        self.now = self.replica.next_deadline_ms() if to is None else to
        return self.step(Tick(self.now))

    @property
    def view(self):  # type: ignore[no-untyped-def]
        return self.replica.view()


def grant(epoch: int, leader: int = NO_NODE) -> VoteResponse:
    """A granted vote (or pre-vote) answer in `epoch`."""
    return VoteResponse(ErrorCode.NONE, NodeId(leader), Epoch(epoch), True)


def stand(h: Harness) -> list[Effect]:
    """Make the replica a Candidate: its election (or fetch) timeout makes it Prospective,
    then the other voters grant its pre-vote one by one until it has a majority. Returns the
    effects of the step in which it became Candidate (with its Vote requests)."""
    effects: list[Effect] = []
    if h.view.state is not ReplicaState.PROSPECTIVE:
        effects = h.tick()
    epoch = int(h.view.epoch)
    me = int(h.view.node_id)
    for v in h.view.voters:  # the replica's voter set (the configured one or its log's)
        if h.view.state is not ReplicaState.PROSPECTIVE:
            break
        if int(v) != me:
            effects = h.recv(int(v), grant(epoch))
    assert h.view.state in (ReplicaState.CANDIDATE, ReplicaState.LEADER), h.view
    return effects


def of(effects: Sequence[Effect], cls: type[T]) -> list[T]:
    return [e for e in effects if isinstance(e, cls)]


def sent(effects: Sequence[Effect], cls: type[T]) -> list[tuple[int, T]]:
    return [(int(e.dst), e.message) for e in of(effects, Send) if isinstance(e.message, cls)]


def index(effects: Sequence[Effect], pred: object) -> int:
    assert callable(pred)
    for i, e in enumerate(effects):
        if pred(e):
            return i
    raise AssertionError("no such effect")


__all__ = [
    "CLUSTER",
    "Epoch",
    "FlushLog",
    "Harness",
    "MemoryLog",
    "Offset",
    "build_log",
    "grant",
    "index",
    "key",
    "of",
    "perform_snapshot_effect",
    "sent",
    "stand",
]
