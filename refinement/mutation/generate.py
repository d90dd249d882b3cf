"""The mutants of the pure core: an AST mutator over impl/kraft/core/*.py.

Why our own mutator and not mutmut or cosmic-ray: a campaign task here applies ONE mutant to
an isolated copy of the package and runs the project's own layered checks against it (the
scenarios, a simulator sweep, the hypothesis machine, TLC trace validation), cheapest first,
on Spark executors. mutmut (3.x) instead rewrites every function of the package at once into
trampolines switched by an environment variable and drives pytest itself, from its own
`mutants/` tree; cosmic-ray keeps its work list in a session database, mutates files in place
in the working tree it runs in and identifies mutants by job UUIDs. Neither gives a stable id
for a mutant nor a single small patch to apply elsewhere, and both would need adapters to run
anything but a test command. The stdlib `ast` does the job in a few hundred lines.

Each mutant is ONE splice of the file's text (start, end, replacement text), so its diff is
the line it touches and the rest of the file, comments and formatting, stays as it is.
A replacement always binds at least as tightly as what it replaces (see `_text_of`), so a
splice never changes how the code around it parses.

Operators:
- cmp-boundary: < <-> <=, > <-> >=;   cmp-negate: < <-> >=, <= <-> >, == <-> !=, is <-> is not,
  in <-> not in;
- bool-drop: drop one operand of an `and` / `or`;   not-drop: `not x` -> `x`;
- cond-negate: the test of an if / while / conditional expression -> `not (test)`;
- arith: + <-> -, * -> //, // -> *, / -> *, % -> //, and the same for augmented assignments;
- const: an int or float k -> k + 1 and k - 1 (0 -> 1 only), True <-> False;
- minmax: min( <-> max(;
- stmt-delete: a call statement (an effect such as `r._out.append(...)`, a state change through
  a method), or an assignment to an attribute or a subscript (state), becomes `pass`;
- stmt-swap: two adjacent such statements trade places (effect order), except a pair that is
  independent by construction (below).

Independent swaps are not generated. Two adjacent statements commute, and their swap is the same
program, when each is a plain assignment (`=` or an annotated `=` under postponed annotations,
no augmented assignment) whose targets are attributes `name.attr` (or `name.a.b`) that are no
property, the attribute names of the two statements are all distinct (so no object identity can
make them one field), and each right-hand side is built only of constants, names, attributes
that are no property and not named like either statement's targets, tuples, the operators `+ -
*`, unary `-`, `and or not` unless a core module defines a method that could run for it
(`__add__`..., `__bool__`, `__len__`), and calls of an empty container (`[]`, `{}`, `list()`,
`set()`, `dict()`, `deque()`, ...) or of a constructor of an immutable value (a NewType, a
frozen dataclass without `__post_init__`, `int`, `str`, `tuple`, `frozenset`, ...) with such
arguments. Nothing in such a right-hand side runs code of the program, reads either field,
indexes or divides (no KeyError, IndexError or ZeroDivisionError to tell which ran first), so
the state after the pair is the same either way. A name may be read under a target's attribute
name only when both targets are fields of the method's own instance (below), which no variable
shares. A subscript target, a method call or any other
call keeps the swap. "Property" and "frozen dataclass" are read from every core file (`generate`
passes them; `mutants_of_source` alone sees its own file). A field is "no property" when no core
class defines a property of that name, except a field of the method's own instance: in a method
(undecorated, its first parameter never rebound) of a class with no base, no decorator, no
subclass in the core and no `__setattr__`/`__getattr__`-like hook, `self.voters` is a property
only if that class defines one or binds the name in its body (`self` is then of that class
exactly), whatever other classes call their properties. Skipping a site changes no other
mutant's id: an id hashes the site's own text, and the occurrence number counts only identical
sites, which are skipped alike.

Not mutated: docstrings and strings (messages), f-strings, `assert` statements, `raise`
statements (error construction), type annotations, decorators, `if TYPE_CHECKING:` blocks,
`__repr__` / `__str__` / `__format__`, `__slots__` / `__all__` / `__match_args__`, the members
of Enum classes, logging calls, `cast(...)`.

Stable id: the first 12 hex digits of the SHA-256 of (file, enclosing qualified name,
operator, the site's source and its replacement, both as `ast.unparse` gives them, and the
occurrence number of that same tuple in the file). Unlike a line number it survives edits
elsewhere in the file and reformatting, so the equivalents file keeps pointing at the right
mutants.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

CORE_GLOB = "kraft/core/*.py"

OPERATORS: tuple[str, ...] = (
    "cmp-boundary",
    "cmp-negate",
    "bool-drop",
    "not-drop",
    "cond-negate",
    "arith",
    "const",
    "minmax",
    "stmt-delete",
    "stmt-swap",
)

_CMP_BOUNDARY: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
}
_CMP_NEGATE: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.LtE: ast.Gt,
    ast.Gt: ast.LtE,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_ARITH: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.FloorDiv: ast.Mult,
    ast.Div: ast.Mult,
    ast.Mod: ast.FloorDiv,
}
_SKIP_FUNCTIONS = frozenset({"__repr__", "__str__", "__format__"})
_SKIP_NAMES = frozenset({"__slots__", "__all__", "__match_args__"})
_LOGGERS = frozenset({"log", "logger", "_log", "_logger", "logging", "LOG"})
_SKIP_CALLS = frozenset({"cast", "NewType", "TypeVar"})
# Calls whose result is a fresh empty container when given no argument.
_EMPTY_CONTAINERS = frozenset({"list", "dict", "set", "deque", "OrderedDict", "defaultdict"})
# The operators a right-hand side may use, with the methods that could run code for them
# (truth testing for `and`, `or`, `not`); one the modules define keeps the swap.
_TRUTH = {"__bool__", "__len__"}
_OPERATOR_HOOKS: dict[type[ast.AST], set[str]] = {
    ast.And: _TRUTH,
    ast.Or: _TRUTH,
    ast.Not: _TRUTH,
    ast.USub: {"__neg__"},
    ast.Add: {"__add__", "__radd__"},
    ast.Sub: {"__sub__", "__rsub__"},
    ast.Mult: {"__mul__", "__rmul__"},
}
# Builtin constructors of immutable values.
_IMMUTABLE_BUILTINS = frozenset({"int", "str", "bool", "float", "tuple", "frozenset", "bytes"})


@dataclass(frozen=True, slots=True)
class Facts:
    """What the independent-swap rule needs to know about the modules: the names of
    properties (an attribute read or write that runs code) and of constructors of immutable
    values defined there (NewTypes, frozen dataclasses without `__post_init__`)."""

    properties: frozenset[str] = frozenset()
    immutable: frozenset[str] = frozenset()
    hooks: frozenset[str] = frozenset()  # the dunder methods the modules define
    subclassed: frozenset[str] = frozenset()  # the names of the bases of the modules' classes

    @staticmethod
    def of(sources: Iterable[str]) -> Facts:
        props: set[str] = set()
        immutable: set[str] = set()
        hooks: set[str] = set()
        bases: set[str] = set()
        for source in sources:
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.ClassDef):
                    bases.update(_name_of(b) for b in node.bases)
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    if node.name.startswith("__") and node.name.endswith("__"):
                        hooks.add(node.name)
                    for d in node.decorator_list:
                        name = d.id if isinstance(d, ast.Name) else getattr(d, "attr", "")
                        if name in ("property", "cached_property", "setter", "getter", "deleter"):
                            props.add(node.name)
                elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    if _call_name(node.value) == "NewType":
                        immutable.update(t.id for t in node.targets if isinstance(t, ast.Name))
                elif isinstance(node, ast.ClassDef) and _frozen_dataclass(node):
                    methods = [b for b in node.body if isinstance(b, ast.FunctionDef)]
                    if all(b.name != "__post_init__" for b in methods):
                        immutable.add(node.name)
        return Facts(frozenset(props), frozenset(immutable), frozenset(hooks), frozenset(bases))


def _name_of(e: ast.expr) -> str:
    """The name a base class expression ends in (`Base`, `mod.Base`, `Generic[T]` -> Generic)."""
    if isinstance(e, ast.Subscript):
        e = e.value
    if isinstance(e, ast.Name):
        return e.id
    return e.attr if isinstance(e, ast.Attribute) else ""


_PROPERTY_DECORATORS = frozenset({"property", "cached_property", "setter", "getter", "deleter"})
_ATTRIBUTE_HOOKS = frozenset({"__setattr__", "__getattr__", "__getattribute__", "__delattr__"})


@dataclass(frozen=True, slots=True)
class _Self:
    """Inside a method of a class `C` that has no base, no decorator, no subclass in the core
    and no attribute hook: `name` (the first parameter, never rebound) is a `C` itself, so an
    attribute `name.attr` is a property only if `C` defines one (`props`); `C`'s own names
    bound in its body to a value (a descriptor may hide there) count as properties too."""

    name: str
    props: frozenset[str]


def _self_of(
    cls: ast.ClassDef, fn: ast.FunctionDef | ast.AsyncFunctionDef, facts: Facts
) -> _Self | None:
    if cls.bases or cls.keywords or cls.decorator_list or cls.name in facts.subclassed:
        return None
    params = [*fn.args.posonlyargs, *fn.args.args]
    if fn.decorator_list or not params:
        return None
    name = params[0].arg
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            return None
        if isinstance(node, ast.Global | ast.Nonlocal) and name in node.names:
            return None
        if isinstance(node, ast.arg) and node is not params[0] and node.arg == name:
            return None
    props: set[str] = set()
    for b in cls.body:
        if isinstance(b, ast.FunctionDef | ast.AsyncFunctionDef):
            if b.name in _ATTRIBUTE_HOOKS:
                return None
            if any(_name_of(d) in _PROPERTY_DECORATORS for d in b.decorator_list):
                props.add(b.name)
        elif isinstance(b, ast.Assign):
            props.update(t.id for t in b.targets if isinstance(t, ast.Name))
        elif (
            isinstance(b, ast.AnnAssign) and b.value is not None and isinstance(b.target, ast.Name)
        ):
            props.add(b.target.id)
    return _Self(name, frozenset(props))


def _frozen_dataclass(cls: ast.ClassDef) -> bool:
    calls = [d for d in cls.decorator_list if isinstance(d, ast.Call)]
    return any(
        _call_name(d) == "dataclass"
        and any(
            k.arg == "frozen" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in d.keywords
        )
        for d in calls
    )


@dataclass(frozen=True, slots=True)
class Mutant:
    """One mutant: a splice of `file`'s text (characters start..end become `text`)."""

    id: str
    file: str  # relative to impl/, e.g. "kraft/core/leader.py"
    line: int  # 1-based line of the site
    col: int  # 0-based column (characters)
    operator: str
    function: str  # qualified name of the enclosing function or class; "" at module level
    original: str  # the site, as ast.unparse gives it
    replacement: str  # what it becomes
    start: int
    end: int
    text: str

    @property
    def module(self) -> str:
        return self.file.removesuffix(".py").replace("/", ".")

    def apply(self, source: str) -> str:
        return source[: self.start] + self.text + source[self.end :]

    def diff(self, source: str) -> str:
        """The unified diff of the mutant against `source` (paths as in the checkout)."""
        old = source.splitlines(keepends=True)
        new = self.apply(source).splitlines(keepends=True)
        path = f"impl/{self.file}"
        return "".join(difflib.unified_diff(old, new, f"a/{path}", f"b/{path}", n=2))

    def describe(self) -> str:
        return (
            f"{self.id} {self.file}:{self.line} [{self.operator}]"
            f" {self.original!r} -> {self.replacement!r}"
        )


@dataclass(frozen=True, slots=True)
class _Site:
    node: ast.AST  # where the splice starts
    last: ast.AST  # where it ends (the same node but for swaps)
    operator: str
    original: str
    replacement: str
    text: str | None  # None: the replacement as _text_of writes it
    new: ast.AST | None = None


def _text_of(new: ast.AST) -> str:
    """The replacement's text. Every operator replaces a node by one that binds at least as
    tightly in the node's place (a comparison by a comparison, `a + b` by `a - b`, a boolean
    operation by one of its operands, a test by its negation, which ast.unparse parenthesizes
    inside), and the parentheses the original needed around it lie outside its span; only a
    negative number is parenthesized, to be safe."""
    src = ast.unparse(new)
    if isinstance(new, ast.Constant) and isinstance(new.value, int | float) and new.value < 0:
        return f"({src})"
    return src


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_enum(cls: ast.ClassDef) -> bool:
    for base in cls.bases:
        name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
        if isinstance(name, str) and (name.endswith("Enum") or name.endswith("Flag")):
            return True
    return False


def _call_name(call: ast.Call) -> str:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return ""


def _is_logging(call: ast.Call) -> bool:
    f = call.func
    return isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in _LOGGERS


def _is_effect(stmt: ast.stmt) -> bool:
    """A statement whose removal or reordering changes what the core does: a call statement
    (not logging) or an assignment to an attribute or a subscript."""
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, ast.Call) and not _is_logging(stmt.value)
    if isinstance(stmt, ast.Assign):
        names = [t for t in stmt.targets if isinstance(t, ast.Name)]
        if any(t.id in _SKIP_NAMES for t in names):
            return False
        return all(isinstance(t, ast.Attribute | ast.Subscript) for t in stmt.targets)
    if isinstance(stmt, ast.AugAssign | ast.AnnAssign):
        return stmt.value is not None and isinstance(stmt.target, ast.Attribute | ast.Subscript)
    if isinstance(stmt, ast.Delete):
        return all(isinstance(t, ast.Attribute | ast.Subscript) for t in stmt.targets)
    return False


def _assigned_attrs(
    stmt: ast.stmt, facts: Facts, postponed: bool, me: _Self | None = None
) -> list[str] | None:
    """The attribute names a plain assignment to `name.attr` targets writes, or None if
    `stmt` is not one (see the module docstring); `me`: the method's own instance, if known."""
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None and postponed:
        targets = [stmt.target]
    else:
        return None
    out: list[str] = []
    for t in targets:
        if not isinstance(t, ast.Attribute):
            return None
        own = me is not None and isinstance(t.value, ast.Name) and t.value.id == me.name
        if t.attr in (me.props if own and me is not None else facts.properties):
            return None
        if not _attribute_chain(t.value, facts):
            return None
        out.append(t.attr)
    return out


def _attribute_chain(e: ast.expr, facts: Facts) -> bool:
    while isinstance(e, ast.Attribute):
        if e.attr in facts.properties:
            return False
        e = e.value
    return isinstance(e, ast.Name)


def _inert(e: ast.expr, facts: Facts, avoid: set[str], names_safe: bool = False) -> bool:
    """Evaluating `e` runs no code of the program, cannot raise, and reads no attribute or
    name in `avoid` (a name only when `names_safe` is False: the writes may be to a module's
    attributes, which are its variables)."""
    if isinstance(e, ast.Constant):
        return True
    if isinstance(e, ast.Name):
        return names_safe or e.id not in avoid
    if isinstance(e, ast.Attribute):
        return (
            e.attr not in avoid
            and e.attr not in facts.properties
            and _inert(e.value, facts, avoid, names_safe)
        )
    if isinstance(e, ast.Tuple):
        return all(_inert(x, facts, avoid, names_safe) for x in e.elts)
    if isinstance(e, ast.List | ast.Set):
        return not e.elts
    if isinstance(e, ast.Dict):
        return not e.keys
    if isinstance(e, ast.BoolOp | ast.UnaryOp | ast.BinOp):
        methods = _OPERATOR_HOOKS.get(type(e.op))
        if methods is None or methods & facts.hooks:
            return False  # not allowed, or it may run a method of the modules
        parts = e.values if isinstance(e, ast.BoolOp) else [getattr(e, "operand", None)]
        if isinstance(e, ast.BinOp):
            parts = [e.left, e.right]
        return all(x is not None and _inert(x, facts, avoid, names_safe) for x in parts)
    if isinstance(e, ast.Call):
        if not isinstance(e.func, ast.Name) or e.func.id in avoid:
            return False
        args = [*e.args, *(k.value for k in e.keywords)]
        if any(isinstance(a, ast.Starred) for a in e.args) or any(
            k.arg is None for k in e.keywords
        ):
            return False
        if e.func.id in _EMPTY_CONTAINERS:
            return not args
        if e.func.id in facts.immutable or e.func.id in _IMMUTABLE_BUILTINS:
            return all(_inert(a, facts, avoid, names_safe) for a in args)
    return False


def independent(
    a: ast.stmt, b: ast.stmt, facts: Facts, postponed: bool = True, me: _Self | None = None
) -> bool:
    """Whether swapping the adjacent statements `a; b` gives the same program by construction
    (the rule of the module docstring)."""
    ta = _assigned_attrs(a, facts, postponed, me)
    tb = _assigned_attrs(b, facts, postponed, me)
    if ta is None or tb is None:
        return False
    names = set(ta) | set(tb)
    if len(names) != len(ta) + len(tb):
        return False
    # Fields of the method's own instance (a plain class, not a module) are no variables, so
    # `self.x = x` reads a name that neither write can change.
    names_safe = me is not None and all(_own_fields(s, me) for s in (a, b))
    values = [s.value for s in (a, b) if isinstance(s, ast.Assign | ast.AnnAssign)]
    return all(v is not None and _inert(v, facts, names, names_safe) for v in values)


def _own_fields(stmt: ast.stmt, me: _Self) -> bool:
    """Whether every target of the plain assignment `stmt` is `me.name.attr`."""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    return all(
        isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me.name
        for t in targets
    )


class _Collector:
    """Walks one module and collects its mutation sites, with the qualified name of each."""

    def __init__(self, facts: Facts | None = None, postponed: bool = True) -> None:
        self.sites: list[tuple[str, _Site]] = []
        self._scope: list[str] = []
        self._facts = facts or Facts()
        self._postponed = postponed
        self._class: ast.ClassDef | None = None  # the class whose body is being walked
        self._self: _Self | None = None

    def add(self, site: _Site) -> None:
        self.sites.append((".".join(self._scope), site))

    # ------------------------------------------------------------------ statements

    def block(self, body: Sequence[ast.stmt], *, enum_body: bool = False) -> None:
        for stmt in body:
            self.stmt(stmt, enum_body=enum_body)
        effects = [_is_effect(s) for s in body]
        for i in range(len(body) - 1):
            a, b = body[i], body[i + 1]
            if effects[i] and effects[i + 1] and ast.dump(a) != ast.dump(b):
                if independent(a, b, self._facts, self._postponed, self._self):
                    continue
                original = f"{ast.unparse(a)}; {ast.unparse(b)}"
                replacement = f"{ast.unparse(b)}; {ast.unparse(a)}"
                self.add(_Site(a, b, "stmt-swap", original, replacement, text=None))

    def stmt(self, s: ast.stmt, *, enum_body: bool = False) -> None:
        if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef):
            if s.name in _SKIP_FUNCTIONS:
                return
            for d in [*s.args.defaults, *(k for k in s.args.kw_defaults if k is not None)]:
                self.expr(d)
            saved = self._class, self._self
            self._self = None if self._class is None else _self_of(self._class, s, self._facts)
            self._class = None
            self._scope.append(s.name)
            self.block(s.body)
            self._scope.pop()
            self._class, self._self = saved
            return
        if isinstance(s, ast.ClassDef):
            saved = self._class, self._self
            self._class, self._self = s, None
            self._scope.append(s.name)
            self.block(s.body, enum_body=_is_enum(s))
            self._scope.pop()
            self._class, self._self = saved
            return
        if isinstance(s, ast.Assert | ast.Raise | ast.Import | ast.ImportFrom | ast.Pass):
            return
        if isinstance(s, ast.If):
            if _is_type_checking(s.test):
                self.block(s.orelse)
                return
            self._negate(s.test)
            self.expr(s.test)
            self.block(s.body)
            self.block(s.orelse)
            return
        if isinstance(s, ast.While):
            self._negate(s.test)
            self.expr(s.test)
            self.block(s.body)
            self.block(s.orelse)
            return
        if isinstance(s, ast.For | ast.AsyncFor):
            self.expr(s.iter)
            self.block(s.body)
            self.block(s.orelse)
            return
        if isinstance(s, ast.With | ast.AsyncWith):
            for item in s.items:
                self.expr(item.context_expr)
            self.block(s.body)
            return
        if isinstance(s, ast.Try):
            self.block(s.body)
            for h in s.handlers:
                self.block(h.body)
            self.block(s.orelse)
            self.block(s.finalbody)
            return
        if isinstance(s, ast.Match):
            self.expr(s.subject)
            for case in s.cases:
                self.block(case.body)
            return
        if enum_body and isinstance(s, ast.Assign | ast.AnnAssign):
            return
        if isinstance(s, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in _SKIP_NAMES for t in s.targets
        ):
            return
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and _is_logging(s.value):
            return
        if _is_effect(s):
            self.add(_Site(s, s, "stmt-delete", ast.unparse(s), "pass", text="pass"))
        if isinstance(s, ast.AugAssign):
            swapped = _ARITH.get(type(s.op))
            if swapped is not None:
                new = ast.AugAssign(target=s.target, op=swapped(), value=s.value)
                self.add(_Site(s, s, "arith", ast.unparse(s), ast.unparse(new), ast.unparse(new)))
            self.expr(s.value)
            return
        if isinstance(s, ast.Assign | ast.AnnAssign | ast.Return | ast.Expr):
            if s.value is not None:
                self.expr(s.value)
            if isinstance(s, ast.Assign):
                for t in s.targets:
                    self._target(t)
            return
        if isinstance(s, ast.Delete):
            for t in s.targets:
                self._target(t)

    def _target(self, t: ast.expr) -> None:
        """Only the index expressions of a target are mutated."""
        if isinstance(t, ast.Subscript):
            self.expr(t.slice)
        elif isinstance(t, ast.Tuple | ast.List):
            for e in t.elts:
                self._target(e)

    def _negate(self, test: ast.expr) -> None:
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return  # not-drop covers it
        new = ast.UnaryOp(op=ast.Not(), operand=test)
        self.add(_Site(test, test, "cond-negate", ast.unparse(test), ast.unparse(new), None, new))

    # ------------------------------------------------------------------ expressions

    def expr(self, e: ast.expr) -> None:
        if isinstance(e, ast.JoinedStr | ast.Lambda):
            return
        if isinstance(e, ast.Compare):
            for i, op in enumerate(e.ops):
                for table, name in ((_CMP_BOUNDARY, "cmp-boundary"), (_CMP_NEGATE, "cmp-negate")):
                    other = table.get(type(op))
                    if other is None:
                        continue
                    ops = [*e.ops[:i], other(), *e.ops[i + 1 :]]
                    new = ast.Compare(left=e.left, ops=ops, comparators=e.comparators)
                    self._replace(e, name, new)
        elif isinstance(e, ast.BoolOp):
            for i in range(len(e.values)):
                rest = [v for j, v in enumerate(e.values) if j != i]
                new_e: ast.expr = rest[0] if len(rest) == 1 else ast.BoolOp(op=e.op, values=rest)
                self._replace(e, "bool-drop", new_e)
        elif isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            self._replace(e, "not-drop", e.operand)
        elif isinstance(e, ast.IfExp):
            self._negate(e.test)
        elif isinstance(e, ast.BinOp):
            swapped = _ARITH.get(type(e.op))
            if swapped is not None:
                self._replace(e, "arith", ast.BinOp(left=e.left, op=swapped(), right=e.right))
        elif isinstance(e, ast.Constant):
            self._constant(e)
        elif isinstance(e, ast.Call):
            name = _call_name(e)
            if name in _SKIP_CALLS or _is_logging(e):
                return
            if isinstance(e.func, ast.Name) and name in ("min", "max"):
                other_name = "max" if name == "min" else "min"
                self.add(_Site(e.func, e.func, "minmax", name, other_name, other_name))
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr):
                self.expr(child)
            elif isinstance(child, ast.comprehension):
                self.expr(child.iter)
                for cond in child.ifs:
                    self.expr(cond)
            elif isinstance(child, ast.keyword):
                self.expr(child.value)

    def _constant(self, e: ast.Constant) -> None:
        v = e.value
        if isinstance(v, bool):
            self._replace(e, "const", ast.Constant(not v))
        elif isinstance(v, int | float):
            for w in (v + 1, v - 1) if v != 0 else (v + 1,):
                self._replace(e, "const", ast.Constant(w))

    def _replace(self, e: ast.expr, operator: str, new: ast.expr) -> None:
        self.add(_Site(e, e, operator, ast.unparse(e), ast.unparse(new), None, new))


class _Text:
    """Character offsets of AST positions (which count UTF-8 bytes within a line)."""

    def __init__(self, source: str) -> None:
        self.lines = source.splitlines(keepends=True)
        self.starts: list[int] = []
        pos = 0
        for line in self.lines:
            self.starts.append(pos)
            pos += len(line)

    def offset(self, lineno: int, byte_col: int) -> int:
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode("utf-8")[:byte_col].decode("utf-8"))


def _positions(node: ast.AST) -> tuple[int, int, int, int]:
    lineno = getattr(node, "lineno", None)
    col = getattr(node, "col_offset", None)
    end_lineno = getattr(node, "end_lineno", None)
    end_col = getattr(node, "end_col_offset", None)
    assert lineno is not None and col is not None
    assert end_lineno is not None and end_col is not None
    return lineno, col, end_lineno, end_col


def mutants_of_source(file: str, source: str, facts: Facts | None = None) -> list[Mutant]:
    """Every mutant of one module's text (`file`: its path relative to impl/); `facts`: the
    properties and immutable constructors of all the modules (default: of this one)."""
    tree = ast.parse(source)
    postponed = any(
        isinstance(s, ast.ImportFrom)
        and s.module == "__future__"
        and any(n.name == "annotations" for n in s.names)
        for s in tree.body
    )
    collector = _Collector(facts or Facts.of([source]), postponed)
    collector.block(tree.body)
    text = _Text(source)
    seen: Counter[str] = Counter()
    out: list[Mutant] = []
    for function, site in collector.sites:
        lineno, col, _, _ = _positions(site.node)
        _, _, end_lineno, end_col = _positions(site.last)
        start = text.offset(lineno, col)
        end = text.offset(end_lineno, end_col)
        if site.operator == "stmt-swap":
            a_end = text.offset(*_positions(site.node)[2:])
            b_start = text.offset(*_positions(site.last)[:2])
            splice = source[b_start:end] + source[a_end:b_start] + source[start:a_end]
        elif site.text is not None:
            splice = site.text
        else:
            assert site.new is not None
            splice = _text_of(site.new)
        key = f"{file}|{function}|{site.operator}|{site.original}|{site.replacement}"
        seen[key] += 1
        digest = hashlib.sha256(f"{key}#{seen[key]}".encode()).hexdigest()[:12]
        column = start - text.starts[lineno - 1]
        out.append(
            Mutant(
                digest,
                file,
                lineno,
                column,
                site.operator,
                function,
                site.original,
                site.replacement,
                start,
                end,
                splice,
            )
        )
    out.sort(key=lambda m: (m.start, m.end, m.operator, m.text))
    return out


def core_files(impl: Path) -> list[str]:
    """The core's modules, relative to impl/, sorted."""
    return sorted(p.relative_to(impl).as_posix() for p in impl.glob(CORE_GLOB))


def generate(impl: Path, files: Iterable[str] | None = None) -> list[Mutant]:
    """Every mutant of `files` (default: the core), in (file, position) order."""
    sources = {f: (impl / f).read_text(encoding="utf-8") for f in core_files(impl)}
    chosen = sorted(sources if files is None else files)
    for f in chosen:
        if f not in sources:
            sources[f] = (impl / f).read_text(encoding="utf-8")
    facts = Facts.of(sources.values())
    out: list[Mutant] = []
    for file in chosen:
        out.extend(mutants_of_source(file, sources[file], facts))
    ids = Counter(m.id for m in out)
    clash = [i for i, n in ids.items() if n > 1]
    if clash:
        raise RuntimeError(f"mutant ids are not unique: {clash[:5]}")
    return out


def sample(mutants: Sequence[Mutant], n: int | None, seed: int) -> list[Mutant]:
    """A deterministic sample of n mutants (all if n is None or >= their number), kept in
    (file, position) order.

    Each id is ranked by a hash of (seed, id) and the n lowest ranks are taken, so a mutant's
    place in a draw depends on its own id only: adding or removing other mutants (a core edit,
    a generator rule) leaves the rest of a sample as it was, and a sample a team has worked
    stays comparable with the next one."""
    if n is None or n >= len(mutants):
        return list(mutants)
    chosen = set(sorted((m.id for m in mutants), key=lambda i: _rank(seed, i))[:n])
    return [m for m in mutants if m.id in chosen]


def _rank(seed: int, mutant_id: str) -> bytes:
    return hashlib.sha256(f"{seed}:{mutant_id}".encode()).digest()


def check_mutant(m: Mutant, source: str, original_dump: str | None = None) -> str | None:
    """Why the mutant is not a valid, different program (None: it is); `original_dump`:
    ast.dump of `source`, when the caller has it."""
    try:
        mutated = ast.parse(m.apply(source))
    except SyntaxError as exc:
        return f"does not parse: {exc}"
    if ast.dump(mutated) == (original_dump or ast.dump(ast.parse(source))):
        return "the same program"
    return None
