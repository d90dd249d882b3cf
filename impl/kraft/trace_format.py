"""The ndjson trace format shared by the real node and the simulator.

A line: {"index", "time", "node", "action", "actions", "message", "state"}, serialised with
sorted keys and no spaces so that the same run gives the same bytes. `message` is the message
received: {"type": class name, "src", "dst", fields in camelCase}, with record data summarised
as "batches": [[base offset, last offset, epoch], ...]; `state` is the node's state after the
step. Lives in `kraft` because a node writes traces and must not import `refinement`.
"""

from __future__ import annotations

import struct
from dataclasses import fields, is_dataclass
from enum import Enum
from typing import Final, TypeAlias

from kraft.core.replica import ReplicaView
from kraft.ids import OffsetAndEpoch, ReplicaKey

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
JsonObject: TypeAlias = dict[str, JsonValue]

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
        else:
            out[key] = json_of(value)
    return out


def state_json(v: ReplicaView) -> JsonObject:
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
