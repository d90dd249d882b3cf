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
import struct
from collections.abc import Iterator
from dataclasses import dataclass, fields, is_dataclass
from enum import Enum
from pathlib import Path
from typing import IO, TypeAlias

from kraft.core.messages import Message
from kraft.ids import OffsetAndEpoch, ReplicaKey

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
JsonObject: TypeAlias = dict[str, JsonValue]

# Record batch v2 header: BaseOffset i64, Length i32, PartitionLeaderEpoch i32, Magic i8,
# CRC u32, Attributes i16, LastOffsetDelta i32. Only these are needed to summarise a batch.
_BATCH_PREFIX = struct.Struct(">qiibIhi")
_LOG_OVERHEAD = 12


def summarize_batches(data: bytes | memoryview) -> list[JsonValue]:
    """[[base offset, last offset, epoch], ...] of the whole batches in `data`."""
    out: list[JsonValue] = []
    pos = 0
    n = len(data)
    while pos + _BATCH_PREFIX.size <= n:
        base, length, epoch, _magic, _crc, _attrs, delta = _BATCH_PREFIX.unpack_from(data, pos)
        out.append([base, base + delta, epoch])
        pos += _LOG_OVERHEAD + length
    return out


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.capitalize() for w in rest)


_FIELDS: dict[type, tuple[tuple[str, str], ...]] = {}


def _json_of(value: object) -> JsonValue:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, ReplicaKey):
        # The simulator derives directory ids from node ids, so the id identifies the replica.
        return int(value.id)
    if isinstance(value, OffsetAndEpoch):
        return [int(value.offset), int(value.epoch)]
    if isinstance(value, Enum):
        v = value.value
        return v if isinstance(v, int | str) else str(v)
    if isinstance(value, bytes | memoryview):
        return summarize_batches(value)
    if isinstance(value, tuple | list):
        return [_json_of(v) for v in value]
    if is_dataclass(value) and not isinstance(value, type):
        return {_camel(f.name): _json_of(getattr(value, f.name)) for f in fields(value)}
    return str(value)


def message_json(message: Message, src: int, dst: int) -> JsonObject:
    cls = type(message)
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple((f.name, _camel(f.name)) for f in fields(cls))
        _FIELDS[cls] = names
    out: JsonObject = {"type": cls.__name__, "src": src, "dst": dst}
    for name, key in names:
        value = getattr(message, name)
        if name == "records":
            out["batches"] = summarize_batches(value)
        else:
            out[key] = _json_of(value)
    return out


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
