"""z3 over KRaft: the shared invariant definitions checked on concrete states, and bounded
proofs of the quorum lemmas the replica relies on.

1. `Z3Checker(state)` encodes one ClusterState (node attributes as uninterpreted functions
   fixed pointwise, each log's epoch-at-offset as an if-then-else over its epoch cache) and
   asserts, per definition of refinement/invariant_defs.py, that some witness violates it:
   unsat means the invariant holds; sat comes with the witness (the culprit nodes, epoch,
   acknowledged range, offset). Offsets are free z3 integers and offset quantifiers real z3
   quantifiers, so z3 does not rely on the breakpoint argument the Python evaluator uses.

2. `prove_*` prove lemmas over all inputs up to a bound, against the functions of
   kraft.core.quorum_math (the ones the replica evaluates), interpreted on z3 terms. Each
   takes the function(s) as parameters so that a mutant can be shown to fail.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeAlias, TypeVar

import z3

from kraft.core import quorum_math as qm
from kraft.core.quorum_math import PY, Ops
from refinement.invariant_defs import (
    DEFINITIONS,
    NONE,
    InvariantDef,
    Kind,
    node_code,
)
from refinement.invariants import ClusterState, NodeState

# z3 ships no type information: its terms are untyped here.
ZInt: TypeAlias = "z3.ArithRef"
ZBool: TypeAlias = "z3.BoolRef"

N = TypeVar("N")
B = TypeVar("B")


class Z3Ops:
    """quorum_math's operations on z3 integer and boolean terms. `pow2` is exact for
    exponents in [0, pow2_bound] (an if-then-else over them) and 0 elsewhere."""

    __slots__ = ("pow2_bound",)

    def __init__(self, pow2_bound: int = 16) -> None:
        self.pow2_bound = pow2_bound

    def lit(self, v: int) -> ZInt:
        return z3.IntVal(v)

    def add(self, a: ZInt, b: ZInt) -> ZInt:
        return a + b

    def sub(self, a: ZInt, b: ZInt) -> ZInt:
        return a - b

    def mul(self, a: ZInt, b: ZInt) -> ZInt:
        return a * b

    def floordiv(self, a: ZInt, d: int) -> ZInt:
        # z3's integer division is Euclidean: for d > 0 it is floor division, as Python's //.
        if d <= 0:
            raise ValueError("positive divisors only")
        return a / d

    def le(self, a: ZInt, b: ZInt) -> ZBool:
        return a <= b

    def lt(self, a: ZInt, b: ZInt) -> ZBool:
        return a < b

    def eq(self, a: ZInt, b: ZInt) -> ZBool:
        return a == b

    def and_(self, a: ZBool, b: ZBool) -> ZBool:
        return z3.And(a, b)

    def or_(self, a: ZBool, b: ZBool) -> ZBool:
        return z3.Or(a, b)

    def not_(self, a: ZBool) -> ZBool:
        return z3.Not(a)

    def ite(self, c: ZBool, a: ZInt, b: ZInt) -> ZInt:
        return z3.If(c, a, b)

    def pow2(self, e: ZInt) -> ZInt:
        out: ZInt = z3.IntVal(0)
        for k in range(self.pow2_bound, -1, -1):
            out = z3.If(e == k, z3.IntVal(1 << k), out)
        return out


Z3 = Z3Ops()


# --------------------------------------------------------------------------- invariants


class Z3Logic(Z3Ops):
    __slots__ = ()

    def true(self) -> ZBool:
        return z3.BoolVal(True)

    def all_of(self, bs: Sequence[ZBool]) -> ZBool:
        return z3.And(*bs) if bs else z3.BoolVal(True)

    def any_of(self, bs: Sequence[ZBool]) -> ZBool:
        return z3.Or(*bs) if bs else z3.BoolVal(False)

    def count(self, bs: Sequence[ZBool]) -> ZInt:
        return z3.Sum([z3.If(b, 1, 0) for b in bs]) if bs else z3.IntVal(0)

    def forall_offsets(self, lo: ZInt, hi: ZInt, pred: Callable[[ZInt], ZBool]) -> ZBool:
        o = z3.FreshInt("q")
        return z3.ForAll([o], z3.Implies(z3.And(lo <= o, o < hi), pred(o)))


def _chain(key: ZInt, table: Sequence[tuple[int, ZInt]], default: ZInt) -> ZInt:
    out = default
    for k, v in reversed(table):
        out = z3.If(key == k, v, out)
    return out


def _epoch_at_term(node: NodeState, o: ZInt) -> ZInt:
    """The epoch at offset o of the node's log: the last cache entry starting at or before o
    within [0, end); NONE outside."""
    inner: ZInt = z3.IntVal(NONE)
    for epoch, start in node.epochs:
        inner = z3.If(o >= start, z3.IntVal(int(epoch)), inner)
    return z3.If(z3.And(o >= 0, o < int(node.log_end_offset)), inner, z3.IntVal(NONE))


_INT = z3.IntSort()
_FUNCS = {
    name: z3.Function(name, _INT, _INT)
    for name in (
        "state",
        "epoch",
        "hwm",
        "end_offset",
        "last_epoch",
        "log_end",
        "log_last_epoch",
        "flushed",
    )
}


def _attrs(node: NodeState) -> dict[str, int]:
    return {
        "state": node_code(node),
        "epoch": node.epoch,
        "hwm": NONE if node.high_watermark is None else node.high_watermark,
        "end_offset": node.end_offset,
        "last_epoch": node.last_epoch,
        "log_end": node.log_end_offset,
        "log_last_epoch": node.log_last_epoch,
        "flushed": node.flushed_offset,
    }


class Z3View:
    """A ClusterState as z3 terms: scalar attributes are uninterpreted functions of the node
    id, fixed pointwise by `facts`; logs and the history are if-then-else terms."""

    def __init__(self, state: ClusterState) -> None:
        self._s = state
        self._logic = Z3Logic()
        self._ids = sorted(int(n) for n in state.nodes)
        self._present = [z3.IntVal(int(v)) for v in sorted(state.voters) if v in state.nodes]
        self.facts: list[ZBool] = [
            _FUNCS[name](z3.IntVal(int(nid))) == value
            for nid, node in sorted(state.nodes.items())
            for name, value in _attrs(node).items()
        ]

    @property
    def logic(self) -> Z3Logic:
        return self._logic

    @property
    def voter_count(self) -> int:
        return len(self._s.voters)

    @property
    def present_voters(self) -> Sequence[ZInt]:
        return self._present

    def state(self, n: ZInt) -> ZInt:
        return _FUNCS["state"](n)

    def epoch(self, n: ZInt) -> ZInt:
        return _FUNCS["epoch"](n)

    def hwm(self, n: ZInt) -> ZInt:
        return _FUNCS["hwm"](n)

    def end_offset(self, n: ZInt) -> ZInt:
        return _FUNCS["end_offset"](n)

    def last_epoch(self, n: ZInt) -> ZInt:
        return _FUNCS["last_epoch"](n)

    def log_end(self, n: ZInt) -> ZInt:
        return _FUNCS["log_end"](n)

    def log_last_epoch(self, n: ZInt) -> ZInt:
        return _FUNCS["log_last_epoch"](n)

    def flushed(self, n: ZInt) -> ZInt:
        return _FUNCS["flushed"](n)

    def epoch_at(self, n: ZInt, o: ZInt) -> ZInt:
        nodes = self._s.nodes
        table = [(i, _epoch_at_term(nodes[i], o)) for i in self._ids]  # type: ignore[index]
        return _chain(n, table, z3.IntVal(NONE))

    def was_leader(self, e: ZInt, n: ZInt) -> ZBool:
        return self._logic.any_of(
            [
                z3.And(e == int(ep), n == int(nid))
                for ep, ids in sorted(self._s.leaders.items())
                for nid in sorted(ids)
            ]
        )

    def _ack(self, k: ZInt, field: int) -> ZInt:
        acked = self._s.acknowledged
        table = [
            (i, z3.IntVal(int((r.first, r.last, r.epoch)[field]))) for i, r in enumerate(acked)
        ]
        return _chain(k, table, z3.IntVal(NONE))

    def ack_first(self, k: ZInt) -> ZInt:
        return self._ack(k, 0)

    def ack_last(self, k: ZInt) -> ZInt:
        return self._ack(k, 1)

    def ack_epoch(self, k: ZInt) -> ZInt:
        return self._ack(k, 2)

    def domain(self, kind: Kind, w: ZInt) -> ZBool:
        if kind is Kind.NODE:
            return self._logic.any_of([w == i for i in self._ids])
        if kind is Kind.ACK:
            return z3.And(w >= 0, w < len(self._s.acknowledged))
        return w >= 0


class Z3Checker:
    """One state, one solver: the state's facts are asserted once; each invariant's negation
    is checked in its own push/pop scope."""

    def __init__(self, state: ClusterState, *, timeout_ms: int = 20_000) -> None:
        self.view = Z3View(state)
        self.solver = z3.Solver()
        self.solver.set("timeout", timeout_ms)
        self.solver.add(*self.view.facts)

    def violation(self, d: InvariantDef) -> dict[str, int] | None:
        """A witness of d's violation found by z3 (names as in d.witnesses), or None if z3
        proves there is none."""
        ws = [z3.FreshInt(name) for name, _ in d.witnesses]
        s = self.solver
        s.push()
        try:
            for (_, kind), w in zip(d.witnesses, ws, strict=True):
                s.add(self.view.domain(kind, w))
            s.add(d.violated(self.view, ws))
            r = s.check()
            if r == z3.unknown:
                raise RuntimeError(f"z3 gave up on {d.name}: {s.reason_unknown()}")
            if r == z3.unsat:
                return None
            m = s.model()
            return {
                name: m.eval(w, model_completion=True).as_long()
                for (name, _), w in zip(d.witnesses, ws, strict=True)
            }
        finally:
            s.pop()

    def violations(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for d in DEFINITIONS:
            w = self.violation(d)
            if w is not None:
                out[d.name] = w
        return out


def z3_violations(state: ClusterState) -> dict[str, dict[str, int]]:
    """Every shared invariant z3 finds violated in `state`, with a witness each."""
    return Z3Checker(state).violations()


# --------------------------------------------------------------------------- lemmas


@dataclass(frozen=True, slots=True)
class ProofResult:
    lemma: str
    bound: str
    proved: bool
    # On failure: a counterexample (variable -> value) and which claim it breaks.
    counterexample: dict[str, int] | None = None
    claim: str = ""
    seconds: float = 0.0

    def __str__(self) -> str:
        if self.proved:
            return f"PROVED {self.lemma} ({self.bound}) in {self.seconds:.2f}s"
        return f"FAILED {self.lemma} ({self.bound}): {self.claim}: {self.counterexample}"


class MajorityFn(Protocol):
    def __call__(self, ops: Ops[N, B], n: N, /) -> N: ...


class HighWatermarkFn(Protocol):
    def __call__(self, ops: Ops[N, B], end_offsets: Sequence[N], majority: int, /) -> N: ...


class UpToDateFn(Protocol):
    def __call__(self, ops: Ops[N, B], a_epoch: N, a_end: N, b_epoch: N, b_end: N, /) -> B: ...


class BoundsFn(Protocol):
    def __call__(self, ops: Ops[N, B], x: N, /) -> tuple[N, N]: ...


class TimeoutFn(Protocol):
    def __call__(self, ops: Ops[N, B], timeout_ms: N, draw: N, /) -> N: ...


class SuccessorFn(Protocol):
    def __call__(
        self, ops: Ops[N, B], position: N, retry_backoff_ms: N, backoff_max_ms: N
    ) -> N: ...


def _refute(
    claims: Sequence[tuple[str, ZBool]], side: Sequence[ZBool], shown: Sequence[ZInt]
) -> tuple[str, dict[str, int]] | None:
    """For each (name, claim): is `side and not claim` satisfiable? The first that is gives
    its name and the values of `shown` in the model; None if every claim is valid."""
    s = z3.Solver()
    s.add(*side)
    for name, claim in claims:
        s.push()
        s.add(z3.Not(claim))
        r = s.check()
        if r == z3.unknown:
            raise RuntimeError(f"z3 gave up on {name}: {s.reason_unknown()}")
        if r == z3.sat:
            m = s.model()
            # The inputs only (named constants): enough to replay the counterexample.
            return name, {
                str(v): m.eval(v, model_completion=True).as_long()
                for v in shown
                if z3.is_const(v) and not z3.is_int_value(v)
            }
        s.pop()
    return None


def _result(
    lemma: str, bound: str, started: float, found: tuple[str, dict[str, int]] | None
) -> ProofResult:
    took = time.perf_counter() - started
    if found is None:
        return ProofResult(lemma, bound, True, seconds=took)
    return ProofResult(lemma, bound, False, found[1], found[0], took)


def prove_majorities_intersect(
    majority: MajorityFn = qm.majority_size, *, max_voters: int = 9, max_difference: int = 1
) -> ProofResult:
    """(a) A majority of voter set A and a majority of voter set B intersect whenever A and B
    differ by at most `max_difference` members, for sets of 1..max_voters voters.

    The property is invariant under renaming nodes, so every pair of sets is covered by the
    representatives A = {0..|A|-1}, B = A without its last r members plus s new ones
    (r + s <= max_difference); the quorums and majority sizes stay symbolic."""
    started = time.perf_counter()
    found: tuple[str, dict[str, int]] | None = None
    for na in range(1, max_voters + 1):
        for r in range(min(max_difference, na) + 1):
            for s_new in range(max_difference - r + 1):
                nb = na - r + s_new
                if not 1 <= nb <= max_voters:
                    continue
                set_a = set(range(na))
                set_b = set(range(na - r)) | set(range(na, na + s_new))
                found = _disjoint_majorities(majority, sorted(set_a), sorted(set_b))
                if found is not None:
                    break
            if found is not None:
                break
        if found is not None:
            break
    bound = f"voter sets of 1..{max_voters}, differing by <= {max_difference}"
    return _result("MajoritiesIntersect", bound, started, found)


def _disjoint_majorities(
    majority: MajorityFn, set_a: list[int], set_b: list[int]
) -> tuple[str, dict[str, int]] | None:
    """Can a majority of set_a and a majority of set_b be disjoint? Their witness if so."""
    qa = {i: z3.Bool(f"qa{i}") for i in set_a}
    qb = {i: z3.Bool(f"qb{i}") for i in set_b}

    def size(xs: Sequence[ZBool]) -> ZInt:
        return z3.Sum([z3.If(x, 1, 0) for x in xs])

    side = [
        size(list(qa.values())) >= majority(Z3, z3.IntVal(len(set_a))),
        size(list(qb.values())) >= majority(Z3, z3.IntVal(len(set_b))),
    ]
    meet = z3.Or([z3.And(qa[i], qb[i]) for i in set_a if i in qb])
    s = z3.Solver()
    s.add(*side, z3.Not(meet))
    if s.check() == z3.unsat:
        return None
    m = s.model()

    def mask(q: dict[int, ZBool]) -> int:
        return sum(1 << i for i, x in q.items() if z3.is_true(m.eval(x, model_completion=True)))

    return "majorities intersect", {
        "set_a": sum(1 << i for i in set_a),
        "set_b": sum(1 << i for i in set_b),
        "quorum_a": mask(qa),
        "quorum_b": mask(qb),
    }


def prove_high_watermark(
    high_watermark: HighWatermarkFn = qm.high_watermark,
    majority: MajorityFn = qm.majority_size,
    *,
    max_voters: int = 9,
) -> ProofResult:
    """(b) For n = 1..max_voters voters with any end offsets >= -1 (-1: not heard from), the
    HWM h computed from them is one of them, at least a majority have end offset >= h, and no
    larger value is reached by a majority."""
    started = time.perf_counter()
    found = None
    for n in range(1, max_voters + 1):
        ends = [z3.Int(f"end{i}") for i in range(n)]
        k = majority(PY, n)
        try:
            h = high_watermark(Z3, ends, k)
        except (ValueError, IndexError) as exc:
            found = ("defined for every voter count", {"voters": n, "majority": k})
            del exc
            break
        v = z3.Int("v")

        def reached(x: ZInt, ends: list[ZInt] = ends) -> ZInt:
            return z3.Sum([z3.If(e >= x, 1, 0) for e in ends])

        claims = [
            ("HWM is an end offset", z3.Or([h == e for e in ends])),
            ("a majority reached the HWM", reached(h) >= k),
            ("no larger offset is reached by a majority", z3.Implies(reached(v) >= k, v <= h)),
        ]
        found = _refute(claims, [e >= -1 for e in ends], [*ends, h, v])
        if found is not None:
            found = (found[0], {"voters": n, "majority": k, **found[1]})
            break
    return _result("HighWatermarkIsMajorityMaximum", f"1..{max_voters} voters", started, found)


def prove_log_up_to_date(up_to_date: UpToDateFn = qm.log_up_to_date) -> ProofResult:
    """(c) "At least as up-to-date" on (last epoch, end offset) is a total preorder, decided
    by the epoch first: over all non-negative integers (no bound)."""
    started = time.perf_counter()
    ea, oa, eb, ob, ec, oc = z3.Ints("epoch_a end_a epoch_b end_b epoch_c end_c")

    def geq(e1: ZInt, o1: ZInt, e2: ZInt, o2: ZInt) -> ZBool:
        return up_to_date(Z3, e1, o1, e2, o2)

    claims = [
        ("reflexive", geq(ea, oa, ea, oa)),
        (
            "transitive",
            z3.Implies(z3.And(geq(ea, oa, eb, ob), geq(eb, ob, ec, oc)), geq(ea, oa, ec, oc)),
        ),
        ("total", z3.Or(geq(ea, oa, eb, ob), geq(eb, ob, ea, oa))),
        ("a larger last epoch wins", z3.Implies(ea > eb, geq(ea, oa, eb, ob))),
        (
            "equal epochs compare end offsets",
            z3.Implies(ea == eb, geq(ea, oa, eb, ob) == (oa >= ob)),
        ),
    ]
    side = [x >= 0 for x in (ea, oa, eb, ob, ec, oc)]
    found = _refute(claims, side, [ea, oa, eb, ob, ec, oc])
    return _result(
        "LogUpToDateTotalPreorder", "all non-negative epochs and offsets", started, found
    )


def prove_election_timeout(
    timeout: TimeoutFn = qm.randomized_election_timeout,
    bounds: BoundsFn = qm.election_timeout_bounds,
    backoff_bounds: BoundsFn = qm.election_backoff_bounds,
) -> ProofResult:
    """(d1) For every timeout t >= 0 and draw in [0, t) (the replica's randrange(t)), the
    randomized timeout lies within election_timeout_bounds, which lie within [t, 2t); and the
    lost-election backoff bounds are a non-empty range of positive delays within
    [1, max(1, backoff max)]. No bound on t."""
    started = time.perf_counter()
    t, draw, bmax = z3.Ints("timeout draw backoff_max")
    lo, hi = bounds(Z3, t)
    x = timeout(Z3, t, draw)
    blo, bhi = backoff_bounds(Z3, bmax)
    positive = [
        ("timeout within its bounds", z3.And(lo <= x, x <= hi)),
        ("bounds within [t, 2t)", z3.And(t <= lo, lo <= hi, hi < 2 * t)),
    ]
    found = _refute(positive, [t >= 1, draw >= 0, draw < t], [t, draw, x, lo, hi])
    if found is None:
        found = _refute(
            [("no timeout when t is 0", z3.And(x == 0, lo == 0, hi == 0))],
            [t == 0, draw == 0],
            [t, x, lo, hi],
        )
    if found is None:
        found = _refute(
            [
                (
                    "backoff bounds",
                    z3.And(blo == 1, blo <= bhi, bhi == z3.If(bmax >= 1, bmax, 1)),
                )
            ],
            [bmax >= 0],
            [bmax, blo, bhi],
        )
    return _result("ElectionTimeoutBounds", "all timeouts >= 0", started, found)


def prove_successor_backoff(
    backoff: SuccessorFn = qm.successor_backoff_ms, *, max_position: int = 8
) -> ProofResult:
    """(d2) EndQuorumEpoch successor delays, for positions 0..max_position (a 9-voter list has
    8 successors after the first) and all retry backoff and backoff max >= 0: position 0
    does not wait; others wait within [min(retry, max), max]; a later position never waits
    less than an earlier one, and strictly longer while below the cap (so the preferred
    order is the order of elections)."""
    started = time.perf_counter()
    ops = Z3Ops(pow2_bound=max_position)
    p, q, retry, bmax = z3.Ints("position later_position retry_backoff backoff_max")
    d = backoff(ops, p, retry, bmax)
    d_later = backoff(ops, q, retry, bmax)
    side = [p >= 0, p <= max_position, q >= p, q <= max_position, retry >= 0, bmax >= 0]
    claims = [
        ("position 0 does not wait", z3.Implies(p == 0, d == 0)),
        ("never longer than the backoff max", d <= bmax),
        ("never negative", d >= 0),
        (
            "at least the retry backoff (capped) after position 0",
            z3.Implies(p >= 1, d >= z3.If(retry <= bmax, retry, bmax)),
        ),
        ("a later successor never waits less", d <= d_later),
        (
            "a later successor waits longer, up to the cap",
            z3.Implies(z3.And(p >= 1, p < q, retry >= 1, d_later < bmax), d < d_later),
        ),
    ]
    found = _refute(claims, side, [p, q, retry, bmax, d, d_later])
    return _result("SuccessorBackoffBounds", f"positions 0..{max_position}", started, found)


def prove_all() -> list[ProofResult]:
    return [
        prove_majorities_intersect(),
        prove_high_watermark(),
        prove_log_up_to_date(),
        prove_election_timeout(),
        prove_successor_backoff(),
    ]


if __name__ == "__main__":
    for r in prove_all():
        print(r)
