"""Controller APIs answered outside the core: DescribeCluster and the voter-change APIs.

Both are answered as an Apache Kafka 4.3 controller of a static quorum (kraft.version 0,
`controller.quorum.voters`) answers them, from a snapshot of the node's state:

- DescribeCluster (API 60, KIP-919): a controller describes the controllers. Only endpoint
  type 2 (controllers) is answered; type 1 (brokers) gets MISMATCHED_ENDPOINT_TYPE, any other
  type UNSUPPORTED_ENDPOINT_TYPE (both INVALID_REQUEST at v0, which has no endpoint type and so
  always asks for brokers). The controller id is the leader's, else a voter at random, as
  Kafka does. The "brokers" are the voters with their endpoint on our one listener.
- UpdateRaftVoter (API 82, KIP-853): Kafka voters send it to the leader to publish their
  endpoints and directory id. A Kafka leader at kraft.version 0 keeps the update in memory only
  (its "volatile voters") and answers NONE; we check what it checks, in its order, and answer
  what it answers, but keep nothing (our voter set is the configuration's). Never
  INVALID_REQUEST where Kafka answers otherwise: a Kafka voter treats that answer as fatal.
- AddRaftVoter / RemoveRaftVoter (APIs 80, 81): a static quorum cannot change its voters, so
  after Kafka's request checks the answer is Kafka's UNSUPPORTED_VERSION "kraft.version is 0".

This module is pure: the caller passes the state and does the I/O.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from kraft.errors import ErrorCode
from kraft.ids import NO_DIRECTORY, NO_NODE, ClusterId, Epoch, NodeId
from kraft.protocol import MessageDict
from kraft.protocol.rpc import InvalidWireResponseError, Listener, NodeEndpoints
from kraft.protocol.values import (
    FieldTypeError,
    Message,
    get_bool,
    get_int,
    get_opt_str,
    get_str,
    get_struct,
    get_structs,
    get_uuid,
)

__all__ = [
    "ALL_CLUSTER_OPERATIONS",
    "KRAFT_VERSION",
    "ClusterDescription",
    "EndpointType",
    "LeaderSnapshot",
    "add_voter_response",
    "describe_cluster_from_wire",
    "describe_cluster_request",
    "describe_cluster_response",
    "pick_controller_id",
    "remove_voter_response",
    "update_voter_response",
]

# Kafka's "not requested" value of cluster_authorized_operations, and the bit set it reports
# when asked and no authorizer is configured (all the operations a CLUSTER resource has).
_OPERATIONS_NOT_REQUESTED: Final = -(2**31)
ALL_CLUSTER_OPERATIONS: Final = 8096

# The finalized kraft.version of a static quorum.
KRAFT_VERSION: Final = 0


class EndpointType(IntEnum):
    BROKER = 1
    CONTROLLER = 2


# --- DescribeCluster -----------------------------------------------------------------------


def pick_controller_id(
    leader_id: NodeId | None, controllers: Sequence[NodeEndpoints], rng: random.Random
) -> NodeId:
    """The leader if it is one of `controllers`, else one of them at random (Kafka's rule)."""
    ids = [c.node_id for c in controllers]
    if leader_id is not None and leader_id in ids:
        return leader_id
    return rng.choice(ids) if ids else NO_NODE


def _describe_cluster_error(error: ErrorCode, message: str) -> MessageDict:
    return {
        "throttle_time_ms": 0,
        "error_code": int(error),
        "error_message": message,
        "cluster_id": "",
        "controller_id": NO_NODE,
        "brokers": [],
        "cluster_authorized_operations": _OPERATIONS_NOT_REQUESTED,
    }


def describe_cluster_response(
    version: int,
    request: Message,
    *,
    cluster_id: ClusterId,
    controller_id: NodeId,
    controllers: Sequence[NodeEndpoints],
    listener_name: str,
) -> MessageDict:
    """A controller's answer to a decoded DescribeCluster request of `version`."""
    try:
        wanted = get_int(request, "endpoint_type")
        with_operations = get_bool(request, "include_cluster_authorized_operations")
    except (KeyError, FieldTypeError) as e:
        return _describe_cluster_error(ErrorCode.INVALID_REQUEST, f"malformed request: {e}")
    if wanted not in (EndpointType.BROKER, EndpointType.CONTROLLER):
        error = ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        return _describe_cluster_error(error, f"Unsupported endpoint type {wanted}")
    if wanted != EndpointType.CONTROLLER:
        error = ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.MISMATCHED_ENDPOINT_TYPE
        return _describe_cluster_error(
            error,
            "The request was sent to an endpoint of type CONTROLLER, "
            f"but we wanted an endpoint of type {EndpointType(wanted).name}",
        )
    brokers: list[MessageDict] = [
        {"broker_id": c.node_id, "host": x.host, "port": x.port, "rack": None, "is_fenced": False}
        for c in controllers
        for x in c.listeners
        if x.name == listener_name
    ]
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": int(EndpointType.CONTROLLER),
        "cluster_id": cluster_id,
        "controller_id": controller_id,
        "brokers": brokers,
        "cluster_authorized_operations": (
            ALL_CLUSTER_OPERATIONS if with_operations else _OPERATIONS_NOT_REQUESTED
        ),
    }


def describe_cluster_request() -> MessageDict:
    """What a client asking a controller sends (v1+: endpoint type 2)."""
    return {
        "include_cluster_authorized_operations": False,
        "endpoint_type": int(EndpointType.CONTROLLER),
        "include_fenced_brokers": False,
    }


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: ClusterId
    controller_id: NodeId | None
    # (node id, host, port) of each controller, in the order given.
    controllers: tuple[tuple[NodeId, str, int], ...]


def describe_cluster_from_wire(body: Message) -> tuple[ErrorCode, str | None, ClusterDescription]:
    """The error, its message and the description (empty on error) of a response."""
    try:
        code = get_int(body, "error_code")
        try:
            error = ErrorCode(code)
        except ValueError:
            error = ErrorCode.UNKNOWN_SERVER_ERROR
        controller = get_int(body, "controller_id")
        desc = ClusterDescription(
            cluster_id=ClusterId(get_str(body, "cluster_id")),
            controller_id=None if controller < 0 else NodeId(controller),
            controllers=tuple(
                (NodeId(get_int(b, "broker_id")), get_str(b, "host"), get_int(b, "port"))
                for b in get_structs(body, "brokers")
            ),
        )
        return error, get_opt_str(body, "error_message"), desc
    except (KeyError, FieldTypeError) as e:
        raise InvalidWireResponseError(f"DescribeCluster response: {e}") from None


# --- UpdateRaftVoter -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaderSnapshot:
    """What UpdateRaftVoter's answer depends on, read from the node when the request arrives."""

    cluster_id: ClusterId
    epoch: Epoch
    is_leader: bool
    leader_id: NodeId | None
    leader_listener: Listener | None  # the leader's endpoint on the request's listener
    high_watermark_known: bool
    voters: tuple[NodeId, ...]
    listener_name: str  # our (the quorum's default) listener name


def _update_voter_answer(error: ErrorCode, s: LeaderSnapshot) -> MessageDict:
    leader: MessageDict = {
        "leader_id": NO_NODE if s.leader_id is None else s.leader_id,
        "leader_epoch": s.epoch,
        "host": "" if s.leader_listener is None else s.leader_listener.host,
        "port": 0 if s.leader_listener is None else s.leader_listener.port,
    }
    return {"throttle_time_ms": 0, "error_code": int(error), "current_leader": leader}


def update_voter_response(request: Message, s: LeaderSnapshot) -> MessageDict:
    """Kafka's answer to a decoded UpdateRaftVoter v0 request, checks in Kafka's order."""
    try:
        cluster_id = get_opt_str(request, "cluster_id")
        epoch = get_int(request, "current_leader_epoch")
        voter_id = get_int(request, "voter_id")
        directory = get_uuid(request, "voter_directory_id")
        names = {get_str(x, "name") for x in get_structs(request, "listeners")}
        feature = get_struct(request, "kraft_version_feature")
        lo = get_int(feature, "min_supported_version")
        hi = get_int(feature, "max_supported_version")
    except (KeyError, FieldTypeError):
        return _update_voter_answer(ErrorCode.INVALID_REQUEST, s)
    if cluster_id is not None and cluster_id != s.cluster_id:
        return _update_voter_answer(ErrorCode.INCONSISTENT_CLUSTER_ID, s)
    if epoch < s.epoch:
        return _update_voter_answer(ErrorCode.FENCED_LEADER_EPOCH, s)
    if epoch > s.epoch:
        return _update_voter_answer(ErrorCode.UNKNOWN_LEADER_EPOCH, s)
    if not s.is_leader:
        return _update_voter_answer(ErrorCode.NOT_LEADER_OR_FOLLOWER, s)
    if voter_id < 0 or directory == NO_DIRECTORY:
        return _update_voter_answer(ErrorCode.INVALID_REQUEST, s)
    if s.listener_name not in names:
        return _update_voter_answer(ErrorCode.INVALID_REQUEST, s)
    if lo < 0 or hi < 0 or hi < lo:
        return _update_voter_answer(ErrorCode.INVALID_REQUEST, s)
    if not s.high_watermark_known:
        return _update_voter_answer(ErrorCode.REQUEST_TIMED_OUT, s)
    if not lo <= KRAFT_VERSION <= hi:
        return _update_voter_answer(ErrorCode.INVALID_REQUEST, s)
    if voter_id not in s.voters:
        return _update_voter_answer(ErrorCode.VOTER_NOT_FOUND, s)
    return _update_voter_answer(ErrorCode.NONE, s)


# --- AddRaftVoter / RemoveRaftVoter --------------------------------------------------------


def _voter_change_answer(error: ErrorCode, message: str | None = None) -> MessageDict:
    return {"throttle_time_ms": 0, "error_code": int(error), "error_message": message}


def _voter_change_refusal(
    request: Message, s: LeaderSnapshot, verb: str
) -> tuple[MessageDict | None, set[str]]:
    """Kafka's checks shared by both: the cluster id, then leadership, then the voter key.
    Returns the refusal, if any, and the request's listener names."""
    try:
        cluster_id = get_opt_str(request, "cluster_id")
        voter_id = get_int(request, "voter_id")
        directory = get_uuid(request, "voter_directory_id")
        names = {get_str(x, "name") for x in get_structs(request, "listeners")}
    except (KeyError, FieldTypeError) as e:
        return _voter_change_answer(ErrorCode.INVALID_REQUEST, f"malformed request: {e}"), set()
    if cluster_id is not None and cluster_id != s.cluster_id:
        message = f'The given id "{cluster_id}" doesn\'t match the cluster id "{s.cluster_id}"'
        return _voter_change_answer(ErrorCode.INCONSISTENT_CLUSTER_ID, message), names
    if not s.is_leader:
        return _voter_change_answer(ErrorCode.NOT_LEADER_OR_FOLLOWER), names
    if voter_id < 0 or directory == NO_DIRECTORY:
        message = f"{verb} voter request didn't include a valid voter"
        return _voter_change_answer(ErrorCode.INVALID_REQUEST, message), names
    return None, names


def _static_refusal(s: LeaderSnapshot, verb: str) -> MessageDict:
    if not s.high_watermark_known:
        return _voter_change_answer(
            ErrorCode.REQUEST_TIMED_OUT, "the leader has not established a high watermark yet"
        )
    return _voter_change_answer(
        ErrorCode.UNSUPPORTED_VERSION,
        f"Cluster doesn't support {verb} voter because the kraft.version feature is "
        f"{KRAFT_VERSION}",
    )


def add_voter_response(request: Message, s: LeaderSnapshot) -> MessageDict:
    """A static Kafka leader's answer to AddRaftVoter (v0 and v1 answer alike)."""
    refusal, names = _voter_change_refusal(request, s, "Add")
    if refusal is not None:
        return refusal
    if s.listener_name not in names:
        return _voter_change_answer(
            ErrorCode.INVALID_REQUEST,
            "Add voter request didn't include the endpoint for the default listener "
            f"{s.listener_name}",
        )
    return _static_refusal(s, "adding")


def remove_voter_response(request: Message, s: LeaderSnapshot) -> MessageDict:
    """A static Kafka leader's answer to RemoveRaftVoter."""
    refusal, _ = _voter_change_refusal({**request, "listeners": []}, s, "Remove")
    return refusal if refusal is not None else _static_refusal(s, "removing")
