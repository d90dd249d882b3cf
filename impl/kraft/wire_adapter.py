"""Translation between the core's RPC dataclasses and Kafka's wire messages.

KRaft has one partition, `__cluster_metadata`-0 (topic id METADATA_TOPIC_ID where Fetch carries
ids). Fields are filled as Apache Kafka's KRaft fills them (RaftUtil's singleton builders):

- Responses carry an error at two levels. INCONSISTENT_CLUSTER_ID is answered at the top level
  with no partition data, as are requests refused before the core sees them (`error_response`);
  every other core error sits on the partition, next to the leader id and epoch.
- A request's voter key (KIP-853) is absent when `voter_id` is negative; a zero directory id is
  "no directory id".
- Fetch below v13 names the topic rather than its id; Kafka's KRaft only matches the id, so such
  a request is an INVALID_REQUEST and we never send one.
- Records stay the buffer they came in (a memoryview slice of the received frame).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Final, TypeVar

from kraft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Request,
    Response,
    VoteRequest,
    VoteResponse,
)
from kraft.core.quorum_info import QuorumDescription, ReplicaDescription
from kraft.errors import ErrorCode
from kraft.ids import (
    NO_DIRECTORY,
    NO_EPOCH,
    NO_NODE,
    ClusterId,
    DirectoryId,
    Epoch,
    NodeId,
    Offset,
    OffsetAndEpoch,
    ReplicaKey,
)
from kraft.protocol import (
    METADATA_PARTITION,
    METADATA_TOPIC_ID,
    METADATA_TOPIC_NAME,
    SUPPORTED_APIS,
    ApiKey,
    FieldValue,
    Message,
    MessageDict,
    ProtocolError,
    api_versions_response,
)
from kraft.protocol.values import (
    FieldTypeError,
    get_bool,
    get_int,
    get_ints,
    get_opt_str,
    get_records,
    get_str,
    get_struct,
    get_structs,
    get_uuid,
)

__all__ = [
    "KAFKA_ERROR_MESSAGES",
    "KRAFT_VERSIONS",
    "PREFERRED_VERSIONS",
    "TOP_LEVEL_ERRORS",
    "InvalidWireResponseError",
    "Listener",
    "NodeEndpoints",
    "UntranslatableVersionError",
    "WireTranslationError",
    "api_key_of",
    "check_describe_quorum_request",
    "describe_quorum_error_response",
    "describe_quorum_from_wire",
    "describe_quorum_nodes_from_wire",
    "describe_quorum_request",
    "describe_quorum_response",
    "error_response",
    "request_from_wire",
    "request_to_wire",
    "response_from_wire",
    "response_to_wire",
    "with_voter_set_keys",
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


# The versions this adapter translates: the codec's range, except Fetch from v13 (topic ids).
KRAFT_VERSIONS: Final[dict[ApiKey, tuple[int, int]]] = {
    ApiKey.VOTE: SUPPORTED_APIS[ApiKey.VOTE],
    ApiKey.BEGIN_QUORUM_EPOCH: SUPPORTED_APIS[ApiKey.BEGIN_QUORUM_EPOCH],
    ApiKey.END_QUORUM_EPOCH: SUPPORTED_APIS[ApiKey.END_QUORUM_EPOCH],
    ApiKey.FETCH: (13, SUPPORTED_APIS[ApiKey.FETCH][1]),
    ApiKey.FETCH_SNAPSHOT: SUPPORTED_APIS[ApiKey.FETCH_SNAPSHOT],
    ApiKey.DESCRIBE_QUORUM: SUPPORTED_APIS[ApiKey.DESCRIBE_QUORUM],
}

PREFERRED_VERSIONS: Final[dict[ApiKey, int]] = {k: hi for k, (_, hi) in KRAFT_VERSIONS.items()}

# Errors Kafka's KRaft answers at the top level of a response (the rest are per partition).
TOP_LEVEL_ERRORS: Final = frozenset({ErrorCode.INCONSISTENT_CLUSTER_ID})

_REQUEST_KEYS: Final[dict[type, ApiKey]] = {
    VoteRequest: ApiKey.VOTE,
    BeginQuorumEpochRequest: ApiKey.BEGIN_QUORUM_EPOCH,
    EndQuorumEpochRequest: ApiKey.END_QUORUM_EPOCH,
    FetchRequest: ApiKey.FETCH,
    FetchSnapshotRequest: ApiKey.FETCH_SNAPSHOT,
}
_RESPONSE_KEYS: Final[dict[type, ApiKey]] = {
    VoteResponse: ApiKey.VOTE,
    BeginQuorumEpochResponse: ApiKey.BEGIN_QUORUM_EPOCH,
    EndQuorumEpochResponse: ApiKey.END_QUORUM_EPOCH,
    FetchResponse: ApiKey.FETCH,
    FetchSnapshotResponse: ApiKey.FETCH_SNAPSHOT,
}
_NO_OFFSET: Final = Offset(-1)


def api_key_of(msg: Request | Response) -> ApiKey:
    key = _REQUEST_KEYS.get(type(msg)) or _RESPONSE_KEYS.get(type(msg))
    if key is None:
        raise TypeError(f"not a core RPC message: {type(msg).__name__}")
    return key


def _check_version(api_key: ApiKey, version: int, error: type[WireTranslationError]) -> None:
    lo, hi = KRAFT_VERSIONS[api_key]
    if not lo <= version <= hi:
        raise error(f"{api_key.name} v{version} is outside the KRaft range v{lo}-v{hi}")


# --- shared wire shapes -------------------------------------------------------------------


def _one_topic(name_key: str, partitions_key: str, **partition: FieldValue) -> MessageDict:
    return {name_key: METADATA_TOPIC_NAME, partitions_key: [partition]}


def _node_endpoints(
    leader_id: NodeId, listener: Listener | None, *, rack: bool = False
) -> list[MessageDict]:
    """Kafka sends the leader's endpoint for the listener the request arrived on, if known."""
    if listener is None or leader_id < 0:
        return []
    entry: MessageDict = {"node_id": leader_id, "host": listener.host, "port": listener.port}
    if rack:
        entry["rack"] = None
    return [entry]


def _listeners(listeners: Sequence[Listener]) -> list[MessageDict]:
    return [{"name": x.name, "host": x.host, "port": x.port} for x in listeners]


def _partition(
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


def _cluster_id(body: Message, local: ClusterId | None) -> ClusterId:
    value = get_opt_str(body, "cluster_id")
    if value is not None:
        return ClusterId(value)
    if local is None:
        raise WireTranslationError("request carries no cluster id")
    return local  # Kafka does not enforce a cluster id the sender left out


def _dir(msg: Message, key: str) -> DirectoryId:
    return DirectoryId(get_uuid(msg, key))


def _voter_key(body: Message, partition: Message) -> ReplicaKey | None:
    voter_id = get_int(body, "voter_id")
    if voter_id < 0:
        return None
    return ReplicaKey(NodeId(voter_id), _dir(partition, "voter_directory_id"))


def _leader(msg: Message) -> tuple[NodeId, Epoch]:
    return NodeId(get_int(msg, "leader_id")), Epoch(get_int(msg, "leader_epoch"))


_T = TypeVar("_T")


def _translating(fn: Callable[[], _T], error: type[WireTranslationError]) -> _T:
    """Missing keys and wrongly typed values in a hand-built or decoded dict become `error`."""
    try:
        return fn()
    except WireTranslationError:
        raise
    except (KeyError, FieldTypeError) as e:
        raise error(f"missing or mistyped field: {e}") from None


# --- requests ------------------------------------------------------------------------------


def request_to_wire(
    msg: Request, *, version: int | None = None, listeners: Sequence[Listener] = ()
) -> tuple[ApiKey, int, MessageDict]:
    """The API key, version and wire body for a core request. `listeners` are the leader's
    endpoints, sent in BeginQuorumEpoch and EndQuorumEpoch from v1 (KIP-853)."""
    api_key = api_key_of(msg)
    v = PREFERRED_VERSIONS[api_key] if version is None else version
    _check_version(api_key, v, UntranslatableVersionError)
    body: MessageDict
    if isinstance(msg, VoteRequest):
        if msg.pre_vote and v < 2:
            raise UntranslatableVersionError(f"Vote v{v} cannot carry a pre-vote (v2+, KIP-996)")
        voter = msg.voter
        body = {
            "cluster_id": msg.cluster_id,
            "voter_id": NO_NODE if voter is None else voter.id,
            "topics": [
                _one_topic(
                    "topic_name",
                    "partitions",
                    partition_index=METADATA_PARTITION,
                    replica_epoch=msg.candidate_epoch,
                    replica_id=msg.candidate.id,
                    replica_directory_id=msg.candidate.directory_id,
                    voter_directory_id=NO_DIRECTORY if voter is None else voter.directory_id,
                    last_offset_epoch=msg.last_epoch,
                    last_offset=msg.last_end_offset,
                    pre_vote=msg.pre_vote,
                )
            ],
        }
    elif isinstance(msg, BeginQuorumEpochRequest):
        voter = msg.voter
        body = {
            "cluster_id": msg.cluster_id,
            "voter_id": NO_NODE if voter is None else voter.id,
            "topics": [
                _one_topic(
                    "topic_name",
                    "partitions",
                    partition_index=METADATA_PARTITION,
                    voter_directory_id=NO_DIRECTORY if voter is None else voter.directory_id,
                    leader_id=msg.leader_id,
                    leader_epoch=msg.leader_epoch,
                )
            ],
            "leader_endpoints": _listeners(listeners),
        }
    elif isinstance(msg, EndQuorumEpochRequest):
        body = {
            "cluster_id": msg.cluster_id,
            "topics": [
                _one_topic(
                    "topic_name",
                    "partitions",
                    partition_index=METADATA_PARTITION,
                    leader_id=msg.leader_id,
                    leader_epoch=msg.leader_epoch,
                    # v0 carries ids, v1 replica keys; the codec writes the one the version has.
                    preferred_successors=list(msg.preferred_successors),
                    preferred_candidates=[
                        {"candidate_id": n, "candidate_directory_id": NO_DIRECTORY}
                        for n in msg.preferred_successors
                    ],
                )
            ],
            "leader_endpoints": _listeners(listeners),
        }
    elif isinstance(msg, FetchRequest):
        new_replica_state = v >= 15
        body = {
            "cluster_id": msg.cluster_id,
            "replica_id": -1 if new_replica_state else msg.replica.id,
            "replica_state": {
                "replica_id": msg.replica.id if new_replica_state else -1,
                "replica_epoch": -1,
            },
            "max_wait_ms": msg.max_wait_ms,
            "min_bytes": 0,
            "max_bytes": msg.max_bytes,
            "topics": [
                {
                    "topic": METADATA_TOPIC_NAME,
                    "topic_id": METADATA_TOPIC_ID,
                    "partitions": [
                        {
                            "partition": METADATA_PARTITION,
                            "current_leader_epoch": msg.replica_epoch,
                            "fetch_offset": msg.fetch_offset,
                            "last_fetched_epoch": msg.last_fetched_epoch,
                            "log_start_offset": msg.log_start_offset,
                            "partition_max_bytes": msg.max_bytes,
                            "replica_directory_id": msg.replica.directory_id,
                        }
                    ],
                }
            ],
        }
    else:
        body = {
            "cluster_id": msg.cluster_id,
            "replica_id": msg.replica.id,
            "max_bytes": msg.max_bytes,
            "topics": [
                _one_topic(
                    "name",
                    "partitions",
                    partition=METADATA_PARTITION,
                    current_leader_epoch=msg.replica_epoch,
                    snapshot_id={
                        "end_offset": msg.snapshot_id.offset,
                        "epoch": msg.snapshot_id.epoch,
                    },
                    position=msg.position,
                    replica_directory_id=msg.replica.directory_id,
                )
            ],
        }
    return api_key, v, body


def request_from_wire(
    api_key: int, version: int, body: Message, *, local_cluster_id: ClusterId | None = None
) -> Request:
    """The core request a decoded wire request carries. Raises WireTranslationError
    (INVALID_REQUEST) for a request not about __cluster_metadata-0, a Fetch below v13, or a
    missing field. Vote v2's PreVote flag becomes `VoteRequest.pre_vote` (KIP-996). A request
    without a cluster id is accepted as Kafka does only when `local_cluster_id` is given (it
    stands in for the absent one)."""
    try:
        key = ApiKey(api_key)
    except ValueError:
        raise WireTranslationError(f"API key {api_key} is not a KRaft RPC") from None
    if key not in _REQUEST_KEYS.values():
        raise WireTranslationError(f"{key.name} is not a core RPC")
    _check_version(key, version, WireTranslationError)
    return _translating(
        lambda: _request_from_wire(key, version, body, local_cluster_id), WireTranslationError
    )


def _request_from_wire(
    key: ApiKey, version: int, body: Message, local: ClusterId | None
) -> Request:
    if key is ApiKey.VOTE:
        p = _partition(body, "topics", "topic_name", "partitions", "partition_index")
        return VoteRequest(
            cluster_id=_cluster_id(body, local),
            candidate=ReplicaKey(NodeId(get_int(p, "replica_id")), _dir(p, "replica_directory_id")),
            candidate_epoch=Epoch(get_int(p, "replica_epoch")),
            last_epoch=Epoch(get_int(p, "last_offset_epoch")),
            last_end_offset=Offset(get_int(p, "last_offset")),
            voter=_voter_key(body, p),
            pre_vote=version >= 2 and get_bool(p, "pre_vote"),
        )
    if key is ApiKey.BEGIN_QUORUM_EPOCH:
        p = _partition(body, "topics", "topic_name", "partitions", "partition_index")
        leader_id, leader_epoch = _leader(p)
        return BeginQuorumEpochRequest(
            _cluster_id(body, local), leader_id, leader_epoch, _voter_key(body, p)
        )
    if key is ApiKey.END_QUORUM_EPOCH:
        p = _partition(body, "topics", "topic_name", "partitions", "partition_index")
        leader_id, leader_epoch = _leader(p)
        if version >= 1:
            ids = [get_int(c, "candidate_id") for c in get_structs(p, "preferred_candidates")]
        else:
            ids = get_ints(p, "preferred_successors")
        return EndQuorumEpochRequest(
            _cluster_id(body, local), leader_id, leader_epoch, tuple(NodeId(n) for n in ids)
        )
    if key is ApiKey.FETCH:
        p = _partition(body, "topics", None, "partitions", "partition")
        if version >= 15:
            replica_id = get_int(get_struct(body, "replica_state"), "replica_id")
        else:
            replica_id = get_int(body, "replica_id")
        max_bytes = get_int(body, "max_bytes")
        partition_max = get_int(p, "partition_max_bytes")
        if partition_max > 0:  # Kafka's KRaft sends 0 here; either bound applies
            max_bytes = min(max_bytes, partition_max)
        return FetchRequest(
            cluster_id=_cluster_id(body, local),
            replica=ReplicaKey(NodeId(replica_id), _dir(p, "replica_directory_id")),
            replica_epoch=Epoch(get_int(p, "current_leader_epoch")),
            fetch_offset=Offset(get_int(p, "fetch_offset")),
            last_fetched_epoch=Epoch(get_int(p, "last_fetched_epoch")),
            log_start_offset=Offset(get_int(p, "log_start_offset")),
            max_bytes=max_bytes,
            max_wait_ms=get_int(body, "max_wait_ms"),
        )
    p = _partition(body, "topics", "name", "partitions", "partition")
    return FetchSnapshotRequest(
        cluster_id=_cluster_id(body, local),
        replica=ReplicaKey(NodeId(get_int(body, "replica_id")), _dir(p, "replica_directory_id")),
        replica_epoch=Epoch(get_int(p, "current_leader_epoch")),
        snapshot_id=_snapshot_id(get_struct(p, "snapshot_id")),
        position=get_int(p, "position"),
        max_bytes=get_int(body, "max_bytes"),
    )


def _snapshot_id(s: Message) -> OffsetAndEpoch:
    return OffsetAndEpoch(Epoch(get_int(s, "epoch")), Offset(get_int(s, "end_offset")))


# --- responses -----------------------------------------------------------------------------


def error_response(api_key: int, version: int, error: ErrorCode) -> MessageDict:
    """A response carrying only a top-level `error`, for a request refused before the core
    sees it (malformed, unsupported, not about the metadata partition, wrong cluster id)."""
    key = ApiKey(api_key)
    code = int(error)
    if key is ApiKey.API_VERSIONS:
        return api_versions_response(error)
    if key in (ApiKey.ADD_RAFT_VOTER, ApiKey.REMOVE_RAFT_VOTER):
        return {"throttle_time_ms": 0, "error_code": code, "error_message": None}
    if key is ApiKey.FETCH and version < 7:
        # No top-level error before Fetch v7: the error goes on the partition asked about.
        return {
            "responses": [
                {
                    "topic": METADATA_TOPIC_NAME,
                    "partitions": [
                        {
                            "partition_index": METADATA_PARTITION,
                            "error_code": code,
                            "high_watermark": -1,
                        }
                    ],
                }
            ]
        }
    return {"error_code": code}


def response_to_wire(
    msg: Response, api_key: int, version: int, *, leader_listener: Listener | None = None
) -> MessageDict:
    """The wire body of a core response to a request of `api_key` at `version`.
    `leader_listener` is the leader's endpoint on the listener the request came in on; it fills
    node_endpoints where the version has them (Vote, BeginQuorumEpoch, EndQuorumEpoch and
    FetchSnapshot v1+, Fetch v17+), as Kafka's KRaft does."""
    key = api_key_of(msg)
    if key != api_key:
        raise TypeError(f"{type(msg).__name__} does not answer API key {api_key}")
    _check_version(key, version, UntranslatableVersionError)
    if msg.error in TOP_LEVEL_ERRORS:
        return error_response(key, version, msg.error)
    endpoints = _node_endpoints(msg.leader_id, leader_listener) if version >= 1 else []
    if isinstance(msg, VoteResponse):
        return {
            "error_code": 0,
            "topics": [
                _one_topic(
                    "topic_name",
                    "partitions",
                    partition_index=METADATA_PARTITION,
                    error_code=int(msg.error),
                    leader_id=msg.leader_id,
                    leader_epoch=msg.leader_epoch,
                    vote_granted=msg.vote_granted,
                )
            ],
            "node_endpoints": endpoints,
        }
    if isinstance(msg, BeginQuorumEpochResponse | EndQuorumEpochResponse):
        return {
            "error_code": 0,
            "topics": [
                _one_topic(
                    "topic_name",
                    "partitions",
                    partition_index=METADATA_PARTITION,
                    error_code=int(msg.error),
                    leader_id=msg.leader_id,
                    leader_epoch=msg.leader_epoch,
                )
            ],
            "node_endpoints": endpoints,
        }
    if isinstance(msg, FetchResponse):
        diverging = msg.diverging_epoch
        snapshot = msg.snapshot_id
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "session_id": 0,
            "responses": [
                {
                    "topic": METADATA_TOPIC_NAME,
                    "topic_id": METADATA_TOPIC_ID,
                    "partitions": [
                        {
                            "partition_index": METADATA_PARTITION,
                            "error_code": int(msg.error),
                            "high_watermark": msg.high_watermark,
                            "log_start_offset": msg.log_start_offset,
                            "diverging_epoch": {
                                "epoch": NO_EPOCH if diverging is None else diverging.epoch,
                                "end_offset": -1 if diverging is None else diverging.offset,
                            },
                            "current_leader": {
                                "leader_id": msg.leader_id,
                                "leader_epoch": msg.leader_epoch,
                            },
                            "snapshot_id": {
                                "end_offset": -1 if snapshot is None else snapshot.offset,
                                "epoch": NO_EPOCH if snapshot is None else snapshot.epoch,
                            },
                            "records": msg.records,
                        }
                    ],
                }
            ],
            # Kafka's KRaft sends endpoints from Fetch v17 (KIP-853), though the field is v16+.
            "node_endpoints": (
                _node_endpoints(msg.leader_id, leader_listener, rack=True) if version >= 17 else []
            ),
        }
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "topics": [
            _one_topic(
                "name",
                "partitions",
                index=METADATA_PARTITION,
                error_code=int(msg.error),
                snapshot_id={"end_offset": msg.snapshot_id.offset, "epoch": msg.snapshot_id.epoch},
                current_leader={"leader_id": msg.leader_id, "leader_epoch": msg.leader_epoch},
                size=msg.size,
                position=msg.position,
                unaligned_records=msg.chunk,
            )
        ],
        "node_endpoints": endpoints,
    }


def response_from_wire(api_key: int, version: int, body: Message) -> Response:
    """The core response a decoded wire response carries. A top-level error yields a response
    with that error, no leader (NO_NODE) and NO_EPOCH. Raises InvalidWireResponseError for a
    response about another partition, or one that lacks a field."""
    try:
        key = ApiKey(api_key)
    except ValueError:
        raise InvalidWireResponseError(f"API key {api_key} is not a KRaft RPC") from None
    if key not in _RESPONSE_KEYS.values():
        raise InvalidWireResponseError(f"{key.name} is not a core RPC")
    _check_version(key, version, InvalidWireResponseError)
    return _translating(lambda: _response_from_wire(key, body), InvalidWireResponseError)


def _error(msg: Message) -> ErrorCode:
    code = get_int(msg, "error_code")
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR  # a code we do not know: Kafka's UNKNOWN too


def _response_from_wire(key: ApiKey, body: Message) -> Response:
    top = _error(body)
    bad = InvalidWireResponseError
    if key is ApiKey.VOTE:
        if top is not ErrorCode.NONE:
            return VoteResponse(top, NO_NODE, NO_EPOCH, vote_granted=False)
        p = _partition(body, "topics", "topic_name", "partitions", "partition_index", error=bad)
        leader_id, leader_epoch = _leader(p)
        return VoteResponse(_error(p), leader_id, leader_epoch, get_bool(p, "vote_granted"))
    if key is ApiKey.BEGIN_QUORUM_EPOCH or key is ApiKey.END_QUORUM_EPOCH:
        cls = (
            BeginQuorumEpochResponse
            if key is ApiKey.BEGIN_QUORUM_EPOCH
            else (EndQuorumEpochResponse)
        )
        if top is not ErrorCode.NONE:
            return cls(top, NO_NODE, NO_EPOCH)
        p = _partition(body, "topics", "topic_name", "partitions", "partition_index", error=bad)
        leader_id, leader_epoch = _leader(p)
        return cls(_error(p), leader_id, leader_epoch)
    if key is ApiKey.FETCH:
        if top is not ErrorCode.NONE:
            return FetchResponse(top, NO_NODE, NO_EPOCH, _NO_OFFSET, _NO_OFFSET)
        p = _partition(body, "responses", None, "partitions", "partition_index", error=bad)
        leader_id, leader_epoch = _leader(get_struct(p, "current_leader"))
        div = get_struct(p, "diverging_epoch")
        diverging = None
        if get_int(div, "epoch") >= 0:
            diverging = OffsetAndEpoch(
                Epoch(get_int(div, "epoch")), Offset(get_int(div, "end_offset"))
            )
        snap = _snapshot_id(get_struct(p, "snapshot_id"))
        snapshot = None
        if snap.epoch >= 0 or snap.offset >= 0:
            if snap.epoch < 0 or snap.offset < 0:  # Kafka's client rejects a half-set id too
                raise bad(f"snapshot id with a negative part: {snap}")
            snapshot = snap
        records = get_records(p, "records")
        return FetchResponse(
            error=_error(p),
            leader_id=leader_id,
            leader_epoch=leader_epoch,
            high_watermark=Offset(get_int(p, "high_watermark")),
            log_start_offset=Offset(get_int(p, "log_start_offset")),
            diverging_epoch=diverging,
            snapshot_id=snapshot,
            records=b"" if records is None else records,
        )
    if top is not ErrorCode.NONE:
        return FetchSnapshotResponse(
            top, NO_NODE, NO_EPOCH, OffsetAndEpoch(NO_EPOCH, _NO_OFFSET), size=-1, position=-1
        )
    p = _partition(body, "topics", "name", "partitions", "index", error=bad)
    leader_id, leader_epoch = _leader(get_struct(p, "current_leader"))
    chunk = get_records(p, "unaligned_records")
    return FetchSnapshotResponse(
        error=_error(p),
        leader_id=leader_id,
        leader_epoch=leader_epoch,
        snapshot_id=_snapshot_id(get_struct(p, "snapshot_id")),
        size=get_int(p, "size"),
        position=get_int(p, "position"),
        # The core types the chunk as bytes, so this is the one copy the adapter makes.
        chunk=b"" if chunk is None else bytes(chunk),
    )


# --- DescribeQuorum ------------------------------------------------------------------------


def describe_quorum_request() -> MessageDict:
    """DescribeQuorum asks about __cluster_metadata-0 (the same at every version)."""
    return {"topics": [{"topic_name": METADATA_TOPIC_NAME, "partitions": [{"partition_index": 0}]}]}


# Apache Kafka's messages for the errors it puts in DescribeQuorum answers (Errors.message()).
KAFKA_ERROR_MESSAGES: Final[dict[ErrorCode, str]] = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER: (
        "For requests intended only for the leader, this error indicates that the broker is "
        "not the current leader. For requests intended for any replica, this error indicates "
        "that the broker is not a replica of the topic partition."
    ),
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
}


def describe_quorum_error_response(error: ErrorCode, request: Message | None = None) -> MessageDict:
    """Kafka's DescribeQuorum refusal: the error on each partition asked about (the request's,
    or __cluster_metadata-0 without one), with Kafka's message and otherwise zero fields; the
    top level says NONE. A follower answers so (NOT_LEADER_OR_FOLLOWER, no leader named), as
    does any node asked about another partition (UNKNOWN_TOPIC_OR_PARTITION)."""

    def partition(index: FieldValue) -> MessageDict:
        return {
            "partition_index": index,
            "error_code": int(error),
            "error_message": KAFKA_ERROR_MESSAGES.get(error, ""),
            "leader_id": 0,
            "leader_epoch": 0,
            "high_watermark": 0,
        }

    asked = describe_quorum_request() if request is None else request
    topics: list[MessageDict] = []
    for t in get_structs(asked, "topics"):
        parts = [partition(p.get("partition_index", 0)) for p in get_structs(t, "partitions")]
        topics.append({"topic_name": t.get("topic_name", ""), "partitions": parts})
    return {"error_code": 0, "error_message": "", "topics": topics}


def check_describe_quorum_request(body: Message) -> None:
    """Raises WireTranslationError unless the request is about __cluster_metadata-0."""
    _translating(
        lambda: _partition(body, "topics", "topic_name", "partitions", "partition_index"),
        WireTranslationError,
    )


def _replica_state(r: ReplicaDescription, version: int) -> MessageDict:
    # The directory id is not ignorable: Kafka sets it only from v2 (KIP-853).
    return {
        "replica_id": r.replica.id,
        "replica_directory_id": r.replica.directory_id if version >= 2 else NO_DIRECTORY,
        "log_end_offset": r.log_end_offset,
        "last_fetch_timestamp": r.last_fetch_timestamp_ms,
        "last_caught_up_timestamp": r.last_caught_up_timestamp_ms,
    }


def describe_quorum_response(
    description: QuorumDescription, version: int, nodes: Sequence[NodeEndpoints] = ()
) -> MessageDict:
    """The leader's answer. A high watermark not yet known is -1, as in Kafka. From v2, `nodes`
    lists the voters' endpoints (Kafka lists the voter set's, observers have none) and the
    error messages are "" as Kafka sends them, not null."""
    _check_version(ApiKey.DESCRIBE_QUORUM, version, UntranslatableVersionError)
    hwm = description.high_watermark
    return {
        "error_code": 0,
        "error_message": "",
        "topics": [
            _one_topic(
                "topic_name",
                "partitions",
                partition_index=METADATA_PARTITION,
                error_code=0,
                error_message="",
                leader_id=description.leader_id,
                leader_epoch=description.leader_epoch,
                high_watermark=-1 if hwm is None else hwm,
                current_voters=[_replica_state(r, version) for r in description.voters],
                observers=[_replica_state(r, version) for r in description.observers],
            )
        ],
        "nodes": [{"node_id": n.node_id, "listeners": _listeners(n.listeners)} for n in nodes],
    }


def with_voter_set_keys(
    description: QuorumDescription, voter_set: Sequence[ReplicaKey]
) -> QuorumDescription:
    """The description with each voter named by its key in the voter set, as Kafka's leader
    reports voters. A static voter set (`controller.quorum.voters`, kraft.version 0) has no
    directory ids, so Kafka reports the zero id for every voter whatever directory its Fetch
    carried; observers keep the key they fetched with."""
    keys = {k.id: k for k in voter_set}
    voters = tuple(
        dataclasses.replace(r, replica=keys.get(r.replica.id, r.replica))
        for r in description.voters
    )
    return dataclasses.replace(description, voters=voters)


def _replica_description(m: Message) -> ReplicaDescription:
    return ReplicaDescription(
        replica=ReplicaKey(NodeId(get_int(m, "replica_id")), _dir(m, "replica_directory_id")),
        log_end_offset=get_int(m, "log_end_offset"),
        last_fetch_timestamp_ms=get_int(m, "last_fetch_timestamp"),
        last_caught_up_timestamp_ms=get_int(m, "last_caught_up_timestamp"),
    )


def describe_quorum_from_wire(
    version: int, body: Message
) -> tuple[ErrorCode, QuorumDescription | None]:
    """The error (top-level first, then the partition's) and, without error, the description."""
    _check_version(ApiKey.DESCRIBE_QUORUM, version, InvalidWireResponseError)

    def parse() -> tuple[ErrorCode, QuorumDescription | None]:
        top = _error(body)
        if top is not ErrorCode.NONE:
            return top, None
        p = _partition(
            body,
            "topics",
            "topic_name",
            "partitions",
            "partition_index",
            error=InvalidWireResponseError,
        )
        err = _error(p)
        if err is not ErrorCode.NONE:
            return err, None
        leader_id, leader_epoch = _leader(p)
        hwm = get_int(p, "high_watermark")
        return ErrorCode.NONE, QuorumDescription(
            leader_id=leader_id,
            leader_epoch=leader_epoch,
            high_watermark=None if hwm < 0 else Offset(hwm),
            voters=tuple(_replica_description(r) for r in get_structs(p, "current_voters")),
            observers=tuple(_replica_description(r) for r in get_structs(p, "observers")),
        )

    return _translating(parse, InvalidWireResponseError)


def describe_quorum_nodes_from_wire(version: int, body: Message) -> tuple[NodeEndpoints, ...]:
    """The `nodes` of a DescribeQuorum response (none before v2)."""
    _check_version(ApiKey.DESCRIBE_QUORUM, version, InvalidWireResponseError)

    def parse() -> tuple[NodeEndpoints, ...]:
        if version < 2:
            return ()
        return tuple(
            NodeEndpoints(
                NodeId(get_int(n, "node_id")),
                tuple(
                    Listener(get_str(x, "name"), get_str(x, "host"), get_int(x, "port"))
                    for x in get_structs(n, "listeners")
                ),
            )
            for n in get_structs(body, "nodes")
        )

    return _translating(parse, InvalidWireResponseError)
