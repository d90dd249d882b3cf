"""Voter changes in the simulator (KIP-853/856): the `+reconfig` profiles bootstrap a dynamic
quorum, an operator adds and removes voters (the leader too) under faults, voters lose their
disks and come back as other replicas, and the reconfiguration checkers
(refinement.invariants_reconfig) hold on the core. The seed sweep over every reconfiguration
profile is slow (make check-deep)."""

from __future__ import annotations

import io
import json

import pytest

from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_set import VoterSet
from kraft.ids import Epoch, NodeId, Offset, ReplicaKey
from refinement import invariants as inv
from refinement import invariants_reconfig as recon
from refinement.faults import BASE_PROFILES, PROFILES, RECONFIG_PROFILES
from refinement.invariants import ClusterState, NodeState
from refinement.pipeline.campaign import PROFILE_ORDER
from refinement.sim import SimConfig, Simulator, simulate
from refinement.sim_base import directory_of
from refinement.traces.conformance import reconfig_conformance_profiles


def _campaign_choices() -> list[str]:
    import argparse

    from refinement.pipeline.campaign import add_arguments

    p = argparse.ArgumentParser()
    add_arguments(p)
    action = next(a for a in p._actions if a.dest == "profile")
    return list(action.choices or ())


def test_every_base_profile_has_a_reconfig_variant_and_only_those_are_dynamic() -> None:
    # ... and mixed+snapshots+reconfig (tests/simulation/test_sim_reconfig_snapshots.py) and
    # solo+lossy+reconfig (a quorum grown from one voter: CheckQuorumNotEarly).
    extra = {"mixed+snapshots+reconfig", "solo+lossy+reconfig"}
    assert set(RECONFIG_PROFILES) == {f"{b.name}+reconfig" for b in BASE_PROFILES} | extra
    assert not any(PROFILES[b.name].dynamic for b in BASE_PROFILES)
    assert PROFILES["crashes+reconfig"].voter_disk_loss_rate > 0
    assert PROFILES["lossy+reconfig"].voter_disk_loss_rate == 0  # no node faults there
    # `kraft campaign --profile NAME+reconfig`; "all" has those whose traces TraceKRaft validates
    assert set(RECONFIG_PROFILES) & set(PROFILE_ORDER) == set(reconfig_conformance_profiles())
    assert set(RECONFIG_PROFILES) <= set(_campaign_choices())


def test_the_cluster_is_bootstrapped_dynamic_and_spares_start_as_observers() -> None:
    # No liveness phase: it ends with one more voter change, which may add a spare.
    config = SimConfig(
        seed=0, profile=PROFILES["none+reconfig"], max_events=40, check_liveness=False
    )
    sim = Simulator(config)
    sim.run()
    first = [n.voter_hist[0] for n in sim._nodes.values()]
    assert all(o == -1 and v.ids == first[0][1].ids for o, v in first)
    assert sorted(first[0][1].ids) == [1, 2, 3]
    spares = [n for n in sim._nodes.values() if n.id > 3]
    assert len(spares) == 2
    for n in spares:
        assert n.replica is not None
        believed: tuple[NodeId, ...] = n.replica.view().voters  # type: ignore[attr-defined]
        assert n.id not in believed


def test_the_operator_adds_and_removes_voters_and_traces_carry_the_actions() -> None:
    out = io.StringIO()
    r = simulate(SimConfig(seed=0, profile=PROFILES["none+reconfig"]), trace=out)
    assert r.ok, r.summary()
    assert r.voters_added > 0 and r.voters_removed > 0 and r.changes_acked > 0
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    actions = [a for line in lines for a in line["actions"]]
    assert actions.count("AddVoter") == r.voters_added
    assert actions.count("RemoveVoter") == r.voters_removed
    # A voter change's line names the voter it added or removed; no other line has `voter`.
    changes = [ln for ln in lines if {"AddVoter", "RemoveVoter"} & set(ln["actions"])]
    assert all(isinstance(ln.get("voter"), int) for ln in changes)
    assert sum("voter" in ln for ln in lines) == len(changes)
    removals = [ln for ln in changes if (ln["message"] or {}).get("type") == "RemoveVoterRequest"]
    assert removals and all(ln["voter"] == ln["message"]["voter"] for ln in removals)


def test_a_voter_that_lost_its_disk_returns_with_a_new_directory_id() -> None:
    profile = PROFILES["shutdowns+reconfig"]
    for seed in range(40):
        sim = Simulator(SimConfig(seed=seed, profile=profile))
        r = sim.run()
        assert r.ok, r.summary()
        wiped = [n for n in sim._nodes.values() if n.wiped]
        if r.voter_disk_losses:
            assert wiped
            for n in wiped:
                assert n.key == ReplicaKey(n.id, directory_of(n.id, n.wiped))
                assert n.key != ReplicaKey(n.id, directory_of(n.id))
            return
    pytest.fail("no voter lost its disk on seeds 0-39")


# --------------------------------------------------------------------------- the checkers


def _keys(*ids: int) -> tuple[ReplicaKey, ...]:
    return tuple(ReplicaKey(NodeId(i), directory_of(NodeId(i))) for i in ids)


def _node(
    nid: int,
    *,
    state: ReplicaState | None = ReplicaState.FOLLOWER,
    end: int = 10,
    hwm: int | None = None,
    history: tuple[tuple[int, tuple[int, ...]], ...] = ((-1, (1, 2, 3)),),
) -> NodeState:
    return NodeState(
        node_id=NodeId(nid),
        incarnation=0,
        state=state,
        epoch=Epoch(1),
        leader_id=NodeId(1),
        end_offset=Offset(end),
        last_epoch=Epoch(1),
        high_watermark=None if hwm is None else Offset(hwm),
        max_high_watermark=None if hwm is None else Offset(hwm),
        log_end_offset=Offset(end),
        log_last_epoch=Epoch(1),
        flushed_offset=Offset(end),
        epochs=((Epoch(1), Offset(0)),),
        key=_keys(nid)[0],
        voter_history=tuple((Offset(o), VoterSet(_keys(*ids))) for o, ids in history),
    )


def test_at_most_one_uncommitted_voter_change_counts_records_past_the_committed_history() -> None:
    two = ((-1, (1, 2, 3)), (5, (1, 2)), (7, (1,)))
    nodes = {NodeId(1): _node(1, history=two)}
    committed = (((Epoch(1), Offset(0)),), Offset(6))
    ok = ClusterState(nodes, frozenset(), committed=committed)
    assert recon.at_most_one_uncommitted_voter_change(ok) is None
    early = ClusterState(nodes, frozenset(), committed=(committed[0], Offset(5)))
    found = recon.at_most_one_uncommitted_voter_change(early)
    assert found is not None and found.name == recon.AT_MOST_ONE_UNCOMMITTED_VOTER_CHANGE


def test_a_removed_leader_is_not_a_holder_of_its_hwm() -> None:
    removed = ((-1, (1, 2, 3)), (8, (2, 3)))
    leader = _node(1, state=ReplicaState.LEADER, end=10, hwm=10, history=removed)
    behind = {NodeId(2): _node(2, end=10), NodeId(3): _node(3, end=4)}
    found = recon.majority_reached_high_watermark(
        ClusterState({NodeId(1): leader, **behind}, frozenset())
    )
    assert found is not None and found.name == inv.MAJORITY_REACHED_HIGH_WATERMARK
    both = {NodeId(2): _node(2, end=10), NodeId(3): _node(3, end=10)}
    assert (
        recon.majority_reached_high_watermark(
            ClusterState({NodeId(1): leader, **both}, frozenset())
        )
        is None
    )


def test_a_replica_whose_voter_set_is_not_its_logs_breaks_voter_set_matches_log() -> None:
    node = _node(2, history=((-1, (1, 2, 3)), (4, (1, 2))))
    assert recon.voter_set_matches_log(node, (NodeId(1), NodeId(2))) is None
    found = recon.voter_set_matches_log(node, (NodeId(1), NodeId(2), NodeId(3)))
    assert found is not None and found.name == recon.VOTER_SET_MATCHES_LOG


# --------------------------------------------------------------------------- found by sweeps


@pytest.mark.parametrize(
    ("seed", "profile"),
    [
        # The liveness phase decided old-epoch appends before a current-epoch one was
        # acknowledged; a lagging live replica then decided one itself ("decided twice").
        (139, "lossy+reconfig"),
        # A voter change the operator sent before the faults stopped was appended just before
        # the probe committed: the phase must wait for it (ReconfigEventuallyCompletes).
        (184, "mixed+reconfig"),
    ],
)
def test_seeds_the_liveness_phase_once_judged_wrongly_pass(seed: int, profile: str) -> None:
    r = simulate(SimConfig(seed=seed, profile=PROFILES[profile]))
    assert r.ok, r.summary()
    assert r.voters_added + r.voters_removed > 0


# --------------------------------------------------------------------------- the sweep


@pytest.mark.slow
@pytest.mark.parametrize("profile", RECONFIG_PROFILES)
def test_the_core_holds_every_checker_on_30_seeds_of_each_reconfig_profile(profile: str) -> None:
    for seed in range(30):
        r = simulate(SimConfig(seed=seed, profile=PROFILES[profile]))
        assert r.ok, r.summary()
