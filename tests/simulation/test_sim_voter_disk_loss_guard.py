"""The simulator's voter disk loss (refinement.sim_reconfig) strikes only where the quorum can
still elect a leader without the lost identity: in every voter set in play (the committed one
and any later one a log states, committed or not), three voters or more, none lost already,
and a majority besides the victim that count themselves voters. Each seed below once drew a
loss outside those bounds and failed EventuallyLeaderElected; no leader could be elected in
Kafka 4.3.1 either, so these schedules are the simulator's, not the core's."""

from __future__ import annotations

import pytest

from kraft.ids import ReplicaKey
from refinement.faults import PROFILES
from refinement.sim import SimConfig, Simulator
from refinement.sim_base import _Node


@pytest.mark.parametrize(
    ("seed", "why"),
    [
        # The leader of {1, 2} appended {1, 2, 3} (an AddRaftVoter answered when appended,
        # so no longer the operator's) while cut off, then lost its disk: the latest set of
        # the most advanced log had three voters, the committed one two.
        (85, "uncommitted"),
        # The leader of {1, 2, 5} lost its disk right after the record adding 5 committed
        # through 1; 5, still short of it, took itself for an observer following the gone
        # leader and refused every pre-vote.
        (74, "unaware"),
    ],
)
def test_a_voter_loses_its_disk_only_where_a_leader_can_still_be_elected(
    seed: int, why: str
) -> None:
    sim = Simulator(SimConfig(seed=seed, profile=PROFILES["mixed+reconfig"]))
    struck: list[tuple[int, list[tuple[int, ...]], dict[ReplicaKey, bool]]] = []
    lose_disk = sim._lose_disk

    def recording(node: _Node) -> None:
        # Before the loss: every set in play, and whether each voter counts itself one.
        sets = sim._voter_sets_in_play()
        aware = {
            k: sim._nodes[k.id].key == k and sim._nodes[k.id].voter_hist[-1][1].contains(k)
            for v in sets
            for k in v.voters
        }
        struck.append((node.id, [v.ids for v in sets], aware))
        lose_disk(node)

    sim._lose_disk = recording  # type: ignore[method-assign]
    r = sim.run()
    assert r.ok, f"{why}: {r.summary()}"
    for victim, sets, aware in struck:
        assert all(len(ids) >= 3 for ids in sets), (victim, sets)
        for ids in sets:
            others = [k for k, a in aware.items() if a and k.id in ids and k.id != victim]
            assert 2 * len(others) > len(ids), (victim, ids, aware)
