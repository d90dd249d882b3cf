"""CPU time and resident memory of server processes, read from /proc (Linux).

`cpu_seconds` sums user + system time (utime + stime of /proc/PID/stat, in clock ticks) of the
given processes; the difference of two readings around a window is the CPU the servers spent
in it. `rss_bytes` sums VmRSS of /proc/PID/status. A process that has exited counts as 0.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def parse_stat_cpu_ticks(stat: str) -> int:
    """utime + stime (fields 14 and 15) of one /proc/PID/stat line. The command name (field 2)
    is in parentheses and may hold spaces, so fields are counted after its closing one."""
    rest = stat[stat.rindex(")") + 2 :].split()
    # rest[0] is field 3 (state): utime is field 14 -> rest[11], stime field 15 -> rest[12].
    return int(rest[11]) + int(rest[12])


def parse_status_rss_bytes(status: str) -> int:
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            parts = line.split()
            return int(parts[1]) * 1024  # the kernel writes kB
    return 0


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def cpu_seconds(pids: Iterable[int]) -> float:
    ticks = 0
    for pid in pids:
        text = _read(f"/proc/{pid}/stat")
        if text:
            ticks += parse_stat_cpu_ticks(text)
    return ticks / _TICKS


def rss_bytes(pids: Iterable[int]) -> int:
    total = 0
    for pid in pids:
        text = _read(f"/proc/{pid}/status")
        if text:
            total += parse_status_rss_bytes(text)
    return total
