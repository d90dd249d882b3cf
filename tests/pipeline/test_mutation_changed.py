"""`kraft mutate --changed-since REV` (refinement.mutation.changed): the mutants whose site
touches a line the work tree changed since a git revision, and nothing else."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from refinement.mutation.changed import (
    RevisionError,
    changed_lines,
    git_changed_lines,
    on_changed_lines,
)
from refinement.mutation.generate import mutants_of_source

BEFORE = """\
def rule(a: int, b: int) -> bool:
    if a > 0:
        return a < b
    return False


def other(x: int) -> int:
    return x + 1
"""

AFTER = """\
def rule(a: int, b: int) -> bool:
    if a > 0:
        return a <= b
    return False


def other(x: int) -> int:
    return x + 1
"""

DIFF = """\
diff --git a/impl/kraft/core/x.py b/impl/kraft/core/x.py
--- a/impl/kraft/core/x.py
+++ b/impl/kraft/core/x.py
@@ -3 +3 @@ def rule(a: int, b: int) -> bool:
-        return a < b
+        return a <= b
@@ -9,2 +8,0 @@ def other(x: int) -> int:
-    # gone
-    pass
diff --git a/impl/kraft/core/new.py b/impl/kraft/core/new.py
new file mode 100644
--- /dev/null
+++ b/impl/kraft/core/new.py
@@ -0,0 +1,3 @@
+a = 1
+b = 2
+c = 3
diff --git a/impl/kraft/core/old.py b/impl/kraft/core/old.py
deleted file mode 100644
--- a/impl/kraft/core/old.py
+++ /dev/null
@@ -1,2 +0,0 @@
-a = 1
-b = 2
"""


def test_a_diffs_hunks_give_each_files_added_or_rewritten_lines() -> None:
    assert changed_lines(DIFF) == {
        "impl/kraft/core/x.py": {3, 9},  # line 3 rewritten; a deletion after line 8
        "impl/kraft/core/new.py": {1, 2, 3},
    }


def test_only_the_mutants_on_changed_lines_are_kept() -> None:
    file = "kraft/core/x.py"
    every = mutants_of_source(file, AFTER)
    kept = on_changed_lines(every, {file: {3}}, {file: AFTER})
    assert kept, "the rewritten comparison has mutants"
    assert {m.line for m in kept} == {3}
    assert len(kept) < len(every)
    assert on_changed_lines(every, {}, {file: AFTER}) == []


def test_git_diff_of_a_work_tree_selects_the_rewritten_line(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    core = tmp_path / "impl" / "kraft" / "core"
    core.mkdir(parents=True)
    (core / "x.py").write_text(BEFORE)
    git("init", "-q")
    git("-c", "user.email=t@example.invalid", "-c", "user.name=t", "add", ".")
    git("-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-qm", "before")
    (core / "x.py").write_text(AFTER)
    assert git_changed_lines(tmp_path, "HEAD") == {"kraft/core/x.py": {3}}
    with pytest.raises(RevisionError, match="no-such-revision"):
        git_changed_lines(tmp_path, "no-such-revision")
