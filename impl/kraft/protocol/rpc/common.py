"""What every RPC translator shares: the `Rpc` contract, its errors, endpoints, wire shapes.

A translator (one per KRaft RPC, `kraft.protocol.rpc.vote` ...) maps one core request and
response dataclass (`kraft.core.messages`) to and from the wire dicts of one Kafka API
(`kraft.protocol.messages`). `kraft.protocol.rpc.registry` holds the one table that picks it.

KRaft has one partition, `__cluster_metadata`-0 (topic id METADATA_TOPIC_ID where Fetch carries
ids). Fields are filled as Apache Kafka's KRaft fills them (RaftUtil's singleton builders):

- Responses carry an error at two levels. INCONSISTENT_CLUSTER_ID is answered at the top level
  with no partition data, as are requests refused before the core sees them (`error_response`);
  every other core error sits on the partition, next to the leader id and epoch.
- A request's voter key (KIP-853) is absent when `voter_id` is negative; a zero directory id is
  "no directory id".
- Records stay the buffer they came in (a memoryview slice of the received frame).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Final, TypeVar

from kraft.control_records import Endpoint
from kraft.core.messages import Request, Response
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, DirectoryId, Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey
from kraft.protocol.errors import ProtocolError
from kraft.protocol.schema import ApiKey
from kraft.protocol.topic_ids import METADATA_PARTITION, METADATA_TOPIC_ID, METADATA_TOPIC_NAME
from kraft.protocol.values import (
    FieldTypeError,
    FieldValue,
    Message,
    MessageDict,
    get_int,
    get_opt_str,
    get_str,
    get_structs,
    get_uuid,
)

__all__ = [
    "TOP_LEVEL_ERRORS",
    "InvalidWireResponseError",
    "Listener",
    "NodeEndpoints",
    "Rpc",
    "UntranslatableVersionError",
    "WireTranslationError",
    "error_from_code",
]


class WireTranslationError(ProtocolError):
    """A wire request that is not a KRaft request for __cluster_metadata-0, or lacks a field."""

    error_code: ClassVar[ErrorCode] = ErrorCode.INVALID_REQUEST


class UntranslatableVersionError(WireTranslationError):
    """We were asked to speak an API version that cannot carry what KRaft needs."""

    error_code: ClassVar[ErrorCode] = ErrorCode.UNSUPPORTED_VERSION


class InvalidWireResponseError(WireTranslationError):
    """A response that is not about __cluster_metadata-0 (Kafka's client drops such a one)."""

    error_code: ClassVar[ErrorCode] = ErrorCode.CORRUPT_MESSAGE


@dataclass(frozen=True, slots=True)
class Listener:
    """One named endpoint of a node (KIP-853 endpoints; `name` is the listener name)."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class NodeEndpoints:
    """A node and its endpoints (DescribeQuorum v2's `nodes`, DescribeCluster's controllers)."""

    node_id: NodeId
    listeners: tuple[Listener, ...]


# Errors Kafka's KRaft answers at the top level of a response (the rest are per partition).
TOP_LEVEL_ERRORS: Final = frozenset({ErrorCode.INCONSISTENT_CLUSTER_ID})

_M = TypeVar("_M")


class Rpc(ABC):
    """The translator of one KRaft RPC: its API key, the versions it translates, its core
    request and response types, both directions of both messages, the node id a request
    claims to come from, and the answers for a request refused before the core sees it.

    The registry calls a translator only with messages of its own types; `expect` checks that
    once per call, so a misrouted message is a TypeError, never a wrong translation."""

    __slots__ = ()

    api_key: ClassVar[ApiKey]
    versions: ClassVar[tuple[int, int]]
    request_type: ClassVar[type[Request]]
    response_type: ClassVar[type[Response]]

    @abstractmethod
    def request_to_wire(
        self, msg: Request, version: int, listeners: Sequence[Listener]
    ) -> MessageDict:
        """The wire body; `listeners` are the sending leader's endpoints (KIP-853)."""

    @abstractmethod
    def request_from_wire(self, version: int, body: Message, local: ClusterId | None) -> Request:
        """The core request; `local` stands in for a cluster id the sender left out."""

    @abstractmethod
    def response_to_wire(
        self, msg: Response, version: int, leader_listener: Listener | None
    ) -> MessageDict:
        """The wire body of a response whose error is not a top-level one."""

    @abstractmethod
    def response_from_wire(self, version: int, body: Message) -> Response:
        """The core response a wire response carries (a top-level error included)."""

    @abstractmethod
    def sender(self, request: Request) -> NodeId | None:
        """The node id the request claims to come from (None: an admin client, no node)."""

    def error_response(self, version: int, error: ErrorCode) -> MessageDict:
        """The wire answer carrying only `error` at the top level (any codec version)."""
        del version
        return {"error_code": int(error)}

    def check_version(self, version: int, error: type[WireTranslationError]) -> None:
        lo, hi = self.versions
        if not lo <= version <= hi:
            raise error(f"{self.api_key.name} v{version} is outside the KRaft range v{lo}-v{hi}")


def expect(msg: object, cls: type[_M]) -> _M:
    """`msg` as the core type its translator handles (a TypeError for a misrouted one)."""
    if not isinstance(msg, cls):
        raise TypeError(f"{type(msg).__name__} is not a {cls.__name__}")
    return msg


# --- shared wire shapes -------------------------------------------------------------------


def one_topic(name_key: str, partitions_key: str, **partition: FieldValue) -> MessageDict:
    return {name_key: METADATA_TOPIC_NAME, partitions_key: [partition]}


def node_endpoints(
    leader_id: NodeId, listener: Listener | None, *, rack: bool = False
) -> list[MessageDict]:
    """Kafka sends the leader's endpoint for the listener the request arrived on, if known."""
    if listener is None or leader_id < 0:
        return []
    entry: MessageDict = {"node_id": leader_id, "host": listener.host, "port": listener.port}
    if rack:
        entry["rack"] = None
    return [entry]


def listeners_to_wire(listeners: Sequence[Listener]) -> list[MessageDict]:
    return [{"name": x.name, "host": x.host, "port": x.port} for x in listeners]


def endpoints_to_wire(endpoints: Sequence[Endpoint]) -> list[MessageDict]:
    """A voter's endpoints (KIP-853 `listeners` of the voter-change requests)."""
    return [{"name": e.name, "host": e.host, "port": e.port} for e in endpoints]


def endpoints_from_wire(body: Message, key: str) -> tuple[Endpoint, ...]:
    return tuple(
        Endpoint(get_str(x, "name"), get_str(x, "host"), get_int(x, "port"))
        for x in get_structs(body, key)
    )


def optional_cluster_id(body: Message) -> ClusterId | None:
    """A voter change's cluster id; None when left out (Kafka then does not check it)."""
    value = get_opt_str(body, "cluster_id")
    return None if value is None else ClusterId(value)


def voter_of(body: Message) -> ReplicaKey:
    """The voter key of a voter-change request (`voter_id`, `voter_directory_id`)."""
    return ReplicaKey(NodeId(get_int(body, "voter_id")), directory_of(body, "voter_directory_id"))


def metadata_partition(
    body: Message,
    topics_key: str,
    name_key: str | None,
    partitions_key: str,
    index_key: str,
    *,
    error: type[WireTranslationError] = WireTranslationError,
) -> Message:
    """The single partition entry; anything but exactly __cluster_metadata-0 is refused.
    `name_key` None means the topic is named by its id (Fetch v13+)."""
    topics = get_structs(body, topics_key)
    if len(topics) != 1:
        raise error(f"expected one topic, got {len(topics)}")
    topic = topics[0]
    if name_key is None:
        if get_uuid(topic, "topic_id") != METADATA_TOPIC_ID:
            raise error(f"topic id {topic['topic_id']!r} is not the metadata topic's")
    elif topic[name_key] != METADATA_TOPIC_NAME:
        raise error(f"topic {topic[name_key]!r} is not {METADATA_TOPIC_NAME}")
    partitions = get_structs(topic, partitions_key)
    if len(partitions) != 1 or get_int(partitions[0], index_key) != METADATA_PARTITION:
        raise error(f"expected only partition {METADATA_PARTITION} of {METADATA_TOPIC_NAME}")
    return partitions[0]


def cluster_id_of(body: Message, local: ClusterId | None) -> ClusterId:
    value = get_opt_str(body, "cluster_id")
    if value is not None:
        return ClusterId(value)
    if local is None:
        raise WireTranslationError("request carries no cluster id")
    return local  # Kafka does not enforce a cluster id the sender left out


def directory_of(msg: Message, key: str) -> DirectoryId:
    return DirectoryId(get_uuid(msg, key))


def voter_key_of(body: Message, partition: Message) -> ReplicaKey | None:
    voter_id = get_int(body, "voter_id")
    if voter_id < 0:
        return None
    return ReplicaKey(NodeId(voter_id), directory_of(partition, "voter_directory_id"))


def leader_of(msg: Message) -> tuple[NodeId, Epoch]:
    return NodeId(get_int(msg, "leader_id")), Epoch(get_int(msg, "leader_epoch"))


def snapshot_id_of(s: Message) -> OffsetAndEpoch:
    return OffsetAndEpoch(Epoch(get_int(s, "epoch")), Offset(get_int(s, "end_offset")))


def error_of(msg: Message) -> ErrorCode:
    return error_from_code(get_int(msg, "error_code"))


def error_from_code(code: int) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR  # a code we do not know: Kafka's UNKNOWN too


_T = TypeVar("_T")


def translating(fn: Callable[[], _T], error: type[WireTranslationError]) -> _T:
    """Missing keys and wrongly typed values in a hand-built or decoded dict become `error`."""
    try:
        return fn()
    except WireTranslationError:
        raise
    except (KeyError, FieldTypeError) as e:
        raise error(f"missing or mistyped field: {e}") from None
