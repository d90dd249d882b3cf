"""Simulator runs shared by the checker tests: which checker each seed tripped first."""

from __future__ import annotations

from refinement.faults import PROFILES
from refinement.sim import SimConfig, simulate


def first_violations(profile: str, seeds: range) -> dict[int, str]:
    """Seed -> the name of the first violation of `profile`'s run (seeds with none left out)."""
    caught = {}
    for seed in seeds:
        r = simulate(SimConfig(seed=seed, profile=PROFILES[profile]))
        if r.violations:
            caught[seed] = r.violations[0].name
    return caught
