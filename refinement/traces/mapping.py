"""The mapping of a trace onto spec/TraceKRaft.tla: each event of an ndjson trace
(kraft.trace_format) becomes a fixed sequence of spec steps ("ops") with parameters fixed by
the event, plus the acting node's logged state to compare after the last one. Owns the TLA+
value syntax of those records and the bookkeeping the mapping needs across events (the fetches
a leader holds; what later answers show of an answer the leader's step did not log: a
FetchSnapshot chunk's length, a snapshot's size, a size-limited Fetch answer's record count).
What the whole trace shows beyond one event (sizes, counts, a dynamic quorum) is
refinement.traces.lookahead's. The mapping is documented in spec/README.md ("Trace
validation").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from kraft.trace_format import JsonObject, TraceEvent
from refinement.traces.incarnations import Incarnations
from refinement.traces.lookahead import (
    NIL,
    SnapshotSizes,
    is_dynamic,
    snapshot_sizes,
)
from refinement.traces.lookahead import json_int as _int
from refinement.traces.lookahead import json_pair as _pair

# Spec message types; other messages (EndQuorumEpochResponse, the voter-change RPCs) are not
# modelled by KRaft.tla: their events are stutter steps, unless the step appended a Voters
# record (the actions AddVoter / RemoveVoter).
_MODELLED = frozenset(
    {
        "VoteRequest",
        "VoteResponse",
        "BeginQuorumEpochRequest",
        "BeginQuorumEpochResponse",
        "EndQuorumEpochRequest",
        "FetchRequest",
        "FetchResponse",
        "FetchSnapshotRequest",
        "FetchSnapshotResponse",
    }
)
# FetchSnapshotResponse error codes with a spec kind of their own (kraft.errors.ErrorCode).
_SNAPSHOT_NOT_FOUND = 98
_POSITION_OUT_OF_RANGE = 99
# Actions that are one spec step of the acting node.
_NODE_ACTIONS = frozenset(
    {
        "ElectionTimeout",
        "BecomeCandidate",
        "BecomeLeader",
        "Resign",
        "SendFetchRequest",
        "AdvanceHighWatermark",
        "Restart",
        "Crash",
        # KIP-630: the log start moves to a snapshot held (the logged state says which);
        # a chunk is asked for; a fetched and validated snapshot is installed.
        "AdvanceLogStartOffset",
        "SendFetchSnapshotRequest",
        "InstallSnapshot",
    }
)
# Core actions with no spec counterpart and no effect on spec state.
_SILENT_ACTIONS = frozenset({"Start", "HandleEndQuorumEpochResponse"})


# --------------------------------------------------------------------------- TLA+ values


class Tla:
    """A TLA+ expression given verbatim."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


TlaValue = bool | int | str | Tla | tuple["TlaValue", ...] | dict[str, "TlaValue"]


def tla(value: TlaValue) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Tla):
        return value.text
    if isinstance(value, tuple):
        return "<<" + ", ".join(tla(v) for v in value) + ">>"
    return "[" + ", ".join(f"{k} |-> {tla(v)}" for k, v in value.items()) + "]"


# --------------------------------------------------------------------------- the mapping


def _nil(v: int) -> int:
    return NIL if v < 0 else v


_NO_SNAPSHOT = (-1, -1)


def spec_message(msg: JsonObject) -> tuple[dict[str, TlaValue], bool]:
    """The spec message a logged one stands for, and whether it is exact (every spec field
    known) or a FetchResponse pattern (the fetch it answers is not logged)."""
    t = str(msg.get("type"))
    base: dict[str, TlaValue] = {"type": t, "src": _int(msg, "src"), "dst": _int(msg, "dst")}
    if t == "VoteRequest":
        base |= {
            "epoch": _int(msg, "candidateEpoch"),
            "preVote": msg.get("preVote") is True,
            "lastEpoch": _int(msg, "lastEpoch"),
            "endOffset": _int(msg, "lastEndOffset"),
        }
    elif t == "VoteResponse":
        # Whether it answers a pre-vote is not on the wire; TraceKRaft matches either unless
        # the trace says (see vote_response_kind_known).
        base |= {
            "epoch": _int(msg, "leaderEpoch"),
            "granted": msg.get("voteGranted") is True,
            "preVote": msg.get("preVote") is True,
        }
    elif t == "BeginQuorumEpochRequest":
        base |= {"epoch": _int(msg, "leaderEpoch")}
    elif t == "BeginQuorumEpochResponse":
        base |= {"epoch": _int(msg, "leaderEpoch"), "leader": _nil(_int(msg, "leaderId"))}
    elif t == "EndQuorumEpochRequest":
        succ = msg.get("preferredSuccessors")
        ids = tuple(int(x) for x in succ if isinstance(x, int)) if isinstance(succ, list) else ()
        base |= {"epoch": _int(msg, "leaderEpoch"), "successors": ids}
    elif t == "FetchRequest":
        base |= {
            "epoch": _int(msg, "replicaEpoch"),
            "fetchOffset": _int(msg, "fetchOffset"),
            "lastFetchedEpoch": _int(msg, "lastFetchedEpoch"),
        }
    elif t == "FetchSnapshotRequest":
        base |= {
            "epoch": _int(msg, "replicaEpoch"),
            "snapshot": _pair(msg, "snapshotId") or _NO_SNAPSHOT,
            "position": _int(msg, "position", 0),
        }
    elif t == "FetchSnapshotResponse":
        # The spec's chunk carries the snapshot's content, the implementation's its bytes:
        # matched by the other fields (TraceKRaft's SnapMatches), `len` = the chunk's bytes.
        err = _int(msg, "error", 0)
        snap_kind = {0: "ok", _SNAPSHOT_NOT_FOUND: "notFound", _POSITION_OUT_OF_RANGE: "outOfRange"}
        return {
            "type": t,
            "src": base["src"],
            "dst": base["dst"],
            "epoch": _int(msg, "leaderEpoch"),
            "leader": _nil(_int(msg, "leaderId")),
            "kind": snap_kind.get(err, "error"),
            "snapshot": _pair(msg, "snapshotId") or _NO_SNAPSHOT,
            "position": _int(msg, "position", 0),
            "size": _int(msg, "size", 0),
            "len": _int(msg, "chunkBytes", 0),
        }, False
    elif t == "FetchResponse":
        raw = msg.get("batches")
        batches: list[tuple[int, int, int]] = []
        if isinstance(raw, list):
            for b in raw:
                nums = [x for x in b if isinstance(x, int)] if isinstance(b, list) else []
                if len(nums) == 3:
                    base_off, last, epoch = nums
                    # Spec offsets are 1-based positions: record o is entry o + 1.
                    batches.append((base_off + 1, last + 1, epoch))
        diverging = msg.get("divergingEpoch")
        snapshot = _pair(msg, "snapshotId")
        if _int(msg, "error", 0) != 0:
            kind, div_end, div_epoch = "error", 0, 0
        elif isinstance(diverging, list) and len(diverging) == 2:
            kind = "diverging"
            div_end, div_epoch = int(str(diverging[0])), int(str(diverging[1]))
        elif snapshot is not None:
            kind, div_end, div_epoch = "snapshot", 0, 0
        else:
            kind, div_end, div_epoch = "ok", 0, 0
        pattern: dict[str, TlaValue] = {
            "type": t,
            "src": base["src"],
            "dst": base["dst"],
            "epoch": _int(msg, "leaderEpoch"),
            "leader": _nil(_int(msg, "leaderId")),
            "kind": kind,
            # -1: a new leader that does not know its HWM yet (KRaft.tla's UnknownHwm).
            "hwm": max(_int(msg, "highWatermark"), -1),
            "divEnd": div_end,
            "divEpoch": div_epoch,
            "snapshot": snapshot if kind == "snapshot" and snapshot is not None else _NO_SNAPSHOT,
            "count": sum(b[1] - b[0] + 1 for b in batches),
            "batches": tuple(batches),
        }
        return pattern, False
    return base, True


_NO_MSG: dict[str, TlaValue] = {"type": "none"}


def vote_response_kind_known(msg: JsonObject) -> bool:
    """Whether a logged VoteResponse says if it answers a pre-vote (`preVote` logged)."""
    return msg.get("type") != "VoteResponse" or isinstance(msg.get("preVote"), bool)


def _op(
    a: str,
    n: int = 0,
    *,
    x: int = 0,
    e: int = 0,
    m: dict[str, TlaValue] | None = None,
    exact: bool = True,
    any_pre: bool = False,
    xs: tuple[int, ...] = (),
) -> dict[str, TlaValue]:
    return {
        "a": a,
        "n": n,
        "x": x,
        "e": e,
        "m": _NO_MSG if m is None else m,
        "exact": exact,
        "anyPre": any_pre,
        "xs": xs,
    }


@dataclass
class _Parked:
    request: dict[str, TlaValue]
    deadline: int


# AddVoter / RemoveVoter when the trace does not name the voter: any replica (TraceKRaft).
ANY_VOTER = -1


def _voter_id(msg: JsonObject | None) -> int:
    """The voter an AddRaftVoter / RemoveRaftVoter request names (its id), or ANY_VOTER."""
    if msg is None:
        return ANY_VOTER
    v = msg.get("voter")
    if isinstance(v, dict):
        return _int(v, "id", ANY_VOTER)
    return v if isinstance(v, int) and not isinstance(v, bool) else ANY_VOTER


@dataclass
class _Mapper:
    """Translates events in order; remembers the fetches a leader holds (long polling) and
    the voter the last AddRaftVoter request to a leader named (its AddVoter step comes later,
    once the new voter answered ApiVersions, with no message)."""

    snaps: SnapshotSizes
    # A dynamic quorum: a node that loses its disk is a new replica (incarnations.py).
    dynamic: bool = False
    inc: Incarnations = field(default_factory=Incarnations)
    parked: dict[int, list[_Parked]] = field(default_factory=dict)
    adding: dict[int, int] = field(default_factory=dict)
    # Discovery fetches (max wait 0) handled, per fetching node: the voters that answered,
    # in order; an answer from a bootstrap server's id (-2, -3, ...) is the first one's.
    discovery: dict[int, list[int]] = field(default_factory=dict)
    # Whether a node's last logged state named no leader.
    leaderless: dict[int, bool] = field(default_factory=dict)

    def ops(self, ev: TraceEvent) -> list[dict[str, TlaValue]]:
        node = self.inc.server(ev.node if ev.node is not None else 0)
        msg = ev.message
        act = ev.action
        if act == "DropMessage":
            if msg is not None and msg.get("type") in _MODELLED:
                m, exact = spec_message(msg)
                any_pre = not vote_response_kind_known(msg)
                return [_op("Drop", node, m=m, exact=exact, any_pre=any_pre)]
            return [_op("Skip")]
        if act in ("Crash", "Stop"):
            # A stop closes (flushes) the log; to the spec both are Crash.
            self.parked.pop(node, None)
            return [_op("Crash", node)]
        if act == "LoseDisk" and self.dynamic and ev.node is not None:
            # KIP-853: the node comes back with a new directory id, a new replica; the old
            # one crashes for good (incarnations.py).
            self.parked.pop(node, None)
            old, new = self.inc.lose_disk(ev.node)
            return [_op("Crash", old), _op("Crash", new)]
        if act == "LoseDisk":
            # The disk-loss profile: an observer crashes with its data directory gone
            # (TraceKRaft's bridging step LoseDisk).
            self.parked.pop(node, None)
            return [_op("LoseDisk", node)]
        acts = list(ev.actions)
        if msg is not None and msg.get("type") == "AddVoterRequest":
            self.adding[node] = _voter_id(msg)
        if (
            not acts
            and msg is not None
            and msg.get("type") == "SnapshotValidated"
            and msg.get("valid") is False
        ):
            # A fetched snapshot failed validation: the transfer starts over.
            return [_op("AbandonSnapFetch", node)]
        if acts and acts[0] == "Restart":
            self.parked.pop(node, None)
        received = (
            msg is not None
            and "src" in msg
            and bool(acts)
            and acts[0] == f"Handle{msg.get('type')}"
        )
        ops: list[dict[str, TlaValue]] = []
        completions = sum(
            1 for i, a in enumerate(acts) if a == "HandleFetchRequest" and not (i == 0 and received)
        )
        held = self._take_parked(node, completions, ev.time)
        i = 0
        while i < len(acts):
            a = acts[i]
            nxt = acts[i + 1] if i + 1 < len(acts) else None
            if i == 0 and received:
                assert msg is not None
                i += self._receive(ev, node, msg, nxt, ops)
            elif a == "HandleFetchRequest":
                request = held.pop(0) if held else None
                if request is None:
                    ops.append(_op("NoParkedFetch", node))
                else:
                    ops += [_op("Recv", node, m=request), _op("HandleFetchRequest", node)]
                    if nxt == "AdvanceHighWatermark":
                        ops += [_op("AdvanceHighWatermark", node), _op("RefreshHwm", node)]
                        i += 1
            elif a == "ClientAppend":
                ops += [_op("ClientAppend", node)] * max(_int(msg, "records", 0), 0)
            elif a == "AddVoter":
                # KIP-853: the leader appends a Voters record with the voter added.
                # The voter the step names (older traces: the last AddRaftVoter request).
                voter = self.adding.pop(node, ANY_VOTER) if ev.voter is None else ev.voter
                voter = voter if voter == ANY_VOTER else self.inc.server(voter)
                ops.append(_op("AddVoter", node, x=voter))
            elif a == "RemoveVoter":
                voter = _voter_id(msg) if _is_type(msg, "RemoveVoterRequest") else ANY_VOTER
                voter = voter if ev.voter is None else ev.voter
                ops.append(_op("RemoveVoter", node, x=voter))
            elif a == "CreateSnapshot":
                # The snapshot a SnapshotWritten made durable (its id is the event's).
                snap = _pair(msg, "snapshotId")
                ops.append(_op("CreateSnapshot", node, x=snap[0] if snap else -1))
            elif a in _NODE_ACTIONS:
                ops.append(_op(a, node))
            elif a not in _SILENT_ACTIONS:
                ops.append(_op(f"Unmapped:{a}", node))
            i += 1
        for j in range(1, len(ops)):
            if ops[j]["a"] == "HandleFetchRequest" and ops[j - 1]["a"] == "Recv":
                ops[j]["xs"] = self._fetch_counts(ops[j - 1]["m"], ev.index)
        if ev.state is not None and ev.node is not None:
            if "BecomeLeader" in acts:
                self.inc.elected(_int(ev.state, "epoch", 0), ev.node)
            self.leaderless[ev.node] = ev.state.get("leader") is None
        return ops or [_op("Skip")]

    def _fetch_counts(self, request: TlaValue, at: int) -> tuple[int, ...]:
        """The record counts the trace shows that may be this fetch's answer's, handled at
        event `at` (a fetch size limit may cut it)."""
        if not isinstance(request, dict):
            return ()
        key = (request.get("dst"), request.get("src"), request.get("fetchOffset"))
        if not all(isinstance(v, int) for v in key):
            return ()
        leader, follower, offset = (int(str(v)) for v in key)
        # A fetch from offset o (= records held) is answered from the record at offset o.
        return self.snaps.answer_counts(leader, follower, offset, at)

    def _receive(
        self,
        ev: TraceEvent,
        node: int,
        msg: JsonObject,
        nxt: str | None,
        ops: list[dict[str, TlaValue]],
    ) -> int:
        """Ops of the received message's handler; returns how many more actions it used."""
        t = str(msg.get("type"))
        if t == "EndQuorumEpochResponse":
            self._learn_from_end_response(ev, node, msg, ops)
            return 0
        if t not in _MODELLED:
            return 0
        m, exact = spec_message(msg)
        any_pre = not vote_response_kind_known(msg)
        raw = ev.node if ev.node is not None else 0  # messages name nodes, not incarnations
        if t == "FetchResponse":
            m["src"] = self._answerer(raw, _int(msg, "src"))
        if t == "FetchRequest" and _int(msg, "maxWaitMs", 0) == 0:
            self.discovery.setdefault(_int(msg, "src"), []).append(raw)
            # Maybe a node's discovery fetch to a bootstrap server (TraceKRaft's
            # BootstrapFetch; the sender's trace shows no SendFetchRequest for it).
            # From the sender's current incarnation, to a bootstrap voter (the node's id).
            sender = self.inc.server(_int(msg, "src"))
            ops.append(_op("BootstrapFetch", node, m=m | {"src": sender}))
        if t == "BeginQuorumEpochRequest":
            # Maybe one of the leader's later rounds (TraceKRaft's ResendBeginQuorumEpoch),
            # to a voter BecomeLeader's requests never reached.
            ops.append(_op("ResendBeginQuorumEpoch", node, m=m))
        ops.append(_op("Recv", node, m=m, exact=exact, any_pre=any_pre))
        if t == "EndQuorumEpochRequest":
            # The implementation learns the resigning leader first; its election, if any,
            # starts with a later ElectionTimeout (Kafka 4.x: only the fetch timer is cut).
            ldr, epoch = _int(msg, "leaderId"), _int(msg, "leaderEpoch")
            ldr = self.inc.leader(ldr, epoch) if ldr >= 0 else ldr
            ops.append(_op("LearnLeader", node, x=ldr, e=epoch))
            ops.append(_op("HandleEndQuorumEpochRequest", node))
            return 0
        if t == "FetchSnapshotRequest":
            key = (raw, _int(msg, "src"), _pair(msg, "snapshotId") or _NO_SNAPSHOT,
                   _int(msg, "position", 0))  # fmt: skip
            ops.append(_op("HandleFetchSnapshotRequest", node, x=self.snaps.chunks.get(key, 0)))
            return 0
        ldr = _int(msg, "leaderId") if t == "VoteResponse" or self._finds_leader(ev, msg) else NIL
        learn = ldr >= 0 and self.inc.server(ldr) != node
        if learn:
            ldr = self.inc.leader(ldr, _int(msg, "leaderEpoch"))
            # The implementation learns a leader of its epoch from the response before it
            # counts the (pre-)vote; of a larger epoch, after adopting the epoch.
            ops.append(_op("LearnLeader", node, x=ldr, e=_int(msg, "leaderEpoch")))
        ops.append(_op(f"Handle{t}", node))
        if learn:
            ops.append(_op("LearnLeader", node, x=ldr, e=_int(msg, "leaderEpoch")))
        if t == "FetchResponse":
            if isinstance(msg.get("divergingEpoch"), list) and _int(msg, "error", 0) == 0:
                ops.append(_op("RaiseHwm", node, x=max(_int(msg, "highWatermark"), 0)))
        elif t == "FetchRequest":
            if nxt == "AdvanceHighWatermark":
                ops += [_op("AdvanceHighWatermark", node), _op("RefreshHwm", node)]
                return 1
            st = ev.state
            # The leader holds a fetch it has nothing for (KIP-595 long polling) and answers
            # it later; to the spec the request is answered now (empty) and again later.
            if (
                st is not None
                and st.get("state") == "Leader"
                and _int(st, "epoch") == _int(msg, "replicaEpoch")
                and _int(msg, "maxWaitMs", 0) > 0
                and _int(msg, "fetchOffset") == _int(st, "endOffset")
                and _int(msg, "lastFetchedEpoch") == _int(st, "lastEpoch")
            ):
                deadline = ev.time + _int(msg, "maxWaitMs", 0)
                self.parked.setdefault(node, []).append(_Parked(m, deadline))
        return 0

    def _learn_from_end_response(
        self, ev: TraceEvent, node: int, msg: JsonObject, ops: list[dict[str, TlaValue]]
    ) -> None:
        """An EndQuorumEpoch answer is no spec message, but the replica adopts the epoch and
        leader it names, as from any response: TraceKRaft's LearnNewerLeader (a newer epoch)
        or LearnLeader (its own epoch's leader, newly learned). Only when the logged state
        shows it did (a replica shutting down ignores the news)."""
        ldr, epoch = _int(msg, "leaderId"), _int(msg, "leaderEpoch")
        if ev.state is None or _int(ev.state, "epoch") != epoch:
            return
        ldr = self.inc.leader(ldr, epoch) if ldr >= 0 else NIL
        ops.append(_op("LearnNewerLeader", node, x=ldr, e=epoch))
        if ldr >= 0:
            ops.append(_op("LearnLeader", node, x=ldr, e=epoch))

    def _finds_leader(self, ev: TraceEvent, msg: JsonObject) -> bool:
        """A Fetch answer from the leader to a node that knew none (it asked the voters, e.g.
        a replica that just joined a dynamic quorum): the node learns the leader and takes the
        records in one step, as its own learn-then-handle does."""
        node = ev.node if ev.node is not None else 0
        return (
            msg.get("type") == "FetchResponse"
            and _int(msg, "leaderId") == _int(msg, "src")
            and self.leaderless.get(node, False)
        )

    def _answerer(self, node: int, src: int) -> int:
        """The voter whose answer to a discovery fetch of `node` arrives from `src` (a
        bootstrap server's id -2, -3, ... stands for the first voter not yet answered)."""
        pending = self.discovery.get(node, [])
        if src < NIL:
            return pending.pop(0) if pending else src
        if src in pending:
            pending.remove(src)
        return src

    def _take_parked(self, node: int, count: int, now: int) -> list[dict[str, TlaValue]]:
        """The held fetches a step answers: all of them, or those whose wait expired."""
        if count == 0:
            return []
        held = self.parked.get(node, [])
        if count >= len(held):
            chosen = list(held)
        else:
            due = [p for p in held if p.deadline <= now]
            chosen = due[:count] if len(due) >= count else held[:count]
        self.parked[node] = [p for p in held if all(p is not c for c in chosen)]
        return [p.request for p in chosen]


def _is_type(msg: JsonObject | None, t: str) -> bool:
    return msg is not None and msg.get("type") == t


def _state(ev: TraceEvent) -> tuple[bool, dict[str, TlaValue]]:
    st = ev.state
    if st is None or ev.node is None or ev.action in ("DropMessage", "DuplicateMessage"):
        return False, {"state": "none"}
    return True, {
        "state": str(st.get("state")),
        "epoch": _int(st, "epoch", 0),
        "votedFor": _nil(_int(st, "votedFor")),
        "leader": _nil(_int(st, "leader")),
        "endOffset": _int(st, "endOffset", 0),
        "lastEpoch": _int(st, "lastEpoch", 0),
        "hwm": max(_int(st, "hwm"), 0),
        "logStart": _int(st, "logStartOffset", 0),
    }


@dataclass(frozen=True)
class MappedTrace:
    events: tuple[TraceEvent, ...]
    records: tuple[dict[str, TlaValue], ...]
    op_counts: tuple[int, ...]
    servers: tuple[int, ...]
    max_epoch: int
    max_log: int
    crashes: int
    snapshot_sizes: dict[tuple[int, tuple[int, int]], int] = field(default_factory=dict)
    # A dynamic quorum (kraft.version 1, KRaft.tla's Dynamic): see is_dynamic.
    dynamic: bool = False
    # The server of each later incarnation of a node -> the node (incarnations.py).
    alias: dict[int, int] = field(default_factory=dict)


def map_trace(events: Sequence[TraceEvent]) -> MappedTrace:
    snaps = snapshot_sizes(events)
    dynamic = is_dynamic(events)
    mapper = _Mapper(snaps, dynamic=dynamic)
    records: list[dict[str, TlaValue]] = []
    counts: list[int] = []
    servers: set[int] = set()
    max_epoch = max_log = crashes = 0
    for ev in events:
        ops = mapper.ops(ev)
        check, st = _state(ev)
        node = mapper.inc.server(ev.node if ev.node is not None else 0)
        if ev.node is not None:
            servers.add(node)
            servers.update(mapper.inc.alias)
        if check:
            max_epoch = max(max_epoch, _int(ev.state, "epoch", 0))
            max_log = max(max_log, _int(ev.state, "endOffset", 0))
        crashes += ev.action in ("Crash", "Stop", "LoseDisk")
        crashes += ev.action == "LoseDisk" and dynamic  # two servers crash (incarnations.py)
        records.append({"node": node, "check": check, "st": st, "ops": tuple(ops)})
        counts.append(len(ops))
    return MappedTrace(
        events=tuple(events),
        records=tuple(records),
        op_counts=tuple(counts),
        servers=tuple(sorted(servers)),
        max_epoch=max_epoch,
        max_log=max_log,
        crashes=crashes,
        snapshot_sizes=snaps.sizes,
        dynamic=dynamic,
        alias=dict(mapper.inc.alias),
    )
