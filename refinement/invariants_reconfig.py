"""Safety checkers of a changing voter set (KIP-853/856), named like spec/KRaftReconfig.tla's
invariants, over the same `ClusterState` as refinement.invariants.

A dynamic quorum's node carries `voter_history`: the voter sets its log states, by offset (the
bootstrap checkpoint's at -1, then each Voters record's at its offset), so the voter set in
force at an offset is the last one set at or before it (the spec's `VotersAt`), and a voter is
a replica key: the node with that id holds it only while its directory id is the key's (a
voter whose disk was lost comes back as another replica).

- AtMostOneUncommittedVoterChange: no log holds two Voters records that are not committed
  (committed: in the ghost `committed` history, same offset and epoch), the spec's invariant.
- MajorityReachedHighWatermark, with a changing voter set (checked, as the spec's action
  property, when a leader moves its HWM): every offset below the new HWM is held durably by a
  majority of a voter set its log states at or after HWM - 1. The leader
  counts the latest set of its log (committed or not) when it moves the HWM, as the spec's
  `Agree` does; a later Voters record may change that set afterwards, and the set in force at
  HWM - 1 alone is not enough (a majority of three after removing one of four voters is not a
  majority of the four). A removed leader does not count itself (it is not in the set). A
  voter whose disk was lost counts with what it held then (the ghost `ClusterState.lost`):
  its Fetch sent before the loss may still arrive and count.
- LeaderCompleteness: a leader of an epoch later than the one whose leader committed a prefix
  holds that prefix.
- VoterSetMatchesLog: a running replica's voter set is the latest one its log states (KIP-856:
  in force when appended, reverted when truncated away), like LogMirror for the log end.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable

from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_set import VoterSet
from kraft.ids import Epoch, NodeId, Offset, ReplicaKey
from refinement.invariants import (
    MAJORITY_REACHED_HIGH_WATERMARK,
    ClusterState,
    EpochCache,
    NodeState,
    Violation,
    common_prefix,
    epoch_at,
)

AT_MOST_ONE_UNCOMMITTED_VOTER_CHANGE = "AtMostOneUncommittedVoterChange"
LEADER_COMPLETENESS = "LeaderCompleteness"
VOTER_SET_MATCHES_LOG = "VoterSetMatchesLog"
RECONFIG_EVENTUALLY_COMPLETES = "ReconfigEventuallyCompletes"

VoterHistory = tuple[tuple[Offset, VoterSet], ...]


def sets_from(history: VoterHistory, offset: int) -> list[VoterSet]:
    """The voter sets in force at `offset` or at any later offset of the log."""
    if not history:
        return []
    i = max(bisect_right([o for o, _ in history], offset) - 1, 0)
    return [v for _, v in history[i:]]


def voter_record_offsets(node: NodeState) -> list[Offset]:
    """The offsets of the Voters records in the node's log (the bootstrap's is not one)."""
    return [o for o, _ in node.voter_history if o >= 0]


def holds(state: ClusterState, leader: NodeState, key: ReplicaKey, hwm: Offset) -> bool:
    """Replica `key` holds the leader's log below `hwm` durably (flushed, same epochs); one
    whose directory was lost, as it held it then (a Fetch it sent before may still count)."""
    node = state.nodes.get(key.id)
    if node is None or node.key != key:
        node = state.lost.get(key)
        if node is None:
            return False
    held = min(
        common_prefix(leader.epochs, leader.log_end_offset, node.epochs, node.log_end_offset),
        node.flushed_offset,
    )
    return held >= hwm


def majority_reached_high_watermark(
    state: ClusterState, focus: NodeId | None = None
) -> Violation | None:
    """A leader's HWM is held durably by a majority of some voter set its log states at or
    after HWM - 1 (see the module's docstring). Focused on a leader: that leader; on
    another node: every leader."""
    focus_node = state.nodes.get(focus) if focus is not None else None
    if focus_node is not None and focus_node.state is ReplicaState.LEADER:
        leaders = [focus_node]
    else:
        leaders = [n for n in state.nodes.values() if n.state is ReplicaState.LEADER]
    for leader in leaders:
        hwm = leader.high_watermark
        if hwm is None or hwm <= 0 or not leader.voter_history:
            continue
        tried: list[str] = []
        for voters in sets_from(leader.voter_history, hwm - 1):
            holders = [k.id for k in voters if holds(state, leader, k, hwm)]
            if len(holders) >= voters.majority:
                break
            tried.append(f"{sorted(voters.ids)}: {sorted(holders)}")
        else:
            return Violation(
                MAJORITY_REACHED_HIGH_WATERMARK,
                f"leader {leader.node_id} (epoch {leader.epoch}) has HWM {hwm} but no voter set"
                f" of its log from offset {hwm - 1} has a majority durably holding its log"
                f" below it (voters: holders) {'; '.join(tried)}",
            )
    return None


def uncommitted_voter_records(
    node: NodeState, committed: tuple[EpochCache, Offset]
) -> list[Offset]:
    cache, end = committed
    out = []
    for o in voter_record_offsets(node):
        mine = epoch_at(node.epochs, node.log_end_offset, o)
        if o >= end or epoch_at(cache, end, o) != mine:
            out.append(o)
    return out


def at_most_one_uncommitted_voter_change(
    state: ClusterState, focus: NodeId | None = None
) -> Violation | None:
    """No log holds two Voters records that are not committed (the spec's invariant; the
    committed history is the ghost `state.committed`)."""
    committed = state.committed
    if committed is None:
        return None
    nodes: Iterable[NodeState] = state.nodes.values() if focus is None else [state.nodes[focus]]
    for node in nodes:
        pending = uncommitted_voter_records(node, committed)
        if len(pending) > 1:
            return Violation(
                AT_MOST_ONE_UNCOMMITTED_VOTER_CHANGE,
                f"node {node.node_id} ({_state_name(node)}, epoch {node.epoch}) holds"
                f" uncommitted Voters records at offsets {pending} (committed below"
                f" {committed[1]}); voter sets "
                + ", ".join(f"{o}:{sorted(v.ids)}" for o, v in node.voter_history),
            )
    return None


def leader_completeness(
    state: ClusterState, focus: NodeId, committed_epoch: Epoch
) -> Violation | None:
    """A leader of an epoch later than `committed_epoch` (the latest epoch whose leader
    extended the committed history) holds the whole committed history."""
    committed = state.committed
    node = state.nodes.get(focus)
    if committed is None or node is None or node.state is not ReplicaState.LEADER:
        return None
    if node.epoch <= committed_epoch:
        return None
    cache, end = committed
    kept = common_prefix(cache, end, node.epochs, node.log_end_offset)
    if kept < end:
        return Violation(
            LEADER_COMPLETENESS,
            f"leader {node.node_id} of epoch {node.epoch} holds the committed history"
            f" {cache}/{end} (committed in epoch {committed_epoch}) only below {kept}: its log"
            f" {node.epochs}/{node.log_end_offset}",
        )
    return None


def voter_set_matches_log(node: NodeState, believed: Iterable[NodeId]) -> Violation | None:
    """A running replica's voter set (`believed`, its ids) is its log's latest."""
    if not node.up or not node.voter_history:
        return None
    stated = node.voter_history[-1][1]
    mine = frozenset(believed)
    if mine != frozenset(stated.ids):
        return Violation(
            VOTER_SET_MATCHES_LOG,
            f"node {node.node_id} ({_state_name(node)}, epoch {node.epoch}) has voters"
            f" {sorted(mine)} but its log states {sorted(stated.ids)} (voter sets "
            + ", ".join(f"{o}:{sorted(v.ids)}" for o, v in node.voter_history)
            + f"; log {node.epochs}/{node.log_end_offset})",
        )
    return None


def _state_name(node: NodeState) -> str:
    return "Down" if node.state is None else node.state.value
