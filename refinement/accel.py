"""The compiled simulator: the same sources, compiled with mypyc, used only while fresh.

The reference is the Python source. Because `kraft` and `refinement` pass `mypy --strict`,
mypyc can compile the simulator's hot modules (the replica core, the in-memory log, record
batches, the simulator and its checkers) to C extensions without a line changed; a run is
about twice as fast and gives byte-identical traces (a test compares them).

The compiled copy never sits beside the sources, where a stale extension would silently
shadow an edited `.py`. `build()` copies both packages into `build/compiled/` and compiles
there, recording a digest of the sources it copied. A command that wants speed (`kraft
simulate`, `kraft campaign`) re-executes itself with that tree first on PYTHONPATH, and only
if the digest still matches the sources; otherwise it runs the sources as they are. Spark's
local executors inherit PYTHONPATH, so a campaign's tasks run compiled too.

`python -m refinement.accel build` builds (make setup runs it); `status` says what is used.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

# The modules a simulated event runs through; everything else stays interpreted.
HOT_MODULES = (
    "kraft/core/bounds.py",
    "kraft/core/commits.py",
    "kraft/core/effects.py",
    "kraft/core/election.py",
    "kraft/core/events.py",
    "kraft/core/follower.py",
    "kraft/core/leader.py",
    "kraft/core/log_metadata.py",
    "kraft/core/messages.py",
    "kraft/core/producers.py",
    "kraft/core/quorum_math.py",
    "kraft/core/replica.py",
    "kraft/core/timing.py",
    "kraft/core/voter_set.py",
    "kraft/records.py",
    "kraft/storage/epoch_cache.py",
    "kraft/storage/log_adapter.py",
    "kraft/storage/memory_log.py",
    "refinement/invariants.py",
    "refinement/invariants_describe.py",
    "refinement/invariants_effects.py",
    "refinement/invariants_input.py",
    "refinement/invariants_leader.py",
    "refinement/invariants_producers.py",
    "refinement/invariants_reconfig.py",
    "refinement/invariants_roles.py",
    "refinement/invariants_snapshot_rules.py",
    "refinement/invariants_snapshot_transfer.py",
    "refinement/invariants_timing.py",
    "refinement/invariants_voter_changes.py",
    "refinement/invariants_voter_texts.py",
    "refinement/sim.py",
    "refinement/sim_adversary.py",
    "refinement/sim_base.py",
    "refinement/sim_config.py",
    "refinement/sim_clients.py",
    "refinement/sim_faults.py",
    "refinement/sim_liveness.py",
    "refinement/sim_network.py",
    "refinement/sim_reconfig.py",
    "refinement/sim_snapshots.py",
)
PACKAGES = ("kraft", "refinement")
DIGEST_FILE = "SOURCES.sha256"
# Set in the re-executed process: stops a second re-exec if the tree still is not used.
ACTIVE_ENV = "KRAFT_COMPILED_TREE"
# Set to 0 to run the sources even when a fresh compiled tree exists.
USE_ENV = "KRAFT_COMPILED"

# multi_file: one C file per module, so `-j` compiles them side by side (one file for all
# 41 took 184 s on this machine's 2 cores, one per module 97 s, with the same simulator speed).
_SETUP = """\
import sys
from setuptools import setup
from mypyc.build import mypycify
setup(name="kraft-compiled", script_args=["build_ext", "--inplace", "-j", sys.argv[1]],
      ext_modules=mypycify(sys.argv[2:], opt_level="3", multi_file=True))
"""


class AccelError(Exception):
    """The compiled tree could not be built."""


# Names the checkout to code that runs from a copy (a Spark executor's shipped zip).
CHECKOUT_ENV = "KRAFT_CHECKOUT"


def checkout_root(start: Path | None = None) -> Path | None:
    """The source checkout this module belongs to, or the one $KRAFT_CHECKOUT names (None
    for an installed copy)."""
    named = os.environ.get(CHECKOUT_ENV)
    if start is None and named:
        return Path(named)
    here = (start or Path(__file__)).resolve()
    for d in here.parents:
        if (d / "pyproject.toml").is_file() and (d / "impl" / "kraft" / "__init__.py").is_file():
            return d
    return None


def source_dirs(root: Path) -> dict[str, Path]:
    return {"kraft": root / "impl" / "kraft", "refinement": root / "refinement"}


def tree_dir(root: Path) -> Path:
    return root / "build" / "compiled"


def _sources(pkg_dir: Path) -> list[Path]:
    return sorted(p for p in pkg_dir.rglob("*.py") if "__pycache__" not in p.parts)


def source_digest(dirs: dict[str, Path]) -> str:
    """A digest of every source file of both packages, the compiler and the interpreter: a
    tree built from other sources, or for another Python or mypy, is not used."""
    h = hashlib.sha256()
    h.update(sys.version.encode())
    h.update(importlib.metadata.version("mypy").encode())
    for name, pkg_dir in sorted(dirs.items()):
        for path in _sources(pkg_dir):
            h.update(f"\0{name}/{path.relative_to(pkg_dir).as_posix()}\0".encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def fresh_tree(root: Path | None = None) -> Path | None:
    """The compiled tree if it was built from exactly the current sources, else None."""
    root = root or checkout_root()
    if root is None:
        return None
    tree = tree_dir(root)
    recorded = _recorded_digest(tree)
    return tree if recorded == source_digest(source_dirs(root)) else None


def _recorded_digest(tree: Path) -> str | None:
    try:
        return (tree / DIGEST_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None


def running_compiled() -> bool:
    """Whether this process runs the compiled simulator."""
    import refinement.sim

    return not (refinement.sim.__file__ or "").endswith(".py")


def build(
    root: Path | None = None, *, jobs: int = 2, quiet: bool = False, force: bool = False
) -> Path:
    """Copy the sources to build/compiled and compile the hot modules there (a minute and a
    half on 2 cores), unless a tree built from these sources is there and not `force`.
    Returns the tree; raises AccelError with the compiler's output on failure."""
    root = root or checkout_root()
    if root is None:
        raise AccelError("not a source checkout: nothing to compile")
    tree = tree_dir(root)
    tree.parent.mkdir(parents=True, exist_ok=True)
    # One build at a time (parallel test workers, make -j); a waiter reuses the result.
    with open(tree.with_name("compiled.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        dirs = source_dirs(root)
        digest = source_digest(dirs)
        if not force and _recorded_digest(tree) == digest:
            return tree
        return _build_locked(dirs, digest, tree, jobs=jobs, quiet=quiet)


def _build_locked(
    dirs: dict[str, Path], digest: str, tree: Path, *, jobs: int, quiet: bool
) -> Path:
    staging = tree.with_name(tree.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    for name, pkg_dir in dirs.items():
        shutil.copytree(pkg_dir, staging / name, ignore=shutil.ignore_patterns("__pycache__"))
    started = time.monotonic()
    if not quiet:
        print(f"compiling {len(HOT_MODULES)} modules with mypyc into {tree} ...", flush=True)
    proc = subprocess.run(
        [sys.executable, "-c", _SETUP, str(jobs), *HOT_MODULES],
        cwd=staging,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        log = tree.with_name("compiled.log")
        log.write_text(proc.stdout + proc.stderr, encoding="utf-8")
        raise AccelError(f"mypyc failed (exit {proc.returncode}); its output is in {log}")
    shutil.rmtree(staging / "build", ignore_errors=True)
    (staging / DIGEST_FILE).write_text(digest + "\n", encoding="utf-8")
    shutil.rmtree(tree, ignore_errors=True)
    staging.rename(tree)
    if not quiet:
        print(f"compiled in {time.monotonic() - started:.0f} s", flush=True)
    return tree


def compiled_env(tree: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """An environment whose Python imports the compiled tree first."""
    out = dict(os.environ if env is None else env)
    rest = out.get("PYTHONPATH")
    out["PYTHONPATH"] = str(tree) if not rest else f"{tree}{os.pathsep}{rest}"
    # Python 3.11+: `-m` and `-c` do not put the working directory first on sys.path, where
    # a checkout's refinement/ (the sources) would shadow the compiled tree.
    out["PYTHONSAFEPATH"] = "1"
    out[ACTIVE_ENV] = str(tree)
    return out


def reexec_compiled(argv: Sequence[str]) -> None:
    """Replace this process by `python -m kraft.cli argv` on the compiled tree, if there is a
    fresh one and this process does not use it yet; otherwise return and run the sources."""
    if os.environ.get(USE_ENV) == "0" or os.environ.get(ACTIVE_ENV):
        return
    tree = fresh_tree()
    if tree is None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    args = [sys.executable, "-m", "kraft.cli", *argv]
    os.execve(sys.executable, args, compiled_env(tree))


def why_sources() -> str | None:
    """Why this process runs the sources although a compiled tree was built here, or None
    (no tree, the user asked for the sources, or it does run compiled)."""
    if os.environ.get(USE_ENV) == "0" or running_compiled():
        return None
    root = checkout_root()
    if root is None or not (tree_dir(root) / DIGEST_FILE).exists():
        return None
    if os.environ.get(ACTIVE_ENV):
        return f"the re-executed process still imported the sources, not {tree_dir(root)}"
    return status()


def status() -> str:
    root = checkout_root()
    if root is None:
        return "installed copy: the sources run as they are"
    tree = tree_dir(root)
    if fresh_tree(root) is not None:
        return f"compiled tree {tree} is fresh: kraft simulate/campaign use it"
    if (tree / DIGEST_FILE).exists():
        return f"compiled tree {tree} is stale (sources changed): run `make setup` to rebuild"
    return f"no compiled tree at {tree}: run `make setup` (or `python -m refinement.accel build`)"


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m refinement.accel",
        description="Build or inspect the mypyc-compiled copy of the simulator.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="compile the hot modules into build/compiled")
    b.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel C compiles")
    b.add_argument("--if-stale", action="store_true", help="do nothing if the tree is fresh")
    sub.add_parser("status", help="say whether a fresh compiled tree exists")
    args = p.parse_args(argv)
    if args.command == "status":
        print(status())
        return 0
    if args.if_stale and fresh_tree() is not None:
        print(status())
        return 0
    try:
        build(jobs=args.jobs, force=not args.if_stale)
    except AccelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
