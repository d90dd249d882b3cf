"""The simulator's configuration, what it drives, and its result: the part of refinement.sim
that every layer of the Simulator (refinement.sim_base and above) reads, kept apart so that the
layers never import the module that assembles them."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from kraft.core.effects import Effect, ElectionState
from kraft.core.events import Event
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_set import VoterSet
from kraft.ids import ClusterId, Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey
from kraft.storage.memory_log import MemoryLog
from kraft.storage.memory_snapshots import MemorySnapshots
from refinement.faults import PROFILES, FaultProfile
from refinement.invariants import Violation

# Variants of a fault profile that change the quorum's timing, not its faults: `NAME+linger`
# runs profile NAME with quorum.append.linger.ms = LINGER_MS (Kafka's default), so that leaders
# gather client appends into batches and the timing checkers (refinement.invariants_timing)
# see when they write them. Not in PROFILES: a lingering append is written on a later Tick,
# which trace validation (one ClientAppend, one append) does not map.
LINGER_SUFFIX = "+linger"
LINGER_MS = 25


def sim_variant(name: str) -> tuple[FaultProfile, QuorumTiming]:
    """The fault profile and timing a sweep's profile name stands for: a name of PROFILES
    (the default timing), or one with LINGER_SUFFIX. KeyError for an unknown name."""
    if name.endswith(LINGER_SUFFIX):
        return PROFILES[name.removesuffix(LINGER_SUFFIX)], QuorumTiming(append_linger_ms=LINGER_MS)
    return PROFILES[name], QuorumTiming()


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
    def voter_ids(self) -> tuple[int, ...]:
        """The voters' node ids, 1..n: the profile's count where it sets one (`solo`'s single
        voter), else `voters`; every further node is an observer."""
        return tuple(range(1, (self.profile.voters or self.voters) + 1))

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
        if self.timing.append_linger_ms:
            cmd += f" --linger-ms {self.timing.append_linger_ms}"
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
    @property
    def voters(self) -> tuple[NodeId, ...]: ...
    @property
    def fetching_snapshot(self) -> OffsetAndEpoch | None: ...


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
    # KIP-630: the node's snapshots, under a profile that takes them (None: no snapshots).
    snapshots: MemorySnapshots | None = None
    # KIP-853 (a dynamic quorum): the voter sets its storage states, by offset (the bootstrap
    # checkpoint's at -1, then its log's Voters records), as `LogState.voter_history`.
    voter_history: tuple[tuple[Offset, VoterSet], ...] = ()


ReplicaFactory = Callable[[NodeSetup], SimReplica]


def core_replica_factory(setup: NodeSetup) -> SimReplica:
    """Build the real replica core (imported here so stubs can run without it)."""
    from kraft.core.replica import Replica, ReplicaConfig
    from kraft.storage.log_adapter import BatchReader, log_state_of

    config = ReplicaConfig(setup.node, setup.cluster_id, setup.voters, setup.timing)
    state = log_state_of(setup.log)
    if setup.snapshots is not None:
        state = replace(state, snapshots=tuple(setup.snapshots.complete))
    if setup.voter_history:
        state = replace(state, voter_history=setup.voter_history)
    replica: SimReplica = Replica(
        config,
        election_state=setup.election_state,
        log_state=state,
        reader=BatchReader(setup.log),
        rng=setup.rng,
        now_ms=setup.now_ms,
        snapshots=setup.snapshots,
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
    # KIP-630 (a profile that takes snapshots): snapshots written by CreateSnapshot, and
    # installed after a FetchSnapshot transfer.
    snapshots_written: int = 0
    snapshots_installed: int = 0
    # ... of which by a node that had lost its disk; disk losses (observers); chunks
    # (FetchSnapshotResponse) corrupted, lost, or delivered stale (a duplicate, or an answer
    # to a request that was asked again: reordered); crashes aimed right after a step of a
    # transfer, by the step's effect (WriteSnapshotChunk, ValidateSnapshot, InstallSnapshot).
    installed_after_disk_loss: int = 0
    disk_losses: int = 0
    chunks_corrupted: int = 0
    chunks_mangled: int = 0
    # Fetch answers cut inside a batch (FaultProfile.cut_fetch).
    fetches_cut: int = 0
    chunks_lost: int = 0
    chunks_stale: int = 0
    transfer_crashes: dict[str, int] = field(default_factory=dict)
    # Transfers abandoned because the leader or epoch changed while they ran.
    transfers_leader_changed: int = 0
    recovery_ms: int | None = None
    # KIP-853 (a dynamic profile): AddVoter/RemoveVoter actions taken (Voters records
    # appended for a change), changes the operator saw succeed, and voters that lost a disk.
    voters_added: int = 0
    voters_removed: int = 0
    changes_acked: int = 0
    voter_disk_losses: int = 0
    # Voters records truncated away from a running replica's log (a change reverted).
    voters_truncated: int = 0
    # Leaders that stepped down with a voter change pending (answered NOT_LEADER_OR_FOLLOWER).
    step_downs_with_change_pending: int = 0
    # Batches of the idempotent producers acknowledged (a profile with `producers`).
    idempotent_acked: int = 0
    # An adversary profile (refinement.sim_adversary): forged messages handed to replicas,
    # Fetch answers corrupted on the wire.
    forged: int = 0
    fetches_corrupted: int = 0
    # A profile with delayed answers (FaultProfile.hold_answer): answers held.
    answers_held: int = 0
    # Vote and Begin/EndQuorumEpoch answers held until their requester moved on
    # (FaultProfile.hold_past_election).
    votes_held: int = 0
    quorum_epoch_answers_held: int = 0
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

    @property
    def change_crashes(self) -> int:
        """Leaders crashed right after appending a voter change (a dynamic profile)."""
        crashes = self.transfer_crashes
        return crashes.get("AddVoter", 0) + crashes.get("RemoveVoter", 0)

    def summary(self) -> str:
        c = self.config
        line = (
            f"seed={c.seed} profile={c.profile.name} events={self.events}"
            f" time={self.virtual_time_ms}ms elections={self.elections}"
            f" commits={self.committed} accepted={self.accepted} lost={self.lost}"
            f" refused={self.refused} gave_up={self.gave_up} crashes={self.crashes}"
            f" shutdowns={self.shutdowns}"
            f" partitions={self.partitions} dropped={self.dropped}"
        )
        if c.profile.snapshots:
            line += f" snapshots={self.snapshots_written} installed={self.snapshots_installed}"
            for name, value in (
                ("chunks_lost", self.chunks_lost),
                ("chunks_stale", self.chunks_stale),
                ("chunks_corrupted", self.chunks_corrupted),
                ("chunks_mangled", self.chunks_mangled),
                ("fetches_cut", self.fetches_cut),
                ("transfer_crashes", sum(self.transfer_crashes.values())),
                ("transfers_leader_changed", self.transfers_leader_changed),
                ("disk_losses", self.disk_losses),
                ("installed_after_disk_loss", self.installed_after_disk_loss),
            ):
                if value:
                    line += f" {name}={value}"
        if c.profile.dynamic:
            line += (
                f" added={self.voters_added} removed={self.voters_removed}"
                f" changes_acked={self.changes_acked}"
                f" voter_disk_losses={self.voter_disk_losses}"
                f" voters_truncated={self.voters_truncated}"
                f" change_crashes={self.change_crashes}"
            )
        if c.profile.producers:
            line += f" idempotent_acked={self.idempotent_acked}"
        if c.profile.adversary_rate or c.profile.corrupt_fetch:
            line += f" forged={self.forged} fetches_corrupted={self.fetches_corrupted}"
        if c.profile.hold_answer:
            line += f" answers_held={self.answers_held}"
        if c.profile.hold_past_election:
            line += (
                f" votes_held={self.votes_held}"
                f" quorum_epoch_answers_held={self.quorum_epoch_answers_held}"
            )
        line += f" recovery={self.recovery_ms}ms violations={len(self.violations)}"
        for v in self.violations:
            line += f"\n  VIOLATION {v}\n  replay: {self.replay_command}"
        return line
