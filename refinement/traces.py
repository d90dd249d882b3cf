"""Trace validation: an implementation trace (ndjson, kraft.trace_format) checked by TLC
against spec/KRaft.tla through spec/TraceKRaft.tla.

Each trace event becomes a sequence of spec steps ("ops") with parameters fixed by the event,
and the acting node's logged state is compared after the last one. The events are written as
the generated module TraceData.tla into a temporary directory, next to a copy of
TraceKRaft.tla and a generated config; KRaft.tla is found through TLC's library path. Every
event has a fixed number of ops, so the BFS depth TLC reaches says whether some behaviour
matched every event (depth 1 + all ops) or else names the first event that no behaviour can
match; a second run then prints (PrintT) the spec state just before it. The mapping is
documented in spec/README.md ("Trace validation").

CLI:
    python -m refinement.traces validate TRACE.ndjson
    python -m refinement.traces conformance --seeds N [--events E] [--profile P]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from kraft.trace_format import JsonObject, TraceEvent, encode, read_trace
from refinement.tlc import SPEC_DIR, TlcError, TlcResult, run_tlc

TRACE_SPEC = SPEC_DIR / "TraceKRaft.tla"
NIL = -1

# Spec message types; other messages (EndQuorumEpochResponse, FetchSnapshot*) are not
# modelled by KRaft.tla and their events are stutter steps.
_MODELLED = frozenset(
    {
        "VoteRequest",
        "VoteResponse",
        "BeginQuorumEpochRequest",
        "BeginQuorumEpochResponse",
        "EndQuorumEpochRequest",
        "FetchRequest",
        "FetchResponse",
    }
)
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


def _int(obj: JsonObject | None, key: str, default: int = NIL) -> int:
    if obj is None:
        return default
    v = obj.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _nil(v: int) -> int:
    return NIL if v < 0 else v


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
        if _int(msg, "error", 0) != 0:
            kind, div_end, div_epoch = "error", 0, 0
        elif isinstance(diverging, list) and len(diverging) == 2:
            kind = "diverging"
            div_end, div_epoch = int(str(diverging[0])), int(str(diverging[1]))
        else:
            kind, div_end, div_epoch = "ok", 0, 0
        pattern: dict[str, TlaValue] = {
            "src": base["src"],
            "dst": base["dst"],
            "epoch": _int(msg, "leaderEpoch"),
            "leader": _nil(_int(msg, "leaderId")),
            "kind": kind,
            # -1: a new leader that does not know its HWM yet (KRaft.tla's UnknownHwm).
            "hwm": max(_int(msg, "highWatermark"), -1),
            "divEnd": div_end,
            "divEpoch": div_epoch,
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
) -> dict[str, TlaValue]:
    return {
        "a": a,
        "n": n,
        "x": x,
        "e": e,
        "m": _NO_MSG if m is None else m,
        "exact": exact,
        "anyPre": any_pre,
    }


@dataclass
class _Parked:
    request: dict[str, TlaValue]
    deadline: int


@dataclass
class _Mapper:
    """Translates events in order; remembers the fetches a leader holds (long polling)."""

    parked: dict[int, list[_Parked]] = field(default_factory=dict)

    def ops(self, ev: TraceEvent) -> list[dict[str, TlaValue]]:
        node = ev.node if ev.node is not None else 0
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
        acts = list(ev.actions)
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
            elif a in _NODE_ACTIONS:
                ops.append(_op(a, node))
            elif a not in _SILENT_ACTIONS:
                ops.append(_op(f"Unmapped:{a}", node))
            i += 1
        return ops or [_op("Skip")]

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
        if t not in _MODELLED:
            return 0
        m, exact = spec_message(msg)
        any_pre = not vote_response_kind_known(msg)
        ops.append(_op("Recv", node, m=m, exact=exact, any_pre=any_pre))
        if t == "EndQuorumEpochRequest":
            # The implementation learns the resigning leader first; its election, if any,
            # starts with a later ElectionTimeout (Kafka 4.x: only the fetch timer is cut).
            ops.append(
                _op("LearnLeader", node, x=_int(msg, "leaderId"), e=_int(msg, "leaderEpoch"))
            )
            ops.append(_op("HandleEndQuorumEpochRequest", node))
            return 0
        ldr = _int(msg, "leaderId") if t == "VoteResponse" else NIL
        learn = ldr >= 0 and ldr != node
        if learn:
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


def map_trace(events: Sequence[TraceEvent]) -> MappedTrace:
    mapper = _Mapper()
    records: list[dict[str, TlaValue]] = []
    counts: list[int] = []
    servers: set[int] = set()
    max_epoch = max_log = crashes = 0
    for ev in events:
        ops = mapper.ops(ev)
        check, st = _state(ev)
        node = ev.node if ev.node is not None else 0
        if ev.node is not None:
            servers.add(ev.node)
        if check:
            max_epoch = max(max_epoch, _int(ev.state, "epoch", 0))
            max_log = max(max_log, _int(ev.state, "endOffset", 0))
        crashes += ev.action in ("Crash", "Stop")
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
    )


# --------------------------------------------------------------------------- TLC files


def trace_module(mapped: MappedTrace, *, target: int = 0, check_safety: bool = True) -> str:
    lines = ["---- MODULE TraceData ----", "EXTENDS Integers, Sequences", "", "Trace == <<"]
    body = [tla(r) for r in mapped.records]
    lines.append(",\n".join(body))
    lines += [
        ">>",
        "",
        f"Target == {target}",
        f"CheckSafety == {tla(check_safety)}",
        "====",
    ]
    return "\n".join(lines) + "\n"


def trace_config(mapped: MappedTrace, voters: Iterable[int] | None = None) -> str:
    servers = "{" + ", ".join(str(s) for s in mapped.servers) + "}"
    voter_set = servers if voters is None else "{" + ", ".join(str(v) for v in voters) + "}"
    return "\n".join(
        [
            "CONSTANTS",
            f"    Server = {servers}",
            f"    Voters = {voter_set}",
            '    Values = {"v"}',
            f"    MaxEpoch = {mapped.max_epoch + 1}",
            f"    MaxLogLen = {mapped.max_log + 1}",
            "    MaxMessages = 1000000",
            f"    MaxRestarts = {mapped.crashes + 1}",
            "    Nil <- NilValue",
            "    Commit <- TraceCommit",
            '    Mutant = "none"',
            "INIT TraceInit",
            "NEXT TraceNext",
            "CHECK_DEADLOCK FALSE",
            "",
        ]
    )


# --------------------------------------------------------------------------- validation


@dataclass(frozen=True)
class TraceValidation:
    accepted: bool
    events: int
    first_unmatched: int | None
    event: str | None
    state_before: str | None
    seconds: float
    distinct_states: int

    def summary(self) -> str:
        rate = self.events / self.seconds if self.seconds > 0 else 0.0
        head = (
            f"{'ACCEPTED' if self.accepted else 'REJECTED'} events={self.events}"
            f" distinct_states={self.distinct_states} time={self.seconds:.1f}s"
            f" ({rate:.0f} events/s)"
        )
        if self.accepted:
            return head
        out = [head]
        out.append(f"  first unmatched event: {self.first_unmatched}")
        if self.event is not None:
            out.append(f"  event: {self.event}")
        if self.state_before is not None:
            out.append("  spec state before it:")
            out += ["    " + line for line in self.state_before.splitlines()]
        return "\n".join(out)


def _load(path_or_events: str | Path | Sequence[TraceEvent]) -> list[TraceEvent]:
    if isinstance(path_or_events, str | Path):
        return read_trace(path_or_events)
    return list(path_or_events)


def _run(
    workdir: Path,
    mapped: MappedTrace,
    *,
    target: int,
    check_safety: bool,
    timeout_s: float | None,
    voters: Iterable[int] | None,
) -> TlcResult:
    (workdir / "TraceData.tla").write_text(
        trace_module(mapped, target=target, check_safety=check_safety)
    )
    cfg = workdir / "TraceKRaft.cfg"
    cfg.write_text(trace_config(mapped, voters))
    res = run_tlc(workdir / "TraceKRaft.tla", cfg, workers=1, timeout_s=timeout_s)
    if not res.ok:
        raise TlcError(
            f"trace validation did not finish ({res.error_kind.value} {res.violated}):\n"
            + "\n".join(res.raw_output.splitlines()[-30:])
        )
    return res


def _event_at_step(op_counts: Sequence[int], steps: int) -> int:
    """The event whose ops contain step `steps + 1` (steps = steps taken so far)."""
    done = 0
    for i, c in enumerate(op_counts):
        if done + c > steps:
            return i
        done += c
    return len(op_counts) - 1


_REPORT = '<< "TRACE-STATE"'


def _reports(output: str) -> list[str]:
    """The spec states TraceKRaft printed (PrintT(Report)), one string each."""
    out: list[str] = []
    current: list[str] | None = None
    for line in output.splitlines():
        if line.startswith(_REPORT):
            if current is not None:
                out.append("\n".join(current))
            current = [line]
        elif current is not None:
            if line.startswith("@!@!@") or not line.strip():
                out.append("\n".join(current))
                current = None
            else:
                current.append(line)
    if current is not None:
        out.append("\n".join(current))
    return out


def _format_report(text: str) -> str:
    """TLC's pretty-printed <<"TRACE-STATE", l, servers, messages>> as labelled parts."""
    body = text.strip()
    body = body.removeprefix(_REPORT).strip().removeprefix(",").strip()
    body = body.removesuffix(">>").rstrip()
    return "servers: per node id in order; inFlight: message :> copies\n" + body


def validate_trace(
    path_or_events: str | Path | Sequence[TraceEvent],
    *,
    timeout_s: float | None = 600.0,
    invariants: bool = True,
    voters: Iterable[int] | None = None,
) -> TraceValidation:
    """Check with TLC that some behaviour of TraceKRaft (KRaft plus bridging steps) matches
    every event of the trace; on a rejection, name the first event none can match.

    invariants: also require KRaft's safety invariants after every event.
    voters: the voter ids (default: every node of the trace)."""
    events = _load(path_or_events)
    start = time.monotonic()
    if not events:
        return TraceValidation(True, 0, None, None, None, 0.0, 0)
    mapped = map_trace(events)
    total_steps = sum(mapped.op_counts)
    with tempfile.TemporaryDirectory(prefix="tracekraft-") as tmp:
        workdir = Path(tmp)
        shutil.copy(TRACE_SPEC, workdir / TRACE_SPEC.name)
        res = _run(
            workdir,
            mapped,
            target=0,
            check_safety=invariants,
            timeout_s=timeout_s,
            voters=voters,
        )
        # TLC's depth counts states: the initial one plus one per step.
        steps = max(res.depth - 1, 0)
        if steps >= total_steps:
            return TraceValidation(
                accepted=True,
                events=len(events),
                first_unmatched=None,
                event=None,
                state_before=None,
                seconds=time.monotonic() - start,
                distinct_states=res.distinct_states,
            )
        index = _event_at_step(mapped.op_counts, steps)
        before: list[str] = []
        if index > 0:
            again = _run(
                workdir,
                mapped,
                target=index + 1,
                check_safety=invariants,
                timeout_s=timeout_s,
                voters=voters,
            )
            before = _reports(again.raw_output)
    return TraceValidation(
        accepted=False,
        events=len(events),
        first_unmatched=events[index].index,
        event=encode(events[index]),
        state_before=_format_report(before[0]) if before else "the initial state",
        seconds=time.monotonic() - start,
        distinct_states=res.distinct_states,
    )


# --------------------------------------------------------------------------- merging


def _timed_lines(path: Path) -> list[tuple[int, TraceEvent]]:
    """A node's events with the time to order them by: the line's `ns` (monotonic, written
    before the step's sends leave) if present, else its millisecond `time`."""
    return [(ev.ns if ev.ns is not None else ev.time * 1_000_000, ev) for ev in read_trace(path)]


def merge_traces(paths: Iterable[str | Path]) -> list[TraceEvent]:
    """One trace from the per-node traces of a real cluster, in causal order, indexed 0..n-1.

    Lines are ordered by their write time (`ns`); a node writes a step's line before that
    step's messages leave, so a send's line precedes its receipt's. A node killed (SIGKILL)
    wrote no line for its crash: a Crash event, without a state to compare, is put just
    before its Restart line (a down node takes no steps, so nothing else moves)."""
    timed: list[tuple[int, int, int, TraceEvent]] = []
    for f, path in enumerate(paths):
        lines = _timed_lines(Path(path))
        timed += [(key, f, i, ev) for i, (key, ev) in enumerate(lines)]
    # Ties (none expected with ns) keep each file's own order.
    timed.sort(key=lambda t: (t[0], t[1], t[2]))
    merged: list[TraceEvent] = []
    last_action: dict[int | None, str] = {}
    for _, _, _, ev in timed:
        restart = bool(ev.actions) and ev.actions[0] == "Restart"
        if restart and last_action.get(ev.node) not in (None, "Crash", "Stop"):
            merged.append(TraceEvent(len(merged), ev.time, ev.node, "Crash", (), None, None))
        merged.append(replace(ev, index=len(merged)))
        last_action[ev.node] = ev.action
    return merged


# --------------------------------------------------------------------------- conformance

CONFORMANCE_PROFILES = ("lossy", "crashes", "partitions", "mixed")


@dataclass(frozen=True)
class ConformanceRun:
    seed: int
    profile: str
    events: int
    result: TraceValidation
    trace_path: Path | None

    def replay(self, budget: int) -> str:
        return (
            f"python -m refinement.sim --seed {self.seed} --profile {self.profile}"
            f" --events {budget} --trace /tmp/trace-{self.seed}.ndjson && "
            f"python -m refinement.traces validate /tmp/trace-{self.seed}.ndjson"
        )


def simulate_trace(seed: int, profile: str, events: int, out: Path) -> None:
    """Run the simulator on one seed with faults and write its trace to `out`."""
    from refinement.faults import PROFILES
    from refinement.sim import SimConfig, simulate

    config = SimConfig(seed=seed, max_events=events, profile=PROFILES[profile])
    with open(out, "w", encoding="utf-8") as f:
        simulate(config, trace=f)


def conformance(
    seeds: Iterable[int],
    *,
    events: int = 300,
    profiles: Sequence[str] = CONFORMANCE_PROFILES,
    jobs: int = 2,
    timeout_s: float | None = 600.0,
    keep_dir: Path | None = None,
) -> list[ConformanceRun]:
    """Simulate each seed (profiles in turn), validate its trace; in seed order."""
    seeds = list(seeds)
    out_dir = keep_dir or Path(tempfile.mkdtemp(prefix="conformance-"))
    out_dir.mkdir(parents=True, exist_ok=True)

    def one(i: int, seed: int) -> ConformanceRun:
        profile = profiles[i % len(profiles)]
        path = out_dir / f"trace-{profile}-{seed}.ndjson"
        simulate_trace(seed, profile, events, path)
        trace = read_trace(path)
        res = validate_trace(trace, timeout_s=timeout_s)
        if res.accepted and keep_dir is None:
            path.unlink()
        return ConformanceRun(seed, profile, len(trace), res, path)

    with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
        runs = list(pool.map(lambda p: one(*p), enumerate(seeds)))
    if keep_dir is None and all(r.result.accepted for r in runs):
        shutil.rmtree(out_dir, ignore_errors=True)
    return runs


# --------------------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m refinement.traces")
    sub = p.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("validate", help="validate one ndjson trace with TLC")
    v.add_argument("trace", type=Path)
    v.add_argument("--timeout", type=float, default=600.0)
    v.add_argument("--no-invariants", action="store_true", help="skip KRaft's invariants")
    c = sub.add_parser("conformance", help="simulate seeds with faults and validate each")
    c.add_argument("--seeds", type=int, default=20)
    c.add_argument("--first-seed", type=int, default=0)
    c.add_argument("--events", type=int, default=300)
    c.add_argument("--profile", choices=CONFORMANCE_PROFILES, help="one profile for all seeds")
    c.add_argument("--jobs", type=int, default=2)
    c.add_argument("--keep", type=Path, help="keep the traces in this directory")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.cmd == "validate":
        res = validate_trace(args.trace, timeout_s=args.timeout, invariants=not args.no_invariants)
        print(res.summary())
        return 0 if res.accepted else 1
    profiles = (args.profile,) if args.profile else CONFORMANCE_PROFILES
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    start = time.monotonic()
    runs = conformance(
        seeds, events=args.events, profiles=profiles, jobs=args.jobs, keep_dir=args.keep
    )
    rejected = [r for r in runs if not r.result.accepted]
    total = sum(r.events for r in runs)
    for r in runs:
        print(f"seed={r.seed} profile={r.profile} {r.result.summary()}")
        if not r.result.accepted:
            print(f"  trace: {r.trace_path}\n  replay: {r.replay(args.events)}")
    print(
        f"{len(runs)} traces, {total} events, {len(rejected)} rejected,"
        f" {time.monotonic() - start:.0f}s"
    )
    return 1 if rejected else 0


if __name__ == "__main__":
    sys.exit(main())
