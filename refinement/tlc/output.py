"""What TLC reports: the result of a run (TlcResult, ErrorKind, TlcError) and the parser of
TLC's `-tool` output (message codes, statistics, the violated invariant or property, the
counterexample's states and the action of each step)."""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

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
