"""The mutants of core lines changed since a git revision (`kraft mutate --changed-since REV`).

New core code arrives weaker than code that campaigns have already worked over (session 19:
90 mutants on the lines one change touched scored 78.7 %), so a campaign over just the changed
lines is the cheap check to run after each core change, before a fresh sample.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from refinement.mutation.generate import Mutant

# A unified diff's hunk header: "@@ -a[,b] +c[,d] @@" (d = 0: lines only deleted).
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
_NEW_FILE = re.compile(r"^\+\+\+ (?:b/)?(.*)$")


class RevisionError(ValueError):
    """The revision is unknown to git, or the checkout is no git work tree."""


def changed_lines(diff: str) -> dict[str, set[int]]:
    """The lines of each file, as the work tree has them, that `git diff -U0` adds or
    rewrites. A hunk that only deletes marks the line after the cut (the mutants of the
    statement that now follows it), so a removed guard still draws its neighbours."""
    lines: dict[str, set[int]] = {}
    current: set[int] | None = None
    for row in diff.splitlines():
        if m := _NEW_FILE.match(row):
            path = m.group(1)
            current = None if path == "/dev/null" else lines.setdefault(path, set())
        elif (m := _HUNK.match(row)) and current is not None:
            start, count = int(m.group(1)), int(m.group(2) or 1)
            if count == 0:
                current.add(start + 1)
            else:
                current.update(range(start, start + count))
    return lines


def git_changed_lines(checkout: Path, revision: str, under: str = "impl") -> dict[str, set[int]]:
    """changed_lines of `git diff -U0 REVISION -- under`, keyed relative to `under`."""
    try:
        done = subprocess.run(
            ["git", "-C", str(checkout), "diff", "-U0", "--no-color", revision, "--", under],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError as exc:
        raise RevisionError("--changed-since needs git on PATH") from exc
    if done.returncode != 0:
        raise RevisionError(
            f"--changed-since {revision}: git diff failed: {done.stderr.strip() or 'no output'}"
        )
    prefix = under.rstrip("/") + "/"
    return {
        path.removeprefix(prefix): rows
        for path, rows in changed_lines(done.stdout).items()
        if path.startswith(prefix)
    }


def site_lines(mutant: Mutant, source: str) -> range:
    """The lines the mutated site spans in its file's source."""
    first = source.count("\n", 0, mutant.start) + 1
    return range(first, first + source.count("\n", mutant.start, mutant.end) + 1)


def on_changed_lines(
    mutants: Sequence[Mutant], changed: Mapping[str, set[int]], sources: Mapping[str, str]
) -> list[Mutant]:
    """The mutants whose site touches a changed line of its file."""
    return [
        m
        for m in mutants
        if m.file in changed and _touches(site_lines(m, sources[m.file]), changed[m.file])
    ]


def _touches(span: Iterable[int], rows: set[int]) -> bool:
    return any(line in rows for line in span)
