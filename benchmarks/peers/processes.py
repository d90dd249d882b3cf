"""Server processes of a peer's cluster: started in their own session with output appended to
a log file, and stopped with SIGTERM, then SIGKILL after a shared deadline."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path


def spawn_logged(cmd: Sequence[str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start `cmd` in a new session (a SIGKILL of the benchmark's group spares it, and its own
    SIGKILL takes only it), its stdout and stderr appended to `log_path`."""
    out = open(log_path, "ab")  # noqa: SIM115 - the child inherits it
    try:
        return subprocess.Popen(
            list(cmd),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    finally:
        out.close()


def stop_all(procs: Iterable[subprocess.Popen[bytes]], timeout_s: float) -> None:
    """SIGTERM to every running process, then SIGKILL to those still up at the deadline."""
    procs = list(procs)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
