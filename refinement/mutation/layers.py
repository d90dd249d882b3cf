"""The model-based verification layers, run against whatever `kraft` is first on sys.path: in a
mutation campaign, a subprocess whose PYTHONPATH starts with the mutated copy
(refinement.mutation.execute). The test-suite layers (the core's unit tests, the scenarios)
are plain pytest runs and need nothing here.

    python -m refinement.mutation.layers sim --profiles mixed,crashes --seeds 3 --events 1500
    python -m refinement.mutation.layers hypothesis --examples 200 --steps 40
    python -m refinement.mutation.layers tlc --profiles lossy,mixed --traces 2 --events 300

Each prints one line of JSON, a `LayerOutcome`: killed or not, what killed it (an invariant
and the run that broke it, or the exception the core raised: a crash of the core counts as a
kill by the layer that saw it), and how much of the layer it took (runs, examples or traces;
the events of the killing run).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import traceback
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

# Set by the campaign: the directory the mutated `kraft` must come from.
KRAFT_ROOT_ENV = "KRAFT_MUTANT_IMPL"


@dataclass(frozen=True, slots=True)
class LayerOutcome:
    killed: bool
    kind: str | None = None  # "failed" (a check failed) or "crash" (the core raised)
    detail: str = ""
    runs: int = 0  # simulator runs, hypothesis examples or traces until the kill (or in all)
    events: int | None = None  # events of the killing run (TLC: the first unmatched event)
    profile: str | None = None
    seed: int | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def _crash(
    exc: BaseException, runs: int, profile: str | None = None, seed: int | None = None
) -> LayerOutcome:
    """The core (or what it fed) raised: a kill of kind "crash", named by the innermost frame
    in `kraft`."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    if frames:
        site = next((f for f in reversed(frames) if "/kraft/" in f.filename), frames[-1])
        where = f" at {Path(site.filename).name}:{site.lineno}"
    detail = f"{type(exc).__name__}: {exc}{where}"
    return LayerOutcome(True, "crash", detail[:500], runs, None, profile, seed)


def units(profiles: Sequence[str], seeds: int, first_seed: int) -> list[tuple[str, int]]:
    """The sweep's (profile, seed) runs, seed-major: every profile is tried early."""
    return [(p, s) for s in range(first_seed, first_seed + seeds) for p in profiles]


def run_sim(profiles: Sequence[str], seeds: int, first_seed: int, events: int) -> LayerOutcome:
    """The simulator sweep: every checker after every event, then the liveness phase. A
    profile may be a timing variant (refinement.sim_config.sim_variant: `NAME+linger`)."""
    from refinement.sim import SimConfig, simulate
    from refinement.sim_config import sim_variant

    runs = 0
    for profile, seed in units(profiles, seeds, first_seed):
        runs += 1
        faults, timing = sim_variant(profile)
        config = SimConfig(seed=seed, max_events=events, profile=faults, timing=timing)
        try:
            result = simulate(config)
        except Exception as exc:
            return _crash(exc, runs, profile=profile, seed=seed)
        if not result.ok:
            v = result.violations[0]
            # The simulator reports an exception out of a replica as ReplicaRaised.
            return LayerOutcome(
                True,
                "crash" if v.name == "ReplicaRaised" else "failed",
                f"{v.name}: {v.detail} [{config.replay_command()}]"[:500],
                runs,
                result.events,
                profile,
                seed,
            )
    return LayerOutcome(False, runs=runs)


def run_hypothesis(examples: int, steps: int) -> LayerOutcome:
    """The hypothesis machine (refinement.stateful.KraftMachine), then the differential
    machines of the pure helpers (refinement.differential), derandomized: the same examples
    every time, no shrinking (a kill is all that is asked)."""
    from hypothesis.stateful import run_state_machine_as_test

    from refinement.differential import derandomized, run_all
    from refinement.stateful import KraftMachine

    seen = [0]

    class Counted(KraftMachine):
        def __init__(self) -> None:
            super().__init__()
            seen[0] += 1

    try:
        run_state_machine_as_test(Counted, settings=derandomized(examples, steps))
        # The core's pure helpers against their reference models (refinement.differential).
        run_all(examples, steps)
    except AssertionError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "AssertionError"
        kind = "crash" if first.startswith("ReplicaRaised") else "failed"
        return LayerOutcome(True, kind, first[:500], seen[0])
    except Exception as exc:
        return _crash(exc, seen[0])
    return LayerOutcome(False, runs=seen[0])


def run_tlc(
    profiles: Sequence[str], traces: int, first_seed: int, events: int, timeout_s: float
) -> LayerOutcome:
    """TLC trace validation (TraceKRaft.tla) of the first `traces` runs of the sweep, each
    simulated for `events` fault-phase events. The simulator's checkers are off here: a
    checker's violation ends its run, which would cut the trace before TLC sees what the
    violation leads to (a wrongly granted pre-vote leaves the granter's state as it was, so
    TLC can reject it only where its answer is received, a few events later); the checkers
    are the sim layer's."""
    from refinement.faults import PROFILES
    from refinement.sim import SimConfig, simulate
    from refinement.traces.validate import validate_trace

    runs = 0
    with tempfile.TemporaryDirectory(prefix="kraft-mutant-tlc-") as tmp:
        for profile, seed in units(profiles, traces, first_seed)[:traces]:
            runs += 1
            config = SimConfig(
                seed=seed, max_events=events, profile=PROFILES[profile], check_invariants=False
            )
            path = Path(tmp) / f"{profile}-{seed}.ndjson"
            try:
                with open(path, "w", encoding="utf-8") as out:
                    simulate(config, trace=out)
            except Exception as exc:
                return _crash(exc, runs, profile=profile, seed=seed)
            res = validate_trace(path, voters=config.voter_ids, timeout_s=timeout_s)
            if not res.accepted:
                return LayerOutcome(
                    True,
                    "failed",
                    f"REJECTED by TLC at event {res.first_unmatched}: {res.event}"[:500],
                    runs,
                    res.first_unmatched,
                    profile,
                    seed,
                )
    return LayerOutcome(False, runs=runs)


def _check_origin() -> str | None:
    """Why this process does not run the mutated copy it should (None: it does)."""
    import os

    import kraft

    want = os.environ.get(KRAFT_ROOT_ENV)
    origin = str(Path(kraft.__file__ or "").resolve())
    if want and not origin.startswith(str(Path(want).resolve())):
        return f"kraft imported from {origin}, not from {want}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m refinement.mutation.layers")
    sub = p.add_subparsers(dest="layer", required=True)
    sim = sub.add_parser("sim")
    sim.add_argument("--profiles", required=True)
    sim.add_argument("--seeds", type=int, default=3)
    sim.add_argument("--first-seed", type=int, default=0)
    sim.add_argument("--events", type=int, default=1500)
    hyp = sub.add_parser("hypothesis")
    hyp.add_argument("--examples", type=int, default=200)
    hyp.add_argument("--steps", type=int, default=40)
    tlc = sub.add_parser("tlc")
    tlc.add_argument("--profiles", required=True)
    tlc.add_argument("--traces", type=int, default=2)
    tlc.add_argument("--first-seed", type=int, default=0)
    tlc.add_argument("--events", type=int, default=300)
    tlc.add_argument("--timeout", type=float, default=300.0)
    args = p.parse_args(argv)
    wrong = _check_origin()
    if wrong is not None:
        print(wrong, file=sys.stderr)
        return 2
    if args.layer == "sim":
        out = run_sim(args.profiles.split(","), args.seeds, args.first_seed, args.events)
    elif args.layer == "hypothesis":
        out = run_hypothesis(args.examples, args.steps)
    else:
        out = run_tlc(
            args.profiles.split(","), args.traces, args.first_seed, args.events, args.timeout
        )
    print(out.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
