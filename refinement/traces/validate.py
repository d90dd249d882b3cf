"""TLC trace validation of one trace: the mapped trace (refinement.traces.mapping) written as
the generated module TraceData.tla into a temporary directory, next to a copy of
spec/TraceKRaft.tla and a generated config (KRaft.tla is found through TLC's library path),
and TLC's verdict read back. Every event has a fixed number of ops, so the BFS depth TLC
reaches says whether some behaviour matched every event (depth 1 + all ops) or else names the
first event that no behaviour can match; a second run then prints (PrintT) the spec state just
before it.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kraft.trace_format import TraceEvent, encode, read_trace
from refinement.tlc import SPEC_DIR, TlcError, TlcResult, run_tlc
from refinement.traces.mapping import MappedTrace, map_trace, tla

TRACE_SPEC = SPEC_DIR / "TraceKRaft.tla"


# --------------------------------------------------------------------------- TLC files


def trace_module(mapped: MappedTrace, *, target: int = 0, check_safety: bool = True) -> str:
    lines = ["---- MODULE TraceData ----", "EXTENDS Integers, Sequences, TLC", "", "Trace == <<"]
    body = [tla(r) for r in mapped.records]
    lines.append(",\n".join(body))
    sizes = [
        f"(<<{src}, {tla(snap)}>> :> {size})"
        for (src, snap), size in sorted(mapped.snapshot_sizes.items())
    ]
    aliases = [f"({server} :> {node})" for server, node in sorted(mapped.alias.items())]
    lines += [
        ">>",
        "",
        "\\* Bytes of each snapshot a leader served: <<leader, <<end, epoch>>>> -> size.",
        "SnapSizes == " + (" @@ ".join(sizes) if sizes else "[x \\in {} |-> 0]"),
        "",
        "\\* The server of each later incarnation of a node (a new directory id) -> the node.",
        "Alias == " + (" @@ ".join(aliases) if aliases else "[x \\in {} |-> 0]"),
        "",
        f"Target == {target}",
        f"CheckSafety == {tla(check_safety)}",
        "====",
    ]
    return "\n".join(lines) + "\n"


def trace_config(
    mapped: MappedTrace, voters: Iterable[int] | None = None, dynamic: bool | None = None
) -> str:
    """dynamic: KRaft.tla's Dynamic and VoterChanges (default: as the trace shows)."""
    dynamic = mapped.dynamic if dynamic is None else dynamic
    servers = "{" + ", ".join(str(s) for s in mapped.servers) + "}"
    bootstrap = "{" + ", ".join(str(s) for s in mapped.servers if s not in mapped.alias) + "}"
    voter_set = bootstrap if voters is None else "{" + ", ".join(str(v) for v in voters) + "}"
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
            "    MaxSnapshots = 1000000",
            f"    Dynamic = {tla(dynamic)}",
            f"    VoterChanges = {tla(dynamic)}",
            "    SnapshotSize <- TraceSnapshotSize",
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
    dynamic: bool | None,
) -> TlcResult:
    (workdir / "TraceData.tla").write_text(
        trace_module(mapped, target=target, check_safety=check_safety)
    )
    cfg = workdir / "TraceKRaft.cfg"
    cfg.write_text(trace_config(mapped, voters, dynamic))
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
    dynamic: bool | None = None,
    report: bool = True,
) -> TraceValidation:
    """Check with TLC that some behaviour of TraceKRaft (KRaft plus bridging steps) matches
    every event of the trace; on a rejection, name the first event none can match.

    invariants: also require KRaft's safety invariants after every event.
    voters: the voter ids (default: every node of the trace); of a dynamic quorum, the
        bootstrap voters (`kraft format --initial-controllers`).
    dynamic: a dynamic quorum (kraft.version 1; default: whether the trace shows one,
        mapping.is_dynamic).
    report: on a rejection, run TLC again to print the spec state before the event (else
        state_before is None: a test that needs only the event saves the second run)."""
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
            dynamic=dynamic,
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
        if index > 0 and report:
            again = _run(
                workdir,
                mapped,
                target=index + 1,
                check_safety=invariants,
                timeout_s=timeout_s,
                voters=voters,
                dynamic=dynamic,
            )
            before = _reports(again.raw_output)
    return TraceValidation(
        accepted=False,
        events=len(events),
        first_unmatched=events[index].index,
        event=encode(events[index]),
        state_before=(
            None if not report else _format_report(before[0]) if before else "the initial state"
        ),
        seconds=time.monotonic() - start,
        distinct_states=res.distinct_states,
    )
