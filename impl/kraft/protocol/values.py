"""Message values as plain Python data, and typed accessors that narrow them.

A message is a mapping from snake_case field name to value. Decoding yields `dict`s holding
every field the schema knows (absent-in-this-version fields carry their defaults), lists for
arrays, `uuid.UUID` for uuids and `memoryview` for records. Encoding accepts any Mapping and
any Sequence, and fills a missing key with the field's default.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import TypeAlias

from kraft.protocol.errors import ProtocolError

FieldValue: TypeAlias = (
    bool
    | int
    | float
    | str
    | bytes
    | memoryview
    | uuid.UUID
    | Mapping[str, "FieldValue"]
    | Sequence["FieldValue"]
    | None
)
Message: TypeAlias = Mapping[str, FieldValue]
MessageDict: TypeAlias = dict[str, FieldValue]


class FieldTypeError(ProtocolError, TypeError):
    """A decoded message field did not have the type the caller asked for."""


def _wrong(msg: Message, key: str, want: str) -> FieldTypeError:
    return FieldTypeError(f"field {key!r} is {type(msg.get(key)).__name__}, not {want}")


def get_int(msg: Message, key: str) -> int:
    v = msg[key]
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    raise _wrong(msg, key, "int")


def get_bool(msg: Message, key: str) -> bool:
    v = msg[key]
    if isinstance(v, bool):
        return v
    raise _wrong(msg, key, "bool")


def get_str(msg: Message, key: str) -> str:
    v = msg[key]
    if isinstance(v, str):
        return v
    raise _wrong(msg, key, "str")


def get_opt_str(msg: Message, key: str) -> str | None:
    v = msg[key]
    if v is None or isinstance(v, str):
        return v
    raise _wrong(msg, key, "str | None")


def get_uuid(msg: Message, key: str) -> uuid.UUID:
    v = msg[key]
    if isinstance(v, uuid.UUID):
        return v
    raise _wrong(msg, key, "UUID")


def get_struct(msg: Message, key: str) -> Message:
    v = msg[key]
    if isinstance(v, Mapping):
        return v
    raise _wrong(msg, key, "struct")


def get_structs(msg: Message, key: str) -> list[Message]:
    """An array of structs (an empty list for a null nullable array)."""
    v = msg[key]
    if v is None:
        return []
    if isinstance(v, Sequence) and not isinstance(v, str | bytes | memoryview):
        out: list[Message] = []
        for e in v:
            if not isinstance(e, Mapping):
                raise _wrong(msg, key, "array of structs")
            out.append(e)
        return out
    raise _wrong(msg, key, "array of structs")


def get_ints(msg: Message, key: str) -> list[int]:
    v = msg[key]
    if isinstance(v, Sequence) and not isinstance(v, str | bytes | memoryview):
        out: list[int] = []
        for e in v:
            if not isinstance(e, int) or isinstance(e, bool):
                raise _wrong(msg, key, "array of ints")
            out.append(e)
        return out
    raise _wrong(msg, key, "array of ints")


def get_records(msg: Message, key: str) -> bytes | memoryview | None:
    v = msg[key]
    if v is None or isinstance(v, bytes | memoryview):
        return v
    raise _wrong(msg, key, "records")
