"""Scenario tests: several Replicas driven together by the tiny in-memory loop."""

from __future__ import annotations

import pytest
from memory_logs import entries, values
from scenario_harness import Cluster

from kraft.core.effects import TruncateLog
from kraft.core.events import Tick
from kraft.core.messages import BeginQuorumEpochRequest, VoteRequest
from kraft.core.replica import Replica
from kraft.core.vocabulary import ReplicaState

S = ReplicaState


def leaders_by_epoch(c: Cluster) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for i, n in c.nodes.items():
        for state, epoch in n.states:
            if state is S.LEADER:
                out.setdefault(epoch, set()).add(i)
    return out


def assert_election_safety(c: Cluster) -> None:
    """ElectionSafety: at most one leader per epoch."""
    for epoch, who in leaders_by_epoch(c).items():
        assert len(who) == 1, (epoch, who)


def assert_committed_prefixes_match(c: Cluster) -> None:
    """Every replica's log agrees with the leader's up to its own high watermark."""
    lead = c.leader()
    assert lead is not None
    ref = entries(c.nodes[lead].log)
    for n in c.nodes.values():
        hwm = n.hwm_history[-1] if n.hwm_history else 0
        assert entries(n.log)[:hwm] == ref[:hwm]


def elect(c: Cluster, skip: tuple[int, ...] = ()) -> int:
    c.run_until(
        lambda: (
            c.leader() is not None
            and all(
                c.view(i).leader_id == c.leader()
                for i in c.nodes
                if c.nodes[i].alive and i not in skip
            )
        )
    )
    lead = c.leader()
    assert lead is not None
    return lead


def test_split_vote_then_a_later_epoch_elects_one_leader() -> None:
    """ "with an even number of voters active, it is possible that a vote ends up split"; the
    candidates time out, go back to pre-voting (Prospective) and a later epoch elects a single
    leader. Both win their pre-votes at the same moment (a Prospective grants a pre-vote), so
    both stand in epoch 1, where candidates refuse each other."""
    slow = {"election_timeout_ms": 5000}
    c = Cluster(4, seed=3, overrides={3: slow, 4: slow})
    # 3 only hears 1 and 4 only hears 2: each candidate gets two of four votes.
    c.partition(1, 4)
    c.partition(2, 3)
    c.now = 1999
    for i in (1, 2):
        c.step(i, Tick(c.now))
    assert {c.view(i).state for i in (1, 2)} == {S.PROSPECTIVE}
    c.run(c.now + 50)
    assert {(c.view(i).state, c.view(i).epoch) for i in (1, 2)} == {(S.CANDIDATE, 1)}
    assert c.view(3).voted_for is not None and c.view(3).voted_for.id == 1
    assert c.view(4).voted_for is not None and c.view(4).voted_for.id == 2
    assert c.leaders() == []
    c.heal()
    lead = elect(c)
    assert c.view(lead).epoch >= 2
    assert 1 not in leaders_by_epoch(c)
    assert_election_safety(c)


def test_zombie_leader_cannot_advance_its_high_watermark() -> None:
    c = Cluster(3, seed=1)
    old = elect(c)
    c.append(old, b"committed")
    c.run(c.now + 100)
    hwm_before = c.view(old).high_watermark
    assert hwm_before is not None and hwm_before >= 2
    old_epoch = c.view(old).epoch
    c.isolate(old)
    c.append(old, b"zombie-1")
    c.append(old, b"zombie-2")
    c.run(c.now + 2900)
    # Within the check-quorum timeout (1.5 fetch timeouts) the zombie still thinks it leads.
    assert c.view(old).state is S.LEADER
    c.run(c.now + 2100)
    # The others elected a new leader; the zombie resigned, no Fetch from a majority
    # (Kafka's check-quorum), and never advanced its HWM.
    assert (S.RESIGNED, old_epoch) in c.nodes[old].states
    assert c.view(old).state is not S.LEADER
    new = next(i for i in c.leaders() if i != old)
    assert c.view(new).epoch > old_epoch
    assert c.view(old).high_watermark == hwm_before
    assert c.view(old).end_offset == hwm_before + 2
    c.append(new, b"real")
    c.heal()
    c.run_until(
        lambda: c.view(old).state is S.FOLLOWER and c.view(old).end_offset == c.view(new).end_offset
    )
    c.run(c.now + 100)
    assert values(c.nodes[old].log) == [b"committed", b"real"]
    assert_election_safety(c)
    assert_committed_prefixes_match(c)


def test_divergence_and_truncation_after_a_leader_change() -> None:
    """ "following a leader election, a follower may need to truncate some of the uncommitted
    entries from its log\""""
    c = Cluster(5, seed=2)
    old = elect(c)
    c.append(old, b"base")
    c.run(c.now + 100)
    buddy = next(i for i in c.nodes if i != old)
    majority = [i for i in c.nodes if i not in (old, buddy)]
    for a in (old, buddy):
        for b in majority:
            c.partition(a, b)
    c.append(old, b"lost-1")
    c.append(old, b"lost-2")
    c.run(c.now + 100)
    assert values(c.nodes[buddy].log)[-2:] == [b"lost-1", b"lost-2"]  # replicated, uncommitted
    c.run_until(lambda: any(i in majority for i in c.leaders()))
    new = next(i for i in c.leaders() if i in majority)
    c.append(new, b"kept-1")
    c.append(new, b"kept-2")
    c.append(new, b"kept-3")
    c.heal()
    truncations: list[int] = []
    orig_apply = c.apply

    def spy(i, effects, answering):  # type: ignore[no-untyped-def]
        truncations.extend(i for e in effects if isinstance(e, TruncateLog))
        orig_apply(i, effects, answering)

    c.apply = spy  # type: ignore[method-assign]
    c.run_until(
        lambda: all(
            c.view(i).end_offset == c.view(new).end_offset and c.view(i).leader_id == new
            for i in c.nodes
        )
    )
    assert buddy in truncations and old in truncations
    for i in c.nodes:
        assert values(c.nodes[i].log) == [b"base", b"kept-1", b"kept-2", b"kept-3"], i
    assert_election_safety(c)


def test_leader_restart_comes_back_resigned_then_follows() -> None:
    c = Cluster(3, seed=4)
    old = elect(c)
    epoch = c.view(old).epoch
    c.append(old, b"x")
    c.run(c.now + 100)
    c.crash(old)
    c.run_until(lambda: c.leader() is not None)
    new = c.leader()
    assert new != old and c.view(new).epoch > epoch
    c.start(old)
    assert (c.view(old).state, c.view(old).epoch) == (S.RESIGNED, epoch)
    c.run_until(lambda: c.view(old).state is S.FOLLOWER, limit=5000)
    assert c.view(old).leader_id == new
    # learned from the new leader's BeginQuorumEpoch (resent until endorsed) or a Vote
    assert any(
        isinstance(m, BeginQuorumEpochRequest | VoteRequest) and d == old for _, d, m in c.delivered
    )
    assert_election_safety(c)


def test_graceful_resignation_elects_first_successor_without_timeout() -> None:
    """ "The EndQuorumEpoch API is used by a leader to gracefully step down so that an election
    can be held immediately without waiting for the election timeout.\""""
    c = Cluster(3, seed=5, election_timeout_ms=1000, fetch_timeout_ms=2000)
    old = elect(c)
    c.append(old, b"a")
    c.run(c.now + 100)
    t0 = c.now
    c.shutdown(old)
    c.run_until(lambda: c.nodes[old].shutdown_complete, limit=3000)
    c.crash(old)
    c.run_until(lambda: c.leader() is not None, limit=5000)
    new = c.leader()
    assert new != old
    assert c.now - t0 < 200  # far below the election (1000) and fetch (2000) timeouts
    assert values(c.nodes[new].log) == [b"a"]
    assert_election_safety(c)


def test_observer_catches_up() -> None:
    c = Cluster(3, 1, seed=6, fetch_max_bytes=300)
    observer = 4
    c.isolate(observer)
    lead = elect(c, skip=(observer,))
    for k in range(30):
        c.append(lead, f"v{k}".encode() * 5)
        c.run(c.now + 5)
    c.run(c.now + 100)
    assert c.view(observer).end_offset == 0
    c.heal()
    c.run_until(
        lambda: (
            c.view(observer).end_offset == c.view(lead).end_offset
            and c.view(observer).high_watermark == c.view(lead).high_watermark
        )
    )
    assert c.view(observer).state is S.FOLLOWER and not c.view(observer).is_voter
    assert values(c.nodes[observer].log) == values(c.nodes[lead].log)
    assert len(values(c.nodes[observer].log)) == 30
    # it never took part in an election
    assert {s for s, _ in c.nodes[observer].states} <= {S.UNATTACHED, S.FOLLOWER}
    assert_committed_prefixes_match(c)


def rejoin_after_partition(seed: int = 7) -> tuple[Cluster, int, int, int]:
    """A 3-voter cluster elects a leader; one follower is cut off for 20 s (ten election
    timeouts), then rejoins. Returns (cluster, leader, its epoch, the cut-off voter)."""
    c = Cluster(3, seed=seed, election_timeout_ms=1000, fetch_timeout_ms=2000)
    lead = elect(c)
    epoch = c.view(lead).epoch
    c.append(lead, b"before")
    c.run(c.now + 100)
    away = next(i for i in c.nodes if i != lead)
    c.isolate(away)
    c.run(c.now + 20_000)
    c.heal()
    c.run(c.now + 5_000)
    return c, lead, epoch, away


def test_a_rejoining_voter_does_not_disrupt_the_leader() -> None:
    """KIP-996: the cut-off voter times out and asks for pre-votes, which it never wins (no
    one hears it, then the others have a leader they fetch from), so it never bumps the epoch;
    back in touch, it follows the same leader in the same epoch."""
    c, lead, epoch, away = rejoin_after_partition()
    assert c.leaders() == [lead]
    assert c.view(lead).epoch == epoch
    assert {s for s, _ in c.nodes[away].states} >= {S.PROSPECTIVE}
    assert max(e for _, e in c.nodes[away].states) == epoch
    assert (c.view(away).state, c.view(away).leader_id) == (S.FOLLOWER, lead)
    c.append(lead, b"after")
    c.run(c.now + 200)
    assert values(c.nodes[away].log) == [b"before", b"after"]
    assert_election_safety(c)


def test_without_pre_vote_a_rejoining_voter_disrupts_the_leader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same run with pre-vote switched off (test-only): the cut-off voter stands again
    and again, and its larger epoch deposes the leader when it rejoins. This is what the test
    above guards against."""
    monkeypatch.setattr(Replica, "pre_vote_enabled", False)
    c, lead, epoch, away = rejoin_after_partition()
    assert max(e for _, e in c.nodes[away].states) > epoch + 3
    assert all(c.view(i).epoch > epoch for i in c.nodes)
    assert (S.LEADER, epoch) in c.nodes[lead].states
    assert c.view(lead).state is not S.LEADER or c.view(lead).epoch != epoch
    assert_election_safety(c)
