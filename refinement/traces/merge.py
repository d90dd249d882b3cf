"""One trace from the per-node traces of a real cluster, in causal order (by each line's
`ns`, kraft.trace_format), with the crashes a killed node could not write put back."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from kraft.trace_format import TraceEvent, read_trace


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
