"""The project's module rule for the pure core (kraft.core): no module over about 600 lines
(here: 610, so that a line or two over is not a failure) and each says in its first lines
what it owns (a module docstring). replica.py grew past it with KIP-630 (623 lines); its
dispatch tables and receive path are kraft.core.dispatch since."""

from __future__ import annotations

import ast
from pathlib import Path

import kraft.core

LIMIT = 610
CORE = Path(kraft.core.__file__).parent


def _modules() -> list[Path]:
    paths = sorted(CORE.glob("*.py"))
    assert paths
    return paths


def test_no_core_module_is_over_the_limit() -> None:
    long = {p.name: n for p in _modules() if (n := len(p.read_text().splitlines())) > LIMIT}
    assert not long, long


def test_every_core_module_says_what_it_owns() -> None:
    silent = [
        p.name
        for p in _modules()
        if p.name != "__init__.py" and not ast.get_docstring(ast.parse(p.read_text()))
    ]
    assert not silent, silent
