"""What a trace shows beyond the event a spec step maps (refinement.traces.mapping looks ahead
or across events): the bytes of each FetchSnapshot chunk and snapshot a leader served, the
record counts of the Fetch answers logged, and whether the trace is of a dynamic quorum
(KRaft.tla's Dynamic). Also owns reading integers and [offset, epoch] pairs from logged JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kraft.trace_format import JsonObject, TraceEvent

# A missing node id or integer, as traces write it.
NIL = -1


def json_int(obj: JsonObject | None, key: str, default: int = NIL) -> int:
    if obj is None:
        return default
    v = obj.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def json_pair(msg: JsonObject | None, key: str) -> tuple[int, int] | None:
    """An [offset, epoch] pair (a snapshot id) of a logged message, or None."""
    v = None if msg is None else msg.get(key)
    if isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) for x in v):
        return int(str(v[0])), int(str(v[1]))
    return None


# A FetchSnapshot chunk: (leader, follower, snapshot id, position).
ChunkKey = tuple[int, int, tuple[int, int], int]


@dataclass(frozen=True)
class SnapshotSizes:
    """What the trace shows of the snapshots served: each chunk's length in bytes and each
    snapshot's size, from every FetchSnapshotResponse logged (received or dropped). A leader
    handles a FetchSnapshotRequest before its answer is logged; the spec's leader then sends a
    chunk of the length the answer will show."""

    chunks: dict[ChunkKey, int]
    sizes: dict[tuple[int, tuple[int, int]], int]
    # Fetch answers with records, in trace order: (leader, follower, fetch offset) ->
    # (event index, record count) of each answer logged (received or dropped).
    fetch_answers: dict[tuple[int, int, int], list[tuple[int, int]]]

    def answer_counts(self, leader: int, follower: int, offset: int, at: int) -> tuple[int, ...]:
        """The record counts that may be the answer's to the fetch from `offset` that `leader`
        handled at event `at`: those of every answer to a fetch from that offset logged after
        `at`. Which one is this fetch's the trace cannot always say (a follower may have two
        fetches in flight; an answer lost unlogged leaves only other fetches' answers), so the
        spec may send any of them, or the whole rest of the log (TraceHandleFetchRequest)."""
        later = {
            c for index, c in self.fetch_answers.get((leader, follower, offset), []) if index > at
        }
        return tuple(sorted(later))


def snapshot_sizes(events: Sequence[TraceEvent]) -> SnapshotSizes:
    chunks: dict[ChunkKey, int] = {}
    sizes: dict[tuple[int, tuple[int, int]], int] = {}
    answers: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
    for ev in events:
        msg = ev.message
        if msg is not None and msg.get("type") == "FetchResponse":
            batches = msg.get("batches")
            if isinstance(batches, list) and batches and isinstance(batches[0], list):
                first = batches[0][0]
                last = batches[-1][1] if isinstance(batches[-1], list) else None
                if isinstance(first, int) and isinstance(last, int):
                    key = (json_int(msg, "src"), json_int(msg, "dst"), first)
                    answers.setdefault(key, []).append((ev.index, last - first + 1))
            continue
        if msg is None or msg.get("type") != "FetchSnapshotResponse" or json_int(msg, "error", 0):
            continue
        snap = json_pair(msg, "snapshotId")
        if snap is None:
            continue
        src, dst = json_int(msg, "src"), json_int(msg, "dst")
        chunks[(src, dst, snap, json_int(msg, "position", 0))] = json_int(msg, "chunkBytes", 0)
        sizes[(src, snap)] = json_int(msg, "size", 0)
    return SnapshotSizes(chunks, sizes, answers)


# BecomeLeader's records in a dynamic quorum whose voter set no Voters record states yet:
# LeaderChange, KRaftVersion and Voters (KRaft.tla's StartOfEpochRecords).
_DYNAMIC_START_RECORDS = 3


def is_dynamic(events: Sequence[TraceEvent]) -> bool:
    """Whether the trace is of a dynamic quorum: a voter change was made, or a new leader
    appended the three start-of-epoch records of one (a static quorum's leader appends one)."""
    ends: dict[int, int] = {}
    for ev in events:
        if "AddVoter" in ev.actions or "RemoveVoter" in ev.actions:
            return True
        if ev.node is None or ev.state is None:
            continue
        end = json_int(ev.state, "endOffset", 0)
        if (
            "BecomeLeader" in ev.actions
            and "ClientAppend" not in ev.actions
            and end - ends.get(ev.node, 0) == _DYNAMIC_START_RECORDS
        ):
            return True
        if ev.state.get("state") != "Down":
            ends[ev.node] = end
    return False
