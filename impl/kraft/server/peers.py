"""Outbound links: one lazily connected TCP connection per peer, for the core's requests.

Every request gets a correlation id and a timer. A response becomes Receive(in_reply_to=the
request); a refused or lost connection, an undecodable response or the request timeout becomes
SendFailed, so the core's retry rules apply; one for a connection refused, reset or closed by
the peer says so (`broken`), so that a follower notices a crashed leader at once rather than
at its fetch timeout (kraft.core.follower). Reconnects back off (50 ms doubling to 400 ms).
Versions are our highest (PREFERRED_VERSIONS): every node of a cluster speaks this code.
The leader endpoints a response names (`node_endpoints`, KIP-853: Fetch v17+, Vote,
BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot) go to `on_endpoints` before the response goes
to the core, so that the node can reach a leader it just learned of (kraft.server.node).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from kraft.core.events import Event, Receive, SendFailed
from kraft.core.messages import FetchRequest, Request, Response
from kraft.ids import NodeId
from kraft.protocol import (
    FrameDecoder,
    ProtocolError,
    RequestHeader,
    decode_response_payload,
    encode_request_payload,
)
from kraft.protocol.fetch_fast import (
    FAST_FETCH_VERSION,
    fetch_request_frame,
    read_fetch_response,
)
from kraft.protocol.rpc import Listener, request_to_wire, response_from_wire
from kraft.protocol.schema import ApiKey
from kraft.protocol.values import FieldTypeError, Message, get_int, get_str, get_structs
from kraft.server.driver import Clock, Release

__all__ = ["LinkFactory", "PeerLink", "Peers"]

log = logging.getLogger("kraft.node")

_BACKOFF_MIN_MS = 50
_BACKOFF_MAX_MS = 400
_CORRELATION = struct.Struct(">i")


@dataclass(slots=True)
class _InFlight:
    request: Request
    api_key: int
    version: int
    timer: asyncio.TimerHandle | None = None


def _endpoints_of(body: Message) -> list[tuple[NodeId, str, int]]:
    """The (node id, host, port) entries of a response's `node_endpoints` (none if absent or
    malformed: an address is a hint, never a reason to drop the answer)."""
    try:
        entries = get_structs(body, "node_endpoints")
        return [
            (NodeId(get_int(e, "node_id")), get_str(e, "host"), get_int(e, "port"))
            for e in entries
            if get_int(e, "node_id") >= 0 and 0 < get_int(e, "port") < 65536
        ]
    except (KeyError, FieldTypeError):
        return []


class PeerLink:
    def __init__(
        self,
        node_id: NodeId,
        host: str,
        port: int,
        submit: Callable[[Event], None],
        clock: Clock,
        *,
        client_id: str,
        request_timeout_ms: int,
        max_frame_bytes: int,
        listeners: Sequence[Listener] = (),
        on_endpoints: Callable[[NodeId, str, int], None] | None = None,
    ) -> None:
        self.node_id = node_id
        self.on_endpoints = on_endpoints
        self.host = host
        self.port = port
        self._submit = submit
        self._clock = clock
        self._client_id = client_id
        self._timeout_s = request_timeout_ms / 1000
        self._max_frame = max_frame_bytes
        self._listeners = tuple(listeners)
        self._ids = itertools.count(1)
        self._in_flight: dict[int, _InFlight] = {}
        self._queued: list[bytes] = []
        self._transport: asyncio.Transport | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._backoff_ms = 0
        self._next_connect_ms = 0
        self._closed = False

    def prepare(self, request: Request) -> Release:
        corr = next(self._ids) & 0x7FFFFFFF
        # A follower's every fetch: written directly (fetch_fast).
        fast = None
        if type(request) is FetchRequest:
            fast = fetch_request_frame(request, corr, self._client_id)
        if fast is not None:
            api_key, version, frame = ApiKey.FETCH, FAST_FETCH_VERSION, fast
        else:
            api_key, version, body = request_to_wire(request, listeners=self._listeners)
            header = RequestHeader(api_key, version, corr, self._client_id)
            frame = encode_request_payload(header, body, framed=True)

        def release() -> None:
            self._send(corr, _InFlight(request, api_key, version), frame)

        return release

    def _send(self, corr: int, entry: _InFlight, frame: bytes) -> None:
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        entry.timer = loop.call_later(self._timeout_s, self._timed_out, corr)
        self._in_flight[corr] = entry
        if self._transport is not None:
            self._transport.write(frame)
            return
        self._queued.append(frame)
        if self._connecting is None:
            self._connecting = asyncio.create_task(self._connect())

    async def _connect(self) -> None:
        """Connect while requests are queued and no connection is up. The connection becomes
        the link's in its protocol's connection_made, not when this coroutine resumes: by
        then the peer may have closed it and its connection_lost have run (a reset
        partition, a restarting node), and a link that adopted it afterwards would write
        every later request into a dead transport and never reconnect."""
        try:
            while self._queued and self._transport is None and not self._closed:
                delay = self._next_connect_ms - self._clock()
                if delay > 0:
                    await asyncio.sleep(delay / 1000)
                try:
                    await asyncio.wait_for(
                        asyncio.get_running_loop().create_connection(
                            functools.partial(_LinkProtocol, self), self.host, self.port
                        ),
                        self._timeout_s,
                    )
                except (OSError, TimeoutError) as e:
                    log.debug("cannot connect to node %d: %s", self.node_id, e)
                    self._backoff_ms = min(
                        max(2 * self._backoff_ms, _BACKOFF_MIN_MS), _BACKOFF_MAX_MS
                    )
                    self._next_connect_ms = self._clock() + self._backoff_ms
                    # Refused or unreachable: broken; a connect that timed out says nothing
                    # more than a request that timed out.
                    self._fail_all(broken=not isinstance(e, TimeoutError))
                    return
                # Up (connection_made handed it over; closed there if the link was closed
                # meanwhile), or already lost: then connection_lost failed what was queued,
                # and what was queued since needs another connection.
        finally:
            self._connecting = None

    def _connected(self, transport: asyncio.Transport) -> None:
        """A new connection is up (its protocol's connection_made): send what is queued."""
        if self._closed:
            transport.close()
            return
        self._backoff_ms = 0
        self._transport = transport
        for frame in self._queued:
            transport.write(frame)
        self._queued.clear()

    def _disconnected(self, transport: asyncio.Transport) -> None:
        """The connection ended: by the peer (EOF, reset), a bad frame, or this link's close."""
        if self._transport is transport:
            self._transport = None
        # Ended by the peer (EOF, reset) unless this link was closed here.
        self._fail_all(broken=not self._closed)

    def _on_frame(self, frame: bytes) -> None:
        if len(frame) < 4:
            return
        (corr,) = _CORRELATION.unpack_from(frame, 0)
        entry = self._in_flight.pop(corr, None)
        if entry is None:
            return  # answers a request that timed out
        if entry.timer is not None:
            entry.timer.cancel()
        now = self._clock()
        fast = None
        response: Response
        if entry.api_key == ApiKey.FETCH and entry.version == FAST_FETCH_VERSION:
            fast = read_fetch_response(frame)  # the usual answer to a Fetch (fetch_fast)
        if fast is not None:
            response, endpoints = fast
        else:
            try:
                _, body = decode_response_payload(entry.api_key, entry.version, frame)
                response = response_from_wire(entry.api_key, entry.version, body)
            except ProtocolError as e:
                log.warning("bad response from node %d: %s", self.node_id, e)
                self._submit(SendFailed(now, self.node_id, entry.request))
                return
            endpoints = _endpoints_of(body)
        if self.on_endpoints is not None:
            for node, host, port in endpoints:
                self.on_endpoints(node, host, port)
        self._submit(Receive(now, self.node_id, response, in_reply_to=entry.request))

    def _timed_out(self, corr: int) -> None:
        entry = self._in_flight.pop(corr, None)
        if entry is not None:
            self._submit(SendFailed(self._clock(), self.node_id, entry.request))

    def _fail_all(self, *, broken: bool = False) -> None:
        self._queued.clear()
        entries, self._in_flight = self._in_flight, {}
        now = self._clock()
        for entry in entries.values():
            if entry.timer is not None:
                entry.timer.cancel()
            if not self._closed:
                self._submit(SendFailed(now, self.node_id, entry.request, broken=broken))

    async def close(self) -> None:
        self._closed = True
        task = self._connecting
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        self._fail_all()


class _LinkProtocol(asyncio.Protocol):
    """A link's connection, read by callbacks: each chunk is split into frames and each frame
    handed to the link at once (no task, no future per response)."""

    __slots__ = ("_decoder", "_link", "_transport")

    def __init__(self, link: PeerLink) -> None:
        self._link = link
        self._decoder = FrameDecoder(link._max_frame)
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's is not a subclass of asyncio.Transport).
        self._transport = cast(asyncio.Transport, transport)
        self._link._connected(self._transport)

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._decoder.feed(data)
        except ProtocolError as e:
            log.debug("connection to node %d failed: %s", self._link.node_id, e)
            if self._transport is not None:
                self._transport.abort()
            return
        on_frame = self._link._on_frame
        for frame in frames:
            on_frame(frame)

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            log.debug("connection to node %d failed: %s", self._link.node_id, exc)
        if self._transport is not None:
            self._link._disconnected(self._transport)


LinkFactory = Callable[[NodeId, str, int], PeerLink]


class Peers:
    """The node's outbound links by node id, and where each node is.

    A node's address is, first, its endpoint in the latest voter set of the log (`set_voters`,
    KIP-853: the Voters record's endpoints, so voters added or moved at runtime are reached
    where the log says), else the endpoint a response named for it (`learn`: the leader an
    observer found through a bootstrap server). A link is made on the first request to its
    node; one whose node left the voter set (and is not `keep`) or moved is closed."""

    def __init__(self, make_link: LinkFactory, voters: Sequence[tuple[NodeId, str, int]]) -> None:
        self._make = make_link
        self.links: dict[NodeId, PeerLink] = {}
        self._voters: dict[NodeId, tuple[str, int]] = {n: (h, p) for n, h, p in voters}
        self._learned: dict[NodeId, tuple[str, int]] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def address_of(self, node: NodeId) -> tuple[str, int] | None:
        return self._voters.get(node) or self._learned.get(node)

    def learn(self, node: NodeId, host: str, port: int) -> None:
        """A response named `node`'s endpoint (used while the voter set does not name it)."""
        if self._learned.get(node) != (host, port):
            self._learned[node] = (host, port)
            self._retire_moved(node)

    def set_voters(
        self, voters: Sequence[tuple[NodeId, str, int]], keep: Sequence[NodeId] = ()
    ) -> None:
        """The voter set changed: its endpoints; links to nodes no longer voters (but those in
        `keep`, such as the leader) or now elsewhere are closed."""
        self._voters = {n: (h, p) for n, h, p in voters}
        for node in list(self.links):
            if node not in self._voters and node not in keep:
                self._retire(node)
            else:
                self._retire_moved(node)

    def link_for(self, node: NodeId) -> PeerLink | None:
        link = self.links.get(node)
        if link is not None:
            return link
        address = self.address_of(node)
        if address is None:
            return None
        link = self.links[node] = self._make(node, *address)
        if link.on_endpoints is None:
            link.on_endpoints = self.learn
        return link

    def _retire_moved(self, node: NodeId) -> None:
        link = self.links.get(node)
        if link is not None and (link.host, link.port) != self.address_of(node):
            self._retire(node)

    def _retire(self, node: NodeId) -> None:
        link = self.links.pop(node)
        log.info("link to node %d (%s:%d) closed", node, link.host, link.port)
        link._fail_all()  # what was in flight is retried by the core's rules, elsewhere
        task = asyncio.get_running_loop().create_task(link.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        for link in list(self.links.values()):
            await link.close()
        self.links.clear()
        for task in list(self._closing):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
