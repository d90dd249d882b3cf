"""ndjson traces of simulated (and real) runs: one JSON object per line, one line per event.

A line: {"index", "time", "node", "action", "actions", "message", "state"}, serialised with
sorted keys and no spaces so that the same run gives the same bytes.

- `action` is the spec action of the event (the first ActionTaken the core reported, or a
  simulator action: Crash, Restart, DropMessage, DuplicateMessage, Partition, Heal, ...);
  `actions` lists every ActionTaken of the step in order (a step may take several, e.g.
  HandleVoteResponse then BecomeLeader).
- `message` is the message received or dropped: {"type": class name, "src", "dst", fields in
  camelCase}; record data is summarised as "batches": [[base offset, last offset, epoch], ...].
- `state` is the acting node's state after the step: state, epoch, votedFor, leader,
  endOffset, lastEpoch, hwm, logStartOffset (state "Down" for a stopped node).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from kraft.trace_format import JsonObject, JsonValue, message_json, summarize_batches

# The line encoding is kraft.trace_format's (a node writes the same traces); re-exported here
# for the simulator, the pipeline and the trace validation.
__all__ = [
    "JsonObject",
    "JsonValue",
    "TraceEvent",
    "TraceFormatError",
    "TraceWriter",
    "dumps",
    "iter_trace",
    "message_json",
    "parse_line",
    "read_trace",
    "summarize_batches",
]


@dataclass(frozen=True, slots=True)
class TraceEvent:
    index: int
    time: int
    node: int | None
    action: str
    actions: tuple[str, ...]
    message: JsonObject | None
    state: JsonObject | None

    def to_json(self) -> JsonObject:
        return {
            "index": self.index,
            "time": self.time,
            "node": self.node,
            "action": self.action,
            "actions": list(self.actions),
            "message": self.message,
            "state": self.state,
        }


def dumps(event: TraceEvent) -> str:
    return json.dumps(event.to_json(), sort_keys=True, separators=(",", ":"))


class TraceWriter:
    """Writes trace lines to a text stream (the caller owns and closes it)."""

    __slots__ = ("_out", "count")

    def __init__(self, out: IO[str]) -> None:
        self._out = out
        self.count = 0

    def write(self, event: TraceEvent) -> None:
        self._out.write(dumps(event))
        self._out.write("\n")
        self.count += 1


class TraceFormatError(ValueError):
    """A trace line that is not a trace event."""


def _int_or_none(obj: JsonObject, key: str, line: int) -> int | None:
    v = obj.get(key)
    if v is None or (isinstance(v, int) and not isinstance(v, bool)):
        return v
    raise TraceFormatError(f"line {line}: {key!r} is not an integer")


def _object_or_none(obj: JsonObject, key: str, line: int) -> JsonObject | None:
    v = obj.get(key)
    if v is None or isinstance(v, dict):
        return v
    raise TraceFormatError(f"line {line}: {key!r} is not an object")


def parse_line(text: str, line: int = 0) -> TraceEvent:
    raw: JsonValue = json.loads(text)
    if not isinstance(raw, dict):
        raise TraceFormatError(f"line {line}: not a JSON object")
    index = _int_or_none(raw, "index", line)
    time = _int_or_none(raw, "time", line)
    action = raw.get("action")
    actions = raw.get("actions", [])
    if index is None or time is None or not isinstance(action, str):
        raise TraceFormatError(f"line {line}: index, time and action are required")
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise TraceFormatError(f"line {line}: 'actions' is not a list of names")
    return TraceEvent(
        index=index,
        time=time,
        node=_int_or_none(raw, "node", line),
        action=action,
        actions=tuple(str(a) for a in actions),
        message=_object_or_none(raw, "message", line),
        state=_object_or_none(raw, "state", line),
    )


def iter_trace(path: str | Path) -> Iterator[TraceEvent]:
    with open(path, encoding="utf-8") as f:
        for n, text in enumerate(f, start=1):
            if text.strip():
                yield parse_line(text, n)


def read_trace(path: str | Path) -> list[TraceEvent]:
    return list(iter_trace(path))
