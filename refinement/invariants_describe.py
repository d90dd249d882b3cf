"""Checker of DescribeQuorum's answer (KIP-595's DescribeQuorum, Kafka's
LeaderState.describeQuorum), stated from what the simulator knows of the leader, never from the
leader's own bookkeeping of its peers:

- DescribeQuorumMatches: what a leader would answer DescribeQuorum with at any step names it
  as the leader, in its epoch, with its high watermark (or none, before it has one in its
  epoch: the HWM it kept from its follower days is not its epoch's, Kafka's
  LeaderState.highWatermark is empty then); lists every voter of the voter set it
  runs with exactly once and nothing else among the voters (Kafka lists each voter, the leader
  included, even one that never fetched in the epoch); gives the leader's own entry (when it
  is a voter) its log end offset; and lists no replica key both as a voter and as an
  observer (a voter's id may fetch as an observer under another directory id). Where the
  simulator sees every Fetch each leader takes (a static voter set, no forged messages), each
  other voter's entry says -1 for its last fetch time and end offset until the leader took a
  Fetch from it in this epoch (Kafka's LeaderState.ReplicaState starts with
  lastFetchTimestamp -1 and no end offset), and after that a time no earlier than the last
  Fetch taken, no later than now (a Fetch held for want of news counts again when answered,
  as Kafka's purgatory completes it), and an end offset it fetched from. On any voter set,
  every replica the leader took a Fetch from in this epoch that is not one of its voters
  (an observer, or a voter since removed) is listed among the observers, within Kafka's
  observer session (LeaderState.OBSERVER_SESSION_TIMEOUT_MS: clearInactiveObservers drops
  an observer only 5 minutes after its last Fetch; LeaderState.updateVoterAndObserverStates
  moves a removed voter's ReplicaState, progress and all, to observerStates), and its
  latest entry says a last fetch time no earlier than that Fetch, no later than now, and an
  end offset it fetched from; and no observer (other than the leader itself) is listed whose
  last fetch time (-1 if it never fetched) is 5 minutes old or older.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from kraft.core.quorum_info import QuorumDescription
from kraft.ids import Epoch, NodeId, Offset
from refinement.invariants import Violation

DESCRIBE_QUORUM_MATCHES = "DescribeQuorumMatches"

# Kafka's DescribeQuorum value for an offset or time not known yet (ReplicaState starts with
# lastFetchTimestamp -1 and no end offset, answered as -1). Stated here, not imported from the
# core, so that a core saying something else is caught.
UNKNOWN = -1
# Kafka's LeaderState.OBSERVER_SESSION_TIMEOUT_MS.
OBSERVER_SESSION_MS = 300_000


def describe_quorum_matches(
    node: NodeId,
    *,
    epoch: Epoch,
    high_watermark: Offset | None,
    end_offset: Offset,
    voters: Iterable[NodeId],
    desc: QuorumDescription | None,
    fetched: Mapping[NodeId, int] | None = None,
    now: int = 0,
    taken: Mapping[NodeId, int] | None = None,
) -> Violation | None:
    """The leader `node` (in `epoch`, with this HWM and log end, running with the voter set
    `voters`) would answer DescribeQuorum with `desc` at `now`; a violation when it is wrong.
    `fetched`, when given: for each replica a Fetch of which this leader took in this epoch,
    the time of the last one, to check the voters' entries by; `taken`, the same, to check
    that the replicas which are not voters are listed as observers."""

    def bad(what: str) -> Violation:
        return Violation(
            DESCRIBE_QUORUM_MATCHES,
            f"leader {node} (epoch {epoch}) would describe the quorum {what}: {desc}",
        )

    if desc is None:
        return bad("not at all")
    if desc.leader_id != node or desc.leader_epoch != epoch:
        return bad(f"with leader {desc.leader_id} in epoch {desc.leader_epoch}")
    if desc.high_watermark is not None and desc.high_watermark != high_watermark:
        return bad(f"with HWM {desc.high_watermark}, not its {high_watermark}")
    voter_ids = set(voters)
    listed = Counter(d.replica.id for d in desc.voters)
    expected = Counter(voter_ids)
    if listed != expected:
        return bad(f"with voters {sorted(listed.elements())}, not its {sorted(expected)}")
    for d in desc.voters:
        if d.replica.id == node and d.log_end_offset != end_offset:
            return bad(f"with its own end offset {d.log_end_offset}, not {end_offset}")
    both = sorted(
        k.id for k in {d.replica for d in desc.observers} & {d.replica for d in desc.voters}
    )
    if both:
        return bad(f"with {both} both as voters and as observers")
    # Kafka clears the observers out of session before it describes them.
    silent = sorted(
        d.replica.id
        for d in desc.observers
        if d.replica.id != node and now - d.last_fetch_timestamp_ms >= OBSERVER_SESSION_MS
    )
    if silent:
        return bad(f"with observers {silent} whose last Fetch is {OBSERVER_SESSION_MS} ms old")
    if fetched is not None:
        for d in desc.voters:
            rid = d.replica.id
            if rid == node:
                continue
            at = fetched.get(rid)
            shown = f"{d.last_fetch_timestamp_ms} from {d.log_end_offset}"
            if at is None:
                if d.last_fetch_timestamp_ms != UNKNOWN or d.log_end_offset != UNKNOWN:
                    return bad(f"with voter {rid} last fetching at {shown}, but it never did")
            elif not at <= d.last_fetch_timestamp_ms <= now or d.log_end_offset < 0:
                return bad(f"with voter {rid} last fetching at {shown}, but it did at t={at}")
    if taken is not None:
        return _observers_listed(node, voter_ids, desc=desc, taken=taken, now=now, bad=bad)
    return None


def _observers_listed(
    node: NodeId,
    voters: set[NodeId],
    *,
    desc: QuorumDescription,
    taken: Mapping[NodeId, int],
    now: int,
    bad: Callable[[str], Violation],
) -> Violation | None:
    """Each replica a Fetch of which the leader took at `taken[id]`, not a voter, within the
    observer session: listed as an observer (under any directory id), its latest entry
    saying it fetched then or later, from an end offset."""
    for rid, at in sorted(taken.items()):
        if rid == node or rid in voters or now - at >= OBSERVER_SESSION_MS:
            continue
        entries = [d for d in desc.observers if d.replica.id == rid]
        if not entries:
            return bad(f"without replica {rid} among the observers, though it fetched at t={at}")
        d = max(entries, key=lambda e: e.last_fetch_timestamp_ms)
        if not at <= d.last_fetch_timestamp_ms <= now or d.log_end_offset < 0:
            shown = f"{d.last_fetch_timestamp_ms} from {d.log_end_offset}"
            return bad(f"with observer {rid} last fetching at {shown}, but it did at t={at}")
    return None
