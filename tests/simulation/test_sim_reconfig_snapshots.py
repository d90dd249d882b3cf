"""Snapshots together with voter changes (KIP-630 + KIP-853): the mixed+snapshots+reconfig
profile, whose operator also sends UpdateRaftVoter and malformed voter changes it knows the
answer to (refinement.sim_reconfig, refinement.invariants_voter_changes).

- A snapshot carries the Voters record voters_record_at gives (the node's snapshotter's call),
  which SnapshotVotersMatchLog checks against the voter set the log states at its end; a
  replica that installs one takes its voter set from it, as the node's driver does. Before,
  the simulator's snapshots carried no Voters record, so an installing replica fell back to
  the static voters and VoterSetMatchesLog fired on the unmutated core.
- Every one-shot request is answered once, with the error Kafka's checks give; a successful
  UpdateRaftVoter changes exactly that voter's endpoints (UpdateVoterApplied).
- Every control record a leader writes has Kafka's versions (ControlRecordsInKafkaFormat).
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
from collections import Counter

import pytest

from kraft.control_records import Endpoint, VoterEntry, VotersRecord, encode_control_records
from kraft.core.messages import UpdateVoterRequest
from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_records import voter_set_of
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey
from kraft.storage.memory_snapshots import snapshot_problem
from refinement import invariants_voter_changes as vc
from refinement.faults import PROFILES
from refinement.sim import SimConfig, SimResult, simulate
from refinement.sim_base import directory_of
from refinement.sim_reconfig import LISTENER
from refinement.sim_snapshots import encode_history, snapshot_voters

PROFILE = "mixed+snapshots+reconfig"


@functools.cache
def run(seed: int) -> tuple[SimResult, tuple[str, ...]]:
    out = io.StringIO()
    r = simulate(SimConfig(seed=seed, profile=PROFILES[PROFILE]), trace=out)
    return r, tuple(out.getvalue().splitlines())


def test_the_profile_combines_snapshots_voter_changes_and_one_shots() -> None:
    p = PROFILES[PROFILE]
    assert p.snapshots and p.dynamic and p.update_voter_rate > 0
    assert p.producers == 0  # a snapshot cuts the producer table a replica rebuilds


@pytest.mark.parametrize("seed", range(6))
def test_seeds_hold_every_checker(seed: int) -> None:
    r, _ = run(seed)
    assert r.ok, r.summary()


def test_the_seeds_install_snapshots_change_voters_and_answer_one_shots() -> None:
    answers: Counter[str] = Counter()
    installed = changes = 0
    for seed in range(6):
        r, lines = run(seed)
        installed += r.snapshots_installed
        changes += r.voters_added + r.voters_removed
        for line in lines:
            e = json.loads(line)
            m = e.get("message") or {}
            if e["action"] == "OperatorAnswered" and m.get("type") == "UpdateVoterResponse":
                answers[str(m["error"])] += 1
    assert installed > 0 and changes > 0
    # NONE, INVALID_REQUEST (42), NOT_LEADER_OR_FOLLOWER (6) at least.
    assert {"0", "42", "6"} <= set(answers), answers


def _record(*ids: int, port: int = 9093) -> VotersRecord:
    return VotersRecord(
        0,
        tuple(
            VoterEntry(i, directory_of(NodeId(i)), (Endpoint(LISTENER, f"node-{i}", port),), 0, 1)
            for i in ids
        ),
    )


def _history(*sets: tuple[int, VotersRecord]) -> vc.VoterHistory:
    return tuple((Offset(o), voter_set_of(r)) for o, r in sets)


def test_a_snapshot_carries_the_voter_set_in_force_before_its_end() -> None:
    """SnapshotVotersMatchLog: with a Voters record at 5, a snapshot ending at 5 holds the
    set before it (the record at 5 is not in it), one ending at 6 the new one."""
    old, new = _record(1, 2, 3), _record(1, 2)
    history = _history((-1, old), (5, new))
    node = NodeId(1)
    assert vc.snapshot_voters_match_log(node, Offset(5), old, history) is None
    assert vc.snapshot_voters_match_log(node, Offset(6), new, history) is None
    found = vc.snapshot_voters_match_log(node, Offset(5), new, history)
    assert found is not None and found.name == vc.SNAPSHOT_VOTERS_MATCH_LOG
    assert vc.snapshot_voters_match_log(node, Offset(4), new, history) is not None


def test_control_records_of_another_version_are_not_kafkas() -> None:
    """ControlRecordsInKafkaFormat: Kafka 4 reads VotersRecord version 0 only."""
    good = encode_control_records(7, 1, [_record(1, 2)], timestamp_ms=0)
    bad = encode_control_records(7, 1, [VotersRecord(1, _record(1, 2).voters)], timestamp_ms=0)
    assert vc.control_records_in_kafka_format(NodeId(1), good) is None
    found = vc.control_records_in_kafka_format(NodeId(1), bad)
    assert found is not None and found.name == vc.CONTROL_RECORDS_IN_KAFKA_FORMAT


def _leader(history: vc.VoterHistory, *, pending: bool = False) -> vc.Receiver:
    return vc.Receiver(
        node=NodeId(1),
        state=ReplicaState.LEADER,
        epoch=Epoch(2),
        shutting_down=False,
        cluster_id=ClusterId("c"),
        listener=LISTENER,
        history=history,
        hwm=Offset(20),
        epoch_start=Offset(10),
        pending=pending,
        maybe_pending=pending,
    )


def test_one_shot_update_voter_answers() -> None:
    """VoterChangeAnswered and UpdateVoterApplied on UpdateRaftVoter: malformed is
    INVALID_REQUEST even while a change is pending; one answer, exactly; NONE appends one
    Voters record with that voter's new endpoints, the others' unchanged."""
    rec = _record(1, 2, 3)
    history = _history((-1, rec), (5, rec))
    r = _leader(history)
    key = ReplicaKey(NodeId(2), directory_of(NodeId(2)))
    eps = (Endpoint(LISTENER, "node-2", 9999),)
    upd = UpdateVoterRequest(ClusterId("c"), Epoch(2), key, eps, 0, 1)
    updated = VotersRecord(
        0,
        tuple(
            VoterEntry(v.voter_id, v.voter_directory_id, eps, 0, 1) if v.voter_id == 2 else v
            for v in rec.voters
        ),
    )
    after = (*history, (Offset(20), voter_set_of(updated)))
    assert vc.one_shot_answered(upd, r, [ErrorCode.NONE], after) is None
    assert vc.one_shot_answered(upd, r, [], history) is not None  # no answer
    everyone = VotersRecord(0, tuple(VoterEntry(v.voter_id, v.voter_directory_id, eps, 0, 1)
                                     for v in rec.voters))  # fmt: skip
    wrong = (*history, (Offset(20), voter_set_of(everyone)))
    found = vc.one_shot_answered(upd, r, [ErrorCode.NONE], wrong)
    assert found is not None and found.name == vc.UPDATE_VOTER_APPLIED
    backwards = UpdateVoterRequest(ClusterId("c"), Epoch(2), key, eps, 1, 0)
    busy = _leader(history, pending=True)
    assert vc.one_shot_answered(backwards, busy, [ErrorCode.INVALID_REQUEST], history) is None
    assert vc.one_shot_answered(backwards, busy, [ErrorCode.REQUEST_TIMED_OUT], history)
    no_listener = UpdateVoterRequest(None, Epoch(2), key, (Endpoint("X", "h", 1),), 0, 1)
    assert vc.one_shot_answered(no_listener, r, [ErrorCode.NONE], after) is not None


def test_snapshot_voters_round_trip() -> None:
    rec = _record(1, 2)
    data = encode_history(OffsetAndEpoch(Epoch(3), Offset(9)), ((Epoch(3), Offset(0)),), 10, rec)
    assert snapshot_voters(data) == rec
    assert snapshot_problem(OffsetAndEpoch(Epoch(3), Offset(9)), data) is None
    assert snapshot_voters(encode_history(OffsetAndEpoch(Epoch(3), Offset(9)), ())) is None


def test_update_voter_answers_name_the_leader_the_replica_knows() -> None:
    """UpdateVoterLeaderHint: Kafka's quorum.leaderAndEpoch() of the answering replica."""
    history = _history((-1, _record(1, 2, 3)))
    key = ReplicaKey(NodeId(2), directory_of(NodeId(2)))
    upd = UpdateVoterRequest(None, Epoch(2), key, (Endpoint(LISTENER, "h", 1),), 0, 1)
    leader = dataclasses.replace(_leader(history), leader=NodeId(1))
    follower = dataclasses.replace(leader, state=ReplicaState.FOLLOWER, leader=NodeId(3))
    unattached = dataclasses.replace(leader, state=ReplicaState.UNATTACHED, leader=None)
    assert vc.update_voter_leader_hint(upd, leader, NodeId(1), Epoch(2)) is None
    assert vc.update_voter_leader_hint(upd, follower, NodeId(3), Epoch(2)) is None
    assert vc.update_voter_leader_hint(upd, unattached, NodeId(-1), Epoch(2)) is None
    for r, leader_id, epoch in ((follower, 1, 2), (unattached, 1, 2), (leader, 1, 1)):
        found = vc.update_voter_leader_hint(upd, r, NodeId(leader_id), Epoch(epoch))
        assert found is not None and found.name == vc.UPDATE_VOTER_LEADER_HINT


def test_a_static_leader_answers_update_voter_as_kafka_does() -> None:
    """kraft.version 0: the range must hold 0, the id must be a voter's; nothing is written."""
    static = dataclasses.replace(
        _leader(()), kraft_version=0, voter_ids=frozenset({NodeId(1), NodeId(2), NodeId(3)})
    )
    eps = (Endpoint(LISTENER, "h", 1),)
    key = ReplicaKey(NodeId(2), directory_of(NodeId(2)))
    stranger = ReplicaKey(NodeId(7), directory_of(NodeId(7)))
    cases = [
        (UpdateVoterRequest(None, Epoch(2), key, eps, 0, 1), ErrorCode.NONE),
        (UpdateVoterRequest(None, Epoch(2), key, eps, 1, 1), ErrorCode.INVALID_REQUEST),
        (UpdateVoterRequest(None, Epoch(2), stranger, eps, 0, 2), ErrorCode.VOTER_NOT_FOUND),
    ]
    for req, want in cases:
        assert vc.one_shot_answered(req, static, [want], ()) is None, (req, want)
        wrong = ErrorCode.NONE if want is not ErrorCode.NONE else ErrorCode.INVALID_REQUEST
        assert vc.one_shot_answered(req, static, [wrong], ()) is not None, (req, wrong)
        assert vc.one_shot_answered(req, static, [], ()) is not None  # no answer
    written = _history((7, _record(1, 2, 3)))
    assert vc.one_shot_answered(cases[0][0], static, [ErrorCode.NONE], written) is not None


def test_a_static_quorum_answers_one_shots_under_the_adversary() -> None:
    """mixed+adversary's static quorum gets UpdateRaftVoter too, leaders and others."""
    out = io.StringIO()
    r = simulate(SimConfig(seed=1, profile=PROFILES["mixed+adversary"]), trace=out)
    assert r.ok, r.summary()
    answers: Counter[str] = Counter()
    for line in out.getvalue().splitlines():
        e = json.loads(line)
        m = e.get("message") or {}
        if e["action"] == "OperatorAnswered" and m.get("type") == "UpdateVoterResponse":
            answers[str(m["error"])] += 1
    assert {"0", "6"} <= set(answers), answers
