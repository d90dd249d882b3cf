"""The building blocks of the KRaft APIs' declarative schemas (kraft.protocol.messages).

Short names for the primitive types and version ranges, `spec` for one API's request and
response, and the KIP-853 endpoint lists several responses share.
"""

from __future__ import annotations

from typing import Final

from kraft.protocol.schema import ApiSpec, ArrayOf, Direction, Field, MessageSpec, Prim, Struct, V

__all__ = [
    "ALL",
    "BOOL",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "RECORDS",
    "REQ",
    "RSP",
    "STRING",
    "UINT16",
    "UUID",
    "array",
    "endpoints",
    "node_endpoints",
    "spec",
    "struct",
]

REQ: Final = Direction.REQUEST
RSP: Final = Direction.RESPONSE

BOOL: Final = Prim.BOOL
INT8: Final = Prim.INT8
INT16: Final = Prim.INT16
UINT16: Final = Prim.UINT16
INT32: Final = Prim.INT32
INT64: Final = Prim.INT64
UUID: Final = Prim.UUID
STRING: Final = Prim.STRING
RECORDS: Final = Prim.RECORDS

ALL: Final = V(0)


def array(name: str, *fields: Field) -> ArrayOf:
    return ArrayOf(Struct(name, fields))


def struct(name: str, *fields: Field) -> Struct:
    return Struct(name, fields)


def spec(
    key: int,
    name: str,
    valid: tuple[int, int],
    flexible: int,
    *,
    req: tuple[Field, ...],
    rsp: tuple[Field, ...],
) -> ApiSpec:
    lo, hi = valid
    return ApiSpec(
        key,
        name,
        MessageSpec(key, name + "Request", REQ, V(lo, hi), V(flexible), req),
        MessageSpec(key, name + "Response", RSP, V(lo, hi), V(flexible), rsp),
    )


def node_endpoints(since: int, port: Prim = UINT16, *extra: Field) -> Field:
    """The tag-0 endpoint list KIP-853 added to KRaft responses."""
    return Field(
        "node_endpoints",
        array(
            "NodeEndpoint",
            Field("node_id", INT32, V(since)),
            Field("host", STRING, V(since)),
            Field("port", port, V(since)),
            *extra,
        ),
        V(since),
        tag=0,
    )


def endpoints(name: str, since: int, *, ignorable: bool) -> Field:
    return Field(
        name,
        array(
            "Endpoint",
            Field("name", STRING, V(since)),
            Field("host", STRING, V(since)),
            Field("port", UINT16, V(since)),
        ),
        V(since),
        ignorable=ignorable,
    )
