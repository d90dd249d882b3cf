"""Our declarative form for Kafka message schemas: version ranges, fields, structs, arrays.

A schema is a tree of frozen values. The codec compiles each (message, version) pair of it once;
nothing here runs per message.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from typing import Final, TypeAlias

from kraft.protocol.values import FieldValue

MAX_VERSION: Final = 0x7FFF


@dataclass(frozen=True, slots=True)
class VersionRange:
    """Inclusive range of API versions; `V(3)` is Kafka's "3+", `V(0, 12)` is "0-12"."""

    lo: int
    hi: int = MAX_VERSION

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version <= self.hi

    def __str__(self) -> str:
        if self.lo > self.hi:
            return "none"
        return f"{self.lo}+" if self.hi == MAX_VERSION else f"{self.lo}-{self.hi}"


def V(lo: int, hi: int = MAX_VERSION) -> VersionRange:  # noqa: N802 - reads like Kafka's "0+"
    return VersionRange(lo, hi)


NONE: Final = VersionRange(1, 0)


class Prim(enum.Enum):
    """Primitive wire types. STRING/BYTES/RECORDS are compact in flexible versions."""

    BOOL = "bool"
    INT8 = "int8"
    INT16 = "int16"
    UINT16 = "uint16"
    INT32 = "int32"
    UINT32 = "uint32"
    INT64 = "int64"
    FLOAT64 = "float64"
    UUID = "uuid"
    STRING = "string"
    BYTES = "bytes"
    RECORDS = "records"


# struct format characters of the fixed-width primitives (big-endian throughout).
FIXED_FORMAT: Final[dict[Prim, str]] = {
    Prim.BOOL: "?",
    Prim.INT8: "b",
    Prim.INT16: "h",
    Prim.UINT16: "H",
    Prim.INT32: "i",
    Prim.UINT32: "I",
    Prim.INT64: "q",
    Prim.FLOAT64: "d",
    Prim.UUID: "16s",
}

ZERO_UUID: Final = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class Struct:
    name: str
    fields: tuple[Field, ...]


@dataclass(frozen=True, slots=True)
class ArrayOf:
    element: Prim | Struct


FieldType: TypeAlias = Prim | Struct | ArrayOf


class _Unset(enum.Enum):
    UNSET = "unset"


UNSET: Final = _Unset.UNSET


@dataclass(frozen=True, slots=True)
class Field:
    """One field. `tag` set means the field is tagged in `tagged` versions (default: all of
    `versions`). `ignorable=False` makes encoding a non-default value at a version lacking the
    field an error, as Kafka's generated code does."""

    name: str
    type: FieldType
    versions: VersionRange
    nullable: VersionRange = NONE
    default: FieldValue | _Unset = UNSET
    tag: int | None = None
    tagged: VersionRange | None = None
    ignorable: bool = False

    def is_tagged_in(self, version: int) -> bool:
        if self.tag is None:
            return False
        return version in (self.tagged if self.tagged is not None else self.versions)


class Direction(enum.Enum):
    REQUEST = "request"
    RESPONSE = "response"


@dataclass(frozen=True, slots=True)
class MessageSpec:
    api_key: int
    name: str
    direction: Direction
    valid: VersionRange
    flexible: VersionRange
    fields: tuple[Field, ...]

    @property
    def root(self) -> Struct:
        return Struct(self.name, self.fields)


@dataclass(frozen=True, slots=True)
class ApiSpec:
    api_key: int
    name: str
    request: MessageSpec
    response: MessageSpec

    @property
    def versions(self) -> VersionRange:
        return self.request.valid

    def message(self, direction: Direction) -> MessageSpec:
        return self.request if direction is Direction.REQUEST else self.response


def default_of(f: Field) -> FieldValue:
    """The value a field has when absent: the declared default, else Kafka's zero value."""
    if not isinstance(f.default, _Unset):
        return f.default
    t = f.type
    if isinstance(t, ArrayOf):
        return []
    if isinstance(t, Struct):
        return {g.name: default_of(g) for g in t.fields}
    if t is Prim.BOOL:
        return False
    if t is Prim.FLOAT64:
        return 0.0
    if t is Prim.UUID:
        return ZERO_UUID
    if t is Prim.STRING:
        return ""
    if t is Prim.BYTES or t is Prim.RECORDS:
        return b""
    return 0


class ApiKey(enum.IntEnum):
    """The API keys a KRaft controller answers (DESIGN.md; Apache Kafka's values)."""

    FETCH = 1
    API_VERSIONS = 18
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82
