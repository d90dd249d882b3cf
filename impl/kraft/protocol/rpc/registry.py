"""The one table of KRaft RPC translators, keyed by API key and by core message type.

Everything that turns a core message into wire bytes or back (the node's peer links and
listener, the client, tests, benchmarks) picks its translator here: `request_to_wire` and
`response_to_wire` by the message's type, `request_from_wire` and `response_from_wire` by the
API key of the frame. A new RPC is one translator module and one line in `RPCS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, TypeGuard

from kraft.core.messages import Message, Request, Response
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, NodeId
from kraft.protocol.api_versions import api_versions_response
from kraft.protocol.rpc.add_raft_voter import AddRaftVoterRpc
from kraft.protocol.rpc.common import (
    TOP_LEVEL_ERRORS,
    InvalidWireResponseError,
    Listener,
    Rpc,
    UntranslatableVersionError,
    WireTranslationError,
    translating,
)
from kraft.protocol.rpc.describe_quorum import DESCRIBE_QUORUM_VERSIONS
from kraft.protocol.rpc.fetch import FetchRpc
from kraft.protocol.rpc.fetch_snapshot import FetchSnapshotRpc
from kraft.protocol.rpc.leader_change import BeginQuorumEpochRpc, EndQuorumEpochRpc
from kraft.protocol.rpc.remove_raft_voter import RemoveRaftVoterRpc
from kraft.protocol.rpc.update_raft_voter import UpdateRaftVoterRpc
from kraft.protocol.rpc.vote import VoteRpc
from kraft.protocol.schema import ApiKey
from kraft.protocol.values import Message as WireMessage
from kraft.protocol.values import MessageDict

__all__ = [
    "KRAFT_VERSIONS",
    "PREFERRED_VERSIONS",
    "RPCS",
    "api_key_of",
    "error_response",
    "is_request",
    "request_from_wire",
    "request_to_wire",
    "response_from_wire",
    "response_to_wire",
    "rpc_for_key",
    "rpc_of",
    "sender_of",
]

# The core RPCs: the messages the replica sends and receives (the voter changes, KIP-853,
# only receives: an admin client or a voter sends them to the leader).
RPCS: Final[tuple[Rpc, ...]] = (
    VoteRpc(),
    BeginQuorumEpochRpc(),
    EndQuorumEpochRpc(),
    FetchRpc(),
    FetchSnapshotRpc(),
    AddRaftVoterRpc(),
    RemoveRaftVoterRpc(),
    UpdateRaftVoterRpc(),
)

_BY_KEY: Final[dict[int, Rpc]] = {rpc.api_key: rpc for rpc in RPCS}
_BY_TYPE: Final[dict[type, Rpc]] = {
    **{rpc.request_type: rpc for rpc in RPCS},
    **{rpc.response_type: rpc for rpc in RPCS},
}
_REQUEST_TYPES: Final = frozenset(rpc.request_type for rpc in RPCS)

# The versions the wire layer translates: the codec's range, except Fetch from v13 (topic ids).
KRAFT_VERSIONS: Final[dict[ApiKey, tuple[int, int]]] = {
    **{rpc.api_key: rpc.versions for rpc in RPCS},
    ApiKey.DESCRIBE_QUORUM: DESCRIBE_QUORUM_VERSIONS,
}
# What our peer links speak: every node of a cluster runs this code.
PREFERRED_VERSIONS: Final[dict[ApiKey, int]] = {k: hi for k, (_, hi) in KRAFT_VERSIONS.items()}


def rpc_for_key(api_key: int) -> Rpc | None:
    """The translator of a core RPC's API key; None for any other API."""
    return _BY_KEY.get(api_key)


def rpc_of(msg: Message) -> Rpc:
    """The translator of a core request or response."""
    rpc = _BY_TYPE.get(type(msg))
    if rpc is None:
        raise TypeError(f"not a core RPC message: {type(msg).__name__}")
    return rpc


def api_key_of(msg: Message) -> ApiKey:
    return rpc_of(msg).api_key


def is_request(msg: Message) -> TypeGuard[Request]:
    """Whether a core message is a request (sent to a peer) rather than an answer."""
    return type(msg) in _REQUEST_TYPES


def sender_of(request: Request) -> NodeId | None:
    """The node id a request claims to come from (None for one with no node)."""
    return rpc_of(request).sender(request)


def request_to_wire(
    msg: Request, *, version: int | None = None, listeners: Sequence[Listener] = ()
) -> tuple[ApiKey, int, MessageDict]:
    """The API key, version (our preferred one unless given) and wire body of a core request.
    `listeners` are the leader's endpoints, sent in BeginQuorumEpoch and EndQuorumEpoch from
    v1 (KIP-853)."""
    rpc = rpc_of(msg)
    v = rpc.versions[1] if version is None else version
    rpc.check_version(v, UntranslatableVersionError)
    return rpc.api_key, v, rpc.request_to_wire(msg, v, listeners)


def request_from_wire(
    api_key: int, version: int, body: WireMessage, *, local_cluster_id: ClusterId | None = None
) -> Request:
    """The core request a decoded wire request carries. Raises WireTranslationError
    (INVALID_REQUEST) for a request not about __cluster_metadata-0, a version the translator
    does not speak (Fetch below v13), or a missing field. A request without a cluster id is
    accepted as Kafka does only when `local_cluster_id` is given (it stands in for it)."""
    rpc = _BY_KEY.get(api_key)
    if rpc is None:
        raise WireTranslationError(f"API key {api_key} is not a core RPC")
    rpc.check_version(version, WireTranslationError)
    return translating(
        lambda: rpc.request_from_wire(version, body, local_cluster_id), WireTranslationError
    )


def response_to_wire(
    msg: Response, api_key: int, version: int, *, leader_listener: Listener | None = None
) -> MessageDict:
    """The wire body of a core response to a request of `api_key` at `version`.
    `leader_listener` is the leader's endpoint on the listener the request came in on; it fills
    node_endpoints where the version has them (Vote, BeginQuorumEpoch, EndQuorumEpoch and
    FetchSnapshot v1+, Fetch v17+), as Kafka's KRaft does."""
    rpc = rpc_of(msg)
    if rpc.api_key != api_key:
        raise TypeError(f"{type(msg).__name__} does not answer API key {api_key}")
    rpc.check_version(version, UntranslatableVersionError)
    if msg.error in TOP_LEVEL_ERRORS:
        return rpc.error_response(version, msg.error)
    return rpc.response_to_wire(msg, version, leader_listener)


def response_from_wire(api_key: int, version: int, body: WireMessage) -> Response:
    """The core response a decoded wire response carries. A top-level error yields a response
    with that error, no leader (NO_NODE) and NO_EPOCH. Raises InvalidWireResponseError for a
    response about another partition, or one that lacks a field."""
    rpc = _BY_KEY.get(api_key)
    if rpc is None:
        raise InvalidWireResponseError(f"API key {api_key} is not a core RPC")
    rpc.check_version(version, InvalidWireResponseError)
    return translating(lambda: rpc.response_from_wire(version, body), InvalidWireResponseError)


def error_response(api_key: int, version: int, error: ErrorCode) -> MessageDict:
    """A response carrying only a top-level `error`, for a request refused before the core
    sees it (malformed, unsupported, not about the metadata partition, wrong cluster id), for
    any API the node serves."""
    rpc = _BY_KEY.get(api_key)
    if rpc is not None:
        return rpc.error_response(version, error)
    if api_key == ApiKey.API_VERSIONS:
        return api_versions_response(error)
    return {"error_code": int(error)}
