"""Corners of the follower's fetching (kraft.core.follower) the simulator's sweep rarely or
never draws, on a small cluster:

- an observer of a quorum of one voter finds that voter, its leader, and copies what it
  commits (the observer asks the voters when it knows no leader, however few they are);
- a Fetch to the leader that failed without a broken connection (the node's driver says so
  for a request that timed out: a plain SendFailed) does not hasten the follower's election,
  unlike a connection the leader's end broke (tests/scenarios/test_timer_scenarios.py);
- an observer whose leader went silent in the middle of a snapshot transfer goes on with the
  transfer only on a successful answer of the leader: a refusal in its name (what a resigned
  leader answers, NOT_LEADER_OR_FOLLOWER naming itself in the same epoch) is no sign that it
  serves again, so the observer keeps looking round the leader and the voters;
- a replica looking for the leader goes round its list (the voters, and the silent leader)
  in ascending id order, each next Fetch to the one after the last asked (Kafka starts from a
  random replica; this core is deterministic, and says so in kraft.core.follower).
"""

from __future__ import annotations

import itertools

from memory_logs import key
from scenario_harness import CLUSTER, Cluster, committed, elect

from kraft.core.events import CreateSnapshot, Receive, SendFailed
from kraft.core.messages import FetchRequest, FetchResponse, FetchSnapshotRequest, Message, Request
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset

S = ReplicaState
ELECTION_TIMEOUT_MS = 1000


class Recorded(Cluster):
    """Every message sent, delivered or not, with its source and destination."""

    def __init__(self, *args: object, **kw: object) -> None:
        self.sent: list[tuple[int, int, Message]] = []
        super().__init__(*args, **kw)  # type: ignore[arg-type]

    def send(self, src: int, dst: int, msg: Message, answering: Request | None) -> None:
        self.sent.append((src, dst, msg))
        super().send(src, dst, msg, answering)

    def discovery(self, src: int) -> list[int]:
        """Where `src` sent its Fetches asking no long poll (looking for the leader)."""
        return [
            d
            for s, d, m in self.sent
            if s == src and isinstance(m, FetchRequest) and m.max_wait_ms == 0
        ]


def _round_the_list(asked: list[int], everyone: list[int]) -> None:
    """Each Fetch goes to the replica after the last one asked, in ascending order."""
    assert len(asked) >= 2 * len(everyone), asked
    for a, b in itertools.pairwise(asked):
        assert b == everyone[(everyone.index(a) + 1) % len(everyone)], f"{a} then {b}: {asked}"


def test_an_observer_of_a_single_voter_quorum_copies_what_it_commits() -> None:
    c = Cluster(1, observers=1, seed=5)
    lead = elect(c)
    assert lead == 1
    end = committed(c, lead, 5)
    c.run_until(lambda: c.view(2).high_watermark == end, limit=5_000)
    assert c.view(2).state is S.FOLLOWER and c.view(2).leader_id == 1
    assert c.view(2).end_offset >= end


def test_a_fetch_that_timed_out_leaves_the_fetch_timer_as_it_was() -> None:
    """The leader stays alive and reachable: only a broken connection hastens the follower;
    a timed-out Fetch of this epoch is followed by the next one after a retry backoff, and
    the follower keeps following well past a quarter of an election timeout."""
    c = Cluster(3, seed=2, election_timeout_ms=ELECTION_TIMEOUT_MS, fetch_timeout_ms=2000)
    lead = elect(c)
    follower = next(i for i in c.nodes if i != lead)
    epoch = c.view(follower).epoch
    seen = len(c.nodes[follower].states)
    fetch = FetchRequest(CLUSTER, key(follower), Epoch(epoch), Offset(0), Epoch(0), Offset(0))
    c.step(follower, SendFailed(c.now, NodeId(lead), fetch))  # as the driver's request timer
    c.run(c.now + ELECTION_TIMEOUT_MS)
    assert c.nodes[follower].states[seen:] == []
    assert c.view(follower).state is S.FOLLOWER and c.view(follower).leader_id == lead


def _silent_mid_transfer(c: Recorded) -> tuple[int, int]:
    """Elect; cut the observer (4) off while the leader commits and snapshots past it; let it
    start fetching that snapshot, then cut the leader off from it for longer than its fetch
    timeout: it is the leader's Follower still, asking the leader and the voters in turn."""
    lead = elect(c)
    c.isolate(4)
    committed(c, lead, 12)
    c.run(c.now + 3000)
    hwm = c.view(lead).high_watermark
    assert hwm is not None
    c.step(lead, CreateSnapshot(c.now, hwm))
    c.run_until(lambda: c.view(lead).log_start_offset == hwm)
    c.heal()
    c.run_until(
        lambda: any(s == 4 and isinstance(m, FetchSnapshotRequest) and m.position > 0
                    for s, _, m in c.sent)
    )  # fmt: skip
    assert c.nodes[4].log.start_offset == 0  # mid-transfer
    c.partition(4, lead)
    c.run(c.now + 4000)
    assert c.view(4).state is S.FOLLOWER and c.view(4).leader_id == lead
    return lead, c.view(4).epoch


def test_a_refusal_in_the_silent_leaders_name_does_not_resume_the_transfer() -> None:
    c = Recorded(3, observers=1, seed=11, snapshots=True, fetch_max_bytes=24)
    lead, epoch = _silent_mid_transfer(c)
    asked = [m for s, _, m in c.sent if s == 4 and isinstance(m, FetchRequest)]
    refusal = FetchResponse(
        ErrorCode.NOT_LEADER_OR_FOLLOWER, NodeId(lead), Epoch(epoch), Offset(-1), Offset(0)
    )
    before = len(c.sent)
    c.step(4, Receive(c.now, NodeId(lead), refusal, in_reply_to=asked[-1]))
    c.run(c.now + 3000)
    after = [(d, m) for s, d, m in c.sent[before:] if s == 4]
    assert not any(isinstance(m, FetchSnapshotRequest) for _, m in after), after
    # Still looking round: the voters are asked too, not the leader alone.
    assert any(d != lead for d, m in after if isinstance(m, FetchRequest)), after
    assert c.nodes[4].log.start_offset == 0


def test_an_observer_looking_for_the_leader_goes_round_the_list_in_order() -> None:
    """No leader first (the voters cannot reach each other), then one the observer cannot
    reach: the voters in turn, then the leader and the voters in turn, each time the one
    after the last asked."""
    c = Recorded(3, observers=1, seed=3)
    for a, b in ((1, 2), (1, 3), (2, 3)):
        c.partition(a, b)
    c.run_until(lambda: len(c.discovery(4)) >= 9, limit=20_000)
    _round_the_list(c.discovery(4), [1, 2, 3])
    c.heal()
    lead = elect(c)
    c.partition(lead, 4)
    start = len(c.discovery(4))
    c.run_until(lambda: len(c.discovery(4)) >= start + 9, limit=60_000)
    assert c.view(lead).state is S.LEADER
    _round_the_list(c.discovery(4)[start:], [1, 2, 3])
