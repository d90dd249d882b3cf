"""Fault profiles of the simulator: what the network and the nodes may do wrong, and how often.

A profile is plain data; the simulator draws every fault from its one seeded generator. Rates
are per virtual second (a Poisson process each), durations are uniform in [low, high] ms.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FaultProfile:
    name: str
    # Per message: dropped with probability `loss`, delivered twice with `duplicate`.
    loss: float = 0.0
    duplicate: float = 0.0
    # Extra uniform delay in [0, jitter_ms] on top of the base delay: messages overtake each
    # other, which is how the simulator reorders.
    jitter_ms: int = 0
    # Partitions: a symmetric one splits the nodes in two groups; a one-way one blocks the
    # link a -> b only. Each heals after a duration in `partition_ms`.
    partition_rate: float = 0.0
    one_way_fraction: float = 0.5
    partition_ms: tuple[int, int] = (300, 3000)
    # Crashes lose what the log did not flush; the node restarts after `down_ms`.
    crash_rate: float = 0.0
    # Graceful shutdowns (a Shutdown event, then stop on ShutdownComplete); restart likewise.
    shutdown_rate: float = 0.0
    down_ms: tuple[int, int] = (200, 3000)
    # How many voters may be down at once; None: a minority, so the cluster can make progress.
    # Safety must hold either way; more lets whole-cluster outages test durability.
    max_down: int | None = None
    # KIP-630: a random running replica asks CreateSnapshot at its HWM at this rate (0: the
    # replicas keep no snapshots at all, as before), and the leaders' log start may move past
    # a replica that has not fetched for `start_offset_lag_ms`
    # (metadata.start.offset.lag.time.max.ms; None: QuorumTiming's).
    snapshot_rate: float = 0.0
    start_offset_lag_ms: int | None = None
    # Fetch and FetchSnapshot answers carry at most this many bytes (None: QuorumTiming's), so
    # a snapshot moves in several chunks, each of which may be lost, duplicated or reordered.
    fetch_max_bytes: int | None = None

    @property
    def snapshots(self) -> bool:
        return self.snapshot_rate > 0

    @property
    def has_node_faults(self) -> bool:
        return self.crash_rate > 0 or self.shutdown_rate > 0


NONE = FaultProfile("none")
LOSSY = FaultProfile("lossy", loss=0.1, duplicate=0.05, jitter_ms=40)
PARTITIONS = FaultProfile("partitions", partition_rate=1.0, jitter_ms=5)
CRASHES = FaultProfile("crashes", crash_rate=1.0, max_down=99)
SHUTDOWNS = FaultProfile("shutdowns", shutdown_rate=0.7)
MIXED = FaultProfile(
    "mixed",
    loss=0.05,
    duplicate=0.03,
    jitter_ms=20,
    partition_rate=0.5,
    crash_rate=0.5,
    shutdown_rate=0.25,
)
# Snapshots taken often, with crashes, partitions and lossy links, so that leaders move their
# log start past replicas that fell behind and those catch up by FetchSnapshot.
SNAPSHOTS = FaultProfile(
    "snapshots",
    loss=0.03,
    duplicate=0.03,
    jitter_ms=10,
    partition_rate=0.6,
    crash_rate=0.6,
    snapshot_rate=4.0,
    start_offset_lag_ms=1000,
    fetch_max_bytes=160,
)

PROFILES: dict[str, FaultProfile] = {
    p.name: p for p in (NONE, LOSSY, PARTITIONS, CRASHES, SHUTDOWNS, MIXED, SNAPSHOTS)
}
