"""kraft.server.peers.Peers: where the node reaches each peer as the voter set changes
(KIP-853: the endpoints of the log's latest Voters record, else one a response named)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kraft.core.events import Event, SendFailed
from kraft.core.messages import FetchRequest
from kraft.ids import ClusterId, Epoch, NodeId, Offset, ReplicaKey
from kraft.server.peers import PeerLink, Peers, _endpoints_of


def _peers(events: list[Event]) -> Peers:
    def make(node: NodeId, host: str, port: int) -> PeerLink:
        return PeerLink(
            node,
            host,
            port,
            events.append,
            lambda: 0,
            client_id="test",
            request_timeout_ms=1000,
            max_frame_bytes=1 << 20,
        )

    return Peers(make, [(NodeId(2), "h2", 2), (NodeId(3), "h3", 3)])


def test_links_follow_the_voter_set_and_learned_endpoints() -> None:
    async def run() -> None:
        events: list[Event] = []
        peers = _peers(events)
        two = peers.link_for(NodeId(2))
        assert two is not None and (two.host, two.port) == ("h2", 2)
        assert peers.link_for(NodeId(2)) is two  # made once
        assert peers.link_for(NodeId(4)) is None  # nobody said where node 4 is

        # A response named node 4's endpoint (the leader an observer found).
        peers.learn(NodeId(4), "h4", 4)
        four = peers.link_for(NodeId(4))
        assert four is not None and (four.host, four.port) == ("h4", 4)
        assert four.on_endpoints is not None  # its answers teach endpoints too

        # A Voters record: node 2 moved, node 3 left, node 5 joined; node 4 is kept (leader).
        three = peers.link_for(NodeId(3))
        peers.set_voters([(NodeId(2), "h2b", 22), (NodeId(5), "h5", 5)], keep=[NodeId(4)])
        assert NodeId(3) not in peers.links and three is not None
        moved = peers.link_for(NodeId(2))
        assert moved is not None and moved is not two and (moved.host, moved.port) == ("h2b", 22)
        assert peers.link_for(NodeId(4)) is four
        five = peers.link_for(NodeId(5))
        assert five is not None and (five.host, five.port) == ("h5", 5)
        assert peers.link_for(NodeId(3)) is None

        # The voter set's endpoint wins over a learned one.
        peers.learn(NodeId(5), "elsewhere", 55)
        assert peers.link_for(NodeId(5)) is five
        await peers.close()
        assert peers.links == {}

    asyncio.run(run())


def test_endpoints_are_read_from_node_endpoints_and_bad_ones_ignored() -> None:
    body = {
        "node_endpoints": [
            {"node_id": 2, "host": "127.0.0.1", "port": 9092, "rack": None},
            {"node_id": -1, "host": "x", "port": 1},
            {"node_id": 3, "host": "y", "port": 0},
        ]
    }
    assert _endpoints_of(body) == [(2, "127.0.0.1", 9092)]
    assert _endpoints_of({}) == []
    assert _endpoints_of({"node_endpoints": [{"node_id": "2"}]}) == []


def _fetch_request() -> FetchRequest:
    return FetchRequest(
        cluster_id=ClusterId("c"),
        replica=ReplicaKey(NodeId(1)),
        replica_epoch=Epoch(1),
        fetch_offset=Offset(0),
        last_fetched_epoch=Epoch(0),
        log_start_offset=Offset(0),
        max_bytes=1024,
        max_wait_ms=500,
    )


def _link(port: int, events: list[Event], timeout_ms: int = 5000) -> PeerLink:
    return PeerLink(
        NodeId(2),
        "127.0.0.1",
        port,
        events.append,
        lambda: 0,
        client_id="test",
        request_timeout_ms=timeout_ms,
        max_frame_bytes=1 << 20,
    )


async def _failure(link: PeerLink, events: list[Event]) -> SendFailed:
    link.prepare(_fetch_request())()
    while not events:
        await asyncio.sleep(0.01)
    await link.close()
    [failed] = events
    assert isinstance(failed, SendFailed) and failed.dst == 2
    return failed


def test_a_connection_the_peer_closes_or_refuses_is_broken_a_timeout_is_not() -> None:
    """The core hears which (kraft.core.follower: a follower stands early only on a break)."""

    async def run() -> None:
        async def close_at_once(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            w.close()

        async def never_answer(r: asyncio.StreamReader, _w: asyncio.StreamWriter) -> None:
            await r.read()

        closing = await asyncio.start_server(close_at_once, "127.0.0.1", 0)
        silent = await asyncio.start_server(never_answer, "127.0.0.1", 0)
        closed_port = closing.sockets[0].getsockname()[1]
        silent_port = silent.sockets[0].getsockname()[1]
        events: list[Event] = []
        assert (await _failure(_link(closed_port, events), events)).broken
        events.clear()
        assert not (await _failure(_link(silent_port, events, timeout_ms=50), events)).broken
        closing.close()
        silent.close()
        await closing.wait_closed()
        events.clear()
        # Nothing listens there any more: connection refused.
        assert (await _failure(_link(closed_port, events), events)).broken
        await silent.wait_closed()

    asyncio.run(run())


def test_a_connection_lost_before_the_connect_returns_is_not_kept() -> None:
    """The peer may close a new connection before the coroutine that opened it resumes (a
    reset partition, a restarting node): its transport has already told the link it is lost,
    so the link must not then adopt it. A link that did kept writing every later request into
    that dead transport (asyncio drops them, logging 'socket.send() raised exception.') and
    never reconnected: requests to that peer timed out until the process restarted, and a
    chaos run (seed 5) left a follower that never caught up or elections that never held."""

    async def run() -> None:
        accepted = 0
        closed = asyncio.Event()
        frames: asyncio.Queue[bytes] = asyncio.Queue()

        async def close_first(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            nonlocal accepted
            accepted += 1
            if accepted == 1:
                w.close()
                closed.set()
                return
            size = int.from_bytes(await r.readexactly(4), "big")
            await frames.put(await r.readexactly(size))
            await r.read()

        server = await asyncio.start_server(close_first, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        loop = asyncio.get_running_loop()
        real = loop.create_connection
        calls = 0

        async def returns_after_the_loss(
            factory: Callable[[], asyncio.Protocol], host: str, port: int
        ) -> tuple[asyncio.BaseTransport, asyncio.Protocol]:
            # The first connection returns to its opener only once the peer's close has been
            # delivered (connection_lost has run): the interleaving the chaos run met.
            nonlocal calls
            calls += 1
            transport, protocol = await real(factory, host, port)
            if calls == 1:
                await closed.wait()
                # A transport that closes itself on EOF has done so once the FIN is read; a
                # stream reader's keeps its transport open and reads the EOF later (bounded).
                for _ in range(200):
                    if transport.is_closing():
                        break
                    await asyncio.sleep(0.01)
                for _ in range(3):
                    await asyncio.sleep(0)
            return transport, protocol

        loop.create_connection = returns_after_the_loss  # type: ignore[method-assign, assignment]
        events: list[Event] = []
        link = _link(port, events, timeout_ms=3000)
        link.prepare(_fetch_request())()
        while not events:
            await asyncio.sleep(0.01)
        [first] = events
        assert isinstance(first, SendFailed) and first.broken  # the peer closed it
        # The next request must go out on a new connection, not into the lost one.
        link.prepare(_fetch_request())()
        got = asyncio.ensure_future(frames.get())
        while not got.done() and len(events) == 1:
            await asyncio.sleep(0.01)
        assert got.done(), f"the request never reached the peer: {events[1:]}"
        assert accepted == 2 and len(events) == 1
        await link.close()
        server.close()
        await server.wait_closed()

    asyncio.run(run())
