"""The mutant generator (refinement.mutation.generate): deterministic, stable ids, valid
one-splice mutants, and nothing generated where the issue says not to mutate."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from refinement.mutation.campaign import EQUIVALENTS
from refinement.mutation.generate import (
    OPERATORS,
    check_mutant,
    generate,
    mutants_of_source,
    sample,
)
from refinement.mutation.report import load_equivalents

IMPL = Path(__file__).resolve().parents[2] / "impl"


def test_the_generator_is_deterministic_and_its_ids_are_unique():
    first = generate(IMPL)
    again = generate(IMPL)
    assert [m.id for m in first] == [m.id for m in again]
    assert first == again
    assert len({m.id for m in first}) == len(first) > 1000
    # Every operator of the module docstring occurs in the core.
    assert set(Counter(m.operator for m in first)) == set(OPERATORS)


def test_every_listed_equivalent_is_a_mutant_of_the_current_core():
    """An id hashes its site's text, so an edit of that line retires the id: its entry must
    go (or be judged again under its new id) rather than linger as a reason nobody reads."""
    current = {m.id for m in generate(IMPL)}
    stale = sorted(set(load_equivalents(EQUIVALENTS)) - current)
    assert stale == [], f"equivalent.toml lists mutants the core no longer has: {stale}"


def test_a_sample_is_deterministic_and_in_file_order():
    every = generate(IMPL)
    a, b, c = sample(every, 12, 1), sample(every, 12, 1), sample(every, 12, 2)
    assert a == b and len(a) == 12 and a != c
    assert a == [m for m in every if m in a]


def test_a_sample_keeps_its_mutants_when_others_come_and_go():
    every = generate(IMPL)
    drawn = sample(every, 12, 7)
    ids = {m.id for m in drawn}
    # Dropping every third mutant the draw did not take redraws nothing.
    dropped = {m.id for m in every if m.id not in ids}
    dropped = set(sorted(dropped)[::3])
    fewer = [m for m in every if m.id not in dropped]
    assert len(fewer) < len(every) - 100
    assert {m.id for m in sample(fewer, 12, 7)} == ids
    # Dropping one drawn mutant replaces just that one.
    gone = drawn[0]
    redrawn = {m.id for m in sample([m for m in every if m != gone], 12, 7)}
    assert len(redrawn & ids) == 11 and gone.id not in redrawn


@pytest.mark.parametrize("file", ["kraft/core/commits.py", "kraft/core/quorum_math.py"])
def test_every_mutant_is_one_valid_different_program(file):
    source = (IMPL / file).read_text(encoding="utf-8")
    dump = ast.dump(ast.parse(source))
    mutants = mutants_of_source(file, source)
    assert mutants
    for m in mutants:
        assert check_mutant(m, source, dump) is None, m.describe()
        diff = m.diff(source)
        assert diff.startswith(f"--- a/impl/{file}\n+++ b/impl/{file}\n")
        assert sum(1 for ln in diff.splitlines() if ln.startswith("-") and ln[1:2] != "-") >= 1


def test_ids_survive_edits_elsewhere_in_the_file():
    source = (IMPL / "kraft/core/commits.py").read_text(encoding="utf-8")
    before = {m.id: m for m in mutants_of_source("kraft/core/commits.py", source)}
    edited = "# a comment line\n\n" + source.replace("\n\n\ndef _lost", "\n\n\n# x\ndef _lost")
    after = {m.id: m for m in mutants_of_source("kraft/core/commits.py", edited)}
    assert set(before) == set(after)
    some = next(iter(before))
    assert after[some].line == before[some].line + 2


SKIPPED = '''
"""Docstring with 1 < 2."""
from typing import TYPE_CHECKING
from enum import Enum
if TYPE_CHECKING:
    X = 1 + 2
__all__ = ["f"]
class Kind(Enum):
    A = 1
class C:
    __slots__ = ("a",)
    def __repr__(self) -> str:
        return f"C({1 + 2})"
    def f(self, x: "int" = 3) -> "bool":
        """Doc 1 < 2."""
        assert x < 3, "message"
        log.debug("x %d", x + 1)
        if x:
            raise ValueError(f"bad {x + 1}")
        return x < 4
'''


def test_nothing_is_mutated_where_it_should_not_be():
    mutants = mutants_of_source("kraft/core/x.py", SKIPPED)
    described = sorted((m.line, m.operator, m.original, m.replacement) for m in mutants)
    assert described == [
        (14, "const", "3", "2"),
        (14, "const", "3", "4"),
        (18, "cond-negate", "x", "not x"),
        (20, "cmp-boundary", "x < 4", "x <= 4"),
        (20, "cmp-negate", "x < 4", "x >= 4"),
        (20, "const", "4", "3"),
        (20, "const", "4", "5"),
    ]


def test_effects_are_deleted_and_swapped():
    source = "def f(r):\n    r._out.append(1)\n    r._send(2)\n    r.x = 3\n"
    mutants = mutants_of_source("kraft/core/x.py", source)
    deleted = [m for m in mutants if m.operator == "stmt-delete"]
    swapped = [m for m in mutants if m.operator == "stmt-swap"]
    assert len(deleted) == 3 and len(swapped) == 2
    assert deleted[0].apply(source).splitlines()[1] == "    pass"
    assert swapped[0].apply(source).splitlines()[1:3] == ["    r._send(2)", "    r._out.append(1)"]


SWAPS = """from __future__ import annotations
from typing import NewType
Offset = NewType("Offset", int)
class R:
    def f(self, r, end):
        self.a = Offset(end)
        r.b: list[int] = []
        self.c = r.b
        self.d = 0
        self.e = r.take()
        self.g = 1
        self.h[end] = 2
        self.i = 3
"""


def test_independent_assignments_are_not_swapped():
    mutants = mutants_of_source("kraft/core/x.py", SWAPS)
    swapped = {m.original for m in mutants if m.operator == "stmt-swap"}
    assert swapped == {
        # `self.c = r.b` reads the target of the statement before it.
        "r.b: list[int] = []; self.c = r.b",
        # A call of a method may read or write anything.
        "self.d = 0; self.e = r.take()",
        "self.e = r.take(); self.g = 1",
        # A subscript target: the index or the container may alias.
        "self.g = 1; self.h[end] = 2",
        "self.h[end] = 2; self.i = 3",
    }
    # Skipped: `self.a = Offset(end); r.b = []` (a NewType and an empty list, distinct fields)
    # and `self.c = r.b; self.d = 0` (reading a field neither writes).
    # The ids of the other mutants do not change when the rule skips a site.
    plain = SWAPS.replace("        r.b: list[int] = []\n", "")
    kept = {m.id for m in mutants_of_source("kraft/core/x.py", plain)}
    assert {m.id for m in mutants if "r.b" not in m.original} <= kept


def test_a_swap_of_the_same_field_or_a_dependent_pair_is_kept():
    source = "def f(a, b):\n    a.x = 1\n    b.x = 2\n    a.y = 1\n    b.z = a.y\n"
    swapped = [m.original for m in mutants_of_source("kraft/core/x.py", source)]
    assert "a.x = 1; b.x = 2" in swapped  # a and b may be one object
    assert "a.y = 1; b.z = a.y" in swapped
    assert "b.x = 2; a.y = 1" not in swapped


OWN_FIELDS = """
from __future__ import annotations


class Other:
    @property
    def voters(self) -> int:
        return 0


class State:
    def __init__(self) -> None:
        self.voters: dict[int, int] = {}
        self.observers: dict[int, int] = {}
        self.count = 0


class Kept:
    voters = Other()

    def __init__(self) -> None:
        self.voters: dict[int, int] = {}
        self.observers: dict[int, int] = {}


class Base:
    def reset(self, other: Base) -> None:
        self.voters: dict[int, int] = {}
        self.observers: dict[int, int] = {}
        other.voters = {}
        other.observers = {}


class Sub(Base):
    pass
"""


def test_own_fields_of_a_plain_class_are_no_property_named_elsewhere():
    swaps = [
        m for m in mutants_of_source("kraft/core/x.py", OWN_FIELDS) if m.operator == "stmt-swap"
    ]
    by_function: dict[str, set[str]] = {}
    for m in swaps:
        by_function.setdefault(m.function, set()).add(m.original)
    # `voters` is a property of Other, but State's own `self.voters` cannot be one: State has
    # no base, no subclass and no property of that name, so no pair of its __init__ is swapped.
    assert "State.__init__" not in by_function
    # Kept binds `voters` in its body (a descriptor may hide there), Base has a subclass, and
    # `other` is not the method's own instance: those swaps stay.
    pair = "self.voters: dict[int, int] = {}; self.observers: dict[int, int] = {}"
    assert by_function["Kept.__init__"] == {pair}
    assert pair in by_function["Base.reset"]
    assert "other.voters = {}; other.observers = {}" in by_function["Base.reset"]


FROM_PARAMETERS = """
from __future__ import annotations


class Timer:
    def __init__(self, at: int, every: int) -> None:
        self.at = at
        self.every = every


at = 0


def configure(cfg: object, every: int) -> None:
    cfg.at = every
    cfg.every = at
"""


def test_own_fields_set_from_like_named_parameters_are_not_swapped():
    swapped = {
        m.function: m.original
        for m in mutants_of_source("kraft/core/x.py", FROM_PARAMETERS)
        if m.operator == "stmt-swap"
    }
    # `self.at = at`: a field of the method's own plain instance is no variable, so the
    # parameter `at` reads the same before or after `self.every = every`.
    assert "Timer.__init__" not in swapped
    # `cfg` may be this module, whose attribute `at` is the global `at` read next: kept.
    assert swapped["configure"] == "cfg.at = every; cfg.every = at"
