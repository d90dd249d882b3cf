"""The mypyc-compiled simulator: the same traces as the sources, and never a stale build."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from refinement import accel
from refinement.faults import PROFILES
from refinement.sim import SimConfig, simulate

# A spread of profiles, long enough for crashes, truncations and the liveness phase.
RUNS = (("none", 1), ("lossy", 2), ("partitions", 3), ("crashes", 4), ("mixed", 5), ("mixed", 6))
EVENTS = 2500

_CHILD = """
import hashlib, io, json, sys
from refinement import accel
from refinement.faults import PROFILES
from refinement.sim import SimConfig, simulate
out = {}
for profile, seed in json.loads(sys.argv[1]):
    buf = io.StringIO()
    config = SimConfig(seed=seed, max_events=int(sys.argv[2]), profile=PROFILES[profile])
    simulate(config, trace=buf)
    out[f"{profile}/{seed}"] = hashlib.sha256(buf.getvalue().encode()).hexdigest()
print(json.dumps({"compiled": accel.running_compiled(), "digests": out}))
"""


def _digests() -> dict[str, str]:
    out = {}
    for profile, seed in RUNS:
        buf = io.StringIO()
        config = SimConfig(seed=seed, max_events=EVENTS, profile=PROFILES[profile])
        simulate(config, trace=buf)
        out[f"{profile}/{seed}"] = hashlib.sha256(buf.getvalue().encode()).hexdigest()
    return out


def test_compiled_simulator_writes_byte_identical_traces() -> None:
    # make setup builds the tree; after an edit of the sources this test rebuilds it (~40 s).
    tree = accel.build(quiet=True)
    assert accel.fresh_tree() == tree
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(RUNS), str(EVENTS)],
        env=accel.compiled_env(tree),
        capture_output=True,
        text=True,
        check=True,
    )
    answer = json.loads(child.stdout)
    assert answer["compiled"], "the child imported the sources, not the compiled tree"
    assert not accel.running_compiled()  # this process runs the sources
    assert answer["digests"] == _digests()


def _fake_checkout(root: Path) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    for pkg in (root / "impl" / "kraft", root / "refinement"):
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
    (root / "refinement" / "sim.py").write_text("RULE = 1\n")


def test_a_tree_built_from_other_sources_is_not_used(tmp_path: Path) -> None:
    _fake_checkout(tmp_path)
    assert accel.checkout_root(tmp_path / "refinement" / "sim.py") == tmp_path
    tree = accel.tree_dir(tmp_path)
    assert accel.fresh_tree(tmp_path) is None  # nothing built
    tree.mkdir(parents=True)
    digest = accel.source_digest(accel.source_dirs(tmp_path))
    (tree / accel.DIGEST_FILE).write_text(digest + "\n")
    assert accel.fresh_tree(tmp_path) == tree
    (tmp_path / "refinement" / "sim.py").write_text("RULE = 2\n")  # an edited rule
    assert accel.fresh_tree(tmp_path) is None
    (tmp_path / "refinement" / "sim.py").write_text("RULE = 1\n")
    (tmp_path / "impl" / "kraft" / "new.py").write_text("")  # a new module
    assert accel.fresh_tree(tmp_path) is None


def test_reexec_puts_the_tree_first_and_stops_after_one_hop(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[tuple[str, list[str], dict[str, str]]] = []

    def fake_execve(path: str, args: list[str], env: dict[str, str]) -> None:
        calls.append((path, args, env))

    monkeypatch.setattr(os, "execve", fake_execve)
    monkeypatch.setattr(accel, "fresh_tree", lambda root=None: tmp_path)
    monkeypatch.delenv(accel.ACTIVE_ENV, raising=False)
    monkeypatch.delenv(accel.USE_ENV, raising=False)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")

    accel.reexec_compiled(["simulate", "--", "--seed", "3"])
    assert len(calls) == 1
    _, args, env = calls[0]
    assert args[1:] == ["-m", "kraft.cli", "simulate", "--", "--seed", "3"]
    assert env["PYTHONPATH"].split(os.pathsep) == [str(tmp_path), "/elsewhere"]
    assert env["PYTHONSAFEPATH"] == "1"  # the checkout's refinement/ must not shadow it

    monkeypatch.setenv(accel.ACTIVE_ENV, str(tmp_path))  # already the re-executed process
    accel.reexec_compiled(["simulate"])
    monkeypatch.delenv(accel.ACTIVE_ENV)
    monkeypatch.setenv(accel.USE_ENV, "0")  # the user asked for the sources
    accel.reexec_compiled(["simulate"])
    monkeypatch.delenv(accel.USE_ENV)
    monkeypatch.setattr(accel, "fresh_tree", lambda root=None: None)  # stale or missing
    accel.reexec_compiled(["simulate"])
    assert len(calls) == 1


def test_kraft_simulate_runs_compiled_from_the_command_line() -> None:
    accel.build(quiet=True)
    env = {k: v for k, v in os.environ.items() if k not in (accel.ACTIVE_ENV, accel.USE_ENV)}
    kraft = str(Path(sys.executable).with_name("kraft"))
    args = [kraft, "simulate", "--", "--seed", "1", "--events", "300"]
    fast = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    assert "runs the mypyc-compiled simulator" in fast.stderr, (fast.stderr, accel.status())
    slow = subprocess.run(
        args, env={**env, accel.USE_ENV: "0"}, capture_output=True, text=True, check=True
    )
    assert "compiled" not in slow.stderr
    assert fast.stdout == slow.stdout  # the same run, whichever build did it


def test_the_compiled_tree_finds_the_specs_of_the_checkout() -> None:
    # Its modules live under build/compiled; TLC's specs and jar stay in the checkout.
    tree = accel.build(quiet=True)
    probe = "from refinement import tlc; print(tlc.SPEC_DIR)"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        env=accel.compiled_env(tree),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    root = accel.checkout_root()
    assert root is not None
    assert Path(out.strip()) == root / "spec"


def test_running_the_sources_beside_a_stale_tree_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_checkout(tmp_path)
    monkeypatch.setattr(accel, "checkout_root", lambda start=None: tmp_path)
    monkeypatch.delenv(accel.ACTIVE_ENV, raising=False)
    monkeypatch.delenv(accel.USE_ENV, raising=False)
    assert accel.why_sources() is None  # nothing was built: nothing to explain
    tree = accel.tree_dir(tmp_path)
    tree.mkdir(parents=True)
    (tree / accel.DIGEST_FILE).write_text("a digest of other sources\n")
    why = accel.why_sources()
    assert why is not None and "stale" in why and "make setup" in why
    monkeypatch.setenv(accel.ACTIVE_ENV, str(tree))  # re-executed, yet on the sources
    assert "still imported the sources" in (accel.why_sources() or "")
    monkeypatch.delenv(accel.ACTIVE_ENV)
    monkeypatch.setenv(accel.USE_ENV, "0")  # the user asked for the sources
    assert accel.why_sources() is None
