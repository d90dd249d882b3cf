"""kraft.server.peers.Peers: where the node reaches each peer as the voter set changes
(KIP-853: the endpoints of the log's latest Voters record, else one a response named)."""

from __future__ import annotations

import asyncio

from kraft.core.events import Event
from kraft.ids import NodeId
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
