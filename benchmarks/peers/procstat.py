"""CPU time and resident memory of server processes, read from /proc (Linux).

`cpu_seconds` sums user + system time (utime + stime of /proc/PID/stat, in clock ticks) of the
given processes; the difference of two readings around a window is the CPU the servers spent
in it. `rss_bytes` sums VmRSS of /proc/PID/status, `anon_bytes` its anonymous part (RssAnon:
the heap, without the pages of mmapped files such as kraft's log segments, which the kernel
may drop at will). A process that has exited counts as 0.

`machine()` reads what the whole machine lost in a window, the limit beside each figure: CPU
time stolen by the hypervisor (/proc/stat) and time in which every runnable task waited on
I/O (/proc/pressure/io, "full"; absent on kernels without PSI).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def parse_stat_cpu_ticks(stat: str) -> int:
    """utime + stime (fields 14 and 15) of one /proc/PID/stat line. The command name (field 2)
    is in parentheses and may hold spaces, so fields are counted after its closing one."""
    rest = stat[stat.rindex(")") + 2 :].split()
    # rest[0] is field 3 (state): utime is field 14 -> rest[11], stime field 15 -> rest[12].
    return int(rest[11]) + int(rest[12])


def parse_status_kb_field(status: str, name: str) -> int:
    """A `Name:  N kB` line of /proc/PID/status, in bytes (0 when absent)."""
    for line in status.splitlines():
        if line.startswith(name + ":"):
            parts = line.split()
            return int(parts[1]) * 1024  # the kernel writes kB
    return 0


def parse_status_rss_bytes(status: str) -> int:
    return parse_status_kb_field(status, "VmRSS")


@dataclass(frozen=True, slots=True)
class Machine:
    """Cumulative machine counters: all CPU ticks, stolen ticks, full I/O stall (µs)."""

    total_ticks: int
    steal_ticks: int
    io_full_us: int | None  # None without PSI


def parse_proc_stat_cpu(stat: str) -> tuple[int, int]:
    """(all ticks, steal ticks) of the aggregate `cpu` line of /proc/stat: user nice system
    idle iowait irq softirq steal [guest guest_nice], guest time being inside user's."""
    for line in stat.splitlines():
        if line.startswith("cpu "):
            fields = [int(x) for x in line.split()[1:]]
            return sum(fields[:8]), (fields[7] if len(fields) > 7 else 0)
    return 0, 0


def parse_pressure_full_us(pressure: str) -> int | None:
    """`total=` of the `full` line of a /proc/pressure file (µs), None when there is none."""
    for line in pressure.splitlines():
        if line.startswith("full "):
            for part in line.split():
                if part.startswith("total="):
                    return int(part[len("total=") :])
    return None


def machine() -> Machine:
    total, steal = parse_proc_stat_cpu(_read("/proc/stat") or "")
    pressure = _read("/proc/pressure/io")
    return Machine(total, steal, parse_pressure_full_us(pressure) if pressure else None)


def steal_share(a: Machine, b: Machine) -> float:
    """The share of the machine's CPU time stolen between two readings (nan if none passed)."""
    ticks = b.total_ticks - a.total_ticks
    return (b.steal_ticks - a.steal_ticks) / ticks if ticks > 0 else float("nan")


def io_stall_share(a: Machine, b: Machine, seconds: float) -> float:
    """The share of `seconds` of wall time in which all runnable tasks waited on I/O."""
    if a.io_full_us is None or b.io_full_us is None or seconds <= 0:
        return float("nan")
    return (b.io_full_us - a.io_full_us) / 1e6 / seconds


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


def _status_sum(pids: Iterable[int], name: str) -> int:
    total = 0
    for pid in pids:
        text = _read(f"/proc/{pid}/status")
        if text:
            total += parse_status_kb_field(text, name)
    return total


def rss_bytes(pids: Iterable[int]) -> int:
    return _status_sum(pids, "VmRSS")


def anon_bytes(pids: Iterable[int]) -> int:
    return _status_sum(pids, "RssAnon")
