"""Voter changes from a client (KIP-853): AddRaftVoter and RemoveRaftVoter sent to the leader,
as `kafka-metadata-quorum add-controller / remove-controller` (Kafka's Admin) sends them.

The leader is found as `describe_quorum` finds it: DescribeCluster (controller endpoints,
KIP-919) to a bootstrap node names the active controller and its endpoint; the request goes
there. An answer NOT_LEADER_OR_FOLLOWER (a leader change in between), REQUEST_TIMED_OUT (the
leader has no high watermark yet, or the change did not commit in time) or a connection
failure is retried from the bootstrap nodes after a backoff until `timeout_ms`; any other
error is final (ClientError carrying it). Works against kraft nodes and Kafka controllers.

`kraft_version_range` is the leader's probe of a replica it is asked to add (Kafka's
AddVoterHandler): ApiVersions to it, and the kraft.version range its answer supports.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from kraft import __version__
from kraft.client import (
    CLIENT_ID,
    RETRY_MS,
    Address,
    ClientError,
    Connection,
    describe_cluster,
    error_code,
)
from kraft.errors import ErrorCode
from kraft.ids import DirectoryId, NodeId
from kraft.protocol import ApiKey, MessageDict, ProtocolError
from kraft.protocol.rpc import Listener
from kraft.protocol.values import FieldTypeError, get_int, get_opt_str, get_str, get_structs

__all__ = ["VoterChange", "add_voter", "error_name", "kraft_version_range", "remove_voter"]

# Kafka's error codes of the voter-change APIs that kraft.errors does not name (yet).
_EXTRA_ERROR_NAMES: Final[dict[int, str]] = {126: "DUPLICATE_VOTER"}
# Answers after which the same request may succeed when sent again (to the leader then).
_RETRIABLE: Final = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT})


def error_name(code: int) -> str:
    """Kafka's name of an error code (its number when we know no name)."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return _EXTRA_ERROR_NAMES.get(code, f"error code {code}")


@dataclass(frozen=True, slots=True)
class VoterChange:
    """Who answered a voter change: the leader's id and address."""

    leader_id: NodeId | None
    leader: Address


class VoterChangeError(ClientError):
    """The leader refused the change: Kafka's error code (also one kraft.errors does not
    name) and the leader's message."""

    def __init__(self, message: str, code: int, error_message: str | None) -> None:
        try:
            known: ErrorCode | None = ErrorCode(code)
        except ValueError:
            known = None
        super().__init__(message, known)
        self.code = code
        self.error_message = error_message


def _listeners_to_wire(listeners: Sequence[Listener]) -> list[MessageDict]:
    return [{"name": x.name, "host": x.host, "port": x.port} for x in listeners]


async def _leader_of(address: Address) -> tuple[NodeId | None, Address, str]:
    """The active controller (id, address) and the cluster id, as `address` knows them."""
    async with await Connection.open(address) as conn:
        cluster = await describe_cluster(conn)
    for n, host, port in cluster.controllers:
        if n == cluster.controller_id:
            return n, Address(host, port), cluster.cluster_id
    return cluster.controller_id, address, cluster.cluster_id


async def _send_change(
    bootstrap: Sequence[Address], api_key: ApiKey, body: MessageDict, timeout_ms: int
) -> VoterChange:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    last = "no bootstrap node answered"
    while True:
        for address in bootstrap:
            left_s = deadline - loop.time()
            if left_s <= 0:
                break
            try:
                leader_id, leader, cluster_id = await _leader_of(address)
                request = {**body, "cluster_id": cluster_id}
                if api_key == ApiKey.ADD_RAFT_VOTER:
                    request["timeout_ms"] = max(int(left_s * 1000), 1)
                async with await Connection.open(leader) as conn:
                    version = await conn.version_for(api_key)
                    answer = await conn.request(api_key, version, request, left_s + 1)
            except (ClientError, ProtocolError) as e:
                last = f"{address}: {e}"
                continue
            code = get_int(answer, "error_code")
            if code == ErrorCode.NONE:
                return VoterChange(leader_id, leader)
            message = get_opt_str(answer, "error_message")
            last = f"{leader} answered {error_name(code)}" + (f": {message}" if message else "")
            if code not in _RETRIABLE:
                raise VoterChangeError(last, code, message)
        if loop.time() >= deadline:
            raise ClientError(f"timed out: {last}", ErrorCode.REQUEST_TIMED_OUT)
        await asyncio.sleep(RETRY_MS / 1000)


async def add_voter(
    bootstrap: Sequence[Address],
    voter_id: NodeId,
    directory_id: DirectoryId,
    listeners: Sequence[Listener],
    timeout_ms: int = 30_000,
) -> VoterChange:
    """AddRaftVoter: make (voter_id, directory_id), reachable at `listeners`, a voter. The
    leader answers once the Voters record naming it commits (ack_when_committed, the
    default). The replica must already fetch from the leader as an observer, caught up."""
    body: MessageDict = {
        "voter_id": voter_id,
        "voter_directory_id": directory_id,
        "listeners": _listeners_to_wire(listeners),
        "ack_when_committed": True,
    }
    return await _send_change(bootstrap, ApiKey.ADD_RAFT_VOTER, body, timeout_ms)


async def remove_voter(
    bootstrap: Sequence[Address],
    voter_id: NodeId,
    directory_id: DirectoryId,
    timeout_ms: int = 30_000,
) -> VoterChange:
    """RemoveRaftVoter: take the voter (voter_id, directory_id) out of the voter set."""
    body: MessageDict = {"voter_id": voter_id, "voter_directory_id": directory_id}
    return await _send_change(bootstrap, ApiKey.REMOVE_RAFT_VOTER, body, timeout_ms)


KRAFT_VERSION_FEATURE: Final = "kraft.version"


async def kraft_version_range(
    address: Address, timeout_s: float = 5.0
) -> tuple[ErrorCode, tuple[int, int] | None]:
    """ApiVersions (v4 where the node speaks it) to `address`: the error (NONE, or
    REQUEST_TIMED_OUT when the node cannot be reached or does not answer in time, as Kafka's
    leader reports a failed probe) and the kraft.version range the node supports (None when
    its answer names no such feature)."""
    try:
        async with await Connection.open(address, timeout_s) as conn:
            # v4 (KIP-1022): below it a feature whose range starts at 0, as kraft.version's
            # does, is not listed.
            version = await conn.version_for(ApiKey.API_VERSIONS)
            body = await conn.request(
                ApiKey.API_VERSIONS,
                version,
                {"client_software_name": CLIENT_ID, "client_software_version": __version__},
                timeout_s,
            )
    except (ClientError, ProtocolError):
        return ErrorCode.REQUEST_TIMED_OUT, None
    error = error_code(body)
    if error is not ErrorCode.NONE:
        return error, None
    try:
        for f in get_structs(body, "supported_features"):
            if get_str(f, "name") == KRAFT_VERSION_FEATURE:
                return ErrorCode.NONE, (get_int(f, "min_version"), get_int(f, "max_version"))
    except (KeyError, FieldTypeError):
        pass
    return ErrorCode.NONE, None
