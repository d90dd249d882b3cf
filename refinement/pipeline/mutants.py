"""Seeded bugs for campaigns: replica factories that break one protocol rule, so a campaign
can show that it finds, groups and reports a violation (`kraft campaign --mutant NAME`).

Each mutant wraps the core replica or swaps one of its roles for a subclass that breaks the
rule; the core itself is unchanged. The simulator's checkers catch each one (tests in
tests/simulation/test_sim_mutants.py):

- eager-hwm: a leader exposes its whole log as committed (MajorityReachedHighWatermark);
- snapshot-past-hwm: CreateSnapshot at the log end, past the HWM (SnapshotMatchesLog, as the
  spec's SnapshotBeyondHwm mutant);
- eager-log-start: a leader moves its log start to its latest snapshot at once, ignoring
  KIP-630's rule that every live replica has fetched past it or the lag time passed
  (LogStartBelowLiveReplicas);
- install-unvalidated: a fetched snapshot is installed once its last chunk is written, before
  the driver validated it (ChunkAnswerTakenExactly, which wants ValidateSnapshot in that step;
  SnapshotIntact, when a corrupted chunk came in).

KIP-853/856, under the `+reconfig` profiles (a dynamic quorum and an operator changing it):

- early-voter-change: a leader accepts a voter change before its epoch's LeaderChange record
  commits (Ongaro's bug of single-server changes), so before it knows whether the Voters record
  it inherited is committed (AtMostOneUncommittedVoterChange);
- two-uncommitted-changes: no one-at-a-time rule: a change is accepted while another is pending
  or its Voters record uncommitted (AtMostOneUncommittedVoterChange);
- removed-leader-counts-itself: a leader that removed itself still counts its own log end
  toward the HWM (MajorityReachedHighWatermark);
- voters-not-reverted: a Voters record truncated away leaves its voter set in force
  (VoterSetMatchesLog: the replica's voter set is not the one its log states);
- observer-forgets-leader: an observer (a removed voter) whose leader went silent forgets it
  in the same epoch (Follower -> Unattached, the core's behaviour before Kafka's was adopted),
  so a late Vote request of that epoch may get a second vote (OneVotePerEpoch, in that
  situation driven step by step: random sweeps of four +reconfig profiles, 50 seeds each,
  never delivered such a late request; TLC rejects the mixed+reconfig seed 5 trace at the
  forgetting step).

Mutants are looked up by name on the executors, so only the name crosses the wire.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from kraft.core.effects import Effect, StateChanged, ValidateSnapshot
from kraft.core.events import CreateSnapshot, Event, SnapshotValidated, SnapshotWritten
from kraft.core.follower import FollowerRole
from kraft.core.leader import LeaderState
from kraft.core.log_metadata import LogMetadata
from kraft.core.messages import (
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Request,
)
from kraft.core.reconfig import VoterChanges
from kraft.core.replica import Replica
from kraft.core.snapshot_transfer import SnapshotFetcher
from kraft.core.snapshots import NO_SNAPSHOTS, SnapshotRole, SnapshotSource
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import NodeId, Offset, OffsetAndEpoch
from refinement.sim import (
    NodeSetup,
    ReplicaFactory,
    ReplicaViewLike,
    SimReplica,
    core_replica_factory,
)


class _EagerHighWatermark:
    """A leader that exposes its whole log as committed, without waiting for a majority
    (KIP-595: the leader advances the high watermark only to an offset a majority of voters
    have fetched)."""

    __slots__ = ("_inner",)

    def __init__(self, inner: SimReplica) -> None:
        self._inner = inner

    def start(self) -> list[Effect]:
        return self._inner.start()

    def step(self, event: Event) -> list[Effect]:
        return self._inner.step(event)

    def next_deadline_ms(self) -> int:
        return self._inner.next_deadline_ms()

    def view(self) -> ReplicaViewLike:
        v = self._inner.view()
        if v.state is ReplicaState.LEADER and v.end_offset > 0:
            # The core's view is a frozen dataclass; the mutant lies about one field of it.
            lied: ReplicaViewLike = replace(v, high_watermark=v.end_offset)  # type: ignore[type-var]
            return lied
        return v


def eager_high_watermark(setup: NodeSetup) -> SimReplica:
    return _EagerHighWatermark(core_replica_factory(setup))


# --------------------------------------------------------------------------- KIP-630


class _SnapshotPastHighWatermark(SnapshotRole):
    """CreateSnapshot at the log end, as if the whole log were committed (KIP-630: a snapshot
    holds only committed records, never past the high watermark)."""

    __slots__ = ()

    def on_create_snapshot(self, ev: CreateSnapshot) -> None:
        super().on_create_snapshot(CreateSnapshot(ev.now_ms, self._r._log.end_offset))

    def refusal(self, offset: Offset) -> str | None:
        r = self._r
        kept = r._hwm
        r._hwm = r._log.end_offset
        try:
            return super().refusal(offset)
        finally:
            r._hwm = kept


class _EagerLogStart(SnapshotRole):
    """A leader moves its log start to its latest snapshot at once (KIP-630: only past a
    snapshot every live replica has fetched, or once metadata.start.offset.lag.time.max.ms
    passed)."""

    __slots__ = ()

    def _leader_target(self, latest: OffsetAndEpoch) -> OffsetAndEpoch | None:
        return latest


class _InstallUnvalidated(SnapshotFetcher):
    """Installs a fetched snapshot as soon as its last chunk is written, without waiting for
    the driver's validation (KIP-630: validate every chunk, size, CRCs, header and footer
    before the snapshot replaces anything)."""

    __slots__ = ()

    def handle_response(
        self, src: NodeId, resp: FetchSnapshotResponse, in_reply_to: Request | None
    ) -> None:
        super().handle_response(src, resp, in_reply_to)
        r = self._r
        t = self.transfer
        if t is not None and t.validating and r._out and isinstance(r._out[-1], ValidateSnapshot):
            r._out.pop()
            self.on_validated(SnapshotValidated(r._now, t.snapshot_id, True))


# --------------------------------------------------------------------------- KIP-853/856

_WAIT_FOR_HWM = "Request timed out waiting for leader to establish HWM"
_WAIT_FOR_VOTERS = "Request timed out waiting for voters to commit"


class _EarlyVoterChange(VoterChanges):
    """Accepts a change before the epoch's LeaderChange record commits (KIP-856: a leader
    waits for it, which also commits any Voters record it inherited)."""

    __slots__ = ()

    def _change_refusal(self, verb: str) -> tuple[ErrorCode, str] | None:
        found = super()._change_refusal(verb)
        if found is not None and found[1].startswith(_WAIT_FOR_HWM):
            return None
        return found


class _TwoUncommittedChanges(VoterChanges):
    """No one-at-a-time rule (KIP-856: one change at a time, the next only once the last
    Voters record commits)."""

    __slots__ = ()

    def operation_pending(self) -> bool:
        return False

    def _change_refusal(self, verb: str) -> tuple[ErrorCode, str] | None:
        found = super()._change_refusal(verb)
        if found is not None and found[1].startswith(_WAIT_FOR_VOTERS):
            return None
        return found


def _with_voter_changes(setup: NodeSetup, changes: Callable[[Replica], VoterChanges]) -> SimReplica:
    """The core replica with its voter changes swapped for a subclass."""
    replica = core_replica_factory(setup)
    assert isinstance(replica, Replica)
    role = changes(replica)
    replica._reconfig = role
    replica._on_message.update(role.message_handlers())
    replica._on_event.update(role.event_handlers())
    return replica


def early_voter_change(setup: NodeSetup) -> SimReplica:
    return _with_voter_changes(setup, _EarlyVoterChange)


def two_uncommitted_changes(setup: NodeSetup) -> SimReplica:
    return _with_voter_changes(setup, _TwoUncommittedChanges)


class _CountsItself(LeaderState):
    """A leader outside its voter set counts its own log end toward the HWM (KIP-856: a
    removed leader keeps leading until the change commits, without counting itself)."""

    __slots__ = ()

    def advance_hwm(self, own_end: Offset) -> Offset | None:
        kept = self.me_is_voter
        self.me_is_voter = True
        try:
            return super().advance_hwm(own_end)
        finally:
            self.me_is_voter = kept


class _RemovedLeaderCountsItself:
    """The core replica whose leader bookkeeping is `_CountsItself` from each election on."""

    __slots__ = ("_inner",)

    def __init__(self, inner: Replica) -> None:
        self._inner = inner

    def _swap(self, effects: list[Effect]) -> list[Effect]:
        ld = self._inner._leader
        if ld is not None and type(ld) is LeaderState:
            ld.__class__ = _CountsItself
        return effects

    def start(self) -> list[Effect]:
        return self._swap(self._inner.start())

    def step(self, event: Event) -> list[Effect]:
        return self._swap(self._inner.step(event))

    def next_deadline_ms(self) -> int:
        return self._inner.next_deadline_ms()

    def view(self) -> ReplicaViewLike:
        return self._inner.view()


def removed_leader_counts_itself(setup: NodeSetup) -> SimReplica:
    replica = core_replica_factory(setup)
    assert isinstance(replica, Replica)
    return _RemovedLeaderCountsItself(replica)


class _VotersNotReverted(LogMetadata):
    """A truncation that removes Voters records keeps the latest voter set in force (KIP-856:
    a voter set truncated away is undone)."""

    __slots__ = ()

    def truncate(self, offset: Offset) -> None:
        latest = self.voters
        super().truncate(offset)
        if self.voters is latest:
            return
        last = self._end - 1
        if last > self._voter_offsets[-1]:
            self._voter_offsets.append(Offset(last))
            self._voter_sets.append(latest)
        else:
            self._voter_sets[-1] = latest


def voters_not_reverted(setup: NodeSetup) -> SimReplica:
    replica = core_replica_factory(setup)
    assert isinstance(replica, Replica)
    replica._log.__class__ = _VotersNotReverted
    return replica


class _ForgetsSilentLeader(FollowerRole):
    """An observer whose fetch timeout expired forgets its leader in the same epoch and looks
    for one again as Unattached (Kafka: an observer stays the Follower of its epoch's leader
    and asks the voters; it never goes Follower -> Unattached in one epoch). The replica keeps
    no vote once it knows a leader, so it may grant a second one in that epoch."""

    __slots__ = ()

    def leader_silent(self) -> None:
        r = self._r
        old = r._state
        if r._fetcher is not None:
            r._fetcher.abandon()
        r._enter(ReplicaState.UNATTACHED, r._epoch)  # past the transition table's check
        r._persist()
        r._out.append(StateChanged(old, ReplicaState.UNATTACHED, r._epoch))


def observer_forgets_leader(setup: NodeSetup) -> SimReplica:
    replica = core_replica_factory(setup)
    assert isinstance(replica, Replica)
    replica._follow = _ForgetsSilentLeader(replica)
    return replica


def _with_roles(
    setup: NodeSetup,
    *,
    role: Callable[[Replica, SnapshotSource], SnapshotRole] | None = None,
    fetcher: Callable[[Replica], SnapshotFetcher] | None = None,
) -> SimReplica:
    """The core replica with its holding role and/or its fetching role swapped for a
    subclass, and the dispatch tables pointed at the new ones."""
    replica = core_replica_factory(setup)
    assert isinstance(replica, Replica)
    if role is not None:
        snaps = role(replica, setup.snapshots or NO_SNAPSHOTS)
        replica._snaps = snaps
        replica._on_event[CreateSnapshot] = snaps.on_create_snapshot
        replica._on_event[SnapshotWritten] = snaps.on_snapshot_written
        replica._on_message[FetchSnapshotRequest] = snaps.handle_fetch_snapshot_request
        replica._refusals[FetchSnapshotRequest] = snaps.fetch_snapshot_refusal
    if fetcher is not None and replica._fetcher is not None:
        fetch = fetcher(replica)
        replica._fetcher = fetch
        replica._on_message[FetchSnapshotResponse] = fetch.handle_response
        replica._on_failed[FetchSnapshotRequest] = fetch.fetch_snapshot_failed
    return replica


def snapshot_past_high_watermark(setup: NodeSetup) -> SimReplica:
    return _with_roles(setup, role=_SnapshotPastHighWatermark)


def eager_log_start(setup: NodeSetup) -> SimReplica:
    return _with_roles(setup, role=_EagerLogStart)


def install_unvalidated(setup: NodeSetup) -> SimReplica:
    return _with_roles(setup, fetcher=_InstallUnvalidated)


MUTANTS: dict[str, ReplicaFactory] = {
    "eager-hwm": eager_high_watermark,
    "snapshot-past-hwm": snapshot_past_high_watermark,
    "eager-log-start": eager_log_start,
    "install-unvalidated": install_unvalidated,
    "early-voter-change": early_voter_change,
    "two-uncommitted-changes": two_uncommitted_changes,
    "removed-leader-counts-itself": removed_leader_counts_itself,
    "voters-not-reverted": voters_not_reverted,
    "observer-forgets-leader": observer_forgets_leader,
}
# The fault profile a campaign or a test runs each mutant under, where one is needed: the
# KIP-630 mutants need snapshots (and install-unvalidated corrupted chunks) to show, the
# KIP-853 ones a dynamic quorum with an operator (voters-not-reverted: truncated changes,
# which graceful shutdowns of leaders mid-change bring most often on seeds 0-9).
MUTANT_PROFILES: dict[str, str] = {
    "snapshot-past-hwm": "lossy+snapshots",
    "eager-log-start": "partitions+snapshots",
    "install-unvalidated": "lossy+snapshots",
    "early-voter-change": "partitions+reconfig",
    "two-uncommitted-changes": "none+reconfig",
    "removed-leader-counts-itself": "none+reconfig",
    "voters-not-reverted": "shutdowns+reconfig",
}
