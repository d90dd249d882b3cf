"""Reading a TLC config (.cfg): its sections, the names they list, its constants."""

from __future__ import annotations

import re
from collections.abc import Iterable


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


def config_names(cfg: str, keywords: Iterable[str]) -> list[str]:
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
