"""Scenario tests of the replica's random timers at the two ends of their draws.

A replica draws three timers from the generator it is given (randrange(n), uniform in
[0, n)); the simulator's timing checkers can only bound when each fires, since they cannot see
the draw. Here one voter is given a generator that always draws the top of the range (n - 1)
or always the bottom (0), so each timer fires at an exact time, the end of its documented
window:

- the election timeout of a voter that hears of no leader: T + [0, T) after it started
  (KIP-595, Kafka's randomized election timeout), T = quorum.election.timeout.ms;
- the fetch timeout of a voter following a leader: F + [0, T/2) after the leader last
  answered, F = quorum.fetch.timeout.ms (this project's jitter, README deviations);
- a follower whose connection to its leader broke under a Fetch of its epoch stands within
  [0, T/4) (this project's fast failover, README deviations; Kafka has no such bound: a
  disconnect only backs the Fetch off until the fetch timeout).
"""

from __future__ import annotations

import random

from memory_logs import key
from scenario_harness import CLUSTER, Cluster

from kraft.core.effects import Effect, StateChanged
from kraft.core.events import Event, Receive, SendFailed
from kraft.core.messages import FetchRequest, FetchResponse
from kraft.core.replica import Replica
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset
from kraft.storage.log_adapter import BatchReader

T = 1000  # quorum.election.timeout.ms
F = 2000  # quorum.fetch.timeout.ms
DRAWN = 3  # the voter whose generator draws an end of every range


class Ends(random.Random):
    """A generator whose randrange(n) is always n - 1 (`top`) or always 0."""

    def __init__(self, top: bool) -> None:
        super().__init__(0)
        self.top = top

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:  # type: ignore[override]
        assert stop is None and step == 1 and start > 0, "the core draws randrange(n), n > 0"
        return start - 1 if self.top else 0


class DrawnCluster(Cluster):
    """Three voters; DRAWN draws from `Ends`. Remembers when each node changed state and
    when DRAWN last had a successful Fetch answer from the leader of its epoch."""

    def __init__(self, top: bool) -> None:
        self.ends = Ends(top)
        self.changes: dict[int, list[tuple[int, ReplicaState]]] = {}
        self.heard = -1
        super().__init__(3, seed=2, election_timeout_ms=T, fetch_timeout_ms=F)

    def start(self, i: int) -> None:
        n = self.nodes[i]
        n.alive = True
        seeded = random.Random(self.rng.random())
        n.replica = Replica(
            n.config,
            election_state=n.stored,
            log_state=self.boot_state(n),
            reader=BatchReader(n.log),
            rng=self.ends if i == DRAWN else seeded,
            now_ms=self.now,
            snapshots=n.snaps,
        )
        self.apply(i, n.replica.start(), None)

    def step(self, i: int, ev: Event) -> list[Effect]:
        before = self.nodes[i].replica
        view = before.view() if before is not None else None
        out = super().step(i, ev)
        for e in out:
            if isinstance(e, StateChanged):
                self.changes.setdefault(i, []).append((self.now, e.new))
        if (
            i == DRAWN
            and view is not None
            and view.state is ReplicaState.FOLLOWER
            and isinstance(ev, Receive)
            and isinstance(ev.message, FetchResponse)
            and ev.src == view.leader_id
            and ev.message.leader_epoch == view.epoch
            and ev.message.error is ErrorCode.NONE
        ):
            self.heard = self.now
        return out

    def stood_at(self, since: int) -> int:
        """When DRAWN first changed state after `since`, to stand (not to follow)."""
        t, new = next((t, s) for t, s in self.changes.get(DRAWN, []) if t > since)
        assert new in (ReplicaState.PROSPECTIVE, ReplicaState.CANDIDATE), new
        return t


def _following(top: bool) -> tuple[DrawnCluster, int]:
    """DRAWN follows a leader of the others (drawing the top of every range, it stands last
    in the first election); then it draws from the chosen end. The leader's id."""
    c = DrawnCluster(top=True)
    c.run_until(
        lambda: (
            (ld := c.leader()) is not None
            and ld != DRAWN
            and all(c.view(i).leader_id == ld for i in c.nodes)
        )
    )
    leader = c.leader()
    assert leader is not None
    c.ends.top = top
    c.run(c.now + F)  # DRAWN's fetch timer now comes from the chosen end
    assert c.view(DRAWN).state is ReplicaState.FOLLOWER and c.heard > c.now - F
    return c, leader


def _crash_quietly(c: DrawnCluster, leader: int) -> int:
    """Crash the leader and deliver what it had already sent; the time after that."""
    c.crash(leader)
    c.run(c.now + 5)
    assert c.view(DRAWN).state is ReplicaState.FOLLOWER
    return c.now


def test_an_election_timeout_ends_at_twice_the_timeout_less_one_or_at_the_timeout() -> None:
    """Alone (the other voters down from the start), DRAWN stands at T + draw."""
    for top, want in ((True, 2 * T - 1), (False, T)):
        c = DrawnCluster(top)
        for other in c.nodes:
            if other != DRAWN:
                c.crash(other)
        c.run(3 * T)
        assert c.stood_at(0) == want, (top, c.changes.get(DRAWN))


def test_a_fetch_timeout_ends_at_the_fetch_timeout_plus_half_an_election_timeout_less_one() -> None:
    for top, jitter in ((True, T // 2 - 1), (False, 0)):
        c, leader = _following(top)
        since = _crash_quietly(c, leader)
        heard = c.heard
        c.run(since + F + T)
        assert c.stood_at(since) == heard + F + jitter, (top, heard, c.changes.get(DRAWN))


def test_a_broken_connection_to_the_leader_ends_the_fetch_timer_within_a_quarter_timeout() -> None:
    """Top: T/4 - 1 after the failure; bottom: at once (the next timer check, same ms)."""
    for top, delay in ((True, T // 4 - 1), (False, 0)):
        c, leader = _following(top)
        t0 = _crash_quietly(c, leader)
        epoch = c.view(DRAWN).epoch
        fetch = FetchRequest(CLUSTER, key(DRAWN), Epoch(epoch), Offset(0), Epoch(0), Offset(0))
        c.step(DRAWN, SendFailed(t0, NodeId(leader), fetch, broken=True))
        c.run(t0 + T)
        assert c.stood_at(t0 - 1) == t0 + delay, (top, t0, c.changes.get(DRAWN))
