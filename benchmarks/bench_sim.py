"""Simulator throughput: `python -m benchmarks.bench_sim` prints simulated events per second.

The workload is one seed of each fault profile, 5,000 fault-phase events each, 3 voters, the
real replica core, every checker after every event (the way the tests and campaigns run it);
the median of 5 runs, per CPU-second of the measuring process (process_time: other load on
the machine does not skew it the way wall-clock time would).

Two builds of the same sources run the same workload, alternately, in this run:
- interpreted: the Python sources as they are (the baseline);
- compiled: the mypyc-compiled tree (`refinement.accel`), which `kraft simulate` and
  `kraft campaign` use while it is fresh. It runs in a child process (one process cannot
  import both builds of a module); the child times itself the same way.
A third figure is the interpreted run with the checkers off: what checking costs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from benchmarks.figure import Figure
from refinement.faults import PROFILES
from refinement.sim import SimConfig, simulate

RUNS = 5
EVENTS = 5000
TARGET = 50_000
WORKLOAD = ("none", "lossy", "partitions", "crashes", "shutdowns", "mixed")


def events_per_second(*, check: bool) -> float:
    """Simulated events per CPU-second over the whole workload, once."""
    events = 0
    start = time.process_time()
    for seed, profile in enumerate(WORKLOAD):
        config = SimConfig(
            seed=seed,
            profile=PROFILES[profile],
            max_events=EVENTS,
            check_liveness=False,
            check_invariants=check,
        )
        events += simulate(config).events
    return events / (time.process_time() - start)


def compiled_rate() -> tuple[float, str]:
    """One workload run on the compiled tree, in a child process: (events/s, how)."""
    from refinement import accel

    tree = accel.fresh_tree()
    if tree is None:
        return 0.0, accel.status()
    env = accel.compiled_env(tree)
    # The checkout (for `benchmarks`) after the tree, so its refinement/ does not shadow it.
    env["PYTHONPATH"] += f"{os.pathsep}{accel.checkout_root()}"
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_sim", "--worker"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    answer = json.loads(out)
    if not answer["compiled"]:
        return 0.0, "the child did not load the compiled modules"
    return float(answer["rate"]), "compiled with mypyc"


def figures() -> list[Figure]:
    interpreted: list[float] = []
    compiled: list[float] = []
    how = ""
    for _ in range(RUNS):  # alternate, so both builds see the same machine
        interpreted.append(events_per_second(check=True))
        rate, how = compiled_rate()
        compiled.append(rate)
    bare = statistics.median(events_per_second(check=False) for _ in range(RUNS))
    fast = statistics.median(compiled)
    slow = statistics.median(interpreted)
    figures = []
    if fast > 0:
        figures.append(
            Figure(
                name="simulated events/s, every checker after every event (mypyc-compiled)",
                value=fast,
                unit="events/s",
                target=f">= {TARGET:,}",
                met=fast >= TARGET,
                baseline_name="same sources interpreted",
                baseline_value=slow,
            )
        )
    else:
        print(f"compiled build not measured: {how}", file=sys.stderr)
    figures.append(
        Figure(
            name="simulated events/s, every checker after every event (interpreted)",
            value=slow,
            unit="events/s",
            target="(the reference build)",
            met=None,
            baseline_name="same runs, checkers off",
            baseline_value=bare,
        )
    )
    return figures


def _worker() -> None:
    from refinement import accel

    print(json.dumps({"rate": events_per_second(check=True), "compiled": accel.running_compiled()}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--worker", action="store_true", help="(internal) one timed run as JSON")
    if p.parse_args().worker:
        _worker()
        return
    for f in figures():
        print(f"{f.name}: {f.value:,.0f} {f.unit} (median of {RUNS}; target {f.target})")
        if f.baseline_value is not None:
            print(f"  {f.baseline_name}: {f.baseline_value:,.0f} {f.unit}")


if __name__ == "__main__":
    main()
