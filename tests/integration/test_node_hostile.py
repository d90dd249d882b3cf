"""Hostile requests against a real 3-node cluster: each gets the protocol's error or a closed
connection, the node keeps serving, and nothing committed is lost (issue: hardening)."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_harness import leader_of, make_cluster
from polling import kraft_info, wait_for

from kraft.client import Address, append
from kraft.client_read import read
from kraft.cluster import LocalCluster
from kraft.core.messages import FetchRequest, FetchResponse, Request, VoteRequest, VoteResponse
from kraft.errors import ErrorCode
from kraft.ids import MAX_EPOCH, ClusterId, Epoch, NodeId, Offset, ReplicaKey
from kraft.protocol import RequestHeader, decode_response_payload, encode_request_payload
from kraft.protocol.rpc import request_to_wire, response_from_wire
from kraft.storage.quorum_state import FILE_NAME, read_quorum_state
from kraft.storage.segmented_log import LOG_DIR_NAME


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = make_cluster(Path(tmp_path_factory.mktemp("hostile")))
    c.start()
    try:
        wait_for("a leader", lambda: leader_of(c, c.node_ids))
        yield c
    finally:
        c.stop_all()


class Raw:
    """One raw client connection speaking Kafka's framing."""

    def __init__(self, address: Address) -> None:
        self.sock = socket.create_connection((address.host, address.port), timeout=5.0)
        self.buf = b""

    def send(self, req: Request, corr: int, *, null_cluster_id: bool = False) -> tuple[int, int]:
        key, version, body = request_to_wire(req)
        if null_cluster_id:
            body["cluster_id"] = None  # as an old client sends it: accepted by the cluster check
        self.sock.sendall(
            encode_request_payload(RequestHeader(key, version, corr, "hostile"), body, framed=True)
        )
        return key, version

    def answer(self, key: int, version: int) -> tuple[int, object] | None:
        """(correlation id, core response), or None when the node closed the connection."""
        while len(self.buf) < 4 or len(self.buf) < 4 + struct.unpack(">i", self.buf[:4])[0]:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buf += chunk
        size = struct.unpack(">i", self.buf[:4])[0]
        payload, self.buf = self.buf[4 : 4 + size], self.buf[4 + size :]
        corr, body = decode_response_payload(key, version, payload)
        return corr, response_from_wire(key, version, body)

    def close(self) -> None:
        self.sock.close()


def _committed_values(cluster: LocalCluster, node: int) -> set[bytes]:
    result = asyncio.run(read(cluster.addresses[node], 0))
    return {v for _, v in result.records if v is not None}


def test_a_vote_with_the_largest_epoch_is_refused_by_every_node(cluster: LocalCluster) -> None:
    """The frame of the issue: candidate epoch 2^31-1, null cluster id, a non-voter id."""
    before = asyncio.run(append(list(cluster.addresses.values()), [b"before-hostile-vote"]))
    vote = VoteRequest(ClusterId(""), ReplicaKey(NodeId(77)), Epoch(MAX_EPOCH), Epoch(0), Offset(0))
    for n in cluster.node_ids:
        raw = Raw(cluster.addresses[n])
        try:
            key, version = raw.send(vote, corr=11, null_cluster_id=True)
            got = raw.answer(key, version)
        finally:
            raw.close()
        assert got is not None
        corr, resp = got
        assert corr == 11
        assert isinstance(resp, VoteResponse)
        assert resp.error is ErrorCode.INVALID_REQUEST and not resp.vote_granted
    time.sleep(2.0)  # longer than an election timeout: a bad epoch would have been used by now
    lead = wait_for("a leader", lambda: leader_of(cluster, cluster.node_ids))
    assert lead.epoch < 1000  # type: ignore[attr-defined]
    after = asyncio.run(append(list(cluster.addresses.values()), [b"after-hostile-vote"]))
    assert after.base_offset > before.base_offset
    for n in cluster.node_ids:
        stored = read_quorum_state(cluster.data_dir(n) / LOG_DIR_NAME / FILE_NAME)
        assert stored is not None and stored.epoch < 1000
    # A node restarts from whatever it stored.
    victim = cluster.node_ids[0]
    cluster.stop(victim)
    cluster.start(victim)
    wait_for("the node to rejoin", lambda: kraft_info(cluster.addresses[victim]) is not None)
    wait_for("a leader", lambda: leader_of(cluster, cluster.node_ids), timeout_s=15.0)
    wait_for(
        "the value acknowledged before the hostile vote, committed",
        lambda: b"before-hostile-vote" in _committed_values(cluster, lead.node_id),  # type: ignore[attr-defined]
        timeout_s=15.0,
    )


def test_an_answer_goes_back_on_the_connection_its_request_came_in_on(
    cluster: LocalCluster,
) -> None:
    """Fetches claiming to be follower F, on strangers' connections, with the right and the
    wrong cluster id: each gets its own answer with its own correlation id, F keeps its answers
    (it does not starve into an election), and no leader change follows."""
    lead = wait_for("a leader", lambda: leader_of(cluster, cluster.node_ids))
    leader_id = lead.node_id  # type: ignore[attr-defined]
    epoch = lead.epoch  # type: ignore[attr-defined]
    follower = next(n for n in cluster.node_ids if n != leader_id)
    meta_cluster = ClusterId(cluster.cluster_id)
    address = cluster.addresses[leader_id]
    impostors = [Raw(address) for _ in range(4)]
    try:
        deadline = time.monotonic() + 4.0  # several fetch timeouts of the follower (600 ms)
        corr = 100
        while time.monotonic() < deadline:
            for i, raw in enumerate(impostors):
                corr += 1
                cluster_id = meta_cluster if i % 2 == 0 else ClusterId("someone-else-cluster0")
                fetch = FetchRequest(
                    cluster_id,
                    ReplicaKey(NodeId(follower)),
                    Epoch(epoch),
                    Offset(0),
                    Epoch(0),
                    Offset(0),
                    max_wait_ms=50,
                )
                key, version = raw.send(fetch, corr)
                got = raw.answer(key, version)
                assert got is not None
                answered_corr, resp = got
                assert answered_corr == corr
                assert isinstance(resp, FetchResponse)
                if cluster_id != meta_cluster:
                    assert resp.error is ErrorCode.INCONSISTENT_CLUSTER_ID
    finally:
        for raw in impostors:
            raw.close()
    now = wait_for("a leader", lambda: leader_of(cluster, cluster.node_ids))
    assert now.node_id == leader_id and now.epoch == epoch  # type: ignore[attr-defined]


def test_a_connection_cannot_change_the_replica_it_claims(cluster: LocalCluster) -> None:
    lead = wait_for("a leader", lambda: leader_of(cluster, cluster.node_ids))
    raw = Raw(cluster.addresses[lead.node_id])  # type: ignore[attr-defined]
    meta_cluster = ClusterId(cluster.cluster_id)
    try:
        for corr, claimed in ((1, 2), (2, 3)):
            fetch = FetchRequest(
                meta_cluster,
                ReplicaKey(NodeId(claimed)),
                Epoch(lead.epoch),  # type: ignore[attr-defined]
                Offset(0),
                Epoch(0),
                Offset(0),
            )
            key, version = raw.send(fetch, corr)
            got = raw.answer(key, version)
            if corr == 1:
                assert got is not None and got[0] == 1
            else:
                assert got is None  # closed: node 2's connection claimed node 3
    finally:
        raw.close()
    assert kraft_info(cluster.addresses[lead.node_id]) is not None  # type: ignore[attr-defined]
