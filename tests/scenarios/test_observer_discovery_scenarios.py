"""A replica looking for the leader asks in turn (kraft.core.follower): an observer with no
leader the voters, an observer whose leader went silent the leader and the voters (Kafka asks
a ready one from a random start; this core goes round the list). So within as many
discovery Fetches (max_wait_ms 0) as the list is long it asked every one of them: the one
replica that could answer is never skipped.
"""

from __future__ import annotations

import pytest
from scenario_harness import Cluster, elect

from kraft.core.messages import FetchRequest, Message, Request
from kraft.core.vocabulary import ReplicaState


class Recorded(Cluster):
    """Every Fetch sent, delivered or not, with its destination."""

    def __init__(self, voters: int) -> None:
        self.fetches: list[tuple[int, int, FetchRequest]] = []
        super().__init__(voters, observers=1, seed=3)

    def send(self, src: int, dst: int, msg: Message, answering: Request | None) -> None:
        if isinstance(msg, FetchRequest):
            self.fetches.append((src, dst, msg))
        super().send(src, dst, msg, answering)

    def discovery(self, src: int) -> list[int]:
        return [d for s, d, m in self.fetches if s == src and m.max_wait_ms == 0]


def _in_turn(asked: list[int], everyone: list[int]) -> None:
    n = len(everyone)
    assert len(asked) >= 2 * n, asked
    for i in range(len(asked) - n + 1):
        window = asked[i : i + n]
        assert sorted(window) == everyone, f"asked {window} in a row, of {asked}"


@pytest.mark.parametrize("voters", [2, 3, 4, 5])
def test_an_observer_without_a_leader_asks_every_voter_in_turn(voters: int) -> None:
    """The voters cannot reach each other: none is elected, each answers with no leader."""
    c = Recorded(voters)
    observer = voters + 1
    for a in range(1, voters + 1):
        for b in range(a + 1, voters + 1):
            c.partition(a, b)
    c.run_until(lambda: len(c.discovery(observer)) >= 3 * voters, limit=20_000)
    assert all(c.view(i).leader_id is None for i in c.nodes), "no leader can be elected"
    _in_turn(c.discovery(observer), list(range(1, voters + 1)))


@pytest.mark.parametrize("voters", [2, 3, 4])
def test_an_observer_whose_leader_went_silent_asks_it_and_the_voters_in_turn(
    voters: int,
) -> None:
    """The leader keeps leading but cannot reach the observer: each voter names that same
    leader, so the observer keeps asking round the voters (the leader among them)."""
    c = Recorded(voters)
    observer = voters + 1
    lead = elect(c)
    c.run_until(lambda: c.view(observer).leader_id == lead, limit=20_000)
    c.partition(lead, observer)
    start = len(c.discovery(observer))
    c.run_until(lambda: len(c.discovery(observer)) >= start + 3 * voters, limit=60_000)
    assert c.view(lead).state is ReplicaState.LEADER
    _in_turn(c.discovery(observer)[start:], list(range(1, voters + 1)))
