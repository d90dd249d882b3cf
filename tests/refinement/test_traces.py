"""Trace validation: simulator traces checked by TLC against spec/KRaft.tla through
spec/TraceKRaft.tla ("Validating Traces of Distributed Programs Against TLA+ Specifications":
the trace must be a behaviour of the spec, event by event).

Accepted: many seeds across fault profiles, and committed traces of the simulator with KIP-996
pre-vote and check-quorum (tests/refinement/fixtures/trace-*.ndjson, from `python -m
refinement.sim` of the core with pre-vote). Rejected at the right event: hand-corrupted traces
(a second vote in an epoch, a HWM that goes back, a committed record truncated, a leader
without a majority, a pre-vote that changed the epoch, a candidate without a majority of
pre-votes, a new leader advertising a stale HWM) and the traces of an implementation mutant.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from kraft.core import quorum_math as qm
from kraft.core.leader import LeaderState
from kraft.core.vocabulary import Action
from kraft.ids import Offset
from kraft.trace_format import TraceEvent, read_trace
from refinement.traces import (
    CONFORMANCE_PROFILES,
    TraceValidation,
    conformance,
    map_trace,
    simulate_trace,
    spec_message,
    validate_trace,
)
from refinement.traces.lookahead import snapshot_sizes

FIXTURES = Path(__file__).parent / "fixtures"
# The simulator's traces follow the implementation in this checkout; the spec models pre-vote,
# so they validate only with a core that has it (the `core` branch; both merged on main).
needs_pre_vote_core = pytest.mark.skipif(
    not hasattr(Action, "BECOME_CANDIDATE"),
    reason="the checkout's core has no KIP-996 pre-vote (branch core), its traces cannot match",
)

# --------------------------------------------------------------------------- mapping (no TLC)


def _event(index: int, action: str, actions: tuple[str, ...], **kw: object) -> TraceEvent:
    state = {
        "state": "Leader",
        "epoch": 1,
        "votedFor": None,
        "leader": 1,
        "endOffset": 1,
        "lastEpoch": 1,
        "hwm": None,
        "logStartOffset": 0,
    }
    message = kw.get("message")
    return TraceEvent(
        index=index,
        time=int(str(kw.get("time", 0))),
        node=1,
        action=action,
        actions=actions,
        message=message if isinstance(message, dict) else None,
        state=state,
    )


def _op_names(events: list[TraceEvent]) -> list[list[str]]:
    mapped = map_trace(events)
    return [[str(op["a"]) for op in r["ops"]] for r in mapped.records]  # type: ignore[union-attr]


def _wire(
    index: int, node: int, actions: tuple[str, ...], message: dict[str, object]
) -> TraceEvent:
    return replace(_event(index, actions[0], actions, message=message), node=node)


def test_the_counts_a_fetch_answer_may_have_are_those_logged_after_it():
    """Leader 2 answers follower 1's fetches from offset 57 at events 3 and 5; answers from 57
    are logged at 4 (2 records) and 6 (47). The fetch of event 5 may have either of the later
    answers only (its own may have been lost unlogged: the spec then also allows the whole
    rest); the fetch of event 3 may have been answered by either."""
    fetch = {"type": "FetchRequest", "src": 1, "dst": 2, "fetchOffset": 57}
    events = [
        _wire(3, 2, ("HandleFetchRequest",), fetch),
        _wire(4, 1, ("HandleFetchResponse",), _answer(57, 58)),
        _wire(5, 2, ("HandleFetchRequest",), fetch),
        _wire(6, 1, ("HandleFetchResponse",), _answer(57, 103)),
    ]
    sizes = snapshot_sizes(events)
    assert sizes.answer_counts(2, 1, 57, at=3) == (2, 47)
    assert sizes.answer_counts(2, 1, 57, at=5) == (47,)
    assert sizes.answer_counts(2, 1, 58, at=3) == ()


def _answer(first: int, last: int) -> dict[str, object]:
    return {"type": "FetchResponse", "src": 2, "dst": 1, "batches": [[first, last, 5]]}


def test_client_append_of_k_records_is_k_spec_steps():
    ev = _event(0, "ClientAppend", ("ClientAppend",), message={"type": "ClientAppend",
                                                                 "records": 3})  # fmt: skip
    assert _op_names([ev]) == [["ClientAppend"] * 3]


def test_refused_client_append_is_a_stutter_step():
    ev = _event(0, "ClientAppend", (), message={"type": "ClientAppend", "records": 2})
    assert _op_names([ev]) == [["Skip"]]


def test_several_actions_of_one_step_are_spec_steps_in_order():
    vote = {"type": "VoteResponse", "src": 2, "dst": 1, "error": 0, "leaderEpoch": 1,
            "leaderId": -1, "voteGranted": True}  # fmt: skip
    ev = _event(0, "HandleVoteResponse", ("HandleVoteResponse", "BecomeLeader"), message=vote)
    assert _op_names([ev]) == [["Recv", "HandleVoteResponse", "BecomeLeader"]]


def test_a_held_fetch_is_answered_again_when_released():
    # KIP-595 long polling: the leader holds a fetch it has nothing for, answers it later.
    fetch = {"type": "FetchRequest", "src": 2, "dst": 1, "replicaEpoch": 1, "fetchOffset": 1,
             "lastFetchedEpoch": 1, "maxWaitMs": 500, "clusterId": "c"}  # fmt: skip
    held = _event(0, "HandleFetchRequest", ("HandleFetchRequest",), message=fetch)
    release = _event(1, "HandleFetchRequest", ("HandleFetchRequest",), time=10)
    names = _op_names([held, release])
    assert names == [["Recv", "HandleFetchRequest"], ["Recv", "HandleFetchRequest"]]
    second = map_trace([held, release]).records[1]["ops"]
    assert second[0]["m"]["fetchOffset"] == 1  # type: ignore[index]


def test_pre_vote_request_keeps_its_flag_and_epoch():
    # KIP-996: a pre-vote carries the prospective's current epoch and preVote = true.
    req = {"type": "VoteRequest", "src": 1, "dst": 2, "candidate": 1, "candidateEpoch": 3,
           "lastEpoch": 3, "lastEndOffset": 7, "voter": 2, "preVote": True}  # fmt: skip
    m, exact = spec_message(req)
    assert exact
    assert (m["epoch"], m["preVote"], m["lastEpoch"], m["endOffset"]) == (3, True, 3, 7)
    m2, _ = spec_message(req | {"preVote": False})
    assert m2["preVote"] is False


def test_vote_response_matches_either_round_unless_the_trace_says():
    resp = {"type": "VoteResponse", "src": 2, "dst": 1, "error": 0, "leaderEpoch": 3,
            "leaderId": -1, "voteGranted": False}  # fmt: skip
    ev = _event(0, "HandleVoteResponse", ("HandleVoteResponse",), message=resp)
    (recv,) = [op for op in map_trace([ev]).records[0]["ops"] if op["a"] == "Recv"]  # type: ignore[union-attr]
    assert recv["anyPre"] is True  # type: ignore[index]
    ev = _event(0, "HandleVoteResponse", ("HandleVoteResponse",), message=resp | {"preVote": True})
    (recv,) = [op for op in map_trace([ev]).records[0]["ops"] if op["a"] == "Recv"]  # type: ignore[union-attr]
    assert recv["anyPre"] is False  # type: ignore[index]
    assert recv["m"]["preVote"] is True  # type: ignore[index]


def test_vote_response_naming_a_leader_is_learned_before_and_after_counting():
    resp = {"type": "VoteResponse", "src": 2, "dst": 1, "error": 0, "leaderEpoch": 3,
            "leaderId": 3, "voteGranted": False}  # fmt: skip
    ev = _event(0, "HandleVoteResponse", ("HandleVoteResponse",), message=resp)
    assert _op_names([ev]) == [["Recv", "LearnLeader", "HandleVoteResponse", "LearnLeader"]]


def test_unknown_leader_hwm_is_kept_as_minus_one():
    # A new leader answers fetches with -1 until its HWM advances in its epoch (KRaft.tla's
    # UnknownHwm); it is no longer read as 0.
    resp = {"type": "FetchResponse", "src": 1, "dst": 2, "error": 0, "leaderEpoch": 2,
            "leaderId": 1, "highWatermark": -1, "batches": []}  # fmt: skip
    m, exact = spec_message(resp)
    assert not exact and m["hwm"] == -1
    m, _ = spec_message(resp | {"highWatermark": 5})
    assert m["hwm"] == 5


def test_end_quorum_epoch_no_longer_contains_the_election():
    # Kafka 4.x: EndQuorumEpoch only cuts the fetch timer; an ElectionTimeout in the same step
    # is its own spec step (Follower -> Prospective).
    req = {"type": "EndQuorumEpochRequest", "src": 3, "dst": 1, "leaderEpoch": 2, "leaderId": 3,
           "preferredSuccessors": [1, 2]}  # fmt: skip
    ev = _event(0, "HandleEndQuorumEpochRequest",
                ("HandleEndQuorumEpochRequest", "ElectionTimeout"), message=req)  # fmt: skip
    assert _op_names([ev]) == [
        ["Recv", "LearnLeader", "HandleEndQuorumEpochRequest", "ElectionTimeout"]
    ]


# --------------------------------------------------------------------------- TLC runs


@pytest.fixture(scope="module")
def base_trace() -> list[TraceEvent]:
    """A lossy run with pre-votes (granted and rejected), elections in epochs 1 and 2 and a
    moving HWM: `python -m refinement.sim --seed 1 --profile lossy --events 300` of the core
    with pre-vote (439 events)."""
    return read_trace(FIXTURES / "trace-prevote-lossy-1.ndjson")


@pytest.fixture(scope="module")
def check_quorum_trace() -> list[TraceEvent]:
    """The first 500 events of `--seed 5 --profile partitions --events 800`: the leader of
    epoch 1, cut off, resigns (check-quorum), times out into epoch 2 and is elected in 3."""
    return read_trace(FIXTURES / "trace-checkquorum-partitions-5.ndjson")


def _edit_state(ev: TraceEvent, **changes: object) -> TraceEvent:
    assert ev.state is not None
    state = dict(ev.state)
    state.update(changes)  # type: ignore[arg-type]
    return replace(ev, state=state)


def _rejected_at(trace: list[TraceEvent], index: int) -> TraceValidation:
    res = validate_trace(trace)
    assert not res.accepted
    assert res.first_unmatched == index, res.summary()
    assert res.event is not None and f'"index":{index},' in res.event
    assert res.state_before is not None
    return res


def _first(trace: list[TraceEvent], pred: Callable[[TraceEvent], bool]) -> int:
    return next(i for i, ev in enumerate(trace) if pred(ev))


@pytest.mark.tlc
def test_base_trace_is_accepted(base_trace: list[TraceEvent]):
    res = validate_trace(base_trace)
    assert res.accepted, res.summary()
    assert res.events == len(base_trace) and res.first_unmatched is None


@pytest.mark.tlc
def test_check_quorum_trace_is_accepted(check_quorum_trace: list[TraceEvent]):
    resign = _first(check_quorum_trace, lambda ev: ev.actions == ("Resign",))
    ev = check_quorum_trace[resign]
    assert ev.state is not None and ev.state["state"] == "Resigned"
    res = validate_trace(check_quorum_trace)
    assert res.accepted, res.summary()


@pytest.mark.tlc
def test_a_voter_that_refused_the_pre_vote_may_grant_the_vote():
    """The first 1,010 events of the simulator's run `--seed 4 --profile lossy --events 1500`,
    where node 2 refuses node 1's pre-vote and then grants its vote in the next epoch to node 1,
    a Candidate by then. KRaft.tla once carried the pre-vote's refusals into the candidate's
    tally and rejected such a grant; Kafka's CandidateState counts afresh. (This fixture was a
    real node's trace where a Resigned leader refused the pre-vote; Kafka 4.3's ResignedState
    grants an up-to-date one, as we now do, so that trace is no longer ours.)"""
    trace = read_trace(FIXTURES / "trace-lossy-4-prevote-refused-vote-granted.ndjson")
    refused = _first(
        trace,
        lambda ev: (
            ev.node == 1
            and ev.message is not None
            and ev.message.get("type") == "VoteResponse"
            and ev.message.get("src") == 2
            and ev.message.get("voteGranted") is False
            and ev.state is not None
            and ev.state["state"] == "Prospective"
        ),
    )
    granted = _first(
        trace,
        lambda ev: (
            ev.index > trace[refused].index
            and ev.node == 1
            and ev.message is not None
            and ev.message.get("type") == "VoteResponse"
            and ev.message.get("src") == 2
            and ev.message.get("voteGranted") is True
            and ev.state is not None
            and ev.state["state"] in ("Candidate", "Leader")
        ),
    )
    assert trace[granted].state is not None and trace[refused].state is not None
    assert trace[granted].state["epoch"] > trace[refused].state["epoch"]
    res = validate_trace(trace, voters=[1, 2, 3])
    assert res.accepted, res.summary()


@pytest.mark.tlc
def test_a_resigned_leader_grants_an_up_to_date_pre_vote():
    """The first 690 merged events of a real 3-node chaos run (`kraft chaos --seed 11 --cycles
    4 --faults partition-leader,pause-leader,one-way,kill-leader`): leader 1 of epoch 2, paused,
    resigns, and grants the pre-votes of 2 and 3, whose logs are as long as its own, as Kafka
    4.3's ResignedState.canGrantVote does; then 3 leads epoch 3."""
    trace = read_trace(FIXTURES / "trace-node-resigned-grants-pre-vote.ndjson")
    resigned_asked = [
        ev.index
        for ev in trace
        if ev.node == 1
        and ev.message is not None
        and ev.message.get("type") == "VoteRequest"
        and ev.message.get("preVote") is True
        and ev.state is not None
        and ev.state["state"] == "Resigned"
    ]
    assert resigned_asked, "the fixture no longer shows a resigned leader asked for a pre-vote"
    grants = [
        ev
        for ev in trace
        if ev.index > resigned_asked[0]
        and ev.message is not None
        and ev.message.get("type") == "VoteResponse"
        and ev.message.get("src") == 1
        and ev.message.get("voteGranted") is True
        and ev.message.get("leaderId") == 1  # answered while it still named itself (Resigned)
    ]
    assert {ev.node for ev in grants} == {2, 3}
    res = validate_trace(trace, voters=[1, 2, 3])
    assert res.accepted, res.summary()


@pytest.mark.tlc
def test_a_resigned_leader_follows_the_successor_its_end_quorum_epoch_answer_names():
    """From the simulator's run `--seed 19 --profile partitions --events 1500` (its first 320
    events): a leader cut off while another was elected resigns and sends EndQuorumEpoch to
    it, whose answer (FENCED_LEADER_EPOCH, naming the new leader and epoch) makes the old
    leader a Follower of it in that epoch (Kafka's maybeHandleCommonResponse). KRaft has no
    EndQuorumEpoch answers; TraceKRaft's LearnNewerLeader adopts what it names. Without it TLC
    rejected that event. (This fixture was a real node's trace in which a Resigned leader also
    refused an up-to-date pre-vote, which Kafka 4.3 grants, as we now do.)"""
    trace = read_trace(FIXTURES / "trace-partitions-19-resigned-leader-learns-successor.ndjson")
    last: dict[int, dict[str, object]] = {}  # each node's logged state so far
    adopted = []
    for ev in trace:
        msg, st, node = ev.message, ev.state, ev.node
        if st is None or node is None:
            continue
        prev = last.get(node)
        if (
            msg is not None
            and msg.get("type") == "EndQuorumEpochResponse"
            and prev is not None
            and prev["state"] == "Resigned"
            and st["state"] == "Follower"
            and st["leader"] == msg.get("leaderId")
            and st["epoch"] == msg.get("leaderEpoch")
        ):
            adopted.append(ev.index)
        last[node] = dict(st)
    assert adopted, "the fixture no longer shows a resigned leader adopting its successor"
    res = validate_trace(trace, voters=[1, 2, 3])
    assert res.accepted, res.summary()


@pytest.mark.tlc
def test_pre_vote_that_changed_the_epoch_is_rejected_at_that_event(base_trace: list[TraceEvent]):
    # KIP-996: becoming Prospective persists nothing and keeps the epoch.
    i = _first(
        base_trace,
        lambda ev: (
            ev.actions == ("ElectionTimeout",)
            and ev.state is not None
            and ev.state.get("state") == "Prospective"
        ),
    )
    ev = base_trace[i]
    assert ev.state is not None
    trace = list(base_trace)
    trace[i] = _edit_state(ev, epoch=int(str(ev.state["epoch"])) + 1)
    _rejected_at(trace, ev.index)


@pytest.mark.tlc
def test_candidate_without_a_majority_of_pre_votes_is_rejected(base_trace: list[TraceEvent]):
    # The granting pre-vote response is removed: the prospective has only its own pre-vote.
    i = _first(base_trace, lambda ev: ev.actions[:2] == ("HandleVoteResponse", "BecomeCandidate"))
    ev = base_trace[i]
    trace = list(base_trace)
    trace[i] = replace(ev, action="BecomeCandidate", actions=ev.actions[1:], message=None)
    res = _rejected_at(trace, ev.index)
    assert '"Prospective"' in (res.state_before or "")


@pytest.mark.tlc
def test_new_leader_advertising_a_stale_hwm_is_rejected(check_quorum_trace: list[TraceEvent]):
    # The leader of epoch 3 kept its old HWM locally but must answer fetches with -1 until its
    # HWM advances in epoch 3: an answer carrying the old HWM is no answer the spec can give.
    def unknown_hwm_answer(ev: TraceEvent) -> bool:
        m = ev.message
        return (
            ev.actions[:1] == ("HandleFetchResponse",)
            and m is not None
            and m.get("error") == 0
            and m.get("highWatermark") == -1
            and m.get("leaderEpoch") == 3
        )

    i = _first(check_quorum_trace, unknown_hwm_answer)
    ev = check_quorum_trace[i]
    assert ev.message is not None
    leader = int(str(ev.message["leaderId"]))
    # The HWM the leader holds locally just before (its follower HWM of epoch 1).
    held = next(
        int(str(e.state["hwm"]))
        for e in reversed(check_quorum_trace[:i])
        if e.node == leader and e.state is not None and isinstance(e.state.get("hwm"), int)
    )
    assert held > 0
    trace = list(check_quorum_trace)
    trace[i] = replace(ev, message={**ev.message, "highWatermark": held})
    _rejected_at(trace, ev.index)


@pytest.mark.tlc
@needs_pre_vote_core
def test_conformance_many_seeds_all_profiles_accepted():
    # 13 seeds, one of each default profile: lossy, crashes, partitions, mixed, snapshots,
    # every X+snapshots (corrupted chunks, crashes mid-transfer), disk-loss (observers that
    # lose their data directory) and solo (one voter). About 70 s of TLC with 2 jobs.
    runs = conformance(range(13), events=250)
    bad = [
        f"seed={r.seed} {r.profile}: {r.result.summary()}" for r in runs if not r.result.accepted
    ]
    assert not bad, "\n".join(bad)
    assert {r.profile for r in runs} == set(CONFORMANCE_PROFILES)
    assert {"snapshots", "mixed+snapshots", "disk-loss"} <= set(CONFORMANCE_PROFILES)
    assert sum(r.events for r in runs) > 3000


@pytest.mark.tlc
@needs_pre_vote_core
def test_solo_traces_are_accepted_where_the_lone_voter_restarts_as_leader(tmp_path: Path):
    # `solo`: one voter and two observers under mixed faults. The voter leads as it starts and
    # as it restarts (Kafka's KafkaRaftClient.initialize), also where it comes back Resigned:
    # Prospective in its epoch, not Unattached in the next (KRaft.tla's atStart). Seed 0
    # crashes the leader of epoch 1, which restarts as the leader of epoch 2.
    [run] = conformance([0], events=300, profiles=("solo",), keep_dir=tmp_path)
    assert run.result.accepted, run.result.summary()
    assert run.trace_path is not None
    trace = read_trace(run.trace_path)
    led_before: int | None = None
    relead: list[int] = []
    for ev in (e for e in trace if e.node == 1 and e.state is not None):
        epoch, state = int(str(ev.state["epoch"])), ev.state["state"]
        if ev.action == "Restart" and led_before is not None and state == "Leader":
            assert ev.actions[:4] == (
                "Restart",
                "ElectionTimeout",
                "BecomeCandidate",
                "BecomeLeader",
            )
            assert epoch == led_before + 1
            relead.append(ev.index)
        if state == "Leader":
            led_before = epoch
        elif state != "Down":
            led_before = None
    assert relead, "no restart of the leader in this trace"
    # With three voters (the default model) the lone voter's first election is no step of the
    # spec: the trace is rejected at its first event.
    other = validate_trace(trace, voters=(1, 2, 3), report=False)
    assert not other.accepted and other.first_unmatched == 0


@pytest.mark.tlc
@needs_pre_vote_core
def test_concurrent_validations_do_not_share_tlcs_unpacked_modules(tmp_path: Path):
    # TLC unpacks Integers.tla & co. into the JVM's temp dir and deletes them on exit; runs
    # sharing one temp dir (campaign executors, test workers) read each other's half-written
    # or deleted copies and fail with a lexical error. Every run must be accepted.
    paths = []
    for seed in range(6):
        path = tmp_path / f"seed{seed}.ndjson"
        simulate_trace(seed, "mixed", 120, path)
        paths.append(path)
    with ThreadPoolExecutor(len(paths)) as pool:
        results = list(pool.map(validate_trace, paths * 2))
    assert [r.accepted for r in results] == [True] * len(results), [
        r.summary() for r in results if not r.accepted
    ]


@pytest.mark.tlc
def test_second_vote_in_one_epoch_is_rejected_at_that_event(base_trace: list[TraceEvent]):
    # KIP-595: a voter grants at most one vote per epoch.
    i = _first(
        base_trace,
        lambda ev: (
            ev.action == "HandleVoteRequest"
            and ev.state is not None
            and ev.state.get("state") == "Voted"
        ),
    )
    ev = base_trace[i]
    assert ev.state is not None and ev.message is not None
    other = next(n for n in (1, 2, 3) if n not in (ev.state["votedFor"], ev.node))
    trace = list(base_trace)
    trace[i] = _edit_state(ev, votedFor=other)
    _rejected_at(trace, ev.index)


@pytest.mark.tlc
def test_high_watermark_going_back_is_rejected_at_that_event(base_trace: list[TraceEvent]):
    hwm: dict[int, int] = {}
    target = None
    for i, ev in enumerate(base_trace):
        st = ev.state
        if ev.node is None or st is None or st.get("state") == "Down":
            continue
        h = st.get("hwm")
        if isinstance(h, int) and hwm.get(ev.node, 0) >= 2 and h >= hwm[ev.node]:
            target = i
            break
        if isinstance(h, int):
            hwm[ev.node] = h
    assert target is not None
    ev = base_trace[target]
    trace = list(base_trace)
    trace[target] = _edit_state(ev, hwm=hwm[ev.node or 0] - 1)
    _rejected_at(trace, ev.index)


@pytest.mark.tlc
def test_truncated_committed_record_is_rejected_at_that_event(base_trace: list[TraceEvent]):
    # A follower that drops a record below its HWM (a committed record) from its log.
    i = _first(
        base_trace,
        lambda ev: (
            ev.action == "HandleFetchResponse"
            and ev.state is not None
            and isinstance(ev.state.get("hwm"), int)
            and int(str(ev.state["hwm"])) >= 2
        ),
    )
    ev = base_trace[i]
    assert ev.state is not None
    trace = list(base_trace)
    trace[i] = _edit_state(ev, endOffset=int(str(ev.state["hwm"])) - 1)
    _rejected_at(trace, ev.index)


@pytest.mark.tlc
def test_leader_without_majority_is_rejected_at_that_event(base_trace: list[TraceEvent]):
    # The granting vote response is removed: the candidate has only its own vote of three.
    i = _first(base_trace, lambda ev: ev.actions[:2] == ("HandleVoteResponse", "BecomeLeader"))
    ev = base_trace[i]
    trace = list(base_trace)
    trace[i] = replace(ev, action="BecomeLeader", actions=ev.actions[1:], message=None)
    res = _rejected_at(trace, ev.index)
    assert "votesGranted" in (res.state_before or "")


def _hwm_without_epoch_check(self: LeaderState, own_end: Offset) -> Offset | None:
    """LeaderState.advance_hwm without KIP-595's rule that the HWM only moves to an offset
    in the leader's own epoch (the LeaderChange record must be replicated first)."""
    ends = [-1 if p.end_offset is None else p.end_offset for p in self.voters.values()]
    if self.me_is_voter:
        ends.append(own_end)
    k = self.voter_set.majority
    if len(ends) < k:
        return None
    candidate = Offset(qm.high_watermark_fast(ends, k))
    if candidate <= 0 or (self.hwm is not None and candidate <= self.hwm):
        return None
    self.hwm = candidate
    return candidate


@pytest.mark.tlc
@needs_pre_vote_core
def test_implementation_mutant_hwm_without_epoch_check_is_rejected(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.setattr(LeaderState, "advance_hwm", _hwm_without_epoch_check)
    # Runs where a new leader finds records of an earlier epoch it could commit early.
    for seed, profile in ((4, "mixed"), (2, "mixed")):
        path = tmp_path / f"{profile}-{seed}.ndjson"
        simulate_trace(seed, profile, 400, path)
        trace = read_trace(path)
        res = validate_trace(trace)
        assert not res.accepted, f"mutant trace accepted: seed {seed} {profile}"
        bad = next(ev for ev in trace if ev.index == res.first_unmatched)
        assert "AdvanceHighWatermark" in bad.actions, res.summary()
        # The leader moved its HWM onto a record of an earlier epoch.
        assert bad.state is not None and bad.state["lastEpoch"] == bad.state["epoch"]


@pytest.mark.tlc
@needs_pre_vote_core
def test_a_2000_event_trace_validates_without_the_search_blowing_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """TLC follows a long trace step by step: the states it explores grow with the trace, a
    small multiple of its events (about 1.5 per event), never with the model's whole state
    space. Counted in states, not seconds, so a busy machine cannot fail it; the time is shown."""
    path = tmp_path / "mixed-7.ndjson"
    simulate_trace(7, "mixed", 1900, path)
    trace = read_trace(path)
    assert len(trace) >= 1900
    start = time.monotonic()
    res = validate_trace(trace)
    wall = time.monotonic() - start
    assert res.accepted, res.summary()
    with capsys.disabled():
        print(
            f"\n[trace validation] {len(trace)} events in {wall:.1f}s"
            f" ({len(trace) / wall:.0f} events/s, {res.distinct_states} distinct states)"
        )
    assert 0 < res.distinct_states <= 3 * len(trace)
