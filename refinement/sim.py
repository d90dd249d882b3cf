"""A deterministic simulator of a KRaft cluster: virtual time, seeded faults, checkers after
every event.

The simulator drives the pure replica core (kraft.core.replica) over an in-memory network and
in-memory logs (kraft.storage.memory_log.MemoryLog). One `random.Random(seed)` draws every network
delay, loss, duplication, partition, crash and client append; each replica gets its own
generator derived from (seed, node, incarnation). Same seed, same run, same trace bytes.

A run has two phases. The fault phase lasts `events` events: messages are lost, duplicated
and reordered, links partitioned, nodes crashed (losing what their log did not flush; the
quorum-state survives) or shut down gracefully, as the fault profile says; under a profile that
takes snapshots (refinement.faults: "snapshots", "NAME+snapshots", "disk-loss") replicas also
snapshot, move their log start and fetch snapshots in chunks (refinement.sim_snapshots), which
may be corrupted, and crash mid-transfer; under disk-loss, observers lose their whole disk.
Under a `NAME+reconfig` profile the quorum is dynamic (KIP-853) and an operator adds and
removes voters meanwhile (refinement.sim_reconfig): leaders crash mid-change, changes are
truncated away, removed leaders resign, voters lose their disk and return as new replicas.
The liveness phase then heals everything, restarts stopped nodes, and requires within a bound
a leader that every voter follows (EventuallyLeaderElected) and every client append answered
and decided, plus a fresh probe append acknowledged (EventuallyCommitted), and under
disk-loss every observer caught up (EventuallyCaughtUp); under a `+reconfig` profile the
settled leader is one of its voters and its latest voter change is committed
(ReconfigEventuallyCompletes).

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
import sys
import time
from collections.abc import Sequence
from typing import IO

from kraft.core.timing import QuorumTiming
from refinement.faults import PROFILES
from refinement.sim_base import (
    _ADMIN,
    _CLIENT_NEW,
    _CLIENT_SEND,
    _CRASH,
    _DELIVER,
    _DISK_LOSS,
    _FAULT,
    _FORCE_STOP,
    _HEAL,
    _LOCAL,
    _NODE_CRASH,
    _PARTITION,
    _RESTART,
    _SEND_FAILED,
    _SHUTDOWN,
    _TICK,
    _Node,
    _StopRun,
)
from refinement.sim_config import (
    NodeSetup,
    ReplicaFactory,
    ReplicaViewLike,
    SimConfig,
    SimReplica,
    SimResult,
    core_replica_factory,
)
from refinement.sim_liveness import SimLiveness

__all__ = [
    "NodeSetup",
    "ReplicaFactory",
    "ReplicaViewLike",
    "SimConfig",
    "SimReplica",
    "SimResult",
    "Simulator",
    "core_replica_factory",
    "main",
    "simulate",
]


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
            (_DISK_LOSS, p.disk_loss_rate),
        ):
            if rate > 0:
                self._push(self._exp_ms(rate), _FAULT, fault)
        self._start_snapshot_policy()
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
                    self._check_producer_logs()
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
            elif kind == _LOCAL:
                assert isinstance(a, _Node) and isinstance(b, tuple)
                self._local(a, b)
            elif kind == _NODE_CRASH:
                assert isinstance(a, _Node)
                self._crash_aimed(a, b)
            elif kind == _ADMIN:
                self._admin_event(a, b)
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
    p.add_argument("--linger-ms", type=int, default=0, help="quorum.append.linger.ms")
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
            timing=QuorumTiming(append_linger_ms=args.linger_ms),
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
