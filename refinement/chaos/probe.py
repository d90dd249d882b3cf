"""A test-only fsync journal around `kraft start`: which bytes of which file a node fsynced.

    python -m refinement.chaos.probe JOURNAL start --config node.properties

runs `kraft start` in this process with `os.fsync` (and `os.fdatasync`) wrapped: before the
real call the wrapper reads the file's size; after it returns, it appends `<size> <path>` to
JOURNAL (one os.write on an O_APPEND descriptor: in the page cache at once, so it survives a
SIGKILL of the node, which is all the harness simulates). Every byte below `size` was written
before the fsync began, so it is durable once the line exists. The harness's
`crash-unflushed` fault then cuts a killed node's log segments no lower than the last
journalled size of each (`durable_sizes`): it may drop what was never fsynced, never what
was.

A kill between the fsync's return and the journal line under-reports durability for that one
fsync; that is still a crash the node must survive, because the node releases nothing that
depends on a flush (acknowledgements, Fetch requests and responses) until the flush returns
to the driver, which is after the journal line.

The node's code is not changed: the wrapper lives here, the node imports nothing of it.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["durable_sizes", "install", "main"]


def install(journal: Path) -> None:
    """Wrap os.fsync / os.fdatasync of this process to journal what each made durable."""
    jfd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    lock = threading.Lock()

    def wrap(real: Callable[[int], None]) -> Callable[[int], None]:
        def synced(fd: int) -> None:
            try:
                st = os.fstat(fd)
                size = st.st_size if stat.S_ISREG(st.st_mode) else None
            except OSError:
                size = None
            real(fd)
            if size is None:
                return
            try:
                path = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                return
            with lock:
                os.write(jfd, f"{size} {path}\n".encode())

        return synced

    # setattr: the wrappers take a descriptor number, which is all kraft passes.
    setattr(os, "fsync", wrap(os.fsync))  # noqa: B010
    setattr(os, "fdatasync", wrap(os.fdatasync))  # noqa: B010


def durable_sizes(journal: Path) -> dict[str, int]:
    """The last journalled size of each path (absolute, as /proc reported it)."""
    out: dict[str, int] = {}
    try:
        text = journal.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        size, sep, path = line.partition(" ")
        if sep and size.isdigit() and path:
            out[path] = int(size)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if args else 2
    install(Path(args[0]))
    from kraft.cli import main as kraft_main

    return kraft_main(args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
