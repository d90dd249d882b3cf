"""The quorum arithmetic the replica relies on, written once for two interpreters.

Each function takes an `Ops` value and uses only its operations (and integer constants), so
the same body runs on Python ints (`PY`, what the replica calls) and on z3 terms (the
refinement proofs in refinement/smt.py pass a z3 interpretation). A lemma proved over z3
terms is then a lemma about the very function the replica evaluates.

Voter lists are Python sequences (their length is concrete); the values in them may be
symbolic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

N = TypeVar("N")  # integer (number) terms
B = TypeVar("B")  # boolean terms


class Ops(Protocol, Generic[N, B]):
    """The operations the functions below may use: integer arithmetic, comparisons, `ite`."""

    def lit(self, v: int) -> N: ...
    def add(self, a: N, b: N) -> N: ...
    def sub(self, a: N, b: N) -> N: ...
    def mul(self, a: N, b: N) -> N: ...
    def floordiv(self, a: N, d: int) -> N: ...
    def le(self, a: N, b: N) -> B: ...
    def lt(self, a: N, b: N) -> B: ...
    def eq(self, a: N, b: N) -> B: ...
    def and_(self, a: B, b: B) -> B: ...
    def or_(self, a: B, b: B) -> B: ...
    def not_(self, a: B) -> B: ...
    def ite(self, c: B, a: N, b: N) -> N: ...
    def pow2(self, e: N) -> N:
        """2**e for 0 <= e (an interpreter may bound e; see the z3 one)."""
        ...


class PyOps:
    """Plain Python ints and bools."""

    __slots__ = ()

    def lit(self, v: int) -> int:
        return v

    def add(self, a: int, b: int) -> int:
        return a + b

    def sub(self, a: int, b: int) -> int:
        return a - b

    def mul(self, a: int, b: int) -> int:
        return a * b

    def floordiv(self, a: int, d: int) -> int:
        return a // d

    def le(self, a: int, b: int) -> bool:
        return a <= b

    def lt(self, a: int, b: int) -> bool:
        return a < b

    def eq(self, a: int, b: int) -> bool:
        return a == b

    def and_(self, a: bool, b: bool) -> bool:
        return a and b

    def or_(self, a: bool, b: bool) -> bool:
        return a or b

    def not_(self, a: bool) -> bool:
        return not a

    def ite(self, c: bool, a: int, b: int) -> int:
        return a if c else b

    def pow2(self, e: int) -> int:
        return 1 << e


PY = PyOps()


def min_of(ops: Ops[N, B], a: N, b: N) -> N:
    return ops.ite(ops.le(a, b), a, b)


def max_of(ops: Ops[N, B], a: N, b: N) -> N:
    return ops.ite(ops.le(a, b), b, a)


# --------------------------------------------------------------------------- quorums


def majority_size(ops: Ops[N, B], n: N) -> N:
    """The smallest number of voters that is more than half of `n`: floor(n/2) + 1."""
    return ops.add(ops.floordiv(n, 2), ops.lit(1))


def sorted_desc(ops: Ops[N, B], values: Sequence[N]) -> list[N]:
    """`values` sorted largest first, by compare-exchange (odd-even transposition sort), so
    that the sort is a fixed network of min/max on symbolic values too."""
    out = list(values)
    n = len(out)
    for rnd in range(n):
        for i in range(rnd % 2, n - 1, 2):
            a, b = out[i], out[i + 1]
            out[i], out[i + 1] = max_of(ops, a, b), min_of(ops, a, b)
    return out


def high_watermark(ops: Ops[N, B], end_offsets: Sequence[N], majority: int) -> N:
    """The HWM candidate of a leader: the `majority`-th largest of the voters' end offsets
    (its own included; -1 for a voter not heard from). Needs len(end_offsets) >= majority."""
    if not 1 <= majority <= len(end_offsets):
        raise ValueError(f"majority {majority} of {len(end_offsets)} end offsets")
    return sorted_desc(ops, end_offsets)[majority - 1]


def high_watermark_fast(end_offsets: Sequence[int], majority: int) -> int:
    """`high_watermark` on plain ints with the built-in sort instead of the quadratic network,
    for the fetch path; tests check that it agrees with `high_watermark(PY, ...)`."""
    if not 1 <= majority <= len(end_offsets):
        raise ValueError(f"majority {majority} of {len(end_offsets)} end offsets")
    return sorted(end_offsets, reverse=True)[majority - 1]


# --------------------------------------------------------------------------- elections


def log_up_to_date(ops: Ops[N, B], a_epoch: N, a_end: N, b_epoch: N, b_end: N) -> B:
    """KIP-595: log a (last epoch, end offset) is at least as up-to-date as log b: a larger
    last epoch wins, equal epochs compare end offsets."""
    return ops.or_(
        ops.lt(b_epoch, a_epoch),
        ops.and_(ops.eq(a_epoch, b_epoch), ops.le(b_end, a_end)),
    )


def election_timeout_bounds(ops: Ops[N, B], timeout_ms: N) -> tuple[N, N]:
    """Inclusive bounds of a randomized election timeout: [t, 2t - 1] (0 when t is 0)."""
    zero = ops.lit(0)
    positive = ops.lt(zero, timeout_ms)
    hi = ops.sub(ops.mul(ops.lit(2), timeout_ms), ops.lit(1))
    return ops.ite(positive, timeout_ms, zero), ops.ite(positive, hi, zero)


def randomized_election_timeout(ops: Ops[N, B], timeout_ms: N, draw: N) -> N:
    """The election timeout for a uniform `draw` in [0, t): t + draw (0 when t is 0)."""
    zero = ops.lit(0)
    return ops.ite(ops.lt(zero, timeout_ms), ops.add(timeout_ms, draw), zero)


def randomized_fetch_timeout(ops: Ops[N, B], fetch_timeout_ms: N, draw: N) -> N:
    """A voter's fetch timeout for a uniform `draw` in [0, election timeout / 2)."""
    return ops.add(fetch_timeout_ms, draw)


def election_backoff_bounds(ops: Ops[N, B], backoff_max_ms: N) -> tuple[N, N]:
    """Inclusive bounds of the backoff after a lost election: [1, max(1, backoff max)]."""
    one = ops.lit(1)
    return one, max_of(ops, one, backoff_max_ms)


def successor_backoff_ms(ops: Ops[N, B], position: N, retry_backoff_ms: N, backoff_max_ms: N) -> N:
    """KIP-595 EndQuorumEpoch: the successor at `position` N of the preferred list waits
    MIN(backoff max, retry backoff * 2^(N-1)) before its election; N = 0 does not wait."""
    zero = ops.lit(0)
    # Both branches are evaluated on ints too: keep the exponent of N = 0 in range.
    exp = max_of(ops, zero, ops.sub(position, ops.lit(1)))
    delay = min_of(ops, backoff_max_ms, ops.mul(retry_backoff_ms, ops.pow2(exp)))
    return ops.ite(ops.le(position, zero), zero, delay)
