"""Helpers for tests that run real nodes as subprocesses on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from polling import kraft_info

from kraft.client import NodeInfo
from kraft.cluster import LocalCluster, free_ports

# Short timeouts keep a failover to about a second (Kafka's defaults are 1 s and 2 s).
FAST = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "600",
    "controller.quorum.election.backoff.max.ms": "300",
    "controller.quorum.request.timeout.ms": "1000",
    "controller.quorum.fetch.max.wait.ms": "200",
}


def make_cluster(root: Path, n: int = 3, **kwargs: bool) -> LocalCluster:
    cluster = LocalCluster(root, free_ports(n), overrides=FAST, **kwargs)
    cluster.format()
    return cluster


def leader_of(cluster: LocalCluster, nodes: Iterable[int]) -> NodeInfo | None:
    """The node that says it leads, once every listed node follows it in its epoch."""
    infos = [kraft_info(cluster.addresses[n]) for n in nodes]
    leaders = [i for i in infos if i is not None and i.state == "Leader"]
    if len(leaders) != 1:
        return None
    lead = leaders[0]
    if all(i is not None and i.epoch == lead.epoch and i.leader_id == lead.node_id for i in infos):
        return lead
    return None
