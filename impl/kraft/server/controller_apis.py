"""Controller APIs answered outside the core: DescribeCluster.

Answered as an Apache Kafka 4.3 controller answers it, from a snapshot of the node's state.
The voter-change APIs (AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter, KIP-853) are core
RPCs: the leader's replica answers them at either kraft.version (kraft.core.reconfig), and
their translators live in kraft.protocol.rpc.

- DescribeCluster (API 60, KIP-919): a controller describes the controllers. Only endpoint
  type 2 (controllers) is answered; type 1 (brokers) gets MISMATCHED_ENDPOINT_TYPE, any other
  type UNSUPPORTED_ENDPOINT_TYPE (both INVALID_REQUEST at v0, which has no endpoint type and so
  always asks for brokers). The controller id is the leader's, else a voter at random, as
  Kafka does. The "brokers" are the voters with their endpoint on our one listener.

This module is pure: the caller passes the state and does the I/O.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from kraft.errors import ErrorCode
from kraft.ids import NO_NODE, ClusterId, NodeId
from kraft.protocol import MessageDict
from kraft.protocol.rpc import InvalidWireResponseError, NodeEndpoints
from kraft.protocol.values import (
    FieldTypeError,
    Message,
    get_bool,
    get_int,
    get_opt_str,
    get_str,
    get_structs,
)

__all__ = [
    "ALL_CLUSTER_OPERATIONS",
    "ClusterDescription",
    "EndpointType",
    "describe_cluster_from_wire",
    "describe_cluster_request",
    "describe_cluster_response",
    "pick_controller_id",
]

# Kafka's "not requested" value of cluster_authorized_operations, and the bit set it reports
# when asked and no authorizer is configured (all the operations a CLUSTER resource has).
_OPERATIONS_NOT_REQUESTED: Final = -(2**31)
ALL_CLUSTER_OPERATIONS: Final = 8096


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
