"""A false alarm does not disturb a live leader: three voters in this process (loopback TCP),
a follower's connection to its leader breaks again and again (the transport aborted under
it), so the follower stands (Prospective, pre-vote) long before its fetch timeout; the other
voters, still fetching from the leader, and the leader refuse the pre-vote (KIP-996), and the
follower follows the same leader in the same epoch again (kraft.core.follower)."""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import Callable
from pathlib import Path

from kraft.core.effects import Effect, StateChanged
from kraft.core.events import Event
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import NodeId
from kraft.server.config import NodeConfig, VoterAddress
from kraft.server.node import Node
from kraft.storage.meta_properties import format_storage, generate_cluster_id

_WAIT_S = 60.0
S = ReplicaState


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _until(what: str, check: Callable[[], bool]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _WAIT_S
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def test_a_follower_whose_link_breaks_stands_but_the_leader_stays(tmp_path: Path) -> None:
    cluster_id = generate_cluster_id(random.Random(17))
    ports = [_free_port() for _ in range(3)]
    voters = tuple(VoterAddress(NodeId(i + 1), "127.0.0.1", p) for i, p in enumerate(ports))
    configs = []
    for i, port in enumerate(ports, start=1):
        format_storage(tmp_path / f"n{i}", cluster_id, i)
        configs.append(
            NodeConfig(
                node_id=NodeId(i),
                data_dir=tmp_path / f"n{i}",
                voters=voters,
                listener_host="127.0.0.1",
                listener_port=port,
                # The fetch timeout is far beyond this test: only a noticed break can make a
                # follower stand.
                timing=QuorumTiming(election_timeout_ms=300, fetch_timeout_ms=600_000),
            )
        )

    async def main() -> None:
        nodes = [await Node.open(c) for c in configs]
        try:

            def leader() -> Node | None:
                leads = [n for n in nodes if n.driver.replica.view().state is S.LEADER]
                return leads[0] if len(leads) == 1 else None

            await _until("a leader", lambda: leader() is not None)
            lead = leader()
            assert lead is not None
            epoch = lead.driver.replica.view().epoch
            lead_id = lead.driver.replica.view().node_id
            outcome = await lead.driver.client_append(((None, b"x"),), 30_000)
            assert outcome.error is ErrorCode.NONE
            follower = next(n for n in nodes if n is not lead)
            await _until(
                "the followers to follow",
                lambda: all(
                    n.driver.replica.view().leader_id == lead_id
                    and n.driver.replica.view().state in (S.FOLLOWER, S.LEADER)
                    for n in nodes
                ),
            )

            changes: list[StateChanged] = []
            step = follower.driver.replica.step

            def watched(event: Event) -> list[Effect]:
                effects = step(event)
                changes.extend(e for e in effects if isinstance(e, StateChanged))
                return effects

            follower.driver.replica.step = watched  # type: ignore[method-assign]

            async def break_link() -> None:
                while True:
                    link = follower._transport.peers.links.get(lead_id)
                    transport = None if link is None else link._transport
                    if transport is not None:
                        transport.abort()  # as a reset from the leader's end
                    await asyncio.sleep(0.02)

            breaker = asyncio.create_task(break_link())
            await _until(
                "the follower to stand", lambda: any(c.new is S.PROSPECTIVE for c in changes)
            )
            breaker.cancel()
            await _until(
                "the follower to follow the leader again",
                lambda: follower.driver.replica.view().state is S.FOLLOWER,
            )
            for n in nodes:
                view = n.driver.replica.view()
                assert (view.epoch, view.leader_id) == (epoch, lead_id), view
            assert lead.driver.replica.view().state is S.LEADER
            assert all(c.epoch == epoch for c in changes)
            assert (await lead.driver.client_append(((None, b"y"),), 30_000)).error is (
                ErrorCode.NONE
            )
        finally:
            for n in nodes:
                await n.close(graceful=False)

    asyncio.run(main())
