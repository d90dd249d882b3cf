"""An asyncio client of a KRaft node: describe the quorum, append (reads: kraft.client_read).

Every connection starts with ApiVersions, as Kafka's clients do; a request goes out at the
highest version both sides know, and a private API (kraft.protocol.client_api) only to a node
that advertises it, so pointing the client at an Apache Kafka controller gives a clear error
instead of a closed connection.

- `describe_quorum`: Kafka's own APIs only, as kafka-metadata-quorum does: DescribeCluster
  (controller endpoints, KIP-919) names the cluster and the active controller, which answers
  DescribeQuorum. Works against kraft nodes and Kafka controllers alike.
- `append`: the private KraftAppend API; follows NOT_LEADER_OR_FOLLOWER redirects to the
  leader the answer names, and retries while no leader is known, until `timeout_ms`.
  Records are (key, value) pairs (either null) or bare bytes (a value with a null key); it
  speaks KraftAppend v1 when a record has a key or a null value, v0 otherwise (the node's
  fast path, and understood by nodes that predate keys).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import secrets
import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType

from kraft import __version__
from kraft.core.quorum_info import QuorumDescription
from kraft.errors import ErrorCode, KraftError
from kraft.ids import ClusterId, Epoch, NodeId, Offset, ProducerId
from kraft.protocol import (
    APIS,
    NODE_APIS,
    ApiKey,
    FrameDecoder,
    MessageDict,
    ProtocolError,
    RequestHeader,
    decode_response_payload,
    encode_request_payload,
)
from kraft.protocol.client_api import (
    CLIENT_APIS,
    KRAFT_APPEND_KEY,
    KRAFT_NODE_INFO_KEY,
    decode_client_response,
    encode_client_request,
    is_client_api,
)
from kraft.protocol.rpc import (
    NodeEndpoints,
    describe_quorum_from_wire,
    describe_quorum_nodes_from_wire,
    describe_quorum_request,
)
from kraft.protocol.values import get_int, get_ints, get_opt_str, get_str, get_structs, get_uuid
from kraft.records import KeyValue
from kraft.server.controller_apis import (
    ClusterDescription,
    describe_cluster_from_wire,
    describe_cluster_request,
)

__all__ = [
    "Address",
    "AppendAck",
    "ClientError",
    "Connection",
    "NodeInfo",
    "QuorumReport",
    "append",
    "describe_cluster",
    "describe_quorum",
    "node_info",
    "parse_address",
]

CLIENT_ID = "kraft-cli"
_API_VERSIONS_VERSION = 3  # the first flexible version, with the client software fields
_API_NAMES = {api.api_key: api.name for api in (*APIS.values(), *CLIENT_APIS)}
_CORRELATION = struct.Struct(">i")
RETRY_MS = 100


class ClientError(KraftError):
    """A request failed: unreachable node, error answer, or no leader in time."""

    def __init__(self, message: str, error: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.error = error


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_address(text: str) -> Address:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected host:port, got {text!r}")
    return Address(host.strip("[]"), int(port))


@dataclass(frozen=True, slots=True)
class NodeInfo:
    cluster_id: ClusterId
    node_id: NodeId
    directory_id: uuid.UUID
    state: str
    epoch: Epoch
    voted_for: NodeId | None
    leader_id: NodeId | None
    leader: Address | None
    high_watermark: Offset | None
    log_start_offset: Offset
    end_offset: Offset
    last_epoch: Epoch
    voters: tuple[NodeId, ...]


@dataclass(frozen=True, slots=True)
class AppendAck:
    base_offset: Offset
    last_offset: Offset
    epoch: Epoch
    leader_id: NodeId


class Connection:
    """One TCP connection, one request at a time (enough for a command-line client)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._decoder = FrameDecoder(64 << 20)
        self._frames: list[bytes] = []
        self._ids = itertools.count(1)
        self.peer_apis: dict[int, tuple[int, int]] | None = None

    async def negotiate(self) -> dict[int, tuple[int, int]]:
        """ApiVersions (once per connection): the peer's API version ranges."""
        if self.peer_apis is None:
            body = await self.request(
                ApiKey.API_VERSIONS,
                _API_VERSIONS_VERSION,
                {"client_software_name": CLIENT_ID, "client_software_version": __version__},
            )
            error = error_code(body)
            if error is not ErrorCode.NONE:
                raise ClientError(f"ApiVersions answered {error.name}", error)
            self.peer_apis = {
                get_int(k, "api_key"): (get_int(k, "min_version"), get_int(k, "max_version"))
                for k in get_structs(body, "api_keys")
            }
        return self.peer_apis

    async def version_for(self, api_key: int, lo: int | None = None) -> int:
        """The highest version of `api_key` both sides speak (at least `lo`), negotiated via
        ApiVersions; ClientError if there is none."""
        ours = NODE_APIS[api_key]
        low = ours[0] if lo is None else max(lo, ours[0])
        theirs = (await self.negotiate()).get(api_key)
        if theirs is None or min(ours[1], theirs[1]) < max(low, theirs[0]):
            name = _API_NAMES.get(api_key, str(api_key))
            raise ClientError(f"the node does not support {name} v{low}+ (is it a kraft node?)")
        return min(ours[1], theirs[1])

    @classmethod
    async def open(cls, address: Address, timeout_s: float = 5.0) -> Connection:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(address.host, address.port), timeout_s
            )
        except (OSError, TimeoutError) as e:
            raise ClientError(f"cannot connect to {address}: {e or 'timed out'}") from None
        return cls(reader, writer)

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()

    async def request(
        self, api_key: int, version: int, body: MessageDict, timeout_s: float = 30.0
    ) -> MessageDict:
        corr = next(self._ids)
        header = RequestHeader(api_key, version, corr, CLIENT_ID)
        if is_client_api(api_key):
            data = encode_client_request(header, body)
        else:
            data = encode_request_payload(header, body, framed=True)
        self._writer.write(data)
        try:
            await self._writer.drain()
            payload = await asyncio.wait_for(self._next_frame(), timeout_s)
        except (OSError, ProtocolError) as e:
            raise ClientError(f"connection failed: {e}") from None
        except TimeoutError:
            raise ClientError("timed out waiting for an answer") from None
        if is_client_api(api_key):
            got, answer = decode_client_response(api_key, payload, version)
        else:
            got, answer = decode_response_payload(api_key, version, payload)
        if got != corr:
            raise ClientError(f"answer to request {got}, expected {corr}")
        return answer

    async def _next_frame(self) -> bytes:
        while not self._frames:
            chunk = await self._reader.read(1 << 16)
            if not chunk:
                raise ClientError("the node closed the connection")
            self._frames.extend(self._decoder.feed(chunk))
        return self._frames.pop(0)


def error_code(body: MessageDict) -> ErrorCode:
    code = get_int(body, "error_code")
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def _opt_id(n: int) -> NodeId | None:
    return None if n < 0 else NodeId(n)


def _leader_address(body: MessageDict) -> Address | None:
    host = get_opt_str(body, "leader_host")
    port = get_int(body, "leader_port")
    return None if host is None or port <= 0 else Address(host, port)


async def node_info(address: Address, timeout_s: float = 5.0) -> NodeInfo:
    """The private KraftNodeInfo answer of a kraft node (ClientError from any other node)."""
    async with await Connection.open(address, timeout_s) as conn:
        await conn.version_for(KRAFT_NODE_INFO_KEY)
        b = await conn.request(KRAFT_NODE_INFO_KEY, 0, {}, timeout_s)
    hwm = get_int(b, "high_watermark")
    return NodeInfo(
        cluster_id=ClusterId(get_str(b, "cluster_id")),
        node_id=NodeId(get_int(b, "node_id")),
        directory_id=get_uuid(b, "directory_id"),
        state=get_str(b, "state"),
        epoch=Epoch(get_int(b, "epoch")),
        voted_for=_opt_id(get_int(b, "voted_for")),
        leader_id=_opt_id(get_int(b, "leader_id")),
        leader=_leader_address(b),
        high_watermark=None if hwm < 0 else Offset(hwm),
        log_start_offset=Offset(get_int(b, "log_start_offset")),
        end_offset=Offset(get_int(b, "end_offset")),
        last_epoch=Epoch(get_int(b, "last_epoch")),
        voters=tuple(NodeId(n) for n in get_ints(b, "voters")),
    )


@dataclass(frozen=True, slots=True)
class QuorumReport:
    """What `kafka-metadata-quorum describe` shows: the cluster id, the leader's description
    of the quorum and, from DescribeQuorum v2, the voters' endpoints."""

    cluster_id: ClusterId
    description: QuorumDescription
    nodes: tuple[NodeEndpoints, ...]


async def describe_cluster(conn: Connection) -> ClusterDescription:
    version = await conn.version_for(ApiKey.DESCRIBE_CLUSTER, lo=1)  # v1: endpoint types
    body = await conn.request(ApiKey.DESCRIBE_CLUSTER, version, describe_cluster_request())
    error, message, cluster = describe_cluster_from_wire(body)
    if error is not ErrorCode.NONE:
        raise ClientError(f"DescribeCluster answered {error.name}: {message or ''}", error)
    return cluster


async def _describe_quorum(conn: Connection) -> tuple[ErrorCode, QuorumReport | None]:
    version = await conn.version_for(ApiKey.DESCRIBE_QUORUM)
    body = await conn.request(ApiKey.DESCRIBE_QUORUM, version, describe_quorum_request())
    error, desc = describe_quorum_from_wire(version, body)
    if desc is None:
        return error, None
    nodes = describe_quorum_nodes_from_wire(version, body)
    return error, QuorumReport(ClusterId(""), desc, nodes)


async def describe_quorum(bootstrap: Sequence[Address], timeout_ms: int = 10_000) -> QuorumReport:
    """The active controller's DescribeQuorum answer and the cluster id. Each bootstrap node is
    asked which controller is active (DescribeCluster); retries until `timeout_ms` while none
    answers (no leader yet, or a stale one)."""
    deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
    last_error = "no bootstrap node answered"
    while True:
        for address in bootstrap:
            try:
                async with await Connection.open(address) as conn:
                    cluster = await describe_cluster(conn)
                    target = next(
                        (
                            Address(host, port)
                            for n, host, port in cluster.controllers
                            if n == cluster.controller_id
                        ),
                        address,
                    )
                    if target == address:
                        error, report = await _describe_quorum(conn)
                    else:
                        async with await Connection.open(target) as leader:
                            error, report = await _describe_quorum(leader)
                if report is not None:
                    return dataclasses.replace(report, cluster_id=cluster.cluster_id)
                last_error = f"{target} answered DescribeQuorum with {error.name}"
            except (ClientError, ProtocolError) as e:
                last_error = f"{address}: {e}"
        if asyncio.get_running_loop().time() >= deadline:
            raise ClientError(last_error)
        await asyncio.sleep(RETRY_MS / 1000)


def new_producer_id() -> ProducerId:
    """A random positive 63-bit id: Kafka's brokers hand producer ids out (InitProducerId);
    a quorum has no such service, so a client draws one (collisions are negligible)."""
    return ProducerId(secrets.randbits(63) or 1)


@dataclass(slots=True)
class Producer:
    """An idempotent writer (kraft.core.producers): its id, the sequence number of its next
    record, and the leader it last wrote to (tried first next time). A resend after a lost
    connection carries the same id and sequence, and the leader answers it with the offsets
    the first copy got instead of storing the values twice: inside one `append` call, and
    also when the caller calls `append` again with the same values after it failed with an
    unknown outcome. One append at a time per Producer.
    """

    producer_id: ProducerId = field(default_factory=new_producer_id)
    next_sequence: int = 0
    leader: Address | None = None
    # The append whose outcome is unknown: (its sequence, its records).
    pending: tuple[int, tuple[KeyValue, ...]] | None = None

    def reset(self) -> None:
        """A new id (as Kafka bumps the producer epoch): after a pending append is given up,
        its sequence cannot be left as a gap that the leader would refuse."""
        self.producer_id = new_producer_id()
        self.next_sequence = 0
        self.pending = None


# Answers that say the values were not stored: the next append may not reuse their sequence.
_NOT_STORED = frozenset(
    {
        ErrorCode.INVALID_REQUEST,
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
        ErrorCode.RECORD_LIST_TOO_LARGE,
    }
)


async def append(
    bootstrap: Sequence[Address],
    records: Sequence[bytes | KeyValue],
    timeout_ms: int = 30_000,
    *,
    producer: Producer | None = None,
) -> AppendAck:
    """Append `records` as one batch, idempotently; returns once committed. A record is a
    (key, value) pair (either null: a null value deletes the key in the key-value
    state machine) or bare bytes, a value with a null key. Raises ClientError on an error
    answer other than a redirect, or when no leader accepts them within `timeout_ms`. Pass
    a Producer to reuse its id and remembered leader across appends, and to resend,
    deduplicated, records whose earlier append ended with an unknown outcome."""
    p = producer if producer is not None else Producer()
    batch = tuple((None, r) if isinstance(r, bytes) else r for r in records)
    if p.pending is not None and p.pending[1] != batch:
        p.reset()  # other values after an unknown outcome: that outcome stays unknown
    sequence = p.pending[0] if p.pending is not None else p.next_sequence
    p.pending = (sequence, batch)
    try:
        ack = await _append(bootstrap, batch, timeout_ms, p, sequence)
    except ClientError as e:
        if e.error in _NOT_STORED:
            p.reset()
        raise
    p.pending = None
    p.next_sequence = sequence + len(batch)
    return ack


async def _append(
    bootstrap: Sequence[Address],
    records: tuple[KeyValue, ...],
    timeout_ms: int,
    producer: Producer,
    sequence: int,
) -> AppendAck:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    remembered = producer.leader
    targets = list(bootstrap)
    if remembered is not None:
        targets = [remembered, *(a for a in bootstrap if a != remembered)]
    last_error = "no node answered"
    body: MessageDict = {"producer_id": producer.producer_id, "sequence": sequence}
    # v0 carries values only: enough for keyless records, and the node's fast path; v1 is
    # needed for a key or a null value.
    keyless = all(k is None and v is not None for k, v in records)
    least = 0 if keyless else 1
    while True:
        redirect: Address | None = None
        for address in targets:
            left_ms = int((deadline - loop.time()) * 1000)
            if left_ms <= 0:
                break
            body["timeout_ms"] = left_ms
            try:
                async with await Connection.open(address) as conn:
                    best = await conn.version_for(KRAFT_APPEND_KEY, least)
                    version = 0 if keyless else best
                    body["records"] = _append_records(records, version)
                    answer = await conn.request(KRAFT_APPEND_KEY, version, body, left_ms / 1000 + 1)
            except ClientError as e:
                last_error = f"{address}: {e}"
                continue
            error = ErrorCode(get_int(answer, "error_code"))
            if error is ErrorCode.NONE:
                producer.leader = address
                return AppendAck(
                    Offset(get_int(answer, "base_offset")),
                    Offset(get_int(answer, "last_offset")),
                    Epoch(get_int(answer, "leader_epoch")),
                    NodeId(get_int(answer, "leader_id")),
                )
            message = get_opt_str(answer, "error_message")
            last_error = f"{address}: {error.name}" + (f" ({message})" if message else "")
            if error is not ErrorCode.NOT_LEADER_OR_FOLLOWER:
                raise ClientError(last_error, error)
            redirect = _leader_address(answer)
            if redirect is not None and redirect != address:
                break
        if loop.time() >= deadline:
            raise ClientError(last_error, ErrorCode.REQUEST_TIMED_OUT)
        if redirect is not None:
            targets = [redirect, *(a for a in bootstrap if a != redirect)]
        else:
            targets = list(bootstrap)
            await asyncio.sleep(RETRY_MS / 1000)


def _append_records(records: tuple[KeyValue, ...], version: int) -> list[MessageDict]:
    if version == 0:
        return [{"value": v} for _, v in records]
    return [{"key": k, "value": v} for k, v in records]
