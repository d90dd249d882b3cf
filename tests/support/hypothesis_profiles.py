"""The hypothesis settings of every test, in one place (tests/conftest.py loads them).

- Profile "kraft" (the default): no deadline and no too-slow health check. Both are timing
  assertions, and the machine running the tests is shared: a round trip that takes 200 ms
  under load is not a bug. Examples stay random (each run explores new inputs); a failure
  prints its reproduction blob.
- Profile "kraft-derandomized" (`pytest --hypothesis-profile=kraft-derandomized`): the same,
  with the same examples on every run.
- `mutant_search`: the settings of a search that must find a planted bug (a mutant) to pass.
  Such a search is deterministic (derandomized, no example database) and stops at its first
  failure (report_multiple_bugs=False: hypothesis would otherwise keep looking for other bugs
  for up to 10 s of wall-clock time and report an exception group, so what it reports would
  depend on the machine's load).
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

PROFILE = "kraft"

settings.register_profile(
    PROFILE,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "kraft-derandomized", settings.get_profile(PROFILE), derandomize=True, database=None
)


def mutant_search(*, max_examples: int, shrink: bool, steps: int | None = None) -> settings:
    """A deterministic search for a planted bug; `steps`: stateful_step_count."""
    extra = {} if steps is None else {"stateful_step_count": steps}
    return settings(
        settings.get_profile(PROFILE),
        max_examples=max_examples,
        derandomize=True,
        database=None,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate, Phase.shrink] if shrink else [Phase.generate],
        **extra,
    )
