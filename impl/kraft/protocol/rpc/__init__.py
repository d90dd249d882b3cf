"""The wire layer: one translator per KRaft RPC between the core's messages and Kafka's.

- `common`: the `Rpc` translator contract, its errors, endpoints and shared wire shapes.
- `vote`, `leader_change` (BeginQuorumEpoch, EndQuorumEpoch), `fetch`, `fetch_snapshot`: one
  translator per core RPC.
- `describe_quorum`: the leader's quorum description (answered by the listener, not the core).
- `registry`: the one table that picks a translator, by API key or by core message type.
"""

from kraft.protocol.rpc.common import (
    TOP_LEVEL_ERRORS,
    InvalidWireResponseError,
    Listener,
    NodeEndpoints,
    Rpc,
    UntranslatableVersionError,
    WireTranslationError,
)
from kraft.protocol.rpc.describe_quorum import (
    KAFKA_ERROR_MESSAGES,
    check_describe_quorum_request,
    describe_quorum_error_response,
    describe_quorum_from_wire,
    describe_quorum_nodes_from_wire,
    describe_quorum_request,
    describe_quorum_response,
    in_kafka_order,
    with_voter_set_keys,
)
from kraft.protocol.rpc.registry import (
    KRAFT_VERSIONS,
    PREFERRED_VERSIONS,
    RPCS,
    api_key_of,
    error_response,
    is_request,
    request_from_wire,
    request_to_wire,
    response_from_wire,
    response_to_wire,
    rpc_for_key,
    rpc_of,
    sender_of,
)

__all__ = [
    "KAFKA_ERROR_MESSAGES",
    "KRAFT_VERSIONS",
    "PREFERRED_VERSIONS",
    "RPCS",
    "TOP_LEVEL_ERRORS",
    "InvalidWireResponseError",
    "Listener",
    "NodeEndpoints",
    "Rpc",
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
    "in_kafka_order",
    "is_request",
    "request_from_wire",
    "request_to_wire",
    "response_from_wire",
    "response_to_wire",
    "rpc_for_key",
    "rpc_of",
    "sender_of",
    "with_voter_set_keys",
]
