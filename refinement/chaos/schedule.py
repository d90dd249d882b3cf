"""The seeded fault schedule: a pure function of (seed, cycles, fault kinds).

A schedule is a list of `Fault`s, one per cycle. Every random choice is drawn here from a
`random.Random(seed)`: which kind, which role it targets (the leader, a follower by index),
how long it lasts, the delay, the loss rate, where an un-fsynced tail is cut. The same seed
gives the same schedule, byte for byte (`Fault.describe`). What is *not* deterministic is how
real processes interleave with it: which node happens to lead when a cycle starts, how many
records are in flight at a kill, how long an election takes. The schedule names roles, and
the runner resolves them against the cluster it observes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import Enum

__all__ = ["Fault", "FaultKind", "Target", "make_schedule", "parse_kinds"]


class FaultKind(Enum):
    KILL_LEADER = "kill-leader"  # SIGKILL of the leader, restart after hold_ms
    KILL_FOLLOWER = "kill-follower"  # SIGKILL of a follower, restart after hold_ms
    KILL_TWO = "kill-two"  # SIGKILL of two nodes at once (no quorum), restart both
    PAUSE_LEADER = "pause-leader"  # SIGSTOP of the leader (a zombie), SIGCONT after hold_ms
    PARTITION_LEADER = "partition-leader"  # the leader cut off from every peer, both ways
    PARTITION_RANDOM = "partition-random"  # a random node cut off from the others
    ONE_WAY = "one-way"  # messages from the leader to the others (or back) dropped
    SLOW_NETWORK = "slow-network"  # every link delays each message by delay_ms +- jitter
    LOSSY_NETWORK = "lossy-network"  # every link drops each message with probability loss
    CRASH_UNFLUSHED = "crash-unflushed"  # SIGKILL, the un-fsynced log tail dropped, restart


ALL_KINDS: tuple[FaultKind, ...] = tuple(FaultKind)

# Faults that must outlast the followers' fetch timeout (the harness runs the nodes with
# 1000 ms, jittered by up to half the 500 ms election timeout) to make them elect another
# leader while the old one is paused or cut off: a zombie, not a hiccup.
LEADER_LOSS_KINDS = frozenset({FaultKind.PAUSE_LEADER, FaultKind.PARTITION_LEADER})
LEADER_LOSS_MIN_HOLD_MS = 2000


class Target(Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(frozen=True, slots=True)
class Fault:
    cycle: int
    kind: FaultKind
    target: Target
    # Which follower (an index into the sorted followers, modulo their number).
    pick: int
    hold_ms: int
    # SLOW_NETWORK
    delay_ms: int = 0
    jitter_ms: int = 0
    # LOSSY_NETWORK
    loss: float = 0.0
    # PARTITION_*: "blackhole" (messages silently dropped: peers time out) or "reset"
    # (connections closed and refused: peers see errors at once).
    style: str = "blackhole"
    # ONE_WAY: True drops what the leader sends, False what it receives.
    outbound: bool = True
    # CRASH_UNFLUSHED: where the cut falls in the un-fsynced tail (0 = all of it dropped,
    # 1 = none), and whether the cut may tear a batch (else it falls on a batch boundary).
    cut: float = 0.0
    torn: bool = False
    # The pause after healing and recovery before the next cycle.
    quiet_ms: int = 500

    def describe(self) -> str:
        d = asdict(self)
        d["kind"] = self.kind.value
        d["target"] = self.target.value
        return json.dumps(d, sort_keys=True)


def parse_kinds(text: str) -> tuple[FaultKind, ...]:
    """Comma-separated kind names, or 'all'."""
    if text.strip() == "all":
        return ALL_KINDS
    kinds: list[FaultKind] = []
    valid = ", ".join(k.value for k in FaultKind)
    for name in (s.strip() for s in text.split(",")):
        if not name:
            continue
        try:
            kinds.append(FaultKind(name))
        except ValueError:
            raise ValueError(f"unknown fault kind {name!r} (valid: all, {valid})") from None
    if not kinds:
        raise ValueError("no fault kind given")
    return tuple(dict.fromkeys(kinds))


def make_schedule(
    seed: int,
    cycles: int,
    kinds: Sequence[FaultKind] = ALL_KINDS,
    *,
    min_hold_ms: int = 1000,
    max_hold_ms: int = 3000,
) -> list[Fault]:
    """`cycles` faults. The kinds come in rounds: each round is a seeded shuffle of `kinds`,
    so a run of len(kinds) cycles has every kind once, and a long run has them evenly.
    Pauses and partitions of the leader last at least LEADER_LOSS_MIN_HOLD_MS."""
    if cycles < 0:
        raise ValueError("cycles must not be negative")
    if not kinds:
        raise ValueError("no fault kinds")
    if not 0 < min_hold_ms <= max_hold_ms:
        raise ValueError("need 0 < min_hold_ms <= max_hold_ms")
    rng = random.Random(seed)
    order: list[FaultKind] = []
    out: list[Fault] = []
    for cycle in range(cycles):
        if not order:
            order = list(kinds)
            rng.shuffle(order)
        kind = order.pop(0)
        target = Target.FOLLOWER if kind is FaultKind.KILL_FOLLOWER else Target.LEADER
        if kind in (FaultKind.PARTITION_RANDOM, FaultKind.CRASH_UNFLUSHED):
            target = rng.choice((Target.LEADER, Target.FOLLOWER))
        out.append(
            Fault(
                cycle=cycle,
                kind=kind,
                target=target,
                pick=rng.randrange(1 << 16),
                hold_ms=max(
                    rng.randint(min_hold_ms, max_hold_ms),
                    LEADER_LOSS_MIN_HOLD_MS if kind in LEADER_LOSS_KINDS else 0,
                ),
                delay_ms=rng.randint(20, 250),
                jitter_ms=rng.randint(0, 50),
                loss=round(rng.uniform(0.05, 0.3), 3),
                style=rng.choice(("blackhole", "reset")),
                outbound=rng.random() < 0.5,
                cut=round(rng.random(), 3),
                torn=rng.random() < 0.5,
                quiet_ms=rng.randint(300, 1000),
            )
        )
    return out
