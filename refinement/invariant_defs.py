"""The state invariants of refinement/invariants.py, each written once as a formula over an
abstract logic, so that Python evaluation and z3 read the same definition.

A definition says when a state VIOLATES the invariant, given witness values: the nodes,
epochs, acknowledged ranges and offsets it is about. The invariant holds iff no witness
makes `violated` true. Two interpreters:

- `PyLogic` / `PyView` (here): witnesses are enumerated. Offsets range over the state's
  breakpoints (every constant the state contains, +-1, and 0): each log's epoch-at-offset
  function and every comparison in the formulas is constant between consecutive
  breakpoints, so a violating offset exists iff a violating breakpoint does.
- `Z3Logic` / `Z3View` (refinement/smt.py): witnesses are free z3 variables and offset
  quantifiers are real z3 quantifiers, so z3 searches all offsets itself.

Arithmetic comes from kraft.core.quorum_math's `Ops` (the majority size is its
`majority_size`, the one the replica uses). Encodings: node states are small ints (`DOWN`
for a stopped node), an unknown HWM is -1, an offset a log does not hold has epoch -1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from itertools import product
from typing import Generic, Protocol, TypeVar

from kraft.core.quorum_math import Ops as _Ops
from kraft.core.quorum_math import PyOps, majority_size, min_of
from kraft.core.vocabulary import ReplicaState
from refinement import invariants as inv
from refinement.invariants import ClusterState, NodeState

N = TypeVar("N")
B = TypeVar("B")

DOWN = -1
STATE_CODES: dict[ReplicaState, int] = {s: i for i, s in enumerate(ReplicaState)}
LEADER = STATE_CODES[ReplicaState.LEADER]
NONE = -1  # unknown HWM; epoch of an offset not in the log


class Logic(_Ops[N, B], Protocol):
    """`Ops` plus what the invariants need beyond arithmetic."""

    def true(self) -> B: ...
    def all_of(self, bs: Sequence[B]) -> B: ...
    def any_of(self, bs: Sequence[B]) -> B: ...
    def count(self, bs: Sequence[B]) -> N: ...
    def forall_offsets(self, lo: N, hi: N, pred: Callable[[N], B]) -> B:
        """pred holds at every offset o with lo <= o < hi."""
        ...


class View(Protocol, Generic[N, B]):
    """A ClusterState as terms of one logic. Node arguments are node ids."""

    @property
    def logic(self) -> Logic[N, B]: ...
    @property
    def voter_count(self) -> int: ...
    @property
    def present_voters(self) -> Sequence[N]:
        """The voters the state has a node for (the others hold nothing)."""
        ...

    def state(self, n: N) -> N: ...
    def epoch(self, n: N) -> N: ...
    def hwm(self, n: N) -> N: ...
    def end_offset(self, n: N) -> N: ...
    def last_epoch(self, n: N) -> N: ...
    def log_end(self, n: N) -> N: ...
    def log_last_epoch(self, n: N) -> N: ...
    def flushed(self, n: N) -> N: ...
    def epoch_at(self, n: N, o: N) -> N: ...
    def was_leader(self, e: N, n: N) -> B: ...
    def ack_first(self, k: N) -> N: ...
    def ack_last(self, k: N) -> N: ...
    def ack_epoch(self, k: N) -> N: ...


class Kind(Enum):
    NODE = "node"
    EPOCH = "epoch"
    ACK = "ack"
    OFFSET = "offset"


class Violated(Protocol):
    def __call__(self, v: View[N, B], w: Sequence[N]) -> B: ...


@dataclass(frozen=True, slots=True)
class InvariantDef:
    name: str
    witnesses: tuple[tuple[str, Kind], ...]
    violated: Violated


# --------------------------------------------------------------------------- definitions


def _election_safety(v: View[N, B], w: Sequence[N]) -> B:
    """Two different nodes were both leader of one epoch."""
    e, a, b = w
    lg = v.logic
    return lg.all_of([lg.not_(lg.eq(a, b)), v.was_leader(e, a), v.was_leader(e, b)])


def _same_epochs_below(v: View[N, B], a: N, b: N, hi: N) -> B:
    lg = v.logic
    return lg.forall_offsets(lg.lit(0), hi, lambda o: lg.eq(v.epoch_at(a, o), v.epoch_at(b, o)))


def _majority_reached_high_watermark(v: View[N, B], w: Sequence[N]) -> B:
    """A leader exposes HWM h > 0 but fewer than a majority of voters durably hold the
    leader's log below h (flushed, same epochs at every offset)."""
    (ld,) = w
    lg = v.logic
    h = v.hwm(ld)
    held = [
        lg.all_of(
            [
                lg.le(h, v.flushed(x)),
                lg.le(h, v.log_end(x)),
                lg.le(h, v.log_end(ld)),
                _same_epochs_below(v, ld, x, h),
            ]
        )
        for x in v.present_voters
    ]
    need = majority_size(lg, lg.lit(v.voter_count))
    return lg.all_of(
        [lg.eq(v.state(ld), lg.lit(LEADER)), lg.lt(lg.lit(0), h), lg.lt(lg.count(held), need)]
    )


def _log_matching(v: View[N, B], w: Sequence[N]) -> B:
    """Two logs hold a record of the same epoch at offset o but differ somewhere below o."""
    a, b, o = w
    lg = v.logic
    return lg.all_of(
        [
            lg.not_(lg.eq(a, b)),
            lg.le(lg.lit(0), o),
            lg.lt(o, v.log_end(a)),
            lg.lt(o, v.log_end(b)),
            lg.eq(v.epoch_at(a, o), v.epoch_at(b, o)),
            lg.not_(_same_epochs_below(v, a, b, o)),
        ]
    )


def _committed_never_lost(v: View[N, B], w: Sequence[N]) -> B:
    """A running node misses acknowledged offset o: it leads the range's epoch or a later
    one, or its HWM is above o, yet its log has another epoch (or nothing) at o."""
    n, k, o = w
    lg = v.logic
    first, last, epoch = v.ack_first(k), v.ack_last(k), v.ack_epoch(k)
    leads = lg.and_(lg.eq(v.state(n), lg.lit(LEADER)), lg.le(epoch, v.epoch(n)))
    below_hwm = min_of(lg, last, lg.sub(v.hwm(n), lg.lit(1)))
    top = lg.ite(leads, last, below_hwm)
    return lg.all_of(
        [
            lg.not_(lg.eq(v.state(n), lg.lit(DOWN))),
            lg.or_(leads, lg.lt(first, v.hwm(n))),
            lg.le(first, o),
            lg.le(o, top),
            lg.not_(lg.eq(v.epoch_at(n, o), epoch)),
        ]
    )


def _log_mirror(v: View[N, B], w: Sequence[N]) -> B:
    """A running node's view of its log end differs from the log it has."""
    (n,) = w
    lg = v.logic
    return lg.and_(
        lg.not_(lg.eq(v.state(n), lg.lit(DOWN))),
        lg.or_(
            lg.not_(lg.eq(v.end_offset(n), v.log_end(n))),
            lg.not_(lg.eq(v.last_epoch(n), v.log_last_epoch(n))),
        ),
    )


_N, _E, _K, _O = Kind.NODE, Kind.EPOCH, Kind.ACK, Kind.OFFSET

ELECTION_SAFETY = InvariantDef(
    inv.ELECTION_SAFETY, (("epoch", _E), ("a", _N), ("b", _N)), _election_safety
)
MAJORITY_REACHED_HIGH_WATERMARK = InvariantDef(
    inv.MAJORITY_REACHED_HIGH_WATERMARK, (("leader", _N),), _majority_reached_high_watermark
)
LOG_MATCHING = InvariantDef(inv.LOG_MATCHING, (("a", _N), ("b", _N), ("offset", _O)), _log_matching)
COMMITTED_NEVER_LOST = InvariantDef(
    inv.COMMITTED_NEVER_LOST, (("node", _N), ("ack", _K), ("offset", _O)), _committed_never_lost
)
LOG_MIRROR = InvariantDef(inv.LOG_MIRROR, (("node", _N),), _log_mirror)

DEFINITIONS: tuple[InvariantDef, ...] = (
    ELECTION_SAFETY,
    MAJORITY_REACHED_HIGH_WATERMARK,
    LOG_MATCHING,
    COMMITTED_NEVER_LOST,
    LOG_MIRROR,
)

# The Python checker of each definition (same name, same verdict on every state).
CHECKERS: dict[str, Callable[[ClusterState, None], inv.Violation | None]] = {
    inv.ELECTION_SAFETY: inv.election_safety,
    inv.MAJORITY_REACHED_HIGH_WATERMARK: inv.majority_reached_high_watermark,
    inv.LOG_MATCHING: inv.log_matching,
    inv.COMMITTED_NEVER_LOST: inv.committed_never_lost,
    inv.LOG_MIRROR: inv.log_mirror,
}


# --------------------------------------------------------------------------- Python logic


def node_code(node: NodeState) -> int:
    return DOWN if node.state is None else STATE_CODES[node.state]


class PyLogic(PyOps):
    __slots__ = ("offsets",)

    def __init__(self, offsets: Sequence[int]) -> None:
        # The breakpoints (sorted): the offsets a quantifier needs to look at.
        self.offsets = offsets

    def true(self) -> bool:
        return True

    def all_of(self, bs: Sequence[bool]) -> bool:
        return all(bs)

    def any_of(self, bs: Sequence[bool]) -> bool:
        return any(bs)

    def count(self, bs: Sequence[bool]) -> int:
        return sum(bs)

    def forall_offsets(self, lo: int, hi: int, pred: Callable[[int], bool]) -> bool:
        if lo >= hi:
            return True
        # lo itself starts the first piece; every later piece starts at a breakpoint.
        return pred(lo) and all(pred(o) for o in self.offsets if lo < o < hi)


def breakpoints(state: ClusterState) -> list[int]:
    """Every offset at which some formula can change its value, plus neighbours and 0."""
    consts: set[int] = {0}
    for n in state.nodes.values():
        consts.update(s for _, s in n.epochs)
        consts.update((n.end_offset, n.log_end_offset, n.flushed_offset))
        if n.high_watermark is not None:
            consts.add(n.high_watermark)
    for r in state.acknowledged:
        consts.update((r.first, r.last))
    return sorted({c + d for c in consts for d in (-1, 0, 1) if c + d >= 0})


class PyView:
    """A ClusterState read by PyLogic."""

    def __init__(self, state: ClusterState) -> None:
        self._s = state
        self._logic = PyLogic(breakpoints(state))
        self._present = [int(v) for v in sorted(state.voters) if v in state.nodes]

    @property
    def logic(self) -> PyLogic:
        return self._logic

    @property
    def voter_count(self) -> int:
        return len(self._s.voters)

    @property
    def present_voters(self) -> Sequence[int]:
        return self._present

    def _n(self, n: int) -> NodeState:
        return self._s.nodes[n]  # type: ignore[index]  # NodeId is an int

    def state(self, n: int) -> int:
        return node_code(self._n(n))

    def epoch(self, n: int) -> int:
        return self._n(n).epoch

    def hwm(self, n: int) -> int:
        h = self._n(n).high_watermark
        return NONE if h is None else h

    def end_offset(self, n: int) -> int:
        return self._n(n).end_offset

    def last_epoch(self, n: int) -> int:
        return self._n(n).last_epoch

    def log_end(self, n: int) -> int:
        return self._n(n).log_end_offset

    def log_last_epoch(self, n: int) -> int:
        return self._n(n).log_last_epoch

    def flushed(self, n: int) -> int:
        return self._n(n).flushed_offset

    def epoch_at(self, n: int, o: int) -> int:
        node = self._n(n)
        e = inv.epoch_at(node.epochs, node.log_end_offset, o)  # type: ignore[arg-type]
        return NONE if e is None else e

    def was_leader(self, e: int, n: int) -> bool:
        return n in self._s.leaders.get(e, frozenset())  # type: ignore[call-overload]

    def ack_first(self, k: int) -> int:
        return self._s.acknowledged[k].first

    def ack_last(self, k: int) -> int:
        return self._s.acknowledged[k].last

    def ack_epoch(self, k: int) -> int:
        return self._s.acknowledged[k].epoch

    def domain(self, kind: Kind) -> list[int]:
        s = self._s
        if kind is Kind.NODE:
            return sorted(int(n) for n in s.nodes)
        if kind is Kind.EPOCH:
            return sorted({int(e) for e in s.leaders} | {int(n.epoch) for n in s.nodes.values()})
        if kind is Kind.ACK:
            return list(range(len(s.acknowledged)))
        return list(self._logic.offsets)


def witnesses(view: PyView, d: InvariantDef) -> Iterator[tuple[int, ...]]:
    return product(*(view.domain(kind) for _, kind in d.witnesses))


def py_violation(state: ClusterState, d: InvariantDef) -> dict[str, int] | None:
    """A witness of `d`'s violation in `state` by Python evaluation, or None if it holds."""
    view = PyView(state)
    for w in witnesses(view, d):
        if d.violated(view, w):
            return {name: value for (name, _), value in zip(d.witnesses, w, strict=True)}
    return None
