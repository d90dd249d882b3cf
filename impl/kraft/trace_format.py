"""The ndjson trace format: the one description of a trace line, its writer and its reader.

Every trace, of the simulator (refinement.sim), the hypothesis machine (refinement.stateful),
a real node (kraft.tracing) or a campaign (refinement.pipeline), is written with `encode` /
`TraceWriter` and read with `parse_line` / `read_trace` from here; TLC trace validation
(refinement.traces) maps the parsed events onto spec/TraceKRaft.tla. Lives in `kraft`
because a node writes traces and must not import `refinement`.

A trace is UTF-8 text, one JSON object per line, one line per step, serialised with sorted
keys and no spaces so that the same run gives the same bytes. The keys of a line:

- `index`: the line's number in its trace (0, 1, ...); a restarted node continues its file.
- `time`: the step's time in milliseconds (simulated time, or the node's clock).
- `node`: the acting node's id; null for a line about no node (a hypothesis "Rule").
- `action`: the step's name: the first spec action the core took (kraft.core.vocabulary),
  or a driver action (Start, Restart, Crash, Stop, Shutdown, DropMessage, DuplicateMessage,
  Partition, Heal, Rule, ...) or, for a step that took no action but changed state, the name
  of the event (Tick, Receive, ClientAppend).
- `actions`: every spec action the core took in the step, in order (HandleVoteResponse then
  BecomeLeader, say); may be empty.
- `message`: the message received (or dropped, or whose send failed) or null:
  {"type": class name, "src", "dst", the message's fields in camelCase}, record data
  summarised as "batches": [[base offset, last offset, epoch], ...] (a FetchSnapshot chunk as
  "chunk", the same summary, and "chunkBytes", its length); a ClientAppend is
  {"type": "ClientAppend", "requestId", "records": number of values}; a snapshot event of the
  driver (SnapshotWritten, SnapshotValidated, the state machine's CreateSnapshot) is
  `local_event_json` of it: its fields, "snapshotId" as [end offset, epoch].
- `state`: the acting node's state after the step (STATE_KEYS: state, epoch, votedFor,
  leader, endOffset, lastEpoch, hwm, logStartOffset; state "Down" for a stopped node), or
  null.
- `voter` (only on a step that took AddVoter or RemoveVoter): the id of the voter added or
  removed.
- `ns` (real nodes only): time.monotonic_ns() when the line was written, before the step's
  sends leave: one clock for the nodes of a machine, so their traces merge in causal order.

Versions: lines carry no version number. The format has grown twice, compatibly: `ns` was
added for node traces, and `voter` for voter changes; readers treat both as optional (`ns` is
absent in simulator traces, `voter` on every line but a voter change's). A change
that is not compatible changes this module, its tests and spec/README.md ("Trace validation").
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass, fields, is_dataclass
from enum import Enum
from pathlib import Path
from typing import IO, Final, TypeAlias

from kraft.core.replica_view import ReplicaView
from kraft.ids import OffsetAndEpoch, ReplicaKey

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
JsonObject: TypeAlias = dict[str, JsonValue]

# The keys of a line's `state` object, in state_json's order.
STATE_KEYS: Final = (
    "state",
    "epoch",
    "votedFor",
    "leader",
    "endOffset",
    "lastEpoch",
    "hwm",
    "logStartOffset",
)
# The `state` of a node that is not running.
DOWN: Final = "Down"


# --------------------------------------------------------------------------- a line


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One line of a trace (see the module's docstring for what each field carries)."""

    index: int
    time: int
    node: int | None
    action: str
    actions: tuple[str, ...]
    message: JsonObject | None
    state: JsonObject | None
    ns: int | None = None
    voter: int | None = None

    def to_json(self) -> JsonObject:
        out: JsonObject = {
            "index": self.index,
            "time": self.time,
            "node": self.node,
            "action": self.action,
            "actions": list[JsonValue](self.actions),
            "message": self.message,
            "state": self.state,
        }
        if self.ns is not None:
            out["ns"] = self.ns
        if self.voter is not None:
            out["voter"] = self.voter
        return out


def encode(event: TraceEvent) -> str:
    """The line of an event, without its newline: sorted keys, no spaces."""
    return json.dumps(event.to_json(), sort_keys=True, separators=(",", ":"))


class TraceWriter:
    """Writes trace lines to a text stream (the caller owns and closes it)."""

    __slots__ = ("_out", "count")

    def __init__(self, out: IO[str]) -> None:
        self._out = out
        self.count = 0

    def write(self, event: TraceEvent) -> None:
        self._out.write(encode(event))
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
    """The event of one line; `line` (1-based) names it in errors."""
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
        ns=_int_or_none(raw, "ns", line),
        voter=_int_or_none(raw, "voter", line),
    )


def iter_trace(path: str | Path) -> Iterator[TraceEvent]:
    """The events of a trace file, in order (blank lines skipped)."""
    with open(path, encoding="utf-8") as f:
        for n, text in enumerate(f, start=1):
            if text.strip():
                yield parse_line(text, n)


def read_trace(path: str | Path) -> list[TraceEvent]:
    return list(iter_trace(path))


# --------------------------------------------------------------------------- a line's parts

# Record batch v2 header: BaseOffset i64, Length i32, PartitionLeaderEpoch i32, Magic i8,
# CRC u32, Attributes i16, LastOffsetDelta i32. Only these are needed to summarise a batch.
_BATCH_PREFIX: Final = struct.Struct(">qiibIhi")
_LOG_OVERHEAD: Final = 12


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


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.capitalize() for w in rest)


def json_of(value: object) -> JsonValue:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, ReplicaKey):
        # Traces name a replica by its id: the simulator derives directory ids from node ids.
        return int(value.id)
    if isinstance(value, OffsetAndEpoch):
        return [int(value.offset), int(value.epoch)]
    if isinstance(value, Enum):
        v = value.value
        return v if isinstance(v, int | str) else str(v)
    if isinstance(value, bytes | memoryview):
        return summarize_batches(value)
    if isinstance(value, tuple | list):
        return [json_of(v) for v in value]
    if is_dataclass(value) and not isinstance(value, type):
        return {camel(f.name): json_of(getattr(value, f.name)) for f in fields(value)}
    return str(value)


# Field names per message class, computed once: message_json runs for every traced event.
_FIELDS: dict[type, tuple[tuple[str, str], ...]] = {}


def message_json(message: object, src: int, dst: int) -> JsonObject:
    cls = type(message)
    out: JsonObject = {"type": cls.__name__, "src": src, "dst": dst}
    if not is_dataclass(message) or isinstance(message, type):
        return out
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple((f.name, camel(f.name)) for f in fields(message))
        _FIELDS[cls] = names
    for name, key in names:
        value = getattr(message, name)
        if name == "records":
            out["batches"] = summarize_batches(value)
        elif name == "chunk":
            # A snapshot chunk: its batches, and its length (where the next chunk starts).
            out["chunk"] = summarize_batches(value)
            out["chunkBytes"] = len(value)
        else:
            out[key] = json_of(value)
    return out


def local_event_json(event: object) -> JsonObject | None:
    """The `message` of a step taken on a driver event about snapshots (KIP-630), which trace
    validation needs (the snapshot a SnapshotWritten adds), or None for any other event."""
    name = type(event).__name__
    if name not in ("CreateSnapshot", "SnapshotWritten", "SnapshotValidated"):
        return None
    out: JsonObject = {"type": name}
    if is_dataclass(event) and not isinstance(event, type):
        for f in fields(event):
            if f.name != "now_ms":
                out[camel(f.name)] = json_of(getattr(event, f.name))
    return out


def state_json(v: ReplicaView) -> JsonObject:
    """A running replica's `state` object (keys STATE_KEYS)."""
    return {
        "state": v.state.value,
        "epoch": int(v.epoch),
        "votedFor": None if v.voted_for is None else int(v.voted_for.id),
        "leader": None if v.leader_id is None else int(v.leader_id),
        "endOffset": int(v.end_offset),
        "lastEpoch": int(v.last_epoch),
        "hwm": None if v.high_watermark is None else int(v.high_watermark),
        "logStartOffset": int(v.log_start_offset),
    }
