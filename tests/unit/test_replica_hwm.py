"""The HWM a leader advertises (Fetch, DescribeQuorum) versus the one a replica keeps locally.

Kafka's leader reports no HWM (-1) until the HWM first advances in its own epoch (a majority
reached past the epoch's start offset); a follower that saw a higher HWM from the previous
leader would otherwise get a lower one ("Non-monotonic update of high watermark").
"""

from __future__ import annotations

from replica_harness import CLUSTER, Harness, build_log, key, sent, stand

from kraft.core.effects import ElectionState
from kraft.core.events import Tick
from kraft.core.messages import FetchRequest, FetchResponse, VoteResponse
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset

S = ReplicaState


def elect(h: Harness, voters: tuple[int, ...] = (2, 3)) -> None:
    """Drive node 1 through its election (pre-vote and vote) by granting every request."""
    stand(h)
    for v in voters:
        if h.view.state is S.CANDIDATE:
            h.recv(v, VoteResponse(ErrorCode.NONE, NodeId(-1), h.view.epoch, True))
    assert h.view.state is S.LEADER


def fetch(src: int, epoch: int, offset: int, last_epoch: int) -> FetchRequest:
    return FetchRequest(
        CLUSTER, key(src), Epoch(epoch), Offset(offset), Epoch(last_epoch), Offset(0)
    )


def reply(effects: list[object]) -> FetchResponse:
    [(_, resp)] = sent(effects, FetchResponse)  # type: ignore[arg-type]
    return resp


def new_leader_with_stale_hwm() -> Harness:
    """Node 1 followed leader 2 in epoch 2 and learned HWM 3 of its 5 records; then it is
    elected in epoch 3. Node 3 may well have learned HWM 5 from leader 2 meanwhile."""
    h = Harness(
        log=build_log([(1, 2), (2, 3)]),
        election=ElectionState(Epoch(2), leader_id=NodeId(2)),
    )
    h.recv(2, FetchResponse(ErrorCode.NONE, NodeId(2), Epoch(2), Offset(3), Offset(0)))
    assert h.view.high_watermark == 3
    h.now += 60_000
    h.step(Tick(h.now))  # leader 2 went silent
    elect(h)
    assert h.view.epoch == 3
    return h


def test_new_leader_reports_no_hwm_until_it_advances_in_its_epoch() -> None:
    h = new_leader_with_stale_hwm()
    start = h.view.end_offset - 1  # the LeaderChange record opens epoch 3 at offset 5
    assert start == 5
    # Node 3 has everything up to the epoch start: the HWM it holds may be 5 already.
    resp = reply(h.recv(3, fetch(3, 3, 5, 2)))
    assert resp.error is ErrorCode.NONE
    assert resp.high_watermark == -1, "a stale HWM from the follower days was advertised"
    desc = h.replica.describe_quorum()
    assert desc is not None and desc.high_watermark is None
    # The local HWM stays what the replica knew (monotonic), not -1.
    assert h.view.high_watermark == 3
    # Node 3 reaches past the epoch start (it has the LeaderChange record): HWM 6 advertised.
    resp = reply(h.recv(3, fetch(3, 3, 6, 3)))
    assert resp.high_watermark == 6
    desc = h.replica.describe_quorum()
    assert desc is not None and desc.high_watermark == 6
    assert h.view.high_watermark == 6


def test_non_leader_fetch_errors_carry_no_hwm() -> None:
    """Kafka answers a Fetch it cannot serve with an empty response and HWM -1."""
    h = Harness(
        log=build_log([(1, 2)]),
        election=ElectionState(Epoch(2), leader_id=NodeId(2)),
    )
    h.recv(2, FetchResponse(ErrorCode.NONE, NodeId(2), Epoch(2), Offset(2), Offset(0)))
    assert h.view.high_watermark == 2
    resp = reply(h.recv(3, fetch(3, 2, 2, 1)))
    assert resp.error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert resp.high_watermark == -1
