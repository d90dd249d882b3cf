"""Safety checkers, named like the TLA+ invariants, over a plain snapshot of the cluster.

Every checker is a pure function of a `ClusterState` (or of two, for the action properties
`EpochMonotonic` and `HighWatermarkMonotonic`) returning a `Violation` or None, so the same
definitions can be handed to z3 or evaluated on a TLC state. The simulator calls them after
every event with `focus` set to the node that acted: a focused call checks exactly the
conditions that mention that node, which is all an event can break (the rest was checked
before). Unfocused calls check everything.

A log is summarised by its epoch cache, `epochs`: (epoch, start offset) pairs in increasing
order, as in Kafka's leader-epoch-checkpoint. Offset o of a log holds a record of epoch e iff
start <= o < end and e is the epoch of the last entry whose start offset is <= o. Two records
at the same offset with the same epoch are taken to be the same record: only the leader of an
epoch writes records of that epoch (ElectionSafety), at offsets it assigns once.

Snapshots (KIP-630): a replica whose log starts after a snapshot holds the snapshot's history
below its log start. Its `epochs` cover both (the snapshot's epoch cache below the log start,
then the log's), so every checker compares histories from offset 0 as before: a snapshot is
taken to hold the committed prefix, and SnapshotMatchesLog checks that it does. The snapshot
checkers, after spec/KRaftSnapshot.tla: LogStartAtSnapshot and SnapshotMatchesLog (with the
ghost `committed`, the longest prefix any leader exposed as committed, for its clause "a
snapshot holds committed records only"); SnapshotIntact (a held snapshot is a whole, valid
snapshot of its id: the spec's TypeOK says its content is exactly its end offset long); and
LogStartBelowLiveReplicas, KIP-630's rule for a leader's AdvanceLogStartOffset, which the spec
leaves out (it only saves transfers) and the simulator checks on every such step.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field

from kraft.core import quorum_math as qm
from kraft.core.quorum_math import PY
from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_set import VoterSet
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey
from kraft.storage.memory_snapshots import snapshot_problem

EpochCache = tuple[tuple[Epoch, Offset], ...]

ELECTION_SAFETY = "ElectionSafety"
EPOCH_MONOTONIC = "EpochMonotonic"
HIGH_WATERMARK_MONOTONIC = "HighWatermarkMonotonic"
FETCHED_HIGH_WATERMARK_MONOTONIC = "FetchedHighWatermarkMonotonic"
ONE_VOTE_PER_EPOCH = "OneVotePerEpoch"
MAJORITY_REACHED_HIGH_WATERMARK = "MajorityReachedHighWatermark"
LOG_MATCHING = "LogMatching"
COMMITTED_NEVER_LOST = "CommittedNeverLost"
LOG_MIRROR = "LogMirror"
SNAPSHOT_MATCHES_LOG = "SnapshotMatchesLog"
LOG_START_AT_SNAPSHOT = "LogStartAtSnapshot"
SNAPSHOT_INTACT = "SnapshotIntact"
LOG_START_BELOW_LIVE_REPLICAS = "LogStartBelowLiveReplicas"
EVENTUALLY_LEADER_ELECTED = "EventuallyLeaderElected"
EVENTUALLY_COMMITTED = "EventuallyCommitted"
EVENTUALLY_CAUGHT_UP = "EventuallyCaughtUp"


_ZERO = Offset(0)


@dataclass(frozen=True, slots=True)
class Violation:
    name: str
    detail: str

    def __str__(self) -> str:
        return f"{self.name}: {self.detail}"


@dataclass(frozen=True, slots=True)
class NodeState:
    """One replica as the checkers see it. A down node keeps its durable parts (persisted
    epoch, surviving log); `state` is None and `high_watermark` unknown while it is down."""

    node_id: NodeId
    incarnation: int
    state: ReplicaState | None
    epoch: Epoch
    leader_id: NodeId | None
    # The replica's own view of its log (what it believes it appended).
    end_offset: Offset
    last_epoch: Epoch
    high_watermark: Offset | None
    # Ghost variable: the highest HWM this incarnation exposed so far (None: none yet).
    max_high_watermark: Offset | None
    # The log itself (what the driver actually stored).
    log_end_offset: Offset
    log_last_epoch: Epoch
    flushed_offset: Offset
    epochs: EpochCache = field(compare=True)
    # KIP-630: where the stored log starts, and where the replica believes it starts.
    log_start_offset: Offset = _ZERO
    start_offset: Offset = _ZERO
    # The complete snapshots the replica holds: each id with the epoch cache of the history
    # it holds (every offset below the id's end offset).
    snapshots: tuple[tuple[OffsetAndEpoch, EpochCache], ...] = ()
    # How many times the node lost its whole data directory: its persisted epoch starts over.
    wiped: int = 0
    # KIP-853: who the node is now (its directory id changes when a voter's disk is lost),
    # and, for a dynamic quorum, the voter sets its log states by offset (the bootstrap's at
    # -1, then each Voters record's); empty: the static voter set (ClusterState.voters).
    key: ReplicaKey | None = None
    voter_history: tuple[tuple[Offset, VoterSet], ...] = ()

    @property
    def up(self) -> bool:
        return self.state is not None


@dataclass(frozen=True, slots=True)
class AckedRange:
    """Acknowledged client appends: every offset in [first, last] holds a record of `epoch`
    that a leader of `epoch` reported committed. Adjacent acknowledgements of one epoch may be
    merged into one range (an epoch's records are contiguous in any log)."""

    first: Offset
    last: Offset
    epoch: Epoch


@dataclass(frozen=True, slots=True)
class ClusterState:
    nodes: Mapping[NodeId, NodeState]
    voters: frozenset[NodeId]
    # History variable: every node that was ever Leader in each epoch.
    leaders: Mapping[Epoch, frozenset[NodeId]] = field(default_factory=dict)
    acknowledged: tuple[AckedRange, ...] = ()
    # Ghost (KIP-630): the longest history any leader exposed as committed (its epoch cache
    # below its HWM, and that HWM); None where it is not tracked.
    committed: tuple[EpochCache, Offset] | None = None
    # Ghost (KIP-853): each replica identity whose disk was lost, as it was then.
    lost: Mapping[ReplicaKey, NodeState] = field(default_factory=dict)


# --------------------------------------------------------------------------- log helpers


def epoch_at(epochs: EpochCache, end: Offset, offset: Offset) -> Epoch | None:
    """The epoch of the record at `offset`, or None if the log does not hold that offset."""
    if offset < 0 or offset >= end or not epochs:
        return None
    i = bisect_right(epochs, offset, key=_start_of) - 1
    return None if i < 0 else epochs[i][0]


def _start_of(entry: tuple[Epoch, Offset]) -> Offset:
    return entry[1]


def common_prefix(a: EpochCache, a_end: Offset, b: EpochCache, b_end: Offset) -> Offset:
    """The largest p such that both logs hold every offset below p with equal epochs."""
    limit = min(a_end, b_end)
    if a is b or a == b:
        return Offset(limit)
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    # Entries before i agree; the logs part where either one starts its next entry.
    cut = limit
    if i < len(a):
        cut = min(cut, a[i][1])
    if i < len(b):
        cut = min(cut, b[i][1])
    return Offset(cut)


def _segments(epochs: EpochCache, end: Offset, lo: Offset) -> list[tuple[int, int, Epoch]]:
    """The (start, stop, epoch) runs of a log within [lo, end)."""
    out: list[tuple[int, int, Epoch]] = []
    for i, (epoch, start) in enumerate(epochs):
        stop = epochs[i + 1][1] if i + 1 < len(epochs) else end
        stop = min(stop, end)
        start = max(start, lo)
        if start < stop:
            out.append((start, stop, epoch))
    return out


def first_matching_after_divergence(
    a: EpochCache, a_end: Offset, b: EpochCache, b_end: Offset
) -> Offset | None:
    """An offset where both logs hold records of the same epoch although they differ
    somewhere before it; None if there is none (the logs satisfy LogMatching)."""
    limit = min(a_end, b_end)
    p = common_prefix(a, a_end, b, b_end)
    if p >= limit:
        return None
    sa = _segments(a, Offset(limit), p)
    sb = _segments(b, Offset(limit), p)
    i = j = 0
    while i < len(sa) and j < len(sb):
        a_start, a_stop, a_epoch = sa[i]
        b_start, b_stop, b_epoch = sb[j]
        lo, hi = max(a_start, b_start), min(a_stop, b_stop)
        if lo < hi and a_epoch == b_epoch:
            # p itself cannot match (it is where they differ), so lo > p here.
            return Offset(lo)
        if a_stop <= b_stop:
            i += 1
        else:
            j += 1
    return None


def majority(voters: frozenset[NodeId]) -> int:
    return qm.majority_size(PY, len(voters))


def _focus_nodes(state: ClusterState, focus: NodeId | None) -> list[NodeState]:
    if focus is None:
        return list(state.nodes.values())
    node = state.nodes.get(focus)
    return [] if node is None else [node]


# --------------------------------------------------------------------------- invariants


def election_safety(state: ClusterState, focus: NodeId | None = None) -> Violation | None:
    """At most one leader per epoch, ever (checked on the history `leaders`). Focused: the
    epoch the node is in now."""
    if focus is None:
        items = list(state.leaders.items())
    else:
        node = state.nodes.get(focus)
        if node is None:
            return None
        items = [(node.epoch, state.leaders.get(node.epoch, frozenset()))]
    for epoch, leaders in items:
        if len(leaders) > 1:
            return Violation(ELECTION_SAFETY, f"epoch {epoch} had leaders {sorted(leaders)}")
    return None


def epoch_monotonic(
    before: ClusterState, after: ClusterState, focus: NodeId | None = None
) -> Violation | None:
    """A replica's epoch never decreases, across restarts too (the quorum-state file holds
    it)."""
    for new in _focus_nodes(after, focus):
        old = before.nodes.get(new.node_id)
        if old is not None and new.epoch < old.epoch and new.wiped == old.wiped:
            return Violation(
                EPOCH_MONOTONIC,
                f"node {new.node_id} epoch went from {old.epoch} to {new.epoch}"
                f" (incarnation {old.incarnation} -> {new.incarnation})",
            )
    return None


def high_watermark_monotonic(
    before: ClusterState, after: ClusterState, focus: NodeId | None = None
) -> Violation | None:
    """Within one incarnation, a HWM a replica exposes is never below one it exposed before.

    The HWM may be unknown (None) for a while: a new leader does not know it until a record
    of its own epoch commits, and Kafka does not persist it, so a restarted replica starts
    without one and may then learn a lower value than it had before the crash. Hence the
    comparison is against the highest value exposed in the same incarnation (the ghost
    `max_high_watermark`), and only for known values.
    """
    for new in _focus_nodes(after, focus):
        old = before.nodes.get(new.node_id)
        if old is None or old.incarnation != new.incarnation:
            continue
        floor = old.max_high_watermark
        if new.high_watermark is not None and floor is not None and new.high_watermark < floor:
            return Violation(
                HIGH_WATERMARK_MONOTONIC,
                f"node {new.node_id} exposed HWM {new.high_watermark} after {floor}"
                f" (state {_state_name(new)}, epoch {new.epoch})",
            )
    return None


@dataclass(frozen=True, slots=True)
class FetchedHighWatermark:
    """A Fetch answer as it is delivered: from `src` to `dst`, naming `leader_id` as leader
    of `leader_epoch`, carrying `high_watermark` (-1: none), successful (`ok`) or not."""

    src: NodeId
    dst: NodeId
    leader_id: NodeId
    leader_epoch: Epoch
    high_watermark: Offset
    ok: bool = True


def fetched_high_watermark_monotonic(
    receiver: NodeState, fetched: FetchedHighWatermark
) -> Violation | None:
    """No replica receives, in a successful Fetch answer from the leader of its current epoch,
    a HWM (>= 0) below the HWM it holds. A Kafka follower dies on such an answer ("Non-monotonic
    update of high watermark"): a new leader must not report a HWM it kept from its follower
    days before its own epoch's HWM passed it."""
    if not fetched.ok or fetched.high_watermark < 0 or receiver.state is None:
        return None
    if not (
        receiver.epoch == fetched.leader_epoch
        and receiver.leader_id == fetched.leader_id == fetched.src
    ):
        return None
    held = receiver.high_watermark
    if held is not None and fetched.high_watermark < held:
        return Violation(
            FETCHED_HIGH_WATERMARK_MONOTONIC,
            f"node {receiver.node_id} holding HWM {held} got HWM {fetched.high_watermark}"
            f" from leader {fetched.leader_id} of epoch {fetched.leader_epoch}",
        )
    return None


@dataclass(frozen=True, slots=True)
class GrantedVote:
    """A VoteResponse granting a vote (not a pre-vote) as it leaves `voter`, the replica on
    the `disk`-th data directory of that node (a wiped disk is another replica, KIP-853), for
    `candidate` in `epoch`."""

    voter: NodeId
    disk: int
    candidate: NodeId
    epoch: Epoch


VotesCast = dict[tuple[NodeId, int, Epoch], NodeId]
"""Ghost of OneVotePerEpoch: the candidate each replica granted its vote in each epoch."""


def one_vote_per_epoch(cast: VotesCast, vote: GrantedVote) -> Violation | None:
    """A replica grants its vote to at most one candidate per epoch (KIP-595 "Vote"; Raft's
    ElectionSafety rests on it): checked on every granted vote as it is sent, against the
    votes the replica granted before (`cast`, updated here). The same candidate may be granted
    again (a retried request). No TLA+ invariant of this name: KRaft.tla keeps votedFor through
    the epoch, so a second vote cannot happen there, and ElectionSafety is what it protects."""
    at = (vote.voter, vote.disk, vote.epoch)
    earlier = cast.get(at)
    if earlier is None:
        cast[at] = vote.candidate
        return None
    if earlier != vote.candidate:
        return Violation(
            ONE_VOTE_PER_EPOCH,
            f"node {vote.voter} granted its vote in epoch {vote.epoch} to {earlier}, then to"
            f" {vote.candidate}",
        )
    return None


def majority_reached_high_watermark(
    state: ClusterState, focus: NodeId | None = None
) -> Violation | None:
    """Every offset below a leader's HWM is held durably (flushed) by a majority of voters,
    with the same epochs as in the leader's log.

    Durable, because a vote cast after a crash counts what survived it. Focused on a leader:
    that leader; focused on another node (its log may have shrunk): every leader.
    """
    focus_node = state.nodes.get(focus) if focus is not None else None
    if focus_node is not None and focus_node.state is ReplicaState.LEADER:
        leaders = [focus_node]
    else:
        leaders = [n for n in state.nodes.values() if n.state is ReplicaState.LEADER]
    need = majority(state.voters)
    for leader in leaders:
        hwm = leader.high_watermark
        if hwm is None or hwm <= 0:
            continue
        holders: list[NodeId] = []
        held_by: list[int] = []
        for vid in sorted(state.voters):
            v = state.nodes.get(vid)
            if v is None:
                held_by.append(-1)
                continue
            held = min(
                common_prefix(leader.epochs, leader.log_end_offset, v.epochs, v.log_end_offset),
                v.flushed_offset,
            )
            held_by.append(held)
            if held >= hwm:
                holders.append(vid)
        # The largest offset a majority durably holds: the same order statistic as the
        # leader's HWM candidate, by the function z3 proves things about (the replica runs
        # its fast twin); both counts must agree.
        reached = qm.high_watermark(PY, held_by, need) if len(held_by) >= need else -1
        if (reached >= hwm) != (len(holders) >= need):
            return Violation(
                MAJORITY_REACHED_HIGH_WATERMARK,
                f"quorum_math.high_watermark({held_by}, {need}) = {reached} disagrees with"
                f" the voters {holders} holding the log below HWM {hwm}",
            )
        if len(holders) < need:
            return Violation(
                MAJORITY_REACHED_HIGH_WATERMARK,
                f"leader {leader.node_id} (epoch {leader.epoch}) has HWM {hwm} but only"
                f" voters {holders} durably hold its log below it; {need} needed",
            )
    return None


def log_matching(state: ClusterState, focus: NodeId | None = None) -> Violation | None:
    """If two logs hold a record of the same epoch at the same offset, they agree on every
    record before it."""
    nodes = list(state.nodes.values())
    for i, a in enumerate(nodes):
        for b in nodes[i + 1 :]:
            if focus is not None and focus not in (a.node_id, b.node_id):
                continue
            o = first_matching_after_divergence(
                a.epochs, a.log_end_offset, b.epochs, b.log_end_offset
            )
            if o is not None:
                return Violation(
                    LOG_MATCHING,
                    f"nodes {a.node_id} and {b.node_id} hold epoch"
                    f" {epoch_at(a.epochs, a.log_end_offset, o)} at offset {o} but differ"
                    f" before it: {a.epochs}/{a.log_end_offset} vs {b.epochs}/{b.log_end_offset}",
                )
    return None


def committed_never_lost(state: ClusterState, focus: NodeId | None = None) -> Violation | None:
    """No acknowledged append is lost: it is in the log of every leader of its epoch or a
    later one, and in every replica's log below that replica's HWM (same offsets, same
    epoch)."""
    for node in _focus_nodes(state, focus):
        if not node.up:
            continue
        is_leader = node.state is ReplicaState.LEADER
        hwm = node.high_watermark
        for r in state.acknowledged:
            if is_leader and node.epoch >= r.epoch:
                top = r.last
            elif hwm is not None and hwm > r.first:
                top = Offset(min(r.last, hwm - 1))
            else:
                continue
            for o in (r.first, top):
                got = epoch_at(node.epochs, node.log_end_offset, o)
                if got != r.epoch:
                    role = "leader" if is_leader else f"replica with HWM {hwm}"
                    return Violation(
                        COMMITTED_NEVER_LOST,
                        f"acknowledged offsets {r.first}..{r.last} of epoch {r.epoch}: node"
                        f" {node.node_id} ({role}, epoch {node.epoch}) has epoch {got} at"
                        f" offset {o}; its log {node.epochs}/{node.log_end_offset}",
                    )
    return None


def log_mirror(state: ClusterState, focus: NodeId | None = None) -> Violation | None:
    """A running replica's view of its log (end offset, last epoch) is the log the driver
    holds: catches effects the core emitted differently from what it assumed."""
    for node in _focus_nodes(state, focus):
        if not node.up:
            continue
        if node.start_offset != node.log_start_offset:
            return Violation(
                LOG_MIRROR,
                f"node {node.node_id} believes its log starts at {node.start_offset} but it"
                f" starts at {node.log_start_offset}",
            )
        if node.end_offset != node.log_end_offset or node.last_epoch != node.log_last_epoch:
            return Violation(
                LOG_MIRROR,
                f"node {node.node_id} believes its log ends at {node.end_offset} (epoch"
                f" {node.last_epoch}) but it ends at {node.log_end_offset} (epoch"
                f" {node.log_last_epoch})",
            )
    return None


def snapshot_matches_log(state: ClusterState, focus: NodeId | None = None) -> Violation | None:
    """KIP-630: a snapshot holds the committed history below its end offset. Its history ends
    at its end offset in its epoch; two snapshots with the same id hold the same history; and
    below a running replica's HWM (its committed records), its history agrees with every
    snapshot's; where the committed history is known (the ghost `committed`), a snapshot
    holds committed records only (the spec's clause; a snapshot past the HWM breaks it).
    Focused: the node's snapshots against every replica, and every snapshot against the
    node."""
    nodes = list(state.nodes.values())
    seen: dict[OffsetAndEpoch, tuple[NodeId, EpochCache]] = {}
    committed = state.committed
    for a in nodes:
        for sid, cache in a.snapshots:
            end = Offset(sid.offset)
            if committed is not None and (focus is None or focus == a.node_id):
                done, done_end = committed
                agreed = common_prefix(cache, end, done, done_end)
                if agreed < end:
                    return Violation(
                        SNAPSHOT_MATCHES_LOG,
                        f"node {a.node_id} snapshot {sid} ({cache}) holds records up to {end}"
                        f" but only those below {agreed} are committed as it holds them"
                        f" (committed: {done}/{done_end})",
                    )
            if end > 0 and epoch_at(cache, end, Offset(end - 1)) != sid.epoch:
                return Violation(
                    SNAPSHOT_MATCHES_LOG,
                    f"node {a.node_id} snapshot {sid} ends in epoch"
                    f" {epoch_at(cache, end, Offset(end - 1))}: {cache}",
                )
            other = seen.setdefault(sid, (a.node_id, cache))
            if common_prefix(other[1], end, cache, end) < end:
                return Violation(
                    SNAPSHOT_MATCHES_LOG,
                    f"snapshot {sid} holds {other[1]} on node {other[0]} but {cache} on node"
                    f" {a.node_id}",
                )
    for a in nodes:
        for sid, cache in a.snapshots:
            end = Offset(sid.offset)
            for b in nodes:
                if focus is not None and focus not in (a.node_id, b.node_id):
                    continue
                if not b.up:
                    continue
                top = b.high_watermark
                if top is None:
                    continue
                top = Offset(min(top, end))
                agreed = common_prefix(cache, end, b.epochs, b.log_end_offset)
                if agreed < top:
                    return Violation(
                        SNAPSHOT_MATCHES_LOG,
                        f"node {a.node_id} snapshot {sid} ({cache}) and node {b.node_id}"
                        f" ({_state_name(b)}, HWM {b.high_watermark}, log {b.epochs}/"
                        f"{b.log_end_offset}) differ at offset {agreed} below {top}",
                    )
    return None


def log_start_at_snapshot(state: ClusterState, focus: NodeId | None = None) -> Violation | None:
    """A replica's stored log starts at 0 or at the end offset of a snapshot it holds
    (KIP-630: the log start only moves to a snapshot, and what lies below it is that
    snapshot)."""
    for node in _focus_nodes(state, focus):
        start = node.log_start_offset
        if start != 0 and not any(sid.offset == start for sid, _ in node.snapshots):
            return Violation(
                LOG_START_AT_SNAPSHOT,
                f"node {node.node_id} log starts at {start} but it holds snapshots"
                f" {[sid for sid, _ in node.snapshots]}",
            )
    return None


def snapshot_intact(node: NodeId, snapshot_id: OffsetAndEpoch, data: bytes) -> Violation | None:
    """A snapshot a replica holds (written, or fetched and installed) is a whole, valid
    snapshot of its id: every batch's CRC, in its epoch, header first, footer last, nothing
    trailing. A transfer that installs before every chunk is validated breaks it."""
    problem = snapshot_problem(snapshot_id, data)
    if problem is not None:
        return Violation(SNAPSHOT_INTACT, f"node {node} holds snapshot {snapshot_id}: {problem}")
    return None


@dataclass(frozen=True, slots=True)
class LogStartMove:
    """A leader's AdvanceLogStartOffset as it happens: `leader` (in `epoch`) moves its log start
    to `new_start` at `now`; its log start last moved (or it started) at `since`;
    `fetched` holds, per replica, the last Fetch the leader accepted from it in this epoch
    (time, fetch offset)."""

    leader: NodeId
    epoch: Epoch
    new_start: Offset
    now: int
    since: int
    lag_ms: int
    fetch_timeout_ms: int
    fetched: Mapping[NodeId, tuple[int, Offset]]


def log_start_below_live_replicas(move: LogStartMove) -> Violation | None:
    """KIP-630 ("When to Increase the LogStartOffset"): a leader moves its log start past
    a replica's fetch offset only once that replica is not live (no accepted Fetch within
    the fetch timeout), or once its log start is older than
    metadata.start.offset.lag.time.max.ms."""
    if move.now - move.since >= move.lag_ms:
        return None
    for rid in sorted(move.fetched):
        at, offset = move.fetched[rid]
        if move.now - at <= move.fetch_timeout_ms and offset < move.new_start:
            return Violation(
                LOG_START_BELOW_LIVE_REPLICAS,
                f"leader {move.leader} (epoch {move.epoch}) moved its log start to"
                f" {move.new_start} while replica {rid} fetched from {offset}"
                f" {move.now - at}ms ago, {move.now - move.since}ms after its log start last"
                f" moved (lag time {move.lag_ms}ms)",
            )
    return None


STATE_INVARIANTS = (
    election_safety,
    majority_reached_high_watermark,
    log_matching,
    committed_never_lost,
    log_mirror,
    snapshot_matches_log,
    log_start_at_snapshot,
)
ACTION_INVARIANTS = (epoch_monotonic, high_watermark_monotonic)


def check_all(before: ClusterState | None, after: ClusterState) -> list[Violation]:
    """Every invariant, unfocused (for tests and for whole-state checks)."""
    out = [v for f in STATE_INVARIANTS if (v := f(after, None)) is not None]
    if before is not None:
        out += [v for g in ACTION_INVARIANTS if (v := g(before, after, None)) is not None]
    return out


def _state_name(node: NodeState) -> str:
    return "Down" if node.state is None else node.state.value
