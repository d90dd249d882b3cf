"""z3 on KRaft: shared invariant definitions (Python checker == shared-definition evaluation
== z3) and bounded proofs of the quorum lemmas, with a mutant per lemma that must fail."""

from __future__ import annotations

import random
import time
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.core import quorum_math as qm
from kraft.core.effects import AppendToLog, Send
from kraft.core.events import ClientAppend, Receive, Tick
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    VoteRequest,
    VoteResponse,
)
from kraft.core.quorum_math import PY
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_set import VoterSet
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey
from kraft.storage.memory_log import MemoryLog
from refinement import invariant_defs as defs
from refinement import invariants as inv
from refinement import smt
from refinement.faults import PROFILES
from refinement.invariants import AckedRange, ClusterState, NodeState
from refinement.sim import NodeSetup, SimConfig, core_replica_factory
from refinement.sim_base import directory_of
from refinement.stateful import sample_states

# --------------------------------------------------------------------------- states


def _states() -> list[ClusterState]:
    out: list[ClusterState] = []
    for seed in range(5):
        for profile in ("mixed", "crashes", "lossy", "partitions"):
            cfg = SimConfig(
                seed=seed, profile=PROFILES[profile], max_events=500, check_liveness=False
            )
            out += sample_states(cfg, every=70)
    return out


STATES = _states()


def _verdicts(state: ClusterState, checker: smt.Z3Checker) -> dict[str, tuple[bool, bool, bool]]:
    return {
        d.name: (
            defs.CHECKERS[d.name](state, None) is not None,
            defs.py_violation(state, d) is not None,
            checker.violation(d) is not None,
        )
        for d in defs.DEFINITIONS
    }


def test_shared_definitions_agree_with_checkers_on_simulated_states():
    started = time.perf_counter()
    leaders_with_hwm = acked = 0
    for s in STATES:
        for name, (py_checker, shared, z3v) in _verdicts(s, smt.Z3Checker(s)).items():
            assert py_checker == shared == z3v, (name, s)
        leaders_with_hwm += any(
            n.state is ReplicaState.LEADER and (n.high_watermark or 0) > 0 for n in s.nodes.values()
        )
        acked += bool(s.acknowledged)
    # The states exercise the interesting parts of the definitions.
    assert len(STATES) >= 80 and leaders_with_hwm >= 20 and acked >= 20
    assert time.perf_counter() - started < 30


def _perturb(s: ClusterState, rng: random.Random) -> ClusterState:
    """A small change that may break an invariant while keeping logs well formed (epoch
    caches increasing, starts below the end)."""
    nodes = dict(s.nodes)
    nid = rng.choice(sorted(nodes))
    n = nodes[nid]
    kind = rng.randrange(7)
    stops = [o for _, o in n.epochs[1:]] + [n.log_end_offset]
    movable = [i for i, (_, o) in enumerate(n.epochs) if o + 1 < stops[i]]
    if kind == 6 and movable:
        # A run starts one offset later: the log differs below records it shares with others.
        i = rng.choice(movable)
        e, start = n.epochs[i]
        n = replace(n, epochs=(*n.epochs[:i], (e, Offset(start + 1)), *n.epochs[i + 1 :]))
    elif kind == 0 and n.epochs:
        # The last run of the log gets a later epoch (another leader's records).
        e, start = n.epochs[-1]
        epochs = (*n.epochs[:-1], (Epoch(e + rng.randint(1, 2)), start))
        n = replace(n, epochs=epochs, log_last_epoch=epochs[-1][0])
    elif kind == 1 and n.log_end_offset > 0:
        end = Offset(rng.randrange(n.log_end_offset))
        epochs = tuple(x for x in n.epochs if x[1] < end)
        last = epochs[-1][0] if epochs else Epoch(0)
        n = replace(
            n,
            epochs=epochs,
            log_end_offset=end,
            log_last_epoch=last,
            flushed_offset=Offset(min(end, n.flushed_offset)),
        )
    elif kind == 2:
        n = replace(n, flushed_offset=Offset(rng.randrange(n.flushed_offset + 1)))
    elif kind == 3 and n.state is not None:
        n = replace(n, high_watermark=Offset(rng.randrange(n.log_end_offset + 2)))
    elif kind == 4:
        leaders = dict(s.leaders)
        e = Epoch(rng.randrange(max(1, n.epoch + 1)))
        leaders[e] = leaders.get(e, frozenset()) | {nid}
        return replace(s, leaders=leaders)
    elif kind == 5 and n.state is not None:
        n = replace(n, state=ReplicaState.LEADER)
    nodes[nid] = n
    return replace(s, nodes=nodes)


def test_shared_definitions_agree_on_perturbed_states():
    rng = random.Random(7)
    violated: dict[str, int] = dict.fromkeys(inv_names := [d.name for d in defs.DEFINITIONS], 0)
    for s in STATES[::2]:
        p = _perturb(_perturb(s, rng), rng)
        for name, (py_checker, shared, z3v) in _verdicts(p, smt.Z3Checker(p)).items():
            assert py_checker == shared == z3v, (name, p)
            violated[name] += py_checker
    # Every definition was seen both violated and holding.
    assert all(violated[n] > 0 for n in inv_names if n != inv.LOG_MIRROR), violated


# Hand-built states: three voters, logs as epoch caches.


def _node(
    nid: int,
    epochs: tuple[tuple[int, int], ...],
    end: int,
    *,
    state: ReplicaState | None = ReplicaState.FOLLOWER,
    epoch: int = 2,
    hwm: int | None = None,
    flushed: int | None = None,
) -> NodeState:
    cache = tuple((Epoch(e), Offset(o)) for e, o in epochs)
    last = cache[-1][0] if cache else Epoch(0)
    return NodeState(
        node_id=NodeId(nid),
        incarnation=0,
        state=state,
        epoch=Epoch(epoch),
        leader_id=None,
        end_offset=Offset(end),
        last_epoch=last,
        high_watermark=None if hwm is None else Offset(hwm),
        max_high_watermark=None if hwm is None else Offset(hwm),
        log_end_offset=Offset(end),
        log_last_epoch=last,
        flushed_offset=Offset(end if flushed is None else flushed),
        epochs=cache,
    )


def _cluster(*nodes: NodeState, leaders=None, acked=()) -> ClusterState:
    return ClusterState(
        {n.node_id: n for n in nodes},
        frozenset(n.node_id for n in nodes),
        leaders or {},
        tuple(acked),
    )


GOOD = _cluster(
    _node(1, ((1, 0), (2, 3)), 6, state=ReplicaState.LEADER, hwm=5),
    _node(2, ((1, 0), (2, 3)), 5, hwm=5),
    _node(3, ((1, 0),), 3),
    leaders={Epoch(1): frozenset({NodeId(3)}), Epoch(2): frozenset({NodeId(1)})},
    acked=[AckedRange(Offset(1), Offset(2), Epoch(1)), AckedRange(Offset(3), Offset(4), Epoch(2))],
)

BAD: list[tuple[str, ClusterState, dict[str, int]]] = [
    (
        inv.ELECTION_SAFETY,
        replace(GOOD, leaders={**GOOD.leaders, Epoch(2): frozenset({NodeId(1), NodeId(2)})}),
        {"epoch": 2},
    ),
    (
        # Only the leader durably holds offsets below its HWM 5: node 2 did not flush.
        inv.MAJORITY_REACHED_HIGH_WATERMARK,
        replace(GOOD, nodes={**GOOD.nodes, NodeId(2): _node(2, ((1, 0), (2, 3)), 5, flushed=4)}),
        {"leader": 1},
    ),
    (
        # Node 3 has epoch 2 at offset 3 like the others, but a different epoch below it.
        inv.LOG_MATCHING,
        replace(GOOD, nodes={**GOOD.nodes, NodeId(3): _node(3, ((0, 0), (2, 3)), 4)}),
        {},
    ),
    (
        # Node 3 exposes HWM 4 but lacks acknowledged offset 3 (of epoch 2).
        inv.COMMITTED_NEVER_LOST,
        replace(GOOD, nodes={**GOOD.nodes, NodeId(3): _node(3, ((1, 0),), 3, hwm=4)}),
        {"node": 3, "offset": 3},
    ),
    (
        inv.LOG_MIRROR,
        replace(
            GOOD,
            nodes={**GOOD.nodes, NodeId(3): replace(GOOD.nodes[NodeId(3)], end_offset=Offset(2))},
        ),
        {"node": 3},
    ),
]


def test_good_state_satisfies_every_definition():
    assert inv.check_all(None, GOOD) == []
    checker = smt.Z3Checker(GOOD)
    for d in defs.DEFINITIONS:
        assert defs.py_violation(GOOD, d) is None
        assert checker.violation(d) is None


@pytest.mark.parametrize(("name", "state", "culprit"), BAD, ids=[b[0] for b in BAD])
def test_violating_state_is_sat_with_the_culprit(name, state, culprit):
    d = next(d for d in defs.DEFINITIONS if d.name == name)
    assert defs.CHECKERS[name](state, None) is not None
    assert defs.py_violation(state, d) is not None
    witness = smt.Z3Checker(state).violation(d)
    assert witness is not None
    for k, v in culprit.items():
        assert witness[k] == v, witness
    if name == inv.LOG_MATCHING:
        assert {witness["a"], witness["b"]} & {3} and witness["offset"] == 3
    # Only this invariant is broken (the states differ from GOOD in one place).
    broken = set(smt.z3_violations(state))
    assert broken == {name} or (name == inv.LOG_MATCHING and inv.LOG_MATCHING in broken)


def test_z3_searches_offsets_beyond_the_python_breakpoints():
    """LogMatching's z3 witness offset is free: it finds a violation at an offset far from 0
    in a long log."""
    s = _cluster(
        _node(1, ((1, 0), (5, 1000), (7, 5000)), 9000),
        _node(2, ((1, 0), (6, 1000), (7, 5000)), 8000),
    )
    w = smt.Z3Checker(s).violation(defs.LOG_MATCHING)
    assert w is not None and w["offset"] >= 5000
    assert inv.log_matching(s) is not None


# --------------------------------------------------------------------------- lemmas


def test_every_lemma_is_proved():
    """Each lemma proved (z3 answers unsat for its negation); how long each took is in its
    text, not asserted: a busy machine must not fail a proof."""
    results = smt.prove_all()
    for r in results:
        assert r.proved, str(r)
    assert {r.lemma for r in results} == {
        "MajoritiesIntersect",
        "HighWatermarkIsMajorityMaximum",
        "LogUpToDateTotalPreorder",
        "ElectionTimeoutBounds",
        "SuccessorBackoffBounds",
    }


def test_single_member_changes_only():
    """KIP-856 changes one voter at a time: two majorities of sets differing by two members
    (a replacement) can be disjoint, and z3 shows two such."""
    r = smt.prove_majorities_intersect(max_difference=2)
    assert not r.proved
    cx = r.counterexample
    assert cx is not None and cx["quorum_a"] & cx["quorum_b"] == 0
    assert cx["quorum_a"] & ~cx["set_a"] == 0 and cx["quorum_b"] & ~cx["set_b"] == 0


# Mutants: each breaks the lemma it stands for; z3 must find the counterexample.


def _majority_half(ops, n):
    return ops.floordiv(n, 2)


def _hwm_one_too_far(ops, ends, majority):
    s = qm.sorted_desc(ops, ends)
    return s[min(majority, len(s) - 1)]


def _hwm_one_too_near(ops, ends, majority):
    return qm.sorted_desc(ops, ends)[majority - 2 if majority > 1 else 0]


def _up_to_date_offset_first(ops, a_epoch, a_end, b_epoch, b_end):
    return qm.log_up_to_date(ops, a_end, a_epoch, b_end, b_epoch)


def _up_to_date_strict(ops, a_epoch, a_end, b_epoch, b_end):
    return ops.or_(
        ops.lt(b_epoch, a_epoch), ops.and_(ops.eq(a_epoch, b_epoch), ops.lt(b_end, a_end))
    )


def _timeout_off_by_one(ops, t, draw):
    return ops.add(qm.randomized_election_timeout(ops, t, draw), ops.lit(1))


def _bounds_up_to_2t(ops, t):
    lo, _ = qm.election_timeout_bounds(ops, t)
    return lo, ops.mul(ops.lit(2), t)


def _backoff_without_min(ops, position, retry, _max):
    zero = ops.lit(0)
    delay = ops.mul(retry, ops.pow2(ops.sub(position, ops.lit(1))))
    return ops.ite(ops.le(position, zero), zero, delay)


def _backoff_without_shift(ops, position, retry, bmax):
    # Every successor waits the same: a later one may start its election as early.
    return ops.ite(ops.le(position, ops.lit(0)), ops.lit(0), qm.min_of(ops, bmax, retry))


MUTANTS = [
    (
        "majority n//2",
        lambda: smt.prove_majorities_intersect(_majority_half),
        "majorities intersect",
    ),
    (
        "HWM (majority+1)-th",
        lambda: smt.prove_high_watermark(_hwm_one_too_far),
        "no larger offset is reached by a majority",
    ),
    (
        "HWM (majority-1)-th",
        lambda: smt.prove_high_watermark(_hwm_one_too_near),
        "a majority reached the HWM",
    ),
    (
        "up-to-date by offset first",
        lambda: smt.prove_log_up_to_date(_up_to_date_offset_first),
        "a larger last epoch wins",
    ),
    ("up-to-date strict", lambda: smt.prove_log_up_to_date(_up_to_date_strict), "reflexive"),
    (
        "timeout t+draw+1",
        lambda: smt.prove_election_timeout(timeout=_timeout_off_by_one),
        "timeout within its bounds",
    ),
    (
        "timeout bounds up to 2t",
        lambda: smt.prove_election_timeout(bounds=_bounds_up_to_2t),
        "bounds within [t, 2t)",
    ),
    (
        "successor backoff without MIN",
        lambda: smt.prove_successor_backoff(_backoff_without_min),
        "never longer than the backoff max",
    ),
    (
        "successor backoff without 2^(N-1)",
        lambda: smt.prove_successor_backoff(_backoff_without_shift),
        "a later successor waits longer, up to the cap",
    ),
]


@pytest.mark.parametrize(("name", "prove", "claim"), MUTANTS, ids=[m[0] for m in MUTANTS])
def test_mutant_lemma_fails_with_counterexample(name, prove, claim):
    r = prove()
    assert not r.proved, name
    assert r.counterexample, name
    if claim is not None:
        assert r.claim == claim, str(r)


def test_mutant_counterexamples_are_real():
    """z3's counterexamples replay on Python ints: the mutant really misbehaves there."""
    r = smt.prove_majorities_intersect(_majority_half)
    cx = r.counterexample
    assert cx is not None
    assert bin(cx["quorum_a"]).count("1") >= _majority_half(PY, bin(cx["set_a"]).count("1"))
    assert cx["quorum_a"] & cx["quorum_b"] == 0
    r = smt.prove_successor_backoff(_backoff_without_min)
    cx = r.counterexample
    assert cx is not None
    got = _backoff_without_min(PY, cx["position"], cx["retry_backoff"], cx["backoff_max"])
    assert got > cx["backoff_max"]
    r = smt.prove_high_watermark(_hwm_one_too_far)
    cx = r.counterexample
    assert cx is not None
    ends = [cx[f"end{i}"] for i in range(cx["voters"])]
    better = qm.high_watermark(PY, ends, cx["majority"])
    assert _hwm_one_too_far(PY, ends, cx["majority"]) < better


# --------------------------------------------------------------------------- the core
# The replica's behaviour equals quorum_math's functions (evaluated on ints).


def test_voter_set_majority_is_majority_size():
    """KIP-595: a majority of the voters, the smallest count above half."""
    for n in range(1, 21):
        keys = tuple(ReplicaKey(NodeId(i), directory_of(NodeId(i))) for i in range(n))
        assert VoterSet(keys).majority == qm.majority_size(PY, n)
        assert inv.majority(frozenset(NodeId(i) for i in range(n))) == qm.majority_size(PY, n)


def test_offset_and_epoch_order_is_log_up_to_date():
    """KIP-595: 'at least as up-to-date' compares the last epoch, then the end offset."""
    for ea in range(4):
        for oa in range(4):
            for eb in range(4):
                for ob in range(4):
                    core = OffsetAndEpoch(Epoch(ea), Offset(oa)) >= OffsetAndEpoch(
                        Epoch(eb), Offset(ob)
                    )
                    assert core == qm.log_up_to_date(PY, ea, oa, eb, ob)


class _One:
    """One real replica (core_replica_factory) with its MemoryLog, driven event by event."""

    def __init__(self, node: int, voters: int, seed: int = 0, **timing: int) -> None:
        self.log = MemoryLog()
        keys = tuple(ReplicaKey(NodeId(i), directory_of(NodeId(i))) for i in range(1, voters + 1))
        self.cluster = ClusterId("c")
        self.setup = NodeSetup(
            keys[node - 1],
            self.cluster,
            keys,
            QuorumTiming(**timing),
            None,
            self.log,
            random.Random(seed),
            0,
        )
        self.keys = keys
        self.r = core_replica_factory(self.setup)
        self.sent = []
        self.apply(self.r.start())

    def apply(self, effects):
        for e in effects:
            if isinstance(e, AppendToLog):
                self.log.append_as_follower(e.data)
            elif isinstance(e, Send):
                self.sent.append((e.dst, e.message))
        return effects

    def step(self, event):
        return self.apply(self.r.step(event))


def test_election_timeout_is_randomized_election_timeout():
    """A voter starting Unattached times out after t + randrange(t) ms."""
    for seed in range(50):
        for t in (1, 7, 1000):
            one = _One(1, 3, seed, election_timeout_ms=t)
            draw = random.Random(seed).randrange(t)
            lo, hi = qm.election_timeout_bounds(PY, t)
            assert one.r.next_deadline_ms() == qm.randomized_election_timeout(PY, t, draw)
            assert lo <= one.r.next_deadline_ms() <= hi


def _grant_all(one: _One, voters: int, state: ReplicaState) -> None:
    """Every other voter grants the pre-votes (Prospective) or votes (Candidate) asked."""
    epoch = one.r.view().epoch
    for i in range(2, voters + 1):
        if one.r.view().state is not state:
            return
        req = next(
            m
            for d, m in reversed(one.sent)
            if d == i and isinstance(m, VoteRequest) and m.candidate_epoch == epoch
        )
        one.step(
            Receive(1000, NodeId(i), VoteResponse(ErrorCode.NONE, NodeId(-1), epoch, True), req)
        )


def _leader(voters: int) -> _One:
    one = _One(1, voters, election_timeout_ms=100)
    one.step(Tick(1000))
    first = ReplicaState.LEADER if voters == 1 else ReplicaState.PROSPECTIVE
    assert one.r.view().state is first
    _grant_all(one, voters, ReplicaState.PROSPECTIVE)
    _grant_all(one, voters, ReplicaState.CANDIDATE)
    assert one.r.view().state is ReplicaState.LEADER
    return one


@settings(max_examples=40)
@given(
    voters=st.integers(1, 7),
    ops=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 20)), min_size=1, max_size=30),
)
def test_leader_hwm_is_quorum_math_high_watermark(voters, ops):
    """AdvanceHighWatermark: the leader's HWM is the largest candidate high_watermark(ends,
    majority) seen so far above the start of its epoch, as voters fetch and clients append."""
    one = _leader(voters)
    epoch = one.r.view().epoch
    epoch_start = 0
    known: dict[int, int] = {}
    model: int | None = None
    for t, (who, value) in enumerate(ops, start=1001):
        end = one.r.view().end_offset
        if who == 0 or voters == 1:
            one.step(ClientAppend(t, tuple((None, b"v") for _ in range(value % 3 + 1)), t))
        else:
            src = 2 + who % (voters - 1)
            offset = min(value, end)
            req = FetchRequest(
                one.cluster,
                one.keys[src - 1],
                epoch,
                Offset(offset),
                Epoch(epoch if offset > 0 else 0),
                Offset(0),
            )
            one.step(Receive(t, NodeId(src), req))
            known[src] = offset
        ends = [known.get(i, -1) for i in range(2, voters + 1)] + [one.r.view().end_offset]
        cand = qm.high_watermark(PY, ends, qm.majority_size(PY, voters))
        if cand > epoch_start and (model is None or cand > model):
            model = cand
        assert one.r.view().high_watermark == model


def test_successor_delay_is_successor_backoff_ms():
    """KIP-595 EndQuorumEpoch: a follower at position N > 0 of the preferred successors
    starts its election (pre-vote first: Prospective) after MIN(backoff max, retry backoff *
    2^(N-1)); N = 0 at once (its next tick, Kafka)."""
    for position in range(8):  # the other 8 of 9 voters
        one = _One(2, 9, retry_backoff_ms=20, election_backoff_max_ms=1000, election_timeout_ms=100)
        # Follow leader 1 in epoch 1 (BeginQuorumEpoch), then hear it resign.
        one.step(Receive(10, NodeId(1), BeginQuorumEpochRequest(one.cluster, NodeId(1), Epoch(1))))
        assert one.r.view().state is ReplicaState.FOLLOWER
        others = list(range(3, 10))
        successors = tuple(NodeId(i) for i in [*others[:position], 2, *others[position:]])
        assert successors.index(NodeId(2)) == position
        req = EndQuorumEpochRequest(one.cluster, NodeId(1), Epoch(1), successors)
        one.step(Receive(10, NodeId(1), req))
        delay = qm.successor_backoff_ms(PY, position, 20, 1000)
        if position == 0:
            assert one.r.next_deadline_ms() == 10
            one.step(Tick(10))
            assert one.r.view().state is ReplicaState.PROSPECTIVE
            continue
        one.step(Tick(10 + delay - 1))
        assert one.r.view().state is ReplicaState.FOLLOWER
        one.step(Tick(10 + delay))
        assert one.r.view().state is ReplicaState.PROSPECTIVE, (position, delay)


@given(
    st.lists(st.integers(min_value=-1, max_value=50), min_size=1, max_size=9),
    st.data(),
)
def test_fast_high_watermark_agrees_with_the_proved_one(ends, data):
    """The core calls high_watermark_fast (built-in sort); z3 proves high_watermark (a sorting
    network). The two must agree on every input, or the proof is about other code."""
    k = data.draw(st.integers(min_value=1, max_value=len(ends)))
    assert qm.high_watermark_fast(ends, k) == qm.high_watermark(PY, ends, k)


def test_agreement_check_catches_a_broken_fast_path():
    """A fast path taking the (k+1)-th largest instead of the k-th disagrees somewhere."""

    def broken(ends, k):
        ordered = sorted(ends, reverse=True)
        return ordered[min(k, len(ordered) - 1)]

    assert any(
        broken(ends, k) != qm.high_watermark(PY, ends, k)
        for ends in ([0, 1, 2], [3, 3, 1], [5, 4])
        for k in range(1, len(ends) + 1)
    )
