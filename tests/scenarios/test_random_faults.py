"""Random partitions, crashes, restarts and resignations over a few seeds, checking
ElectionSafety, that committed offsets never change epoch, and eventual leadership."""

from __future__ import annotations

import random

import pytest
from memory_logs import entries
from scenario_harness import Cluster

from kraft.core.vocabulary import ReplicaState

S = ReplicaState


def run(seed: int) -> int:
    rnd = random.Random(seed)
    c = Cluster(
        rnd.choice([1, 2, 3, 5]), rnd.choice([0, 1]), seed=seed, latency_ms=rnd.choice([1, 3, 10])
    )
    committed: dict[int, int] = {}
    ids = list(c.nodes)
    k = 0
    for _ in range(120):
        c.run(c.now + rnd.randint(1, 200))
        r = rnd.random()
        if r < 0.05 and len(ids) > 1:
            a, b = rnd.sample(ids, 2)
            c.partition(a, b)
        elif r < 0.10:
            c.heal()
        elif r < 0.13:
            i = rnd.choice(ids)
            if c.nodes[i].alive:
                c.crash(i)
        elif r < 0.20:
            for i in ids:
                if not c.nodes[i].alive:
                    c.start(i)
        elif r < 0.22:
            i = rnd.choice(ids)
            if c.nodes[i].alive:
                c.shutdown(i)
        else:
            for lead in c.leaders():
                k += 1
                c.append(lead, f"v{k}".encode())
        leaders: dict[int, set[int]] = {}
        for i, n in c.nodes.items():
            for state, epoch in n.states:
                if state is S.LEADER:
                    leaders.setdefault(epoch, set()).add(i)
        assert all(len(w) == 1 for w in leaders.values()), leaders
        for i, n in c.nodes.items():
            if not n.alive or n.replica is None:
                continue
            v = n.replica.view()
            assert v.end_offset == n.log.end_offset, i
            hwm = v.high_watermark or 0
            assert hwm <= v.end_offset
            logged = entries(n.log)
            for offset in range(hwm):
                assert committed.setdefault(offset, logged[offset][1]) == logged[offset][1]
    # Heal, restart everyone (a fresh process after a shutdown): a leader emerges.
    c.heal()
    for i in ids:
        if c.nodes[i].shutdown_complete or not c.nodes[i].alive:
            c.crash(i)
            c.nodes[i].shutdown_complete = False
            c.start(i)
    c.run(c.now + 20_000)
    assert c.leader() is not None
    return len(committed)


@pytest.mark.parametrize("seed", range(12))
def test_random_faults_keep_safety_and_elect_again(seed: int) -> None:
    run(seed)
