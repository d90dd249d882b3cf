"""A deterministic simulator of a KRaft cluster: virtual time, seeded faults, checkers after
every event.

The simulator drives the pure replica core (kraft.core.replica) over an in-memory network and
in-memory logs (kraft.storage.memory_log.MemoryLog). One `random.Random(seed)` draws every network
delay, loss, duplication, partition, crash and client append; each replica gets its own
generator derived from (seed, node, incarnation). Same seed, same run, same trace bytes.

A run has two phases. The fault phase lasts `events` events: messages are lost, duplicated
and reordered, links partitioned, nodes crashed (losing what their log did not flush; the
quorum-state survives) or shut down gracefully, as the fault profile says. The liveness phase
then heals everything, restarts stopped nodes, and requires within a bound a leader that every
voter follows (EventuallyLeaderElected) and every client append answered and decided, plus a
fresh probe append acknowledged (EventuallyCommitted).

The client hears the core's commit rule (kraft.core.commits), as the node's clients do: an
accepted append is acknowledged when the accepting replica emits AppendCommitted, counted lost
on its AppendLost. A replica that crashes forgets what it accepted; the liveness phase decides
those appends (and any a live replica has not decided by the end) from the settled leader's log.

The Simulator is built in layers, one module each (refinement.sim_base lists them); this
module holds the configuration, what is driven, the result, the run loop and the command line.

Replay a run: python -m refinement.sim --seed N --profile P --events E [--trace out.ndjson]
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Protocol

from kraft.core.effects import Effect, ElectionState
from kraft.core.events import Event
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import ReplicaState
from kraft.ids import ClusterId, Epoch, NodeId, Offset, ReplicaKey
from kraft.storage.memory_log import MemoryLog
from refinement.faults import PROFILES, FaultProfile
from refinement.invariants import Violation
from refinement.sim_base import (
    _CLIENT_NEW,
    _CLIENT_SEND,
    _CRASH,
    _DELIVER,
    _FAULT,
    _FORCE_STOP,
    _HEAL,
    _PARTITION,
    _RESTART,
    _SEND_FAILED,
    _SHUTDOWN,
    _TICK,
    _Node,
    _StopRun,
)
from refinement.sim_liveness import SimLiveness

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
    from kraft.storage.log_adapter import BatchReader, log_state_of

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
    # Virtual ms from each acknowledged append's acceptance to its AppendCommitted, in order.
    commit_latency_ms: list[int] = field(default_factory=list)
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


class Simulator(SimLiveness):
    """One run of one seed. `run()` once; the result says what happened. Built in layers
    (refinement.sim_base says which); this one holds the run loop."""

    def __init__(
        self,
        config: SimConfig,
        *,
        replica_factory: ReplicaFactory = core_replica_factory,
        trace: IO[str] | None = None,
    ) -> None:
        if config.voters < 1:
            raise ValueError("at least one voter")
        super().__init__(config, SimResult(config), replica_factory, trace)

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
