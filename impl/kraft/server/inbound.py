"""The listener: decodes requests, answers what needs no core step, routes the rest to it.

- ApiVersions: answered here (an unsupported version gets Kafka's v0 UNSUPPORTED_VERSION reply).
  It lists Kafka's APIs and our private ones (KraftAppend, KraftNodeInfo), which a Kafka client
  ignores and our client looks for before using them.
- DescribeQuorum: from the replica (leader only; others answer NOT_LEADER_OR_FOLLOWER, a
  request about another partition UNKNOWN_TOPIC_OR_PARTITION, as Kafka), with the voters'
  endpoints from v2.
- DescribeCluster: as a Kafka controller answers it (kraft.server.controller_apis).
- Fetch with a negative replica id (a consumer): served here from the local log up to the
  released high watermark; the core never sees it. From v17 the answer carries the leader's
  endpoint, as Kafka's does.
- The core RPCs (the translators of kraft.protocol.rpc: Vote, BeginQuorumEpoch,
  EndQuorumEpoch, Fetch, FetchSnapshot, and the voter changes AddRaftVoter, RemoveRaftVoter,
  UpdateRaftVoter, which the leader's core answers at either kraft.version): a Receive
  event carrying a fresh reply token; the core hands the token back on the Send that answers
  it, and `prepare_response` replies on that request's own connection with its correlation
  id. The token is the only way an answer
  finds its connection: the node id a request claims never routes one, and a request from a
  client with no node id (its translator's sender is None) is answered all the same. A
  connection keeps the replica id its first request claimed: a later request there claiming
  another id closes it.
- FetchSnapshot answers are written without copying their chunk: the frame's encoded prefix,
  the chunk (a view of the mapped checkpoint file, kraft.server.snapshot_store) and the
  encoded suffix go to the transport one after the other
  (kraft.protocol.rpc.fetch_snapshot.ResponseFrame); only what the socket cannot take at once
  is buffered by the transport, at most one chunk.
- KraftAppend / KraftNodeInfo / KraftGet (kraft.protocol.client_api): the private client
  API; KraftGet reads the node's key-value state machine (kraft.app.kv).

Bad input: an oversized or negative frame size, an undecodable header, an unknown API key or
an unsupported version closes that connection (as Kafka does); a decodable header with a bad
body gets the API's error response with INVALID_REQUEST. Other connections are unaffected.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import random
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import cast

from kraft.app.port import ReadableStateMachine
from kraft.core.effects import Send
from kraft.core.events import Receive
from kraft.core.messages import (
    AddVoterResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotResponse,
    RemoveVoterResponse,
    Request,
    Response,
)
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import (
    NO_EPOCH,
    NO_NODE,
    ClusterId,
    DirectoryId,
    Epoch,
    NodeId,
    Offset,
    ProducerId,
)
from kraft.protocol import (
    NODE_APIS,
    ApiKey,
    FrameDecoder,
    MessageDict,
    ProtocolError,
    api_versions_response,
    api_versions_unsupported_reply,
    check_supported,
    decode_request_header,
    decode_request_payload,
    encode_response_payload,
    frame,
)
from kraft.protocol.api_versions import node_features
from kraft.protocol.client_api import (
    KRAFT_APPEND_KEY,
    KRAFT_GET_KEY,
    KRAFT_NODE_INFO_KEY,
    AppendSuccessEncoder,
    decode_append_fields,
    decode_client_request,
    encode_client_response,
    is_client_api,
)
from kraft.protocol.fetch_fast import (
    FAST_FETCH_VERSION,
    fetch_response_frame,
    read_fetch_request,
)
from kraft.protocol.rpc import (
    Listener,
    NodeEndpoints,
    WireTranslationError,
    api_key_of,
    check_describe_quorum_request,
    describe_quorum_error_response,
    describe_quorum_response,
    error_response,
    in_kafka_order,
    request_from_wire,
    response_to_wire,
    sender_of,
)
from kraft.protocol.rpc.fetch_snapshot import ResponseFrame, fetch_snapshot_frame
from kraft.records import LOG_OVERHEAD
from kraft.server.applier import Applier
from kraft.server.config import NodeConfig, VoterAddress
from kraft.server.controller_apis import describe_cluster_response, pick_controller_id
from kraft.server.driver import AppendOutcome, Driver, Release
from kraft.storage.replicated_log import CorruptLogError

__all__ = ["RequestServer"]

log = logging.getLogger("kraft.node")

_KEY = struct.Struct(">h")
# BaseOffset i64 at 0, Length i32 at 8, LastOffsetDelta i32 at 23 of a record batch v2.
_BASE_AND_LENGTH = struct.Struct(">qi")
_LAST_DELTA = struct.Struct(">i")


class _Connection(asyncio.Protocol):
    """One accepted connection, read by callbacks (no task, no future per request): each chunk
    the socket delivers is split into frames and each frame handled at once."""

    __slots__ = (
        "_counted",
        "_decoder",
        "_idle",
        "_server",
        "claimed",
        "closed",
        "last_request",
        "peer",
        "transport",
    )

    def __init__(self, server: RequestServer) -> None:
        self._server = server
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.closed = False
        # The replica id the first replica request on this connection claimed.
        self.claimed: NodeId | None = None
        self._decoder = FrameDecoder(server._cfg.max_frame_bytes)
        self._counted = 0  # this connection's share of the server's partly received bytes
        self.last_request = 0.0
        self._idle: asyncio.TimerHandle | None = None

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's is not a subclass of asyncio.Transport).
        self.transport = cast(asyncio.Transport, transport)
        self.peer = str(self.transport.get_extra_info("peername"))
        self._server._accepted(self)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        server = self._server
        try:
            frames = self._decoder.feed(data)
        except ProtocolError as e:
            log.warning("closing connection from %s: %s", self.peer, e)
            self.close()
            return
        buffered = self._decoder.buffered
        server._buffered += buffered - self._counted
        self._counted = buffered
        limit = server._cfg.queued_max_request_bytes
        if server._buffered > limit:
            server._refuse(
                self,
                f"queued.max.request.bytes ({limit}) exceeded by partly received requests",
            )
            return
        if frames:
            self.last_request = server._loop_time()
            handle = server._handle
            for payload in frames:
                if not handle(self, payload):
                    return

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._server._lost(self)

    # idle connections (connections.max.idle.ms)

    def watch_idle(self, idle_s: float) -> None:
        """Close the connection once `idle_s` pass without a whole request: one timer, moved
        on only when it fires (not per request)."""
        if self.closed:
            return
        loop = asyncio.get_running_loop()
        due = self.last_request + idle_s
        if due <= loop.time():
            self._server._refuse(
                self, f"no whole request in {self._server._cfg.connections_max_idle_ms} ms"
            )
            return
        self._idle = loop.call_at(due, self.watch_idle, idle_s)

    def forget_buffered(self) -> int:
        counted, self._counted = self._counted, 0
        return counted

    # writing

    def write(self, data: bytes) -> None:
        if not self.closed and self.transport is not None:
            self.transport.write(data)

    def write_frame(self, frame: ResponseFrame) -> None:
        """Prefix, region, suffix: the transport sends each as far as the socket takes it."""
        if not self.closed and self.transport is not None:
            for part in frame.parts():
                self.transport.write(part)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self._idle is not None:
                self._idle.cancel()
            if self.transport is not None:
                self.transport.close()


@dataclass(frozen=True, slots=True)
class _Pending:
    conn: _Connection
    correlation_id: int
    version: int
    api_key: int


class RequestServer:
    def __init__(
        self, config: NodeConfig, cluster_id: ClusterId, directory_id: DirectoryId, driver: Driver
    ) -> None:
        self._cfg = config
        self._cluster_id = cluster_id
        self._directory_id = directory_id
        self._driver = driver
        self._clock: Callable[[], int] = driver.clock
        # The node's state machine, for KraftGet (set by the node once built).
        self.applier: Applier[ReadableStateMachine] | None = None
        # Requests the core has not answered yet, by the reply token given with them.
        self._pending: dict[int, _Pending] = {}
        self._tokens = itertools.count(1)
        self._conns: set[_Connection] = set()
        # Bytes of partly received requests, over every connection (queued.max.request.bytes).
        self._buffered = 0
        self._server: asyncio.Server | None = None
        self._loop_time: Callable[[], float] = time.monotonic
        self._rng = random.Random()  # DescribeCluster's controller when no leader is known
        # Successful KraftAppend answers by (version, leader id, epoch); the leader's endpoint
        # comes from the voters, so a change of voters empties it.
        self._append_ok: dict[tuple[int, NodeId, int], AppendSuccessEncoder] = {}
        self.requests = 0

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self._loop_time = loop.time
        self._server = await loop.create_server(
            functools.partial(_Connection, self),
            self._cfg.listener_host,
            self._cfg.listener_port,
            reuse_address=True,
        )
        host, port = self._server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        conns = list(self._conns)
        # What is queued to be written goes out first (half a second at most).
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 0.5
        while loop.time() < deadline and any(
            c.transport is not None and c.transport.get_write_buffer_size() for c in conns
        ):
            await asyncio.sleep(0.01)
        for conn in conns:
            conn.close()
        self._conns.clear()

    # ------------------------------------------------------------------ connections

    def _accepted(self, conn: _Connection) -> None:
        cfg = self._cfg
        if len(self._conns) >= cfg.max_connections:
            self._refuse(conn, f"max.connections ({cfg.max_connections}) reached")
            return
        self._conns.add(conn)
        # A connection must deliver a whole request within connections.max.idle.ms: this
        # closes silent ones and those that trickle a request a byte at a time alike.
        conn.last_request = self._loop_time()
        conn.watch_idle(cfg.connections_max_idle_ms / 1000)

    def _lost(self, conn: _Connection) -> None:
        self._buffered -= conn.forget_buffered()
        conn.close()
        if conn in self._conns:
            self._conns.discard(conn)
            self._forget(conn)

    def set_voters(self, voters: tuple[VoterAddress, ...]) -> bool:
        """Report these voters' endpoints from now on (DescribeQuorum, DescribeCluster, a
        response's leader endpoint): the log's latest voter set. True when they changed."""
        if self._cfg.voters == voters:
            return False
        self._cfg = replace(self._cfg, voters=voters)
        self._append_ok.clear()
        return True

    def _forget(self, conn: _Connection) -> None:
        for token in [t for t, p in self._pending.items() if p.conn is conn]:
            del self._pending[token]

    def _refuse(self, conn: _Connection, why: str) -> None:
        log.warning("closing connection from %s: %s", conn.peer, why)
        conn.close()

    def _handle(self, conn: _Connection, payload: bytes) -> bool:
        """Handle one request; False once the connection is closed."""
        self._handle_request(conn, payload)
        return not conn.closed

    def _handle_request(self, conn: _Connection, payload: bytes) -> None:
        self.requests += 1
        if len(payload) < _KEY.size:
            self._refuse(conn, "frame too short for a request header")
            return
        (api_key,) = _KEY.unpack_from(payload, 0)
        if api_key == KRAFT_APPEND_KEY:
            self._on_append(conn, payload)
            return
        if is_client_api(api_key):
            self._on_client_request(conn, payload)
            return
        try:
            header, at = decode_request_header(payload)
        except ProtocolError as e:
            self._refuse(conn, str(e))
            return
        corr, version = header.correlation_id, header.api_version
        if api_key == ApiKey.API_VERSIONS:
            try:
                check_supported(api_key, version)
            except ProtocolError:
                conn.write(frame(api_versions_unsupported_reply(corr, NODE_APIS)))
                return
            self._reply(
                conn,
                api_key,
                version,
                corr,
                api_versions_response(apis=NODE_APIS, features=node_features(version)),
            )
            return
        try:
            check_supported(api_key, version)
        except ProtocolError as e:
            self._refuse(conn, str(e))
            return
        if api_key == ApiKey.FETCH and version == FAST_FETCH_VERSION:
            # A replica's Fetch of the usual shape skips the generic decoder (fetch_fast).
            fetch = read_fetch_request(memoryview(payload)[at:])
            if fetch is not None:
                self._submit_request(conn, api_key, version, corr, fetch)
                return
        try:
            _, body = decode_request_payload(payload)
        except ProtocolError as e:
            log.warning("invalid request from %s: %s", conn.peer, e)
            self._reply(
                conn, api_key, version, corr, error_response(api_key, version, e.error_code)
            )
            return
        if api_key == ApiKey.DESCRIBE_QUORUM:
            self._describe_quorum(conn, version, corr, body)
            return
        if api_key == ApiKey.DESCRIBE_CLUSTER:
            self._describe_cluster(conn, version, corr, body)
            return
        try:
            req = request_from_wire(api_key, version, body, local_cluster_id=self._cluster_id)
        except WireTranslationError as e:
            log.warning("refused request from %s: %s", conn.peer, e)
            self._reply(
                conn, api_key, version, corr, error_response(api_key, version, e.error_code)
            )
            return
        self._submit_request(conn, api_key, version, corr, req)

    def _submit_request(
        self, conn: _Connection, api_key: int, version: int, corr: int, req: Request
    ) -> None:
        if isinstance(req, FetchRequest) and req.replica.id < 0:
            self._consumer_fetch(conn, version, corr, req)
            return
        src = sender_of(req)
        if src is not None:
            if conn.claimed is None:
                conn.claimed = src
            elif conn.claimed != src:
                self._refuse(
                    conn, f"a request claims node {src} on node {conn.claimed}'s connection"
                )
                return
        # The answer finds this connection by the token alone, whatever node id was claimed.
        token = next(self._tokens)
        self._pending[token] = _Pending(conn, corr, version, api_key)
        sender = NO_NODE if src is None else src
        self._driver.submit(Receive(self._clock(), sender, req, reply_to=token))

    def _reply(
        self, conn: _Connection, api_key: int, version: int, corr: int, body: MessageDict
    ) -> None:
        conn.write(encode_response_payload(api_key, version, corr, body, framed=True))

    # ------------------------------------------------------------------ core responses

    def _listener_of(self, leader_id: NodeId | None) -> Listener | None:
        v = None if leader_id is None else self._cfg.voter(leader_id)
        return None if v is None else Listener(self._cfg.listener_name, v.host, v.port)

    def _controllers(self) -> tuple[NodeEndpoints, ...]:
        name = self._cfg.listener_name
        return tuple(
            NodeEndpoints(v.node_id, (Listener(name, v.host, v.port),)) for v in self._cfg.voters
        )

    def prepare_response(self, send: Send) -> Release:
        msg = send.message
        assert isinstance(msg, Response)
        api_key = api_key_of(msg)
        p = None if send.reply_to is None else self._pending.pop(send.reply_to, None)
        if p is None or p.api_key != api_key:
            # Its connection closed (or an answer without a token): nobody to answer.
            log.debug("no pending %s for reply token %s", api_key.name, send.reply_to)
            return _nothing
        if type(msg) is FetchResponse and p.version == FAST_FETCH_VERSION:
            # A follower's every fetch is answered: written directly (fetch_fast).
            fast = fetch_response_frame(msg, p.correlation_id, self._listener_of(msg.leader_id))
            if fast is not None:
                return lambda: p.conn.write(fast)
        # AddRaftVoter / RemoveRaftVoter answers name no leader.
        named = None if isinstance(msg, AddVoterResponse | RemoveVoterResponse) else msg.leader_id
        body = response_to_wire(msg, api_key, p.version, leader_listener=self._listener_of(named))
        if isinstance(msg, FetchSnapshotResponse):
            frame = fetch_snapshot_frame(body, p.version, p.correlation_id, msg.chunk)
            return lambda: p.conn.write_frame(frame)
        data = encode_response_payload(api_key, p.version, p.correlation_id, body, framed=True)
        return lambda: p.conn.write(data)

    # ------------------------------------------------------------------ local answers

    def _describe_quorum(
        self, conn: _Connection, version: int, corr: int, body: MessageDict
    ) -> None:
        try:
            check_describe_quorum_request(body)
        except WireTranslationError:
            answer = describe_quorum_error_response(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, body)
            self._reply(conn, ApiKey.DESCRIBE_QUORUM, version, corr, answer)
            return
        desc = self._driver.replica.describe_quorum()
        if desc is None:
            answer = describe_quorum_error_response(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        else:
            # Voters come named by their key in the voter set (the core's description), in
            # the order of a Kafka leader's answer.
            answer = describe_quorum_response(in_kafka_order(desc), version, self._controllers())
        self._reply(conn, ApiKey.DESCRIBE_QUORUM, version, corr, answer)

    def _describe_cluster(
        self, conn: _Connection, version: int, corr: int, body: MessageDict
    ) -> None:
        controllers = self._controllers()
        view = self._driver.replica.view()
        answer = describe_cluster_response(
            version,
            body,
            cluster_id=self._cluster_id,
            controller_id=pick_controller_id(view.leader_id, controllers, self._rng),
            controllers=controllers,
            listener_name=self._cfg.listener_name,
        )
        self._reply(conn, ApiKey.DESCRIBE_CLUSTER, version, corr, answer)

    def _consumer_fetch(
        self, conn: _Connection, version: int, corr: int, req: FetchRequest
    ) -> None:
        """Committed records from `fetch_offset`: whole batches below the high watermark."""
        drv = self._driver
        view = drv.replica.view()
        hwm = drv.high_watermark
        lso = drv.log.start_offset
        err = ErrorCode.NONE
        data: bytes | memoryview = b""
        if req.fetch_offset < lso or req.fetch_offset > drv.log.end_offset:
            err = ErrorCode.OFFSET_OUT_OF_RANGE
        elif hwm is not None and req.fetch_offset < hwm:
            try:
                got = drv.log.read(req.fetch_offset, max(req.max_bytes, 1), verify=True).data
                data = got[: _committed_prefix(got, hwm)]
            except CorruptLogError as e:
                err = ErrorCode.KAFKA_STORAGE_ERROR
                drv.unservable(e)
        resp = FetchResponse(
            error=err,
            leader_id=NO_NODE if view.leader_id is None else view.leader_id,
            leader_epoch=view.epoch if view.state is not ReplicaState.UNATTACHED else NO_EPOCH,
            high_watermark=Offset(-1) if hwm is None else hwm,
            log_start_offset=lso,
            records=data,
        )
        body = response_to_wire(
            resp, ApiKey.FETCH, version, leader_listener=self._listener_of(view.leader_id)
        )
        # Encoded now: `data` views the mmapped log, valid until the next truncation.
        self._reply(conn, ApiKey.FETCH, version, corr, body)

    # ------------------------------------------------------------------ private client API

    def _on_client_request(self, conn: _Connection, payload: bytes) -> None:
        try:
            header, body = decode_client_request(payload)
            if header.api_key == KRAFT_GET_KEY:
                answer = self._get(body)
            else:
                assert header.api_key == KRAFT_NODE_INFO_KEY
                answer = self._node_info()
            conn.write(encode_client_response(header.api_key, header.correlation_id, answer))
        except ProtocolError as e:
            self._refuse(conn, str(e))

    def _on_append(self, conn: _Connection, payload: bytes) -> None:
        """The hot path: records straight from the frame (no dict per record, no header or
        request object), answered through one small object (`_AppendReply`)."""
        try:
            corr, version, timeout_ms, producer, sequence, records = decode_append_fields(payload)
        except ProtocolError as e:
            self._refuse(conn, str(e))
            return
        reply = _AppendReply(self, conn, corr, version)
        self._driver.append(
            records,
            timeout_ms,
            reply.outcome,
            producer=ProducerId(producer),
            sequence=sequence,
            on_committed=reply.committed,
        )

    def _answer_committed(
        self, reply: _AppendReply, first: Offset, last: Offset, epoch: Epoch, leader: NodeId
    ) -> None:
        """A committed append's answer: the body of this version, leader and epoch is encoded
        once (AppendSuccessEncoder), each answer packs its correlation id and offsets in."""
        key = (reply.version, leader, epoch)
        encoder = self._append_ok.get(key)
        if encoder is None:
            fields = {**self._leader_fields(leader), "leader_epoch": epoch}
            encoder = self._append_ok[key] = AppendSuccessEncoder(reply.version, fields)
        reply.conn.write(encoder.encode(reply.corr, first, last))

    def _answer_append(self, reply: _AppendReply, outcome: AppendOutcome) -> None:
        if reply.conn.closed:
            return
        first, last, epoch = outcome.first_offset, outcome.last_offset, outcome.epoch
        if (
            outcome.error is ErrorCode.NONE
            and outcome.leader_id is not None
            and first is not None
            and last is not None
            and epoch is not None
        ):
            self._answer_committed(reply, first, last, epoch, outcome.leader_id)
            return
        body: MessageDict = {
            "error_code": int(outcome.error),
            "error_message": outcome.message,
            "base_offset": -1 if first is None else first,
            "last_offset": -1 if last is None else last,
            **self._leader_fields(outcome.leader_id),
        }
        if epoch is not None:
            body["leader_epoch"] = epoch
        reply.conn.write(encode_client_response(KRAFT_APPEND_KEY, reply.corr, body, reply.version))

    def _leader_fields(self, leader_id: NodeId | None) -> MessageDict:
        view = self._driver.replica.view()
        leader = view.leader_id if leader_id is None else leader_id
        addr = None if leader is None else self._cfg.voter(leader)
        return {
            "leader_id": NO_NODE if leader is None else leader,
            "leader_epoch": view.epoch,
            "leader_host": None if addr is None else addr.host,
            "leader_port": -1 if addr is None else addr.port,
        }

    def _get(self, request: MessageDict) -> MessageDict:
        """KraftGet: the key's value in this node's state machine (kraft.app.machines)."""
        answer: MessageDict = {"error_code": 0, "node_id": self._cfg.node_id}
        applier = self.applier
        if applier is not None:
            applier.catch_up()
        if applier is None or applier.failed is not None:
            answer["error_code"] = int(ErrorCode.UNKNOWN_SERVER_ERROR)
            answer["error_message"] = (
                "this node has no state machine" if applier is None else applier.failed
            )
            return answer
        key = request.get("key")
        assert isinstance(key, bytes)  # the codec decodes a non-nullable BYTES field
        store = applier.machine
        value = store.get(key)
        answer["found"] = value is not None
        answer["value"] = value
        answer["applied_offset"] = store.applied_offset
        return answer

    def _node_info(self) -> MessageDict:
        view = self._driver.replica.view()
        hwm = self._driver.high_watermark
        return {
            "error_code": 0,
            "cluster_id": self._cluster_id,
            "node_id": self._cfg.node_id,
            "directory_id": self._directory_id,
            "state": view.state.value,
            "epoch": view.epoch,
            "voted_for": NO_NODE if view.voted_for is None else view.voted_for.id,
            **self._leader_fields(None),
            "high_watermark": -1 if hwm is None else hwm,
            "log_start_offset": self._driver.log.start_offset,
            "end_offset": self._driver.log.end_offset,
            "last_epoch": view.last_epoch,
            "voters": list(view.voters),
        }


def _nothing() -> None:
    pass


class _AppendReply:
    """Where one KraftAppend's answer goes: its connection, correlation id and version."""

    __slots__ = ("conn", "corr", "server", "version")

    def __init__(self, server: RequestServer, conn: _Connection, corr: int, version: int) -> None:
        self.server = server
        self.conn = conn
        self.corr = corr
        self.version = version

    def outcome(self, outcome: AppendOutcome) -> None:
        self.server._answer_append(self, outcome)

    def committed(self, first: Offset, last: Offset, epoch: Epoch, leader: NodeId | None) -> None:
        """Committed at [first, last] in `epoch` (the driver's fast path: no AppendOutcome)."""
        if self.conn.closed:
            return
        if leader is None:  # not expected of a leader's commit; the general path answers it
            self.outcome(AppendOutcome(ErrorCode.NONE, None, first, last, epoch, leader))
            return
        self.server._answer_committed(self, first, last, epoch, leader)


def _committed_prefix(data: memoryview, hwm: int) -> int:
    """The length of the whole batches of `data` that end below `hwm`."""
    pos, n = 0, len(data)
    while pos + 27 <= n:
        base, length = _BASE_AND_LENGTH.unpack_from(data, pos)
        (delta,) = _LAST_DELTA.unpack_from(data, pos + 23)
        if base + delta >= hwm or pos + LOG_OVERHEAD + length > n:
            break
        pos += LOG_OVERHEAD + length
    return pos
