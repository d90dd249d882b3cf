"""The simulator's invariant checkers (refinement/invariants.py) on a mixed kraft/Kafka run.

- The kraft nodes' traces, merged in write order, are replayed event by event into a
  `ClusterState` of the kraft nodes; after each event the action invariants
  (`EpochMonotonic`, `HighWatermarkMonotonic`) are checked for the acting node, and every
  kraft leader is recorded in the leader history.
- Every LeaderChange record in any node's log (Kafka's too) adds its epoch's leader to that
  history, so `ElectionSafety` covers both implementations.
- At the end, one `ClusterState` of every node (kraft and Kafka) is built from the logs on
  disk (the epoch cache from the batches' leader epochs), with the final leader holding the
  final HWM and the kraft acknowledgements; the state invariants (`ElectionSafety`,
  `MajorityReachedHighWatermark`, `LogMatching`, `CommittedNeverLost`, `LogMirror`) are
  checked on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from kafka_harness import Batch

from kraft.control_records import ControlRecordType, LeaderChangeMessage, decode_control_record
from kraft.core.vocabulary import ReplicaState
from kraft.ids import Epoch, NodeId, Offset
from refinement import invariants as inv
from refinement.traces import merge_traces


def epoch_cache(batches: Sequence[Batch]) -> inv.EpochCache:
    out: list[tuple[Epoch, Offset]] = []
    for b in batches:
        epoch = b.header.partition_leader_epoch
        if not out or out[-1][0] != epoch:
            out.append((Epoch(epoch), Offset(b.base_offset)))
    return tuple(out)


def leader_changes(batches: Iterable[Batch]) -> dict[int, set[int]]:
    """epoch -> leader ids named by the LeaderChange records of a log."""
    out: dict[int, set[int]] = {}
    for b in batches:
        if not b.header.is_control:
            continue
        for r in b.records():
            if (
                r.key is not None
                and int.from_bytes(r.key[2:4], "big") == ControlRecordType.LEADER_CHANGE
            ):
                msg = decode_control_record(r)
                assert isinstance(msg, LeaderChangeMessage)
                out.setdefault(b.header.partition_leader_epoch, set()).add(int(msg.leader_id))
    return out


def _node(
    node_id: int,
    incarnation: int,
    state: dict[str, object],
    max_hwm: int | None,
) -> inv.NodeState:
    end = int(state["endOffset"])  # type: ignore[call-overload]
    last = int(state["lastEpoch"])  # type: ignore[call-overload]
    hwm = state.get("hwm")
    return inv.NodeState(
        node_id=NodeId(node_id),
        incarnation=incarnation,
        state=ReplicaState(state["state"]) if state.get("state") != "Down" else None,
        epoch=Epoch(int(state["epoch"])),  # type: ignore[call-overload]
        leader_id=None if state.get("leader") is None else NodeId(int(state["leader"])),  # type: ignore[call-overload]
        end_offset=Offset(end),
        last_epoch=Epoch(last),
        high_watermark=None if hwm is None else Offset(int(hwm)),  # type: ignore[call-overload]
        max_high_watermark=None if max_hwm is None else Offset(max_hwm),
        log_end_offset=Offset(end),
        log_last_epoch=Epoch(last),
        flushed_offset=Offset(end),
        epochs=(),
    )


def check_traces(
    traces: Iterable[Path], voters: frozenset[int]
) -> tuple[list[inv.Violation], dict[int, set[int]], int]:
    """Replay the kraft traces; the violations, the kraft leaders per epoch, the events."""
    events = merge_traces(traces)
    nodes: dict[NodeId, inv.NodeState] = {}
    incarnation: dict[int, int] = {}
    max_hwm: dict[int, int | None] = {}
    leaders: dict[int, set[int]] = {}
    violations: list[inv.Violation] = []
    vset = frozenset(NodeId(v) for v in voters)
    for ev in events:
        if ev.node is None or ev.state is None:
            continue
        n = ev.node
        if ev.actions and ev.actions[0] in ("Start", "Restart"):
            incarnation[n] = incarnation.get(n, 0) + 1
            max_hwm[n] = None
        before = inv.ClusterState(nodes=dict(nodes), voters=vset)
        state = dict(ev.state)
        node = _node(n, incarnation.get(n, 0), state, max_hwm.get(n))
        nodes[NodeId(n)] = node
        after = inv.ClusterState(nodes=dict(nodes), voters=vset)
        for check in inv.ACTION_INVARIANTS:
            v = check(before, after, NodeId(n))
            if v is not None:
                violations.append(inv.Violation(v.name, f"{v.detail} (trace event {ev.index})"))
        if node.high_watermark is not None:
            prev = max_hwm.get(n)
            max_hwm[n] = node.high_watermark if prev is None else max(prev, node.high_watermark)
            nodes[NodeId(n)] = _node(n, incarnation.get(n, 0), state, max_hwm[n])
        if node.state is ReplicaState.LEADER:
            leaders.setdefault(int(node.epoch), set()).add(n)
    return violations, leaders, len(events)


def check_final(
    logs: Mapping[int, Sequence[Batch]],
    voters: frozenset[int],
    leader: int,
    hwm: int,
    leader_history: Mapping[int, set[int]],
    acked: Iterable[tuple[int, int, int]],
) -> list[inv.Violation]:
    """The state invariants on every node's final log (all nodes stopped cleanly, so what is
    on disk is flushed); the final leader exposes the final HWM."""
    nodes: dict[NodeId, inv.NodeState] = {}
    for n, batches in logs.items():
        cache = epoch_cache(batches)
        end = batches[-1].last_offset + 1 if batches else 0
        last = cache[-1][0] if cache else 0
        is_leader = n == leader
        nodes[NodeId(n)] = inv.NodeState(
            node_id=NodeId(n),
            incarnation=1,
            state=ReplicaState.LEADER if is_leader else ReplicaState.FOLLOWER,
            epoch=Epoch(max(leader_history) if leader_history else last),
            leader_id=NodeId(leader),
            end_offset=Offset(end),
            last_epoch=Epoch(last),
            high_watermark=Offset(hwm),
            max_high_watermark=Offset(hwm),
            log_end_offset=Offset(end),
            log_last_epoch=Epoch(last),
            flushed_offset=Offset(end),
            epochs=cache,
        )
    history = {Epoch(e): frozenset(NodeId(x) for x in ids) for e, ids in leader_history.items()}
    ranges = tuple(inv.AckedRange(Offset(a), Offset(b), Epoch(e)) for a, b, e in acked)
    state = inv.ClusterState(
        nodes=nodes,
        voters=frozenset(NodeId(v) for v in voters),
        leaders=history,
        acknowledged=ranges,
    )
    return inv.check_all(None, state)
