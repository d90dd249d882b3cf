"""Running TLC as a subprocess: where the jar, java and the specs are, and one run of a spec
with a config, its output parsed (refinement.tlc.output)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from refinement.accel import checkout_root
from refinement.tlc.config import config_names
from refinement.tlc.output import ErrorKind, TlcError, TlcResult, parse_tlc_output

# The checkout, also when this module runs from the compiled tree (refinement.accel).
REPO_ROOT = checkout_root() or Path(__file__).resolve().parents[2]
SPEC_DIR = REPO_ROOT / "spec"


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
    properties = config_names(config.read_text(), ("PROPERTY", "PROPERTIES"))
    result = parse_tlc_output(
        output, properties=properties, wall_seconds=wall, module_dir=spec.parent
    )
    if result.error_kind is ErrorKind.OTHER and not result.counterexample:
        raise TlcError(f"TLC failed (exit {proc.returncode}) on {config.name}:\n{_tail(output)}")
    return result


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])
