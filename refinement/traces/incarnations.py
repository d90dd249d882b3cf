"""Incarnations of a replica in a trace of a dynamic quorum: which TLA+ server of
spec/TraceKRaft.tla each node of the trace is at each event.

KIP-853 identifies a replica by (id, directory id). A node that loses its data directory comes
back with a new directory id: a different replica, an observer until an operator adds it (and
removes the old identity, which stays in the voter set until then). KRaft.tla's replicas are
plain ids, so the mapping gives each incarnation a server of its own: incarnation k >= 1 of
node n is server n + k * INCARNATION_STRIDE (`Alias` in TraceData maps it back to n). The old
server crashes at the disk loss and never restarts; the new one starts empty (crashed too,
until the node's Restart). TraceKRaft compares node ids in the logged state and in logged
messages modulo Alias (a logged message names nodes by id, not by incarnation).

A static quorum's disk loss (the disk-loss profile: observers only) keeps one server per node
(TraceKRaft's LoseDisk)."""

from __future__ import annotations

from dataclasses import dataclass, field

# Far above any node id of a simulated or loopback cluster.
INCARNATION_STRIDE = 1000


@dataclass
class Incarnations:
    """The current server of each node, and the leader elected in each epoch (a leader named
    in a message of an old epoch may be an incarnation that no longer exists)."""

    current: dict[int, int] = field(default_factory=dict)
    alias: dict[int, int] = field(default_factory=dict)  # server of a new incarnation -> node
    leaders: dict[int, int] = field(default_factory=dict)  # epoch -> server elected in it

    def server(self, node: int) -> int:
        return self.current.get(node, node)

    def node_of(self, server: int) -> int:
        return self.alias.get(server, server)

    def lose_disk(self, node: int) -> tuple[int, int]:
        """The node's data directory is gone: (the old server, the new one)."""
        old = self.server(node)
        new = old + INCARNATION_STRIDE
        self.current[node] = new
        self.alias[new] = node
        return old, new

    def elected(self, epoch: int, node: int) -> None:
        self.leaders[epoch] = self.server(node)

    def leader(self, node: int, epoch: int) -> int:
        """The server of node `node`, named as the leader of `epoch`."""
        known = self.leaders.get(epoch)
        if known is not None and self.node_of(known) == node:
            return known
        return self.server(node)
