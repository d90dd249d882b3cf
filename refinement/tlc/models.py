r"""The registry of TLC models: every .cfg under spec/models/ and spec/mutants/ that declares
itself a model, what it must show, and checking one.

Model registry convention
-------------------------
Every model is a TLC config file under ``spec/models/`` or ``spec/mutants/`` whose FIRST line
is a metadata comment::

    \* model: spec=KRaft.tla kind=ci
    \* model: spec=KRaft.tla kind=mutant expect=ElectionSafety
    \* model: spec=KRaftSnapshot.tla kind=deep timeout=1800

Keys (``key=value``, separated by blanks):

- ``spec``     the module to check, a path relative to ``spec/`` (required);
- ``kind``     ``ci`` (must pass, run by ``check-all`` and the tests), ``liveness`` (must pass,
               run by ``check-all``), ``deep`` (must pass, run only with ``--deep``) or
               ``mutant`` (must FAIL with the named invariant/property, run by ``check-all``)
               or ``witness`` (the real spec; must FAIL with the named "cannot happen"
               invariant, which shows the behaviour is reachable, run by ``check-all``);
- ``expect``   for mutants and witnesses: the exact name TLC must report as violated;
- ``timeout``  seconds before the run is abandoned (optional).

Adding a model is adding a ``.cfg`` file; nothing in this module lists models by hand. A
``.cfg`` without the metadata line is not a model (it is ignored); a malformed one is an error.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from refinement.tlc.config import config_constants
from refinement.tlc.output import TlcResult
from refinement.tlc.run import SPEC_DIR, run_tlc

MODEL_DIRS = (SPEC_DIR / "models", SPEC_DIR / "mutants")


class ModelKind(enum.Enum):
    CI = "ci"
    DEEP = "deep"
    MUTANT = "mutant"
    # A reachability check on the real spec: `expect` names an invariant that says "this
    # cannot happen"; TLC must report it violated (the behaviour is exercised).
    WITNESS = "witness"
    LIVENESS = "liveness"


@dataclass(frozen=True)
class Model:
    name: str
    spec: Path
    config: Path
    kind: ModelKind
    expect: str | None = None
    timeout_s: float | None = None
    constants: tuple[tuple[str, str], ...] = field(default=())

    def judge(self, result: TlcResult) -> tuple[bool, str]:
        """Whether the result is the expected one, and a one-line verdict."""
        if self.kind in (ModelKind.MUTANT, ModelKind.WITNESS):
            if result.ok:
                return False, f"UNEXPECTED PASS (expected {self.expect} violated)"
            if result.violated == self.expect:
                return True, f"violates {result.violated} (expected)"
            return False, f"UNEXPECTED {result.error_kind.value} {result.violated} != {self.expect}"
        if result.ok:
            return True, "pass"
        return False, f"FAIL {result.error_kind.value} {result.violated}"


_META_RE = re.compile(r"^\\\*\s*model:\s*(.*)$")


def load_model(config: Path) -> Model | None:
    """The model a config declares; None for a config without the metadata line (a helper
    config that is not a model, e.g. for trace validation)."""
    text = config.read_text()
    first = text.splitlines()[0] if text else ""
    m = _META_RE.match(first.strip())
    if m is None:
        return None
    meta: dict[str, str] = {}
    for token in m.group(1).split():
        key, sep, value = token.partition("=")
        if not sep or key not in ("spec", "kind", "expect", "timeout"):
            raise ValueError(f"{config}: bad model metadata token {token!r}")
        meta[key] = value
    if "spec" not in meta or "kind" not in meta:
        raise ValueError(f"{config}: model metadata needs spec= and kind=")
    kind = ModelKind(meta["kind"])
    expect = meta.get("expect")
    if kind in (ModelKind.MUTANT, ModelKind.WITNESS) and not expect:
        raise ValueError(f"{config}: a mutant needs expect=<invariant name>")
    return Model(
        name=config.stem,
        spec=SPEC_DIR / meta["spec"],
        config=config,
        kind=kind,
        expect=expect,
        timeout_s=float(meta["timeout"]) if "timeout" in meta else None,
        constants=config_constants(text),
    )


def load_models(dirs: Sequence[Path] = MODEL_DIRS) -> tuple[Model, ...]:
    """Every model declared by a .cfg under `dirs`, sorted by kind then name."""
    order = {
        ModelKind.CI: 0,
        ModelKind.LIVENESS: 1,
        ModelKind.WITNESS: 2,
        ModelKind.MUTANT: 3,
        ModelKind.DEEP: 4,
    }
    loaded = [load_model(cfg) for d in dirs if d.is_dir() for cfg in sorted(d.glob("*.cfg"))]
    models = [m for m in loaded if m is not None]
    return tuple(sorted(models, key=lambda m: (order[m.kind], m.name)))


def select_models(
    models: Iterable[Model], *, deep: bool = False, only: Sequence[str] = ()
) -> list[Model]:
    chosen = [m for m in models if deep or m.kind is not ModelKind.DEEP]
    if only:
        chosen = [m for m in chosen if m.name in only]
    return chosen


def check_model(model: Model, *, workers: int = 2) -> TlcResult:
    return run_tlc(
        model.spec,
        model.config,
        workers=workers,
        deep=model.kind is ModelKind.DEEP,
        timeout_s=model.timeout_s,
    )
