r"""Run the TLC model checker as a subprocess and parse what it reports.

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

CLI::

    python -m refinement.tlc check-all [--deep] [--only NAME ...]
    python -m refinement.tlc table --write spec/README.md [--deep]
"""

from __future__ import annotations

import argparse
import enum
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from refinement.accel import checkout_root

# The checkout, also when this module runs from the compiled tree (refinement.accel).
REPO_ROOT = checkout_root() or Path(__file__).resolve().parent.parent
SPEC_DIR = REPO_ROOT / "spec"
MODEL_DIRS = (SPEC_DIR / "models", SPEC_DIR / "mutants")

TABLE_BEGIN = "<!-- models:begin -->"
TABLE_END = "<!-- models:end -->"

# Message codes of TLC's -tool output (tlc2.output.EC in TLC 2.18).
_EC_GENERAL = 1000
_EC_ASSUMPTION_FALSE = 2104
_EC_ASSUMPTION_EVALUATION_ERROR = 2105
_EC_INVARIANT_VIOLATED_INITIAL = 2107
_EC_PROPERTY_VIOLATED_INITIAL = 2108
_EC_INVARIANT_VIOLATED_BEHAVIOR = 2110
_EC_INVARIANT_EVALUATION_FAILED = 2111
_EC_ACTION_PROPERTY_VIOLATED_BEHAVIOR = 2112
_EC_ACTION_PROPERTY_EVALUATION_FAILED = 2113
_EC_DEADLOCK_REACHED = 2114
_EC_TEMPORAL_PROPERTY_VIOLATED = 2116
_EC_INVARIANT_VIOLATED_LEVEL = 2146
_EC_PARSING_FAILED2 = 2171
_EC_SUCCESS = 2193
_EC_SIMULATION_START = 2188
_EC_STATE_PRINT1 = 2216
_EC_STATE_PRINT2 = 2217
_EC_PARSING_FAILED = 3002
_EC_SANY_PARSER = frozenset({4000, 4001, 4002})
_EC_CONFIG = frozenset(range(2222, 2244)) | {2280, 2281, 5002}

_MSG_RE = re.compile(r"^@!@!@STARTMSG (\d+):(\d+) @!@!@$")
_END_RE = re.compile(r"^@!@!@ENDMSG (\d+) @!@!@$")
_NUM = r"(?<![-\d,])([\d,]+)"


class TlcError(RuntimeError):
    """TLC could not be run, or it stopped without a verdict."""


class ErrorKind(enum.Enum):
    NONE = "none"
    INVARIANT = "invariant"
    PROPERTY = "property"
    DEADLOCK = "deadlock"
    ASSUMPTION = "assumption"
    PARSE = "parse"
    OTHER = "other"


@dataclass(frozen=True)
class TlcResult:
    ok: bool
    states_generated: int
    distinct_states: int
    depth: int
    seconds: float
    violated: str | None
    error_kind: ErrorKind
    counterexample: tuple[dict[str, str], ...]
    raw_output: str
    # The action label TLC printed for each counterexample state ("Initial predicate" first).
    counterexample_actions: tuple[str, ...] = ()


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


# --------------------------------------------------------------------------- running TLC


def find_tla_jar() -> Path:
    """The tla2tools.jar: $TLA_JAR_PATH, else <repo>/tools/tla2tools.jar."""
    env = os.environ.get("TLA_JAR_PATH")
    jar = Path(env) if env else REPO_ROOT / "tools" / "tla2tools.jar"
    if not jar.is_file():
        raise TlcError(f"TLA+ tools jar not found at {jar}; run `make setup` to fetch it")
    return jar


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise TlcError("`java` not found on PATH; TLC needs a Java 11+ runtime")
    return java


def run_tlc(
    spec: Path,
    config: Path,
    *,
    workers: int = 2,
    deep: bool = False,
    simulate: bool = False,
    depth: int | None = None,
    timeout_s: float | None = None,
    extra_args: Sequence[str] = (),
    traces: int = 1000,
) -> TlcResult:
    """Check `spec` with `config`; TLC runs in the spec's directory so EXTENDS resolve there.

    deep: give the JVM a larger share of memory (for the long models).
    simulate: random simulation of `traces` behaviours of at most `depth` steps instead of BFS
    (TLC's -depth applies to simulation only).
    """
    spec = Path(spec).resolve()
    config = Path(config).resolve()
    if not spec.is_file():
        raise TlcError(f"spec not found: {spec}")
    if not config.is_file():
        raise TlcError(f"config not found: {config}")
    jar = find_tla_jar()
    heap = "60" if deep else "30"
    with tempfile.TemporaryDirectory(prefix="tlc-") as meta:
        cmd = [
            _java(),
            "-XX:+UseParallelGC",
            f"-XX:MaxRAMPercentage={heap}",
            # Long traces (thousands of steps) recurse deeply in TLC's evaluator.
            "-Xss64m",
            # TLC unpacks its standard modules (Integers.tla, ...) into the temp dir and
            # deletes them on exit: concurrent runs sharing /tmp read each other's half-written
            # or deleted copies ("Lexical error"). Each run gets its own.
            f"-Djava.io.tmpdir={meta}",
            f"-DTLA-Library={SPEC_DIR}",
            "-cp",
            str(jar),
            "tlc2.TLC",
            "-tool",
            "-workers",
            str(workers),
            "-config",
            str(config),
            "-metadir",
            meta,
            "-cleanup",
        ]
        if simulate:
            cmd += ["-simulate", f"num={traces}"]
        if depth is not None:
            cmd += ["-depth", str(depth)]
        cmd += [*extra_args, spec.name]
        start = time.monotonic()
        try:
            proc = subprocess.run(
                cmd,
                cwd=spec.parent,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raw = exc.stdout or b""
            out = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
            raise TlcError(
                f"TLC timed out after {timeout_s}s on {config.name}:\n{_tail(out)}"
            ) from exc
        wall = time.monotonic() - start
    output = proc.stdout + proc.stderr
    properties = _config_names(config.read_text(), ("PROPERTY", "PROPERTIES"))
    result = parse_tlc_output(
        output, properties=properties, wall_seconds=wall, module_dir=spec.parent
    )
    if result.error_kind is ErrorKind.OTHER and not result.counterexample:
        raise TlcError(f"TLC failed (exit {proc.returncode}) on {config.name}:\n{_tail(output)}")
    return result


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


# --------------------------------------------------------------------------- parsing


@dataclass
class _Message:
    code: int
    lines: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def _messages(output: str) -> list[_Message]:
    """Split -tool output into messages; plain lines outside messages become code 0."""
    msgs: list[_Message] = []
    current: _Message | None = None
    for line in output.splitlines():
        start = _MSG_RE.match(line)
        if start:
            current = _Message(int(start.group(1)), [])
            msgs.append(current)
            continue
        if _END_RE.match(line):
            current = None
            continue
        if current is None:
            # Plain output (no -tool, or text TLC prints outside messages).
            msgs.append(_Message(0, [line]))
        else:
            current.lines.append(line)
    return msgs


def _int(text: str) -> int:
    return int(text.replace(",", ""))


_STATE_HEADER = re.compile(r"^(\d+): <?(.*?)>?$")
_ASSIGN = re.compile(r"^/\\ (\w+) = (.*)$")
_BARE_ASSIGN = re.compile(r"^(\w+) = (.*)$")


_LOCATION = re.compile(r"^(\w+) line (\d+), col (\d+) to line (\d+), col (\d+) of module (\w+)$")
_CALLED = re.compile(r":\s*(\w+)\s*\(")
# A span such as `ElectionTimeout(s) /\ KeepFetched` (one value of a constant \E, conjoined).
_APPLIED = re.compile(r"\s*(\w+)\s*\(")


def _action_name(label: str, module_dir: Path | None) -> str:
    """The action a TLC state label names.

    TLC labels a step `Inc line 5, col 8 to line 5, col 36 of module T`.  A disjunct such as
    `\\E m \\in DOMAIN messages : HandleVoteRequest(m)` ranges over a state-dependent set, so
    TLC names it after the enclosing definition (`Next`); then the operator applied in that
    source span is the action's name.  So is the first operator of a conjunction such as
    `ElectionTimeout(s) /\\ KeepFetched`.
    """
    m = _LOCATION.match(label)
    if m is None:
        return label.strip()
    name = m.group(1)
    if module_dir is None:
        return name
    source = module_dir / f"{m.group(6)}.tla"
    try:
        lines = source.read_text().splitlines()
    except OSError:
        return name
    l1, c1, l2, c2 = (int(m.group(i)) for i in range(2, 6))
    span = lines[l1 - 1 : l2]
    if not span:
        return name
    span[-1] = span[-1][:c2]
    span[0] = span[0][c1 - 1 :]
    text = "\n".join(span)
    called = _CALLED.search(text) or _APPLIED.match(text)
    return called.group(1) if called else name


def _parse_state(text: str, module_dir: Path | None) -> tuple[str, dict[str, str]] | None:
    lines = text.splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        return None
    header = _STATE_HEADER.match(lines[0].strip())
    if header is None:
        return None
    action = _action_name(header.group(2), module_dir)
    values: dict[str, str] = {}
    name: str | None = None
    body: list[str] = []
    # A one-variable state is printed as `x = v`, otherwise every variable as `/\ x = v`.
    conjuncts = len(lines) > 1 and lines[1].startswith("/\\ ")
    for line in lines[1:]:
        m = _ASSIGN.match(line) if conjuncts else _BARE_ASSIGN.match(line)
        if m:
            if name is not None:
                values[name] = "\n".join(body).strip()
            name, body = m.group(1), [m.group(2)]
        elif name is not None:
            body.append(line)
    if name is not None:
        values[name] = "\n".join(body).strip()
    return action, values


def _parse_duration(text: str) -> float | None:
    m = re.search(r"Finished in (.*?) at", text)
    if m is None:
        return None
    total = 0.0
    for amount, unit in re.findall(r"(\d+)\s*(ms|min|h|s)", m.group(1)):
        total += int(amount) * {"ms": 0.001, "s": 1.0, "min": 60.0, "h": 3600.0}[unit]
    return total


def parse_tlc_output(
    output: str,
    *,
    properties: Sequence[str] = (),
    wall_seconds: float | None = None,
    module_dir: Path | None = None,
) -> TlcResult:
    """Parse TLC output (-tool format, or plain text as a fallback).

    properties: the PROPERTY names of the config; TLC does not name a violated temporal
    property, so when exactly one was checked, that name is reported.
    module_dir: where the checked modules are, to name actions TLC labels by location.
    """
    generated = distinct = depth = 0
    seconds: float | None = None
    violated: str | None = None
    kind = ErrorKind.NONE
    success = False
    finished = False
    simulation = False
    states: list[dict[str, str]] = []
    actions: list[str] = []
    for msg in _messages(output):
        text = msg.text
        code = msg.code
        if code == _EC_SIMULATION_START or "Running Random Simulation" in text:
            simulation = True
        if m := re.search(_NUM + r" states generated", text):
            generated = _int(m.group(1))
        # Simulation prints "-1 distinct states found": it does not count them.
        if m := re.search(_NUM + r" distinct states found", text):
            distinct = _int(m.group(1))
        if m := re.search(r"depth of the complete state graph search is " + _NUM, text):
            depth = _int(m.group(1))
        if "Finished in" in text:
            finished = True
            seconds = _parse_duration(text)
        if code == _EC_SUCCESS or "No error has been found" in text:
            success = True
        if kind is not ErrorKind.NONE:
            pass  # the first verdict wins; later messages are consequences of it
        elif code in (_EC_INVARIANT_VIOLATED_BEHAVIOR, _EC_INVARIANT_VIOLATED_INITIAL) or (
            code == 0 and re.search(r"^Invariant \S+ is violated", text)
        ):
            kind = ErrorKind.INVARIANT
            if m := re.search(r"Invariant (\S+) is violated", text):
                violated = m.group(1)
        elif code == _EC_ACTION_PROPERTY_VIOLATED_BEHAVIOR or (
            code == 0 and "Action property" in text and "is violated" in text
        ):
            kind = ErrorKind.PROPERTY
            if m := re.search(r"Action property (\S+)", text):
                violated = m.group(1)
        elif code in (_EC_TEMPORAL_PROPERTY_VIOLATED, _EC_PROPERTY_VIOLATED_INITIAL) or (
            code == 0 and "Temporal properties were violated" in text
        ):
            kind = ErrorKind.PROPERTY
            if m := re.search(r"[Pp]roperty (\w+) is violated", text):
                violated = m.group(1)
            elif len(properties) == 1:
                violated = properties[0]
        elif code == _EC_DEADLOCK_REACHED or (code == 0 and text.startswith("Error: Deadlock")):
            kind = ErrorKind.DEADLOCK
            violated = "Deadlock"
        elif code in (_EC_ASSUMPTION_FALSE, _EC_ASSUMPTION_EVALUATION_ERROR):
            kind = ErrorKind.ASSUMPTION
            violated = "Assumption"
        elif (
            code in (_EC_PARSING_FAILED, _EC_PARSING_FAILED2)
            or code in _EC_SANY_PARSER
            or code in _EC_CONFIG
            or (code == 0 and ("***Parse Error***" in text or "Semantic error" in text))
        ):
            kind = ErrorKind.PARSE
        elif code in (
            _EC_GENERAL,
            _EC_INVARIANT_EVALUATION_FAILED,
            _EC_ACTION_PROPERTY_EVALUATION_FAILED,
            _EC_INVARIANT_VIOLATED_LEVEL,
        ):
            kind = ErrorKind.OTHER
        if code in (_EC_STATE_PRINT1, _EC_STATE_PRINT2):
            parsed = _parse_state(text, module_dir)
            if parsed is not None:
                actions.append(parsed[0])
                states.append(parsed[1])
    if simulation and finished and kind is ErrorKind.NONE:
        # A simulation that ends without a violation has no "No error" message.
        success = True
    if not success and kind is ErrorKind.NONE:
        # No verdict: TLC crashed, was killed or printed something we do not know.
        kind = ErrorKind.OTHER
    if not finished and kind is ErrorKind.NONE:
        kind = ErrorKind.OTHER
    if depth == 0 and states:
        depth = len(states)
    return TlcResult(
        ok=success and kind is ErrorKind.NONE,
        states_generated=generated,
        distinct_states=distinct,
        depth=depth,
        seconds=seconds if seconds is not None else (wall_seconds or 0.0),
        violated=violated,
        error_kind=kind,
        counterexample=tuple(states),
        raw_output=output,
        counterexample_actions=tuple(actions),
    )


# --------------------------------------------------------------------------- model registry


def _strip_comments(cfg: str) -> str:
    cfg = re.sub(r"\(\*.*?\*\)", " ", cfg, flags=re.S)
    return "\n".join(line.split("\\*", 1)[0] for line in cfg.splitlines())


_CFG_KEYWORDS = (
    "SPECIFICATION",
    "INIT",
    "NEXT",
    "INVARIANT",
    "INVARIANTS",
    "PROPERTY",
    "PROPERTIES",
    "CONSTANT",
    "CONSTANTS",
    "SYMMETRY",
    "CONSTRAINT",
    "CONSTRAINTS",
    "ACTION_CONSTRAINT",
    "ACTION_CONSTRAINTS",
    "VIEW",
    "CHECK_DEADLOCK",
    "POSTCONDITION",
    "ALIAS",
)


def _sections(cfg: str) -> list[tuple[str, str]]:
    """(keyword, body) pairs of a TLC config, comments removed."""
    pattern = r"\b(" + "|".join(_CFG_KEYWORDS) + r")\b"
    parts = re.split(pattern, _strip_comments(cfg))
    return [(parts[i], parts[i + 1]) for i in range(1, len(parts) - 1, 2)]


def _config_names(cfg: str, keywords: Iterable[str]) -> list[str]:
    wanted = set(keywords)
    names: list[str] = []
    for key, body in _sections(cfg):
        if key in wanted:
            names += body.split()
    return names


def config_constants(cfg: str) -> tuple[tuple[str, str], ...]:
    """The `NAME = value` / `NAME <- op` assignments of the CONSTANTS sections."""
    out: list[tuple[str, str]] = []
    for key, body in _sections(cfg):
        if key not in ("CONSTANT", "CONSTANTS"):
            continue
        for m in re.finditer(r"(\w+)\s*(=|<-)\s*(\{[^}]*\}|<<[^>]*>>|\S+)", body):
            value = " ".join(m.group(3).split())
            if m.group(2) == "=" and value == m.group(1):
                continue  # a model value declared as itself
            out.append((m.group(1), value if m.group(2) == "=" else f"<- {value}"))
    return tuple(out)


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


# --------------------------------------------------------------------------- CLI


def _fmt_seconds(s: float) -> str:
    return f"{s:.0f} s" if s >= 10 else f"{s:.1f} s"


_TABLE_HEADER = (
    "| model | kind | spec | constants | distinct states | depth | time | result |\n"
    "| --- | --- | --- | --- | ---: | ---: | ---: | --- |"
)


def _row(model: Model, res: TlcResult | None, verdict: str) -> str:
    consts = (
        ", ".join(f"{k} {v}" if v.startswith("<-") else f"{k}={v}" for k, v in model.constants)
        or "-"
    )
    consts = consts.replace("|", "\\|")
    spec = model.spec.relative_to(SPEC_DIR).as_posix()
    if res is None:
        return f"| {model.name} | {model.kind.value} | {spec} | {consts} | - | - | - | {verdict} |"
    return (
        f"| {model.name} | {model.kind.value} | {spec} | {consts} | {res.distinct_states:,} "
        f"| {res.depth} | {_fmt_seconds(res.seconds)} | {verdict} |"
    )


def _existing_rows(readme: Path) -> dict[str, str]:
    """Rows of the generated table already in `readme`, by model name."""
    if not readme.exists():
        return {}
    text = readme.read_text()
    if TABLE_BEGIN not in text or TABLE_END not in text:
        return {}
    section = text.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines()[2:]:
        cells = line.split("|")
        if len(cells) > 2:
            rows[cells[1].strip()] = line
    return rows


def _table(order: Sequence[Model], rows: dict[str, str]) -> str:
    """The table in registry order; models without a row (not run, none kept) are left out."""
    return "\n".join([_TABLE_HEADER, *(rows[m.name] for m in order if m.name in rows)])


def _run_models(models: Sequence[Model], workers: int) -> tuple[dict[str, str], bool]:
    rows: dict[str, str] = {}
    all_good = True
    for model in models:
        print(f"[tlc] {model.name} ({model.kind.value}) ...", flush=True)
        try:
            res = check_model(model, workers=workers)
        except TlcError as exc:
            print(f"[tlc] {model.name}: ERROR {exc}", flush=True)
            rows[model.name] = _row(model, None, "ERROR (TLC did not finish)")
            all_good = False
            continue
        good, verdict = model.judge(res)
        all_good = all_good and good
        print(
            f"[tlc] {model.name:<32} {verdict:<45} distinct={res.distinct_states:,} "
            f"depth={res.depth} time={_fmt_seconds(res.seconds)}",
            flush=True,
        )
        rows[model.name] = _row(model, res, verdict)
    return rows, all_good


def write_table(readme: Path, table: str) -> None:
    """Replace the marked section of `readme` with `table` (append the section if absent)."""
    text = readme.read_text() if readme.exists() else ""
    block = f"{TABLE_BEGIN}\n{table}\n{TABLE_END}"
    if TABLE_BEGIN in text and TABLE_END in text:
        head, rest = text.split(TABLE_BEGIN, 1)
        _, tail = rest.split(TABLE_END, 1)
        text = head + block + tail
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    readme.write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m refinement.tlc")
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("check-all", "table", "list"):
        p = sub.add_parser(name)
        p.add_argument("--deep", action="store_true", help="also run the deep models")
        p.add_argument("--only", nargs="*", default=[], help="model names to run")
        p.add_argument("--workers", type=int, default=2)
        if name == "table":
            p.add_argument("--write", type=Path, help="README whose marked section is rewritten")
    args = parser.parse_args(argv)
    models = select_models(load_models(), deep=args.deep, only=args.only)
    if args.cmd == "list":
        for m in models:
            print(f"{m.name}\t{m.kind.value}\t{m.spec.name}\t{m.expect or ''}")
        return 0
    rows, all_good = _run_models(models, args.workers)
    if args.cmd == "table":
        # Rows of models not run this time (--only, or deep without --deep) are kept.
        kept = _existing_rows(args.write) if args.write is not None else {}
        table = _table(load_models(), {**kept, **rows})
        if args.write is not None:
            write_table(args.write, table)
            print(f"[tlc] wrote {len(rows)} new rows to {args.write}")
        else:
            print(table)
    print(f"[tlc] {'all models as expected' if all_good else 'UNEXPECTED RESULTS'}")
    return 0 if all_good else 1


if __name__ == "__main__":
    sys.exit(main())
